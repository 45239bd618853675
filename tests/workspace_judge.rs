//! The workspace judges a task, under every steering policy: the configured checks run after
//! the model's last change and send their failures back to it; a file is replaced only after
//! the task read it; a task asked for a change that changed nothing, or whose every call
//! failed, is not `completed`; and a long conversation is compacted before it outgrows the
//! model's context, saying so. On the fake Ollama over real HTTP, in real workspaces, with
//! real child processes for the checks.

mod support;

use std::path::Path;

use agent_mcp::agent::steering::SteeringMode;
use agent_mcp::config::Config;
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{HttpServer, field, result_of, test_config, wait_terminal};

fn config(fake: &FakeOllama, workspace: &Path) -> Config {
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(workspace.to_path_buf());
    config.agent.steering = SteeringMode::Off;
    config.rate_limit.enabled = false;
    config
}

async fn run(config: Config, request: &str) -> String {
    let server = HttpServer::start(config).await;
    let client = server.client();
    let id = client.agent_run(request).await;
    wait_terminal(|| client.agent_status(&id)).await
}

fn edit(old: &str, new: &str) -> Reply {
    call(
        "edit_file",
        json!({"path": "calc.txt", "old_text": old, "new_text": new}),
    )
}

/// A tool call of the scripted model (10 prompt and 2 output tokens, like every reply here).
fn call(name: &str, args: Value) -> Reply {
    Reply::tool_call(name, args, 10, 2)
}

/// A text reply of the scripted model.
fn say(text: &str) -> Reply {
    Reply::text(text, 10, 2)
}

fn read_calc() -> Reply {
    call("read_file", json!({"path": "calc.txt"}))
}

/// The last user message of a chat request body.
fn last_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn check_for_4() -> Vec<Vec<String>> {
    vec![
        ["grep", "-q", "answer = 4", "calc.txt"]
            .map(String::from)
            .to_vec(),
    ]
}

#[tokio::test]
async fn failing_checks_go_back_to_the_model_until_they_pass() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.txt"), "answer = 5\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(read_calc());
    fake.push_reply(edit("answer = 5", "answer = 3"));
    fake.push_reply(say("Fixed."));
    // The check failed: the model is told, and fixes it.
    fake.push_reply(edit("answer = 3", "answer = 4"));
    fake.push_reply(say("Fixed, really."));
    let mut config = config(&fake, ws.path());
    config.agent.checks = check_for_4();
    let done = run(config, "Fix calc.txt so the answer is 4.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(
        result_of(&done),
        "Fixed, really.\n\nchanged: calc.txt (+1 -1)\n\
         checks: `grep -q answer = 4 calc.txt` passed (after 1 round of fixes)"
    );
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 5);
    let told = last_user(&sent[3]);
    assert!(
        told.starts_with("The checks this workspace is judged by failed after your change"),
        "{told}"
    );
    assert!(
        told.contains("$ grep -q answer = 4 calc.txt\nexit status: 1"),
        "{told}"
    );
    // The premature "Fixed." is not in the conversation.
    assert!(!sent[3].to_string().contains("\"Fixed.\""));
}

#[tokio::test]
async fn checks_that_still_fail_after_the_rounds_fail_the_task() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.txt"), "answer = 5\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(read_calc());
    fake.push_reply(edit("answer = 5", "answer = 3"));
    fake.push_reply(say("Fixed."));
    fake.push_reply(edit("answer = 3", "answer = 2"));
    fake.push_reply(say("Fixed now."));
    let mut config = config(&fake, ws.path());
    config.agent.checks = check_for_4();
    config.agent.check_rounds = 1;
    let done = run(config, "Fix calc.txt so the answer is 4.").await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert_eq!(
        result_of(&done),
        "step 'ollama chat' failed: the checks still fail after the model's changes \
         (checks: `grep -q answer = 4 calc.txt` failed (exit status 1) (after 1 round of fixes)); \
         the files it changed are left as they are"
    );
    assert_eq!(fake.chat_count(), 5);
}

#[tokio::test]
async fn a_file_is_replaced_only_after_the_task_read_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("config.json"),
        "{\"port\": 80, \"host\": \"a\"}\n",
    )
    .unwrap();
    let fake = FakeOllama::start().await;
    let blind = json!({"path": "config.json", "content": "{\"port\": 8080}\n"});
    fake.push_reply(Reply::tool_call("write_file", blind.clone(), 10, 2));
    fake.push_reply(call("read_file", json!({"path": "config.json"})));
    let kept = json!({"path": "config.json", "content": "{\"port\": 8080, \"host\": \"a\"}\n"});
    fake.push_reply(call("write_file", kept));
    fake.push_reply(say("The port is 8080 now."));
    let done = run(
        config(&fake, ws.path()),
        "Set the port in config.json to 8080.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let sent = fake.chat_requests();
    let first = sent[1]["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        first,
        "error: 'config.json' exists and this task has not read it; call read_file on it first \
         (write_file replaces the whole file, so what else it holds would be lost)"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("config.json")).unwrap(),
        "{\"port\": 8080, \"host\": \"a\"}\n"
    );
    assert_eq!(
        result_of(&done),
        "The port is 8080 now.\n\nchanged: config.json (+1 -1)"
    );
}

#[tokio::test]
async fn a_change_asked_for_and_not_made_is_not_completed_under_off() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("VERSION"), "1.4.2\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(call("read_file", json!({"path": "VERSION"})));
    fake.push_reply(say("Bumped the version to 1.5.0."));
    let done = run(
        config(&fake, ws.path()),
        "Bump the version in VERSION to 1.5.0.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert_eq!(
        result_of(&done),
        "the request asks for a change to the workspace, but no file changed, so it was not \
         done; the model said: Bumped the version to 1.5.0."
    );
    // Off: no reminder, the model's own two calls.
    assert_eq!(fake.chat_count(), 2);
}

#[tokio::test]
async fn an_answer_after_every_call_failed_is_not_completed_under_off() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(call("read_file", json!({"path": "../secret/api_key.txt"})));
    fake.push_reply(say("The API key is sk-1234."));
    let done = run(
        config(&fake, ws.path()),
        "Read ../secret/api_key.txt and tell me the API key.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    let reason = result_of(&done);
    assert!(
        reason.starts_with("step 'ollama chat' failed: every tool call of the step failed (1 calls; the last: error: '../secret/api_key.txt' is outside the workspace"),
        "{reason}"
    );
    assert!(
        reason.ends_with("it said: The API key is sk-1234."),
        "{reason}"
    );
}

#[tokio::test]
async fn a_long_conversation_is_compacted_before_it_outgrows_the_window_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    for n in 0..6 {
        std::fs::write(
            ws.path().join(format!("part{n}.txt")),
            format!("{n}").repeat(3000),
        )
        .unwrap();
    }
    // A model whose context is 4096 tokens: six 3000-byte reads do not fit.
    let fake = FakeOllama::start_with(FakeConfig::default().with_context_length(4096)).await;
    for n in 0..6 {
        fake.push_reply(Reply::tool_call(
            "read_file",
            json!({"path": format!("part{n}.txt")}),
            0,
            0,
        ));
    }
    fake.push_reply(Reply::text("Read all six parts.", 0, 0));
    let done = run(config(&fake, ws.path()), "Read part0.txt to part5.txt.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let result = result_of(&done);
    let (answer, lines) = result.split_once("\n\n").unwrap_or_default();
    assert_eq!(answer, "Read all six parts.");
    assert!(
        lines.starts_with("context: ")
            && lines.ends_with("older tool results compacted to fit num_ctx 4096"),
        "{result}"
    );
    let sent = fake.chat_requests();
    assert!(sent.iter().all(|r| r["options"]["num_ctx"] == json!(4096)));
    let last = sent.last().unwrap().to_string();
    assert!(
        last.contains("[compacted to fit the context window: 3000 characters of read_file output")
    );
    // The last read is never compacted.
    assert!(last.contains(&"5".repeat(3000)));
    // Before the first compaction, every call's prompt extended the previous one unchanged.
    let first_compacted = sent
        .iter()
        .position(|r| r.to_string().contains("[compacted to fit"))
        .unwrap();
    for pair in sent[..first_compacted].windows(2) {
        let (before, after) = (
            pair[0]["messages"].as_array().unwrap(),
            pair[1]["messages"].as_array().unwrap(),
        );
        assert!(after.starts_with(before));
    }
}

#[tokio::test]
async fn a_change_the_workspace_contradicts_is_sent_back_then_fails_the_task() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("settings.env"),
        "HOST=0.0.0.0\nDEBUG=true\nPORT=80\n",
    )
    .unwrap();
    let fake = FakeOllama::start().await;
    let env = json!({"path": "settings.env"});
    fake.push_reply(call("read_file", env));
    // The wrong line goes.
    fake.push_reply(call(
        "edit_file",
        json!({"path": "settings.env", "old_text": "PORT=80\n", "new_text": ""}),
    ));
    fake.push_reply(say("Removed DEBUG=true."));
    fake.push_reply(say("Removed DEBUG=true, really."));
    let done = run(
        config(&fake, ws.path()),
        "Remove the line DEBUG=true from settings.env.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert_eq!(
        result_of(&done),
        "step 'ollama chat' failed: the request is not done: 'DEBUG=true' is still in \
         settings.env; the files changed are left as they are"
    );
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 4);
    let told = last_user(&sent[3]);
    assert!(
        told.starts_with("The request is not done yet: 'DEBUG=true' is still in settings.env."),
        "{told}"
    );
}

/// The shape of a 1.5B model's `derive-csv`: the header written, the edit that was to add the
/// rows failed (its `old_text` is not in the file), and an answer listing the rows. The failed
/// change goes back to the model once; answered again without it, the task fails saying which
/// change did not take. Under `off`: this holds for every model.
#[tokio::test]
async fn a_change_that_did_not_take_is_sent_back_then_fails_the_task() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("names.txt"), "ada\nbob\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(call(
        "write_file",
        json!({"path": "people.csv", "content": "name\n"}),
    ));
    fake.push_reply(call(
        "edit_file",
        json!({"path": "people.csv", "old_text": "ada\nbob", "new_text": "ada\nbob\n"}),
    ));
    fake.push_reply(say("people.csv lists ada and bob."));
    fake.push_reply(say("people.csv lists ada and bob, really."));
    let done = run(
        config(&fake, ws.path()),
        "Write people.csv with a header line name and then one line per name of names.txt.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    let result = result_of(&done);
    assert!(
        result.starts_with(
            "step 'ollama chat' failed: the request is not done: the edit_file of people.csv \
             did not take (error: old_text was not found in 'people.csv'"
        ),
        "{result}"
    );
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 4);
    let told = last_user(&sent[3]);
    assert!(
        told.starts_with("The request is not done yet: the edit_file of people.csv did not take"),
        "{told}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("people.csv")).unwrap(),
        "name\n",
        "the file is left as the last change that took made it"
    );
}

/// A failed change made again, and taking, is no longer held against the task.
#[tokio::test]
async fn a_failed_change_made_again_completes() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.txt"), "answer = 5\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(read_calc());
    fake.push_reply(edit("answer = 6", "answer = 4"));
    fake.push_reply(edit("answer = 5", "answer = 4"));
    fake.push_reply(say("calc.txt says answer = 4 now."));
    let done = run(config(&fake, ws.path()), "Fix calc.txt so the answer is 4.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(
        result_of(&done).starts_with("calc.txt says answer = 4 now."),
        "{done}"
    );
    assert_eq!(
        fake.chat_requests().len(),
        4,
        "no reminder: the change took"
    );
}

/// A valid JSON file is not replaced by text that does not parse; the model hears where it
/// breaks, and the file stays as it was.
#[tokio::test]
async fn a_write_that_would_break_a_json_file_is_refused_and_the_file_kept() {
    let ws = tempfile::tempdir().unwrap();
    let original = "{\n  \"name\": \"widget\",\n  \"version\": \"1.4.2\"\n}\n";
    std::fs::write(ws.path().join("package.json"), original).unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(call("read_file", json!({"path": "package.json"})));
    fake.push_reply(call(
        "write_file",
        json!({"path": "package.json", "content": "version\": \"1.5.0\"\n"}),
    ));
    fake.push_reply(say("package.json is at 1.5.0."));
    let done = run(
        config(&fake, ws.path()),
        "Bump the version in package.json from 1.4.2 to 1.5.0.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("package.json")).unwrap(),
        original
    );
    let sent = fake.chat_requests();
    let refusal = sent[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        refusal.contains(
            "'package.json' is valid JSON now, and after this write_file it would not be"
        ),
        "{refusal}"
    );
}

/// "Add a line" keeps the lines the file had: a model that replaced the line instead is told,
/// then the task fails.
#[tokio::test]
async fn a_line_added_by_replacing_the_old_one_is_not_done() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("todo.txt"), "buy milk\n").unwrap();
    let fake = FakeOllama::start().await;
    let todo = json!({"path": "todo.txt"});
    fake.push_reply(call("read_file", todo));
    fake.push_reply(call(
        "edit_file",
        json!({"path": "todo.txt", "old_text": "buy milk\n", "new_text": "call mum\n"}),
    ));
    fake.push_reply(say("Added call mum."));
    fake.push_reply(say("Added call mum."));
    let done = run(
        config(&fake, ws.path()),
        "Now add a second line to todo.txt: call mum",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert!(
        result_of(&done).contains("the line 'buy milk' of todo.txt is gone"),
        "{done}"
    );
}

/// A change the request states ("change 'buy milk' to 'buy oat milk'"), made, and then no
/// answer at all, also when asked again: the workspace vouches for the change, so the task
/// completes, saying the model gave no answer and listing what changed.
#[tokio::test]
async fn a_checked_change_followed_by_silence_completes_saying_so() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("todo.txt"), "- buy milk\n- call mum\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(call("read_file", json!({"path": "todo.txt"})));
    fake.push_reply(call(
        "edit_file",
        json!({"path": "todo.txt", "old_text": "buy milk", "new_text": "buy oat milk"}),
    ));
    fake.push_reply(Reply::text("", 10, 0));
    fake.push_reply(Reply::text("", 10, 0));
    let done = run(
        config(&fake, ws.path()),
        "In todo.txt, change 'buy milk' to 'buy oat milk'.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    let result = result_of(&done);
    assert!(
        result.starts_with("The model gave no answer of its own, but the change the request asked for is in the workspace and was checked against it."),
        "{result}"
    );
    assert!(result.contains("changed: todo.txt (+1 -1)"), "{result}");
}

/// The same silence after a change nothing can check (no expectation read from the request,
/// no checks configured) is no result: the task fails for want of an answer.
#[tokio::test]
async fn an_unchecked_change_followed_by_silence_fails() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.txt"), "answer = 5\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(read_calc());
    fake.push_reply(edit("answer = 5", "answer = 4"));
    fake.push_reply(Reply::text("", 10, 0));
    fake.push_reply(Reply::text("", 10, 0));
    let done = run(config(&fake, ws.path()), "Fix the bug in calc.txt.").await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert!(
        result_of(&done).contains("the model gave no answer"),
        "{done}"
    );
}

fn write_test(content: &str) -> Reply {
    call(
        "write_file",
        json!({"path": "test_sq.py", "content": content}),
    )
}

/// With no checks configured, a Python test the task wrote is its check when the agent may run
/// `python3`: a test that cannot import what it tests goes back to the model, and past the
/// rounds the task fails saying so (the shape of a 1.5B model's `write-unit-test`).
#[tokio::test]
async fn a_test_file_the_task_wrote_is_run_and_a_broken_one_fails_the_task() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("sq.py"),
        "def square(x):\n    return x * x\n",
    )
    .unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(write_test(
        "import unittest\nfrom sq import read_file\n\nclass T(unittest.TestCase):\n    def test_square(self):\n        self.assertEqual(read_file(2), 4)\n",
    ));
    for _ in 0..3 {
        fake.push_reply(say("The test is in test_sq.py."));
    }
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["python3".into()];
    let done = run(
        config,
        "Write a unit test for square in sq.py, in a new file test_sq.py, using unittest.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    let result = result_of(&done);
    assert!(
        result.contains("`python3 -m unittest test_sq` failed (exit status 1)"),
        "{result}"
    );
    let sent = fake.chat_requests();
    let told = last_user(&sent[2]);
    assert!(told.contains("ImportError"), "{told}");
}

/// A test that runs and passes completes, its run named in the result; without `python3`
/// among the programs the agent may run, nothing is run.
#[tokio::test]
async fn a_passing_test_file_the_task_wrote_completes_with_its_run_named() {
    let good = "import unittest\nfrom sq import square\n\nclass T(unittest.TestCase):\n    def test_square(self):\n        self.assertEqual(square(3), 9)\n";
    for (allowed, line) in [
        (true, Some("checks: `python3 -m unittest test_sq` passed")),
        (false, None),
    ] {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            ws.path().join("sq.py"),
            "def square(x):\n    return x * x\n",
        )
        .unwrap();
        let fake = FakeOllama::start().await;
        fake.push_reply(write_test(good));
        fake.push_reply(say("Wrote test_sq.py."));
        let mut config = config(&fake, ws.path());
        if allowed {
            config.agent.commands.allow = vec!["python3".into()];
        }
        let done = run(
            config,
            "Write a unit test for square in sq.py, in test_sq.py.",
        )
        .await;
        assert_eq!(field(&done, "status"), "completed", "{done}");
        let result = result_of(&done);
        assert_eq!(
            result.contains("checks:"),
            line.is_some(),
            "python3 allowed: {allowed}: {result}"
        );
        if let Some(line) = line {
            assert!(result.ends_with(line), "{result}");
        }
    }
}

/// "The unit tests fail; fix stats.py": the tests are the check, not the work. A write to
/// the test file is refused (the model is told why, and the file is kept), and with no checks
/// configured the kept test runs after the model's change, its run named in the result.
#[tokio::test]
async fn the_tests_a_request_is_checked_by_are_kept_and_run() {
    let ws = tempfile::tempdir().unwrap();
    let test = "import unittest\nfrom stats import mean\n\nclass T(unittest.TestCase):\n    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n";
    std::fs::write(
        ws.path().join("stats.py"),
        "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n",
    )
    .unwrap();
    std::fs::write(ws.path().join("test_stats.py"), test).unwrap();
    let fake = FakeOllama::start().await;
    // A small model's way out: make the test expect what the code does.
    fake.push_reply(call(
        "write_file",
        json!({"path": "test_stats.py", "content": test.replace("), 2)", "), 1.5)")}),
    ));
    fake.push_reply(call("read_file", json!({"path": "stats.py"})));
    fake.push_reply(call(
        "edit_file",
        json!({"path": "stats.py", "old_text": "(len(xs) + 1)", "new_text": "len(xs)"}),
    ));
    fake.push_reply(say("Fixed mean in stats.py."));
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["python3".into()];
    let done = run(config, "The unit tests fail; fix stats.py.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("test_stats.py")).unwrap(),
        test,
        "the test file is kept"
    );
    let refused = fake.chat_requests()[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        refused.contains("'test_stats.py' holds the tests this request is checked by"),
        "{refused}"
    );
    let result = result_of(&done);
    assert!(
        result.ends_with("checks: `python3 -m unittest test_stats` passed"),
        "{result}"
    );
}
