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

/// The fault's task fails with a reason containing `expect`; then a healthy task completes.
async fn fails_then_recovers(fake: &FakeOllama, client: &HttpClient, expect: &str) -> String {
    let (state, reason) = run_task(client, "Hit the fault.").await;
    assert_eq!(state, "failed", "{reason}");
    assert!(reason.contains(expect), "expected {expect:?} in: {reason}");
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
async fn http_500_fails_with_the_servers_text() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::http_error(
        500,
        "llama runner process has terminated",
    ));
    fails_then_recovers(
        &fake,
        &client,
        "Ollama answered HTTP 500: llama runner process has terminated",
    )
    .await;
    // A 500 is not retried: the model may have run already.
    assert_eq!(fake.chat_count(), 2);
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
async fn http_503_past_the_retries_fails_saying_ollama_is_busy() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    let busy = "server busy, please try again.  maximum pending requests exceeded";
    for _ in 0..3 {
        fake.push_reply(Reply::http_error(503, busy));
    }
    let reason = fails_then_recovers(&fake, &client, "Ollama is busy").await;
    assert!(reason.contains("after 3 attempts"), "{reason}");
    assert!(reason.contains("ollama.retries"), "{reason}");
    assert_eq!(fake.chat_count(), 4, "1 + 2 retries, then the healthy task");
}

#[tokio::test]
async fn retries_zero_fails_on_the_first_503() {
    let fake = FakeOllama::start().await;
    let mut config = config(&fake.url());
    config.ollama.retries = 0;
    let server = HttpServer::start(config).await;
    let client = server.client();
    fake.push_reply(Reply::http_error(503, "server busy"));
    let reason = fails_then_recovers(&fake, &client, "Ollama is busy").await;
    assert!(!reason.contains("attempts"), "{reason}");
    assert_eq!(fake.chat_count(), 2);
}

#[tokio::test]
async fn http_404_names_the_missing_model() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::http_error(404, "model 'test-model' not found"));
    fails_then_recovers(
        &fake,
        &client,
        "model 'test-model' not found on the Ollama server; pull it with `ollama pull test-model`",
    )
    .await;
}

#[tokio::test]
async fn a_model_missing_from_the_server_fails_before_any_chat() {
    let fake = FakeOllama::start().await;
    let mut config = config(&fake.url());
    config.ollama.model = "no-such-model".into();
    let server = HttpServer::start(config).await;
    let (state, reason) = run_task(&server.client(), "Hello?").await;
    assert_eq!(state, "failed");
    assert!(
        reason.contains("model 'no-such-model' not found"),
        "{reason}"
    );
    assert_eq!(fake.chat_count(), 0);
}

#[tokio::test]
async fn connection_dropped_mid_stream_fails_as_a_transport_error() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::Cut {
        after_chunks: vec!["Half an ".into(), "answer".into()],
    });
    fails_then_recovers(&fake, &client, "HTTP error talking to Ollama").await;
}

#[tokio::test]
async fn stream_ending_without_done_fails() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::Raw(vec![
        r#"{"message":{"role":"assistant","content":"partial"},"done":false}"#.into(),
    ]));
    fails_then_recovers(&fake, &client, "stream ended before done").await;
}

#[tokio::test]
async fn malformed_ndjson_line_fails_quoting_the_line() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::Malformed {
        after_chunks: vec!["fine ".into()],
    });
    fails_then_recovers(
        &fake,
        &client,
        "cannot decode Ollama response `{\"model\": this is not json`",
    )
    .await;
}

#[tokio::test]
async fn error_line_mid_stream_fails_with_its_text() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(config(&fake.url())).await;
    let client = server.client();
    fake.push_reply(Reply::ErrorLine {
        after_chunks: vec!["Working on".into()],
        error: "an error was encountered while running the model: CUDA out of memory".into(),
    });
    fails_then_recovers(
        &fake,
        &client,
        "Ollama stream failed: an error was encountered while running the model: CUDA out of memory",
    )
    .await;
}

#[tokio::test]
async fn reply_over_the_cap_fails_naming_the_limit() {
    let fake = FakeOllama::start().await;
    let mut config = config(&fake.url());
    config.ollama.max_reply_bytes = bytesize_kib(1);
    let server = HttpServer::start(config).await;
    let client = server.client();
    let huge = "word ".repeat(1000);
    fake.push_reply(Reply::text(&huge, 1, 1000));
    fails_then_recovers(&fake, &client, "Ollama reply exceeded the 1024-byte limit").await;
}

#[tokio::test]
async fn endless_line_without_newline_is_bounded_too() {
    let fake = FakeOllama::start().await;
    let mut config = config(&fake.url());
    config.ollama.max_reply_bytes = bytesize_kib(1);
    let server = HttpServer::start(config).await;
    let client = server.client();
    // 200 KiB of one line that never ends in a newline: past the cap plus framing room.
    let endless = format!(
        r#"{{"message":{{"role":"assistant","content":"{}"#,
        "x".repeat(200 * 1024)
    );
    fake.push_reply(Reply::Raw(vec![endless]));
    fails_then_recovers(&fake, &client, "Ollama reply exceeded the 1024-byte limit").await;
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
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while fake.in_flight_chats() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the hung stream is still open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn bytesize_kib(n: u64) -> bytesize::ByteSize {
    bytesize::ByteSize::kib(n)
}
