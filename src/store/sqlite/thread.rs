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

/// Sends a job's result once its batch is committed (`Ok`), or the commit's failure instead.
type Deliver = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

enum Job {
    /// Runs inside the group transaction, under a savepoint of its own; returns whether it
    /// succeeded (its savepoint is rolled back when not) and how to answer.
    Grouped(GroupedJob),
    /// Runs on its own, outside any transaction, and answers at once (pragmas).
    Alone(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// Most jobs committed together. Each is answered only after the commit, so a bigger group
/// delays the first of them; 256 small writes commit in about the time of one `fsync`.
const MAX_GROUP: usize = 256;

/// A handle to the connection's thread. The thread ends, closing the connection, when the
/// last handle is dropped.
#[derive(Debug)]
pub(super) struct ConnectionThread {
    jobs: mpsc::Sender<Job>,
    name: &'static str,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Job::Grouped(_) => "Job::Grouped",
            Job::Alone(_) => "Job::Alone",
        })
    }
}

impl ConnectionThread {
    /// `on_idle` runs whenever the queue has run dry after a job (the writer checkpoints
    /// then).
    ///
    /// Group commit: the thread takes every job already queued (up to [`MAX_GROUP`]), runs
    /// them in one transaction, each under its own savepoint (a job that fails rolls back
    /// alone), commits once, and only then answers each of them. Jobs that arrived together
    /// share one `fsync`; none is answered before its data is committed.
    pub(super) fn spawn(
        name: &'static str,
        connection: Connection,
        on_idle: Option<OnIdle>,
    ) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(format!("agent-mcp-{name}"))
            .spawn(move || {
                let mut connection = connection;
                let mut on_idle = on_idle;
                let mut next = queue.recv().ok();
                while let Some(job) = next {
                    let mut after = None;
                    match job {
                        Job::Alone(job) => {
                            // A panic in one job must not take the store down for every later
                            // call; its caller sees the thread's answer dropped.
                            let _ =
                                std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut connection)));
                        }
                        Job::Grouped(first) => {
                            let mut group = vec![first];
                            while group.len() < MAX_GROUP {
                                match queue.try_recv() {
                                    Ok(Job::Grouped(job)) => group.push(job),
                                    Ok(alone) => {
                                        after = Some(alone);
                                        break;
                                    }
                                    Err(_) => break,
                                }
                            }
                            run_group(&mut connection, group);
                        }
                    }
                    next = match after {
                        Some(job) => Some(job),
                        None => match queue.try_recv() {
                            Ok(job) => Some(job),
                            Err(mpsc::TryRecvError::Disconnected) => None,
                            Err(mpsc::TryRecvError::Empty) => {
                                if let Some(idle) = on_idle.as_mut() {
                                    idle(&connection);
                                }
                                queue.recv().ok()
                            }
                        },
                    };
                }
            })?;
        Ok(Self { jobs, name })
    }

    /// Runs `f` on the connection's thread, in a group commit with whatever else is queued,
    /// and waits for its result (given only once it is committed) without blocking the async
    /// executor.
    pub(super) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.run_committed(f, |_| ()).await
    }

    /// [`ConnectionThread::run`], and `on_commit` with the job's result once it is committed,
    /// on the connection's thread, before the answer is sent: the hooks of successive jobs run
    /// in commit order (the task cache relies on it).
    pub(super) async fn run_committed<T, F, C>(&self, f: F, on_commit: C) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
        C: FnOnce(&T) + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Grouped(Box::new(move |connection| {
                let result = f(connection);
                let ok = result.is_ok();
                // A job's own error wins over the group's: it says what went wrong.
                let deliver: Deliver = Box::new(move |committed| {
                    let answer = result.and_then(|value| committed.map(|()| value));
                    if let Ok(value) = &answer {
                        on_commit(value);
                    }
                    let _ = reply.send(answer);
                });
                (ok, deliver)
            })))
            .map_err(|_| self.stopped())?;
        answer.await.map_err(|_| self.stopped())?
    }

    /// Runs `f` on the connection's thread on its own, outside any transaction (for pragmas
    /// that a transaction does not allow).
    pub(super) async fn run_alone<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Alone(Box::new(move |connection| {
                let _ = reply.send(f(connection));
            })))
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

/// One group commit: `BEGIN IMMEDIATE`, each job under a savepoint, `COMMIT`, then the
/// answers. A job that fails is rolled back to its savepoint and answered with its own error.
/// If the group cannot begin, each job runs on its own (autocommit). If SQLite rolls back the
/// whole transaction (a full disk, an I/O error) or the commit fails, every job answered so
/// far in the group is told nothing of it was stored, and the rest run on their own.
fn run_group(connection: &mut Connection, group: Vec<GroupedJob>) {
    if !connection.is_autocommit() || connection.execute_batch("BEGIN IMMEDIATE").is_err() {
        run_alone(connection, group);
        return;
    }
    let mut answers = Vec::with_capacity(group.len());
    let mut jobs = group.into_iter();
    let mut broken: Option<String> = None;
    let mut leftover = None;
    for job in jobs.by_ref() {
        if let Err(e) = connection.execute_batch("SAVEPOINT job") {
            broken = Some(e.to_string());
            leftover = Some(job);
            break;
        }
        let ran = run(job, connection);
        if connection.is_autocommit() {
            // SQLite ended the whole transaction: this job answers with its own error, the
            // earlier ones with the group's.
            broken = Some("the write transaction was rolled back".to_owned());
            if let Some((_, deliver)) = ran {
                deliver(Ok(()));
            }
            break;
        }
        if !matches!(&ran, Some((true, _))) {
            let _ = connection.execute_batch("ROLLBACK TO job");
        }
        let _ = connection.execute_batch("RELEASE job");
        if let Some((_, deliver)) = ran {
            answers.push(deliver);
        }
    }
    let failure = match broken {
        Some(why) => {
            if !connection.is_autocommit() {
                let _ = connection.execute_batch("ROLLBACK");
            }
            Some(why)
        }
        None => connection.execute_batch("COMMIT").err().map(|e| {
            if !connection.is_autocommit() {
                let _ = connection.execute_batch("ROLLBACK");
            }
            e.to_string()
        }),
    };
    for deliver in answers {
        deliver(match &failure {
            None => Ok(()),
            Some(why) => Err(StoreError::Unavailable(format!(
                "the write could not be committed ({why}); nothing was stored. Check the disk \
                 the task store is on, then try again"
            ))),
        });
    }
    // What a broken group did not reach runs on its own, now that its transaction is over.
    run_alone(connection, leftover.into_iter().chain(jobs).collect());
}

/// What the writer does whenever its queue runs dry (checkpoint, sweep unused image files).
pub(super) type OnIdle = Box<dyn FnMut(&Connection) + Send>;

type GroupedJob = Box<dyn FnOnce(&mut Connection) -> (bool, Deliver) + Send>;

/// Runs a grouped job; `None` when it panicked (its caller is told the thread stopped).
fn run(job: GroupedJob, connection: &mut Connection) -> Option<(bool, Deliver)> {
    std::panic::catch_unwind(AssertUnwindSafe(|| job(connection))).ok()
}

/// Each job in autocommit mode, answered at once.
fn run_alone(connection: &mut Connection, jobs: Vec<GroupedJob>) {
    for job in jobs {
        if let Some((_, deliver)) = run(job, connection) {
            deliver(Ok(()));
        }
    }
}
