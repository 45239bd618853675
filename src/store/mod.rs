//! Where tasks and sessions live.
//!
//! [`TaskStore`] is the boundary. [`SqliteStore`] is the default: one SQLite file in WAL mode,
//! so a restart loses nothing that was accepted. [`MemoryStore`] keeps everything in process
//! (tests, embedding).
//!
//! Image bytes are not part of the hot path: [`TaskStore::task`] may leave `Task::images` empty
//! (the SQLite store always does), and the runner asks [`TaskStore::task_images`] when it starts
//! a task.
//!
//! ```
//! # async fn run() -> Result<(), agent_mcp::store::StoreError> {
//! use agent_mcp::task::{Session, Task, TaskState};
//! use agent_mcp::config::StoreConfig;
//! use agent_mcp::store::{SqliteStore, TaskStore};
//!
//! let dir = std::env::temp_dir().join(format!("agent-mcp-doc-{}", std::process::id()));
//! let store = SqliteStore::open(&StoreConfig::sqlite_at(dir.join("tasks.db"))).await?;
//! let session = Session::new(None);
//! store.create_session(&session).await?;
//! let task = Task::new(session.id, None, "Fix the build".into(), None);
//! store.insert_task(&task).await?;
//! assert_eq!(store.tasks_in_state(TaskState::Queued).await?.len(), 1);
//! # let _ = std::fs::remove_dir_all(dir);
//! # Ok(()) }
//! ```

mod changes;
mod health;
pub mod lease;
mod memory;
mod postgres;
mod recovery;
mod sqlite;

use std::time::SystemTime;

use async_trait::async_trait;
use uuid::Uuid;

pub use changes::{ChangedFile, FileState, MAX_TEXT_PER_FILE, MAX_TEXT_PER_TASK, TaskChanges};
pub use health::{PROBE_EVERY, StoreHealth};
pub use lease::{Lease, LeaseLoss, LeaseTiming};
pub use memory::MemoryStore;
pub use postgres::PostgresStore;
pub use recovery::{INTERRUPTED_BY_RESTART, INTERRUPTED_INSTANCE_LOST};
pub(crate) use recovery::{fail_interrupted, interrupted_result, purge_expired_periodically};
pub use sqlite::SqliteStore;

use crate::task::input::Answer;
use crate::task::{Session, Task, TaskImage, TaskState, Turn};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No session has this id.
    #[error("no session {0}")]
    UnknownSession(Uuid),
    /// No task has this id.
    #[error("no task {0}")]
    UnknownTask(Uuid),
    /// The store cannot be reached or refused the operation; the text says why.
    #[error("task store unavailable: {0}")]
    Unavailable(String),
    /// A write to a task this process no longer holds: its lease lapsed and another instance
    /// ended it (shared stores only). The write changed nothing.
    #[error(
        "task {0} is no longer this instance's: its lease lapsed and another instance ended it; \
         the write was refused"
    )]
    Fenced(Uuid),
    /// An image that is not valid standard base64 (the image layer normally rejects it first).
    #[error("images[{index}]: data_base64 is not valid standard base64 ({reason})")]
    InvalidImage {
        /// The image's place in `images`.
        index: usize,
        /// The decoder's complaint.
        reason: String,
    },
}

/// Persistence of tasks, sessions and session history.
#[async_trait]
pub trait TaskStore: Send + Sync + std::fmt::Debug + 'static {
    /// Saves a new session.
    async fn create_session(&self, session: &Session) -> Result<(), StoreError>;
    /// The session with this id, if any.
    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError>;
    /// The session's turns, oldest first.
    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError>;
    /// Appends to a session's history. Not fenced: the turns a running task adds go with its
    /// outcome ([`TaskStore::finish_task`]).
    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError>;
    /// Stores a new task with its images; it is durable (for durable stores) when this
    /// returns. On error nothing of the task is stored. A session the task names that is not
    /// stored is stored with it, empty, owned by the task's owner: that is how `agent_run`
    /// starts a new session (one write), and a session a purge removed after it was looked up
    /// comes back.
    async fn insert_task(&self, task: &Task) -> Result<(), StoreError>;
    /// [`TaskStore::insert_task`], taking the task: a store that hands it to another thread
    /// (SQLite) or keeps it (memory) then moves its images instead of copying them (up to the
    /// image limit, 20 MiB by default, per `agent_run`). The default copies.
    async fn insert_task_owned(&self, task: Task) -> Result<(), StoreError> {
        self.insert_task(&task).await
    }
    /// The task without the cost of its images: `images` may be empty even when the task has
    /// some (the SQLite store never loads them here). Use [`TaskStore::task_images`].
    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError>;
    /// The images of an unfinished task, in the order they were sent. Empty once the task is
    /// terminal (its images are released then).
    async fn task_images(&self, id: Uuid) -> Result<Vec<TaskImage>, StoreError>;
    /// Fails if the store cannot take writes now (read-only file, full disk, lost connection).
    /// For readiness probes; cheap.
    async fn check_writable(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// What this process last saw of the store, for a store that can fail apart from the
    /// process (a database server): fed by its calls, and by a probe of its own every
    /// [`PROBE_EVERY`]. `None` (the default) for a store that has no outage of its own to
    /// watch; readiness then asks [`TaskStore::check_writable`].
    fn health(&self) -> Option<&StoreHealth> {
        None
    }
    /// Writes what changes over a task's life: its state, step counts, current step, tokens,
    /// result and `updated_at` (`images` are ignored). What is fixed when the task is stored
    /// (session, owner, request, temperature, `created_at`) must be as it was stored: a store
    /// need not rewrite it (SQLite does not). A terminal state releases the task's images.
    /// A shared store writes a task this process holds only while its claim is this process's
    /// ([`StoreError::Fenced`] otherwise).
    async fn update_task(&self, task: &Task) -> Result<(), StoreError>;
    /// The outcome of a task: [`TaskStore::update_task`] with `turns` appended to the task's
    /// session, in one transaction, so a session never holds an answer its task does not
    /// (nor the other way round), and both are fenced alike. A retry of an outcome whose first
    /// try was stored (its answer lost with the connection) succeeds without storing it twice.
    async fn finish_task(&self, task: &Task, turns: &[Turn]) -> Result<(), StoreError>;
    /// Records the answer to input request `key` of task `id` unless that key is answered
    /// already: the first answer wins, a key is answered once. Returns whether this answer
    /// was recorded. Kept apart from the task's row, which only its runner writes, so that an
    /// answer sent to any instance reaches the one that runs the task.
    async fn answer_input(&self, id: Uuid, key: &str, answer: &Answer) -> Result<bool, StoreError>;
    /// The answer recorded for input request `key` of task `id`, if any.
    async fn input_answer(&self, id: Uuid, key: &str) -> Result<Option<Answer>, StoreError>;
    /// Tasks in `state`, in creation order, without their images.
    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError>;
    /// Keeps what task `id` changed in the workspace ([`TaskChanges`]), replacing any record
    /// it had (not undone). Deleted with the task.
    async fn save_changes(&self, id: Uuid, changes: &TaskChanges) -> Result<(), StoreError>;
    /// What task `id` changed, with whether it was undone; `None` when nothing was recorded.
    async fn task_changes(&self, id: Uuid) -> Result<Option<TaskChanges>, StoreError>;
    /// Marks task `id`'s changes undone; `true` only for the call that marked them (a second
    /// undo, or one racing it, gets `false`).
    async fn mark_undone(&self, id: Uuid) -> Result<bool, StoreError>;
    /// The newest `limit` tasks of `owner` (`None`: the anonymous caller's), newest first,
    /// without their images.
    async fn recent_tasks(
        &self,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Task>, StoreError>;
    /// Deletes terminal tasks that finished before `finished_before`, and the sessions (with
    /// their turns) that have no task left then, with their recorded changes. Returns how
    /// many tasks.
    async fn purge_finished(&self, finished_before: SystemTime) -> Result<u64, StoreError>;
    /// The coordination a store shared by several processes offers; `None` (the default) for
    /// a store one process owns, whose queue lives in that process.
    fn shared(&self) -> Option<&dyn SharedQueue> {
        None
    }
}

/// The queue of a store that several agent-mcp processes share: the database decides which
/// task runs (one at a time in the whole application, oldest accepted first), who runs it (a
/// claim with a lease the store's heartbeat renews, judged by the database clock: see
/// [`Lease`]) and carries cancel requests and wake-ups between the processes.
#[async_trait]
pub trait SharedQueue: Send + Sync + std::fmt::Debug {
    /// Ends tasks whose lease lapsed (`failed`, [`INTERRUPTED_INSTANCE_LOST`]), then claims the
    /// oldest queued task for this process if no task is active anywhere. From then on the
    /// store renews the claim's lease until [`SharedQueue::release`]; a cancel request it reads
    /// while renewing is announced as [`SharedEvent::Cancel`].
    async fn claim_next(&self) -> Result<Claim, StoreError>;
    /// The lease of a task this process holds: what the runner asks before each call, and
    /// what stops it when the claim is lost.
    fn lease(&self, id: Uuid) -> Option<Lease>;
    /// Forgets this process's claim on `id` after its terminal state is written (or the claim
    /// was lost).
    fn release(&self, id: Uuid);
    /// Cancels `id`: a queued task that nobody claimed ends `cancelled` at once with
    /// `result_if_queued`; an active one is marked and its instance told. Returns the task as
    /// it is after the request, `None` if unknown.
    async fn request_cancel(
        &self,
        id: Uuid,
        result_if_queued: &str,
    ) -> Result<Option<Task>, StoreError>;
    /// How many tasks are queued in the whole application.
    async fn queued_count(&self) -> Result<usize, StoreError>;
    /// Tasks queued in the whole application, and of those the ones of `owner` (`None`:
    /// anonymous), read together: an `agent_run` checks both caps with one round trip (and
    /// one deadline when the database does not answer).
    async fn queued_counts(&self, owner: Option<&str>) -> Result<(usize, usize), StoreError>;
    /// 1-based position of a queued task in the shared queue.
    async fn queue_position(&self, id: Uuid) -> Result<Option<usize>, StoreError>;
    /// What other processes announce (new work, cancel requests, changed tasks).
    fn events(&self) -> tokio::sync::broadcast::Receiver<SharedEvent>;
    /// Takes one cell from the shared rate-limit bucket `key` (GCRA: `per_minute` sustained,
    /// `burst` at once, on the database clock): `None` when taken, else how long to wait.
    async fn take_cell(
        &self,
        key: &str,
        per_minute: u32,
        burst: u32,
    ) -> Result<Option<std::time::Duration>, StoreError>;
}

/// What [`SharedQueue::claim_next`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This process now holds the task.
    Claimed(Uuid),
    /// A task is active (here or elsewhere); its lease ends in at most this long.
    Busy(std::time::Duration),
    /// Nothing is queued.
    Empty,
}

/// An announcement from another process sharing the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedEvent {
    /// A task was queued: an idle instance may claim it.
    Queued,
    /// The active task ended: the next one may be claimed.
    Freed,
    /// Someone asked to cancel this task.
    Cancel(Uuid),
    /// This task changed (state, progress, result).
    Changed(Uuid),
    /// The notification channel was lost and is back: announcements may have been missed.
    Resync,
}

/// Checks every store must pass, run by each store's tests (memory, SQLite, PostgreSQL).
#[cfg(test)]
pub(crate) mod conformance {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    use super::{StoreError, TaskStore};
    use crate::task::{Session, Task, TaskImage, TaskState, TokenUsage, Turn, TurnRole};

    /// Every check, in turn, on one store.
    pub(crate) async fn all(store: &dyn TaskStore) {
        every_task_field_round_trips(store).await;
        sessions_keep_their_turns_in_order(store).await;
        tasks_in_a_state_come_in_acceptance_order(store).await;
        an_input_request_is_answered_once(store).await;
        images_stay_until_the_task_is_terminal(store).await;
        sessions_go_with_their_last_task(store).await;
        an_outcome_comes_with_its_turns(store).await;
        changes_are_kept_undone_once_and_purged(store).await;
        recent_tasks_are_the_owners_newest_first(store).await;
    }

    /// A task's changes round-trip, are undone once, and go with the task.
    pub(crate) async fn changes_are_kept_undone_once_and_purged(store: &dyn TaskStore) {
        use super::{ChangedFile, FileState, TaskChanges};
        let mut task = Task::new(uuid::Uuid::new_v4(), None, "change".into(), None);
        store.insert_task(&task).await.unwrap();
        assert!(store.task_changes(task.id).await.unwrap().is_none());
        let changes = TaskChanges::bounded(vec![
            ChangedFile {
                path: "b.bin".into(),
                before: FileState::Absent,
                after: FileState::of_bytes(Some(&[0, 159, 146, 150])),
            },
            ChangedFile {
                path: "a.txt".into(),
                before: FileState::of_bytes(Some("x = 1\n".as_bytes())),
                after: FileState::Unrecorded,
            },
        ]);
        store.save_changes(task.id, &changes).await.unwrap();
        let got = store.task_changes(task.id).await.unwrap().expect("changes");
        assert_eq!(got, changes);
        assert_eq!(got.files[0].path, "a.txt");
        assert!(store.mark_undone(task.id).await.unwrap());
        assert!(!store.mark_undone(task.id).await.unwrap());
        assert!(store.task_changes(task.id).await.unwrap().unwrap().undone);
        // Long finished: the purge takes the task and its changes.
        task.transition(TaskState::Completed);
        task.updated_at = UNIX_EPOCH + Duration::from_secs(1);
        store.update_task(&task).await.unwrap();
        store
            .purge_finished(UNIX_EPOCH + Duration::from_secs(2))
            .await
            .unwrap();
        assert!(store.task(task.id).await.unwrap().is_none());
        assert!(store.task_changes(task.id).await.unwrap().is_none());
        assert!(!store.mark_undone(task.id).await.unwrap());
    }

    /// An owner's tasks, newest first, at most the limit asked for; nobody else's.
    pub(crate) async fn recent_tasks_are_the_owners_newest_first(store: &dyn TaskStore) {
        let owner = format!("owner-{}", uuid::Uuid::new_v4());
        let mut ids = Vec::new();
        for i in 0..3 {
            let task = Task::new(
                uuid::Uuid::new_v4(),
                Some(owner.clone()),
                format!("{i}"),
                None,
            );
            store.insert_task(&task).await.unwrap();
            ids.push(task.id);
        }
        let other = Task::new(
            uuid::Uuid::new_v4(),
            Some("someone else".into()),
            "x".into(),
            None,
        );
        store.insert_task(&other).await.unwrap();
        let got: Vec<uuid::Uuid> = store
            .recent_tasks(Some(&owner), 2)
            .await
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(got, [ids[2], ids[1]]);
        // The anonymous caller's are theirs alone too.
        let anonymous = Task::new(uuid::Uuid::new_v4(), None, "anonymous".into(), None);
        store.insert_task(&anonymous).await.unwrap();
        let got = store.recent_tasks(None, 1).await.unwrap();
        assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), [anonymous.id]);
    }

    fn without_images(task: &Task) -> Task {
        Task {
            images: Vec::new(),
            ..task.clone()
        }
    }

    /// A queued task of `session` with every optional field set (but images), its times to
    /// the nanosecond.
    pub(crate) fn new_task(session: uuid::Uuid) -> Task {
        let mut t = Task::new(
            session,
            Some("alice".into()),
            "Fix the build ✓".into(),
            Some(0.25),
        );
        t.created_at = UNIX_EPOCH + Duration::new(1_786_000_000, 123_456_789);
        t.updated_at = t.created_at;
        t
    }

    /// `task` part-way through: running, two of five steps done, tokens counted, a partial
    /// result, updated later to the nanosecond.
    pub(crate) fn part_done(task: &mut Task) {
        task.state = TaskState::Running;
        task.steps_done = 2;
        task.steps_total = 5;
        task.current_task = "compile: run_command".into();
        task.tokens = TokenUsage {
            input: 1536,
            output: 284,
        };
        task.critical_path_tokens = 999;
        task.result = "partial\nresult".into();
        task.updated_at = UNIX_EPOCH + Duration::new(1_786_000_100, 987_654_321);
    }

    /// Purging drops the tasks finished before the cut-off, and only those: not a task still
    /// queued however old, nor one finished since.
    pub(crate) async fn purge_keeps_unfinished_and_recent_tasks(store: &dyn TaskStore) {
        let hour = Duration::from_secs(3600);
        let now = SystemTime::now();
        let mut old = Task::new(uuid::Uuid::new_v4(), None, "old".into(), None);
        let mut recent = Task::new(uuid::Uuid::new_v4(), None, "recent".into(), None);
        let mut old_queued = Task::new(uuid::Uuid::new_v4(), None, "queued".into(), None);
        old_queued.created_at = now - 48 * hour;
        old_queued.updated_at = now - 48 * hour;
        for t in [&old, &recent, &old_queued] {
            store.insert_task(t).await.unwrap();
        }
        old.fail("x");
        old.updated_at = now - 2 * hour;
        store.update_task(&old).await.unwrap();
        recent.transition(TaskState::Completed);
        store.update_task(&recent).await.unwrap();

        assert_eq!(store.purge_finished(now - 3 * hour).await.unwrap(), 0);
        assert_eq!(store.purge_finished(now - hour).await.unwrap(), 1);
        assert!(store.task(old.id).await.unwrap().is_none());
        assert!(store.task(recent.id).await.unwrap().is_some());
        assert!(store.task(old_queued.id).await.unwrap().is_some());
    }

    /// What is written is what is read, to the nanosecond; unknown ids say so.
    pub(crate) async fn every_task_field_round_trips(store: &dyn TaskStore) {
        let session = Session::new(Some("alice".into()));
        store.create_session(&session).await.unwrap();
        let got = store.session(session.id).await.unwrap().expect("session");
        assert_eq!(got.owner.as_deref(), Some("alice"));
        let mut t = new_task(session.id);
        // The caller's trace context, stored with the task for whichever instance runs it.
        t.trace = Some(crate::telemetry::context::TraceCarrier {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: Some("rojo=00f067aa0ba902b7".into()),
            baggage: None,
        });
        store.insert_task(&t).await.unwrap();
        assert_eq!(
            store.task(t.id).await.unwrap().map(|t| without_images(&t)),
            Some(t.clone())
        );
        part_done(&mut t);
        t.input.answer_path = Some(crate::task::input::AnswerPath::TasksElicitation);
        t.input.pending.push(crate::task::input::InputRequest {
            key: "approval-2".into(),
            tool: "edit_file".into(),
            summary: "src/lib.rs".into(),
            detail: "--- a/src/lib.rs
+++ b/src/lib.rs
-a ✓
+b"
            .into(),
        });
        store.update_task(&t).await.unwrap();
        assert_eq!(
            store.task(t.id).await.unwrap().map(|t| without_images(&t)),
            Some(t.clone())
        );
        let unknown = uuid::Uuid::new_v4();
        assert!(store.task(unknown).await.unwrap().is_none());
        assert!(store.session(unknown).await.unwrap().is_none());
        let mut ghost = t.clone();
        ghost.id = unknown;
        assert!(matches!(
            store.update_task(&ghost).await,
            Err(StoreError::UnknownTask(id)) if id == unknown
        ));
        assert!(matches!(
            store.task_images(unknown).await,
            Err(StoreError::UnknownTask(_))
        ));
    }

    /// The first answer to a key is kept; a second one, another key or another task's are
    /// their own.
    pub(crate) async fn an_input_request_is_answered_once(store: &dyn TaskStore) {
        use crate::task::input::{Action, Answer};
        let t = Task::new(uuid::Uuid::new_v4(), Some("alice".into()), "x".into(), None);
        store.insert_task(&t).await.unwrap();
        let accept = Answer {
            action: Action::Accept,
            by: Some("alice".into()),
            at: UNIX_EPOCH + Duration::new(1_786_000_000, 5_000_000),
        };
        let decline = Answer {
            action: Action::Decline,
            ..accept.clone()
        };
        // (key, answer, what the key held before, whether the answer is kept)
        for (step, (key, answer, before, kept)) in [
            ("approval-1", &accept, None, true),
            ("approval-1", &decline, Some(&accept), false),
            ("approval-2", &decline, None, true),
        ]
        .into_iter()
        .enumerate()
        {
            let held = store.input_answer(t.id, key).await.unwrap();
            assert_eq!(held.as_ref(), before, "step {step}: {key} before");
            let taken = store.answer_input(t.id, key, answer).await.unwrap();
            assert_eq!(taken, kept, "step {step}: {key} kept");
            let held = store.input_answer(t.id, key).await.unwrap();
            assert_eq!(
                held.as_ref(),
                before.or(Some(answer)),
                "step {step}: {key} after"
            );
        }
        let unknown = uuid::Uuid::new_v4();
        assert!(matches!(
            store.answer_input(unknown, "approval-1", &accept).await,
            Err(StoreError::UnknownTask(id)) if id == unknown
        ));
    }

    pub(crate) async fn sessions_keep_their_turns_in_order(store: &dyn TaskStore) {
        let session = Session::new(None);
        store.create_session(&session).await.unwrap();
        assert!(store.session_turns(session.id).await.unwrap().is_empty());
        let turns: Vec<Turn> = (0..5)
            .map(|i| Turn {
                role: if i % 2 == 0 {
                    TurnRole::User
                } else {
                    TurnRole::Assistant
                },
                content: format!("turn {i}"),
            })
            .collect();
        store.append_turns(session.id, &turns[..2]).await.unwrap();
        store.append_turns(session.id, &turns[2..]).await.unwrap();
        assert_eq!(store.session_turns(session.id).await.unwrap(), turns);
        let unknown = uuid::Uuid::new_v4();
        assert!(matches!(
            store.append_turns(unknown, &turns).await,
            Err(StoreError::UnknownSession(_))
        ));
        assert!(matches!(
            store.session_turns(unknown).await,
            Err(StoreError::UnknownSession(_))
        ));
    }

    pub(crate) async fn tasks_in_a_state_come_in_acceptance_order(store: &dyn TaskStore) {
        let session = Session::new(None);
        store.create_session(&session).await.unwrap();
        let queued_ids = async || -> Vec<uuid::Uuid> {
            let queued = store.tasks_in_state(TaskState::Queued).await.unwrap();
            queued.iter().map(|t| t.id).collect()
        };
        let before = queued_ids().await;
        let mut ids = Vec::new();
        for _ in 0..20 {
            let t = Task::new(session.id, None, "r".into(), None);
            store.insert_task(&t).await.unwrap();
            ids.push(t.id);
        }
        let mut queued = queued_ids().await;
        queued.retain(|id| !before.contains(id));
        assert_eq!(queued, ids);
    }

    /// Images come back in order while the task is unfinished, and are gone once it is
    /// terminal; the same picture shared by two tasks survives the first one's end. The second
    /// task is stored through `insert_task_owned`, which must keep the same images.
    pub(crate) async fn images_stay_until_the_task_is_terminal(store: &dyn TaskStore) {
        let session = Session::new(None);
        store.create_session(&session).await.unwrap();
        let png = |bytes: &[u8]| TaskImage::new("image/png", STANDARD.encode(bytes));
        let mut a = Task::new(session.id, None, "a".into(), None);
        a.images = vec![png(b"one"), png(b"two"), png(b"one")];
        let mut b = Task::new(session.id, None, "b".into(), None);
        b.images = vec![png(b"one")];
        store.insert_task(&a).await.unwrap();
        store.insert_task_owned(b.clone()).await.unwrap();
        let data = |images: Vec<TaskImage>| -> Vec<String> {
            images
                .into_iter()
                .map(|i| i.data_base64.to_string())
                .collect()
        };
        let want: Vec<String> = a.images.iter().map(|i| i.data_base64.to_string()).collect();
        assert_eq!(data(store.task_images(a.id).await.unwrap()), want);
        let mut done = without_images(&a);
        done.fail("boom");
        store.update_task(&done).await.unwrap();
        assert!(store.task_images(a.id).await.unwrap().is_empty());
        assert_eq!(
            data(store.task_images(b.id).await.unwrap()),
            vec![STANDARD.encode(b"one")]
        );
    }

    /// `finish_task` writes the outcome and the session's new turns together; for an unknown
    /// task it writes neither.
    pub(crate) async fn an_outcome_comes_with_its_turns(store: &dyn TaskStore) {
        let session = Session::new(None);
        store.create_session(&session).await.unwrap();
        let turns = vec![
            Turn {
                role: TurnRole::User,
                content: "What is 2 + 2?".into(),
            },
            Turn {
                role: TurnRole::Assistant,
                content: "4".into(),
            },
        ];
        let mut t = Task::new(session.id, None, "What is 2 + 2?".into(), None);
        store.insert_task(&t).await.unwrap();
        t.transition(TaskState::Completed);
        t.result = "4".into();
        store.finish_task(&t, &turns).await.unwrap();
        assert_eq!(
            store.task(t.id).await.unwrap().map(|t| without_images(&t)),
            Some(t.clone())
        );
        assert_eq!(store.session_turns(session.id).await.unwrap(), turns);
        let mut ghost = t.clone();
        ghost.id = uuid::Uuid::new_v4();
        assert!(matches!(
            store.finish_task(&ghost, &turns).await,
            Err(StoreError::UnknownTask(_))
        ));
        assert_eq!(store.session_turns(session.id).await.unwrap(), turns);
    }

    /// A session goes (with its turns) once its last task is purged, not before; a task
    /// accepted for a session purged meanwhile brings the session back, empty.
    pub(crate) async fn sessions_go_with_their_last_task(store: &dyn TaskStore) {
        let hour = Duration::from_secs(3600);
        let now = SystemTime::now();
        let turn = Turn {
            role: TurnRole::User,
            content: "hello".into(),
        };
        let (lone, shared, fresh) = (Session::new(None), Session::new(None), Session::new(None));
        for s in [&lone, &shared, &fresh] {
            store.create_session(s).await.unwrap();
            store
                .append_turns(s.id, std::slice::from_ref(&turn))
                .await
                .unwrap();
        }
        let finished = |session: &Session, at: SystemTime| {
            let mut t = Task::new(session.id, None, "x".into(), None);
            t.state = TaskState::Completed;
            t.updated_at = at;
            t
        };
        let old_lone = finished(&lone, now - 2 * hour);
        let old_shared = finished(&shared, now - 2 * hour);
        let recent_shared = finished(&shared, now);
        let recent_fresh = finished(&fresh, now);
        for t in [&old_lone, &old_shared, &recent_shared, &recent_fresh] {
            store.insert_task(t).await.unwrap();
            store.update_task(t).await.unwrap();
        }
        assert_eq!(store.purge_finished(now - hour).await.unwrap(), 2);
        assert!(store.session(lone.id).await.unwrap().is_none());
        assert!(store.session_turns(lone.id).await.is_err());
        assert_eq!(store.session_turns(shared.id).await.unwrap().len(), 1);
        assert_eq!(store.session_turns(fresh.id).await.unwrap().len(), 1);

        // agent_run found `lone` before the purge, and stores its task after it.
        let late = Task::new(lone.id, Some("alice".into()), "late".into(), None);
        store.insert_task(&late).await.unwrap();
        let back = store.session(lone.id).await.unwrap().expect("session back");
        assert_eq!(back.owner.as_deref(), Some("alice"));
        assert!(store.session_turns(lone.id).await.unwrap().is_empty());
        assert!(store.task(late.id).await.unwrap().is_some());
    }
}
