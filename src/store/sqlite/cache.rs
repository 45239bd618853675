//! The tasks this process read or wrote lately, kept in memory and written through, so that
//! `agent_status` (polled once a second by every client following a task) answers without a
//! round trip to the reader thread.
//!
//! Why it cannot go stale: the store's lock file makes this process the only writer of the
//! database, and every write to a task reaches the cache from the writer thread *after* its
//! commit and in commit order (`ConnectionThread::run_committed`). A read that missed fills
//! the cache only if no task write was committed between its look-up and its fill (the
//! `epoch` check), so a slow read can never put back a value older than a committed one.
//!
//! Bounded twice: at most [`MAX_TASKS`] tasks and [`MAX_BYTES`] of their texts, the least
//! recently used going first. Images are never cached (the store never returns them from
//! [`crate::store::TaskStore::task`]).
//!
//! Ids the database does not have are remembered too (at most [`MAX_ABSENT`], apart from the
//! tasks so that asking for random ids cannot push a task out): a client polling an id that
//! is unknown here (another instance's, a purged task's, a typo) cost a reader-thread round trip
//! per poll, ~40 % more of the server's work than a known task's (benches/README.md, issue 54).
//! The same two rules keep them true: the one insert path reaches the cache after its commit
//! and forgets the id there, and a miss is remembered only if no task write committed since
//! its look-up.

use std::sync::Mutex;

use hashlink::LruCache;
use uuid::Uuid;

use crate::task::Task;

/// Most tasks kept.
pub(super) const MAX_TASKS: usize = 4096;
/// Most bytes of task text (request, result, current step, owner) kept.
pub(super) const MAX_BYTES: usize = 16 << 20;
/// Most ids kept as not in the database.
pub(super) const MAX_ABSENT: usize = 4096;

#[derive(Debug)]
pub(super) struct TaskCache {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    tasks: LruCache<Uuid, Task>,
    bytes: usize,
    /// Ids a read found no task for, with no task write committed between its look-up and
    /// its answer.
    absent: LruCache<Uuid, ()>,
    /// Task writes committed so far; a fill from a read started at an older epoch is dropped.
    epoch: u64,
}

/// What a task costs the cache: its texts and its fixed part.
fn weight(task: &Task) -> usize {
    std::mem::size_of::<Task>()
        + task.request.len()
        + task.result.len()
        + task.current_task.len()
        + task.owner.as_ref().map_or(0, String::len)
}

impl Default for TaskCache {
    fn default() -> Self {
        TaskCache {
            inner: Mutex::new(Inner {
                tasks: LruCache::new_unbounded(),
                bytes: 0,
                absent: LruCache::new(MAX_ABSENT),
                epoch: 0,
            }),
        }
    }
}

impl TaskCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The critical sections below cannot panic half-way through a change that matters:
        // a poisoned cache is still a consistent one.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached task (`Ok(None)`: the database has none of that id), or, when the cache
    /// does not know, the epoch to pass to [`TaskCache::fill`] or [`TaskCache::fill_absent`].
    pub(super) fn get(&self, id: Uuid) -> Result<Option<Task>, u64> {
        let mut inner = self.lock();
        if let Some(task) = inner.tasks.get(&id) {
            return Ok(Some(task.clone()));
        }
        if inner.absent.get(&id).is_some() {
            return Ok(None);
        }
        Err(inner.epoch)
    }

    /// Remembers that a read found no task `id`, unless a task write was committed since
    /// `epoch` (it may have been that task's insert).
    pub(super) fn fill_absent(&self, id: Uuid, epoch: u64) {
        let mut inner = self.lock();
        if inner.epoch == epoch && !inner.tasks.contains_key(&id) {
            inner.absent.insert(id, ());
        }
    }

    /// Caches what a read found, unless a task write was committed since `epoch`.
    pub(super) fn fill(&self, task: &Task, epoch: u64) {
        let mut inner = self.lock();
        if inner.epoch == epoch && !inner.tasks.contains_key(&task.id) {
            inner.insert(task.clone());
        }
    }

    /// A committed write of `task` (without images). Called on the writer thread, in commit
    /// order.
    pub(super) fn committed(&self, task: Task) {
        let mut inner = self.lock();
        inner.epoch += 1;
        inner.absent.remove(&task.id);
        inner.insert(task);
    }

    /// A committed purge: forgets every terminal task (the purge deleted some of them; which
    /// ones is the database's to say, and re-reading a finished task is cheap).
    pub(super) fn purged(&self) {
        let mut inner = self.lock();
        inner.epoch += 1;
        let gone: Vec<Uuid> = inner
            .tasks
            .iter()
            .filter(|(_, t)| t.state.is_terminal())
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(task) = inner.tasks.remove(&id) {
                inner.bytes -= weight(&task);
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.tasks.len(), inner.bytes)
    }
}

impl Inner {
    fn insert(&mut self, task: Task) {
        let w = weight(&task);
        if w > MAX_BYTES / 16 {
            // One huge result would push out everything else; read it from the database.
            if let Some(old) = self.tasks.remove(&task.id) {
                self.bytes -= weight(&old);
            }
            return;
        }
        if let Some(old) = self.tasks.insert(task.id, task) {
            self.bytes -= weight(&old);
        }
        self.bytes += w;
        while self.tasks.len() > MAX_TASKS || self.bytes > MAX_BYTES {
            match self.tasks.remove_lru() {
                Some((_, old)) => self.bytes -= weight(&old),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskState;

    fn task(result_len: usize) -> Task {
        let mut t = Task::new(Uuid::new_v4(), None, "r".into(), None);
        t.result = "x".repeat(result_len);
        t
    }

    #[test]
    fn a_fill_from_before_a_committed_write_is_dropped() {
        let cache = TaskCache::default();
        let mut t = task(0);
        let epoch = cache.get(t.id).unwrap_err();
        // The read saw the queued task; meanwhile the task finishes, and a purge forgets it.
        t.state = TaskState::Completed;
        cache.committed(t.clone());
        cache.purged();
        let mut stale = t.clone();
        stale.state = TaskState::Queued;
        cache.fill(&stale, epoch);
        assert!(cache.get(t.id).is_err(), "a stale read must not be cached");
        // A read that started after the write is cached.
        let epoch = cache.get(t.id).unwrap_err();
        cache.fill(&t, epoch);
        assert_eq!(
            cache.get(t.id).unwrap().unwrap().state,
            TaskState::Completed
        );
    }

    #[test]
    fn committed_writes_replace_and_purges_forget_finished_tasks() {
        let cache = TaskCache::default();
        let mut t = task(10);
        cache.committed(t.clone());
        t.state = TaskState::Completed;
        t.result = "done".into();
        cache.committed(t.clone());
        assert_eq!(cache.get(t.id).unwrap().unwrap().result, "done");
        let live = task(0);
        cache.committed(live.clone());
        cache.purged();
        assert!(cache.get(t.id).is_err());
        assert!(cache.get(live.id).is_ok());
        assert_eq!(cache.len(), (1, weight(&live)));
    }

    #[test]
    fn an_absent_id_is_remembered_until_its_insert_commits() {
        let cache = TaskCache::default();
        let t = task(0);
        // A miss whose read raced an insert of the same id is not remembered.
        let epoch = cache.get(t.id).unwrap_err();
        cache.committed(task(0));
        cache.fill_absent(t.id, epoch);
        assert!(
            cache.get(t.id).is_err(),
            "a miss from before a commit must not be kept"
        );
        // A miss with no write in between is, until the task is inserted.
        let epoch = cache.get(t.id).unwrap_err();
        cache.fill_absent(t.id, epoch);
        assert!(matches!(cache.get(t.id), Ok(None)));
        cache.committed(t.clone());
        assert_eq!(cache.get(t.id).unwrap().unwrap().id, t.id);
        // A task too large to cache is read again, not taken for absent.
        let mut huge = task(0);
        let epoch = cache.get(huge.id).unwrap_err();
        cache.fill_absent(huge.id, epoch);
        huge.result = "x".repeat(MAX_BYTES / 8);
        cache.committed(huge.clone());
        assert!(cache.get(huge.id).is_err());
        // Bounded, apart from the tasks: random ids push out no task.
        for _ in 0..MAX_ABSENT + 100 {
            let id = Uuid::new_v4();
            let epoch = cache.get(id).unwrap_err();
            cache.fill_absent(id, epoch);
        }
        assert_eq!(cache.lock().absent.len(), MAX_ABSENT);
        assert!(cache.get(t.id).unwrap().is_some());
    }

    #[test]
    fn it_stays_within_its_bounds() {
        let cache = TaskCache::default();
        for _ in 0..MAX_TASKS + 100 {
            cache.committed(task(0));
        }
        assert_eq!(cache.len().0, MAX_TASKS);
        let big = MAX_BYTES / 32;
        for _ in 0..100 {
            cache.committed(task(big));
        }
        let (n, bytes) = cache.len();
        assert!(bytes <= MAX_BYTES, "{bytes} bytes cached");
        assert!(n < 40, "{n} tasks of {big} bytes cached");
        // A result too large to cache is not kept, and drops an older copy of its task.
        let mut huge = task(0);
        cache.committed(huge.clone());
        huge.result = "x".repeat(MAX_BYTES / 8);
        cache.committed(huge.clone());
        assert!(cache.get(huge.id).is_err());
    }
}
