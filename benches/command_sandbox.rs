//! What the command sandbox costs a command: `run_command` of `true` (and of `python3 -c pass`)
//! through the agent's toolbox, with the Landlock sandbox and the read-only `.git` mount (the
//! default) and without them (as commands ran before the sandbox: the same cgroup, rlimits,
//! network namespace), alternating, in one run. Prints the median and p90 of each and the
//! difference of the medians (the budget: 10 ms).
//!
//!     cargo bench --bench command_sandbox            # 200 runs of each
//!     RUNS=50 cargo bench --bench command_sandbox

use std::time::{Duration, Instant};

use agent_mcp::agent::tools::{ToolSettings, Toolbox};
use agent_mcp::config::AgentConfig;
use agent_mcp::ollama::{ToolCall, ToolCallFunction};
use tokio_util::sync::CancellationToken;

fn call(argv: &[&str]) -> ToolCall {
    ToolCall {
        id: None,
        function: ToolCallFunction {
            index: None,
            name: "run_command".into(),
            arguments: serde_json::json!({ "argv": argv }),
        },
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let Ok(landlock) = agent_mcp::agent::tools::sandbox::landlock() else {
        println!("no Landlock on this machine: nothing to compare");
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join(".git"))?;
    let mut sandboxed = ToolSettings::from_config(&AgentConfig::default());
    sandboxed.workspace = dir.path().to_path_buf();
    sandboxed.commands.enabled = true;
    sandboxed.commands.landlock = Some(landlock);
    let mut before = sandboxed.clone();
    before.commands.landlock = None;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "run_command through the toolbox, {runs} runs each, alternating (Landlock ABI {})",
        landlock.abi()
    );
    println!(
        "{:<22} {:>14} {:>14} {:>14} {:>14} {:>12}",
        "command", "sandbox p50", "sandbox p90", "before p50", "before p90", "p50 diff"
    );
    for argv in [&["true"][..], &["python3", "-c", "pass"]] {
        let sandboxed = Toolbox::open(&sandboxed)?;
        let before = Toolbox::open(&before)?;
        let cancel = CancellationToken::new();
        let call = call(argv);
        let mut times = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
        runtime.block_on(async {
            for _ in 0..runs {
                for (n, toolbox) in [&sandboxed, &before].into_iter().enumerate() {
                    let started = Instant::now();
                    let out = toolbox.execute(&call, &cancel).await;
                    times[n].push(started.elapsed());
                    match out {
                        Ok(out) if out.text.contains("exit status: 0") => {}
                        Ok(out) => panic!("{argv:?} failed: {}", out.text),
                        Err(e) => panic!("{argv:?} failed: {e}"),
                    }
                }
            }
        });
        for t in &mut times {
            t.sort_unstable();
        }
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        let (s50, b50) = (percentile(&times[0], 0.5), percentile(&times[1], 0.5));
        println!(
            "{:<22} {:>14} {:>14} {:>14} {:>14} {:>12}",
            argv.join(" "),
            ms(s50),
            ms(percentile(&times[0], 0.9)),
            ms(b50),
            ms(percentile(&times[1], 0.9)),
            format!("{:+.2} ms", (s50.as_secs_f64() - b50.as_secs_f64()) * 1e3),
        );
    }
    Ok(())
}
