//! Ollama fault injection through the whole server: each fault ends the task in a clear
//! outcome (retried, or `failed` with a message saying what happened), and the next task runs.

mod support;

use std::time::Duration;

use agent_mcp::config::Config;
use support::fake_ollama::{FakeOllama, Reply};
use support::harness::{HttpClient, HttpServer, field, result_of, test_config, wait_terminal};

/// Short timeouts so a fault costs a second, not minutes.
fn config(url: &str) -> Config {
    let mut config = test_config(url);
    config.ollama.request_timeout = Duration::from_secs(2);
    config.ollama.retry_backoff = Duration::from_millis(50);
    // Status polling every 20 ms would trip the per-caller limit.
    config.rate_limit.enabled = false;
    config
}

/// Runs one task to its end; returns (status, result text).
async fn run_task(client: &HttpClient, request: &str) -> (String, String) {
    let task_id = client.agent_run(request).await;
    let done = wait_terminal(|| client.agent_status(&task_id)).await;
    (field(&done, "status"), result_of(&done))
}

/// Task `request` fails with a reason containing `expect`: the reason.
async fn fails_saying(client: &HttpClient, request: &str, expect: &str) -> String {
    let (state, reason) = run_task(client, request).await;
    assert_eq!(state, "failed", "{reason}");
    assert!(reason.contains(expect), "expected {expect:?} in: {reason}");
    reason
}

/// The fault's task fails with a reason containing `expect`; then a healthy task completes.
async fn fails_then_recovers(fake: &FakeOllama, client: &HttpClient, expect: &str) -> String {
    let reason = fails_saying(client, "Hit the fault.", expect).await;
    fake.push_reply(Reply::text("Recovered.", 3, 2));
    let (state, result) = run_task(client, "Run normally.").await;
    assert_eq!(
        (state.as_str(), result.as_str()),
        ("completed", "Recovered.")
    );
    reason
}

#[tokio::test]
async fn connection_refused_fails_naming_the_url_and_the_worker_goes_on() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let server = HttpServer::start(config(&url)).await;
    let client = server.client();
    for _ in 0..2 {
        let (state, reason) = run_task(&client, "Anyone there?").await;
        assert_eq!(state, "failed");
        assert!(
            reason.contains(&format!("cannot reach Ollama at {url}")),
            "{reason}"
        );
        assert!(reason.contains("ollama serve"), "{reason}");
    }
}

#[tokio::test]
async fn slow_response_headers_within_the_timeout_complete_and_past_it_fail() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::delayed(
        Duration::from_millis(500),
        Reply::text("Slow but fine.", 1, 1),
    ));
    let (state, result) = run_task(&client, "Be slow.").await;
    assert_eq!(
        (state.as_str(), result.as_str()),
        ("completed", "Slow but fine.")
    );

    fake.push_reply(Reply::delayed(
        Duration::from_secs(30),
        Reply::text("Too late.", 1, 1),
    ));
    let started = std::time::Instant::now();
    fails_then_recovers(&fake, &client, "did not finish within the request timeout").await;
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn http_503_is_retried_with_backoff_then_succeeds() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    let busy = "server busy, please try again.  maximum pending requests exceeded";
    fake.push_reply(Reply::http_error(503, busy));
    fake.push_reply(Reply::http_error(503, busy));
    fake.push_reply(Reply::text("Third time lucky.", 2, 2));
    let (state, result) = run_task(&client, "Queue up.").await;
    assert_eq!(
        (state.as_str(), result.as_str()),
        ("completed", "Third time lucky.")
    );
    assert_eq!(fake.chat_count(), 3, "two retries, then the answer");
}

#[tokio::test]
async fn http_429_waits_for_its_retry_after_then_succeeds() {
    let fake = FakeOllama::start().await;
    let mut config = config(&fake.url());
    // The wait counts against the whole call's timeout.
    config.ollama.request_timeout = Duration::from_secs(10);
    let server = HttpServer::start(config).await;
    let client = server.client();
    fake.push_reply(Reply::RateLimited {
        retry_after: Some(2),
        error: "too many requests".into(),
    });
    fake.push_reply(Reply::text("After the wait.", 2, 2));
    let started = std::time::Instant::now();
    let (state, result) = run_task(&client, "Queue up.").await;
    assert_eq!(
        (state.as_str(), result.as_str()),
        ("completed", "After the wait.")
    );
    assert_eq!(fake.chat_count(), 2, "one retry, then the answer");
    // The server asked for 2 s: the retry did not come before.
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_model_missing_from_the_server_fails_before_any_chat() {
    let fake = FakeOllama::start().await;
    let mut config = config(&fake.url());
    config.ollama.model = "no-such-model".into();
    let server = HttpServer::start(config).await;
    let not_found = "model 'no-such-model' not found";
    fails_saying(&server.client(), "Hello?", not_found).await;
    assert_eq!(fake.chat_count(), 0);
}

#[tokio::test]
async fn a_stream_that_never_ends_times_out_and_hangs_up() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::Hang);
    let started = std::time::Instant::now();
    fails_then_recovers(&fake, &client, "did not finish within the request timeout").await;
    assert!(started.elapsed() < Duration::from_secs(15));
    // The hung stream was dropped, not left open.
    fake.until_chats_closed(Duration::from_secs(5), "the hung stream is still open")
        .await;
}

fn bytesize_kib(n: u64) -> bytesize::ByteSize {
    bytesize::ByteSize::kib(n)
}

const BUSY: &str = "server busy, please try again.  maximum pending requests exceeded";

/// One fault the task must fail on, after which a healthy task completes on the same server.
struct FaultCase {
    name: &'static str,
    /// What the fake answers the faulty task's chats with, `times` times.
    reply: fn() -> Reply,
    times: usize,
    /// `ollama.retries`, when not the default.
    retries: Option<u32>,
    /// `ollama.max_reply_bytes` in KiB, when not the default.
    max_reply_kib: Option<u64>,
    /// The failure reason must contain this.
    reason: &'static str,
    reason_has: &'static [&'static str],
    reason_lacks: &'static [&'static str],
    /// Chats the fake saw in all, the healthy task's included.
    chats: Option<usize>,
}

const FAULT: FaultCase = FaultCase {
    name: "",
    reply: || Reply::text("unused", 1, 1),
    times: 1,
    retries: None,
    max_reply_kib: None,
    reason: "",
    reason_has: &[],
    reason_lacks: &[],
    chats: None,
};

const FAULT_CASES: &[FaultCase] = &[
    // A 500 is not retried: the model may have run already.
    FaultCase {
        name: "HTTP 500 fails with the server's text",
        reply: || Reply::http_error(500, "llama runner process has terminated"),
        reason: "Ollama answered HTTP 500: llama runner process has terminated",
        chats: Some(2),
        ..FAULT
    },
    FaultCase {
        name: "HTTP 503 past the retries fails saying Ollama is busy",
        reply: || Reply::http_error(503, BUSY),
        times: 3,
        reason: "Ollama is busy",
        reason_has: &["after 3 attempts", "ollama.retries"],
        // 1 + 2 retries, then the healthy task.
        chats: Some(4),
        ..FAULT
    },
    FaultCase {
        name: "retries: 0 fails on the first 503",
        reply: || Reply::http_error(503, "server busy"),
        retries: Some(0),
        reason: "Ollama is busy",
        reason_lacks: &["attempts"],
        chats: Some(2),
        ..FAULT
    },
    FaultCase {
        name: "HTTP 429 past the retries fails saying so",
        reply: || Reply::RateLimited {
            retry_after: None,
            error: "too many requests".into(),
        },
        times: 3,
        reason: "Ollama refused the request as one too many (HTTP 429) after 3 attempts: too many requests",
        reason_has: &["ollama.retries"],
        chats: Some(4),
        ..FAULT
    },
    FaultCase {
        name: "HTTP 401 says to set OLLAMA_API_KEY",
        reply: || Reply::http_error(401, "unauthorized"),
        reason: "Ollama refused the request as unauthorized (HTTP 401): unauthorized",
        reason_has: &["OLLAMA_API_KEY"],
        chats: Some(2),
        ..FAULT
    },
    FaultCase {
        name: "HTTP 404 names the missing model",
        reply: || Reply::http_error(404, "model 'test-model' not found"),
        reason: "model 'test-model' not found on the Ollama server; pull it with `ollama pull test-model`",
        ..FAULT
    },
    FaultCase {
        name: "a connection dropped mid-stream fails as a transport error",
        reply: || Reply::Cut {
            after_chunks: vec!["Half an ".into(), "answer".into()],
        },
        reason: "HTTP error talking to Ollama",
        ..FAULT
    },
    FaultCase {
        name: "a stream ending without done fails",
        reply: || {
            Reply::Raw(vec![
                r#"{"message":{"role":"assistant","content":"partial"},"done":false}"#.into(),
            ])
        },
        reason: "stream ended before done",
        ..FAULT
    },
    FaultCase {
        name: "a malformed NDJSON line fails quoting the line",
        reply: || Reply::Malformed {
            after_chunks: vec!["fine ".into()],
        },
        reason: "cannot decode Ollama response `{\"model\": this is not json`",
        ..FAULT
    },
    FaultCase {
        name: "an error line mid-stream fails with its text",
        reply: || Reply::ErrorLine {
            after_chunks: vec!["Working on".into()],
            error: "an error was encountered while running the model: CUDA out of memory".into(),
        },
        reason: "Ollama stream failed: an error was encountered while running the model: CUDA out of memory",
        ..FAULT
    },
    FaultCase {
        name: "a reply over the cap fails naming the limit",
        reply: || Reply::text(&"word ".repeat(1000), 1, 1000),
        max_reply_kib: Some(1),
        reason: "Ollama reply exceeded the 1024-byte limit",
        ..FAULT
    },
    // 200 KiB of one line that never ends in a newline: past the cap plus framing room.
    FaultCase {
        name: "an endless line without a newline is bounded too",
        reply: || {
            Reply::Raw(vec![format!(
                r#"{{"message":{{"role":"assistant","content":"{}"#,
                "x".repeat(200 * 1024)
            )])
        },
        max_reply_kib: Some(1),
        reason: "Ollama reply exceeded the 1024-byte limit",
        ..FAULT
    },
];

#[tokio::test]
async fn each_fault_fails_its_task_clearly_and_the_next_task_runs() {
    for case in FAULT_CASES {
        let name = case.name;
        let fake = FakeOllama::start().await;
        let mut config = config(&fake.url());
        if let Some(retries) = case.retries {
            config.ollama.retries = retries;
        }
        if let Some(kib) = case.max_reply_kib {
            config.ollama.max_reply_bytes = bytesize_kib(kib);
        }
        let server = HttpServer::start(config).await;
        let client = server.client();
        for _ in 0..case.times {
            fake.push_reply((case.reply)());
        }
        let (state, reason) = run_task(&client, "Hit the fault.").await;
        assert_eq!(state, "failed", "{name}: {reason}");
        assert!(
            reason.contains(case.reason),
            "{name}: expected {:?} in: {reason}",
            case.reason
        );
        for text in case.reason_has {
            assert!(
                reason.contains(text),
                "{name}: expected {text:?} in: {reason}"
            );
        }
        for text in case.reason_lacks {
            assert!(!reason.contains(text), "{name}: {text:?} in: {reason}");
        }
        fake.push_reply(Reply::text("Recovered.", 3, 2));
        let (state, result) = run_task(&client, "Run normally.").await;
        assert_eq!(
            (state.as_str(), result.as_str()),
            ("completed", "Recovered."),
            "{name}: the next task"
        );
        if let Some(chats) = case.chats {
            assert_eq!(fake.chat_count(), chats, "{name}");
        }
    }
}
