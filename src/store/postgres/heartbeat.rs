//! The heartbeat: renews the leases this process holds, on a thread and a connection of its
//! own, and gives a lease up when no renewal was confirmed in time ([`crate::store::lease`]).
//!
//! Neither a busy runtime nor a full pool can hold it up: it runs on its own single-threaded
//! runtime, on its own connection, with a deadline on every step (connect, renew). A renewal
//! also reads the task's cancel mark, the backstop of a lost cancel notification: a request seen
//! there is announced as [`SharedEvent::Cancel`], as a notification would be.
//!
//! The thread also runs the store's health probe (`probe.rs`), on a connection of its own, for
//! the same reason: a starved runtime must not keep an outage from showing. Each renewal tells
//! [`StoreHealth`] whether the database answered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, broadcast};
use tokio_postgres::{Client, NoTls, Statement};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::probe;
use crate::store::lease::{Lease, LeaseLoss, LeaseTiming};
use crate::store::{SharedEvent, StoreHealth};

/// The leases this process holds, by task.
pub(super) type Claims = Arc<Mutex<HashMap<Uuid, Lease>>>;

/// A renewal lengthens the lease only while it runs (`lease_until > now()`): a lease that
/// lapsed stays lapsed, even before another instance noticed.
const RENEW: &str = "UPDATE tasks SET lease_until = now() + make_interval(secs => $3) \
     WHERE id = $1 AND attempt = $2 AND lease_owner = $4 AND lease_until > now() \
     RETURNING cancel_requested";

/// What the heartbeat thread needs.
pub(super) struct Setup {
    pub config: tokio_postgres::Config,
    pub shown: Arc<str>,
    pub instance: String,
    pub timing: LeaseTiming,
    pub claims: Claims,
    pub events: broadcast::Sender<SharedEvent>,
    /// Asks for a renewal round now (a runner found its lease stale).
    pub wake: Arc<Notify>,
    /// Ends the thread (the store is dropped).
    pub stop: CancellationToken,
    /// Told whether each renewal was answered.
    pub health: StoreHealth,
    /// The health probe run beside the renewals.
    pub probe: probe::Setup,
}

/// Starts the heartbeat thread.
pub(super) fn spawn(setup: Setup) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("agent-mcp-heartbeat".into())
        .spawn(move || {
            let stop = setup.stop.clone();
            runtime.block_on(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = run(setup) => {}
                }
            });
        })?;
    Ok(())
}

fn held(claims: &Claims) -> Vec<Lease> {
    // Every critical section is one map operation, so a poisoned lock holds a consistent map.
    let claims = claims.lock().unwrap_or_else(|e| e.into_inner());
    claims.values().cloned().collect()
}

async fn run(setup: Setup) {
    tokio::join!(
        watchdog(&setup),
        renew_loop(&setup),
        probe::run(&setup.probe)
    );
}

/// Gives up each lease the moment its stop deadline passes without a confirmed renewal,
/// independently of how long a renewal round is taking.
async fn watchdog(setup: &Setup) {
    loop {
        let now = Instant::now();
        let mut next = now + setup.timing.renew_every;
        for lease in held(&setup.claims) {
            match lease.check(now) {
                Some(loss) => report_loss(&lease, loss),
                None => next = next.min(lease.stop_at()),
            }
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

fn report_loss(lease: &Lease, loss: LeaseLoss) {
    // `check` keeps reporting a lost lease until the runner releases it: log it once.
    if lease.first_loss_report() {
        tracing::warn!(task_id = %lease.task(), reason = %loss, "lease lost; the task's work is stopped");
    }
}

/// One connection of the heartbeat's own, with the statement prepared on it.
struct Connection {
    client: Client,
    renew: Statement,
    _driver: Driver,
}

/// The task driving a connection; aborted when dropped, so a stalled connection does not
/// linger after it is given up.
struct Driver(tokio::task::JoinHandle<()>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn connect(setup: &Setup) -> Result<Connection, String> {
    let deadline = setup.timing.fresh_for;
    let started = Instant::now();
    let (client, connection) = tokio::time::timeout(deadline, setup.config.connect(NoTls))
        .await
        .map_err(|_| format!("no connection within {deadline:?}"))?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let driver = Driver(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let left = deadline.saturating_sub(started.elapsed());
    let renew = tokio::time::timeout(left, client.prepare(RENEW))
        .await
        .map_err(|_| format!("no connection within {deadline:?}"))?
        .map_err(|e| format!("cannot prepare the renewal: {e}"))?;
    Ok(Connection {
        client,
        renew,
        _driver: driver,
    })
}

/// Renews every held lease each [`LeaseTiming::renew_every`], or at once when asked.
async fn renew_loop(setup: &Setup) {
    let mut connection: Option<Connection> = None;
    // Renewal failures are logged once per outage, not every round.
    let mut failing = false;
    loop {
        tokio::select! {
            () = setup.wake.notified() => {}
            () = tokio::time::sleep(setup.timing.renew_every) => {}
        }
        for lease in held(&setup.claims) {
            if lease.check(Instant::now()).is_some() {
                continue;
            }
            let outcome = renew(setup, &mut connection, &lease).await;
            match outcome {
                Ok(()) => {
                    if failing {
                        tracing::info!(task_id = %lease.task(), "the task's lease is renewed again");
                    }
                    failing = false;
                }
                Err(e) => {
                    setup.health.failed(format!(
                        "PostgreSQL at {}: the lease heartbeat cannot renew task {}'s lease ({e})",
                        setup.shown,
                        lease.task()
                    ));
                    if !failing {
                        tracing::warn!(
                            task_id = %lease.task(),
                            url = %setup.shown,
                            error = %e,
                            "cannot renew the task's lease; its work stops if this lasts {:.1} s",
                            setup.timing.stop_after.as_secs_f64()
                        );
                    }
                    failing = true;
                    // A connection that failed or stalled may hold anything: start afresh.
                    connection = None;
                }
            }
        }
    }
}

async fn renew(
    setup: &Setup,
    connection: &mut Option<Connection>,
    lease: &Lease,
) -> Result<(), String> {
    let c = match connection {
        Some(c) if !c.client.is_closed() => c,
        _ => connection.insert(connect(setup).await?),
    };
    let sent = Instant::now();
    // A slow renewal is still good (the lease counts from when it was sent), so it may take
    // up to half a lease, but never past the moment the lease would be given up anyway.
    let deadline = setup
        .timing
        .fresh_for
        .min(lease.stop_at().saturating_duration_since(sent))
        .max(Duration::from_millis(1));
    let lease_secs = setup.timing.lease.as_secs_f64();
    let id = lease.task().to_string();
    let attempt = lease.attempt();
    let row = tokio::time::timeout(
        deadline,
        c.client
            .query_opt(&c.renew, &[&id, &attempt, &lease_secs, &setup.instance]),
    )
    .await
    .map_err(|_| format!("no answer within {deadline:?}"))?
    .map_err(|e| e.to_string())?;
    setup.health.answered(sent);
    match row {
        Some(row) => {
            lease.renewed(sent);
            if row.get::<_, bool>(0) && lease.first_cancel_request() {
                // No receiver is not an error: nobody runs tasks here any more.
                let _ = setup.events.send(SharedEvent::Cancel(lease.task()));
            }
        }
        None => {
            if lease.lose(LeaseLoss::TakenOver) {
                report_loss(lease, LeaseLoss::TakenOver);
            }
        }
    }
    Ok(())
}
