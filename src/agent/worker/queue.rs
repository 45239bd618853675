//! The FIFO of queued task ids. One worker takes from the front; at most one task is planning
//! or running in the whole process.
//!
//! A task this process accepted is handed over in memory with its id (see [`Queued`]): the
//! runner starts from the task as it was accepted, images included (their text shared, not
//! copied), instead of reading back from the store what the accept has just written. What the
//! queue holds that way is bounded, in bytes ([`HANDOVER_BUDGET`]) and in tasks
//! ([`HANDOVER_TASKS`]); past either an entry carries only its id and the runner reads the
//! store, as it does after a restart.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use uuid::Uuid;

use crate::task::Task;

/// Most bytes of request text and image data the queue keeps for in-memory handover, over all
/// waiting tasks (up to `mcp.max_queued_tasks`, 10,000 by default, could otherwise hold
/// gigabytes of images). 64 MiB is six tasks at the default image limits, and many thousands
/// of text-only ones.
pub const HANDOVER_BUDGET: usize = 64 * 1024 * 1024;

/// Most tasks the queue keeps for in-memory handover. The runner takes one task at a time, so
/// only the front of the line gains from it; a task further back waits far longer than its
/// store read takes. Without this cap a long line of text-only tasks (about 700 bytes each in
/// memory, 100,000 of them waiting in `scripts/bench.sh`'s queue row) held ~70 MiB that the
/// byte budget, which counts the request and images, did not see.
pub const HANDOVER_TASKS: usize = 256;

/// A task taken from the front of the queue: its id, and the task itself when the accept
/// handed it over in memory (else the runner reads it from the store).
#[derive(Debug)]
pub struct Queued {
    pub id: Uuid,
    pub task: Option<Box<Task>>,
}

/// One waiting task: its place, its owner, and what was handed over with it.
#[derive(Debug)]
struct Waiting {
    seq: u64,
    owner: Owner,
    task: Option<Box<Task>>,
}

/// The bytes a handed-over task holds that count against [`HANDOVER_BUDGET`]: the task
/// itself, its request text and its images.
fn handover_bytes(task: &Task) -> usize {
    std::mem::size_of::<Task>()
        + task.request.len()
        + task
            .images
            .iter()
            .map(|i| i.data_base64.len())
            .sum::<usize>()
}

/// Waiting tasks, oldest first.
///
/// Every operation costs the same however long the queue is (a client polls each of its
/// tasks' status, and each status says the task's place in line): each task gets a sequence
/// number when it is queued, so its place is its distance from the front, less the tasks
/// cancelled out of the line between them (few, and kept in a sorted set).
#[derive(Debug, Default)]
pub struct TaskQueue {
    items: Mutex<Line>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct Line {
    /// `(sequence number, task)`, oldest first; may still hold cancelled entries, skipped when
    /// they reach the front.
    order: VecDeque<(u64, Uuid)>,
    /// Every task still waiting: its sequence number, owner and handed-over task.
    waiting: HashMap<Uuid, Waiting>,
    /// Bytes the handed-over tasks in `waiting` hold (at most [`HANDOVER_BUDGET`]).
    handed_bytes: usize,
    /// How many tasks in `waiting` were handed over (at most [`HANDOVER_TASKS`]).
    handed_tasks: usize,
    /// Tasks waiting per owner (for `mcp.max_queued_per_caller`).
    per_owner: HashMap<Owner, usize>,
    /// Places held by [`Ticket`]s for tasks being stored, in all and per owner: counted
    /// against the caps like waiting tasks, so calls that check at once cannot all take the
    /// last place.
    held: usize,
    held_by: HashMap<Owner, usize>,
    /// Sequence numbers cancelled out of the line but still in `order`.
    gone: BTreeSet<u64>,
    next_seq: u64,
}

/// Whose task it is: the caller identity, `None` for anonymous HTTP callers.
type Owner = Option<Arc<str>>;

/// Why [`TaskQueue::reserve`] found no place: the caps it met, with the count that met them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueFull {
    /// `n` tasks wait (or are being stored) in all.
    Total(usize),
    /// `n` tasks of this owner wait (or are being stored).
    Owner(usize),
}

/// A place in the line held for a task of one owner while it is stored; [`TaskQueue::push_ticket`]
/// fills it, dropping it gives it back.
#[derive(Debug)]
pub struct Ticket<'a> {
    queue: &'a TaskQueue,
    owner: Owner,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut line = self.queue.items();
        line.release(&self.owner);
    }
}

impl Line {
    /// Gives back a place a ticket held.
    fn release(&mut self, owner: &Owner) {
        self.held = self.held.saturating_sub(1);
        if let Some(n) = self.held_by.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.held_by.remove(owner);
            }
        }
    }

    /// Forgets a task's owner count and handover bytes once it left the line.
    fn left(&mut self, gone: &Waiting) {
        if let Some(task) = &gone.task {
            self.handed_bytes = self.handed_bytes.saturating_sub(handover_bytes(task));
            self.handed_tasks = self.handed_tasks.saturating_sub(1);
        }
        if let Some(n) = self.per_owner.get_mut(&gone.owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&gone.owner);
            }
        }
    }

    /// Drops cancelled entries from the front, so the front is a waiting task.
    fn settle(&mut self) {
        while let Some(&(seq, _)) = self.order.front() {
            if !self.gone.remove(&seq) {
                break;
            }
            self.order.pop_front();
        }
    }
}

impl TaskQueue {
    pub fn new() -> Self {
        Self::default()
    }

    fn items(&self) -> std::sync::MutexGuard<'_, Line> {
        // Every critical section leaves the line consistent before it can panic (none of
        // them does), so a poisoned lock holds a consistent queue.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a task at the back, owned by no one (the anonymous caller).
    pub fn push(&self, id: Uuid) {
        self.push_owned(id, None);
    }

    /// Appends a task of `owner` at the back.
    pub fn push_owned(&self, id: Uuid, owner: Option<&str>) {
        self.push_entry(id, owner.map(Arc::from), None);
    }

    fn push_entry(&self, id: Uuid, owner: Owner, task: Option<Task>) {
        let mut line = self.items();
        let seq = line.next_seq;
        line.next_seq += 1;
        line.order.push_back((seq, id));
        *line.per_owner.entry(owner.clone()).or_insert(0) += 1;
        // Within the budget the task goes with its id; past it the runner reads the store.
        let task = task.filter(|task| {
            let bytes = handover_bytes(task);
            let fits =
                line.handed_tasks < HANDOVER_TASKS && line.handed_bytes + bytes <= HANDOVER_BUDGET;
            if fits {
                line.handed_bytes += bytes;
                line.handed_tasks += 1;
            }
            fits
        });
        let entry = Waiting {
            seq,
            owner,
            task: task.map(Box::new),
        };
        if let Some(replaced) = line.waiting.insert(id, entry) {
            line.left(&replaced);
        }
        crate::metrics::set_queue_depth(line.waiting.len());
        drop(line);
        // A stored permit means a push before the worker waits is not lost.
        self.ready.notify_one();
    }

    /// 1-based position of a waiting task.
    pub fn position(&self, id: Uuid) -> Option<usize> {
        let line = self.items();
        let seq = line.waiting.get(&id)?.seq;
        let front = line.order.front().map_or(seq, |(front, _)| *front);
        let ahead = seq.saturating_sub(front) - line.gone.range(front..seq).count() as u64;
        usize::try_from(ahead + 1).ok()
    }

    /// Takes a waiting task out of the queue (cancellation). Returns whether it was there.
    pub fn remove(&self, id: Uuid) -> bool {
        let mut line = self.items();
        let removed = match line.waiting.remove(&id) {
            Some(gone) => {
                line.left(&gone);
                line.gone.insert(gone.seq);
                line.settle();
                true
            }
            None => false,
        };
        crate::metrics::set_queue_depth(line.waiting.len());
        removed
    }

    pub fn len(&self) -> usize {
        self.items().waiting.len()
    }

    /// Holds a place for a task of `owner` if fewer than `total` tasks wait (or are held) in
    /// all and fewer than `per_owner` of `owner`'s; else says which cap was met.
    pub fn reserve(
        &self,
        owner: Option<&str>,
        total: usize,
        per_owner: usize,
    ) -> Result<Ticket<'_>, QueueFull> {
        let owner: Owner = owner.map(Arc::from);
        let mut line = self.items();
        let all = line.waiting.len() + line.held;
        if all >= total {
            return Err(QueueFull::Total(all));
        }
        let mine = line.per_owner.get(&owner).copied().unwrap_or(0)
            + line.held_by.get(&owner).copied().unwrap_or(0);
        if mine >= per_owner {
            return Err(QueueFull::Owner(mine));
        }
        line.held += 1;
        *line.held_by.entry(owner.clone()).or_insert(0) += 1;
        Ok(Ticket { queue: self, owner })
    }

    /// Queues task `id` in the place `ticket` held (its owner's), with the task as it was
    /// stored, when there is one to hand over (`task.id` is `id`).
    pub fn push_ticket(&self, ticket: Ticket<'_>, id: Uuid, task: Option<Task>) {
        debug_assert!(task.as_ref().is_none_or(|t| t.id == id));
        let owner = ticket.owner.clone();
        // The ticket gives its place back as the task takes one: the counts never dip.
        self.push_entry(id, owner, task);
        drop(ticket);
    }

    /// Tasks of `owner` waiting.
    pub fn len_of(&self, owner: Option<&str>) -> usize {
        let owner: Owner = owner.map(Arc::from);
        self.items().per_owner.get(&owner).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.items().waiting.is_empty()
    }

    /// Waits for and takes the oldest task.
    pub async fn next(&self) -> Queued {
        loop {
            let next = {
                let mut line = self.items();
                line.settle();
                let next = line.order.pop_front().map(|(_, id)| {
                    let task = line.waiting.remove(&id).and_then(|mut gone| {
                        line.left(&gone);
                        gone.task.take()
                    });
                    Queued { id, task }
                });
                crate::metrics::set_queue_depth(line.waiting.len());
                next
            };
            if let Some(next) = next {
                return next;
            }
            self.ready.notified().await;
        }
    }

    /// Bytes held for handover now (for tests and the budget's checks).
    pub fn handed_bytes(&self) -> usize {
        self.items().handed_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fifo_with_positions_and_removal() {
        let q = TaskQueue::new();
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            q.push(*id);
        }
        assert_eq!(q.position(ids[2]), Some(3));
        assert!(q.remove(ids[1]));
        assert!(!q.remove(ids[1]));
        assert_eq!(q.position(ids[2]), Some(2));
        assert_eq!(q.next().await.id, ids[0]);
        assert_eq!(q.next().await.id, ids[2]);
        assert!(q.is_empty());
    }

    /// Positions stay right through cancellations anywhere in the line, checked against a
    /// plain list.
    #[tokio::test]
    async fn positions_match_a_plain_list_through_cancellations() {
        let q = TaskQueue::new();
        let mut model: Vec<Uuid> = Vec::new();
        let mut seed = 7u64;
        let mut rand = move |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n.max(1)
        };
        for round in 0..2000 {
            match rand(4) {
                0 | 1 => {
                    let id = Uuid::new_v4();
                    q.push(id);
                    model.push(id);
                }
                2 if !model.is_empty() => {
                    let id = model.remove(rand(model.len()));
                    assert!(q.remove(id), "round {round}");
                    assert!(!q.remove(id));
                }
                _ if !model.is_empty() => {
                    assert_eq!(q.next().await.id, model.remove(0), "round {round}");
                }
                _ => {}
            }
            assert_eq!(q.len(), model.len());
            for (i, id) in model.iter().enumerate() {
                assert_eq!(q.position(*id), Some(i + 1), "round {round}");
            }
        }
        assert_eq!(q.position(Uuid::new_v4()), None);
    }

    #[tokio::test]
    async fn tasks_are_counted_per_owner_until_they_leave_the_line() {
        let q = TaskQueue::new();
        let a: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
        for id in &a {
            q.push_owned(*id, Some("alice"));
        }
        let anon = Uuid::new_v4();
        q.push(anon);
        assert_eq!(
            (q.len_of(Some("alice")), q.len_of(None), q.len()),
            (3, 1, 4)
        );
        assert!(q.remove(a[1]));
        assert_eq!(q.next().await.id, a[0]);
        assert_eq!(q.len_of(Some("alice")), 1);
        assert_eq!(q.next().await.id, a[2]);
        assert_eq!(q.next().await.id, anon);
        assert_eq!((q.len_of(Some("alice")), q.len_of(None)), (0, 0));
    }

    #[test]
    fn tickets_hold_places_so_the_caps_hold_for_calls_at_once() {
        let q = TaskQueue::new();
        let a = q.reserve(Some("alice"), 3, 2).unwrap();
        let b = q.reserve(Some("alice"), 3, 2).unwrap();
        // Both held, none stored yet: a third call of alice finds her share taken.
        assert_eq!(
            q.reserve(Some("alice"), 3, 2).unwrap_err(),
            QueueFull::Owner(2)
        );
        let c = q.reserve(None, 3, 2).unwrap();
        assert_eq!(
            q.reserve(Some("bob"), 3, 2).unwrap_err(),
            QueueFull::Total(3)
        );
        // A ticket dropped (the store failed) gives its place back; a filled one becomes a task.
        drop(b);
        q.push_ticket(a, Uuid::new_v4(), None);
        q.push_ticket(c, Uuid::new_v4(), None);
        assert_eq!(
            (q.len(), q.len_of(Some("alice")), q.len_of(None)),
            (2, 1, 1)
        );
        let d = q.reserve(Some("bob"), 3, 2).unwrap();
        assert_eq!(
            q.reserve(Some("bob"), 3, 2).unwrap_err(),
            QueueFull::Total(3)
        );
        drop(d);
        assert!(q.reserve(Some("bob"), 3, 2).is_ok());
    }

    /// An accepted task goes to the runner in memory while the queue's handover budget
    /// allows; past it only its id does (the runner reads the store), and what leaves the line
    /// gives its bytes back.
    #[tokio::test]
    async fn tasks_are_handed_over_within_the_budget() {
        let q = TaskQueue::new();
        let session = Uuid::new_v4();
        let task = |bytes: usize| {
            let mut t = Task::new(session, None, "x".repeat(bytes), None);
            t.images = vec![crate::task::TaskImage::new("image/png", "A".repeat(bytes))];
            t
        };
        // a takes half the budget, the task itself counted: b, as large, does not fit.
        let own = std::mem::size_of::<Task>();
        let half = HANDOVER_BUDGET / 2;
        let (a, b, c) = (task((half - own) / 2), task((half - own) / 2), task(1));
        let ids = [a.id, b.id, c.id];
        let held = |q: &TaskQueue, id| q.push_ticket(q.reserve(None, 10, 10).unwrap(), id, None);
        q.push_ticket(q.reserve(None, 10, 10).unwrap(), a.id, Some(a.clone()));
        assert_eq!(q.handed_bytes(), half);
        // b does not fit beside a: it waits as an id alone.
        let mut big = b.clone();
        big.request.push_str(&"!".repeat(own + 1));
        q.push_ticket(q.reserve(None, 10, 10).unwrap(), b.id, Some(big));
        assert_eq!(q.handed_bytes(), half);
        q.push_ticket(q.reserve(None, 10, 10).unwrap(), c.id, Some(c.clone()));
        held(&q, Uuid::new_v4());
        assert_eq!(q.handed_bytes(), half + own + 2);
        let first = q.next().await;
        assert_eq!((first.id, first.task.as_deref()), (ids[0], Some(&a)));
        assert_eq!(q.handed_bytes(), own + 2);
        let second = q.next().await;
        assert_eq!((second.id, second.task.is_none()), (ids[1], true));
        assert!(
            q.remove(ids[2]),
            "a cancelled task leaves with its handover"
        );
        assert_eq!(q.handed_bytes(), 0);
        assert!(q.next().await.task.is_none());
    }

    /// Past [`HANDOVER_TASKS`] handed-over tasks a small one waits as an id alone too, and a
    /// place handed over frees up as the front leaves.
    #[tokio::test]
    async fn no_more_than_the_cap_of_tasks_is_handed_over() {
        let q = TaskQueue::new();
        let session = Uuid::new_v4();
        let push = |q: &TaskQueue| {
            let t = Task::new(session, None, "text only".into(), None);
            q.push_ticket(q.reserve(None, 1000, 1000).unwrap(), t.id, Some(t));
        };
        for _ in 0..=HANDOVER_TASKS {
            push(&q);
        }
        let each = handover_bytes(&Task::new(session, None, "text only".into(), None));
        assert_eq!(q.handed_bytes(), HANDOVER_TASKS * each);
        assert!(q.next().await.task.is_some(), "the front was handed over");
        push(&q);
        for _ in 1..HANDOVER_TASKS {
            assert!(q.next().await.task.is_some());
        }
        assert!(
            q.next().await.task.is_none(),
            "the task past the cap waits as its id"
        );
        assert!(
            q.next().await.task.is_some(),
            "the one pushed after the front left is handed over"
        );
        assert_eq!(q.handed_bytes(), 0);
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_on_push() {
        let q = std::sync::Arc::new(TaskQueue::new());
        let id = Uuid::new_v4();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await.id }
        });
        tokio::task::yield_now().await;
        q.push(id);
        assert_eq!(waiter.await.unwrap(), id);
    }
}
