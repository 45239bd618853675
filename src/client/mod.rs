//! The terminal client: `agent-mcp run "<request>"` submits a task and follows it with a live
//! progress line; `agent-mcp status <task_id>` prints a task's status once; `agent-mcp diff`
//! and `agent-mcp undo` show and take back what a task changed ([`oversight`]).
//!
//! It speaks MCP 2026-07-28 (no `initialize`; `_meta` on every request) over stateless HTTP
//! (`--url`, default [`DEFAULT_URL`]) or over the stdio of an `agent-mcp stdio` child of this
//! same executable (`--stdio`). A bearer token comes from `AGENT_MCP_TOKEN`.
//!
//! ```text
//! $ agent-mcp run "Summarise README.md" | cat
//! task 9ab4a40b-86fe-432a-904f-8e429c01ea8b (session 2a8105cc-84f9-4d37-a5bd-e48e04654eb7)
//! queued
//! running 0/1 ollama chat tokens=0
//! completed 1/1 tokens=1820
//! README.md describes …
//! ```
//!
//! On a terminal the progress line is redrawn in place instead (see [`progress`]). Exit codes
//! are [`Exit`]: 0 completed, 1 failed, 2 bad argument, 3 refused or unreachable,
//! 4 cancelled, 130 interrupted without cancelling.

pub mod error;
pub mod image;
pub mod oversight;
pub mod progress;
pub mod run;
pub mod transport;

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Map, Value};

pub use error::{ClientError, Exit};
pub use transport::{DEFAULT_URL, Endpoint};

use crate::agent::status::parse_uuid;

/// The client subcommands, flattened into the `agent-mcp` command line.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Submit a work request and follow it to the end, printing progress and then the result.
    Run(RunArgs),
    /// Print a task's status once.
    Status(StatusArgs),
    /// Print the unified diff of what a task changed in the workspace.
    Diff(TaskArgs),
    /// Put every file a task changed back as it was before the task; refuses, naming them,
    /// when a file changed since the task ended. A second undo changes nothing.
    Undo(TaskArgs),
}

#[derive(Debug, clap::Args)]
pub struct TaskArgs {
    /// The task UUID `agent-mcp run` printed.
    pub task_id: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Which server to talk to.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// The server's MCP endpoint [default: http://127.0.0.1:8080/mcp].
    #[arg(long, value_name = "URL", conflicts_with = "stdio")]
    pub url: Option<String>,
    /// Start `agent-mcp stdio` from this executable and talk to it over stdin/stdout.
    #[arg(long)]
    pub stdio: bool,
    /// The agent.yaml for the `--stdio` server.
    #[arg(long, value_name = "FILE", requires = "stdio")]
    pub config: Option<PathBuf>,
}

impl ServerArgs {
    fn endpoint(&self) -> Endpoint {
        if self.stdio {
            Endpoint::Stdio {
                config: self.config.clone(),
            }
        } else {
            Endpoint::Http {
                url: self.url.clone().unwrap_or_else(|| DEFAULT_URL.to_owned()),
            }
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The natural-language work request.
    pub request: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Continue this conversation (the session UUID an earlier run printed).
    #[arg(long = "session", value_name = "ID")]
    pub session: Option<String>,
    /// Attach a PNG, JPEG or WebP image (repeat for several).
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,
    /// Model temperature for this task only, 0.0 through 2.0.
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The task UUID `agent-mcp run` printed.
    pub task_id: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Also check that the task belongs to this session.
    #[arg(long = "session", value_name = "ID")]
    pub session: Option<String>,
}

/// Runs a client subcommand to its exit code.
pub fn main(command: ClientCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agent-mcp: cannot start the async runtime: {e}");
            return Exit::Refused.into();
        }
    };
    let exit = match command {
        ClientCommand::Run(args) => match run_request(&args) {
            Ok(request) => runtime.block_on(async {
                let interrupts = watch_interrupts();
                run::run(request, interrupts).await
            }),
            Err(message) => usage(&message),
        },
        ClientCommand::Status(args) => match status_arguments(&args) {
            Ok(arguments) => runtime.block_on(run::status(args.server.endpoint(), arguments)),
            Err(message) => usage(&message),
        },
        ClientCommand::Diff(args) | ClientCommand::Undo(args)
            if parse_uuid(args.task_id.trim()).is_none() =>
        {
            usage(&format!(
                "the task id must be a UUID like 9ab4a40b-86fe-432a-904f-8e429c01ea8b, not {:?}",
                args.task_id
            ))
        }
        ClientCommand::Diff(args) => runtime.block_on(oversight::run(
            args.server.endpoint(),
            oversight::Verb::Diff,
            parse_uuid(args.task_id.trim()).unwrap_or_default(),
        )),
        ClientCommand::Undo(args) => runtime.block_on(oversight::run(
            args.server.endpoint(),
            oversight::Verb::Undo,
            parse_uuid(args.task_id.trim()).unwrap_or_default(),
        )),
    };
    exit.into()
}

fn usage(message: &str) -> Exit {
    eprintln!("agent-mcp: {message}");
    Exit::Usage
}

/// Checks the flags and reads the images into `agent_run` arguments.
fn run_request(args: &RunArgs) -> Result<run::RunRequest, String> {
    let mut arguments = Map::new();
    arguments.insert("request".into(), Value::from(args.request.as_str()));
    if let Some(session) = &args.session {
        arguments.insert(
            "session_id".into(),
            Value::from(checked_uuid("--session", session)?),
        );
    }
    if let Some(t) = args.temperature {
        if !t.is_finite() {
            return Err(format!(
                "--temperature must be a number from 0.0 through 2.0, not {t}"
            ));
        }
        arguments.insert("temperature".into(), Value::from(t));
    }
    if !args.images.is_empty() {
        let images = args
            .images
            .iter()
            .map(|path| image::load_image(path).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        arguments.insert("images".into(), Value::Array(images));
    }
    Ok(run::RunRequest {
        endpoint: args.server.endpoint(),
        arguments,
    })
}

fn status_arguments(args: &StatusArgs) -> Result<Map<String, Value>, String> {
    let mut arguments = Map::new();
    arguments.insert(
        "task_id".into(),
        Value::from(checked_uuid("the task id", &args.task_id)?),
    );
    if let Some(session) = &args.session {
        arguments.insert(
            "session_id".into(),
            Value::from(checked_uuid("--session", session)?),
        );
    }
    Ok(arguments)
}

fn checked_uuid(what: &str, text: &str) -> Result<String, String> {
    let text = text.trim();
    match parse_uuid(text) {
        Some(_) => Ok(text.to_owned()),
        None => Err(format!(
            "{what} must be a UUID like 9ab4a40b-86fe-432a-904f-8e429c01ea8b, not {text:?}"
        )),
    }
}

/// The first Ctrl-C arrives on the channel (the run loop cancels the task); the second ends the
/// process at once with 130, even while a request hangs.
fn watch_interrupts() -> tokio::sync::mpsc::UnboundedReceiver<()> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        let _ = tx.send(());
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        run::report_second_interrupt();
        std::process::exit(i32::from(Exit::Interrupted.code()));
    });
    rx
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: ClientCommand,
    }

    fn parse(args: &[&str]) -> Result<ClientCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("agent-mcp").chain(args.iter().copied()))
            .map(|c| c.command)
    }

    #[test]
    fn run_flags_build_the_arguments() {
        let ClientCommand::Run(args) = parse(&[
            "run",
            "Fix it",
            "--session",
            "2a8105cc-84f9-4d37-a5bd-e48e04654eb7",
            "--temperature",
            "0.2",
        ])
        .unwrap() else {
            unreachable!()
        };
        let request = run_request(&args).unwrap();
        assert_eq!(
            request.endpoint,
            Endpoint::Http {
                url: "http://127.0.0.1:8080/mcp".into()
            }
        );
        assert_eq!(
            Value::Object(request.arguments),
            serde_json::json!({
                "request": "Fix it",
                "session_id": "2a8105cc-84f9-4d37-a5bd-e48e04654eb7",
                "temperature": 0.2
            })
        );
    }

    #[test]
    fn url_and_stdio_exclude_each_other_and_config_needs_stdio() {
        assert!(parse(&["run", "x", "--url", "http://h/mcp", "--stdio"]).is_err());
        assert!(parse(&["run", "x", "--config", "a.yaml"]).is_err());
        let ClientCommand::Status(args) = parse(&[
            "status",
            "9ab4a40b-86fe-432a-904f-8e429c01ea8b",
            "--stdio",
            "--config",
            "a.yaml",
        ])
        .unwrap() else {
            unreachable!()
        };
        assert_eq!(
            args.server.endpoint(),
            Endpoint::Stdio {
                config: Some("a.yaml".into())
            }
        );
    }

    #[test]
    fn malformed_uuids_are_refused_before_sending() {
        let ClientCommand::Status(args) = parse(&["status", "not-a-uuid"]).unwrap() else {
            unreachable!()
        };
        assert_eq!(
            status_arguments(&args).unwrap_err(),
            "the task id must be a UUID like 9ab4a40b-86fe-432a-904f-8e429c01ea8b, not \"not-a-uuid\""
        );
    }
}
