//! The LISTEN side of the announcements: one connection of its own (a pooled one would be
//! recycled under it), reconnected after a loss with [`SharedEvent::Resync`] so listeners
//! re-read what they may have missed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};
use uuid::Uuid;

use super::CHANNEL;
use crate::store::SharedEvent;

/// Wait between reconnection attempts.
const RECONNECT: Duration = Duration::from_secs(1);

/// Listens until the task is aborted (when the store is dropped).
pub(super) async fn run(
    config: tokio_postgres::Config,
    shown: Arc<str>,
    events: broadcast::Sender<SharedEvent>,
) {
    let mut first = true;
    loop {
        match listen_once(&config, &events, first).await {
            Ok(()) => tracing::warn!(url = %shown, "PostgreSQL closed the LISTEN connection"),
            Err(e) => tracing::warn!(url = %shown, error = %e, "LISTEN connection lost"),
        }
        first = false;
        tokio::time::sleep(RECONNECT).await;
    }
}

async fn listen_once(
    config: &tokio_postgres::Config,
    events: &broadcast::Sender<SharedEvent>,
    first: bool,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut conn) = config.connect(NoTls).await?;
    let forward = events.clone();
    // The connection delivers notifications only while polled: this task polls it.
    let driver = tokio::spawn(async move {
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
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    if !first {
        let _ = events.send(SharedEvent::Resync);
    }
    let outcome = driver.await;
    drop(client);
    match outcome {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
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
