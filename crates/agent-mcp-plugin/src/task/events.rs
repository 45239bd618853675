//! [`TaskEvents`]: the task-change broadcast, one per agent core.
//!
//! Whoever saves a change of a task publishes it here ([`TaskEvents::publish`] with the task as
//! saved, or [`TaskEvents::touched`] when only the id is known, e.g. a change made by another
//! instance sharing the store). Followers ([`TaskEvents::follow`]) learn *which* of their tasks
//! changed and read the latest snapshot; they never receive a queue of past states.
//!
//! **Bounded, whatever the followers do.** Per followed task the hub keeps one snapshot (the
//! latest); per follower, one set of changed ids (at most the ids it follows) and a
//! [`Notify`]. Publishing takes one short lock and never waits for a follower, so a follower
//! that stops reading (a stalled client) holds up neither the agent nor anyone else: its
//! changes coalesce to "this task changed", and when it reads again it gets the latest state.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use uuid::Uuid;

use super::Task;

/// The broadcast. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct TaskEvents {
    watched: Mutex<HashMap<Uuid, Watched>>,
    /// Set by [`TaskEvents::close`]: the server is shutting down.
    closed: std::sync::atomic::AtomicBool,
}

/// One followed task: its latest published snapshot and who follows it.
#[derive(Debug, Default)]
struct Watched {
    /// `None` until a snapshot is published, or after a change known only by id.
    latest: Option<Arc<Task>>,
    followers: Vec<Weak<Inbox>>,
}

/// What one follower has not read yet.
#[derive(Debug, Default)]
struct Inbox {
    changed: Mutex<BTreeSet<Uuid>>,
    notify: Notify,
}

impl Inbox {
    fn mark(&self, id: Uuid) {
        lock(&self.changed).insert(id);
        // `notify_one` keeps a permit when no one waits yet, so a change between a follower's
        // check and its wait is not lost.
        self.notify.notify_one();
    }
}

impl TaskEvents {
    pub fn new() -> Arc<TaskEvents> {
        Arc::new(TaskEvents::default())
    }

    /// A change of `task`, as saved: its followers are told, and read this snapshot.
    pub fn publish(&self, task: &Task) {
        self.changed(task.id, Some(task));
    }

    /// A change of the task `id` whose new state is not at hand (saved elsewhere): followers
    /// are told and read the task from the store.
    pub fn touched(&self, id: Uuid) {
        self.changed(id, None);
    }

    fn changed(&self, id: Uuid, task: Option<&Task>) {
        let mut watched = lock(&self.watched);
        // Nobody follows this task: nothing is kept for it.
        let Some(entry) = watched.get_mut(&id) else {
            return;
        };
        entry.latest = task.map(|t| Arc::new(t.clone()));
        entry.followers.retain(|f| match f.upgrade() {
            Some(inbox) => {
                inbox.mark(id);
                true
            }
            None => false,
        });
        if entry.followers.is_empty() {
            watched.remove(&id);
        }
    }

    /// Starts following `ids`: from now on, every change of one of them is reported by
    /// [`Follower::changed`]. Follow before reading the tasks' current state, so no change
    /// after that read is missed.
    pub fn follow(self: &Arc<Self>, ids: &[Uuid]) -> Follower {
        let inbox = Arc::new(Inbox::default());
        let mut watched = lock(&self.watched);
        for id in ids {
            watched
                .entry(*id)
                .or_default()
                .followers
                .push(Arc::downgrade(&inbox));
        }
        drop(watched);
        Follower {
            events: self.clone(),
            inbox,
            ids: ids.to_vec(),
        }
    }

    /// The server is shutting down: every follower's [`Follower::changed`] returns at once (an
    /// empty set) and [`Follower::is_closed`] says so, so push streams end gracefully instead
    /// of holding the shutdown until their tasks finish.
    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        for watched in lock(&self.watched).values() {
            for inbox in watched.followers.iter().filter_map(Weak::upgrade) {
                inbox.notify.notify_one();
            }
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many tasks are followed now (for tests and benchmarks of the bound).
    pub fn followed_tasks(&self) -> usize {
        lock(&self.watched).len()
    }
}

/// One follower of some tasks (see [`TaskEvents::follow`]). Dropping it stops following.
#[derive(Debug)]
pub struct Follower {
    events: Arc<TaskEvents>,
    inbox: Arc<Inbox>,
    ids: Vec<Uuid>,
}

impl Follower {
    /// Waits until at least one followed task has changed since the last call, and says which
    /// (each id once, however many times it changed meanwhile). Returns an empty set at once
    /// when the broadcast is closed ([`TaskEvents::close`]).
    pub async fn changed(&self) -> BTreeSet<Uuid> {
        loop {
            let changed = std::mem::take(&mut *lock(&self.inbox.changed));
            if !changed.is_empty() || self.is_closed() {
                return changed;
            }
            self.inbox.notify.notified().await;
        }
    }

    /// The server is shutting down ([`TaskEvents::close`]).
    pub fn is_closed(&self) -> bool {
        self.events.is_closed()
    }

    /// The latest published snapshot of a followed task; `None` when the last change was known
    /// only by id (read the store then).
    pub fn latest(&self, id: Uuid) -> Option<Arc<Task>> {
        lock(&self.events.watched)
            .get(&id)
            .and_then(|w| w.latest.clone())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let mut watched = lock(&self.events.watched);
        for id in &self.ids {
            if let Some(entry) = watched.get_mut(id) {
                entry
                    .followers
                    .retain(|f| f.upgrade().is_some_and(|i| !Arc::ptr_eq(&i, &self.inbox)));
                if entry.followers.is_empty() {
                    watched.remove(id);
                }
            }
        }
    }
}

/// Every critical section is a single insert/remove/replace, so a poisoned lock holds
/// consistent data.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskState;

    fn task() -> Task {
        Task::new(Uuid::new_v4(), None, "x".into(), None)
    }

    #[tokio::test]
    async fn changes_coalesce_to_the_latest_snapshot_and_nothing_is_kept_unfollowed() {
        let events = TaskEvents::new();
        let mut t = task();
        events.publish(&t);
        assert_eq!(events.followed_tasks(), 0, "unfollowed tasks keep nothing");
        let follower = events.follow(&[t.id]);
        // A thousand changes while the follower does not read.
        for n in 0..1000 {
            t.steps_done = n;
            events.publish(&t);
        }
        t.transition(TaskState::Running);
        events.publish(&t);
        assert_eq!(follower.changed().await, BTreeSet::from([t.id]));
        let latest = follower.latest(t.id).expect("a snapshot");
        assert_eq!((latest.state, latest.steps_done), (TaskState::Running, 999));
        // A change known only by id drops the snapshot: the follower reads the store.
        events.touched(t.id);
        assert_eq!(follower.changed().await, BTreeSet::from([t.id]));
        assert!(follower.latest(t.id).is_none());
        drop(follower);
        assert_eq!(
            events.followed_tasks(),
            0,
            "a dropped follower leaves nothing"
        );
    }

    #[tokio::test]
    async fn closing_wakes_every_follower_for_good() {
        let events = TaskEvents::new();
        let t = task();
        let follower = events.follow(&[t.id]);
        let waiter = tokio::spawn(async move {
            let changed = follower.changed().await;
            (changed, follower.is_closed())
        });
        tokio::task::yield_now().await;
        events.close();
        let (changed, closed) = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woke")
            .expect("joined");
        assert!(changed.is_empty() && closed);
        let late = events.follow(&[t.id]);
        assert!(
            late.changed().await.is_empty(),
            "closed for later followers too"
        );
    }

    #[tokio::test]
    async fn a_waiting_follower_wakes_and_others_are_unaffected() {
        let events = TaskEvents::new();
        let (a, b) = (task(), task());
        let fa = events.follow(&[a.id]);
        let fb = events.follow(&[a.id, b.id]);
        let waiter = tokio::spawn(async move { fa.changed().await });
        tokio::task::yield_now().await;
        events.publish(&a);
        let woke = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woke")
            .expect("joined");
        assert_eq!(woke, BTreeSet::from([a.id]));
        events.publish(&b);
        assert_eq!(fb.changed().await, BTreeSet::from([a.id, b.id]));
    }
}
