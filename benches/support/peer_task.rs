//! The one completed task the MCP peers of `scripts/bench.sh` answer `agent_status` about, so
//! their status text is the same.

use agent_mcp::agent::status::parse_uuid;
use agent_mcp::task::{Task, TaskState, TokenUsage};
use uuid::Uuid;

/// The task whose id is the first argument that is not a flag (`cargo bench` passes
/// `--bench`); without one, says how `peer` is run and exits with status 2.
pub fn from_args(peer: &str) -> Task {
    let id = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| parse_uuid(&a));
    let Some(id) = id else {
        eprintln!("usage: {peer} <task-uuid>");
        std::process::exit(2);
    };
    let mut task = Task::new(Uuid::new_v4(), None, "benchmark task".into(), None);
    task.id = id;
    task.state = TaskState::Completed;
    task.steps_done = 1;
    task.tokens = TokenUsage {
        input: 2048,
        output: 512,
    };
    task.result = "修正とテストが完了しました。".into();
    task
}
