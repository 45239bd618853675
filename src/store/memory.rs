//! An in-process [`TaskStore`]: fast, and forgets everything on exit.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::SystemTime;

use async_trait::async_trait;
use uuid::Uuid;

use super::{StoreError, TaskChanges, TaskStore};
use crate::task::input::Answer;
use crate::task::{Session, Task, TaskImage, TaskState, Turn};

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<Uuid, (Session, Vec<Turn>)>,
    tasks: HashMap<Uuid, (u64, Task)>,
    next_seq: u64,
    /// The answers to tasks' input requests, by task and key.
    answers: HashMap<(Uuid, String), Answer>,
    /// What each task changed, by task.
    changes: HashMap<Uuid, TaskChanges>,
}

impl Inner {
    /// The session `id` with its turns; [`StoreError::UnknownSession`] when there is none.
    fn known_session(&self, id: Uuid) -> Result<&(Session, Vec<Turn>), StoreError> {
        self.sessions.get(&id).ok_or(StoreError::UnknownSession(id))
    }

    /// The task `id`; [`StoreError::UnknownTask`] when there is none.
    fn known_task(&self, id: Uuid) -> Result<&Task, StoreError> {
        let (_, task) = self.tasks.get(&id).ok_or(StoreError::UnknownTask(id))?;
        Ok(task)
    }
}

/// Tasks and sessions in memory. Locks are never held across an await.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: RwLock<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated (every write is a
        // single insert), so a poisoned lock is still safe to use.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn create_session(&self, session: &Session) -> Result<(), StoreError> {
        self.write()
            .sessions
            .insert(session.id, (session.clone(), Vec::new()));
        Ok(())
    }

    async fn session(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
        Ok(self.read().sessions.get(&id).map(|(s, _)| s.clone()))
    }

    async fn session_turns(&self, id: Uuid) -> Result<Vec<Turn>, StoreError> {
        Ok(self.read().known_session(id)?.1.clone())
    }

    async fn append_turns(&self, id: Uuid, turns: &[Turn]) -> Result<(), StoreError> {
        let mut inner = self.write();
        let (_, history) = inner
            .sessions
            .get_mut(&id)
            .ok_or(StoreError::UnknownSession(id))?;
        history.extend_from_slice(turns);
        Ok(())
    }

    async fn insert_task(&self, task: &Task) -> Result<(), StoreError> {
        self.insert_task_owned(task.clone()).await
    }

    async fn insert_task_owned(&self, task: Task) -> Result<(), StoreError> {
        let mut inner = self.write();
        // As in the SQLite store: a session purged since it was looked up comes back empty.
        inner.sessions.entry(task.session_id).or_insert_with(|| {
            let mut session = Session::new(task.owner.clone());
            session.id = task.session_id;
            session.created_at = task.created_at;
            (session, Vec::new())
        });
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.tasks.insert(task.id, (seq, task));
        Ok(())
    }

    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        Ok(self.read().tasks.get(&id).map(|(_, t)| t.clone()))
    }

    async fn task_images(&self, id: Uuid) -> Result<Vec<TaskImage>, StoreError> {
        Ok(self.read().known_task(id)?.images.clone())
    }

    async fn update_task(&self, task: &Task) -> Result<(), StoreError> {
        self.finish_task(task, &[]).await
    }

    async fn finish_task(&self, task: &Task, turns: &[Turn]) -> Result<(), StoreError> {
        // One lock for both: nobody sees the outcome without its turns.
        let mut inner = self.write();
        if !turns.is_empty() && !inner.sessions.contains_key(&task.session_id) {
            return Err(StoreError::UnknownSession(task.session_id));
        }
        let (_, stored) = inner
            .tasks
            .get_mut(&task.id)
            .ok_or(StoreError::UnknownTask(task.id))?;
        // The caller's copy may lack the images (they are not part of `task()` for every
        // store); keep ours until the task is terminal, then release them.
        let images = std::mem::take(&mut stored.images);
        *stored = task.clone();
        stored.images = if task.state.is_terminal() {
            Vec::new()
        } else {
            images
        };
        if let Some((_, history)) = inner.sessions.get_mut(&task.session_id) {
            history.extend_from_slice(turns);
        }
        Ok(())
    }

    async fn tasks_in_state(&self, state: TaskState) -> Result<Vec<Task>, StoreError> {
        let inner = self.read();
        let mut found: Vec<&(u64, Task)> = inner
            .tasks
            .values()
            .filter(|(_, t)| t.state == state)
            .collect();
        found.sort_by_key(|(seq, _)| *seq);
        Ok(found.into_iter().map(|(_, t)| t.clone()).collect())
    }

    async fn answer_input(&self, id: Uuid, key: &str, answer: &Answer) -> Result<bool, StoreError> {
        let mut inner = self.write();
        inner.known_task(id)?;
        match inner.answers.entry((id, key.to_owned())) {
            std::collections::hash_map::Entry::Occupied(_) => Ok(false),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(answer.clone());
                Ok(true)
            }
        }
    }

    async fn input_answer(&self, id: Uuid, key: &str) -> Result<Option<Answer>, StoreError> {
        Ok(self.read().answers.get(&(id, key.to_owned())).cloned())
    }

    async fn save_changes(&self, id: Uuid, changes: &TaskChanges) -> Result<(), StoreError> {
        let mut inner = self.write();
        inner.known_task(id)?;
        let mut changes = changes.clone();
        changes.undone = false;
        inner.changes.insert(id, changes);
        Ok(())
    }

    async fn task_changes(&self, id: Uuid) -> Result<Option<TaskChanges>, StoreError> {
        Ok(self.read().changes.get(&id).cloned())
    }

    async fn mark_undone(&self, id: Uuid) -> Result<bool, StoreError> {
        Ok(match self.write().changes.get_mut(&id) {
            Some(changes) if !changes.undone => {
                changes.undone = true;
                true
            }
            _ => false,
        })
    }

    async fn recent_tasks(
        &self,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Task>, StoreError> {
        let inner = self.read();
        let mut found: Vec<&(u64, Task)> = inner
            .tasks
            .values()
            .filter(|(_, t)| t.owner.as_deref() == owner)
            .collect();
        found.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        Ok(found
            .into_iter()
            .take(limit)
            .map(|(_, t)| Task {
                images: Vec::new(),
                ..t.clone()
            })
            .collect())
    }

    async fn purge_finished(&self, finished_before: SystemTime) -> Result<u64, StoreError> {
        let mut inner = self.write();
        let mut sessions = Vec::new();
        inner.tasks.retain(|_, (_, t)| {
            let expired = t.state.is_terminal() && t.updated_at < finished_before;
            if expired {
                sessions.push(t.session_id);
            }
            !expired
        });
        let purged = sessions.len() as u64;
        if purged > 0 {
            let Inner {
                tasks,
                answers,
                changes,
                ..
            } = &mut *inner;
            answers.retain(|(task, _), _| tasks.contains_key(task));
            changes.retain(|task, _| tasks.contains_key(task));
            // Sessions left without any task go, with their turns.
            let in_use: std::collections::HashSet<Uuid> =
                inner.tasks.values().map(|(_, t)| t.session_id).collect();
            for session in sessions {
                if !in_use.contains(&session) {
                    inner.sessions.remove(&session);
                }
            }
        }
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance;

    #[tokio::test]
    async fn tasks_come_back_in_creation_order() {
        let store = MemoryStore::new();
        let session = Session::new(None);
        store.create_session(&session).await.unwrap();
        let mut ids = Vec::new();
        for i in 0..5 {
            let t = Task::new(session.id, None, format!("r{i}"), None);
            ids.push(t.id);
            store.insert_task(&t).await.unwrap();
        }
        let queued: Vec<Uuid> = store
            .tasks_in_state(TaskState::Queued)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(queued, ids);
    }

    #[tokio::test]
    async fn images_stay_until_the_task_is_terminal() {
        let store = MemoryStore::new();
        let mut t = Task::new(Uuid::new_v4(), None, "look".into(), None);
        t.images = vec![TaskImage::new("image/png", "iVBORw0KGgo=")];
        store.insert_task(&t).await.unwrap();
        let mut loaded = store.task(t.id).await.unwrap().unwrap();
        loaded.images.clear();
        loaded.transition(TaskState::Running);
        store.update_task(&loaded).await.unwrap();
        assert_eq!(store.task_images(t.id).await.unwrap(), t.images);
        loaded.transition(TaskState::Completed);
        store.update_task(&loaded).await.unwrap();
        assert!(store.task_images(t.id).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_shared_store_contract() {
        conformance::all(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn purge_keeps_unfinished_and_recent_tasks() {
        conformance::purge_keeps_unfinished_and_recent_tasks(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn turns_append_to_known_sessions_only() {
        let store = MemoryStore::new();
        let err = store.append_turns(Uuid::new_v4(), &[]).await.unwrap_err();
        assert!(matches!(err, StoreError::UnknownSession(_)));
    }
}
