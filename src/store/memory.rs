//! An in-process [`TaskStore`]: fast, and forgets everything on exit.

use std::collections::HashMap;
use std::sync::RwLock;

use async_trait::async_trait;
use uuid::Uuid;

use super::{StoreError, TaskStore};
use crate::agent::task::{Session, Task, TaskState, Turn};

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<Uuid, (Session, Vec<Turn>)>,
    tasks: HashMap<Uuid, (u64, Task)>,
    next_seq: u64,
}

/// Tasks and sessions in memory. Locks are never held across an await.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: RwLock<Inner>,
}

impl MemoryStore {
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
        self.read()
            .sessions
            .get(&id)
            .map(|(_, turns)| turns.clone())
            .ok_or(StoreError::UnknownSession(id))
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
        let mut inner = self.write();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.tasks.insert(task.id, (seq, task.clone()));
        Ok(())
    }

    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError> {
        Ok(self.read().tasks.get(&id).map(|(_, t)| t.clone()))
    }

    async fn update_task(&self, task: &Task) -> Result<(), StoreError> {
        let mut inner = self.write();
        let (_, stored) = inner
            .tasks
            .get_mut(&task.id)
            .ok_or(StoreError::UnknownTask(task.id))?;
        *stored = task.clone();
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
    async fn turns_append_to_known_sessions_only() {
        let store = MemoryStore::new();
        let err = store.append_turns(Uuid::new_v4(), &[]).await.unwrap_err();
        assert!(matches!(err, StoreError::UnknownSession(_)));
    }
}
