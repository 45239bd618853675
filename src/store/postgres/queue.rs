//! The shared queue ([`SharedQueue`]) in PostgreSQL: claims, cancel requests, the queue's
//! length and positions, and the shared rate-limit buckets.

use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use tokio::sync::broadcast;
use uuid::Uuid;

use super::rows::{TASK_READ_COLUMNS, bad_row, notify, release_images, task_from};
use super::{CLAIM_LOCK, PostgresStore};
use crate::store::lease::Lease;
use crate::store::sqlite::queries::to_ns;
use crate::store::{Claim, INTERRUPTED_INSTANCE_LOST, SharedEvent, SharedQueue, StoreError};
use crate::task::Task;

/// The most a rate-limit lookup waits: past it the request is counted against this instance's
/// own budget instead, so a lost database costs each request this long at most.
const BUCKET_DEADLINE: Duration = Duration::from_secs(1);

#[async_trait]
impl SharedQueue for PostgresStore {
    async fn claim_next(&self) -> Result<Claim, StoreError> {
        // The lease runs from the claim's transaction start, which is after this.
        let sent = Instant::now();
        let (claim, attempt) = self
            .bounded("claim the next task", async {
                let now = to_ns(SystemTime::now());
                let mut client = self.client().await?;
                let tx = client.transaction().await.map_err(|e| self.err(e))?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
                    .await
                    .map_err(|e| self.err(e))?;
                // Active tasks whose lease lapsed (their instance died or lost the database)
                // end failed: they may have had side effects, so they are never run again.
                let rows = tx
                    .query(
                        "UPDATE tasks t SET state = 'failed', result = $1, current_task = '', \
                             updated_at_ns = $2, finished_at_ns = $2, lease_owner = NULL, \
                             lease_until = NULL, cancel_requested = false \
                         FROM (SELECT id, lease_owner, lease_until FROM tasks \
                               WHERE state IN ('planning', 'running') \
                                 AND (lease_until IS NULL OR lease_until < now()) \
                               FOR UPDATE) old \
                         WHERE t.id = old.id \
                         RETURNING t.id, old.lease_owner, \
                             COALESCE(EXTRACT(EPOCH FROM (now() - old.lease_until)), 0)::float8",
                        &[&INTERRUPTED_INSTANCE_LOST, &now],
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                let mut lapsed: Vec<String> = Vec::with_capacity(rows.len());
                for row in &rows {
                    let id: String = row.get(0);
                    let holder: Option<&str> = row.get(1);
                    let late: f64 = row.get(2);
                    // Who held it and how long ago its lease ended: what tells a dead or cut
                    // instance from one that was only slow to renew.
                    tracing::warn!(
                        task_id = %id,
                        holder = holder.unwrap_or("nobody"),
                        lapsed_secs_ago = late,
                        "the task's lease lapsed; it ends failed (interrupted)"
                    );
                    notify(&tx, &format!("changed:{id}"))
                        .await
                        .map_err(|e| self.err(e))?;
                    lapsed.push(id);
                }
                release_images(&tx, &lapsed)
                    .await
                    .map_err(|e| self.err(e))?;
                // Claimed but never started: nothing of it ran, so it goes back where it was.
                tx.execute(
                    "UPDATE tasks SET lease_owner = NULL, lease_until = NULL \
                     WHERE state = 'queued' AND lease_owner IS NOT NULL AND lease_until < now()",
                    &[],
                )
                .await
                .map_err(|e| self.err(e))?;
                let active = tx
                    .query_opt(
                        "SELECT COALESCE(EXTRACT(EPOCH FROM (lease_until - now())), 0)::float8 \
                         FROM tasks WHERE lease_owner IS NOT NULL \
                            OR state IN ('planning', 'running') \
                         LIMIT 1",
                        &[],
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                let claimed = if let Some(row) = active {
                    let left: f64 = row.get(0);
                    let left = Duration::try_from_secs_f64(left.max(0.0)).unwrap_or(Duration::ZERO);
                    (Claim::Busy(left), None)
                } else {
                    let row = tx
                        .query_opt(
                            "UPDATE tasks SET lease_owner = $1, attempt = attempt + 1, \
                                 lease_until = now() + make_interval(secs => $2) \
                             WHERE seq = (SELECT seq FROM tasks WHERE state = 'queued' \
                                          AND lease_owner IS NULL ORDER BY seq LIMIT 1) \
                             RETURNING id, attempt",
                            &[&self.instance, &self.lease_secs()],
                        )
                        .await
                        .map_err(|e| self.err(e))?;
                    match row {
                        Some(row) => {
                            let id = Uuid::parse_str(row.get::<_, &str>(0))
                                .map_err(|_| bad_row("an id that is not a UUID"))?;
                            (Claim::Claimed(id), Some(row.get::<_, i32>(1)))
                        }
                        None => (Claim::Empty, None),
                    }
                };
                tx.commit().await.map_err(|e| self.err(e))?;
                Ok(claimed)
            })
            .await?;
        // Held only once committed: a claim whose commit was not confirmed is never renewed,
        // so if it did commit it lapses and goes back to the queue (nothing of it ran).
        if let (Claim::Claimed(id), Some(attempt)) = (claim, attempt) {
            self.hold(Lease::new(
                id,
                attempt,
                self.timing,
                sent,
                self.renew_now.clone(),
            ));
        }
        Ok(claim)
    }

    fn lease(&self, id: Uuid) -> Option<Lease> {
        self.held(id)
    }

    fn release(&self, id: Uuid) {
        self.claims().remove(&id);
    }

    async fn request_cancel(
        &self,
        id: Uuid,
        result_if_queued: &str,
    ) -> Result<Option<Task>, StoreError> {
        self.bounded("cancel the task", async {
            let now = to_ns(SystemTime::now());
            let key = id.to_string();
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            // Queued and unclaimed: cancelled here and now.
            let cancelled = tx
                .query_opt(
                    &format!(
                        "UPDATE tasks SET state = 'cancelled', result = $2, current_task = '', \
                             updated_at_ns = $3, finished_at_ns = $3 \
                         WHERE id = $1 AND state = 'queued' AND lease_owner IS NULL \
                         RETURNING {TASK_READ_COLUMNS}"
                    ),
                    &[&key, &result_if_queued, &now],
                )
                .await
                .map_err(|e| self.err(e))?;
            let task = match cancelled {
                Some(row) => {
                    release_images(&tx, std::slice::from_ref(&key))
                        .await
                        .map_err(|e| self.err(e))?;
                    notify(&tx, &format!("changed:{key}"))
                        .await
                        .map_err(|e| self.err(e))?;
                    Some(task_from(&row)?)
                }
                None => {
                    // Claimed or running somewhere: mark it, and tell the instance that holds
                    // it (its heartbeat reads the mark if the notification is missed).
                    let marked = tx
                        .query_opt(
                            &format!(
                                "UPDATE tasks SET cancel_requested = true \
                                 WHERE id = $1 AND state IN ('queued', 'planning', 'running') \
                                 RETURNING {TASK_READ_COLUMNS}"
                            ),
                            &[&key],
                        )
                        .await
                        .map_err(|e| self.err(e))?;
                    match marked {
                        Some(row) => {
                            notify(&tx, &format!("cancel:{key}"))
                                .await
                                .map_err(|e| self.err(e))?;
                            Some(task_from(&row)?)
                        }
                        None => tx
                            .query_opt(
                                &format!("SELECT {TASK_READ_COLUMNS} FROM tasks WHERE id = $1"),
                                &[&key],
                            )
                            .await
                            .map_err(|e| self.err(e))?
                            .as_ref()
                            .map(task_from)
                            .transpose()?,
                    }
                }
            };
            tx.commit().await.map_err(|e| self.err(e))?;
            Ok(task)
        })
        .await
    }

    async fn queued_count(&self) -> Result<usize, StoreError> {
        self.bounded("count the queued tasks", async {
            let n: i64 = self
                .value("SELECT count(*) FROM tasks WHERE state = 'queued'", &[])
                .await?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn queued_counts(&self, owner: Option<&str>) -> Result<(usize, usize), StoreError> {
        self.bounded("count the queued tasks", async {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT count(*), count(*) FILTER (WHERE owner IS NOT DISTINCT FROM $1) \
                     FROM tasks WHERE state = 'queued'",
                    &[&owner],
                )
                .await
                .map_err(|e| self.err(e))?;
            let count = |n: i64| usize::try_from(n).unwrap_or(0);
            Ok((count(row.get(0)), count(row.get(1))))
        })
        .await
    }

    async fn queue_position(&self, id: Uuid) -> Result<Option<usize>, StoreError> {
        self.bounded("read the task's queue position", async {
            let n: i64 = self
                .cached_value(
                    "SELECT count(*) FROM tasks WHERE state = 'queued' \
                     AND seq <= (SELECT seq FROM tasks WHERE id = $1 AND state = 'queued')",
                    &[&id.to_string()],
                )
                .await?;
            Ok(usize::try_from(n).ok().filter(|n| *n > 0))
        })
        .await
    }

    fn events(&self) -> broadcast::Receiver<SharedEvent> {
        self.events.subscribe()
    }

    async fn take_cell(
        &self,
        key: &str,
        per_minute: u32,
        burst: u32,
    ) -> Result<Option<Duration>, StoreError> {
        let emission = 60.0 / f64::from(per_minute.max(1));
        let capacity = emission * f64::from(burst.max(1));
        let deadline = self.timeout.min(BUCKET_DEADLINE);
        self.bounded_for(deadline, "take from the rate-limit bucket", async {
            let wait: f64 = self
                .cached_value(
                    "SELECT agent_mcp_take($1, $2, $3)",
                    &[&key, &emission, &capacity],
                )
                .await?;
            Ok((wait > 0.0).then(|| Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX)))
        })
        .await
    }
}
