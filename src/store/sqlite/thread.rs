//! One SQLite connection owned by one OS thread, fed through a channel.
//!
//! Why a dedicated thread and not `spawn_blocking` with a pool: SQLite has one writer at a
//! time, so a pool of writers would only trade a queue for `SQLITE_BUSY` retries; one thread
//! per connection keeps its prepared-statement cache warm, needs no pool crate, and never
//! occupies the runtime's blocking pool (which the rest of the process shares) during a slow
//! `fsync`. The store runs two: a writer, and a reader that WAL lets proceed during a commit.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::store::StoreError;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A handle to the connection's thread. The thread ends, closing the connection, when the
/// last handle is dropped.
#[derive(Debug)]
pub(super) struct ConnectionThread {
    jobs: mpsc::Sender<Job>,
    name: &'static str,
}

impl ConnectionThread {
    /// `on_idle` runs whenever the queue has run dry after a job (the writer checkpoints
    /// then).
    pub(super) fn spawn(
        name: &'static str,
        connection: Connection,
        on_idle: Option<fn(&Connection)>,
    ) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(format!("agent-mcp-{name}"))
            .spawn(move || {
                let mut connection = connection;
                let mut next = queue.recv().ok();
                while let Some(job) = next {
                    // A panic in one job must not take the store down for every later call. An
                    // open transaction rolls back when its guard unwinds.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut connection)));
                    next = match queue.try_recv() {
                        Ok(job) => Some(job),
                        Err(mpsc::TryRecvError::Disconnected) => None,
                        Err(mpsc::TryRecvError::Empty) => {
                            if let Some(idle) = on_idle {
                                idle(&connection);
                            }
                            queue.recv().ok()
                        }
                    };
                }
            })?;
        Ok(Self { jobs, name })
    }

    /// Runs `f` on the connection's thread and waits for its result without blocking the
    /// async executor.
    pub(super) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Box::new(move |connection| {
                let _ = reply.send(f(connection));
            }))
            .map_err(|_| self.stopped())?;
        answer.await.map_err(|_| self.stopped())?
    }

    fn stopped(&self) -> StoreError {
        StoreError::Unavailable(format!(
            "the SQLite {} thread has stopped; restart agent-mcp",
            self.name
        ))
    }
}
