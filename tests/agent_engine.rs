//! The agent engine against a scripted fake Ollama: planning, steps, the tool-calling loop,
//! the workspace sandbox, commands and cancellation. Real files live in temp workspaces.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_mcp::agent::Agent;
use agent_mcp::config::Config;
use agent_mcp::store::{MemoryStore, TaskStore};
use agent_mcp::task::{Session, Task, TaskState};
use serde_json::{Value, json};
use support::calls::{edit, list, read, run, run_in, search, write};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply, tool_results};
use support::harness::{
    HttpClient, HttpServer, eventually, field, is_terminal, process_gone, result_of, tool_text,
    workspace_config,
};

const DELAY: Duration = Duration::from_millis(250);

fn config(fake: &FakeOllama, workspace: &Path) -> Config {
    workspace_config(&fake.url(), workspace)
}

/// The configuration with `agent.planning` on: the model first plans steps.
fn planning_config(fake: &FakeOllama, workspace: &Path) -> Config {
    let mut config = config(fake, workspace);
    config.agent.planning = true;
    config
}

/// What `agent_status` showed while the task ran.
#[derive(Default, Debug)]
struct Seen {
    states: Vec<String>,
    completed: Vec<String>,
    current: Vec<String>,
}

fn push_new(list: &mut Vec<String>, value: String) {
    if list.last() != Some(&value) {
        list.push(value);
    }
}

/// Serves `config`, submits `request` and follows the task to its end: the final status text.
async fn run_to_end(config: Config, request: &str) -> String {
    let server = HttpServer::start(config).await;
    let client = server.client();
    let id = client.agent_run(request).await;
    watch(&client, &id).await.0
}

/// Polls `agent_status` until the task is terminal; returns the final text and what changed.
async fn watch(client: &HttpClient, task_id: &str) -> (String, Seen) {
    let mut seen = Seen::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = client.agent_status(task_id).await;
        let state = field(&text, "status");
        push_new(&mut seen.states, state.clone());
        push_new(&mut seen.completed, field(&text, "completed_tasks"));
        let current = field(&text, "current_task");
        if !current.is_empty() && !seen.current.contains(&current) {
            seen.current.push(current);
        }
        if is_terminal(&state) {
            return (text, seen);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task did not finish in time:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}

fn plan_json(steps: &[(&str, &str, &[&str])]) -> String {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(id, title, deps)| {
            json!({"id": id, "title": title, "instructions": format!("Do {title}."), "dependencies": deps})
        })
        .collect();
    json!({ "steps": steps }).to_string()
}

fn delayed(reply: Reply) -> Reply {
    Reply::delayed(DELAY, reply)
}

/// The last message's text of a chat request body.
fn last_content(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

async fn wait_gone(pid: u32) {
    let what = format!("process {pid} ending");
    eventually(Duration::from_secs(5), &what, || async {
        process_gone(pid).then_some(())
    })
    .await;
}

/// A fresh workspace and a fake Ollama whose first reply asks to run `argv` there.
async fn asked_to_run(argv: &[&str]) -> (tempfile::TempDir, FakeOllama) {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::tool_call("run_command", json!({"argv": argv}), 1, 1));
    (ws, fake)
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[tokio::test]
async fn a_three_step_plan_runs_in_dependency_order_with_progress() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    let plan = plan_json(&[
        ("survey", "Survey the code", &[]),
        ("fix", "Fix the bug", &["survey"]),
        ("docs", "Write docs", &[]),
    ]);
    fake.push_reply(delayed(Reply::text(&plan, 100, 40)));
    fake.push_reply(delayed(Reply::text("A done", 50, 10)));
    fake.push_reply(Reply::tool_call(
        "run_command",
        json!({"argv": ["sleep", "0.5"]}),
        30,
        5,
    ));
    fake.push_reply(delayed(Reply::text("B done", 70, 15)));
    fake.push_reply(delayed(Reply::text("C done", 40, 8)));
    fake.push_reply(delayed(Reply::text("All done.", 200, 20)));
    let mut config = planning_config(&fake, ws.path());
    config.agent.commands.allow = vec!["sleep".into()];
    let server = HttpServer::start(config).await;
    let client = server.client();

    let id = client
        .agent_run("Survey the code, look into the bug, and outline its docs.")
        .await;
    let (done, seen) = watch(&client, &id).await;

    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(result_of(&done), "All done.");
    assert_eq!(field(&done, "completed_tasks"), "3/3");
    assert_eq!(field(&done, "token_usage"), "input=490 output=98 total=588");
    // survey (60) → fix (35 + 85) is heavier than docs (48); planning and synthesis are on
    // no step's chain.
    assert_eq!(field(&done, "critical_path_tokens"), "180");
    assert!(seen.states.contains(&"planning".to_owned()), "{seen:?}");
    assert!(seen.states.contains(&"running".to_owned()), "{seen:?}");
    let completed: Vec<&str> = seen
        .completed
        .iter()
        .map(String::as_str)
        .filter(|c| c.ends_with("/3"))
        .collect();
    assert_eq!(completed, ["0/3", "1/3", "2/3", "3/3"], "{seen:?}");
    // Each phase was shown, in this order.
    let expected = [
        "planning",
        "Survey the code",
        "Fix the bug (run_command: sleep 0.5)",
        "Write docs",
        "final answer",
    ];
    let shown: Vec<&str> = seen
        .current
        .iter()
        .map(String::as_str)
        .filter(|c| expected.contains(c))
        .collect();
    assert_eq!(shown, expected, "{seen:?}");

    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 6);
    // Planning: a JSON-schema format bounded by max_steps, no tools, the configured options.
    assert_eq!(
        sent[0]["format"]["properties"]["steps"]["maxItems"],
        json!(8)
    );
    assert!(sent[0].get("tools").is_none());
    // The model reports no `thinking`: `think` is not sent (true would be a 400). Its context
    // length (131072) is capped by ollama.num_ctx.
    assert!(sent[0].get("think").is_none(), "{}", sent[0]);
    assert_eq!(sent[0]["options"]["num_ctx"], json!(32768));
    // Steps are offered the tools.
    assert!(sent[1]["tools"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(last_content(&sent[1]).contains("Do Survey the code."));
    // The dependent step sees its dependency's result; the independent one does not.
    let fix = last_content(&sent[2]);
    assert!(
        fix.contains("Do Fix the bug.") && fix.contains("A done"),
        "{fix}"
    );
    assert_eq!(tool_results(&sent[3]).len(), 1);
    assert!(tool_results(&sent[3])[0].1.contains("exit status: 0"));
    let docs = last_content(&sent[4]);
    assert!(
        docs.contains("Do Write docs.") && !docs.contains("A done"),
        "{docs}"
    );
    // Two leaves: the answer is a synthesis of their results.
    let synthesis = last_content(&sent[5]);
    assert!(
        synthesis.contains("B done") && synthesis.contains("C done"),
        "{synthesis}"
    );
    assert!(sent[5].get("tools").is_none());
}

#[tokio::test]
async fn invalid_plans_fall_back_to_one_visible_step() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    let mut config = planning_config(&fake, ws.path());
    config.agent.max_steps = 2;
    let server = HttpServer::start(config).await;
    let client = server.client();
    let cases = [
        (
            "this is not json".to_owned(),
            "not valid JSON for the plan schema",
        ),
        (
            plan_json(&[("a", "A", &[]), ("b", "B", &["zz"])]),
            "step 'b' depends on unknown step 'zz'",
        ),
        (
            plan_json(&[("a", "A", &["b"]), ("b", "B", &["a"])]),
            "dependency cycle through step 'a'",
        ),
        (
            plan_json(&[("a", "A", &[]), ("b", "B", &[]), ("c", "C", &[])]),
            "3 steps, more than agent.max_steps (2)",
        ),
    ];
    for (i, (plan, reason)) in cases.iter().enumerate() {
        fake.push_reply(Reply::text(plan, 11, 3));
        fake.push_reply(delayed(Reply::text(&format!("answer {i}"), 5, 2)));
        let id = client.agent_run(&format!("request {i}")).await;
        let (done, seen) = watch(&client, &id).await;
        assert_eq!(field(&done, "status"), "completed", "{done}");
        assert_eq!(result_of(&done), format!("answer {i}"));
        assert_eq!(field(&done, "completed_tasks"), "1/1");
        assert_eq!(field(&done, "critical_path_tokens"), "0");
        assert_eq!(field(&done, "token_usage"), "input=16 output=5 total=21");
        let title = format!("ollama chat (plan rejected: {reason})");
        assert!(seen.current.contains(&title), "{title}: {seen:?}");
    }
    assert_eq!(fake.chat_count(), 8);
}

#[tokio::test]
async fn the_model_fixes_a_failing_check_in_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.txt"), "answer = 5\n").unwrap();
    let fake = FakeOllama::start().await;
    let check = json!({"argv": ["grep", "-q", "answer = 4", "calc.txt"]});
    fake.push_reply(Reply::tool_call("list_dir", json!({}), 10, 1));
    fake.push_reply(Reply::tool_call(
        "read_file",
        json!({"path": "calc.txt"}),
        10,
        1,
    ));
    fake.push_reply(Reply::tool_call("run_command", check.clone(), 10, 1));
    fake.push_reply(Reply::tool_call(
        "edit_file",
        json!({"path": "calc.txt", "old_text": "answer = 5", "new_text": "answer = 4"}),
        10,
        1,
    ));
    fake.push_reply(Reply::tool_call("run_command", check, 10, 1));
    fake.push_reply(Reply::tool_call(
        "write_file",
        json!({"path": "notes/FIX.md", "content": "Fixed calc.txt\n"}),
        10,
        1,
    ));
    fake.push_reply(Reply::text("Fixed: the answer is 4 now.", 10, 4));
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["grep".into()];
    let done = run_to_end(config, "Fix the failing check.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(
        result_of(&done),
        "Fixed: the answer is 4 now.\n\nchanged: calc.txt (+1 -1), notes/FIX.md (new, +1)"
    );
    assert_eq!(field(&done, "completed_tasks"), "1/1");
    assert_eq!(field(&done, "token_usage"), "input=70 output=10 total=80");
    assert_eq!(field(&done, "critical_path_tokens"), "0");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("calc.txt")).unwrap(),
        "answer = 4\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/FIX.md")).unwrap(),
        "Fixed calc.txt\n"
    );

    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 7);
    let results = tool_results(&sent[6]);
    let names: Vec<&str> = results.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "list_dir",
            "read_file",
            "run_command",
            "edit_file",
            "run_command",
            "write_file"
        ]
    );
    assert!(
        results[0].1.contains("calc.txt (11 bytes)"),
        "{}",
        results[0].1
    );
    assert_eq!(results[1].1, "answer = 5\n");
    assert!(results[2].1.contains("exit status: 1"), "{}", results[2].1);
    assert_eq!(results[3].1, "replaced 1 occurrence in 'calc.txt'");
    assert!(results[4].1.contains("exit status: 0"), "{}", results[4].1);
    assert_eq!(results[5].1, "created 'notes/FIX.md' (15 bytes)");
    // The model's own tool-calling turns are sent back with the results.
    let calls: usize = sent[6]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .count();
    assert_eq!(calls, 6);
}

#[tokio::test]
async fn a_step_still_calling_tools_at_max_iterations_fails() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    for _ in 0..3 {
        fake.push_reply(Reply::tool_call("list_dir", json!({}), 3, 1));
    }
    let mut config = config(&fake, ws.path());
    config.agent.max_iterations = 2;
    let done = run_to_end(config, "Loop forever.").await;
    assert_eq!(field(&done, "status"), "failed");
    let reason = result_of(&done);
    assert!(reason.starts_with("step 'ollama chat' failed:"), "{reason}");
    assert!(reason.contains("agent.max_iterations (2)"), "{reason}");
    assert_eq!(field(&done, "token_usage"), "input=6 output=2 total=8");
    assert_eq!(fake.chat_count(), 2);
}

#[cfg(unix)]
#[tokio::test]
async fn sandbox_escapes_are_refused_as_tool_errors() {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("out_dir")).unwrap();
    std::os::unix::fs::symlink(&secret, ws.join("out_file")).unwrap();
    std::os::unix::fs::symlink(outside.join("new.txt"), ws.join("dangling")).unwrap();
    std::fs::hard_link(&secret, ws.join("hard.txt")).unwrap();

    // Each refusal, and the attempts that must get it.
    let refusals: [(&str, Vec<(&str, Value)>); 5] = [
        (
            "outside the workspace",
            vec![
                read("../outside/secret.txt"),
                read(secret.to_str().unwrap()),
                read("/etc/passwd"),
                list(".."),
                write("../outside/pwned.txt", "x"),
                run_in("../outside", &["echo"]),
            ],
        ),
        (
            "symbolic link",
            vec![
                read("out_file"),
                read("out_dir/secret.txt"),
                search("SECRET", "out_dir"),
                write("out_dir/pwned.txt", "x"),
                write("dangling", "x"),
                edit("out_file", "TOP", "NOT"),
            ],
        ),
        ("hard links", vec![read("hard.txt")]),
        (
            "not an allowed program",
            vec![run(&["rm", "-rf", "../outside"])],
        ),
        (
            "is a path; give a program name",
            vec![run(&["/bin/echo", "x"])],
        ),
    ];
    let attempts: Vec<(&str, Value, &str)> = refusals
        .into_iter()
        .flat_map(|(why, calls)| calls.into_iter().map(move |(name, args)| (name, args, why)))
        .collect();
    // The reading attempts in one reply, the rest in the next: a write in the same reply as a
    // read is held back until the model has seen the read (the small-model steering), and
    // here every write must reach its tool to be refused there.
    let (mut attempts, others): (Vec<_>, Vec<_>) = attempts
        .into_iter()
        .partition(|(name, _, _)| matches!(*name, "read_file" | "list_dir" | "search_text"));
    let reads = attempts.len();
    attempts.extend(others);
    let fake = FakeOllama::start().await;
    for batch in [&attempts[..reads], &attempts[reads..]] {
        let calls: Vec<(&str, Value)> = batch
            .iter()
            .map(|(name, args, _)| (*name, args.clone()))
            .collect();
        fake.push_reply(Reply::tool_calls(&calls, 1, 1));
    }
    fake.push_reply(Reply::tool_calls(
        &[
            // Shell metacharacters are plain arguments: nothing is touched.
            run(&["echo", "x; touch pwned", "$(touch pwned2)"]),
            // Replacing a hard-linked file breaks the link instead of writing through it.
            write("hard.txt", "mine\n"),
        ],
        1,
        1,
    ));
    fake.push_reply(Reply::tool_call(
        "search_text",
        json!({"pattern": "SECRET"}),
        1,
        1,
    ));
    fake.push_reply(Reply::text("Nothing escaped.", 1, 1));
    let mut config = config(&fake, &ws);
    config.agent.commands.allow = vec!["echo".into()];
    let done = run_to_end(config, "Try to escape.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");

    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 5);
    let first = tool_results(&sent[2]);
    assert_eq!(first.len(), attempts.len());
    for ((name, args, why), (tool, text)) in attempts.iter().zip(&first) {
        assert_eq!(tool, name);
        assert!(
            text.starts_with("error: ") && text.contains(why),
            "{name} {args}: {text}"
        );
        assert!(!text.contains("TOP SECRET"), "{name} {args}: {text}");
    }
    let second = tool_results(&sent[4]);
    let second = &second[first.len()..];
    assert_eq!(
        second[0].1,
        "$ echo x; touch pwned $(touch pwned2)\nexit status: 0\nstdout:\nx; touch pwned $(touch pwned2)\n"
    );
    // A hard-linked file cannot be read, so it cannot be replaced either: the task never read
    // it (and a replacement would go by rename, never through the other link).
    assert!(
        second[1]
            .1
            .starts_with("error: 'hard.txt' exists and this task has not read it"),
        "{}",
        second[1].1
    );
    assert_eq!(second[2].1, "no matches for 'SECRET'");

    // Nothing outside was read into a reply, changed or created.
    assert_eq!(support::files::file_names(&outside), ["secret.txt"]);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP SECRET\n");
    assert!(!ws.join("pwned").exists() && !ws.join("pwned2").exists());
    assert!(!base.path().join("pwned").exists());
}

#[cfg(unix)]
#[tokio::test]
async fn a_command_past_its_timeout_is_killed_and_huge_output_is_capped() {
    let (ws, fake) = asked_to_run(&["sh", "-c", "echo $$ > sh.pid; exec sleep 30"]).await;
    fake.push_reply(Reply::tool_call(
        "run_command",
        json!({"argv": ["yes"]}),
        1,
        1,
    ));
    fake.push_reply(Reply::text("done", 1, 1));
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["sh".into(), "yes".into()];
    config.agent.commands.timeout = Duration::from_secs(1);
    config.agent.commands.max_output_bytes = bytesize::ByteSize::kib(4);
    let server = HttpServer::start(config).await;
    let client = server.client();
    let started = std::time::Instant::now();
    let id = client.agent_run("Run things.").await;
    let (done, _) = watch(&client, &id).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert!(started.elapsed() < Duration::from_secs(15));

    let results = tool_results(&fake.chat_requests()[2]);
    assert!(
        results[0].1.contains("timed out after 1s"),
        "{}",
        results[0].1
    );
    let pid = read_pid(&ws.path().join("sh.pid")).expect("the command wrote its pid");
    wait_gone(pid).await;
    let yes = &results[1].1;
    assert!(
        yes.contains("timed out after 1s") && yes.contains("bytes omitted"),
        "{yes}"
    );
    assert!(yes.len() < 4096 + 200, "{} bytes", yes.len());
}

/// The agent without the HTTP stack, to cancel a running task directly.
struct Rig {
    agent: Agent,
    store: Arc<MemoryStore>,
}

impl Rig {
    async fn start(config: &Config) -> Rig {
        let store = Arc::new(MemoryStore::new());
        let agent = Agent::start(config, store.clone())
            .await
            .expect("agent starts");
        Rig { agent, store }
    }

    async fn submit(&self, request: &str) -> uuid::Uuid {
        let session = Session::new(None);
        self.store.create_session(&session).await.unwrap();
        let task = Task::new(session.id, None, request.into(), None);
        self.store.insert_task(&task).await.unwrap();
        self.agent.core().enqueue(task.id);
        task.id
    }

    async fn task(&self, id: uuid::Uuid) -> Task {
        self.store.task(id).await.unwrap().expect("task exists")
    }

    async fn wait_until(&self, id: uuid::Uuid, what: &str, ok: impl Fn(&Task) -> bool) -> Task {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let task = self.task(id).await;
            if ok(&task) {
                return task;
            }
            assert!(tokio::time::Instant::now() < deadline, "{what}: {task:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn cancelling_during_a_command_kills_its_process_group() {
    let (ws, fake) = asked_to_run(&[
        "sh",
        "-c",
        "sleep 30 & echo $! > bg.pid; echo $$ > sh.pid; wait",
    ])
    .await;
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["sh".into()];
    config.agent.commands.timeout = Duration::from_secs(60);
    let rig = Rig::start(&config).await;
    let id = rig.submit("Run a long command.").await;
    let pids: [PathBuf; 2] = [ws.path().join("sh.pid"), ws.path().join("bg.pid")];
    let running = rig
        .wait_until(id, "the command should start", |t| {
            t.current_task.contains("run_command: sh -c")
                && pids.iter().all(|p| read_pid(p).is_some())
        })
        .await;
    assert_eq!(running.state, TaskState::Running);
    assert_eq!(
        running.current_task,
        "ollama chat (run_command: sh -c sleep 30 & echo $! > bg.pid; echo $$ > sh.pid; wait)"
    );
    let started = std::time::Instant::now();
    rig.agent.core().cancel(id).await.unwrap();
    let done = rig
        .wait_until(id, "the task should end", |t| t.state.is_terminal())
        .await;
    assert_eq!(done.state, TaskState::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
    for pid in &pids {
        wait_gone(read_pid(pid).unwrap()).await;
    }
    assert_eq!(fake.chat_count(), 1);
    rig.agent.shutdown().await;
}

#[tokio::test]
async fn cancelling_during_a_chat_aborts_the_stream() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::Hang);
    let rig = Rig::start(&config(&fake, ws.path())).await;
    let id = rig.submit("Hang.").await;
    fake.until_chat_started(Duration::from_secs(10), "no chat started")
        .await;
    rig.agent.core().cancel(id).await.unwrap();
    let done = rig
        .wait_until(id, "cancelled", |t| t.state.is_terminal())
        .await;
    assert_eq!(done.state, TaskState::Cancelled);
    let budget = Duration::from_secs(10);
    fake.until_chats_closed(budget, "the stream stayed open")
        .await;
    rig.agent.shutdown().await;
}

#[tokio::test]
async fn a_model_without_tools_runs_as_plain_chat_with_configured_think_and_num_ctx() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start_with(
        FakeConfig::default().with_capabilities(&["completion", "thinking"]),
    )
    .await;
    let chunk = |message: Value, done: bool| {
        let mut line = json!({"model": "test-model", "created_at": "2026-08-21T12:00:00Z",
                              "message": message, "done": done});
        if done {
            line["done_reason"] = json!("stop");
            line["prompt_eval_count"] = json!(9);
            line["eval_count"] = json!(4);
        }
        line.to_string()
    };
    fake.push_reply(Reply::Raw(vec![
        chunk(
            json!({"role": "assistant", "content": "", "thinking": "Let me think."}),
            false,
        ),
        chunk(json!({"role": "assistant", "content": "Plain "}), false),
        chunk(json!({"role": "assistant", "content": "answer."}), true),
    ]));
    let mut config = config(&fake, ws.path());
    config.agent.think = agent_mcp::config::ThinkSetting::On;
    config.ollama.num_ctx = 4096;
    let done = run_to_end(config, "Hello").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    // Thinking text stays out of the result.
    assert_eq!(result_of(&done), "Plain answer.");
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].get("tools").is_none(), "{}", sent[0]);
    assert_eq!(sent[0]["think"], json!(true));
    assert_eq!(sent[0]["options"]["num_ctx"], json!(4096));
}

#[tokio::test]
async fn tool_calls_split_across_chunks_are_all_executed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta").unwrap();
    let fake = FakeOllama::start().await;
    let call = |index: u32, path: &str| {
        json!({"model": "test-model", "created_at": "2026-08-21T12:00:00Z", "done": false,
               "message": {"role": "assistant", "content": "",
                           "tool_calls": [{"function": {"index": index, "name": "read_file",
                                                        "arguments": {"path": path}}}]}})
        .to_string()
    };
    fake.push_reply(Reply::Raw(vec![
        call(0, "a.txt"),
        call(1, "b.txt"),
        json!({"model": "test-model", "created_at": "2026-08-21T12:00:00Z", "done": true,
               "done_reason": "stop", "message": {"role": "assistant", "content": ""},
               "prompt_eval_count": 5, "eval_count": 2})
        .to_string(),
    ]));
    fake.push_reply(Reply::text("alpha and beta", 5, 2));
    let done = run_to_end(config(&fake, ws.path()), "Read both.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(result_of(&done), "alpha and beta");
    let results = tool_results(&fake.chat_requests()[1]);
    assert_eq!(
        results,
        [
            ("read_file".to_owned(), "alpha".to_owned()),
            ("read_file".to_owned(), "beta".to_owned())
        ]
    );
}

#[tokio::test]
async fn images_with_a_non_vision_model_fail_before_planning() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    let config = planning_config(&fake, ws.path());
    let server = HttpServer::start(config).await;
    let client = server.client();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let r = client
        .tool_call(
            "agent_run",
            json!({"request": "What is this?",
                   "images": [{"mime_type": "image/png", "data_base64": png}]}),
        )
        .await;
    let id = field(&tool_text(&r.body["result"]), "task_id");
    let (done, _) = watch(&client, &id).await;
    assert_eq!(field(&done, "status"), "failed");
    let reason = result_of(&done);
    assert!(
        reason.contains("'test-model'") && reason.contains("vision"),
        "{reason}"
    );
    assert_eq!(fake.chat_count(), 0);
}

#[tokio::test]
async fn independent_steps_run_concurrently_up_to_the_limit() {
    let ws = tempfile::tempdir().unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text(
        &plan_json(&[("a", "Left", &[]), ("b", "Right", &[]), ("c", "Third", &[])]),
        1,
        1,
    ));
    for _ in 0..3 {
        fake.push_reply(Reply::delayed(
            Duration::from_millis(400),
            Reply::text("side done", 10, 10),
        ));
    }
    fake.push_reply(Reply::text("Both sides done.", 1, 1));
    let mut config = planning_config(&fake, ws.path());
    config.agent.step_concurrency = 2;
    let done = run_to_end(config, "Do three things.").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(field(&done, "completed_tasks"), "3/3");
    assert_eq!(field(&done, "critical_path_tokens"), "20");
    assert_eq!(fake.max_concurrent_chats(), 2);
}

#[test]
fn bad_agent_settings_name_their_key() {
    for (yaml, key) in [
        (
            "agent:\n  tools:\n    disabled: [format_disk]\n",
            "agent.tools.disabled:",
        ),
        (
            "agent:\n  commands:\n    allow: [/bin/sh]\n",
            "agent.commands.allow:",
        ),
        ("agent:\n  max_steps: 0\n", "agent.max_steps:"),
        ("agent:\n  step_concurrency: 0\n", "agent.step_concurrency:"),
        ("agent:\n  max_iterations: 0\n", "agent.max_iterations:"),
        (
            "agent:\n  commands:\n    timeout: 0s\n",
            "agent.commands.timeout:",
        ),
    ] {
        let e = Config::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.starts_with(key), "{yaml}: {e}");
    }
}
