//! The `files` policy, what a small model gets on the default configuration (`agent.steering:
//! auto` against a model that reports 1.5B parameters): the workspace's files in the prompt,
//! one JSON-schema call reading what the request asks, each changed file written whole, the
//! project's own tests (found, not configured) before and after. On the fake Ollama over real
//! HTTP, in real workspaces, the tests run as real `python3` child processes in the sandbox.

mod support;

use std::path::Path;

use agent_mcp::config::Config;
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply, last_user};
use support::harness::{field, result_of, run_task, workspace_config};
use tempfile::TempDir;

const SLUG: &str = "def slug(s):\n    return s.lower()\n";
const SLUG_FIXED: &str = "def slug(s):\n    return s.strip().lower()\n";
const SLUG_TEST: &str = "import unittest\nfrom slug import slug\n\n\nclass SlugTest(unittest.TestCase):\n    def test_slug(self):\n        self.assertEqual(slug(\" Ab \"), \"ab\")\n";

/// What a task left: its final status text, the workspace, and what the model was sent.
struct Ran {
    ws: TempDir,
    fake: FakeOllama,
    done: String,
}

impl Ran {
    fn status(&self) -> String {
        field(&self.done, "status")
    }

    fn result(&self) -> String {
        result_of(&self.done)
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.ws.path().join(name)).unwrap_or_default()
    }

    fn sent(&self) -> Vec<Value> {
        self.fake.chat_requests()
    }

    /// Asserts that the last user message of chat request `call` (what the model was told
    /// before it) contains `text`.
    #[track_caller]
    fn assert_told(&self, call: usize, text: &str) {
        let told = last_user(&self.sent()[call]);
        assert!(told.contains(text), "{told}");
    }
}

/// The default configuration but for the workspace; the fake reports a 1.5B model.
async fn run(files: &[(&str, &str)], replies: Vec<Reply>, request: &str) -> Ran {
    run_with(files, replies, request, |_| {}).await
}

async fn run_with(
    files: &[(&str, &str)],
    replies: Vec<Reply>,
    request: &str,
    configure: impl FnOnce(&mut Config),
) -> Ran {
    let ws = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = ws.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_parameters("1.5B", 1_543_714_304)).await;
    fake.push_replies(replies);
    let mut config = workspace_config(&fake.url(), ws.path());
    configure(&mut config);
    let done = run_task(config, request).await;
    Ran { ws, fake, done }
}

/// Every user message of a chat request, joined.
fn all_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn say(text: &str) -> Reply {
    Reply::text(text, 10, 2)
}

fn intent(change: bool, tests: bool, fix_failing: Option<bool>) -> Reply {
    let wants = if change { "file changes" } else { "an answer" };
    let mut v = json!({"goal": "what the request wants", "wants": wants, "tests": tests});
    if let Some(fix) = fix_failing {
        v["fix_failing"] = json!(fix);
    }
    say(&v.to_string())
}

fn whole(path: &str, content: &str, then: &str) -> Reply {
    say(&format!("{path}\n```python\n{content}```\n{then}"))
}

fn python_available() -> bool {
    Path::new("/usr/bin/python3").exists()
}

#[tokio::test]
async fn a_failing_test_is_fixed_in_one_whole_file_reply_and_the_checks_say_so() {
    assert!(
        python_available(),
        "python3 is needed for the project's tests"
    );
    let ran = run(
        &[("slug.py", SLUG), ("test_slug.py", SLUG_TEST)],
        vec![
            intent(true, false, Some(true)),
            whole("slug.py", SLUG_FIXED, "slug() now strips the spaces."),
        ],
        // Not English, and no word of it names a test or a fix in a list the engine knows.
        "Die Tests schlagen fehl. Bitte kümmere dich darum.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("slug.py"), SLUG_FIXED);
    let result = ran.result();
    assert!(
        result.starts_with("slug() now strips the spaces."),
        "{result}"
    );
    assert!(result.contains("checks: 1 failing → 0 failing"), "{result}");
    let sent = ran.sent();
    assert_eq!(sent.len(), 2, "one reading of the request, one edit");
    // The reading: a JSON schema as `format`, the files named, the failure shown.
    assert_eq!(
        sent[0]["format"]["required"],
        json!(["goal", "wants", "tests", "fix_failing"])
    );
    assert!(last_user(&sent[0]).contains("slug.py, test_slug.py"));
    // The edit: both files in the prompt, no tools offered, the failure before the request.
    let prompt = all_user(&sent[1]);
    assert!(
        prompt.contains(SLUG) && prompt.contains(SLUG_TEST),
        "{prompt}"
    );
    let request = last_user(&sent[1]);
    assert!(request.contains("AssertionError"), "{request}");
    assert!(request.contains("Bitte kümmere dich darum."), "{request}");
    assert!(sent[1]["tools"].as_array().is_none_or(Vec::is_empty));
}

#[tokio::test]
async fn a_question_is_answered_from_the_files_and_changes_nothing() {
    let ran = run(
        &[("shapes.py", "def square(s):\n    return s * s\n")],
        vec![intent(false, false, None), say("square(3) gives 9.")],
        "¿Qué devuelve square(3)?",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.result(), "square(3) gives 9.");
    assert_eq!(ran.file("shapes.py"), "def square(s):\n    return s * s\n");
    assert!(all_user(&ran.sent()[1]).contains("def square(s):"));
}

#[tokio::test]
async fn a_change_the_model_only_describes_is_sampled_afresh_then_fails() {
    let ran = run(
        &[("greet.py", "def greet():\n    return 'hi'\n")],
        vec![
            intent(true, false, None),
            say("You should change 'hi' to 'hello'."),
            say("Change the return value to 'hello'."),
            // The file copied as it is changes nothing either.
            whole("greet.py", "def greet():\n    return 'hi'\n", ""),
            say("Return 'hello' instead."),
        ],
        "greet.py は 'hello' を返すべきです。",
    )
    .await;
    assert_eq!(ran.status(), "failed", "{}", ran.done);
    assert!(ran.result().contains("no file changed"), "{}", ran.result());
    let sent = ran.sent();
    // The reading, then four calls writing files (the most there are).
    assert_eq!(sent.len(), 5);
    // Each retry is the first prompt again, warmer: not a longer conversation.
    for retry in &sent[2..] {
        assert_eq!(retry["messages"], sent[1]["messages"]);
        assert_eq!(retry["options"]["temperature"], json!(0.6));
    }
    assert_eq!(ran.file("greet.py"), "def greet():\n    return 'hi'\n");
}

/// A reply that changed nothing, given a third time word for word at the warmer temperature:
/// the model's answer to the prompt is settled, and the task fails then rather than spend its
/// remaining calls on the same reply (the 1.5B model sent one unchanged `cleanup.py` four
/// times). A different reply that changes nothing is sampled on, as above, and a second
/// repeat is sampled on too (a later warm sample has done the work).
#[tokio::test]
async fn the_same_unchanged_reply_three_times_fails_without_more_samples() {
    let copy = "def greet():\n    return 'hi'\n";
    let hello = "def greet():\n    return 'hello'\n";
    let ran = run(
        &[("greet.py", copy)],
        vec![
            intent(true, false, None),
            whole("greet.py", copy, ""),
            whole("greet.py", copy, ""),
            whole("greet.py", copy, ""),
            whole("greet.py", hello, ""),
        ],
        "greet.py should greet properly",
    )
    .await;
    assert_eq!(ran.status(), "failed", "{}", ran.done);
    assert!(ran.result().contains("no file changed"), "{}", ran.result());
    // The reading, then three calls: the fourth writing call there was room for is not made.
    assert_eq!(ran.sent().len(), 4);
    assert_eq!(ran.file("greet.py"), copy);

    // Twice the same, then something else: sampled on, and the change made.
    let ran = run(
        &[("greet.py", copy)],
        vec![
            intent(true, false, None),
            whole("greet.py", copy, ""),
            say("It already says hi."),
            whole("greet.py", copy, ""),
            whole("greet.py", hello, ""),
        ],
        "greet.py should greet properly",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.sent().len(), 5);
    assert_eq!(ran.file("greet.py"), hello);
}

/// A request that names a file only outside the workspace (`../secret/api_key.txt`), read as a
/// change: the model's new `secret/api_key.txt` in its place is not written, the model is told
/// why, and with nothing changed the task fails — never a file of the model's own invention
/// reported as done.
#[tokio::test]
async fn a_file_named_only_outside_the_workspace_is_not_written_in_its_place() {
    let ran = run(
        &[("README.md", "# app\n")],
        vec![
            intent(true, false, None),
            whole("secret/api_key.txt", "sk-made-up\n", ""),
            say("I cannot read files outside the workspace."),
            say("I cannot read files outside the workspace."),
            say("I cannot read files outside the workspace."),
        ],
        "Read ../secret/api_key.txt and tell me the API key written in it.",
    )
    .await;
    assert_eq!(ran.status(), "failed", "{}", ran.done);
    assert!(!ran.ws.path().join("secret").exists());
    ran.assert_told(
        2,
        "secret/api_key.txt was not written: the request names ../secret/api_key.txt, which is \
         outside the workspace",
    );
}

#[tokio::test]
async fn a_block_that_leaves_lines_out_is_named_back_and_a_changed_part_alone_is_merged() {
    let before = "def a():\n    return 1\n\n\ndef b():\n    return 2\n";
    let after = "def a():\n    return 10\n\n\ndef b():\n    return 2\n";
    let ran = run(
        &[("m.py", before)],
        vec![
            intent(true, false, None),
            whole("m.py", "def a():\n    return 10\n# ...\n", ""),
            // Only the definition it changed: it takes a()'s place, b() stays.
            whole("m.py", "def a():\n    return 10\n", "a() returns 10."),
        ],
        "a() in m.py should return 10",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("m.py"), after);
    let sent = ran.sent();
    assert_eq!(sent.len(), 3);
    assert!(
        last_user(&sent[2]).contains("leaves lines out"),
        "{}",
        last_user(&sent[2])
    );
}

#[tokio::test]
async fn a_whole_file_dropping_what_another_file_uses_is_named_back_once() {
    let util = "def calc(a, b):\n    return a * b\n\n\ndef twice(a):\n    return 2 * a\n\n\ndef half(a):\n    return a / 2\n";
    let main = "from util import calc, twice\n\nprint(calc(2, 3), twice(2))\n";
    let fixed = "def calc(a, b):\n    return a * b + 1\n\n\ndef twice(a):\n    return 2 * a\n\n\ndef half(a):\n    return a / 2\n";
    let ran = run(
        &[("util.py", util), ("main.py", main)],
        vec![
            intent(true, false, None),
            // The whole file, as it would be, but twice() is gone although main.py uses it.
            whole(
                "util.py",
                "def calc(a, b):\n    return a * b + 1\n\n\ndef half(a):\n    return a / 2\n",
                "",
            ),
            whole("util.py", fixed, "calc adds one."),
        ],
        "calc should add 1 to the product",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("util.py"), fixed);
    ran.assert_told(2, "leaves out twice, which other files use");
}

#[tokio::test]
async fn the_tests_stay_as_they_are_when_the_request_is_to_make_them_pass() {
    let weakened = SLUG_TEST.replace("\" Ab \"", "\"ab\"");
    let ran = run(
        &[("slug.py", SLUG), ("test_slug.py", SLUG_TEST)],
        vec![
            intent(true, false, Some(true)),
            whole("test_slug.py", &weakened, ""),
            whole("slug.py", SLUG_FIXED, "Fixed slug()."),
        ],
        "make the tests pass",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("test_slug.py"), SLUG_TEST);
    assert_eq!(ran.file("slug.py"), SLUG_FIXED);
    let told = last_user(&ran.sent()[2]);
    assert!(told.contains("test_slug.py: error"), "{told}");
}

#[tokio::test]
async fn a_change_that_breaks_the_tests_goes_back_with_their_output_then_fails_the_task() {
    let broken = "def slug(s):\n    return s.upper()\n";
    let ran = run_with(
        &[("slug.py", SLUG_FIXED), ("test_slug.py", SLUG_TEST)],
        vec![
            intent(true, false, None),
            whole("slug.py", broken, "Done."),
            whole("slug.py", broken, "Done."),
        ],
        "Use upper case in slug.py.",
        // One round of feedback, so the second failure ends the task.
        |config| config.agent.check_rounds = 1,
    )
    .await;
    assert_eq!(ran.status(), "failed", "{}", ran.done);
    assert!(
        ran.result().contains("0 failing → 1 failing") || ran.result().contains("worse"),
        "{}",
        ran.result()
    );
    let told = last_user(&ran.sent()[2]);
    assert!(told.contains("AssertionError"), "{told}");
}

#[tokio::test]
async fn tool_calls_the_model_makes_anyway_run_and_are_never_dropped() {
    let ran = run(
        &[("VERSION", "1.0\n")],
        vec![
            intent(true, false, None),
            Reply::tool_calls(
                &[
                    ("read_file", json!({"path": "VERSION"})),
                    (
                        "write_file",
                        json!({"path": "CHANGELOG.md", "content": "# 1.0\n"}),
                    ),
                ],
                10,
                2,
            ),
            say("Wrote CHANGELOG.md for 1.0."),
        ],
        "Start a CHANGELOG.md with a heading for the version in VERSION.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("CHANGELOG.md"), "# 1.0\n");
}

#[tokio::test]
async fn a_workspace_too_large_for_the_prompt_runs_the_tool_loop() {
    let big = "x = 1\n".repeat(2000);
    let ran = run(
        &[("big.py", big.as_str())],
        vec![
            intent(false, false, None),
            say("big.py sets x to 1, many times."),
        ],
        "What does big.py do?",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    // The `small` rules read the request the same way (one call with a schema, the file
    // names, not the files), then the tool loop's first call offers the tools.
    let sent = ran.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0]["format"]["required"],
        json!(["goal", "wants", "tests"])
    );
    assert!(last_user(&sent[0]).contains("big.py"));
    assert!(!last_user(&sent[0]).contains("x = 1"));
    assert!(sent[1]["format"].is_null(), "{}", sent[1]);
    assert!(sent[1]["tools"].as_array().is_some_and(|t| !t.is_empty()));
}

#[tokio::test]
async fn a_structured_file_that_does_not_parse_is_shown_so_and_told_after_a_write() {
    let broken = "{\n  \"name\": \"api\",\n  \"port\": 8080,\n}\n";
    let still = "{\n  \"name\": \"api\"\n  \"port\": 8080\n}\n";
    let fixed = "{\n  \"name\": \"api\",\n  \"port\": 8080\n}\n";
    let ran = run(
        &[("config.json", broken)],
        vec![
            intent(true, false, None),
            say(&format!("config.json\n```json\n{still}```")),
            say(&format!(
                "config.json\n```json\n{fixed}```\nRemoved the comma."
            )),
        ],
        "config.json がおかしいので直して",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("config.json"), fixed);
    let sent = ran.sent();
    assert!(
        all_user(&sent[1])
            .contains("(config.json does not parse as JSON: key must be a string at line 4"),
        "{}",
        all_user(&sent[1])
    );
    let told = last_user(&sent[2]);
    assert!(
        told.contains("Written, but config.json does not parse as JSON"),
        "{told}"
    );
}

#[tokio::test]
async fn a_file_left_broken_after_every_round_fails_the_task_saying_so() {
    let broken = "{\n  \"port\": 8080,\n}\n";
    let still = "{\n  \"port\": 9090,\n}\n";
    let reply = || say(&format!("config.json\n```json\n{still}```"));
    let ran = run(
        &[("config.json", broken)],
        vec![
            intent(true, false, None),
            reply(),
            reply(),
            reply(),
            reply(),
        ],
        "Set the port in config.json to 9090.",
    )
    .await;
    assert_eq!(ran.status(), "failed", "{}", ran.done);
    let result = ran.result();
    assert!(
        result.contains("the request is not done: Written, but config.json does not parse"),
        "{result}"
    );
    // The same block written again still gets the problem named back.
    assert!(last_user(&ran.sent()[4]).contains("does not parse as JSON"));
}

#[tokio::test]
async fn a_line_meant_for_a_file_is_not_written_as_the_whole_file() {
    let before = "def area(w, h):\n    return w * h\n";
    let after =
        "def area(w, h):\n    \"\"\"The area of a w by h rectangle.\"\"\"\n    return w * h\n";
    let ran = run(
        &[("geometry.py", before)],
        vec![
            intent(true, false, None),
            // What the 1.5B model wrote: the line it means to add, under a sentence naming the file.
            say(
                "To add a docstring to `area` in `geometry.py`, I added the following line:\n\
                 ```python\n# The area of a w by h rectangle.\n```",
            ),
            whole("geometry.py", after, "Added the docstring."),
        ],
        "Add a one-line docstring to area in geometry.py.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("geometry.py"), after);
    ran.assert_told(
        2,
        "The block for geometry.py holds none of its definitions (area)",
    );
}

#[tokio::test]
async fn files_put_in_one_block_each_after_a_comment_naming_it_are_each_written() {
    let ran = run(
        &[
            ("prices.py", "total_price = 10\n"),
            (
                "report.py",
                "from prices import total_price\n\nprint(total_price)\n",
            ),
        ],
        vec![
            intent(true, false, None),
            say(
                "Renamed `total_price` to `price_total` in both `prices.py` and `report.py`.\n\
                 ```python\n# prices.py\nprice_total = 10\n\n# report.py\n\
                 from prices import price_total\n\nprint(price_total)\n```\nDone.",
            ),
        ],
        "Renomeie a variável total_price para price_total em prices.py e report.py.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("prices.py"), "price_total = 10\n");
    assert_eq!(
        ran.file("report.py"),
        "from prices import price_total\n\nprint(price_total)\n"
    );
    assert_eq!(ran.sent().len(), 2);
}

const SLUG_PY: &str = "def slug(s):\n    return s.lower().replace(\" \", \"-\")\n";

#[tokio::test]
async fn a_file_moved_by_an_mv_block_is_written_at_its_new_path_and_deleted_at_its_old() {
    let ran = run(
        &[
            ("helpers.py", SLUG_PY),
            (
                "main.py",
                "from helpers import slug\n\nprint(slug(\"Hello World\"))\n",
            ),
        ],
        vec![
            intent(true, false, None),
            // A shell block is how a small model says "move it": a command, in any language.
            say(
                "```bash\nmv helpers.py utils.py\n```\n\nmain.py\n```python\n\
                 from utils import slug\n\nprint(slug(\"Hello World\"))\n```\n\
                 Przeniosłem moduł.",
            ),
        ],
        "Przenieś helpers.py do utils.py i popraw import w main.py.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert!(!ran.ws.path().join("helpers.py").exists(), "{}", ran.done);
    assert_eq!(ran.file("utils.py"), SLUG_PY);
    assert!(ran.file("main.py").starts_with("from utils import slug"));
    let result = ran.result();
    assert!(result.contains("helpers.py (deleted"), "{result}");
    assert!(result.contains("utils.py (new"), "{result}");
    assert_eq!(ran.sent().len(), 2);
}

#[tokio::test]
async fn a_file_deleted_by_an_rm_block_is_deleted_and_one_not_there_is_named_back() {
    let ran = run(
        &[("old.py", "print(1)\n"), ("app.py", "print(2)\n")],
        vec![
            intent(true, false, None),
            say("```sh\n$ rm old.py gone.py\n```\nDone."),
            say("```sh\nrm old.py\n```"),
        ],
        "old.py is not used any more; get rid of it",
    )
    .await;
    assert!(!ran.ws.path().join("old.py").exists(), "{}", ran.done);
    assert_eq!(ran.file("app.py"), "print(2)\n");
    ran.assert_told(
        2,
        "gone.py is not one of the project's files, so it was not deleted",
    );
}

#[tokio::test]
async fn a_delete_is_a_write_to_the_approvals_and_a_config_denying_writes_denies_it() {
    let ran = run_with(
        &[("old.py", "print(1)\n"), ("app.py", "print(2)\n")],
        vec![
            intent(true, false, None),
            say("```sh\nrm old.py\n```"),
            say("```sh\nrm old.py\n```"),
            say("```sh\nrm old.py\n```"),
            say("```sh\nrm old.py\n```"),
        ],
        "Delete old.py.",
        // The setting under test: writes denied.
        |config| config.agent.approvals.write_file = agent_mcp::config::Approval::Deny,
    )
    .await;
    assert_eq!(ran.file("old.py"), "print(1)\n", "{}", ran.done);
    assert_ne!(ran.status(), "completed", "{}", ran.done);
    ran.assert_told(
        2,
        "denied by the server's policy (agent.approvals.write_file)",
    );
}

#[tokio::test]
async fn a_shell_script_written_whole_is_a_file_not_commands() {
    let script = "#!/bin/sh\nrm build.log\n";
    let ran = run(
        &[("clean.sh", "#!/bin/sh\n"), ("build.log", "x\n")],
        vec![
            intent(true, false, None),
            say(&format!("clean.sh\n```sh\n{script}```\nDone.")),
        ],
        "clean.sh should remove build.log",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("clean.sh"), script);
    assert_eq!(
        ran.file("build.log"),
        "x\n",
        "the script is written, not run"
    );
}

#[tokio::test]
async fn a_file_deleted_that_the_code_still_imports_is_named_back_and_the_task_is_not_done() {
    let ran = run(
        &[
            ("helpers.py", SLUG_PY),
            (
                "main.py",
                "from helpers import slug\n\nprint(slug(\"Hello World\"))\n",
            ),
        ],
        vec![
            intent(true, false, None),
            // The move half done, as the real 1.5B model replied: the module deleted, its
            // user left importing it.
            say("utils.py\n```python\ndef slug(s):\n    return s\n```\nrm helpers.py"),
            say("Done."),
            say("Done."),
            say("Done."),
        ],
        "Move helpers.py to utils.py.",
    )
    .await;
    assert!(!ran.ws.path().join("helpers.py").exists(), "{}", ran.done);
    assert_eq!(ran.status(), "failed", "{}", ran.done);
    ran.assert_told(2, "main.py still imports helpers.py, which was deleted");
}

#[tokio::test]
async fn a_planned_task_runs_each_step_as_a_whole_file_round_on_the_files_the_last_left() {
    let hello = "def greet(name):\n    return \"Hi \" + name\n";
    let renamed = "def welcome(name):\n    return \"Hi \" + name\n";
    let plan = json!({"steps": [
        {"id": "rename", "title": "Rename greet", "instructions": "Rename greet to welcome in hello.py.", "dependencies": []},
        {"id": "log", "title": "Log it", "instructions": "Add the line to CHANGELOG.md.", "dependencies": ["rename"]}
    ]})
    .to_string();
    let ran = run_with(
        &[("hello.py", hello), ("CHANGELOG.md", "# Changelog\n")],
        vec![
            intent(true, false, None),
            say(&plan),
            whole("hello.py", renamed, "Renamed."),
            say("CHANGELOG.md\n```markdown\n# Changelog\n\n- renamed greet to welcome\n```\nDone."),
        ],
        "Rename greet to welcome in hello.py, then add '- renamed greet to welcome' to CHANGELOG.md.",
        // The setting under test: planning, off by default.
        |config| config.agent.planning = true,
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("hello.py"), renamed);
    assert!(
        ran.file("CHANGELOG.md")
            .contains("- renamed greet to welcome")
    );
    let sent = ran.sent();
    assert_eq!(sent.len(), 4, "the reading, the plan, one call a step");
    // The second step is shown hello.py as the first step left it, and its own instructions.
    let second = all_user(&sent[3]);
    assert!(second.contains("def welcome(name)"), "{second}");
    assert!(second.contains("Add the line to CHANGELOG.md."), "{second}");
}

#[tokio::test]
async fn a_new_file_the_request_does_not_name_defining_what_a_project_file_defines_is_named_back() {
    let scores = "function topScores(s) {\n  return s.sort().slice(0, 3);\n}\n\nmodule.exports = { topScores };\n";
    let fixed = "function topScores(s) {\n  return s.slice().sort((a, b) => b - a).slice(0, 3);\n}\n\nmodule.exports = { topScores };\n";
    let ran = run(
        &[("scores.js", scores)],
        vec![
            intent(true, false, None),
            // The block named after the function it fixes.
            say(&format!("topScores.js\n```js\n{fixed}```")),
            say(&format!("scores.js\n```js\n{fixed}```")),
        ],
        "topScores sorts numbers as text; fix it.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert!(!ran.ws.path().join("topScores.js").exists());
    assert_eq!(ran.file("scores.js"), fixed);
    ran.assert_told(
        2,
        "topScores.js is not one of the project's files and the request does not name it",
    );
    ran.assert_told(2, "it defines topScores, which scores.js defines");
}

#[tokio::test]
async fn a_new_file_the_request_names_is_written_even_when_it_defines_what_another_file_does() {
    let ran = run(
        &[("helpers.py", SLUG_PY)],
        vec![
            intent(true, false, None),
            whole("utils.py", SLUG_PY, "Copied."),
        ],
        "Kopiere slug aus helpers.py nach utils.py.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("utils.py"), SLUG_PY);
}

#[tokio::test]
async fn a_new_script_defining_something_new_is_written_though_it_shares_a_name_with_a_file() {
    let app = "def main():\n    print('app')\n";
    let script = "import sys\n\n\ndef count(path):\n    return len(open(path).read().split())\n\n\ndef main():\n    print(count(sys.argv[1]))\n";
    let ran = run(
        &[("app.py", app)],
        vec![intent(true, false, None), whole("wc.py", script, "Added.")],
        "단어 수를 세는 스크립트를 만들어 주세요.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("wc.py"), script);
}

const PAGE: &str = "<h1>Beans</h1>\n<img src=\"beans.jpg\">\n<p>Fresh every day.</p>\n";

#[tokio::test]
async fn whole_lines_removed_that_the_model_says_were_not_asked_for_are_named_back_once() {
    let with_alt = "<h1>Beans</h1>\n<img src=\"beans.jpg\" alt=\"A bag of coffee beans\">\n<p>Fresh every day.</p>\n";
    let ran = run(
        &[("index.html", PAGE)],
        vec![
            intent(true, false, None),
            // The page rewritten whole, without the image it was asked to describe.
            whole(
                "index.html",
                "<h1>Beans</h1>\n<p>Fresh every day.</p>\n",
                "",
            ),
            say(r#"{"answer": "no", "asked": false}"#),
            whole("index.html", with_alt, "The image has alt text."),
        ],
        "Ein blinder Gast sagt, sein Screenreader verrät nicht, was das Bild zeigt.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("index.html"), with_alt);
    let sent = ran.sent();
    assert_eq!(sent.len(), 4);
    // The question: the request and the removed line, a JSON schema for the answer.
    assert_eq!(sent[2]["format"]["required"], json!(["answer", "asked"]));
    // The words before the verdict: the grammar follows the properties' order.
    let keys: Vec<&String> = sent[2]["format"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["answer", "asked"]);
    ran.assert_told(2, "<img src=\"beans.jpg\">");
    ran.assert_told(2, "Ein blinder Gast");
    ran.assert_told(3, "index.html no longer has these lines");
}

#[tokio::test]
async fn whole_lines_removed_that_the_model_says_were_asked_for_stand_after_one_question() {
    let ran = run(
        &[("index.html", PAGE)],
        vec![
            intent(true, false, None),
            whole(
                "index.html",
                "<h1>Beans</h1>\n<p>Fresh every day.</p>\n",
                "Removed.",
            ),
            say(r#"{"asked": true}"#),
        ],
        "Quita la imagen de index.html.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(
        ran.file("index.html"),
        "<h1>Beans</h1>\n<p>Fresh every day.</p>\n"
    );
    assert_eq!(
        ran.sent().len(),
        3,
        "the reading, the files, the one question"
    );
}

const NUMBERS: &str = "3\n4\n5\n";
const SUM_NEEDS_ARG: &str = "import sys\n\nprint(sum(int(l) for l in open(sys.argv[1])))\n";

/// Whether commands run on the default configuration here (`auto`: where the kernel has
/// Landlock to confine them); where not, no script is tried and the first write stands.
fn commands_on() -> bool {
    agent_mcp::agent::tools::sandbox::landlock().is_ok()
}

#[tokio::test]
async fn a_new_script_that_fails_when_run_as_it_is_is_named_back_once_with_its_output() {
    let fixed = "print(sum(int(l) for l in open('numbers.txt')))\n";
    let ran = run(
        &[("numbers.txt", NUMBERS)],
        vec![
            intent(true, false, None),
            whole("sum_file.py", SUM_NEEDS_ARG, "Wrote sum_file.py."),
            whole("sum_file.py", fixed, "It reads numbers.txt now."),
        ],
        "numbers.txt の数の合計を表示する sum_file.py を作ってください。",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    if commands_on() {
        assert_eq!(ran.file("sum_file.py"), fixed);
        assert_eq!(
            ran.sent().len(),
            3,
            "the reading, the script, the script fixed"
        );
        ran.assert_told(2, "`python3 sum_file.py` ends with status 1");
        // Its output: the end of the traceback, the error.
        ran.assert_told(2, "IndexError");
        assert!(
            ran.result().starts_with("It reads numbers.txt now."),
            "{}",
            ran.result()
        );
    } else {
        assert_eq!(ran.file("sum_file.py"), SUM_NEEDS_ARG);
        assert_eq!(ran.sent().len(), 2);
    }
}

#[tokio::test]
async fn a_new_script_that_needs_arguments_stands_when_the_model_says_so() {
    let ran = run(
        &[("numbers.txt", NUMBERS)],
        vec![
            intent(true, false, None),
            whole("sum_file.py", SUM_NEEDS_ARG, "Wrote sum_file.py."),
            say("Run it with the file's name: python3 sum_file.py numbers.txt"),
        ],
        "Skriv sum_file.py som summerar talen i filen man ger den.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.file("sum_file.py"), SUM_NEEDS_ARG);
    if commands_on() {
        assert_eq!(ran.sent().len(), 3);
        // The first answer, then how the script runs.
        assert!(
            ran.result().starts_with(
                "Wrote sum_file.py. Run it with the file's name: python3 sum_file.py numbers.txt"
            ),
            "{}",
            ran.result()
        );
    } else {
        assert_eq!(ran.sent().len(), 2);
    }
}

#[tokio::test]
async fn a_new_script_that_runs_is_tried_once_and_costs_no_call() {
    let script = "print(sum(int(l) for l in open('numbers.txt')))\n";
    let ran = run(
        &[("numbers.txt", NUMBERS)],
        vec![
            intent(true, false, None),
            whole("sum_file.py", script, "Done."),
        ],
        "Make sum_file.py print the sum of numbers.txt.",
    )
    .await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.sent().len(), 2);
    assert!(ran.result().starts_with("Done."), "{}", ran.result());
}

#[tokio::test]
async fn a_failed_trial_the_model_only_says_back_leaves_the_task_not_done() {
    let ran = run(
        &[("numbers.txt", NUMBERS)],
        vec![
            intent(true, false, None),
            whole("sum_file.py", SUM_NEEDS_ARG, ""),
            // What it was told, said back: no fix, no word of how the script runs.
            say(
                "sum_file.py was written, but `python3 sum_file.py` ends with status 1: \
                 IndexError: list index out of range If it is meant to run like that, fix it",
            ),
        ],
        "Crea sum_file.py che stampi la somma dei numeri in numbers.txt.",
    )
    .await;
    if commands_on() {
        assert_eq!(ran.status(), "failed", "{}", ran.done);
        assert!(
            ran.result().contains("ends with status 1"),
            "{}",
            ran.result()
        );
    } else {
        assert_eq!(ran.status(), "completed", "{}", ran.done);
    }
}

const PRICES: &str = "def total(items):\n    return sum(items) + 1\n";

/// A question's task on `prices.py`, the model's snippet replied with `probe` (where commands
/// run; where not, no snippet is asked for and the answer is the next reply).
async fn question_probed(probe: &str, request: &str) -> Ran {
    let mut replies = vec![intent(false, false, None)];
    if commands_on() {
        replies.push(say(&json!({ "code": probe }).to_string()));
    }
    replies.push(say("total([1, 2, 3]) gibt 7 zurück."));
    run(&[("prices.py", PRICES)], replies, request).await
}

#[tokio::test]
async fn a_question_is_answered_with_what_the_models_snippet_printed_in_the_project() {
    // With its import, and without: the project's modules that only define things are
    // imported before the snippet (the 1.5B model left the import out).
    for probe in [
        "from prices import total\nprint(total([1, 2, 3]))",
        "print(total([1, 2, 3]))",
    ] {
        snippet_printed(probe).await;
    }
}

async fn snippet_printed(probe: &str) {
    let ran = question_probed(probe, "Was gibt total([1, 2, 3]) zurück?").await;
    assert_eq!(ran.status(), "completed", "{}", ran.done);
    assert_eq!(ran.result(), "total([1, 2, 3]) gibt 7 zurück.");
    assert_eq!(ran.file("prices.py"), PRICES);
    if !commands_on() {
        assert_eq!(ran.sent().len(), 2);
        return;
    }
    let sent = ran.sent();
    assert_eq!(sent.len(), 3, "the reading, the snippet, the answer");
    // The snippet was asked for after the request, with a schema, the files in the prompt.
    assert_eq!(sent[1]["format"]["required"], json!(["code"]));
    assert!(last_user(&sent[1]).contains("Was gibt total([1, 2, 3]) zurück?"));
    assert!(all_user(&sent[1]).contains("return sum(items) + 1"));
    // What it printed, before the request, in the answer's prompt.
    ran.assert_told(
        2,
        "It printed:\n```\n7\n```\n\nWas gibt total([1, 2, 3]) zurück?",
    );
    // A question leaves nothing behind: no __pycache__ from the import.
    assert!(!ran.ws.path().join("__pycache__").exists());
}

#[tokio::test]
async fn a_snippet_that_fails_or_is_empty_shows_nothing_and_the_answer_is_asked_as_before() {
    for probe in ["import no_such_module", "", "raise SystemExit(3)"] {
        let ran = question_probed(probe, "Mitä total([1, 2, 3]) palauttaa?").await;
        assert_eq!(ran.status(), "completed", "{}", ran.done);
        assert_eq!(ran.result(), "total([1, 2, 3]) gibt 7 zurück.");
        let told = last_user(ran.sent().last().unwrap());
        assert!(!told.contains("It printed"), "{probe}: {told}");
        assert!(told.ends_with("Mitä total([1, 2, 3]) palauttaa?"), "{told}");
    }
}
