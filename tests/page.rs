//! The oversight page in a real headless Chromium (the distribution's, over WebDriver): a task
//! queued over MCP against the fake model appears without a reload, waits for an approval
//! that is answered from the page, progresses live to `completed` and shows its diff; undo
//! from the page restores the files; another token's caller sees none of it; a request
//! holding markup renders as text.
//!
//! `AGENT_MCP_UPDATE_SCREENSHOT=1` also writes the screenshot to docs/oversight.png.

mod support;

use std::path::Path;

use agent_mcp::config::{Approval, ApprovalsConfig, StoreConfig};
use serde_json::json;
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{bearer, workspace_config};
use support::served::Served;
use support::webdriver::{Browser, installed};

const ALICE: &str = "alice-secret";
const BOB: &str = "bob-secret";
const BEFORE: &str = "def add(a, b):\n    return a - b\n";
const AFTER: &str = "def add(a, b):\n    return a + b\n";
const REQUEST: &str = "Fix add in calc.py <script>window.__pwned = 1</script>\
    <img src=x onerror=\"window.__pwned = 2\">";

/// The model reads calc.py, edits it (which waits for approval), writes a note, answers.
fn script(fake: &FakeOllama) {
    fake.push_replies([
        Reply::tool_call("read_file", json!({"path": "calc.py"}), 10, 1),
        Reply::tool_call(
            "edit_file",
            json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
            10,
            1,
        ),
        Reply::tool_call(
            "write_file",
            json!({"path": "notes/todo.md", "content": "check add()\n"}),
            10,
            1,
        ),
        Reply::text("Fixed add.", 10, 1),
    ]);
}

fn read(ws: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(ws.join(file)).ok()
}

/// `document.querySelector(selector)`'s textContent, or null.
const TEXT_OF: &str =
    "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_follows_a_task_answers_its_approval_and_undoes_it() {
    let Some((chromium, chromedriver)) = installed() else {
        return;
    };
    let fake = FakeOllama::start().await;
    script(&fake);
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.py"), BEFORE).unwrap();
    let mut config = workspace_config(&fake.url(), ws.path());
    config.store = StoreConfig {
        backend: agent_mcp::config::StoreBackend::Memory,
        ..StoreConfig::default()
    };
    config.auth.tokens = vec![bearer("alice", ALICE), bearer("bob", BOB)];
    config.agent.approvals = ApprovalsConfig {
        edit_file: Approval::Ask,
        ..ApprovalsConfig::default()
    };
    let served = Served::start(&config).await;
    let browser = Browser::start(&chromium, &chromedriver).await;

    // The page first, then the task: it must arrive by itself (pushed, not on a reload).
    browser
        .goto(&format!("{}/#token={ALICE}", served.base))
        .await;
    browser
        .wait_for(
            "the page is live",
            "return document.getElementById('live').textContent === 'live';",
            json!([]),
        )
        .await;
    let caps =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {"form": {}}});
    let created = served
        .client(ALICE)
        .modern_with_caps(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": REQUEST}}),
            caps,
        )
        .await;
    let id = created.body["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.text))
        .to_owned();
    let row = format!("tr[data-id=\"{id}\"]");
    browser
        .wait_for(
            "the task's row",
            "return document.querySelector(arguments[0]) !== null;",
            json!([row]),
        )
        .await;
    browser.click(&row).await;

    // It waits for the edit's approval: the page shows what and offers the answer.
    let question = browser
        .wait_for("the approval", TEXT_OF, json!([".approval p"]))
        .await;
    assert!(
        question
            .as_str()
            .is_some_and(|q| q.contains("edit_file") && q.contains("calc.py")),
        "{question}"
    );
    let state = browser.eval(TEXT_OF, json!(["#task-state"])).await;
    assert_eq!(state, "running");
    assert_eq!(read(ws.path(), "calc.py").as_deref(), Some(BEFORE));
    browser.click(".approval button.accept").await;

    // Live to the end, with its diff.
    browser
        .wait_for(
            "completed on the page",
            "return document.getElementById('task-state').textContent === 'completed';",
            json!([]),
        )
        .await;
    assert_eq!(read(ws.path(), "calc.py").as_deref(), Some(AFTER));
    let diff = browser.eval(TEXT_OF, json!(["#task-diff"])).await;
    let diff = diff.as_str().unwrap_or_default();
    assert!(
        diff.contains("-    return a - b") && diff.contains("+    return a + b"),
        "{diff}"
    );
    assert!(diff.contains("+++ b/notes/todo.md"), "{diff}");
    // Its steps: the model calls, the tool calls and the approval, in order.
    let journal = browser
        .eval(
            "return [...document.querySelectorAll('#task-journal li')].map(li => li.textContent);",
            json!([]),
        )
        .await;
    let journal: Vec<String> = serde_json::from_value(journal).unwrap();
    let at = |needle: &str| {
        journal
            .iter()
            .position(|e| e.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {journal:?}"))
    };
    assert_eq!(at("step 1 · stepollama chat"), 0, "{journal:?}");
    assert!(at("read_file") < at("approval-1: edit_file"), "{journal:?}");
    assert!(
        at("approval-1: edit_file") < at("accept by alice"),
        "{journal:?}"
    );
    assert!(at("accept by alice") < at("write_file"), "{journal:?}");
    assert!(
        at("model call10 tokens in, 1 out") < at("read_file"),
        "{journal:?}"
    );
    let decisions = browser.eval(TEXT_OF, json!(["#task-decisions"])).await;
    assert!(
        decisions
            .as_str()
            .is_some_and(|d| d.contains("accept by alice")),
        "{decisions}"
    );

    // The request's markup is text: shown as written, never run, no element made of it.
    assert_eq!(
        browser.eval(TEXT_OF, json!(["#task-request"])).await,
        REQUEST
    );
    let harmless = browser
        .eval(
            "return [window.__pwned === undefined, document.scripts.length, \
             document.querySelectorAll('main img, main script').length];",
            json!([]),
        )
        .await;
    assert_eq!(harmless, json!([true, 1, 0]));

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oversight.png");
    std::fs::write(&shot, &png).unwrap();
    if std::env::var_os("AGENT_MCP_UPDATE_SCREENSHOT").is_some() {
        std::fs::write(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/oversight.png"),
            &png,
        )
        .unwrap();
    }

    // Undo from the page: the files are back as before the task.
    browser.click("#undo").await;
    let message = browser
        .wait_for(
            "the undo's answer",
            "const m = document.getElementById('message').textContent; \
             return m.startsWith('restored') || m.startsWith('not undone') ? m : null;",
            json!([]),
        )
        .await;
    assert_eq!(message, "restored: calc.py, notes/todo.md");
    assert_eq!(read(ws.path(), "calc.py").as_deref(), Some(BEFORE));
    assert_eq!(read(ws.path(), "notes/todo.md"), None);
    // Undo is offered once: the page takes the button away when it re-reads the task.
    browser
        .wait_for(
            "the undo button gone",
            "return document.getElementById('undo').hidden;",
            json!([]),
        )
        .await;

    // Another token: none of alice's tasks, not even by its id.
    browser.goto("about:blank").await;
    browser
        .goto(&format!("{}/#token={BOB}&task={id}", served.base))
        .await;
    browser
        .wait_for(
            "bob's page answered",
            "return document.getElementById('message').textContent.includes('no task');",
            json!([]),
        )
        .await;
    let seen = browser
        .eval(
            "return [document.querySelectorAll('#tasks tr').length, \
             document.getElementById('empty').hidden];",
            json!([]),
        )
        .await;
    assert_eq!(seen, json!([0, false]));
    browser.quit().await;
    served.stop().await;
}
