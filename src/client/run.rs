//! `agent-mcp run` and `agent-mcp status`: submit a task and follow it, or print its status.
//!
//! `run` asks `server/discover` whether the server has the Tasks extension. With it, `agent_run`
//! declares the extension, gets a `CreateTaskResult` (its `taskId` is the agent task's UUID)
//! and Ctrl-C sends `tasks/cancel`; without it, `agent_run` answers with the acknowledgement
//! text and Ctrl-C can only leave the task running.
//!
//! A task that waits for a person's decision (`agent.approvals: ask`) is asked about on the
//! terminal: `run` declares form elicitation with the extension, prints each input request's
//! message and `allow it? [y/N]` on stderr, reads the answer from stdin (the end of input is
//! no) and sends it with `tasks/update`.
//!
//! With the extension, the task is followed **by push**: one `subscriptions/listen` whose
//! `notifications/tasks` carry the `agent_status` text in `_meta["agent-mcp/status"]`, so the
//! output is the same without a single poll. Otherwise (an older server, a refused or broken
//! stream) progress comes from polling `agent_status`, whose text has everything the progress
//! line shows (state, steps, current step, tokens), every `pollIntervalMs` (from the server)
//! or 500 ms.

use std::collections::HashSet;
use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::error::{ClientError, Exit};
use super::progress::{ProgressView, StatusSnapshot};
use super::transport::{Connection, Endpoint};
use crate::agent::status::{WAITING_FOR_APPROVAL, parse_uuid};
use crate::layers::tasks::{STATUS_META, TASKS_EXTENSION};
use crate::mcp_tools::{AGENT_RUN, AGENT_STATUS};

/// How often `agent_status` is asked when the server suggests nothing.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Bounds on a server-suggested poll interval.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The pause after a rate-limit refusal that does not say how long to wait.
const RATE_LIMITED_WAIT: Duration = Duration::from_secs(5);

/// What `agent-mcp run` submits, already checked.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRequest {
    pub endpoint: Endpoint,
    /// The `agent_run` arguments.
    pub arguments: Map<String, Value>,
}

/// Submits the task and follows it to a terminal state. `interrupts` yields once per Ctrl-C
/// (a second Ctrl-C is the caller's to handle: it exits at once).
pub async fn run(request: RunRequest, mut interrupts: UnboundedReceiver<()>) -> Exit {
    let mut view = ProgressView::for_stdout();
    let mut conn = match Connection::open(&request.endpoint) {
        Ok(conn) => conn,
        Err(e) => return report(&mut view, &e),
    };
    let exit = match follow(&mut conn, request.arguments, &mut view, &mut interrupts).await {
        Ok(exit) => exit,
        Err(e) => report(&mut view, &e),
    };
    conn.close().await;
    exit
}

/// Prints `status <task_id>` once.
pub async fn status(endpoint: Endpoint, arguments: Map<String, Value>) -> Exit {
    let mut view = ProgressView::plain();
    let mut conn = match Connection::open(&endpoint) {
        Ok(conn) => conn,
        Err(e) => return report(&mut view, &e),
    };
    let exit = match call_tool(&mut conn, AGENT_STATUS, arguments, json!({})).await {
        Ok(text) => {
            println!("{text}");
            Exit::Completed
        }
        Err(e) => report(&mut view, &e),
    };
    conn.close().await;
    exit
}

/// Where the submitted task is, and how to reach it.
struct Submitted {
    task_id: String,
    /// The server has the Tasks extension, so `tasks/cancel` works (with this declaration).
    tasks_capabilities: Option<Value>,
    poll_interval: Duration,
}

async fn follow(
    conn: &mut Connection,
    arguments: Map<String, Value>,
    view: &mut ProgressView,
    interrupts: &mut UnboundedReceiver<()>,
) -> Result<Exit, ClientError> {
    let submitted = submit(conn, arguments).await?;
    let task_id = submitted.task_id.as_str();
    let mut stdout = io::stdout();
    let mut first = true;
    let mut cancelling = false;
    // The input request keys asked on the terminal already.
    let mut asked = HashSet::new();
    if let Some(capabilities) = &submitted.tasks_capabilities {
        let pushed = follow_by_push(
            conn,
            task_id,
            capabilities,
            view,
            interrupts,
            (&mut first, &mut cancelling, &mut asked),
        )
        .await?;
        if let Some(exit) = pushed {
            return Ok(exit);
        }
    }
    loop {
        let wait = match poll_status(conn, task_id).await {
            Ok(snapshot) => {
                if let Some(exit) = show(&mut first, task_id, &snapshot, view, &mut stdout)? {
                    return Ok(exit);
                }
                if snapshot.message == WAITING_FOR_APPROVAL
                    && let Some(capabilities) = &submitted.tasks_capabilities
                {
                    let mut get = Map::new();
                    get.insert("taskId".into(), Value::from(task_id));
                    let task = conn.request("tasks/get", get, capabilities.clone()).await?;
                    view.finish(&mut stdout)?;
                    ask_on_terminal(conn, task_id, &task, capabilities, &mut asked).await?;
                    continue;
                }
                submitted.poll_interval
            }
            // A long task outlasts a per-minute budget; polling resumes when the server says.
            Err(ClientError::RateLimited(seconds)) => {
                Duration::from_secs(seconds).max(submitted.poll_interval)
            }
            Err(ClientError::RateLimitedNoHint) => RATE_LIMITED_WAIT,
            Err(e) => return Err(e),
        };
        let interrupted = tokio::select! {
            () = tokio::time::sleep(wait) => false,
            got = interrupts.recv(), if !cancelling => got.is_some(),
        };
        if !interrupted {
            continue;
        }
        view.finish(&mut stdout)?;
        let Some(capabilities) = &submitted.tasks_capabilities else {
            eprintln!(
                "agent-mcp: the server cannot cancel tasks; the task continues on the server \
                 (task_id {task_id})"
            );
            return Ok(Exit::Interrupted);
        };
        cancel(conn, task_id, capabilities).await?;
        cancelling = true;
    }
}

/// Follows the task by `subscriptions/listen`: every change arrives as a notification carrying
/// the `agent_status` text in `_meta`, so the output is the same as when polling. `None` when
/// the server offers no push for it (an older server, a refusal) or the stream ended before
/// the task did: the caller polls from there.
async fn follow_by_push(
    conn: &mut Connection,
    task_id: &str,
    capabilities: &Value,
    view: &mut ProgressView,
    interrupts: &mut UnboundedReceiver<()>,
    (first, cancelling, asked): (&mut bool, &mut bool, &mut HashSet<String>),
) -> Result<Option<Exit>, ClientError> {
    let mut stdout = io::stdout();
    let mut subscription = match conn.listen(task_id, capabilities.clone()).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::debug!(error = %e, "no push for this task; polling");
            return Ok(None);
        }
    };
    loop {
        let event = tokio::select! {
            next = subscription.next(conn) => Pushed::Message(next),
            got = interrupts.recv(), if !*cancelling => Pushed::Interrupt(got.is_some()),
        };
        match event {
            Pushed::Message(Ok(Some(task))) => {
                if task.get("status").and_then(Value::as_str) == Some("input_required") {
                    view.finish(&mut stdout)?;
                    ask_on_terminal(conn, task_id, &task, capabilities, asked).await?;
                }
                let Some(text) = task
                    .get("_meta")
                    .and_then(|m| m.get(STATUS_META))
                    .and_then(Value::as_str)
                else {
                    tracing::debug!("task notifications without the status text; polling");
                    return Ok(None);
                };
                let Some(snapshot) = StatusSnapshot::parse(text) else {
                    return Err(ClientError::Protocol {
                        method: "notifications/tasks".into(),
                        detail: format!("no `status:` line in {text:?}"),
                    });
                };
                if let Some(exit) = show(first, task_id, &snapshot, view, &mut stdout)? {
                    return Ok(Some(exit));
                }
            }
            Pushed::Message(Ok(None)) => return Ok(None),
            Pushed::Message(Err(e)) => {
                tracing::debug!(error = %e, "push stream failed; polling");
                return Ok(None);
            }
            Pushed::Interrupt(false) => {}
            Pushed::Interrupt(true) => {
                view.finish(&mut stdout)?;
                cancel(conn, task_id, capabilities).await?;
                *cancelling = true;
            }
        }
    }
}

enum Pushed {
    Message(Result<Option<Map<String, Value>>, ClientError>),
    Interrupt(bool),
}

/// Asks on the terminal about each input request of `task` not asked yet (the message, then
/// `Allow? [y/N]` on stderr, the answer from stdin: `y` or `yes` accepts, anything else and
/// the end of input decline), and sends the answers with `tasks/update`.
async fn ask_on_terminal(
    conn: &mut Connection,
    task_id: &str,
    task: &Map<String, Value>,
    capabilities: &Value,
    asked: &mut HashSet<String>,
) -> Result<(), ClientError> {
    let Some(requests) = task.get("inputRequests").and_then(Value::as_object) else {
        return Ok(());
    };
    let mut answers = Map::new();
    for (key, request) in requests {
        if !asked.insert(key.clone()) {
            continue;
        }
        let message = request
            .get("params")
            .and_then(|p| p.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("The task asks for a decision.");
        eprintln!("agent-mcp: {}", printable(message));
        eprint!("agent-mcp: allow it? [y/N] ");
        let _ = io::stderr().flush();
        let line = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            io::stdin().read_line(&mut line).map(|_| line)
        })
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        let yes = matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes");
        if line.is_empty() {
            eprintln!();
        }
        let action = if yes { "accept" } else { "decline" };
        answers.insert(key.clone(), json!({ "action": action }));
    }
    if answers.is_empty() {
        return Ok(());
    }
    let mut update = Map::new();
    update.insert("taskId".into(), Value::from(task_id));
    update.insert("inputResponses".into(), Value::Object(answers));
    conn.request("tasks/update", update, capabilities.clone())
        .await
        .map(|_| ())
}

/// `text` with every control character but line ends and tabs shown as a space: the message
/// quotes what the model wrote, which must not drive the terminal (escape sequences).
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// One `agent_status` call, read back.
/// Asks the server to cancel `task_id` (the first Ctrl-C), saying so and what a second one does.
async fn cancel(
    conn: &mut Connection,
    task_id: &str,
    capabilities: &Value,
) -> Result<(), ClientError> {
    eprintln!(
        "agent-mcp: cancelling task {task_id}; press Ctrl-C again to stop waiting \
         (the task may then still be running)"
    );
    let mut params = Map::new();
    params.insert("taskId".into(), Value::from(task_id));
    conn.request("tasks/cancel", params, capabilities.clone())
        .await?;
    Ok(())
}

async fn poll_status(conn: &mut Connection, task_id: &str) -> Result<StatusSnapshot, ClientError> {
    let mut arguments = Map::new();
    arguments.insert("task_id".into(), Value::from(task_id));
    let text = call_tool(conn, AGENT_STATUS, arguments, json!({})).await?;
    StatusSnapshot::parse(&text).ok_or_else(|| ClientError::Protocol {
        method: "tools/call agent_status".into(),
        detail: format!("no `status:` line in {text:?}"),
    })
}

/// `server/discover`, then `agent_run` declaring the Tasks extension if the server has it.
async fn submit(
    conn: &mut Connection,
    arguments: Map<String, Value>,
) -> Result<Submitted, ClientError> {
    let discover = conn
        .request("server/discover", Map::new(), json!({}))
        .await?;
    let has_tasks = discover
        .get("capabilities")
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some();
    // With the Tasks extension, form elicitation too: an approval the task waits for is asked
    // on the terminal (`ask_on_terminal`).
    let capabilities = if has_tasks {
        json!({"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}})
    } else {
        json!({})
    };
    let mut params = Map::new();
    params.insert("name".into(), Value::from(AGENT_RUN));
    params.insert("arguments".into(), Value::Object(arguments));
    let result = conn
        .request("tools/call", params, capabilities.clone())
        .await?;
    let protocol = |detail: String| ClientError::Protocol {
        method: "tools/call agent_run".into(),
        detail,
    };
    if result.get("resultType").and_then(Value::as_str) == Some("task") {
        // A CreateTaskResult: the MCP taskId is the agent task's UUID.
        let task_id = result
            .get("taskId")
            .and_then(Value::as_str)
            .filter(|id| parse_uuid(id).is_some())
            .ok_or_else(|| {
                protocol(format!("no task UUID in {}", Value::Object(result.clone())))
            })?;
        let poll_interval = result
            .get("pollIntervalMs")
            .and_then(Value::as_u64)
            .map(|ms| Duration::from_millis(ms).clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL))
            .unwrap_or(DEFAULT_POLL_INTERVAL);
        return Ok(Submitted {
            task_id: task_id.to_owned(),
            tasks_capabilities: has_tasks.then_some(capabilities),
            poll_interval,
        });
    }
    let text = tool_text(result)?;
    let task_id = StatusSnapshot::parse(&text)
        .map(|s| s.task_id)
        .filter(|id| parse_uuid(id).is_some())
        .ok_or_else(|| protocol(format!("no task_id in {text:?}")))?;
    Ok(Submitted {
        task_id,
        // The server answered synchronously, so it will not take `tasks/cancel` for this task.
        tasks_capabilities: None,
        poll_interval: DEFAULT_POLL_INTERVAL,
    })
}

/// `tools/call` of `name`, returning the text of a successful `CallToolResult`.
async fn call_tool(
    conn: &mut Connection,
    name: &str,
    arguments: Map<String, Value>,
    capabilities: Value,
) -> Result<String, ClientError> {
    let mut params = Map::new();
    params.insert("name".into(), Value::from(name));
    params.insert("arguments".into(), Value::Object(arguments));
    let result = conn.request("tools/call", params, capabilities).await?;
    tool_text(result)
}

/// The text blocks of a `CallToolResult`; `isError: true` is an error carrying that text.
fn tool_text(result: Map<String, Value>) -> Result<String, ClientError> {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .ok_or_else(|| ClientError::Protocol {
            method: "tools/call".into(),
            detail: "the result has no `content`".into(),
        })?;
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(ClientError::Tool(text));
    }
    Ok(text)
}

/// Prints the outcome of a terminal task: the result on stdout when it completed, the reason
/// on stderr otherwise.
/// Shows one status of the task, polled or pushed alike (the task line before the first);
/// once it is terminal, prints the outcome and returns how to exit.
fn show(
    first: &mut bool,
    task_id: &str,
    snapshot: &StatusSnapshot,
    view: &mut ProgressView,
    out: &mut impl Write,
) -> io::Result<Option<Exit>> {
    if std::mem::take(first) {
        match &snapshot.session_id {
            Some(session) => writeln!(out, "task {task_id} (session {session})")?,
            None => writeln!(out, "task {task_id}")?,
        }
    }
    view.show(snapshot, out)?;
    if !snapshot.is_terminal() {
        return Ok(None);
    }
    view.finish(out)?;
    finished(snapshot, out).map(Some)
}

fn finished(snapshot: &StatusSnapshot, out: &mut impl Write) -> io::Result<Exit> {
    let reason = if snapshot.result.is_empty() {
        snapshot.message.as_str()
    } else {
        snapshot.result.as_str()
    };
    Ok(match snapshot.state.as_str() {
        "completed" => {
            writeln!(out, "{}", snapshot.result)?;
            out.flush()?;
            Exit::Completed
        }
        "cancelled" => {
            eprintln!("agent-mcp: the task was cancelled: {reason}");
            Exit::TaskCancelled
        }
        _ => {
            eprintln!("agent-mcp: the task failed: {reason}");
            Exit::TaskFailed
        }
    })
}

/// Prints an error on stderr (after ending any redrawn line) and picks its exit code.
fn report(view: &mut ProgressView, e: &ClientError) -> Exit {
    let _ = view.finish(&mut io::stdout());
    eprintln!("agent-mcp: {e}");
    Exit::Refused
}

/// Says on stderr that a second Ctrl-C ended the client.
pub fn report_second_interrupt() {
    let lead = if io::stdout().is_terminal() { "\n" } else { "" };
    eprintln!("{lead}agent-mcp: interrupted; the task may still be running on the server");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_question_cannot_drive_the_terminal() {
        assert_eq!(printable("a\u{1b}[2Jb\nc\td\r"), "a [2Jb\nc\td ");
    }

    #[test]
    fn tool_results_are_judged_by_is_error() {
        assert_eq!(
            tool_text(map(json!({"content": [{"type": "text", "text": "ok"}]}))).unwrap(),
            "ok"
        );
        let refused = tool_text(map(json!({
            "content": [{"type": "text", "text": "request: must not be empty"}],
            "isError": true
        })));
        assert_eq!(
            refused.unwrap_err().to_string(),
            "request: must not be empty"
        );
        assert!(matches!(
            tool_text(map(json!({"resultType": "complete"}))),
            Err(ClientError::Protocol { .. })
        ));
    }

    #[test]
    fn outcomes_pick_the_exit_code_and_stream() {
        let snapshot = |state: &str, result: &str| StatusSnapshot {
            state: state.into(),
            result: result.into(),
            message: "m".into(),
            ..StatusSnapshot::default()
        };
        let mut out = Vec::new();
        assert_eq!(
            finished(&snapshot("completed", "done\nfor real"), &mut out).unwrap(),
            Exit::Completed
        );
        assert_eq!(String::from_utf8(out).unwrap(), "done\nfor real\n");
        let mut out = Vec::new();
        assert_eq!(
            finished(&snapshot("failed", "boom"), &mut out).unwrap(),
            Exit::TaskFailed
        );
        assert_eq!(
            finished(&snapshot("cancelled", ""), &mut out).unwrap(),
            Exit::TaskCancelled
        );
        assert!(out.is_empty());
    }
}
