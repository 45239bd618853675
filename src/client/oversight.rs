//! `agent-mcp diff <task_id>` and `agent-mcp undo <task_id>`: a task's unified diff, and its
//! files put back as they were before it.
//!
//! Over HTTP they use the server's own routes beside `/mcp` (`GET /api/tasks/{id}/diff`,
//! `POST /api/tasks/{id}/undo`; see [`crate::oversight::http`]) with the bearer token from
//! `AGENT_MCP_TOKEN`: not MCP tools, which stay `agent_run` and `agent_status`. With `--stdio`
//! there is no server to ask: the command opens the configured store itself, as the `stdio`
//! caller (the owner of the tasks `agent-mcp run --stdio` queued).
//!
//! Exit codes: 0 printed or undone (also "already undone"), 1 undo refused (a file changed
//! since the task; nothing was changed), 3 not found, unreachable or refused.

use std::io::Write;

use uuid::Uuid;

use super::{ClientError, Endpoint, Exit};
use crate::oversight::{Oversight, OversightError, UndoRefusal};

/// Which of the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Diff,
    Undo,
}

/// Runs `verb` on task `id` at `endpoint`.
pub async fn run(endpoint: Endpoint, verb: Verb, id: Uuid) -> Exit {
    let outcome = match &endpoint {
        Endpoint::Http { url } => over_http(url, verb, id).await,
        Endpoint::Stdio { config } => in_process(config.as_deref(), verb, id).await,
    };
    match outcome {
        Ok((text, exit)) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return Exit::Refused;
            }
            exit
        }
        Err(message) => {
            eprintln!("agent-mcp: {message}");
            Exit::Refused
        }
    }
}

/// The server's base URL from its MCP endpoint's (`http://host:port/mcp` → `http://host:port`).
fn base_url(mcp_url: &str) -> String {
    let trimmed = mcp_url.trim_end_matches('/');
    trimmed.strip_suffix("/mcp").unwrap_or(trimmed).to_owned()
}

async fn over_http(url: &str, verb: Verb, id: Uuid) -> Result<(String, Exit), String> {
    let base = base_url(url);
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| e.to_string())?;
    let request = match verb {
        Verb::Diff => client.get(format!("{base}/api/tasks/{id}/diff")),
        Verb::Undo => client.post(format!("{base}/api/tasks/{id}/undo")),
    };
    let request = match super::transport::token_from_env() {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    let resp = request.send().await.map_err(|e| {
        ClientError::Unreachable {
            url: base.clone(),
            reason: e.to_string(),
        }
        .to_string()
    })?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| e.to_string())?;
    if status == reqwest::StatusCode::UNAUTHORIZED {
        let reason = message_of(&body);
        return Err(match super::transport::token_from_env() {
            Some(_) => ClientError::TokenRefused(reason).to_string(),
            None => ClientError::TokenMissing.to_string(),
        });
    }
    match (verb, status.as_u16()) {
        (Verb::Diff, 200) => Ok((body, Exit::Completed)),
        (Verb::Undo, 200) => Ok((format!("{}\n", message_of(&body)), Exit::Completed)),
        (Verb::Undo, 409) => {
            eprintln!("agent-mcp: {}", message_of(&body));
            Ok((String::new(), Exit::TaskFailed))
        }
        _ => Err(message_of(&body)),
    }
}

/// The `message` of a JSON answer, else the text itself.
fn message_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned())
}

async fn in_process(
    config: Option<&std::path::Path>,
    verb: Verb,
    id: Uuid,
) -> Result<(String, Exit), String> {
    let loaded = crate::config::Config::load_traced(config, std::env::vars())
        .map_err(|e| format!("configuration error: {e}"))?;
    let config = loaded.config;
    let store = crate::open_store(&config)
        .await
        .map_err(|e| e.to_string())?;
    let tools = crate::agent::AgentSettings::from_config(&config).tools;
    let oversight = Oversight::offline(store, tools);
    let identity = Some(crate::plugin::STDIO_IDENTITY);
    match verb {
        Verb::Diff => match oversight.diff(id, identity).await {
            Ok(diff) => Ok((diff.text, Exit::Completed)),
            Err(e) => Err(e.to_string()),
        },
        Verb::Undo => match oversight.undo(id, identity).await {
            Ok(undone) => Ok((format!("{}\n", undone.line()), Exit::Completed)),
            Err(OversightError::Undo(
                refusal @ (UndoRefusal::ChangedSince(_)
                | UndoRefusal::NotRestorable(_)
                | UndoRefusal::Unfinished(_)),
            )) => {
                eprintln!("agent-mcp: {refusal}");
                Ok((String::new(), Exit::TaskFailed))
            }
            Err(e) => Err(e.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_is_the_mcp_endpoint_without_its_path() {
        assert_eq!(
            base_url("http://127.0.0.1:8080/mcp"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(base_url("http://h:1/mcp/"), "http://h:1");
        assert_eq!(base_url("http://h:1"), "http://h:1");
    }
}
