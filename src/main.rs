//! The `agent-mcp` command: the library's [`agent_mcp::cli::main`] is all of it.

use std::process::ExitCode;

fn main() -> ExitCode {
    agent_mcp::cli::main()
}

/// mimalloc, not the system allocator: a request's many small allocations cost about half
/// the instructions (see `mimalloc` in Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
