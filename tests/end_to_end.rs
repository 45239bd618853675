//! The whole request path against a fake Ollama server: both eras, HTTP and stdio.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{
    HttpServer, StdioServer, field, initialize_params, modern_meta, result_of, test_config,
    tool_text, wait_terminal,
};

#[tokio::test]
async fn modern_http_run_to_completion_with_exact_tokens() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("The tests pass now.", 1536, 284));
    let server = HttpServer::start(test_config(&fake.url())).await;
    let client = server.client();

    let list = client.modern("tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    let names: Vec<&str> = list.body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["agent_run", "agent_status"]);

    let run = client
        .tool_call(
            "agent_run",
            json!({"request": "Check whether the tests pass.", "temperature": 0.2}),
        )
        .await;
    assert_eq!(run.status, 200, "{}", run.text);
    assert_eq!(run.body["result"]["resultType"], "complete");
    let text = tool_text(&run.body["result"]);
    let task_id = field(&text, "task_id");
    let session_id = field(&text, "session_id");
    assert_eq!(field(&text, "status"), "queued");
    assert_eq!(
        field(&text, "message"),
        format!("タスク {task_id} をセッション {session_id} に登録しました。")
    );

    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    assert_eq!(
        done,
        format!(
            "task_id: {task_id}\nsession_id: {session_id}\nstatus: completed\ncompleted_tasks: 1/1\n\
             current_task:\ntoken_usage: input=1536 output=284 total=1820\ncritical_path_tokens: 0\n\
             message: タスクが完了しました。\nresult: The tests pass now."
        )
    );
    // The request reached the model with the task's temperature and a context size.
    let sent = fake.chat_requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["model"], "test-model");
    assert_eq!(sent[0]["options"]["temperature"], json!(0.2));
    // The model reports 131072; ollama.num_ctx caps it.
    assert_eq!(sent[0]["options"]["num_ctx"], json!(32768));
    assert_eq!(sent[0]["stream"], json!(true));
    let last = sent[0]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        json!({"role": "user", "content": "Check whether the tests pass."})
    );
}

#[tokio::test]
async fn legacy_http_run_and_session_continuation() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("First answer.", 10, 3));
    fake.push_reply(Reply::text("Second answer.", 20, 4));
    let server = HttpServer::start(test_config(&fake.url())).await;
    let client = server.client();
    let v = Some("2025-11-25");

    let init = client.initialize("2025-11-25").await;
    assert_eq!(init.status, 200);
    assert_eq!(init.body["result"]["protocolVersion"], "2025-11-25");
    assert!(init.body["result"].get("resultType").is_none());

    let tool = |name: &'static str, args: Value| {
        let client = client.clone();
        async move {
            let params = json!({"name": name, "arguments": args});
            client.legacy("tools/call", params, v).await
        }
    };
    let call = |args: Value| {
        let reply = tool("agent_run", args);
        async move {
            let r = reply.await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert!(r.body["result"].get("resultType").is_none(), "{}", r.text);
            tool_text(&r.body["result"])
        }
    };
    let status = |task_id: String| {
        let reply = tool("agent_status", json!({"task_id": task_id}));
        async move { tool_text(&reply.await.body["result"]) }
    };

    let first = call(json!({"request": "Question one"})).await;
    let session_id = field(&first, "session_id");
    let done = wait_terminal(|| status(field(&first, "task_id"))).await;
    assert_eq!(field(&done, "status"), "completed");
    assert_eq!(result_of(&done), "First answer.");
    assert_eq!(field(&done, "token_usage"), "input=10 output=3 total=13");

    let second = call(json!({"request": "Question two", "session_id": session_id})).await;
    assert_eq!(field(&second, "session_id"), session_id);
    let done = wait_terminal(|| status(field(&second, "task_id"))).await;
    assert_eq!(result_of(&done), "Second answer.");

    // The second chat carried the first turn of the conversation.
    let sent = fake.chat_requests();
    let messages: Vec<(&str, &str)> = sent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        messages,
        [
            ("user", "Question one"),
            ("assistant", "First answer."),
            ("user", "Question two"),
        ]
    );
}

async fn stdio_flow(modern: bool) {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("Done over stdio.", 7, 5));
    fake.push_reply(Reply::text("Still here.", 9, 2));
    let mut server = StdioServer::spawn(&test_config(&fake.url())).await;

    if !modern {
        let init = server
            .request("initialize", initialize_params("2025-06-18"))
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        server
            .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }
    let call = async |server: &mut StdioServer, method: &str, params: Value| {
        if modern {
            server.modern(method, params).await
        } else {
            server.request(method, params).await
        }
    };
    let list = call(&mut server, "tools/list", json!({})).await;
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 2);
    assert_eq!(list["result"].get("resultType").is_some(), modern);

    let run = call(
        &mut server,
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "Do it"}}),
    )
    .await;
    let text = tool_text(&run["result"]);
    let task_id = field(&text, "task_id");
    let session_id = field(&text, "session_id");
    let done = loop {
        let r = call(
            &mut server,
            "tools/call",
            json!({"name": "agent_status", "arguments": {"task_id": task_id, "session_id": session_id}}),
        )
        .await;
        let text = tool_text(&r["result"]);
        if support::harness::is_terminal(&field(&text, "status")) {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(field(&done, "status"), "completed");
    assert_eq!(field(&done, "token_usage"), "input=7 output=5 total=12");
    assert_eq!(result_of(&done), "Done over stdio.");

    // Continuing the session sends the earlier turns.
    let run = call(
        &mut server,
        "tools/call",
        json!({"name": "agent_run", "arguments": {"request": "And again", "session_id": session_id}}),
    )
    .await;
    let task2 = field(&tool_text(&run["result"]), "task_id");
    loop {
        let r = call(
            &mut server,
            "tools/call",
            json!({"name": "agent_status", "arguments": {"task_id": task2}}),
        )
        .await;
        if field(&tool_text(&r["result"]), "status") == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = fake.chat_requests();
    let contents: Vec<&str> = sent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        contents.ends_with(&["Do it", "Done over stdio.", "And again"]),
        "{contents:?}"
    );

    let status = server.close().await;
    assert!(status.success(), "exit status {status}");
}

#[tokio::test]
async fn modern_stdio_run_to_completion() {
    stdio_flow(true).await;
}

#[tokio::test]
async fn legacy_stdio_run_to_completion() {
    stdio_flow(false).await;
}

#[tokio::test]
async fn five_tasks_run_one_at_a_time_in_submission_order() {
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_chunk_delay(Duration::from_millis(60)))
            .await;
    for i in 0..5 {
        fake.push_reply(Reply::text(&format!("answer {i}"), 1, 1));
    }
    let server = HttpServer::start(test_config(&fake.url())).await;
    let client = server.client();
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = client
            .tool_call("agent_run", json!({"request": format!("request {i}")}))
            .await;
        ids.push(field(&tool_text(&r.body["result"]), "task_id"));
    }
    // While the first runs, the last waits behind the others.
    let last = client.agent_status(&ids[4]).await;
    assert_eq!(field(&last, "status"), "queued");
    assert!(field(&last, "message").contains("待ち順"), "{last}");

    for (i, id) in ids.iter().enumerate() {
        let done = wait_terminal(|| client.agent_status(id)).await;
        assert_eq!(field(&done, "status"), "completed");
        // Replies are handed out in the order chats arrive, so task i got chat i.
        assert_eq!(result_of(&done), format!("answer {i}"));
    }
    assert_eq!(fake.max_concurrent_chats(), 1, "two chats ran at once");
    let order: Vec<String> = fake
        .chat_requests()
        .iter()
        .map(|r| {
            r["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let expected: Vec<String> = (0..5).map(|i| format!("request {i}")).collect();
    assert_eq!(order, expected);
}

/// Over stdio there is one client, and it started the server: with the default rate limits a
/// burst of 500 requests (70 of them `agent_run`, past the HTTP task budget of 60) is answered
/// without one refusal.
#[tokio::test]
async fn a_burst_of_500_stdio_requests_meets_no_rate_limit_by_default() {
    let fake = FakeOllama::start().await;
    let config = test_config(&fake.url());
    assert!(config.rate_limit.enabled, "the default limits are on");
    let mut server = StdioServer::spawn(&config).await;
    const CALLS: i64 = 500;
    let mut burst = String::new();
    for id in 1..=CALLS {
        let params = if id % 7 == 0 {
            json!({"name": "agent_run", "arguments": {"request": format!("task {id}")}})
        } else {
            json!({"name": "agent_status", "arguments": {"task_id": "00000000-0000-4000-8000-000000000000"}})
        };
        let mut params = params;
        params["_meta"] = modern_meta(json!({}));
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        burst.push_str(&msg.to_string());
        burst.push('\n');
    }
    // All 500 lines at once, before reading any answer.
    server.send_line(burst.trim_end()).await;
    let mut answered = std::collections::BTreeSet::new();
    let mut runs = 0;
    for _ in 0..CALLS {
        let msg = server.read_message().await;
        assert!(msg.get("error").is_none(), "refused: {msg}");
        let id = msg["id"].as_i64().expect("a response id");
        if id % 7 == 0 {
            assert_eq!(msg["result"]["isError"], json!(false), "{msg}");
            runs += 1;
        }
        answered.insert(id);
    }
    assert_eq!(answered.len(), CALLS as usize);
    assert_eq!(runs, CALLS / 7);
    assert!(server.close().await.success());
}

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// One `agent_run` over HTTP, followed to its end, against a server set up for the case.
/// `{url}` in the expected texts stands for the Ollama URL the server was given.
struct RunCase {
    name: &'static str,
    /// Ollama is a port nothing listens on, not the fake.
    unreachable: bool,
    /// The fake's model can see images (capabilities `completion`, `vision`; otherwise the
    /// fake's default).
    vision: bool,
    /// The fake's one reply.
    reply: Option<&'static str>,
    model: Option<&'static str>,
    sqlite: bool,
    request: &'static str,
    /// How many copies of [`PNG`] the call attaches.
    images: usize,
    status: Option<&'static str>,
    message: Option<&'static str>,
    result: Option<&'static str>,
    /// Texts the task's result must contain; each entry is satisfied by any one of its texts.
    result_has: &'static [&'static [&'static str]],
    /// How many chats reached the model.
    chats: Option<usize>,
    /// Any further check of the chats sent.
    sent: Option<fn(&[Value])>,
}

const RUN: RunCase = RunCase {
    name: "",
    unreachable: false,
    vision: false,
    reply: None,
    model: None,
    sqlite: false,
    request: "anything",
    images: 0,
    status: None,
    message: None,
    result: None,
    result_has: &[],
    chats: None,
    sent: None,
};

const RUN_CASES: &[RunCase] = &[
    RunCase {
        name: "unreachable Ollama fails the task with where it looked and what to do",
        unreachable: true,
        status: Some("failed"),
        message: Some("タスクが失敗しました。"),
        result_has: &[&["{url}"], &["OLLAMA_HOST", "ollama serve"]],
        ..RUN
    },
    RunCase {
        name: "an unknown model fails with a pull hint",
        model: Some("missing-model"),
        status: Some("failed"),
        result_has: &[&["missing-model"], &["ollama pull"]],
        ..RUN
    },
    RunCase {
        name: "images need a vision model and fail before any chat",
        request: "What is this?",
        images: 1,
        status: Some("failed"),
        result_has: &[&["vision"]],
        chats: Some(0),
        ..RUN
    },
    RunCase {
        name: "images reach a vision model",
        vision: true,
        reply: Some("A red pixel."),
        request: "What is this?",
        images: 1,
        result: Some("A red pixel."),
        sent: Some(|sent| {
            let last = sent[0]["messages"].as_array().unwrap().last().unwrap();
            assert_eq!(last["images"], json!([PNG]));
        }),
        ..RUN
    },
    // The same image twice: stored once, sent twice, byte for byte as the client sent it.
    RunCase {
        name: "images reach a vision model through the sqlite store unchanged",
        vision: true,
        reply: Some("Two pixels."),
        sqlite: true,
        request: "Compare",
        images: 2,
        result: Some("Two pixels."),
        sent: Some(|sent| {
            let messages = sent[0]["messages"].as_array().unwrap();
            let user = messages.iter().find(|m| m["role"] == "user").unwrap();
            assert_eq!(user["images"], json!([PNG, PNG]));
        }),
        ..RUN
    },
];

#[tokio::test]
async fn one_run_each_ends_as_its_setup_requires() {
    for case in RUN_CASES {
        let name = case.name;
        let mut fake_config = FakeConfig::default();
        if case.vision {
            fake_config = fake_config.with_capabilities(&["completion", "vision"]);
        }
        let fake = FakeOllama::start_with(fake_config).await;
        if let Some(text) = case.reply {
            fake.push_reply(Reply::text(text, 5, 3));
        }
        let url = if case.unreachable {
            // A port nothing listens on.
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
        } else {
            fake.url()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut config = if case.sqlite {
            support::harness::test_config_sqlite(&url, &dir.path().join("t.db"))
        } else {
            test_config(&url)
        };
        if let Some(model) = case.model {
            config.ollama.model = model.into();
        }
        let server = HttpServer::start(config).await;
        let client = server.client();
        let images: Vec<Value> = (0..case.images)
            .map(|_| json!({"mime_type": "image/png", "data_base64": PNG}))
            .collect();
        let mut arguments = json!({"request": case.request});
        if !images.is_empty() {
            arguments["images"] = json!(images);
        }
        let run = client.tool_call("agent_run", arguments).await;
        let task_id = field(&tool_text(&run.body["result"]), "task_id");
        let done = wait_terminal(|| client.agent_status(&task_id)).await;
        if let Some(status) = case.status {
            assert_eq!(field(&done, "status"), status, "{name}: {done}");
        }
        if let Some(message) = case.message {
            assert_eq!(field(&done, "message"), message, "{name}: {done}");
        }
        let result = result_of(&done);
        if let Some(expected) = case.result {
            assert_eq!(result, expected, "{name}: {done}");
        }
        for any_of in case.result_has {
            assert!(
                any_of
                    .iter()
                    .any(|text| result.contains(&text.replace("{url}", &url))),
                "{name}: none of {any_of:?} in {result}"
            );
        }
        if let Some(chats) = case.chats {
            assert_eq!(fake.chat_count(), chats, "{name}");
        }
        if let Some(check) = case.sent {
            let sent = fake.chat_requests();
            let checked = std::panic::catch_unwind(|| check(&sent));
            assert!(checked.is_ok(), "{name}: the check above failed");
        }
        // The server keeps serving after the task, however it ended.
        let list = client.modern("tools/list", json!({})).await;
        assert_eq!(list.status, 200, "{name}");
    }
}
