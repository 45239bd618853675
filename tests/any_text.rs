//! A request of any language and any text, answered by a model saying anything, never panics
//! the agent: the whole step loop runs on the fake Ollama (real HTTP, real files) with
//! generated Unicode requests and replies (Japanese, emoji with joiners, combining marks,
//! right-to-left text and override marks), tool calls whose arguments are such text, calls
//! written in the reply text, broken JSON. Under both policies every task ends `completed` or
//! `failed`, never with a panic, and each call's prompt extends the previous one.

#[path = "../src/agent/steering/generated_text.rs"]
mod generated_text;
mod support;

use std::time::Duration;

use agent_mcp::config::SteeringMode;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{HttpServer, field, result_of, test_config, wait_terminal};

/// Any text (no NUL: it goes through files and HTTP) of the pieces steering's own
/// properties use.
fn any_text() -> impl Strategy<Value = String> {
    generated_text::text_of(16, 5, false)
}

/// One scripted reply of any text.
fn any_reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        any_text().prop_map(|t| Reply::text(&t, 20, 5)),
        any_text().prop_map(|p| Reply::tool_call("read_file", json!({"path": p}), 20, 5)),
        any_text().prop_map(|p| Reply::tool_call("search_text", json!({"pattern": p}), 20, 5)),
        (any_text(), any_text()).prop_map(|(p, c)| Reply::tool_call(
            "write_file",
            json!({"path": format!("out/{p}"), "content": c}),
            20,
            5
        )),
        // A code block, as a small model answers an ask for a whole file.
        any_text().prop_map(|t| Reply::text(&format!("Here:\n```\n{t}\n```"), 20, 5)),
        any_text().prop_map(|p| Reply::text(
            &format!(
                "<tool_call>{}</tool_call>",
                json!({"name": "list_dir", "arguments": {"path": p}})
            ),
            20,
            5
        )),
    ]
}

#[test]
fn any_request_and_any_reply_end_the_task_without_a_panic() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let ws = tempfile::tempdir().expect("workspace");
    for (name, content) in [
        ("a.txt", "alpha\n"),
        ("メモ.md", "メモ 👍🏽\n"),
        ("שלום.txt", "שלום\n"),
    ] {
        std::fs::write(ws.path().join(name), content).expect("file");
    }
    for mode in [SteeringMode::Small, SteeringMode::Off] {
        let fake = FakeOllama::spawn(FakeConfig::default());
        let mut config = test_config(&fake.url());
        config.agent.workspace = Some(ws.path().to_path_buf());
        config.agent.steering = mode;
        config.agent.max_iterations = 6;
        config.rate_limit.enabled = false;
        config.ollama.request_timeout = Duration::from_secs(20);
        let server = runtime.block_on(HttpServer::start(config));
        let client = server.client();
        let mut runner = TestRunner::new(Config {
            cases: 40,
            failure_persistence: None,
            ..Config::default()
        });
        // A question, or a change to a file of the workspace (which steering answers with
        // its asks for the whole file).
        let opening = prop::sample::select(vec!["q ", "Fix a.txt: ", "メモ.md を修正して: "]);
        let strategy = (
            opening,
            any_text(),
            prop::collection::vec(any_reply(), 1..5),
        );
        let outcome = runner.run(&strategy, |(opening, request, replies)| {
            fake.clear_replies();
            fake.clear_requests();
            for reply in replies {
                fake.push_reply(reply);
            }
            // agent_run refuses an empty or blank request (a tool error, not a task).
            let request = format!("{opening}{request}");
            let done = runtime.block_on(async {
                let id = client.agent_run(&request).await;
                wait_terminal(|| client.agent_status(&id)).await
            });
            let status = field(&done, "status");
            prop_assert!(status == "completed" || status == "failed", "{done}");
            prop_assert!(!result_of(&done).contains("panicked"), "{done}");
            // The reading of the request (the `small` policy's first call, a question of its
            // own with a JSON schema as `format`) is no part of the conversation.
            let sent: Vec<_> = fake
                .chat_requests()
                .into_iter()
                .filter(|r| {
                    !r["format"]["required"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "wants"))
                })
                .collect();
            for pair in sent.windows(2) {
                let (before, after) = (&pair[0]["messages"], &pair[1]["messages"]);
                let extends = after
                    .as_array()
                    .zip(before.as_array())
                    .is_some_and(|(a, b)| a.starts_with(b));
                prop_assert!(
                    extends,
                    "a call rewrote the conversation:\n{before}\n{after}"
                );
            }
            Ok(())
        });
        if let Err(e) = outcome {
            panic!("{mode:?}: {e}");
        }
    }
}
