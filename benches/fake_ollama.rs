//! The test suite's fake Ollama as a standalone process, for scripts that run the real server
//! without a model (the conformance run, the official clients in scripts/clients.sh, the
//! newcomer check, the benchmarks). Prints its URL on stdout, then serves until killed.
//!
//! A tool, not a benchmark: it is a `[[bench]]` target so that it may use the dev-dependencies
//! the fake is built on, without being one of the usage examples. Cargo names its executable by
//! a hash, so scripts ask for it:
//!
//! ```sh
//! FAKE="$(bash scripts/bench-exe.sh fake_ollama)"   # builds it (dev profile), prints the path
//! "$FAKE"                                             # → http://127.0.0.1:PORT
//! ```
//!
//! Environment (all optional; unset = the fake's defaults):
//!
//! | variable | effect |
//! |---|---|
//! | `FAKE_OLLAMA_CHUNK_DELAY_MS=N` | waits N ms between the streamed lines of every reply |
//! | `FAKE_OLLAMA_REPLY=hang` | every `/api/chat` sends its headers, then nothing until the client hangs up: a task stays running until it is cancelled |
//! | `FAKE_OLLAMA_REPLY_DELAY_MS=N` | every default reply waits N ms before its headers (a model call that takes N ms) |
//! | `FAKE_OLLAMA_TOOL_ROUNDS=N` | the first N chats ask for the `list_dir` tool on `.` (spelled differently each time): a step that makes 2N+ progress changes (scripts/bench-push.sh) |
//! | `FAKE_OLLAMA_TOOL_CALLS=JSON` | a list of rounds, each a list of `[tool, arguments]`: the first chats ask for those calls, one round per chat, before the default reply (scripts/hostile.py) |
//! | `FAKE_OLLAMA_MODEL=NAME` | the one model it serves (default `test-model`): `qwen3:8b` stands in for the default configuration's model (scripts/newcomer.sh) |
//! | `FAKE_OLLAMA_ANSWER=TEXT` | the text of the default reply (default `Hello from the fake model.`) |

#[path = "../tests/support"]
mod support {
    pub mod background;
    pub mod fake_ollama;
}

use support::fake_ollama::{FakeConfig, FakeOllama, Reply};

use std::io::Write;
use std::time::Duration;

fn config_from_env() -> Result<FakeConfig, String> {
    let mut cfg = FakeConfig::default();
    if let Ok(model) = std::env::var("FAKE_OLLAMA_MODEL") {
        cfg = cfg.with_model(&model);
    }
    if let Ok(answer) = std::env::var("FAKE_OLLAMA_ANSWER") {
        cfg = cfg.with_default_reply(Reply::text(&answer, 12, 7));
    }
    if let Ok(ms) = std::env::var("FAKE_OLLAMA_CHUNK_DELAY_MS") {
        let ms: u64 = ms
            .parse()
            .map_err(|_| format!("FAKE_OLLAMA_CHUNK_DELAY_MS={ms:?}: not a number of ms"))?;
        cfg = cfg.with_chunk_delay(Duration::from_millis(ms));
    }
    if let Ok(ms) = std::env::var("FAKE_OLLAMA_REPLY_DELAY_MS") {
        let ms: u64 = ms
            .parse()
            .map_err(|_| format!("FAKE_OLLAMA_REPLY_DELAY_MS={ms:?}: not a number of ms"))?;
        let reply = cfg.default_reply.clone();
        cfg = cfg.with_default_reply(Reply::delayed(Duration::from_millis(ms), reply));
    }
    match std::env::var("FAKE_OLLAMA_REPLY").as_deref() {
        Err(_) | Ok("") | Ok("default") => {}
        Ok("hang") => cfg = cfg.with_default_reply(Reply::Hang),
        Ok(other) => {
            return Err(format!(
                "FAKE_OLLAMA_REPLY={other:?}: expected hang or default"
            ));
        }
    }
    Ok(cfg)
}

fn main() {
    // `cargo bench` runs every bench target with `--bench`: this one is a server that never
    // ends, so it steps aside there.
    if std::env::args().any(|a| a == "--bench") {
        eprintln!(
            "fake_ollama: a tool, not a benchmark; run its executable (scripts/bench-exe.sh)"
        );
        return;
    }
    let cfg = match config_from_env() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("fake_ollama: {e}");
            std::process::exit(2);
        }
    };
    let rounds = match std::env::var("FAKE_OLLAMA_TOOL_ROUNDS") {
        Err(_) => 0,
        Ok(n) => match n.parse::<usize>() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("fake_ollama: FAKE_OLLAMA_TOOL_ROUNDS={n:?}: not a number");
                std::process::exit(2);
            }
        },
    };
    let scripted = match std::env::var("FAKE_OLLAMA_TOOL_CALLS") {
        Err(_) => Vec::new(),
        Ok(json) => match serde_json::from_str::<Vec<Vec<(String, serde_json::Value)>>>(&json) {
            Ok(rounds) => rounds,
            Err(e) => {
                eprintln!(
                    "fake_ollama: FAKE_OLLAMA_TOOL_CALLS is not a list of rounds of [tool, arguments]: {e}"
                );
                std::process::exit(2);
            }
        },
    };
    let fake = FakeOllama::spawn(cfg);
    for calls in scripted {
        fake.push_reply(Reply::ToolCalls {
            calls,
            prompt_eval_count: 5,
            eval_count: 2,
        });
    }
    // Each round spells the workspace's path differently (`.`, `./.`, `././.`, …): the engine
    // answers an identical read-only call from memory instead of running it again.
    for round in 0..rounds {
        let path = format!("{}.", "./".repeat(round));
        fake.push_reply(Reply::tool_call(
            "list_dir",
            serde_json::json!({"path": path}),
            5,
            2,
        ));
    }
    println!("{}", fake.url());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
