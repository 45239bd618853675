//! The tool loop with the failure shapes of small local models, scripted on the fake Ollama
//! (real wire format on loopback, real files in a temp workspace, the real server over HTTP):
//! repeated identical calls, empty answers, echoed tool markup, tool calls written as JSON in
//! the text. And the other side: a model that answers at once still makes exactly one call.
//!
//! Each task with tools first asks the model what its request wants (one call with a JSON
//! schema as `format`, [`reading`] here): whether a change is asked is that reading, in any
//! language, never the request's words. The counts and requests these tests look at are the
//! work's ([`work`]), the reading left out.

mod support;

use std::path::Path;

use agent_mcp::config::Config;
use serde_json::{Value, json};
use support::fake_ollama::{FakeOllama, Reply, tool_results};
use support::harness::{HttpClient, HttpServer, field, result_of, wait_terminal, workspace_config};

/// The `small` policy: every rule on (the fake reports 8B, which `auto` would leave alone).
fn config(fake: &FakeOllama, workspace: &Path) -> Config {
    let mut config = workspace_config(&fake.url(), workspace);
    config.agent.steering = agent_mcp::agent::steering::SteeringMode::Small;
    config
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("NOTE.txt"), "The secret word is: marigold\n").unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta").unwrap();
    ws
}

/// Runs one task to its end; returns the final agent_status text.
async fn run(client: &HttpClient, request: &str) -> String {
    let id = client.agent_run(request).await;
    wait_terminal(|| client.agent_status(&id)).await
}

/// A task run to its end against the fake Ollama answering `replies` in turn, in a workspace
/// from [`workspace`]: the final agent_status text, the fake (to look at what the model was
/// sent), and the server and workspace, kept alive for the test.
async fn scripted(
    replies: Vec<Reply>,
    request: &str,
) -> (String, FakeOllama, HttpServer, tempfile::TempDir) {
    scripted_in(workspace(), replies, request).await
}

/// [`scripted`] in a workspace of the test's own.
async fn scripted_in(
    ws: tempfile::TempDir,
    replies: Vec<Reply>,
    request: &str,
) -> (String, FakeOllama, HttpServer, tempfile::TempDir) {
    let fake = FakeOllama::start().await;
    fake.push_replies(replies);
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), request).await;
    (done, fake, server, ws)
}

/// [`scripted_in`] for a project whose tests judge the change: `python3` allowed and
/// `python3 -m unittest` the checks, what a user of such a project configures.
async fn scripted_tested(
    ws: tempfile::TempDir,
    replies: Vec<Reply>,
    request: &str,
) -> (String, FakeOllama, HttpServer, tempfile::TempDir) {
    let fake = FakeOllama::start().await;
    fake.push_replies(replies);
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["python3".into()];
    config.agent.checks = vec![["python3", "-m", "unittest"].map(String::from).to_vec()];
    let server = HttpServer::start(config).await;
    let done = run(&server.client(), request).await;
    (done, fake, server, ws)
}

fn last_message(request: &Value) -> &Value {
    request["messages"].as_array().unwrap().last().unwrap()
}

/// The text of the last message of `request` (what the loop said last).
fn last_said(request: &Value) -> &str {
    last_message(request)["content"].as_str().unwrap()
}

/// The workspace's file `name` holds exactly `content`.
fn assert_holds(ws: &tempfile::TempDir, name: &str, content: &str) {
    let found = std::fs::read_to_string(ws.path().join(name)).unwrap();
    assert_eq!(found, content, "{name}");
}

/// The task completed with the workspace's `name` holding `content` after `chats` model calls;
/// returns what the loop told the model last before its final reply.
fn completed_after_telling(
    done: &str,
    ws: &tempfile::TempDir,
    name: &str,
    content: &str,
    fake: &FakeOllama,
    chats: usize,
) -> String {
    assert_eq!(field(done, "status"), "completed", "{done}");
    assert_holds(ws, name, content);
    let sent = work(fake);
    assert_eq!(sent.len(), chats, "{done}");
    last_said(&sent[chats - 2]).to_owned()
}

/// What the loop told the model starts with `prefix`.
fn assert_starts(told: &str, prefix: &str) {
    assert!(told.starts_with(prefix), "{told}");
}

/// The task ended `status` with `result`, after `chats` model calls.
fn assert_ended(done: &str, status: &str, result: &str, fake: &FakeOllama, chats: usize) {
    assert_eq!(field(done, "status"), status, "{done}");
    assert_eq!(result_of(done), result, "{done}");
    assert_eq!(work(fake).len(), chats, "{done}");
}

/// The task failed with a reason that says `says`, after `chats` model calls.
fn assert_failed_saying(done: &str, says: &str, fake: &FakeOllama, chats: usize) {
    assert_eq!(field(done, "status"), "failed", "{done}");
    let reason = result_of(done);
    assert!(reason.contains(says), "{reason}");
    assert_eq!(work(fake).len(), chats, "{done}");
}

fn offers_tools(request: &Value) -> bool {
    request["tools"].as_array().is_some_and(|t| !t.is_empty())
}

fn read_note() -> Reply {
    Reply::tool_call("read_file", json!({"path": "NOTE.txt"}), 10, 2)
}

/// The scripted model's reading of the request: the reply to the one call with a JSON-schema
/// `format` each task makes before its work under the `small` policy (no tokens, so the
/// tests' counts are the work's). Whether the request asks for a change is this reading,
/// never the request's words.
fn reading(change: bool, tests: bool, fix_failing: Option<bool>) -> Reply {
    let wants = if change { "file changes" } else { "an answer" };
    let mut v = json!({"goal": "what the request wants", "wants": wants, "tests": tests});
    if let Some(fix) = fix_failing {
        v["fix_failing"] = json!(fix);
    }
    Reply::text(&v.to_string(), 0, 0)
}

/// Read as a question: an answer, the files as they are.
fn question() -> Reply {
    reading(false, false, None)
}

/// Read as asking for files to change.
fn change() -> Reply {
    reading(true, false, None)
}

/// Whether `request` is the reading of the request (its schema asks for "wants").
fn is_reading(request: &Value) -> bool {
    request["format"]["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|k| k == "wants"))
}

/// The chat requests of the work: every one but the reading of the request.
fn work(fake: &FakeOllama) -> Vec<Value> {
    fake.chat_requests()
        .into_iter()
        .filter(|r| !is_reading(r))
        .collect()
}

#[tokio::test]
async fn a_model_that_answers_at_once_makes_exactly_one_call() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    let answer = "It is 4.\n\nNo tool was needed.";
    fake.push_reply(Reply::text(answer, 20, 6));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "What is 2 + 2?").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(result_of(&done), answer);
    assert_eq!(field(&done, "token_usage"), "input=20 output=6 total=26");
    assert_eq!(work(&fake).len(), 1);
    let sent = &work(&fake)[0];
    assert!(offers_tools(sent));
    // The configured system prompt as it is, the request, nothing added.
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[0]["content"],
        agent_mcp::config::Config::default()
            .agent
            .system_prompt
            .as_str()
    );
}

#[tokio::test]
async fn a_repeated_call_is_answered_from_its_earlier_result_then_the_model_is_told_to_answer() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    for _ in 0..3 {
        fake.push_reply(read_note());
    }
    fake.push_reply(Reply::text("The secret word is marigold.", 10, 5));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "What is the secret word?").await;
    assert_ended(&done, "completed", "The secret word is marigold.", &fake, 4);

    let sent = work(&fake);
    let results = tool_results(&sent[3]);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].1, "The secret word is: marigold\n");
    for (_, repeat) in &results[1..] {
        assert!(
            repeat.starts_with("The secret word is: marigold\n"),
            "{repeat}"
        );
        assert!(repeat.contains("already called"), "{repeat}");
    }
    // After one repeat the model may still call; after the second it is told to answer,
    // with no tools offered.
    assert!(offers_tools(&sent[2]));
    assert!(!offers_tools(&sent[3]));
    let told = last_message(&sent[3]);
    assert_eq!(told["role"], "user");
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .contains("Answer the request now"),
        "{told}"
    );
}

#[tokio::test]
async fn a_repeat_after_a_write_runs_again() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            change(),
            read_note(),
            Reply::tool_call(
                "write_file",
                json!({"path": "NOTE.txt", "content": "The secret word is: tulip\n"}),
                10,
                2,
            ),
            read_note(),
            Reply::text("tulip", 10, 1),
        ],
        "Change the word, then read it back.",
    )
    .await;
    assert_eq!(
        result_of(&done),
        "tulip\n\nchanged: NOTE.txt (+1 -1)\nchecks: none found",
        "{done}"
    );
    let results = tool_results(&work(&fake)[3]);
    assert_eq!(results[2].1, "The secret word is: tulip\n");
}

#[tokio::test]
async fn an_empty_answer_gets_one_call_asking_for_the_answer() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            read_note(),
            Reply::text("", 10, 0),
            Reply::text("marigold", 10, 1),
        ],
        "What is the secret word?",
    )
    .await;
    assert_ended(&done, "completed", "marigold", &fake, 3);
    let recovery = &work(&fake)[2];
    assert!(!offers_tools(recovery));
    let asked = last_message(recovery);
    assert_eq!(asked["role"], "user");
    assert!(
        asked["content"]
            .as_str()
            .unwrap()
            .contains("Using the tool results"),
        "{asked}"
    );
    // The tool result is still in the conversation the model answers from.
    assert_eq!(tool_results(recovery).len(), 1);
}

#[tokio::test]
async fn a_model_that_never_answers_fails_saying_so() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            read_note(),
            Reply::text("  \n", 10, 1),
            Reply::text(
                "<tool_response>\nThe secret word is: marigold\n</tool_response>",
                10,
                9,
            ),
        ],
        "Read NOTE.txt and tell me the secret word.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    let reason = result_of(&done);
    assert!(reason.contains("the model gave no answer"), "{reason}");
    assert!(reason.contains("3 model calls, tools ran"), "{reason}");
    assert!(reason.contains("larger model"), "{reason}");
    assert_eq!(work(&fake).len(), 3);
}

#[tokio::test]
async fn plain_chat_without_tools_also_never_completes_empty() {
    let ws = workspace();
    let fake = FakeOllama::spawn(
        support::fake_ollama::FakeConfig::default().with_capabilities(&["completion"]),
    );
    fake.push_reply(Reply::text("", 5, 0));
    fake.push_reply(Reply::text("Hello!", 5, 1));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "Say hello.").await;
    assert_eq!(result_of(&done), "Hello!", "{done}");
    let sent = work(&fake);
    assert!(!offers_tools(&sent[1]));
    assert_eq!(
        sent[0]["messages"][0]["content"],
        agent_mcp::config::Config::default()
            .agent
            .system_prompt
            .as_str()
    );
    assert!(last_said(&sent[1]).contains("Your last reply was empty"),);
}

#[tokio::test]
async fn a_copied_tools_block_before_any_call_gets_the_tools_back_not_a_guess() {
    // What the real 1.5B model did: its first reply imitated the chat template's block of tool
    // definitions. That is no answer, and asked for one without tools it made a value up.
    let (done, fake, _server, _ws) = scripted(
        vec![question(),
            Reply::text(
                "<tools>\n{\"function\": {\"name\": \"get_secret\", \"parameters\": {}}, \"type\": \"function\"}\n</tools>",
                10,
                20,
            ),
            read_note(),
            Reply::text("The secret word is marigold.", 10, 5),
        ],
        "What is the secret word?",
    )
    .await;
    assert_ended(&done, "completed", "The secret word is marigold.", &fake, 3);
    let sent = work(&fake);
    assert!(offers_tools(&sent[1]), "the tools stay offered");
    let told = last_message(&sent[1]);
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .contains("call the tool that finds it"),
        "{told}"
    );
}

#[tokio::test]
async fn echoed_tool_markup_is_stripped_from_the_answer() {
    let (done, fake, _server, _ws) = scripted(
        vec![question(),
            read_note(),
            Reply::text(
        "<tool_response>\nerror: 'notes.txt' does not exist\n</tool_response>\nThe secret word is marigold.",
        10,
        20,
    ),
        ],
        "Read NOTE.txt and tell me the secret word.",
    )
    .await;
    assert_ended(&done, "completed", "The secret word is marigold.", &fake, 2);
}

#[tokio::test]
async fn a_markup_only_answer_is_no_answer_and_gets_the_recovery_call() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            read_note(),
            Reply::text(
                "<tool_response>\nThe secret word is: marigold\n</tool_response>",
                10,
                12,
            ),
            Reply::text("The secret word is marigold.", 10, 6),
        ],
        "Read NOTE.txt and tell me the secret word.",
    )
    .await;
    assert_eq!(result_of(&done), "The secret word is marigold.", "{done}");
    assert_eq!(work(&fake).len(), 3);
    assert!(!offers_tools(&work(&fake)[2]));
}

#[tokio::test]
async fn tool_calls_written_as_json_in_the_text_are_run() {
    let (done, fake, _server, _ws) = scripted(
        vec![question(),
            Reply::text(
        r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#,
        10,
        9,
    ),
            Reply::text(
        "I will read b.txt.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b.txt\"}}\n```",
        10,
        9,
    ),
            Reply::text(
        "<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {}}\n</tool_call>",
        10,
        9,
    ),
            Reply::text("alpha, beta; three files.", 10, 6),
        ],
        "Read the two short files, then list the folder.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(result_of(&done), "alpha, beta; three files.");
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    let results = tool_results(&sent[3]);
    assert_eq!(results[0], ("read_file".to_owned(), "alpha".to_owned()));
    assert_eq!(results[1], ("read_file".to_owned(), "beta".to_owned()));
    assert_eq!(results[2].0, "list_dir");
    assert!(results[2].1.contains("NOTE.txt"), "{}", results[2].1);
    // The calls go back to the model as its own tool calls, not as text.
    let turns: Vec<&Value> = sent[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(turns.len(), 3);
    for turn in turns {
        assert_eq!(turn["content"], "", "{turn}");
        assert_eq!(
            turn["tool_calls"].as_array().map(Vec::len),
            Some(1),
            "{turn}"
        );
    }
}

#[tokio::test]
async fn json_naming_no_offered_tool_stays_the_answer() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    let text = r#"{"name": "delete_everything", "arguments": {}}"#;
    fake.push_reply(Reply::text(text, 10, 9));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "Give me a JSON example.").await;
    assert_eq!(result_of(&done), text, "{done}");
    assert_eq!(work(&fake).len(), 1);
}

#[tokio::test]
async fn an_answer_that_only_describes_a_call_gets_one_call_telling_the_model_to_make_it() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            Reply::text(
                "To find the secret word in NOTE.txt, I used the `read_file` function. The result \
         contains the secret word.",
                10,
                20,
            ),
            read_note(),
            Reply::text("marigold", 10, 1),
        ],
        "What is the secret word?",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(result_of(&done), "marigold");
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    assert!(offers_tools(&sent[1]), "the model is to call the tool now");
    assert!(last_said(&sent[1]).contains("No tool has run yet"),);
    assert_eq!(
        tool_results(&sent[2])[0].1,
        "The secret word is: marigold\n"
    );
}

#[tokio::test]
async fn reading_a_missing_file_reads_its_one_look_alike_saying_so() {
    // The benchmark's notes-file-by-description: `notes.txt` asked, `notes-2024.txt` there.
    let ws = workspace();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("docs/notes-2024.txt"), "juniper\n").unwrap();
    let (done, fake, _server, _ws) = scripted_in(
        ws,
        vec![
            question(),
            Reply::tool_call("read_file", json!({"path": "docs/notes.txt"}), 10, 2),
            Reply::text("juniper", 10, 1),
        ],
        "Read the notes in docs.",
    )
    .await;
    assert_eq!(result_of(&done), "juniper", "{done}");
    assert_eq!(
        tool_results(&work(&fake)[1])[0].1,
        "'docs/notes.txt' does not exist; the one file like it there, 'docs/notes-2024.txt', \
         was read instead:\njuniper\n"
    );
}

#[tokio::test]
async fn reading_a_missing_file_without_one_look_alike_shows_what_the_folder_holds() {
    let ws = workspace();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("docs/notes-2024.txt"), "juniper\n").unwrap();
    std::fs::write(ws.path().join("docs/notes-2025.txt"), "cedar\n").unwrap();
    let (done, fake, _server, _ws) = scripted_in(
        ws,
        vec![
            question(),
            Reply::tool_call("read_file", json!({"path": "docs/notes.txt"}), 10, 2),
            Reply::tool_call("read_file", json!({"path": "nowhere/notes.txt"}), 10, 2),
            Reply::tool_call("read_file", json!({"path": "docs/notes-2024.txt"}), 10, 2),
            Reply::text("juniper", 10, 1),
        ],
        "Read the 2024 notes in docs.",
    )
    .await;
    assert_eq!(result_of(&done), "juniper", "{done}");
    let results = tool_results(&work(&fake)[2]);
    // Two look-alikes: neither is read, nor suggested; the folder is shown.
    assert!(
        results[0].1.starts_with(
            "error: 'docs/notes.txt' does not exist. The folder docs: 2 entries:\n\
             notes-2024.txt (8 bytes)\nnotes-2025.txt (6 bytes)"
        ),
        "{}",
        results[0].1
    );
    assert_eq!(
        results[1].1,
        "error: 'nowhere/notes.txt' does not exist; use list_dir to see what the workspace holds"
    );
}

#[tokio::test]
async fn the_same_command_again_gets_its_earlier_output() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    let echo = json!({"argv": ["echo", "hello-42"]});
    fake.push_reply(Reply::tool_call("run_command", echo.clone(), 10, 2));
    fake.push_reply(Reply::tool_call("run_command", echo, 10, 2));
    fake.push_reply(Reply::text("It printed hello-42.", 10, 5));
    let mut config = config(&fake, ws.path());
    config.agent.commands.allow = vec!["echo".into()];
    let server = HttpServer::start(config).await;
    let done = run(&server.client(), "Run echo hello-42 and report.").await;
    assert_eq!(result_of(&done), "It printed hello-42.", "{done}");
    let results = tool_results(&work(&fake)[2]);
    assert!(results[0].1.contains("hello-42"), "{}", results[0].1);
    assert!(!results[0].1.contains("already called"), "{}", results[0].1);
    assert!(results[1].1.starts_with(&results[0].1), "{}", results[1].1);
    assert!(results[1].1.contains("already called"), "{}", results[1].1);
}

#[tokio::test]
async fn an_empty_final_answer_of_a_plan_fails_the_task() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    let plan = json!({"steps": [
        {"id": "a", "title": "Read a", "instructions": "Read a.txt.", "dependencies": []},
        {"id": "b", "title": "Read b", "instructions": "Read b.txt.", "dependencies": []}
    ]})
    .to_string();
    fake.push_reply(Reply::text(&plan, 10, 10));
    fake.push_reply(Reply::text("alpha", 10, 1));
    fake.push_reply(Reply::text("beta", 10, 1));
    fake.push_reply(Reply::text(
        "<tool_response>\nalpha\n</tool_response>",
        10,
        8,
    ));
    let mut config = config(&fake, ws.path());
    config.agent.planning = true;
    let server = HttpServer::start(config).await;
    let done = run(&server.client(), "Read the two files.").await;
    assert_failed_saying(
        &done,
        "the model's final answer from their results was empty",
        &fake,
        4,
    );
}

#[tokio::test]
async fn describing_a_call_again_after_being_told_to_call_it_fails_the_task() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    let described =
        "To find the code name, I used the `search_text` function with the pattern 'code'.";
    fake.push_reply(Reply::text(described, 10, 20));
    // Not a read of an existing path: nothing to make on its behalf.
    fake.push_reply(Reply::text(described, 10, 20));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "What code name is written down here?").await;
    assert_failed_saying(
        &done,
        "the model described using a tool instead of calling it",
        &fake,
        2,
    );
}

#[tokio::test]
async fn after_a_failed_call_the_model_is_told_the_request_is_not_answered_yet() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            Reply::tool_call("read_file", json!({"path": "memo.txt"}), 10, 2),
            read_note(),
            Reply::text("marigold", 10, 1),
        ],
        "Read the note and tell me the secret word.",
    )
    .await;
    assert_eq!(result_of(&done), "marigold", "{done}");
    let sent = work(&fake);
    let after_error = last_said(&sent[1]).to_owned();
    assert!(
        after_error.contains("The tool call failed"),
        "{after_error}"
    );
    assert!(after_error.contains("Read the note and tell me the secret word."));
    let after_result = last_said(&sent[2]).to_owned();
    assert!(
        after_result.starts_with("The tool results are above; they come from the tools"),
        "{after_result}"
    );
    assert!(after_result.contains("Read the note and tell me the secret word."));
}

#[tokio::test]
async fn a_markup_only_reply_after_a_failed_call_gets_the_tools_back() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            Reply::tool_call("read_file", json!({"path": "memo.txt"}), 10, 2),
            Reply::text(
                "<tool_response>\nerror: 'memo.txt' does not exist.\n</tool_response>",
                10,
                9,
            ),
            read_note(),
            Reply::text("marigold", 10, 1),
        ],
        "Tell me the secret word.",
    )
    .await;
    assert_eq!(result_of(&done), "marigold", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    let first = &tool_results(&sent[1])[0].1;
    assert!(
        first.contains("The folder .: 3 entries:\nNOTE.txt (29 bytes)"),
        "{first}"
    );
    assert!(offers_tools(&sent[2]), "a corrected call needs the tools");
    assert!(last_said(&sent[2]).contains("The tool call failed"),);
}

#[tokio::test]
async fn a_file_the_request_names_is_read_before_the_first_call() {
    // The 1.5B model picks the right first tool, then fumbles the answer after it: with the
    // file already read, its first reply can be the answer.
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            Reply::text("The secret word is marigold.", 10, 6),
        ],
        "According to `NOTE.txt`, what is the secret word?",
    )
    .await;
    assert_eq!(result_of(&done), "The secret word is marigold.", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        tool_results(&sent[0]),
        [(
            "read_file".to_owned(),
            "The secret word is: marigold\n".to_owned()
        )]
    );
    // Sent as the model's own call (it made none), followed by the results' framing.
    let said = &sent[0]["messages"].as_array().unwrap()[2];
    assert_eq!(said["role"], "assistant");
    assert_eq!(said["tool_calls"][0]["function"]["name"], "read_file");
    assert!(last_said(&sent[0]).starts_with("The tool results are above"));
}

#[tokio::test]
async fn a_named_file_that_does_not_exist_does_not_cost_a_call() {
    let (done, fake, _server, _ws) = scripted(
        vec![question(), Reply::text("Use serde_json::from_str.", 10, 6)],
        "How do I parse settings.json in Rust?",
    )
    .await;
    assert_eq!(result_of(&done), "Use serde_json::from_str.", "{done}");
    assert_eq!(work(&fake).len(), 1);
}

#[tokio::test]
async fn a_read_described_twice_is_made_on_the_models_behalf() {
    let ws = workspace();
    std::fs::create_dir(ws.path().join("docs")).unwrap();
    std::fs::write(ws.path().join("docs/NOTE.txt"), "Code name: bluefin\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    let described = "To find the code name in the file `docs/NOTE.txt`, I used the `read_file` \
                     function with the path `\"docs/NOTE.txt\"`.";
    fake.push_reply(Reply::text(described, 10, 20));
    fake.push_reply(Reply::text(described, 10, 20));
    fake.push_reply(Reply::text("The code name is bluefin.", 10, 6));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "What code name is kept in docs?").await;
    assert_eq!(result_of(&done), "The code name is bluefin.", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    assert_eq!(
        tool_results(&sent[2]),
        [("read_file".to_owned(), "Code name: bluefin\n".to_owned())]
    );
}

#[tokio::test]
async fn a_windows_style_path_reads_the_file_it_means() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            Reply::tool_call("read_file", json!({"path": ".\\NOTE.txt"}), 10, 2),
            Reply::text("marigold", 10, 1),
        ],
        "Read the note.",
    )
    .await;
    assert_eq!(result_of(&done), "marigold", "{done}");
    assert_eq!(
        tool_results(&work(&fake)[1])[0].1,
        "The secret word is: marigold\n"
    );
}

#[tokio::test]
async fn an_answer_about_the_tools_after_reading_gets_one_call_asking_for_the_answer_itself() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    fake.push_reply(read_note());
    // What the 1.5B model did in the benchmark: it read the right file, then explained the tool.
    fake.push_reply(Reply::text(
        "To get the secret word, use the `read_file` function with the path NOTE.txt.",
        10,
        12,
    ));
    fake.push_reply(Reply::text("The secret word is marigold.", 10, 6));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "What is the secret word?").await;
    assert_ended(&done, "completed", "The secret word is marigold.", &fake, 3);
    let asked_again = &work(&fake)[2];
    assert!(!offers_tools(asked_again));
    let asked = last_message(asked_again);
    assert!(
        asked["content"]
            .as_str()
            .unwrap()
            .contains("talks about the tools instead of answering"),
        "{asked}"
    );
    // The description is left out; the tool result stays.
    assert_eq!(tool_results(asked_again).len(), 1);
    assert!(
        !asked_again
            .to_string()
            .contains("use the `read_file` function"),
        "the tool description must not stay in the conversation"
    );
}

#[tokio::test]
async fn an_answer_naming_a_tool_is_kept_when_the_request_is_about_that_tool() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            read_note(),
            Reply::text("read_file read NOTE.txt: marigold.", 10, 6),
        ],
        "Use read_file on NOTE.txt and say what it returned.",
    )
    .await;
    assert_ended(
        &done,
        "completed",
        "read_file read NOTE.txt: marigold.",
        &fake,
        2,
    );
}

const VERSION_REQUEST: &str = "Read VERSION, then write its version followed by -final into \
                               release.txt (for example 1.0-final).";

/// A workspace with VERSION (2.4.1), and a fake whose first reply is the 1.5B model's shape in
/// the benchmark: `read_file` of VERSION and, in the same reply, `write_file` of the request's
/// example ("1.0-final") before it could know the version.
async fn read_and_early_write() -> (tempfile::TempDir, FakeOllama) {
    let ws = workspace();
    std::fs::write(ws.path().join("VERSION"), "2.4.1\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(change());
    fake.push_reply(Reply::tool_calls(
        &[
            ("read_file", json!({"path": "VERSION"})),
            (
                "write_file",
                json!({"path": "release.txt", "content": "1.0-final\n"}),
            ),
        ],
        10,
        9,
    ));
    (ws, fake)
}

#[tokio::test]
async fn a_write_in_the_same_reply_as_a_read_waits_for_the_reads_result() {
    let (ws, fake) = read_and_early_write().await;
    fake.push_reply(Reply::tool_call(
        "write_file",
        json!({"path": "release.txt", "content": "2.4.1-final\n"}),
        10,
        5,
    ));
    fake.push_reply(Reply::text("release.txt holds 2.4.1-final.", 10, 6));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), VERSION_REQUEST).await;
    assert_eq!(
        result_of(&done),
        "release.txt holds 2.4.1-final.\n\nchanged: release.txt (new, +1)\nchecks: none found",
        "{done}"
    );
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    // The early write is left out of the conversation: the model sees reads and their results
    // only (VERSION, which the request names, read first on its behalf, then its own read,
    // answered from that).
    let results = tool_results(&sent[1]);
    assert!(!results.is_empty());
    assert!(
        results
            .iter()
            .all(|(tool, text)| tool == "read_file" && text.starts_with("2.4.1\n")),
        "{results:?}"
    );
    let said: Vec<&Value> = sent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert!(
        !said.iter().any(|m| m.to_string().contains("1.0-final")),
        "{said:?}"
    );
    let asked = last_said(&sent[1]);
    assert!(
        asked.contains("Nothing has been written yet. Now make the write_file call"),
        "{asked}"
    );
    assert!(offers_tools(&sent[1]));
    assert_holds(&ws, "release.txt", "2.4.1-final\n");
}

#[tokio::test]
async fn writes_without_a_read_in_their_reply_run_at_once() {
    let (done, fake, _server, ws) = scripted(
        vec![
            change(),
            Reply::tool_calls(
                &[
                    ("write_file", json!({"path": "x.txt", "content": "x"})),
                    ("write_file", json!({"path": "y.txt", "content": "y"})),
                ],
                10,
                9,
            ),
            Reply::text("Both written.", 10, 3),
        ],
        "Write x into x.txt and y into y.txt.",
    )
    .await;
    assert_eq!(
        result_of(&done),
        "Both written.\n\nchanged: x.txt (new, +1), y.txt (new, +1)\nchecks: none found",
        "{done}"
    );
    assert_eq!(work(&fake).len(), 2);
    assert_holds(&ws, "y.txt", "y");
}

#[tokio::test]
async fn a_read_described_after_a_failed_read_is_made_on_the_models_behalf() {
    // The benchmark's shape: the wrong name, the error suggests the right one, and the model
    // answers by describing the read (with a Windows separator) instead of making it.
    let ws = workspace();
    std::fs::write(ws.path().join("xq7_memo.txt"), "password: copperleaf\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    fake.push_reply(Reply::tool_call(
        "read_file",
        json!({"path": ".\\password.txt"}),
        10,
        2,
    ));
    let described = "To find the password, you can use the `read_file` function with the path \
                     `.\\\\xq7_memo.txt`.";
    fake.push_reply(Reply::text(described, 10, 20));
    fake.push_reply(Reply::text("The password is copperleaf.", 10, 6));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(
        &server.client(),
        "Find the memo file and tell me the password written in it.",
    )
    .await;
    assert_eq!(result_of(&done), "The password is copperleaf.", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    let results = tool_results(&sent[2]);
    assert!(
        results[0]
            .1
            .starts_with("error: '.\\password.txt' does not exist.")
    );
    assert_eq!(
        results[1],
        ("read_file".into(), "password: copperleaf\n".into())
    );
    assert!(
        !sent[2]
            .to_string()
            .contains("you can use the `read_file` function"),
        "the description must not stay in the conversation"
    );
}

#[tokio::test]
async fn an_answer_after_only_failed_calls_gets_one_call_saying_it_is_a_guess() {
    // The benchmark's shape: a made-up file, then the answer it wrote before any result.
    let ws = workspace();
    std::fs::write(ws.path().join("animals.txt"), "a zebra crossed the road\n").unwrap();
    let fake = FakeOllama::start().await;
    fake.push_reply(question());
    fake.push_reply(Reply::tool_call(
        "read_file",
        json!({"path": "src/main.rs"}),
        10,
        2,
    ));
    fake.push_reply(Reply::text("This file contains the word 'zebra'.", 10, 9));
    fake.push_reply(Reply::tool_call(
        "search_text",
        json!({"pattern": "zebra"}),
        10,
        4,
    ));
    fake.push_reply(Reply::text("animals.txt", 10, 3));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "Which file mentions the word 'zebra'?").await;
    assert_eq!(result_of(&done), "animals.txt", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    assert!(offers_tools(&sent[2]), "finding it needs the tools");
    let asked = last_said(&sent[2]);
    assert!(
        asked.starts_with("None of your tool calls has worked yet"),
        "{asked}"
    );
    assert!(asked.contains("Which file mentions the word 'zebra'?"));
    assert!(!sent[2].to_string().contains("This file contains the word"));
    assert_eq!(
        tool_results(&sent[3])[1].1,
        "animals.txt:1: a zebra crossed the road"
    );
}

#[tokio::test]
async fn the_same_answer_after_being_told_it_is_a_guess_is_no_result() {
    // Every call failed, so the answer rests on nothing: told once, said again, the task fails
    // (showing what the model said: a missing file may be the answer itself).
    let (done, fake, _server, _ws) = scripted(
        vec![
            question(),
            Reply::tool_call("read_file", json!({"path": "missing/notes.txt"}), 10, 2),
            Reply::text("There is no notes file.", 10, 5),
            Reply::text("There is no notes file.", 10, 5),
        ],
        "Read missing/notes.txt.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    let reason = result_of(&done);
    assert!(
        reason.contains(
            "every tool call of the step failed (1 calls; the last: error: \
                         'missing/notes.txt' does not exist"
        ),
        "{reason}"
    );
    assert!(
        reason.ends_with("it said: There is no notes file."),
        "{reason}"
    );
    assert_eq!(work(&fake).len(), 3);
}

#[tokio::test]
async fn a_held_write_never_made_again_fails_the_task_after_one_reminder() {
    let (ws, fake) = read_and_early_write().await;
    // The benchmark's shape: it reports the version and forgets the write.
    fake.push_reply(Reply::text("The version in VERSION is 2.4.1.", 10, 9));
    fake.push_reply(Reply::text("The version in VERSION is 2.4.1.", 10, 9));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), VERSION_REQUEST).await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert!(
        done.contains("answered without making the write_file call"),
        "{done}"
    );
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    let reminder = last_said(&sent[2]);
    assert!(
        reminder.contains("Nothing has been written yet. Now make the write_file call"),
        "{reminder}"
    );
    assert!(!sent[2].to_string().contains("The version in VERSION is"));
    assert!(offers_tools(&sent[2]), "making the write needs the tools");
    assert!(!ws.path().join("release.txt").exists());
}

#[tokio::test]
async fn an_answer_that_copies_the_loops_own_message_is_no_answer() {
    // The held-out benchmark's edit-todo: after the edit, the model returned the message that
    // frames the results, word for word.
    let framing = "The tool results are above; they come from the tools, not from you. The \
                   request is: Change alpha to omega in a.txt.\nIf the results hold what it asks \
                   for, answer it now from them, in plain words: quote the names, values or \
                   lines it asks for, not a description of what you did. If not, call the next \
                   tool you need.";
    let (done, fake, _server, ws) = scripted(
        vec![
            change(),
            Reply::tool_calls(
                &[
                    ("read_file", json!({"path": "a.txt"})),
                    (
                        "edit_file",
                        json!({"path": "a.txt", "old_text": "alpha", "new_text": "omega"}),
                    ),
                ],
                10,
                5,
            ),
            Reply::text(framing, 10, 60),
            Reply::text("a.txt now says omega.", 10, 6),
        ],
        "Change alpha to omega in a.txt.",
    )
    .await;
    assert_eq!(
        result_of(&done),
        "a.txt now says omega.\n\nchanged: a.txt (+1 -1)\nchecks: none found",
        "{done}"
    );
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    // The copy was checked against what the loop really sent.
    assert_eq!(last_message(&sent[1])["content"], framing);
    assert!(!offers_tools(&sent[2]));
    // The recovery call follows the whole conversation unchanged (the prompt only grows, for
    // the KV cache): the copied message, then the question.
    assert!(
        sent[2]["messages"]
            .as_array()
            .unwrap()
            .starts_with(sent[1]["messages"].as_array().unwrap())
    );
    assert!(last_said(&sent[2]).starts_with("Your last reply had no answer in it."));
    // a.txt read first on the model's behalf (the request names it), then its own two calls.
    assert_eq!(tool_results(&sent[2]).len(), 3);
    assert_holds(&ws, "a.txt", "omega");
}

#[tokio::test]
async fn a_file_the_request_asks_to_write_gets_one_reminder_when_the_model_answers_instead() {
    // The held-out benchmark's count-then-write: it ran wc, answered "4", wrote nothing.
    let (done, fake, _server, ws) = scripted(
        vec![
            change(),
            Reply::tool_call("read_file", json!({"path": "a.txt"}), 10, 2),
            Reply::text("5", 10, 1),
            Reply::tool_call(
                "write_file",
                json!({"path": "count.txt", "content": "5\n"}),
                10,
                5,
            ),
            Reply::text("Wrote 5 into count.txt.", 10, 6),
        ],
        "Count the letters of a.txt and write the number into count.txt.",
    )
    .await;
    assert_eq!(
        result_of(&done),
        "Wrote 5 into count.txt.\n\nchanged: count.txt (new, +1)\nchecks: none found",
        "{done}"
    );
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    let reminder = last_said(&sent[2]);
    assert!(
        reminder.starts_with("The request asks for 'count.txt' to be written"),
        "{reminder}"
    );
    assert!(offers_tools(&sent[2]));
    assert_holds(&ws, "count.txt", "5\n");
}

#[tokio::test]
async fn an_answer_after_the_write_reminder_that_still_writes_nothing_fails_the_task() {
    let (done, fake, _server, _ws) = scripted(
        vec![
            change(),
            Reply::text("I would rather not write anything.", 10, 6),
            Reply::text("I would rather not write anything.", 10, 6),
        ],
        "Write a poem into poem.txt.",
    )
    .await;
    assert_ended(
        &done,
        "failed",
        "the request asks for a change to the workspace, but no file changed, so it was not \
         done; the model said: I would rather not write anything.",
        &fake,
        2,
    );
}

#[tokio::test]
async fn a_file_named_by_its_stem_is_read_before_the_first_call() {
    // The held-out benchmark's readme-title: "according to the README", answered at once.
    let ws = workspace();
    std::fs::write(ws.path().join("README.md"), "# Project Falcon\n").unwrap();
    let (done, fake, _server, _ws) = scripted_in(
        ws,
        vec![question(), Reply::text("Falcon", 10, 1)],
        "What is the project called, according to the README?",
    )
    .await;
    assert_eq!(result_of(&done), "Falcon", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        tool_results(&sent[0]),
        [("read_file".to_owned(), "# Project Falcon\n".to_owned())]
    );
}

#[tokio::test]
async fn a_question_about_a_missing_file_reads_its_one_look_alike_first() {
    // The 1.5B model, asked about settings.ini beside settings.toml with nothing read, made a
    // timeout up.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("settings.toml"),
        "retries = 3\ntimeout = 45\n",
    )
    .unwrap();
    let (done, fake, _server, _ws) = scripted_in(
        ws,
        vec![question(), Reply::text("The timeout is 45.", 10, 6)],
        "What timeout does settings.ini set?",
    )
    .await;
    assert_eq!(result_of(&done), "The timeout is 45.", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        tool_results(&sent[0]),
        [(
            "read_file".to_owned(),
            "'settings.ini' does not exist; the one file like it there, 'settings.toml', was \
             read instead:\nretries = 3\ntimeout = 45\n"
                .to_owned()
        )]
    );
}

/// A workspace of utils.py (a used and an unused function) and app.py, which uses the first.
fn dead_function_workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("utils.py"),
        "def used_one(x):\n    return x + 1\n\n\ndef old_helper(x):\n    return x * 100\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("app.py"),
        "from utils import used_one\n\nprint(used_one(41))\n",
    )
    .unwrap();
    ws
}

const REMOVE_DEAD: &str = "Remove the unused function old_helper from utils.py.";

/// A reply that is only a Python code block holding `code`.
fn python_block(code: &str) -> Reply {
    Reply::text(&format!("```python\n{code}```"), 10, 15)
}

#[tokio::test]
async fn a_change_described_instead_of_made_is_asked_for_as_the_whole_file_and_written() {
    // The coding benchmark's remove-dead-function: the 1.5B model read utils.py and explained
    // how one would call edit_file, twice, and changed nothing. The same in languages no list
    // of the engine's knows: the model's reading says a change is asked, the rest is the
    // workspace's.
    for request in [
        REMOVE_DEAD,
        "Ondoa kazi isiyotumika old_helper kutoka utils.py.",
        "utils.py dosyasındaki kullanılmayan old_helper fonksiyonunu kaldır.",
    ] {
        described_change_is_asked_for_whole(request).await;
    }
}

async fn described_change_is_asked_for_whole(request: &str) {
    let (done, fake, _server, ws) = scripted_in(
        dead_function_workspace(),
        vec![
            change(),
            Reply::text(
                "To remove old_helper you can call edit_file with the function's lines.",
                10,
                12,
            ),
            Reply::text(
                "Here it is:\n```python\ndef used_one(x):\n    return x + 1\n```",
                10,
                15,
            ),
            Reply::text("Removed old_helper from utils.py.", 10, 7),
        ],
        request,
    )
    .await;
    // The changed Python file's syntax and names are read where commands are on (by default,
    // where the kernel has Landlock to confine them).
    let names = if agent_mcp::agent::tools::sandbox::landlock().is_ok() {
        "; Python syntax and names (utils.py): passed"
    } else {
        ""
    };
    assert_eq!(
        result_of(&done),
        format!(
            "Removed old_helper from utils.py.\n\nchanged: utils.py (+0 -4)\nchecks: none \
             found{names}"
        ),
        "{done}"
    );
    assert_eq!(work(&fake).len(), 3);
    assert_holds(&ws, "utils.py", "def used_one(x):\n    return x + 1\n");
    let sent = work(&fake);
    let asked = last_said(&sent[1]);
    assert!(
        asked.starts_with(&format!("The request is: {request}\n")),
        "{asked}"
    );
    assert!(
        asked.contains("Write the complete new content of utils.py, with the change made"),
        "{asked}"
    );
    // The ask keeps the tools (and so the prompt's prefix), and the block was the write.
    assert!(offers_tools(&sent[1]));
    assert!(
        sent[1]["messages"]
            .as_array()
            .unwrap()
            .starts_with(&sent[0]["messages"].as_array().unwrap()[..])
    );
    let results = tool_results(&sent[2]);
    assert_eq!(results.last().unwrap().0, "write_file");
}

#[tokio::test]
async fn a_whole_file_that_drops_what_the_request_keeps_is_not_written() {
    let (done, fake, _server, ws) = scripted_in(
        dead_function_workspace(),
        vec![
            change(),
            Reply::text("Done, old_helper is gone.", 10, 6),
            // Asked for the whole file, it gives a part of it, then a file without used_one.
            python_block("def used_one(x):\n    return x + 1\n# ... rest of the file\n"),
            python_block("import os\n"),
            python_block("def used_one(x):\n    return x + 1\n"),
            Reply::text("Removed it.", 10, 3),
        ],
        REMOVE_DEAD,
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(work(&fake).len(), 5);
    let sent = work(&fake);
    let gap = last_said(&sent[2]);
    assert!(
        gap.starts_with(
            "That code block was not written to utils.py. Its line `# ... rest of the file` \
             stands for lines it leaves out"
        ),
        "{gap}"
    );
    let dropped = last_said(&sent[3]);
    assert!(
        dropped.starts_with(
            "That code block was not written to utils.py: it drops `used_one`, which the \
             request does not ask to remove.\nThe request is: Remove"
        ),
        "{dropped}"
    );
    // Neither wrong block reached the file; the right one did.
    assert_eq!(tool_results(&sent[3]).len(), 1, "only the first read ran");
    assert_holds(&ws, "utils.py", "def used_one(x):\n    return x + 1\n");
}

#[tokio::test]
async fn a_request_naming_several_files_to_change_gets_no_whole_file_ask() {
    // Which of two named files is to change, nothing says: the general reminder, not a guess.
    let ws = workspace();
    let (done, fake, _server, _ws) = scripted_in(
        ws,
        vec![
            change(),
            Reply::text("You would edit a.txt and b.txt.", 10, 6),
            Reply::text("You would edit a.txt and b.txt.", 10, 6),
        ],
        "Refactor a.txt and b.txt.",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    let sent = work(&fake);
    assert_eq!(sent.len(), 2);
    let reminder = last_said(&sent[1]);
    assert!(
        reminder.starts_with("The request asks for a change to the workspace, and no file has"),
        "{reminder}"
    );
}

#[tokio::test]
async fn a_write_that_did_not_take_is_asked_for_as_the_whole_file() {
    // The coding benchmark's derive-csv: the header written, the edit that was to add the rows
    // failed, and the model reported the rows as if they were there.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("names.txt"), "ada\nbob\n").unwrap();
    std::fs::write(ws.path().join("ages.txt"), "36\n41\n").unwrap();
    let (done, fake, _server, ws) = scripted_in(
        ws,
        vec![change(),
            Reply::tool_calls(
                &[
                    (
                        "write_file",
                        json!({"path": "people.csv", "content": "name,age\n"}),
                    ),
                    (
                        "edit_file",
                        json!({"path": "people.csv", "old_text": "ada\nbob", "new_text": "ada,36\nbob,41"}),
                    ),
                ],
                10,
                20,
            ),
            Reply::text("people.csv holds ada,36 and bob,41.", 10, 9),
            Reply::text("```csv\nname,age\nada,36\nbob,41\n```", 10, 12),
            Reply::text("Wrote people.csv.", 10, 4),
        ],
        "names.txt and ages.txt hold one value per line, in the same order. Write people.csv \
         with a header line name,age and then one line per person, like ada,36.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_holds(&ws, "people.csv", "name,age\nada,36\nbob,41\n");
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    let asked = last_said(&sent[2]);
    assert!(
        asked.starts_with("The request is not done yet: the edit_file of people.csv did not take"),
        "{asked}"
    );
    // The file was read on the model's behalf before the ask (no blind overwrite).
    let results = tool_results(&sent[2]);
    assert_eq!(
        results.last().unwrap(),
        &("read_file".to_owned(), "name,age\n".to_owned())
    );
}

#[tokio::test]
async fn the_changed_part_alone_given_for_a_whole_file_is_made_as_an_edit_of_that_part() {
    // The coding benchmark's add-function: asked for all of strings.py, a small model gives
    // only the new function. It is not the file, but it is the change: described-edit adds it.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("strings.py"),
        "def shout(text):\n    return text.upper() + \"!\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("test_strings.py"),
        "import unittest\nfrom strings import reverse_words, shout\n",
    )
    .unwrap();
    let (done, fake, _server, ws) = scripted_in(
        ws,
        vec![
            // The test file fails before the work (it imports what is not there yet); the
            // model reads the request as adding the function, not as making those checks pass.
            reading(true, false, Some(false)),
            Reply::text("You can add it with edit_file.", 10, 6),
            python_block(
                "def reverse_words(text):\n    return \" \".join(reversed(text.split()))\n",
            ),
            Reply::text("Added reverse_words.", 10, 4),
        ],
        "test_strings.py expects a function reverse_words in strings.py. Add it, and keep shout \
         as it is.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(work(&fake).len(), 3);
    let sent = work(&fake);
    let asked = last_said(&sent[1]);
    assert!(
        asked.contains("Write the complete new content of strings.py"),
        "{asked}"
    );
    let now = std::fs::read_to_string(ws.path().join("strings.py")).unwrap();
    assert!(
        now.starts_with("def shout(text):\n    return text.upper() + \"!\"\n")
            && now.contains("def reverse_words(text):"),
        "{now}"
    );
}

#[tokio::test]
async fn a_fault_to_fix_named_by_no_file_keeps_the_tests_and_reads_what_they_import() {
    // The contract's own request on the coding benchmark: the 1.5B model, shown only the
    // failing test, rewrote the test's expected value.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("greet.py"),
        "def greet(name):\n    return \"Hello, \" + name\n",
    )
    .unwrap();
    let test = "import unittest\nfrom greet import greet\n\n\nclass GreetTest(unittest.TestCase):\n    def test_greet(self):\n        self.assertEqual(greet(\"Ada\"), \"Hello, Ada!\")\n";
    std::fs::write(ws.path().join("test_greet.py"), test).unwrap();
    let (done, fake, _server, ws) = scripted_tested(
        ws,
        vec![reading(true, false, Some(true)),
            Reply::tool_call(
                "edit_file",
                json!({"path": "test_greet.py", "old_text": "Hello, Ada!", "new_text": "Hello, Ada"}),
                10,
                9,
            ),
            Reply::text("テストは通りました。", 10, 5),
            python_block("def greet(name):\n    return \"Hello, \" + name + \"!\"\n"),
            Reply::text("greet に「!」を付けるよう修正しました。", 10, 9),
        ],
        "プロジェクトのテスト失敗を調査し、原因を修正してください。",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_holds(&ws, "test_greet.py", test);
    assert_holds(
        &ws,
        "greet.py",
        "def greet(name):\n    return \"Hello, \" + name + \"!\"\n",
    );
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    // Before its first call the model saw the code under test, then the test.
    let first: Vec<String> = tool_results(&sent[0]).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        first,
        [
            "def greet(name):\n    return \"Hello, \" + name\n".to_owned(),
            test.to_owned()
        ]
    );
    let refused = &tool_results(&sent[1])[2].1;
    assert!(
        refused.contains("'test_greet.py' holds the tests this request is checked by"),
        "{refused}"
    );
    assert!(
        last_said(&sent[2]).contains("Write the complete new content of greet.py"),
        "{}",
        last_said(&sent[2])
    );
}

/// The coding benchmark's write-unit-test, played with `first` as the test file the model writes
/// first and a right one after; returns what the task's own test check told the model.
async fn write_unit_test_after(first: &str, claim: &str) -> String {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("mathutil.py"),
        "def square(x):\n    return x * x\n",
    )
    .unwrap();
    let good = "import unittest\nfrom mathutil import square\n\n\nclass T(unittest.TestCase):\n    def test_square(self):\n        self.assertEqual(square(3), 9)\n";
    let fake = FakeOllama::start().await;
    fake.push_reply(reading(true, true, None));
    fake.push_replies(vec![
        Reply::tool_call(
            "write_file",
            json!({"path": "test_mathutil.py", "content": first}),
            10,
            9,
        ),
        Reply::text(claim, 10, 4),
        python_block(good),
        Reply::text("Wrote test_mathutil.py.", 10, 5),
    ]);
    let mut config = config(&fake, ws.path());
    // The task's own test is its check when python3 may run.
    config.agent.commands.allow = vec!["python3".into()];
    let server = HttpServer::start(config).await;
    let done = run(
        &server.client(),
        "Write a unit test for the function square in mathutil.py, in a new file \
         test_mathutil.py, using unittest.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_holds(&ws, "test_mathutil.py", good);
    let sent = work(&fake);
    assert_eq!(sent.len(), 4);
    last_said(&sent[2]).to_string()
}

#[tokio::test]
async fn failing_checks_after_a_change_ask_for_the_changed_file_whole() {
    // The model wrote a test importing functions that do not exist, and after the failure only
    // explained it.
    let told = write_unit_test_after(
        "import unittest\nfrom mathutil import read_file\n",
        "Created the test.",
    )
    .await;
    assert!(told.contains("ImportError"), "{told}");
    assert!(
        told.contains("Write the complete new content of test_mathutil.py, with the change made"),
        "{told}"
    );
}

#[tokio::test]
async fn a_whole_file_copied_back_unchanged_is_no_change() {
    let (done, fake, _server, ws) = scripted_in(
        dead_function_workspace(),
        vec![
            change(),
            Reply::text("old_helper is unused.", 10, 5),
            python_block(
                "def used_one(x):\n    return x + 1\n\n\ndef old_helper(x):\n    return x * 100\n",
            ),
            python_block("def used_one(x):\n    return x + 1\n"),
            Reply::text("Removed old_helper.", 10, 4),
        ],
        REMOVE_DEAD,
    )
    .await;
    let told = completed_after_telling(
        &done,
        &ws,
        "utils.py",
        "def used_one(x):\n    return x + 1\n",
        &fake,
        4,
    );
    assert_starts(
        &told,
        "That code block is utils.py as it is now: the change the request asks for is not in it",
    );
}

#[tokio::test]
async fn a_test_file_of_the_tasks_own_that_runs_no_test_checks_nothing() {
    // The file the 1.5B model wrote held the function under test and no test; `python3 -m
    // unittest` ran 0 tests and (before 3.12) passed.
    let told =
        write_unit_test_after("def square(x):\n    return x * x\n", "The test passed.").await;
    assert!(told.contains("Ran 0 tests"), "{told}");
    assert!(
        told.contains("no test ran: a unittest test file needs"),
        "{told}"
    );
}

#[tokio::test]
async fn a_block_quoted_in_the_answer_after_a_change_is_not_made_again() {
    // The coding benchmark's derive-csv: people.csv written right, then the answer quoted it
    // with a typo ("ncy,29"), and that block, made as an edit, mangled the file.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("names.txt"), "ada\ncy\n").unwrap();
    std::fs::write(ws.path().join("ages.txt"), "36\n29\n").unwrap();
    let right = "name,age\nada,36\ncy,29\n";
    let (done, fake, _server, ws) = scripted_in(
        ws,
        vec![
            change(),
            Reply::tool_call(
                "write_file",
                json!({"path": "people.csv", "content": right}),
                10,
                9,
            ),
            Reply::text(
                "people.csv now holds:\n```\nname,age\nada,36\nncy,29\n```",
                10,
                12,
            ),
        ],
        "names.txt and ages.txt hold one value per line, in the same order. Write people.csv \
         with a header line name,age and then one line per person, like ada,36.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(work(&fake).len(), 2);
    assert_holds(&ws, "people.csv", right);
}

#[tokio::test]
async fn a_failed_write_to_a_folder_is_not_a_change_left_unmade() {
    // Seen in the held-out coding run (holdout-6-rename-constant): the 1.5B model first called
    // edit_file on ".", which failed ("'.' is a folder"), then wrote both files right; the task
    // ended `failed` with "the edit_file of . did not take". A folder is no file to change: the
    // request's own expectations (the old name gone) judge the result.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("config.py"), "TIMEOUT_SECS = 30\n").unwrap();
    std::fs::write(
        ws.path().join("client.py"),
        "from config import TIMEOUT_SECS\n\n\ndef timeout():\n    return TIMEOUT_SECS * 1000\n",
    )
    .unwrap();
    let (done, fake, _server, ws) = scripted_in(
        ws,
        vec![change(),
            Reply::tool_call(
                "edit_file",
                json!({"path": ".", "old_text": "TIMEOUT_SECS", "new_text": "TIMEOUT_SECONDS"}),
                10,
                9,
            ),
            Reply::tool_call("read_file", json!({"path": "config.py"}), 10, 5),
            Reply::tool_call("read_file", json!({"path": "client.py"}), 10, 5),
            Reply::tool_call(
                "write_file",
                json!({"path": "config.py", "content": "TIMEOUT_SECONDS = 30\n"}),
                10,
                9,
            ),
            Reply::tool_call(
                "write_file",
                json!({"path": "client.py", "content": "from config import TIMEOUT_SECONDS\n\n\ndef timeout():\n    return TIMEOUT_SECONDS * 1000\n"}),
                10,
                9,
            ),
            Reply::text("Renamed TIMEOUT_SECS to TIMEOUT_SECONDS in config.py and client.py.", 10, 12),
        ],
        "Rename the constant TIMEOUT_SECS to TIMEOUT_SECONDS in every file.",
    )
    .await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_holds(&ws, "config.py", "TIMEOUT_SECONDS = 30\n");
    assert_eq!(work(&fake).len(), 6);
}

#[tokio::test]
async fn a_korean_particle_on_a_file_name_names_that_file_not_a_new_one() {
    // Seen in the held-out coding run (holdout-7-add-max-ko): "utils.py에 … 추가해 주세요" (add
    // to utils.py) was read as asking for a new file `utils.py에`, and the model's code block
    // was written there; utils.py never changed and the task ended `completed`.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("utils.py"),
        "def min2(a, b):\n    return a if a < b else b\n",
    )
    .unwrap();
    let both = "def min2(a, b):\n    return a if a < b else b\n\n\ndef max2(a, b):\n    return a if a > b else b\n";
    let (done, fake, _server, ws) = scripted_in(
        ws,
        vec![
            change(),
            // utils.py is read first, on the model's behalf.
            Reply::text(
                "You can add this:\n```python\ndef max2(a, b):\n    return a if a > b else b\n```",
                10,
                20,
            ),
            Reply::text("utils.py에 max2를 추가했습니다.", 10, 8),
        ],
        "utils.py에 두 수 중 큰 값을 반환하는 함수 max2(a, b)를 추가해 주세요.",
    )
    .await;
    let names: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["utils.py"], "{done}");
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_holds(&ws, "utils.py", both);
    // The block is added to utils.py (`described-edit`), and the answer follows.
    assert_eq!(work(&fake).len(), 2);
}

#[tokio::test]
async fn a_whole_file_that_is_another_files_content_is_asked_again() {
    // Seen in the held-out coding run (holdout-7-rename-de): asked for main.py whole after
    // cart.py was renamed, the 1.5B model wrote cart.py's new content; written as main.py, the
    // old name was gone and the task ended `completed` with main.py lost.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("cart.py"),
        "def calc_total(prices):\n    return sum(prices)\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("main.py"),
        "from cart import calc_total\n\nprint(calc_total([1, 2, 3]))\n",
    )
    .unwrap();
    let main = "from cart import compute_total\n\nprint(compute_total([1, 2, 3]))\n";
    let (done, fake, _server, ws) = scripted_in(
        ws,
        vec![change(),
            // cart.py and main.py are read first, on the model's behalf.
            Reply::tool_call(
                "edit_file",
                json!({"path": "cart.py", "old_text": "def calc_total", "new_text": "def compute_total"}),
                10,
                9,
            ),
            Reply::text("Renamed calc_total to compute_total.", 10, 8),
            python_block("def compute_total(prices):\n    return sum(prices)\n"),
            python_block(main),
            Reply::text("Renamed calc_total to compute_total in cart.py and main.py.", 10, 12),
        ],
        "Benenne die Funktion calc_total in compute_total um, in cart.py und main.py.",
    )
    .await;
    let told = completed_after_telling(&done, &ws, "main.py", main, &fake, 5);
    assert_starts(
        &told,
        "That code block was not written to main.py: it has none of the lines of main.py",
    );
}

#[tokio::test]
async fn the_fixed_definition_alone_after_failed_checks_replaces_the_files() {
    // The coding benchmark's fix-off-by-one, in a run where the model's first edit was wrong:
    // asked after the failing checks for listutil.py whole, it gave the fixed `def last`
    // alone. That is the change: it takes the place of the file's `last`, keeping `first`.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("listutil.py"),
        "def first(items):\n    return items[0]\n\n\ndef last(items):\n    return items[len(items)]\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("test_listutil.py"),
        "import unittest\nfrom listutil import first, last\n\n\nclass ListTest(unittest.TestCase):\n    def test_first(self):\n        self.assertEqual(first([4, 5, 6]), 4)\n\n    def test_last(self):\n        self.assertEqual(last([4, 5, 6]), 6)\n",
    )
    .unwrap();
    let (done, fake, _server, ws) = scripted_tested(
        ws,
        vec![reading(true, false, Some(true)),
            Reply::tool_call(
                "edit_file",
                json!({"path": "listutil.py", "old_text": "return items[len(items)]", "new_text": "return items[len(items) + 1]"}),
                10,
                9,
            ),
            Reply::text("The bug was in last.", 10, 5),
            python_block("def last(items):\n    return items[-1]\n"),
            Reply::text("last now returns items[-1]; the tests pass.", 10, 9),
        ],
        "Fix the bug that makes python3 -m unittest fail.",
    )
    .await;
    let told = completed_after_telling(
        &done,
        &ws,
        "listutil.py",
        "def first(items):\n    return items[0]\n\n\ndef last(items):\n    return items[-1]\n",
        &fake,
        4,
    );
    assert!(
        told.contains("Write the complete new content of listutil.py"),
        "{told}"
    );
}

/// A test that already failed before the task, with no checks configured: the workspace's
/// tests run before the change and after it; a small model whose correct change leaves that
/// failure as it was is told of it once (not asked to write its file again), and completes.
#[tokio::test]
async fn a_failure_already_there_is_only_told_to_a_small_model_and_its_change_stands() {
    let ws = workspace();
    std::fs::write(
        ws.path().join("calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("test_calc.py"),
        "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    )
    .unwrap();
    let fake = FakeOllama::start().await;
    // Read before the work, with the failure shown: a change, and the failing test is not
    // the request's (so no question about it after the work).
    fake.push_reply(reading(true, false, Some(false)));
    fake.push_replies(vec![
        Reply::tool_call(
            "edit_file",
            json!({"path": "a.txt", "old_text": "alpha", "new_text": "omega"}),
            10,
            5,
        ),
        Reply::text("a.txt now says omega.", 10, 6),
        Reply::text(
            "a.txt now says omega; the failing test is about calc.py.",
            10,
            9,
        ),
    ]);
    let mut config = config(&fake, ws.path());
    config.agent.commands.enabled = agent_mcp::config::CommandsSwitch::On;
    config.agent.commands.allow = vec!["python3".into()];
    let server = HttpServer::start(config).await;
    let done = run(&server.client(), "Change alpha to omega in a.txt.").await;
    assert_eq!(
        result_of(&done),
        "a.txt now says omega; the failing test is about calc.py.\n\n\
         changed: a.txt (+1 -1)\n\
         checks: 1 failing → 1 failing (python3 -m unittest; after 1 round of fixes)",
        "{done}"
    );
    let sent = work(&fake);
    assert_eq!(sent.len(), 3);
    let told = last_said(&sent[2]);
    assert!(
        told.starts_with("The checks this workspace is judged by fail, as they did before")
            && !told.contains("Write the complete new content"),
        "{told}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "omega"
    );
}

/// What a request asks is read by the model before the work: one call with a JSON schema as
/// `format`, shown the workspace's file names and the request, no tools; its tokens count in
/// the task's.
#[tokio::test]
async fn the_request_is_read_by_one_call_with_a_schema_and_its_tokens_count() {
    let ws = workspace();
    let fake = FakeOllama::start().await;
    let read = json!({"goal": "the sum", "wants": "an answer", "tests": false});
    fake.push_reply(Reply::text(&read.to_string(), 7, 3));
    fake.push_reply(Reply::text("It is 4.", 20, 6));
    let server = HttpServer::start(config(&fake, ws.path())).await;
    let done = run(&server.client(), "What is 2 + 2?").await;
    assert_eq!(field(&done, "status"), "completed", "{done}");
    assert_eq!(field(&done, "token_usage"), "input=27 output=9 total=36");
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 2);
    assert!(is_reading(&sent[0]));
    assert_eq!(
        sent[0]["format"]["required"],
        json!(["goal", "wants", "tests"])
    );
    assert!(!offers_tools(&sent[0]));
    let asked = last_said(&sent[0]);
    assert!(asked.contains("NOTE.txt, a.txt, b.txt"), "{asked}");
    assert!(asked.ends_with("What is 2 + 2?"), "{asked}");
}

/// The same reading gets the same treatment whatever language the request is in: read as a
/// change, an answer that changed nothing fails; read as a question, the answer is the result.
#[tokio::test]
async fn a_request_in_any_language_gets_the_treatment_of_its_reading() {
    let requests = [
        "Write the secret word into word.txt.",
        "Andika neno la siri kwenye word.txt.",
        "Gizli kelimeyi word.txt dosyasına yaz.",
        "秘密の言葉を word.txt に書いてください。",
    ];
    let mut calls = Vec::new();
    for request in requests {
        let (done, fake, _server, ws) = scripted(
            vec![
                change(),
                read_note(),
                Reply::text("The word is marigold.", 10, 5),
                Reply::text("The word is marigold.", 10, 5),
                Reply::text("The word is marigold.", 10, 5),
            ],
            request,
        )
        .await;
        assert_eq!(field(&done, "status"), "failed", "{request}: {done}");
        assert!(
            result_of(&done)
                .starts_with("the request asks for a change to the workspace, but no file changed"),
            "{request}: {done}"
        );
        assert!(!ws.path().join("word.txt").exists());
        calls.push(work(&fake).len());
    }
    assert!(calls.iter().all(|c| *c == calls[0]), "{calls:?}");
    for request in requests {
        let (done, fake, _server, _ws) = scripted(
            vec![
                question(),
                read_note(),
                Reply::text("The word is marigold.", 10, 5),
            ],
            request,
        )
        .await;
        assert_ended(&done, "completed", "The word is marigold.", &fake, 2);
    }
}

/// A reading that is not the JSON asked for is taken as the loud one: a change asked for, so
/// an answer that changed nothing fails, saying so, rather than completing in silence.
#[tokio::test]
async fn an_unreadable_reading_is_taken_as_a_change() {
    let (done, _fake, _server, _ws) = scripted(
        vec![
            Reply::text("I think they want to know something.", 0, 0),
            read_note(),
            Reply::text("The word is marigold.", 10, 5),
            Reply::text("The word is marigold.", 10, 5),
            Reply::text("The word is marigold.", 10, 5),
        ],
        "Neno la siri ni nini?",
    )
    .await;
    assert_eq!(field(&done, "status"), "failed", "{done}");
    assert!(
        result_of(&done)
            .starts_with("the request asks for a change to the workspace, but no file changed"),
        "{done}"
    );
}
