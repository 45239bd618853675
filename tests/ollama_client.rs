//! The Ollama client against the fake Ollama server, over real HTTP on loopback.

mod support;

use std::time::{Duration, Instant};

use agent_mcp::ollama::{ChatChunk, ChatRequest, Message, OllamaClient, OllamaError};
use serde_json::json;
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(30);

/// Asserts that `err` matches the pattern (with its guard), printing `err` when it does not.
macro_rules! assert_err {
    ($err:expr, $($pattern:tt)+) => {
        assert!(matches!($err, $($pattern)+), "{:?}", $err)
    };
}

fn client(fake: &FakeOllama) -> OllamaClient {
    OllamaClient::new(&fake.url(), LONG, Duration::from_secs(5)).expect("client")
}

/// A client whose requests time out after `timeout` of silence.
fn client_timing_out_after(fake: &FakeOllama, timeout: Duration) -> OllamaClient {
    OllamaClient::new(&fake.url(), timeout, Duration::from_secs(2)).expect("client")
}

/// A one-token reply `text` whose headers come only after `delay`.
fn late_text(delay: Duration, text: &str) -> Reply {
    Reply::delayed(delay, Reply::text(text, 1, 1))
}

fn hello(model: &str) -> ChatRequest {
    ChatRequest::new(
        model,
        vec![Message::system("be brief"), Message::user("hi")],
    )
}

async fn chat(
    client: &OllamaClient,
    req: &ChatRequest,
) -> Result<agent_mcp::ollama::ChatResponse, OllamaError> {
    client
        .chat(req, &CancellationToken::new(), &mut |_| {})
        .await
}

#[tokio::test]
async fn text_stream_aggregates_content_and_exact_counts() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("The answer is 42.", 31, 9));
    let reply = chat(&client(&fake), &hello("test-model"))
        .await
        .expect("chat");
    assert_eq!(reply.message, Message::assistant("The answer is 42."));
    assert_eq!(reply.done_reason.as_deref(), Some("stop"));
    assert_eq!((reply.prompt_eval_count, reply.eval_count), (31, 9));
    assert_eq!(reply.total_duration, 1_500_000_000 + 9 * 20_000_000);

    assert_eq!(
        fake.chat_requests(),
        vec![json!({
            "model": "test-model",
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            "stream": true
        })]
    );
}

#[tokio::test]
async fn request_fields_reach_the_wire() {
    let fake = FakeOllama::start().await;
    let mut req = hello("test-model:latest");
    req.tools = vec![
        json!({"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}),
    ];
    req.format = Some(json!({"type": "object"}));
    req.options.num_ctx = Some(65536);
    req.options.temperature = Some(0.2);
    req.keep_alive = Some("10m".to_owned());
    chat(&client(&fake), &req).await.expect("chat");
    let sent = &fake.chat_requests()[0];
    assert_eq!(sent["tools"][0]["function"]["name"], "ls");
    assert_eq!(sent["format"], json!({"type": "object"}));
    assert_eq!(
        sent["options"],
        json!({"num_ctx": 65536, "temperature": 0.2})
    );
    assert_eq!(sent["keep_alive"], "10m");
    assert_eq!(sent["stream"], true);
    assert!(sent.get("think").is_none());
}

#[tokio::test]
async fn chunk_callback_sees_every_chunk_in_order() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text("one two three", 5, 3));
    let mut seen: Vec<(String, bool)> = Vec::new();
    let reply = client(&fake)
        .chat(
            &hello("test-model"),
            &CancellationToken::new(),
            &mut |chunk: &ChatChunk| {
                let content = chunk
                    .message
                    .as_ref()
                    .map(|m| m.content.clone())
                    .unwrap_or_default();
                seen.push((content, chunk.done));
            },
        )
        .await
        .expect("chat");
    let expected = [
        ("one ", false),
        ("two ", false),
        ("three", false),
        ("", true),
    ];
    assert_eq!(seen, expected.map(|(c, d)| (c.to_owned(), d)));
    assert_eq!(reply.message.content, "one two three");
}

#[tokio::test]
async fn tool_calls_in_a_non_final_chunk_are_collected() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::ToolCalls {
        calls: vec![
            ("read_file".to_owned(), json!({"path": "src/main.rs"})),
            ("list_dir".to_owned(), json!({"path": "."})),
        ],
        prompt_eval_count: 40,
        eval_count: 12,
    });
    let reply = chat(&client(&fake), &hello("test-model"))
        .await
        .expect("chat");
    let calls: Vec<_> = reply
        .message
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.id.clone(),
                c.function.index,
                c.function.name.clone(),
                c.function.arguments.clone(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            (
                Some("call_1_0".to_owned()),
                Some(0),
                "read_file".to_owned(),
                json!({"path": "src/main.rs"})
            ),
            (
                Some("call_1_1".to_owned()),
                Some(1),
                "list_dir".to_owned(),
                json!({"path": "."})
            ),
        ]
    );
    assert_eq!(reply.message.content, "");
    assert_eq!((reply.prompt_eval_count, reply.eval_count), (40, 12));
}

#[tokio::test]
async fn thinking_is_aggregated() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::Raw(vec![
        r#"{"model":"test-model","message":{"role":"assistant","content":"","thinking":"Let me "},"done":false}"#.to_owned(),
        r#"{"model":"test-model","message":{"role":"assistant","content":"","thinking":"think."},"done":false}"#.to_owned(),
        r#"{"model":"test-model","message":{"role":"assistant","content":"Done."},"done":false}"#.to_owned(),
        r#"{"model":"test-model","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","prompt_eval_count":3,"eval_count":4}"#.to_owned(),
    ]));
    let reply = chat(&client(&fake), &hello("test-model"))
        .await
        .expect("chat");
    assert_eq!(reply.message.thinking.as_deref(), Some("Let me think."));
    assert_eq!(reply.message.content, "Done.");
    assert_eq!(reply.done_reason.as_deref(), Some("length"));
}

#[tokio::test]
async fn omitted_counts_are_zero() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::Raw(vec![
        r#"{"model":"test-model","message":{"role":"assistant","content":"ok"},"done":false}"#.to_owned(),
        r#"{"model":"test-model","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}"#.to_owned(),
    ]));
    fake.push_reply(Reply::text("cached", 0, 2));
    let client = client(&fake);
    let reply = chat(&client, &hello("test-model")).await.expect("chat");
    assert_eq!(
        (
            reply.message.content.as_str(),
            reply.prompt_eval_count,
            reply.eval_count
        ),
        ("ok", 0, 0)
    );
    assert_eq!(reply.total_duration, 0);
    let reply = chat(&client, &hello("test-model")).await.expect("chat");
    assert_eq!((reply.prompt_eval_count, reply.eval_count), (0, 2));
}

/// The error of a chat with `test-model` the fake answers with `reply`.
async fn chat_error(reply: Reply) -> OllamaError {
    let fake = FakeOllama::start().await;
    fake.push_reply(reply);
    chat(&client(&fake), &hello("test-model"))
        .await
        .expect_err("the scripted reply is an error")
}

/// Each scripted reply, a fresh fake each, becomes the error its case names.
#[tokio::test]
async fn scripted_error_replies_are_the_right_errors() {
    type IsRight = fn(&OllamaError) -> bool;
    let cases: [(&str, Reply, IsRight); 4] = [
        (
            "a stream without done is a stream error",
            Reply::Raw(vec![
                r#"{"model":"test-model","message":{"role":"assistant","content":"cut"},"done":false}"#
                    .to_owned(),
            ]),
            |err| matches!(err, OllamaError::Stream(text) if text == "stream ended before done"),
        ),
        (
            "a server error keeps its status and text",
            Reply::http_error(500, "llama runner process has terminated: exit status 2"),
            |err| {
                matches!(err, OllamaError::Status { status: 500, body } if body == "llama runner process has terminated: exit status 2")
            },
        ),
        (
            "a full queue is busy",
            Reply::http_error(
                503,
                "server busy, please try again.  maximum pending requests exceeded",
            ),
            |err| matches!(err, OllamaError::Busy { body } if body.starts_with("server busy")),
        ),
        (
            "a malformed line is a decode error",
            Reply::Malformed {
                after_chunks: vec!["a".to_owned(), "b".to_owned()],
            },
            |err| {
                matches!(err, OllamaError::Decode { line, .. } if line == "{\"model\": this is not json")
            },
        ),
    ];
    for (name, reply, is_right) in cases {
        let err = chat_error(reply).await;
        assert!(is_right(&err), "{name}: {err:?}");
    }
}

#[tokio::test]
async fn error_line_mid_stream_is_a_stream_error() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::ErrorLine {
        after_chunks: vec!["partial ".to_owned()],
        error: "model runner has unexpectedly stopped".to_owned(),
    });
    let mut chunks = 0;
    let err = client(&fake)
        .chat(&hello("test-model"), &CancellationToken::new(), &mut |_| {
            chunks += 1
        })
        .await
        .expect_err("error line");
    assert_err!(&err, OllamaError::Stream(text) if text == "model runner has unexpectedly stopped");
    assert_eq!(chunks, 1);
}

#[tokio::test]
async fn unknown_model_is_model_not_found() {
    let fake = FakeOllama::start().await;
    let err = chat(&client(&fake), &hello("llama9:70b"))
        .await
        .expect_err("404");
    assert_err!(&err, OllamaError::ModelNotFound { model, body } if model == "llama9:70b" && body == "model 'llama9:70b' not found");
    assert_eq!(
        err.to_string(),
        "model 'llama9:70b' not found on the Ollama server; pull it with `ollama pull llama9:70b` or set ollama.model"
    );
}

#[tokio::test]
async fn missing_capability_is_a_400_with_the_servers_text() {
    let fake =
        FakeOllama::start_with(FakeConfig::default().with_capabilities(&["completion"])).await;
    let mut req = hello("test-model");
    req.tools = vec![json!({"type": "function", "function": {"name": "ls"}})];
    let err = chat(&client(&fake), &req).await.expect_err("400");
    assert_err!(&err, OllamaError::Status { status: 400, body } if body == "\"test-model\" does not support tools");
}

#[tokio::test]
async fn connection_refused_is_unreachable_naming_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let client =
        OllamaClient::new(&format!("{url}/"), LONG, Duration::from_secs(2)).expect("client");
    assert_eq!(client.base_url(), url);
    let err = client.version().await.expect_err("refused");
    assert_err!(&err, OllamaError::Unreachable { url: u, .. } if *u == url);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("cannot reach Ollama at {url}: ")),
        "{text}"
    );
    assert!(
        text.ends_with("Start Ollama (`ollama serve`) or set ollama.url / OLLAMA_HOST."),
        "{text}"
    );
    let err = chat(&client, &hello("test-model"))
        .await
        .expect_err("refused");
    assert_err!(err, OllamaError::Unreachable { .. });
}

#[tokio::test]
async fn hanging_stream_times_out() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::Hang);
    let client = client_timing_out_after(&fake, Duration::from_millis(300));
    let started = Instant::now();
    let err = chat(&client, &hello("test-model")).await.expect_err("hang");
    assert_err!(&err, OllamaError::Timeout { url } if *url == format!("{}/api/chat", fake.url()));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    wait_until_idle(&fake).await;
}

#[tokio::test]
async fn delayed_headers_time_out_too() {
    let fake = FakeOllama::start().await;
    fake.push_reply(late_text(Duration::from_secs(10), "late"));
    let client = client_timing_out_after(&fake, Duration::from_millis(200));
    let err = client
        .chat(&hello("test-model"), &CancellationToken::new(), &mut |_| {})
        .await;
    assert_err!(err, Err(OllamaError::Timeout { .. }));
}

#[tokio::test]
async fn cancellation_during_a_slow_stream_returns_quickly_and_hangs_up() {
    let words = "word ".repeat(100);
    let fake = FakeOllama::start_with(
        FakeConfig::default()
            .with_chunk_delay(Duration::from_millis(100))
            .with_default_reply(Reply::text(&words, 1, 100)),
    )
    .await;
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(350)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let mut chunks = 0;
    let err = client(&fake)
        .chat(&hello("test-model"), &cancel, &mut |_| chunks += 1)
        .await
        .expect_err("cancelled");
    let elapsed = started.elapsed();
    assert_err!(err, OllamaError::Cancelled);
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");
    assert!((1..10).contains(&chunks), "{chunks} chunks");
    // Dropping the response closed the connection, so the server stops streaming.
    wait_until_idle(&fake).await;
}

/// Waits until the fake has no `/api/chat` response open (the client hung up).
async fn wait_until_idle(fake: &FakeOllama) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while fake.in_flight_chats() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.in_flight_chats(), 0, "the client did not hang up");
}

#[tokio::test]
async fn already_cancelled_sends_nothing() {
    let fake = FakeOllama::start().await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = client(&fake)
        .chat(&hello("test-model"), &cancel, &mut |_| {})
        .await;
    assert_err!(err, Err(OllamaError::Cancelled));
    assert_eq!(fake.chat_count(), 0);
}

#[tokio::test]
async fn reply_over_the_cap_is_too_large() {
    let fake = FakeOllama::start().await;
    fake.push_reply(Reply::text(
        "this reply is comfortably longer than sixteen bytes",
        1,
        9,
    ));
    let client = client(&fake).with_max_reply_bytes(16);
    let err = chat(&client, &hello("test-model"))
        .await
        .expect_err("too large");
    assert_err!(err, OllamaError::ReplyTooLarge { limit: 16 });
    // Exactly at the cap is fine.
    fake.push_reply(Reply::text("sixteen bytes!!!", 1, 1));
    let reply = chat(&client, &hello("test-model"))
        .await
        .expect("at the cap");
    assert_eq!(reply.message.content.len(), 16);
}

#[tokio::test]
async fn show_reports_capabilities() {
    let fake = FakeOllama::start_with(FakeConfig::default().with_capabilities(&[
        "completion",
        "vision",
        "thinking",
    ]))
    .await;
    let show = client(&fake).show("test-model").await.expect("show");
    assert_eq!(show.capabilities, ["completion", "vision", "thinking"]);
    assert!(show.has("vision") && show.has("thinking"));
    assert!(!show.has("tools"));
    assert_eq!(show.context_length(), Some(131_072));
    assert_eq!(show.details.quantization_level.as_deref(), Some("Q4_K_M"));

    let err = client(&fake).show("nope").await.expect_err("404");
    assert_err!(&err, OllamaError::ModelNotFound { model, .. } if model == "nope");
}

#[tokio::test]
async fn version_is_read() {
    let fake = FakeOllama::start().await;
    assert_eq!(client(&fake).version().await.expect("version"), "0.12.0");
}

#[tokio::test]
async fn concurrent_chats_are_tracked() {
    let fake = FakeOllama::start().await;
    fake.push_reply(late_text(Duration::from_millis(300), "a"));
    fake.push_reply(late_text(Duration::from_millis(300), "b"));
    let client = client(&fake);
    let req = hello("test-model");
    let (a, b) = tokio::join!(chat(&client, &req), chat(&client, &req));
    let mut contents = [a.expect("a").message.content, b.expect("b").message.content];
    contents.sort();
    assert_eq!(contents, ["a", "b"]);
    assert_eq!(fake.max_concurrent_chats(), 2);
    assert_eq!(fake.chat_count(), 2);
    assert_eq!(fake.in_flight_chats(), 0);
}
