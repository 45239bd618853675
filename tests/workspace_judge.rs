//! The workspace judges a task, under every steering policy: the configured checks run after
//! the model's last change and send their failures back to it; a file is replaced only after
//! the task read it; a task asked for a change that changed nothing, or whose every call
//! failed, is not `completed`; and a long conversation is compacted before it outgrows the
//! model's context, saying so. On the fake Ollama over real HTTP, in real workspaces, with
//! real child processes for the checks.

mod support;

use std::path::Path;

use agent_mcp::config::SteeringMode;
use agent_mcp::config::{CommandsSwitch, Config};
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply, last_tool_result, last_user};
use support::harness::{field, result_of, run_task, workspace_config};
use tempfile::TempDir;

fn config(fake: &FakeOllama, workspace: &Path) -> Config {
    let mut config = workspace_config(&fake.url(), workspace);
    config.agent.steering = SteeringMode::Off;
    config
}

/// A task of this file: a workspace holding its files, the scripted model's replies, and what
/// the test changes in [`config`].
struct Task {
    ws: TempDir,
    replies: Vec<Reply>,
    fake: FakeConfig,
    configure: Box<dyn FnOnce(&mut Config)>,
}

/// What a task left: its final agent_status text, the workspace, and the fake (what the model
/// was sent).
struct Judged {
    ws: TempDir,
    fake: FakeOllama,
    done: String,
}

/// A task in a workspace holding `files` (`(path, content)`), the model answering `replies`.
fn task<N: AsRef<Path>, C: AsRef<[u8]>>(
    files: impl IntoIterator<Item = (N, C)>,
    replies: Vec<Reply>,
) -> Task {
    let ws = tempfile::tempdir().unwrap();
    for (name, content) in files {
        std::fs::write(ws.path().join(name), content).unwrap();
    }
    Task {
        ws,
        replies,
        fake: FakeConfig::default(),
        configure: Box::new(|_| {}),
    }
}

/// No files: an empty workspace.
const NO_FILES: [(&str, &str); 0] = [];

impl Task {
    fn with(self, configure: impl FnOnce(&mut Config) + 'static) -> Task {
        Task {
            configure: Box::new(configure),
            ..self
        }
    }

    fn on(self, fake: FakeConfig) -> Task {
        Task { fake, ..self }
    }

    /// Runs `request` to its end on the in-process server.
    async fn run(self, request: &str) -> Judged {
        let fake = FakeOllama::start_with(self.fake).await;
        fake.push_replies(self.replies);
        let mut config = config(&fake, self.ws.path());
        (self.configure)(&mut config);
        let done = run_task(config, request).await;
        Judged {
            ws: self.ws,
            fake,
            done,
        }
    }
}

impl Judged {
    /// The final status; a mismatch shows the whole status text.
    fn assert_status(&self, status: &str) {
        assert_eq!(field(&self.done, "status"), status, "{}", self.done);
    }

    fn result(&self) -> String {
        result_of(&self.done)
    }

    /// The chat request bodies the model was sent, in order.
    fn sent(&self) -> Vec<Value> {
        self.fake.chat_requests()
    }

    /// What the agent loop told the model last before its `n`th call (from 0).
    fn told(&self, n: usize) -> String {
        last_user(&self.sent()[n])
    }

    /// The content of a workspace file now.
    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.ws.path().join(name)).unwrap()
    }

    /// A task that failed because the model's answer was sent back once and it answered
    /// again without the change: its fourth call (after a read, a change and an answer) told
    /// it what was missing, and its result says the same.
    fn assert_sent_back_then_failed(&self, result: &str, told: &str) {
        self.assert_status("failed");
        assert!(self.result().starts_with(result), "{}", self.done);
        assert_eq!(self.sent().len(), 4);
        let told_it = self.told(3);
        assert!(told_it.starts_with(told), "{told_it}");
    }
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

/// The scripted model's reading of the request (the one call with a JSON-schema `format`
/// before the work under the `small` policy): a change or an answer, and, when the checks
/// fail before the work, whether the request is to make them pass.
fn intent(change: bool, fix_failing: Option<bool>) -> Reply {
    let wants = if change { "file changes" } else { "an answer" };
    let mut v = json!({"goal": "what the request wants", "wants": wants, "tests": false});
    if let Some(fix) = fix_failing {
        v["fix_failing"] = json!(fix);
    }
    say(&v.to_string())
}

fn small(config: &mut Config) {
    config.agent.steering = SteeringMode::Small;
}

/// A reply without any text (and no tokens of output).
fn silence() -> Reply {
    Reply::text("", 10, 0)
}

fn read(path: &str) -> Reply {
    call("read_file", json!({"path": path}))
}

fn read_calc() -> Reply {
    read("calc.txt")
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
    let replies = vec![
        read_calc(),
        edit("answer = 5", "answer = 3"),
        say("Fixed."),
        // The check failed: the model is told, and fixes it.
        edit("answer = 3", "answer = 4"),
        say("Fixed, really."),
    ];
    let done = task([("calc.txt", "answer = 5\n")], replies)
        .with(|config| config.agent.checks = check_for_4())
        .run("Fix calc.txt so the answer is 4.")
        .await;
    done.assert_status("completed");
    assert_eq!(
        done.result(),
        "Fixed, really.\n\nchanged: calc.txt (+1 -1)\n\
         checks: 1 failing → 0 failing (grep -q answer = 4 calc.txt; after 1 round of fixes)"
    );
    let sent = done.sent();
    assert_eq!(sent.len(), 5);
    let told = done.told(3);
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
    let replies = vec![
        read_calc(),
        edit("answer = 5", "answer = 3"),
        say("Fixed."),
        edit("answer = 3", "answer = 2"),
        say("Fixed now."),
    ];
    let done = task([("calc.txt", "answer = 5\n")], replies)
        .with(|config| {
            config.agent.checks = check_for_4();
            config.agent.check_rounds = 1;
        })
        .run("Fix calc.txt so the answer is 4.")
        .await;
    done.assert_status("failed");
    assert_eq!(
        done.result(),
        "step 'ollama chat' failed: the checks still fail after the model's changes \
         (checks: 1 failing → 1 failing (grep -q answer = 4 calc.txt; after 1 round of fixes); \
         `grep -q answer = 4 calc.txt` failed (exit status 1)); the files it changed are left as \
         they are"
    );
    assert_eq!(done.fake.chat_count(), 5);
}

#[tokio::test]
async fn a_file_is_replaced_only_after_the_task_read_it() {
    let blind = json!({"path": "config.json", "content": "{\"port\": 8080}\n"});
    let kept = json!({"path": "config.json", "content": "{\"port\": 8080, \"host\": \"a\"}\n"});
    let replies = vec![
        call("write_file", blind),
        read("config.json"),
        call("write_file", kept),
        say("The port is 8080 now."),
    ];
    let done = task(
        [("config.json", "{\"port\": 80, \"host\": \"a\"}\n")],
        replies,
    )
    .run("Set the port in config.json to 8080.")
    .await;
    done.assert_status("completed");
    assert_eq!(
        last_tool_result(&done.sent()[1]),
        "error: 'config.json' exists and this task has not read it; call read_file on it first \
         (write_file replaces the whole file, so what else it holds would be lost)"
    );
    assert_eq!(
        done.file("config.json"),
        "{\"port\": 8080, \"host\": \"a\"}\n"
    );
    assert_eq!(
        done.result(),
        "The port is 8080 now.\n\nchanged: config.json (+1 -1)\nchecks: none found"
    );
}

/// Whether a change is asked is the model's reading of the request (under `small`), in any
/// language: asked for and not made, the task fails saying so. Under `off` the request is not
/// read at all: a capable model's answer passes through.
#[tokio::test]
async fn a_change_asked_for_and_not_made_is_not_completed() {
    for request in [
        "Bump the version in VERSION to 1.5.0.",
        "VERSION dosyasındaki sürümü 1.5.0 yap.",
        "Badilisha toleo katika VERSION kuwa 1.5.0.",
    ] {
        let replies = vec![
            intent(true, None),
            read("VERSION"),
            say("Bumped the version to 1.5.0."),
            say("Bumped the version to 1.5.0."),
            say("Bumped the version to 1.5.0."),
        ];
        let done = task([("VERSION", "1.4.2\n")], replies)
            .with(small)
            .run(request)
            .await;
        done.assert_status("failed");
        assert!(
            done.result().starts_with(
                "the request asks for a change to the workspace, but no file changed, so it \
                 was not done; the model said: "
            ),
            "{request}: {}",
            done.done
        );
        assert_eq!(
            done.sent()[0]["format"]["required"],
            json!(["goal", "wants", "tests"])
        );
    }
    // Off: no reading, no reminder, the model's own two calls and its answer.
    let replies = vec![read("VERSION"), say("Bumped the version to 1.5.0.")];
    let done = task([("VERSION", "1.4.2\n")], replies)
        .run("Bump the version in VERSION to 1.5.0.")
        .await;
    done.assert_status("completed");
    assert_eq!(done.result(), "Bumped the version to 1.5.0.");
    assert_eq!(done.fake.chat_count(), 2);
}

#[tokio::test]
async fn an_answer_after_every_call_failed_is_not_completed_under_off() {
    let replies = vec![
        read("../secret/api_key.txt"),
        say("The API key is sk-1234."),
    ];
    let done = task(NO_FILES, replies)
        .run("Read ../secret/api_key.txt and tell me the API key.")
        .await;
    done.assert_status("failed");
    let reason = done.result();
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
    let parts = (0..6).map(|n| (format!("part{n}.txt"), n.to_string().repeat(3000)));
    let mut replies: Vec<Reply> = (0..6)
        .map(|n| Reply::tool_call("read_file", json!({"path": format!("part{n}.txt")}), 0, 0))
        .collect();
    replies.push(Reply::text("Read all six parts.", 0, 0));
    // A model whose context is 4096 tokens: six 3000-byte reads do not fit.
    let done = task(parts, replies)
        .on(FakeConfig::default().with_context_length(4096))
        .run("Read part0.txt to part5.txt.")
        .await;
    done.assert_status("completed");
    let result = done.result();
    let (answer, lines) = result.split_once("\n\n").unwrap_or_default();
    assert_eq!(answer, "Read all six parts.");
    assert!(
        lines.starts_with("context: ")
            && lines.ends_with("older tool results compacted to fit num_ctx 4096"),
        "{result}"
    );
    let sent = done.sent();
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

/// The shape of a 1.5B model's `derive-csv`: the header written, the edit that was to add the
/// rows failed (its `old_text` is not in the file), and an answer listing the rows. The failed
/// change goes back to the model once; answered again without it, the task fails saying which
/// change did not take. Under `off`: this holds for every model.
#[tokio::test]
async fn a_change_that_did_not_take_is_sent_back_then_fails_the_task() {
    let replies = vec![
        call(
            "write_file",
            json!({"path": "people.csv", "content": "name\n"}),
        ),
        call(
            "edit_file",
            json!({"path": "people.csv", "old_text": "ada\nbob", "new_text": "ada\nbob\n"}),
        ),
        say("people.csv lists ada and bob."),
        say("people.csv lists ada and bob, really."),
    ];
    let done = task([("names.txt", "ada\nbob\n")], replies)
        .run("Write people.csv with a header line name and then one line per name of names.txt.")
        .await;
    done.assert_sent_back_then_failed(
        "step 'ollama chat' failed: the request is not done: the edit_file of people.csv \
         did not take (error: old_text was not found in 'people.csv'",
        "The request is not done yet: the edit_file of people.csv did not take",
    );
    assert_eq!(
        done.file("people.csv"),
        "name\n",
        "the file is left as the last change that took made it"
    );
}

/// A failed change made again, and taking, is no longer held against the task.
#[tokio::test]
async fn a_failed_change_made_again_completes() {
    let replies = vec![
        read_calc(),
        edit("answer = 6", "answer = 4"),
        edit("answer = 5", "answer = 4"),
        say("calc.txt says answer = 4 now."),
    ];
    let done = task([("calc.txt", "answer = 5\n")], replies)
        .run("Fix calc.txt so the answer is 4.")
        .await;
    done.assert_status("completed");
    assert!(
        done.result().starts_with("calc.txt says answer = 4 now."),
        "{}",
        done.done
    );
    assert_eq!(done.sent().len(), 4, "no reminder: the change took");
}

/// A valid JSON file is not replaced by text that does not parse; the model hears where it
/// breaks, and the file stays as it was. Read as a change (`small`), the task that changed
/// nothing then fails.
#[tokio::test]
async fn a_write_that_would_break_a_json_file_is_refused_and_the_file_kept() {
    let original = "{\n  \"name\": \"widget\",\n  \"version\": \"1.4.2\"\n}\n";
    let broken = json!({"path": "package.json", "content": "version\": \"1.5.0\"\n"});
    let replies = vec![
        intent(true, None),
        read("package.json"),
        call("write_file", broken),
        say("package.json is at 1.5.0."),
    ];
    let done = task([("package.json", original)], replies)
        .with(small)
        .run("Bump the version in package.json from 1.4.2 to 1.5.0.")
        .await;
    done.assert_status("failed");
    assert_eq!(done.file("package.json"), original);
    let refusal = last_tool_result(&done.sent()[3]);
    assert!(
        refusal.contains(
            "'package.json' is valid JSON now, and after this write_file it would not be"
        ),
        "{refusal}"
    );
}

/// Silence after a change nothing can check (no checks configured) is no result: the task
/// fails for want of an answer.
#[tokio::test]
async fn an_unchecked_change_then_silence_fails() {
    let replies = vec![
        read_calc(),
        edit("answer = 5", "answer = 4"),
        silence(),
        silence(),
    ];
    let done = task([("calc.txt", "answer = 5\n")], replies)
        .run("Fix the bug in calc.txt.")
        .await;
    done.assert_status("failed");
    assert!(
        done.result().contains("the model gave no answer"),
        "{}",
        done.done
    );
}

/// A change made, and then no answer at all, also when asked again: the configured checks
/// vouch for the change, so the task completes, saying the model gave no answer and listing
/// what changed.
#[tokio::test]
async fn a_checked_change_followed_by_silence_completes_saying_so() {
    let change = json!({"path": "todo.txt", "old_text": "buy milk", "new_text": "buy oat milk"});
    let replies = vec![
        read("todo.txt"),
        call("edit_file", change),
        silence(),
        silence(),
    ];
    let done = task([("todo.txt", "- buy milk\n- call mum\n")], replies)
        .with(|config| {
            config.agent.checks = vec![
                ["grep", "-q", "buy oat milk", "todo.txt"]
                    .map(String::from)
                    .to_vec(),
            ]
        })
        .run("In todo.txt, change 'buy milk' to 'buy oat milk'.")
        .await;
    done.assert_status("completed");
    let result = done.result();
    assert!(
        result.starts_with("The model gave no answer of its own, but the change the request asked for is in the workspace and was checked against it."),
        "{result}"
    );
    assert!(result.contains("changed: todo.txt (+1 -1)"), "{result}");
}

fn write_test(content: &str) -> Reply {
    call(
        "write_file",
        json!({"path": "test_sq.py", "content": content}),
    )
}

const SQ_PY: [(&str, &str); 1] = [("sq.py", "def square(x):\n    return x * x\n")];

/// Commands on (whether or not this kernel has Landlock to confine them), `python3` the one
/// program allowed.
fn allow_python(config: &mut Config) {
    config.agent.commands.enabled = CommandsSwitch::On;
    config.agent.commands.allow = vec!["python3".into()];
}

/// With no checks configured, the workspace's Python tests (here the one the task wrote) are
/// its checks when the agent may run `python3`: a test that cannot import what it tests goes
/// back to the model, and past the rounds the task fails saying so (the shape of a 1.5B
/// model's `write-unit-test`).
#[tokio::test]
async fn a_test_file_the_task_wrote_is_run_and_a_broken_one_fails_the_task() {
    let mut replies = vec![write_test(
        "import unittest\nfrom sq import read_file\n\nclass T(unittest.TestCase):\n    def test_square(self):\n        self.assertEqual(read_file(2), 4)\n",
    )];
    replies.extend((0..3).map(|_| say("The test is in test_sq.py.")));
    let done = task(SQ_PY, replies)
        .with(allow_python)
        .run("Write a unit test for square in sq.py, in a new file test_sq.py, using unittest.")
        .await;
    done.assert_status("failed");
    let result = done.result();
    assert!(
        result.contains(
            "the model's changes left the checks worse than they began (checks: none found → 1 \
             failing (python3 -m unittest; after 2 rounds of fixes); Python syntax and names \
             (test_sq.py): passed; `python3 -m unittest` failed \
             (exit status 1))"
        ),
        "{result}"
    );
    let told = done.told(2);
    assert!(told.contains("ImportError"), "{told}");
}

/// A test that runs and passes completes, its run named in the result; when the agent may not
/// run `python3` (commands off, or an allow-list without it), nothing is run, and the result
/// says why.
#[tokio::test]
async fn a_passing_test_file_the_task_wrote_completes_with_its_run_named() {
    let good = "import unittest\nfrom sq import square\n\nclass T(unittest.TestCase):\n    def test_square(self):\n        self.assertEqual(square(3), 9)\n";
    let no_python: fn(&mut Config) = |c| {
        c.agent.commands.enabled = CommandsSwitch::On;
        c.agent.commands.allow = vec!["grep".into()];
    };
    let off: fn(&mut Config) = |c| c.agent.commands.enabled = CommandsSwitch::Off;
    for (configure, line) in [
        (
            allow_python as fn(&mut Config),
            "checks: none found → passed (python3 -m unittest)",
        ),
        (
            no_python,
            "checks: not run (`python3` is not on agent.commands.allow)",
        ),
        (
            off,
            "checks: not run (commands are off: agent.commands.enabled is false",
        ),
    ] {
        let replies = vec![write_test(good), say("Wrote test_sq.py.")];
        let done = task(SQ_PY, replies)
            .with(configure)
            .run("Write a unit test for square in sq.py, in test_sq.py.")
            .await;
        done.assert_status("completed");
        let result = done.result();
        let (_, last) = result.rsplit_once('\n').unwrap_or_default();
        assert!(last.starts_with(line), "{result}");
    }
}

/// "The unit tests fail; fix stats.py" (here in Turkish), read by the model as asking the
/// failing tests to pass and not to change tests: the tests are the check, not the work. A
/// write to the test file is refused (the model is told why, and the file is kept), and with
/// no checks configured the workspace's tests run before the change and after it, the result
/// saying how they began and ended.
#[tokio::test]
async fn the_tests_a_request_is_checked_by_are_kept_and_run() {
    let test = "import unittest\nfrom stats import mean\n\nclass T(unittest.TestCase):\n    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n";
    let judged = task(
        [
            (
                "stats.py",
                "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n",
            ),
            ("test_stats.py", test),
        ],
        vec![
            intent(true, Some(true)),
            // A small model's way out: make the test expect what the code does.
            call(
                "write_file",
                json!({"path": "test_stats.py", "content": test.replace("), 2)", "), 1.5)")}),
            ),
            call("read_file", json!({"path": "stats.py"})),
            call(
                "edit_file",
                json!({"path": "stats.py", "old_text": "(len(xs) + 1)", "new_text": "len(xs)"}),
            ),
            say("Fixed mean in stats.py."),
        ],
    )
    .with(|config| {
        allow_python(config);
        small(config);
    })
    .run("Birim testleri başarısız oluyor; stats.py'yi düzelt.")
    .await;
    judged.assert_status("completed");
    assert_eq!(judged.file("test_stats.py"), test, "the test file is kept");
    // The model's reading came first (the failure shown to it), then the work.
    let sent = judged.sent();
    assert!(last_user(&sent[0]).contains("AssertionError"));
    let refused = last_tool_result(&sent[2]);
    assert!(
        refused.contains("'test_stats.py' holds the tests this request is checked by"),
        "{refused}"
    );
    let result = judged.result();
    assert!(
        result.ends_with(
            "checks: 1 failing → 0 failing (python3 -m unittest); Python syntax and names \
             (stats.py): passed"
        ),
        "{result}"
    );
}

const TEST_CALC: &str = "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

/// The project's own tests decide "done", whatever the request's words: they run before the
/// first change and after the last, and a failing test the change makes pass completes the
/// task, the result saying how they began and ended.
#[tokio::test]
async fn the_projects_failing_test_made_to_pass_completes_saying_so() {
    let judged = task(
        [
            ("calc.py", "def add(a, b):\n    return a - b\n"),
            ("test_calc.py", TEST_CALC),
        ],
        vec![
            read("calc.py"),
            call(
                "edit_file",
                json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
            ),
            say("add now adds."),
        ],
    )
    .with(allow_python)
    .run("add(2, 3) in calc.py gives -1; it should give 5.")
    .await;
    judged.assert_status("completed");
    assert_eq!(
        judged.result(),
        "add now adds.\n\nchanged: calc.py (+1 -1)\n\
         checks: 1 failing → 0 failing (python3 -m unittest); Python syntax and names (calc.py): \
         passed"
    );
    assert_eq!(judged.sent().len(), 3, "no call more than the model's");
}

/// A change that breaks a test that passed, under a request that never mentions tests: the
/// failure goes back to the model, and when it does not repair it the task fails, saying the
/// checks ended worse than they began.
#[tokio::test]
async fn a_change_that_breaks_a_passing_test_is_not_completed() {
    let mut replies = vec![
        read("calc.py"),
        call(
            "edit_file",
            json!({
                "path": "calc.py",
                "old_text": "    return a + b",
                "new_text": "    \"\"\"Add a and b.\"\"\"\n    return a * b",
            }),
        ),
    ];
    replies.extend((0..3).map(|_| say("add has a docstring now.")));
    let judged = task(
        [
            ("calc.py", "def add(a, b):\n    return a + b\n"),
            ("test_calc.py", TEST_CALC),
        ],
        replies,
    )
    .with(allow_python)
    .run("Give add in calc.py a docstring.")
    .await;
    judged.assert_status("failed");
    let result = judged.result();
    assert!(
        result.contains(
            "the model's changes left the checks worse than they began (checks: passed → 1 \
             failing (python3 -m unittest; after 2 rounds of fixes)"
        ),
        "{result}"
    );
    let told = judged.told(3);
    assert!(
        told.starts_with("The checks this workspace is judged by failed after your change")
            && told.contains("AssertionError: 6 != 5"),
        "{told}"
    );
}

/// A project without tests: nothing runs, the task goes as it did, and its result says none
/// were found.
#[tokio::test]
async fn a_project_without_tests_runs_none_and_says_so() {
    let change = json!({"path": "todo.txt", "old_text": "buy milk", "new_text": "buy oat milk"});
    let judged = task(
        [("todo.txt", "- buy milk\n")],
        vec![read("todo.txt"), call("edit_file", change), say("Done.")],
    )
    .with(allow_python)
    .run("In todo.txt, change 'buy milk' to 'buy oat milk'.")
    .await;
    judged.assert_status("completed");
    assert_eq!(
        judged.result(),
        "Done.\n\nchanged: todo.txt (+1 -1)\nchecks: none found"
    );
    assert_eq!(judged.sent().len(), 3);
}

/// A project without tests still has its Python read: a changed file that reads a name
/// nothing defines (the shape of a 1.5B model's `print(f"listening on {APP_PORT}")`) goes back
/// to the model with the line, its fix completes, and the result says the files were read.
/// A name the file lacked before the task is not held against it.
#[tokio::test]
async fn a_python_file_left_reading_an_undefined_name_goes_back_and_its_fix_completes() {
    let serve = "import os\nPORT = 8000\nGREETING = hello\n\nprint(PORT)\n";
    let broken =
        json!({"path": "serve.py", "old_text": "print(PORT)", "new_text": "print(APP_PORT)"});
    let fixed = json!({"path": "serve.py", "old_text": "print(APP_PORT)",
        "new_text": "APP_PORT = int(os.environ.get('APP_PORT', PORT))\nprint(APP_PORT)"});
    let judged = task(
        [("serve.py", serve)],
        vec![
            read("serve.py"),
            call("edit_file", broken),
            say("Done."),
            call("edit_file", fixed),
            say("It reads APP_PORT now."),
        ],
    )
    .with(allow_python)
    .run("Let serve.py take its port from APP_PORT.")
    .await;
    judged.assert_status("completed");
    let told = judged.told(3);
    assert!(
        told.contains("serve.py:5: undefined name 'APP_PORT'"),
        "{told}"
    );
    assert!(!told.contains("'hello'"), "{told}");
    assert_eq!(
        judged.result(),
        "It reads APP_PORT now.\n\nchanged: serve.py (+2 -1)\nchecks: none found; Python \
         syntax and names (serve.py): passed"
    );
}

/// Past the rounds, a file the task left unable to parse fails the task, saying which line.
#[tokio::test]
async fn a_python_file_left_unable_to_parse_fails_the_task_saying_where() {
    let broken =
        json!({"path": "calc.py", "old_text": "return a + b", "new_text": "return (a + b"});
    let mut replies = vec![read("calc.py"), call("edit_file", broken)];
    replies.extend((0..3).map(|_| say("Fixed.")));
    let judged = task([("calc.py", "def add(a, b):\n    return a + b\n")], replies)
        .with(allow_python)
        .run("Make add in calc.py safer.")
        .await;
    judged.assert_status("failed");
    let result = judged.result();
    assert!(
        result.contains("(checks: none found; Python syntax and names (calc.py): 1 new problem"),
        "{result}"
    );
    let told = judged.told(3);
    assert!(told.contains("calc.py:2: syntax error"), "{told}");
}

/// What Ollama answers (HTTP 400) for a prompt longer than the model's context window.
const TOO_LONG: &str = "the prompt is longer than the context length";

fn two_long_reads() -> (Vec<(String, String)>, Vec<Reply>) {
    let files = ["a", "b"]
        .map(|n| (format!("{n}.txt"), n.repeat(3000)))
        .to_vec();
    (files, vec![read("a.txt"), read("b.txt")])
}

/// A prompt Ollama refuses as longer than the window (the estimate fell short): the older
/// tool results are compacted and the call made once more; the result says so.
#[tokio::test]
async fn a_prompt_refused_as_too_long_is_compacted_and_sent_again() {
    let (files, mut replies) = two_long_reads();
    replies.push(Reply::http_error(400, TOO_LONG));
    replies.push(say("Read both."));
    let judged = task(files, replies).run("Read a.txt and b.txt.").await;
    judged.assert_status("completed");
    let result = judged.result();
    assert!(
        result.starts_with("Read both.\n\ncontext: 1 older tool results compacted"),
        "{result}"
    );
    let sent = judged.sent();
    assert_eq!(sent.len(), 4);
    let again = sent[3].to_string();
    assert!(
        again.contains("[compacted to fit the context window: 3000 characters of read_file"),
        "{again}"
    );
    assert!(again.contains(&"b".repeat(3000)), "the last round is kept");
}

/// Refused again after the compaction: the task fails, saying what Ollama said and what was
/// tried.
#[tokio::test]
async fn a_prompt_refused_again_after_compaction_fails_saying_so() {
    let (files, mut replies) = two_long_reads();
    replies.push(Reply::http_error(400, TOO_LONG));
    replies.push(Reply::http_error(400, TOO_LONG));
    let judged = task(files, replies).run("Read a.txt and b.txt.").await;
    judged.assert_status("failed");
    let result = judged.result();
    assert!(
        result.contains(
            "Ollama refused the prompt as longer than the model's context window (num_ctx"
        ) && result.contains("also after older tool results were compacted and the call was made again: Ollama answered HTTP 400: the prompt is longer than the context length"),
        "{result}"
    );
    assert_eq!(judged.sent().len(), 4);
}

/// A workspace whose test already fails, a model that edits todo.txt (not the code under
/// test), answers twice, then answers the engine's question with `asked_to_fix`.
async fn todo_edit_beside_a_failing_test(
    request: &str,
    answers: [&str; 2],
    asked_to_fix: bool,
) -> Judged {
    let change = json!({"path": "todo.txt", "old_text": "buy milk", "new_text": "buy oat milk"});
    task(
        [
            ("todo.txt", "- buy milk\n"),
            ("calc.py", "def add(a, b):\n    return a - b\n"),
            ("test_calc.py", TEST_CALC),
        ],
        vec![
            read("todo.txt"),
            call("edit_file", change),
            say(answers[0]),
            say(answers[1]),
            say(&format!("{{\"asked_to_fix\": {asked_to_fix}}}")),
        ],
    )
    .with(allow_python)
    .run(request)
    .await
}

/// A test that already failed before the task's change, and a change that makes nothing
/// worse: the failure goes back to the model once (it may be what the request is about), and
/// then the answer stands; the result says the checks ended as they began.
#[tokio::test]
async fn a_failure_already_there_goes_back_once_and_does_not_fail_the_task() {
    let judged = todo_edit_beside_a_failing_test(
        "In todo.txt, change 'buy milk' to 'buy oat milk'.",
        [
            "Done.",
            "Done; the failing test is about calc.py, not todo.txt.",
        ],
        // Asked whether the request was about the failures: it was not.
        false,
    )
    .await;
    judged.assert_status("completed");
    let sent = judged.sent();
    assert_eq!(sent.len(), 5);
    // The last call is the question, with the JSON schema of its answer.
    assert_eq!(
        sent[4]["format"]["properties"]["asked_to_fix"]["type"],
        "boolean"
    );
    assert_eq!(
        judged.result(),
        "Done; the failing test is about calc.py, not todo.txt.\n\n\
         changed: todo.txt (+1 -1)\n\
         checks: 1 failing → 1 failing (python3 -m unittest; after 1 round of fixes)"
    );
    let told = judged.told(3);
    assert!(
        told.starts_with(
            "The checks this workspace is judged by fail, as they did before your change"
        ),
        "{told}"
    );
}

/// Tests that failed before and still fail, under a request that was about them: the model
/// says so when asked, and the task does not end `completed` over them.
#[tokio::test]
async fn failures_the_request_was_about_fail_the_task_when_they_remain() {
    let judged = todo_edit_beside_a_failing_test(
        "テストが失敗しています。直してください。",
        ["Fixed.", "Fixed, I think."],
        true,
    )
    .await;
    judged.assert_status("failed");
    assert!(
        judged.result().contains(
            "checks: 1 failing → 1 failing (python3 -m unittest; after 1 round of fixes)"
        ),
        "{}",
        judged.result()
    );
    // The question carries the request as written and what still fails.
    let sent = judged.sent();
    let question = sent[4]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        question.contains("テストが失敗しています。") && question.contains("AssertionError"),
        "{question}"
    );
}

/// A change a command made (no file tool wrote) is judged too: the checks run after the last
/// change whatever made it, and a task that leaves them worse does not end `completed`.
#[tokio::test]
async fn a_change_a_command_made_is_judged_by_the_checks_too() {
    let rewrite = "open('calc.py', 'w').write('def add(a, b):\\n    return a * b\\n')";
    let judged = task(
        [
            ("calc.py", "def add(a, b):\n    return a + b\n"),
            ("test_calc.py", TEST_CALC),
        ],
        vec![
            call("run_command", json!({"argv": ["python3", "-c", rewrite]})),
            say("calc.py is rewritten."),
        ],
    )
    .with(allow_python)
    .run("Rewrite calc.py with a one-line python3 command.")
    .await;
    judged.assert_status("failed");
    assert_eq!(
        judged.result(),
        "the checks after the task's last change are worse than before its first (checks: passed \
         → 1 failing (python3 -m unittest); `python3 -m unittest` failed (exit status 1)); the \
         files it changed are left as they are"
    );
}

/// A project whose test file runs no test: nothing failed, so nothing goes back to the model
/// (a test file that runs none is a failure only when the task wrote it).
#[tokio::test]
async fn a_projects_test_file_that_runs_no_test_is_no_failure_of_the_task() {
    let change = json!({"path": "todo.txt", "old_text": "buy milk", "new_text": "buy oat milk"});
    let judged = task(
        [
            ("todo.txt", "- buy milk\n"),
            ("test_helpers.py", "def sample():\n    return [1, 2]\n"),
        ],
        vec![read("todo.txt"), call("edit_file", change), say("Done.")],
    )
    .with(allow_python)
    .run("In todo.txt, change 'buy milk' to 'buy oat milk'.")
    .await;
    judged.assert_status("completed");
    assert_eq!(
        judged.result(),
        "Done.\n\nchanged: todo.txt (+1 -1)\nchecks: passed → passed (python3 -m unittest)"
    );
    assert_eq!(judged.sent().len(), 3);
}
