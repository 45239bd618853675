//! Why a terminal-client command could not do its work, and the exit code each reason maps to.

use std::process::ExitCode;

/// The exit codes of `agent-mcp run` and `agent-mcp status` (also in docs/clients.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `run`: the task completed. `status`: the status was printed.
    Completed,
    /// `run`: the task ended `failed`.
    TaskFailed,
    /// A bad argument: an unreadable or unsupported image, a malformed UUID, a bad flag.
    Usage,
    /// The request was refused or never answered: the server is unreachable, needs a token,
    /// rate limited the call, or answered with a JSON-RPC error or `isError: true`.
    Refused,
    /// `run`: the task ended `cancelled` (after Ctrl-C, or cancelled elsewhere).
    TaskCancelled,
    /// Ctrl-C without a cancellation: the server cannot cancel tasks, or Ctrl-C came twice.
    Interrupted,
}

impl Exit {
    pub const fn code(self) -> u8 {
        match self {
            Exit::Completed => 0,
            Exit::TaskFailed => 1,
            Exit::Usage => 2,
            Exit::Refused => 3,
            Exit::TaskCancelled => 4,
            Exit::Interrupted => 130,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// What went wrong talking to the server. Every message is one line meant for a person.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot reach the server at {url}: {reason}; start it with `agent-mcp serve`, or pass --url or --stdio"
    )]
    Unreachable { url: String, reason: String },
    #[error("the server did not answer {method} within {seconds} s")]
    Timeout { method: String, seconds: u64 },
    #[error("the server needs a token: set AGENT_MCP_TOKEN")]
    TokenMissing,
    #[error("the server refused the token in AGENT_MCP_TOKEN: {0}")]
    TokenRefused(String),
    #[error("rate limited: retry in {0} s")]
    RateLimited(u64),
    #[error("rate limited: retry later")]
    RateLimitedNoHint,
    /// A JSON-RPC error response.
    #[error("{message} (JSON-RPC error {code})")]
    Rpc { code: i64, message: String },
    /// A `CallToolResult` with `isError: true`; the text is the tool's message.
    #[error("{0}")]
    Tool(String),
    #[error("the server answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// The answer was not what MCP 2026-07-28 says it should be.
    #[error("unexpected answer to {method}: {detail}")]
    Protocol { method: String, detail: String },
    /// The `agent-mcp stdio` child could not be started or stopped answering.
    #[error("{0}")]
    Stdio(String),
    #[error("cannot write to stdout: {0}")]
    Output(#[from] std::io::Error),
}
