//! The whole request path against a fake Ollama server: both eras, HTTP and stdio.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{
    HttpServer, StdioServer, field, modern_meta, result_of, test_config, tool_text, wait_terminal,
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
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "Fix the failing test.", "temperature": 0.2}}),
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
    assert_eq!(sent[0]["options"]["num_ctx"], json!(65536));
    assert_eq!(sent[0]["stream"], json!(true));
    let last = sent[0]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        json!({"role": "user", "content": "Fix the failing test."})
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

    let init = client
        .legacy(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            None,
        )
        .await;
    assert_eq!(init.status, 200);
    assert_eq!(init.body["result"]["protocolVersion"], "2025-11-25");
    assert!(init.body["result"].get("resultType").is_none());

    let call = |args: Value| {
        let client = client.clone();
        async move {
            let r = client
                .legacy(
                    "tools/call",
                    json!({"name": "agent_run", "arguments": args}),
                    v,
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert!(r.body["result"].get("resultType").is_none(), "{}", r.text);
            tool_text(&r.body["result"])
        }
    };
    let status = |task_id: String| {
        let client = client.clone();
        async move {
            let r = client
                .legacy(
                    "tools/call",
                    json!({"name": "agent_status", "arguments": {"task_id": task_id}}),
                    v,
                )
                .await;
            tool_text(&r.body["result"])
        }
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
    let messages: Vec<(String, String)> = sent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            ("user".to_owned(), "Question one".to_owned()),
            ("assistant".to_owned(), "First answer.".to_owned()),
            ("user".to_owned(), "Question two".to_owned()),
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
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            )
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
            .modern(
                "tools/call",
                json!({"name": "agent_run", "arguments": {"request": format!("request {i}")}}),
            )
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

#[tokio::test]
async fn unreachable_ollama_fails_the_task_and_the_server_keeps_serving() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let server = HttpServer::start(test_config(&url)).await;
    let client = server.client();
    let run = client
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "anything"}}),
        )
        .await;
    let task_id = field(&tool_text(&run.body["result"]), "task_id");
    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    assert_eq!(field(&done, "status"), "failed");
    assert_eq!(field(&done, "message"), "タスクが失敗しました。");
    let reason = result_of(&done);
    assert!(reason.contains(&url), "{reason}");
    assert!(
        reason.contains("OLLAMA_HOST") || reason.contains("ollama serve"),
        "{reason}"
    );
    // The next request is served.
    let list = client.modern("tools/list", json!({})).await;
    assert_eq!(list.status, 200);
}

#[tokio::test]
async fn unknown_model_fails_with_a_pull_hint() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.ollama.model = "missing-model".into();
    let server = HttpServer::start(config).await;
    let client = server.client();
    let run = client
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "anything"}}),
        )
        .await;
    let task_id = field(&tool_text(&run.body["result"]), "task_id");
    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    assert_eq!(field(&done, "status"), "failed");
    let reason = result_of(&done);
    assert!(reason.contains("missing-model"), "{reason}");
    assert!(reason.contains("ollama pull"), "{reason}");
}

#[tokio::test]
async fn images_need_a_vision_model_and_fail_before_any_chat() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(test_config(&fake.url())).await;
    let client = server.client();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let run = client
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "What is this?",
                   "images": [{"mime_type": "image/png", "data_base64": png}]}}),
        )
        .await;
    let task_id = field(&tool_text(&run.body["result"]), "task_id");
    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    assert_eq!(field(&done, "status"), "failed");
    assert!(result_of(&done).contains("vision"), "{done}");
    assert_eq!(fake.chat_count(), 0);
}

#[tokio::test]
async fn images_reach_a_vision_model() {
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_capabilities(&["completion", "vision"]))
            .await;
    fake.push_reply(Reply::text("A red pixel.", 5, 3));
    let server = HttpServer::start(test_config(&fake.url())).await;
    let client = server.client();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let run = client
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "What is this?",
                   "images": [{"mime_type": "image/png", "data_base64": png}]}}),
        )
        .await;
    let task_id = field(&tool_text(&run.body["result"]), "task_id");
    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    assert_eq!(result_of(&done), "A red pixel.");
    let sent = fake.chat_requests();
    let last = sent[0]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["images"], json!([png]));
}

#[tokio::test]
async fn images_reach_a_vision_model_through_the_sqlite_store_unchanged() {
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_capabilities(&["completion", "vision"]))
            .await;
    fake.push_reply(Reply::text("Two pixels.", 5, 3));
    let dir = tempfile::tempdir().unwrap();
    let config = support::harness::test_config_sqlite(&fake.url(), &dir.path().join("t.db"));
    let server = HttpServer::start(config).await;
    let client = server.client();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    // The same image twice: stored once, sent twice, byte for byte as the client sent it.
    let run = client
        .modern(
            "tools/call",
            json!({"name": "agent_run", "arguments": {"request": "Compare",
                   "images": [{"mime_type": "image/png", "data_base64": png},
                              {"mime_type": "image/png", "data_base64": png}]}}),
        )
        .await;
    let task_id = field(&tool_text(&run.body["result"]), "task_id");
    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    assert_eq!(result_of(&done), "Two pixels.", "{done}");
    let sent = fake.chat_requests();
    let user = sent[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert_eq!(user["images"], json!([png, png]));
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
