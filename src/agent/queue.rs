//! The FIFO of queued task ids. One worker takes from the front; at most one task is planning
//! or running in the whole process.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;
use uuid::Uuid;

/// Waiting tasks, oldest first.
#[derive(Debug, Default)]
pub struct TaskQueue {
    items: Mutex<VecDeque<Uuid>>,
    ready: Notify,
}

impl TaskQueue {
    pub fn new() -> Self {
        Self::default()
    }

    fn items(&self) -> std::sync::MutexGuard<'_, VecDeque<Uuid>> {
        // Every critical section is a single VecDeque call, so a poisoned lock holds a
        // consistent queue.
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a task at the back.
    pub fn push(&self, id: Uuid) {
        let mut items = self.items();
        items.push_back(id);
        crate::metrics::set_queue_depth(items.len());
        drop(items);
        // A stored permit means a push before the worker waits is not lost.
        self.ready.notify_one();
    }

    /// 1-based position of a waiting task.
    pub fn position(&self, id: Uuid) -> Option<usize> {
        self.items().iter().position(|x| *x == id).map(|i| i + 1)
    }

    /// Takes a waiting task out of the queue (cancellation). Returns whether it was there.
    pub fn remove(&self, id: Uuid) -> bool {
        let mut items = self.items();
        let removed = match items.iter().position(|x| *x == id) {
            Some(i) => items.remove(i).is_some(),
            None => false,
        };
        crate::metrics::set_queue_depth(items.len());
        removed
    }

    pub fn len(&self) -> usize {
        self.items().len()
    }

    pub fn is_empty(&self) -> bool {
        self.items().is_empty()
    }

    /// Waits for and takes the oldest task.
    pub async fn next(&self) -> Uuid {
        loop {
            let next = {
                let mut items = self.items();
                let next = items.pop_front();
                crate::metrics::set_queue_depth(items.len());
                next
            };
            if let Some(id) = next {
                return id;
            }
            self.ready.notified().await;
        }
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
        assert_eq!(q.next().await, ids[0]);
        assert_eq!(q.next().await, ids[2]);
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_on_push() {
        let q = std::sync::Arc::new(TaskQueue::new());
        let id = Uuid::new_v4();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.push(id);
        assert_eq!(waiter.await.unwrap(), id);
    }
}
