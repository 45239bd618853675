//! Approvals for 2025 clients over stdio (issue 29): a session whose `initialize` declared the
//! `elicitation` capability is asked by a server→client `elicitation/create` request (form
//! mode: the same `message` and flat `requestedSchema` as the Tasks path's `inputRequests`),
//! sent while the task waits; the client's response `action` (`accept`, `decline`, `cancel`)
//! is the decision, recorded in the store like a `tasks/update` answer. An error response
//! counts as `cancel`; a response that never comes is the approval's timeout.
//!
//! Only tasks this session queued are followed (the `tools/call` response names the task),
//! and only while they wait with [`AnswerPath::StdioElicitation`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::store::StoreError;
use crate::task::Task;
use crate::task::events::Follower;
use crate::task::input::{Action, Answer, AnswerPath};

/// What asking a stdio session for approvals needs of the agent, and no more: its tasks, a
/// feed of their changes, and a way to record an answer. The composition root implements it
/// for the agent core, so the transport knows nothing of the agent.
#[async_trait::async_trait]
pub trait TaskApprovals: Send + Sync + std::fmt::Debug + 'static {
    /// Wakes on every change of task `id`.
    fn follow(&self, id: Uuid) -> Follower;
    /// The task as stored now.
    async fn task(&self, id: Uuid) -> Result<Option<Task>, StoreError>;
    /// Records `answer` to input request `key` of task `id` and, when it was recorded (the
    /// request was still open), wakes the task. Whether it was recorded.
    async fn answer(&self, id: Uuid, key: &str, answer: &Answer) -> Result<bool, StoreError>;
}

/// Put on a request's [`RequestContext::extensions`](crate::protocol::RequestContext) by the
/// stdio transport when its session negotiated 2025 and declared `elicitation`, and the
/// transport can ask ([`serve_with`](super::stdio::serve_with)).
#[derive(Clone, Copy, Debug)]
pub struct SessionElicits;

/// A backstop re-read of a followed task when no change was announced.
const RECHECK: Duration = Duration::from_millis(500);

/// The server→client requests of one stdio session and what they ask.
#[derive(Clone, Debug)]
pub struct StdioAsker {
    tasks: Arc<dyn TaskApprovals>,
    /// Request id (`approval-<n>`) → the task, the key, and who owns the task.
    asked: Arc<Mutex<HashMap<String, Asked>>>,
    next: Arc<AtomicU64>,
    /// Tasks followed already (every response naming a task would follow it again).
    followed: Arc<Mutex<HashSet<Uuid>>>,
}

#[derive(Debug)]
struct Asked {
    task: Uuid,
    key: String,
    owner: Option<String>,
}

impl StdioAsker {
    /// An asker for one stdio session, reading and answering `tasks`' approvals.
    pub fn new(tasks: Arc<dyn TaskApprovals>) -> Self {
        Self {
            tasks,
            asked: Arc::default(),
            next: Arc::new(AtomicU64::new(0)),
            followed: Arc::default(),
        }
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Asked>> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows task `id`, queued by this session, until it ends or `ended` fires: each new
    /// input request is sent to the client as an `elicitation/create` request on `tx`.
    pub(super) fn follow(&self, id: Uuid, tx: mpsc::Sender<Vec<u8>>, ended: CancellationToken) {
        if !self
            .followed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id)
        {
            return;
        }
        let asker = self.clone();
        tokio::spawn(async move {
            let follower = asker.tasks.follow(id);
            let mut sent = HashSet::new();
            loop {
                let task = match asker.tasks.task(id).await {
                    Ok(Some(task)) => task,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(task_id = %id, error = %e, "cannot read the task to ask its approvals; trying again");
                        tokio::select! {
                            () = ended.cancelled() => return,
                            () = tokio::time::sleep(RECHECK) => continue,
                        }
                    }
                };
                if task.state.is_terminal()
                    || task.input.answer_path != Some(AnswerPath::StdioElicitation)
                {
                    return;
                }
                for request in &task.input.pending {
                    if !sent.insert(request.key.clone()) {
                        continue;
                    }
                    let n = asker.next.fetch_add(1, Ordering::Relaxed) + 1;
                    let rid = format!("approval-{n}");
                    asker.asked().insert(
                        rid.clone(),
                        Asked {
                            task: id,
                            key: request.key.clone(),
                            owner: task.owner.clone(),
                        },
                    );
                    let mut message = request.elicitation();
                    message["jsonrpc"] = json!("2.0");
                    message["id"] = json!(rid);
                    if let Ok(mut bytes) = serde_json::to_vec(&message) {
                        bytes.push(b'\n');
                        if tx.send(bytes).await.is_err() {
                            return;
                        }
                    }
                }
                tokio::select! {
                    _ = follower.changed() => {}
                    () = ended.cancelled() => return,
                    () = tokio::time::sleep(RECHECK) => {}
                }
                if follower.is_closed() {
                    return;
                }
            }
        });
    }

    /// A response line from the client: when it answers one of our requests, its `action`
    /// is recorded as the decision (an error response, or an action we do not know, as
    /// `cancel`). Whether it was one of ours.
    pub(super) async fn answered(&self, line: &[u8]) -> bool {
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return false;
        };
        let Some(rid) = message["id"].as_str() else {
            return false;
        };
        let Some(asked) = self.asked().remove(rid) else {
            return false;
        };
        let action = message["result"]["action"]
            .as_str()
            .and_then(Action::from_wire)
            .unwrap_or(Action::Cancel);
        let answer = Answer {
            action,
            by: asked.owner,
            at: SystemTime::now(),
        };
        match self.tasks.answer(asked.task, &asked.key, &answer).await {
            Ok(recorded) => {
                tracing::info!(
                    target: "agent_mcp::approvals",
                    task_id = %asked.task,
                    key = %asked.key,
                    action = action.as_str(),
                    recorded,
                    "approval answered over stdio elicitation"
                );
            }
            Err(e) => {
                tracing::warn!(task_id = %asked.task, error = %e, "cannot record the stdio elicitation's answer; the approval times out");
            }
        }
        true
    }
}
