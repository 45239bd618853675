//! The health probe: asks the database every [`PROBE_EVERY`] whether it answers and takes
//! writes (`SELECT pg_is_in_recovery()`), and tells [`StoreHealth`], so an outage shows
//! within that long even when no request and no lease renewal talks to the database.
//!
//! It runs on the heartbeat's thread and runtime (a busy request runtime cannot hold it up)
//! on a connection of its own, bounded by `store.timeout` (connecting and each question); a
//! connection that failed or stalled is dropped and made anew at the next round.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls, Statement};

use super::{describe_text, standby_message};
use crate::store::{PROBE_EVERY, StoreHealth};

const ASK: &str = "SELECT pg_is_in_recovery()";

/// What the probe needs.
pub(super) struct Setup {
    /// With `connect_timeout` and the server-side deadlines set.
    pub config: tokio_postgres::Config,
    pub shown: Arc<str>,
    /// `store.timeout`: the deadline of connecting and of each question.
    pub timeout: Duration,
    pub health: StoreHealth,
}

/// The probe's connection, with its question prepared on it.
struct Connection {
    client: Client,
    ask: Statement,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Probes every [`PROBE_EVERY`] until the thread ends.
pub(super) async fn run(setup: &Setup) {
    let mut connection: Option<Connection> = None;
    let mut tick = tokio::time::interval(PROBE_EVERY);
    // After a slow round, the next one starts a full interval later, not at once.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let sent = Instant::now();
        match tokio::time::timeout(setup.timeout, ask(setup, &mut connection)).await {
            Ok(Ok(false)) => setup.health.answered(sent),
            Ok(Ok(true)) => setup.health.failed(standby_message(&setup.shown)),
            Ok(Err(why)) => {
                connection = None;
                setup.health.failed(why);
            }
            Err(_) => {
                connection = None;
                setup.health.failed(format!(
                    "PostgreSQL at {} did not answer within {} (the health probe); check that \
                     it runs and that the network to it is up (store.timeout bounds each call)",
                    setup.shown,
                    humantime::format_duration(setup.timeout)
                ));
            }
        }
    }
}

/// Whether the database is a standby, on the probe's connection (made if needed).
async fn ask(setup: &Setup, connection: &mut Option<Connection>) -> Result<bool, String> {
    let c = match connection {
        Some(c) if !c.client.is_closed() => c,
        _ => connection.insert(connect(setup).await?),
    };
    let row = c
        .client
        .query_one(&c.ask, &[])
        .await
        .map_err(|e| describe_text(&setup.shown, &e))?;
    row.try_get(0).map_err(|e| describe_text(&setup.shown, &e))
}

async fn connect(setup: &Setup) -> Result<Connection, String> {
    let (client, connection) = setup
        .config
        .connect(NoTls)
        .await
        .map_err(|e| describe_text(&setup.shown, &e))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let ask = client
        .prepare(ASK)
        .await
        .map_err(|e| describe_text(&setup.shown, &e))?;
    Ok(Connection {
        client,
        ask,
        driver,
    })
}
