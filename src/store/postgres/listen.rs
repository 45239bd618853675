//! The LISTEN side of the announcements: one connection of its own (a pooled one would be
//! recycled under it), reconnected after a loss with [`SharedEvent::Resync`] so listeners
//! re-read what they may have missed. A connection that stops answering is a loss too: it is
//! pinged every [`PING`], and connecting is bounded by `store.timeout`, so a silent partition
//! (nothing closed, nothing answered) is noticed and the connection made anew once it heals.
//! A lost connection is a store failure for [`StoreHealth`]: a database that shuts down ends
//! it at once, before any call would notice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};
use uuid::Uuid;

use super::{CHANNEL, describe_text};
use crate::store::{SharedEvent, StoreHealth};

/// Wait between reconnection attempts.
const RECONNECT: Duration = Duration::from_secs(1);
/// How often an idle LISTEN connection is checked.
const PING: Duration = Duration::from_secs(5);

/// Listens until the task is aborted (when the store is dropped).
pub(super) async fn run(
    config: tokio_postgres::Config,
    shown: Arc<str>,
    events: broadcast::Sender<SharedEvent>,
    timeout: Duration,
    health: StoreHealth,
) {
    let mut first = true;
    // A database that stays away is logged once, not every second.
    let mut lost = false;
    loop {
        let ended = listen_once(&config, &events, first, timeout, &health).await;
        health.failed(match &ended {
            Ok(()) => format!("PostgreSQL at {shown} closed the LISTEN connection"),
            Err(Lost::Postgres(e)) => describe_text(&shown, e),
            Err(Lost::Silent(after)) => format!(
                "PostgreSQL at {shown} did not answer within {} (the LISTEN connection); check \
                 that it runs and that the network to it is up (store.timeout bounds each call)",
                humantime::format_duration(*after)
            ),
        });
        match ended {
            Ok(()) => tracing::warn!(url = %shown, "PostgreSQL closed the LISTEN connection"),
            Err(e) if !lost => tracing::warn!(url = %shown, error = %e, "LISTEN connection lost"),
            Err(e) => tracing::debug!(url = %shown, error = %e, "LISTEN connection still lost"),
        }
        first = false;
        lost = true;
        tokio::time::sleep(RECONNECT).await;
    }
}

/// Why the LISTEN connection ended.
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error(transparent)]
    Postgres(#[from] tokio_postgres::Error),
    #[error("no answer within {0:?}")]
    Silent(Duration),
}

async fn listen_once(
    config: &tokio_postgres::Config,
    events: &broadcast::Sender<SharedEvent>,
    first: bool,
    timeout: Duration,
    health: &StoreHealth,
) -> Result<(), Lost> {
    let sent = Instant::now();
    let (client, mut conn) = tokio::time::timeout(timeout, config.connect(NoTls))
        .await
        .map_err(|_| Lost::Silent(timeout))??;
    let forward = events.clone();
    // The connection delivers notifications only while polled: this task polls it.
    let mut driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if let Some(event) = parse(n.payload()) {
                        // No receiver yet is not an error: nobody waits.
                        let _ = forward.send(event);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    let outcome = async {
        tokio::time::timeout(timeout, client.batch_execute(&format!("LISTEN {CHANNEL}")))
            .await
            .map_err(|_| Lost::Silent(timeout))??;
        health.answered(sent);
        tracing::debug!("listening for other instances' announcements");
        if !first {
            let _ = events.send(SharedEvent::Resync);
        }
        loop {
            tokio::select! {
                ended = &mut driver => {
                    return match ended {
                        Ok(result) => result.map_err(Lost::from),
                        Err(_) => Ok(()),
                    };
                }
                () = tokio::time::sleep(PING) => {
                    let sent = Instant::now();
                    tokio::time::timeout(timeout, client.simple_query(""))
                        .await
                        .map_err(|_| Lost::Silent(timeout))??;
                    health.answered(sent);
                }
            }
        }
    }
    .await;
    driver.abort();
    outcome
}

/// `queued`, `freed`, `cancel:<uuid>`, `changed:<uuid>`; anything else is ignored.
pub(super) fn parse(payload: &str) -> Option<SharedEvent> {
    match payload {
        "queued" => return Some(SharedEvent::Queued),
        "freed" => return Some(SharedEvent::Freed),
        _ => {}
    }
    let (kind, id) = payload.split_once(':')?;
    let id = Uuid::parse_str(id).ok()?;
    match kind {
        "cancel" => Some(SharedEvent::Cancel(id)),
        "changed" => Some(SharedEvent::Changed(id)),
        _ => None,
    }
}
