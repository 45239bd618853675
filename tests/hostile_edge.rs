//! Hostile peers against the HTTP edge of the real `agent-mcp serve` (issue 27, points 1, 2
//! and 8): what connections and unread bodies can make the server hold, what a token-less
//! request costs, and what the operator endpoints show to a rebinding page or a stranger.
//! Linux only (`/proc` for the server's memory, `prlimit` for its descriptor limit).

#![cfg(target_os = "linux")]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use agent_mcp::config::Config;
use support::fake_ollama::FakeOllama;
use support::harness::{ServeProcess, Spawn, bearer, test_config};

const TOKEN: &str = "edge-test-token";

fn with_token(mut config: Config) -> Config {
    config.auth.tokens.push(bearer("ci", TOKEN));
    config
}

/// The default body cap (the config leaves it derived).
fn body_cap(config: &Config) -> usize {
    config.http.body_limit(&config.mcp.images)
}

/// The head of a modern `tools/list` POST declaring `content_length`, as raw bytes.
fn head(port: u16, content_length: usize, token: Option<&str>) -> Vec<u8> {
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n{auth}\
         Content-Length: {content_length}\r\n\r\n"
    )
    .into_bytes()
}

/// A peer that sends the head of a body one byte short of the cap and then as much of the
/// body as the server takes, and holds the connection open.
struct HeldBody {
    stream: TcpStream,
    sent: usize,
}

impl HeldBody {
    fn open(port: u16, cap: usize) -> HeldBody {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.write_all(&head(port, cap, None)).expect("head");
        stream.set_nonblocking(true).expect("non-blocking");
        HeldBody { stream, sent: 0 }
    }

    /// Sends more of the body, as far as the socket takes it now; the last byte is never sent.
    fn push(&mut self, cap: usize) {
        let chunk = [b'x'; 64 * 1024];
        while self.sent + 1 < cap {
            let n = chunk.len().min(cap - 1 - self.sent);
            match self.stream.write(&chunk[..n]) {
                Ok(0) | Err(_) => return,
                Ok(n) => self.sent += n,
            }
        }
    }
}

/// What 40 held bodies did to a server: the peers (still held), the bytes they sent, and the
/// server's RSS before, at the end and at its peak (MiB).
struct Held {
    _peers: Vec<HeldBody>,
    sent: usize,
    before: u64,
    rss: u64,
    peak: u64,
}

/// Holds 40 near-cap bodies against `server` for `seconds`.
async fn hold_40_against(server: &ServeProcess, cap: usize, seconds: u64) -> Held {
    let port = server.port();
    let (_, before) = server.rss_mib();
    let peers = tokio::task::spawn_blocking(move || hold_40(port, cap, seconds))
        .await
        .unwrap();
    let sent: usize = peers.iter().map(|p| p.sent).sum();
    let (rss, peak) = server.rss_mib();
    Held {
        _peers: peers,
        sent,
        before,
        rss,
        peak,
    }
}

impl Held {
    /// For the test's figures: what was sent, and the RSS.
    fn summary(&self) -> String {
        format!(
            "40 held bodies ({} MiB sent): RSS {} MiB, peak {} MiB, before {} MiB",
            self.sent >> 20,
            self.rss,
            self.peak,
            self.before
        )
    }
}

/// Seconds from sending a token-less request's head (its body never sent) to the first line
/// of the answer, and that line.
fn answer_to_head(port: u16) -> (Duration, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(40)))
        .expect("timeout");
    let started = Instant::now();
    stream.write_all(&head(port, 4096, None)).expect("head");
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).unwrap_or(0);
    let line = String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    (started.elapsed(), line)
}

/// Feeds 40 peers holding near-cap bodies for `seconds`.
fn hold_40(port: u16, cap: usize, seconds: u64) -> Vec<HeldBody> {
    let mut peers: Vec<HeldBody> = (0..40).map(|_| HeldBody::open(port, cap)).collect();
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        for peer in &mut peers {
            peer.push(cap);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    peers
}

/// Point 1, with tokens: 40 peers that send near-cap bodies without a token cost the server
/// nothing (it refuses each from its headers and reads no body), a token-less request is
/// answered 401 at once, and a client with the token is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_held_bodies_cost_nothing_and_a_tokenless_request_is_refused_at_once() {
    let fake = FakeOllama::start().await;
    let config = with_token(test_config(&fake.url()));
    let cap = body_cap(&config);
    let server = ServeProcess::spawn(&config).await;
    let port = server.port();
    let held = hold_40_against(&server, cap, 4).await;
    let (took, line) = tokio::task::spawn_blocking(move || answer_to_head(port))
        .await
        .unwrap();
    eprintln!(
        "with tokens: {}; a token-less request answered in {took:?}: {line}",
        held.summary()
    );
    assert!(line.contains(" 401 "), "{line}");
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    let (peak, before) = (held.peak, held.before);
    assert!(
        peak < before + 64,
        "peak RSS {peak} MiB (started at {before})"
    );
    let mut client = server.client();
    client.set_token(TOKEN);
    let listed = client.modern("tools/list", serde_json::json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    drop(held);
}

/// Point 1, without tokens (the default): 40 peers holding near-cap bodies share the
/// buffered-body budget, so the server holds at most about `http.max_buffered_bytes` of them,
/// and a small request is still answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_held_bodies_share_the_buffered_budget() {
    let fake = FakeOllama::start().await;
    let config = test_config(&fake.url());
    let cap = body_cap(&config);
    let budget_mib = (config.http.buffered_limit() >> 20) as u64;
    let server = ServeProcess::spawn(&config).await;
    let held = hold_40_against(&server, cap, 6).await;
    let started = Instant::now();
    let listed = server
        .client()
        .modern("tools/list", serde_json::json!({}))
        .await;
    let took = started.elapsed();
    eprintln!(
        "without tokens: {}, budget {budget_mib} MiB; tools/list answered in {took:?}",
        held.summary()
    );
    let (peak, before, sent) = (held.peak, held.before, held.sent);
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert!(took < Duration::from_secs(2), "{took:?}");
    // The budget, hyper's buffers and what the 40 connections cost besides: far below the
    // 40 × 28 MiB the peers tried to make it hold.
    assert!(
        peak < before + budget_mib + 96,
        "peak RSS {peak} MiB (started at {before}, budget {budget_mib} MiB)"
    );
    assert!(
        sent > (budget_mib as usize) << 20,
        "the peers did send ({sent} bytes)"
    );
    drop(held);
}

/// Is `prlimit` (util-linux) here? Under CI it must be; elsewhere its absence skips, loudly.
fn prlimit_or_skip(test: &str) -> bool {
    let found = std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test} needs prlimit (util-linux) under CI"
        );
        eprintln!("\n!!! SKIPPED {test}: prlimit (util-linux) is not installed\n");
    }
    found
}

/// This process needs a descriptor per idle connection it holds.
fn raise_own_descriptor_limit(at_least: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let want = limit
        .maximum
        .map_or(at_least, |hard| hard.min(at_least.max(4096)));
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: limit.maximum,
        },
    );
    assert!(
        getrlimit(Resource::Nofile)
            .current
            .is_none_or(|n| n >= at_least),
        "this test needs {at_least} descriptors"
    );
}

/// Point 2: under a soft descriptor limit of 1024, 1,100 idle connections do not lock a good
/// client out: with the hard limit at 1024 the connection cap fits below it and the idle
/// connections give way; with a higher hard limit the server raises its soft limit to it and
/// holds them all. Either way `accept` never spins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_client_is_answered_while_1100_idle_connections_are_held_under_a_soft_limit_of_1024()
{
    if !prlimit_or_skip("fds") {
        return;
    }
    raise_own_descriptor_limit(2600);
    let fake = FakeOllama::start().await;
    let config = test_config(&fake.url());
    for (limit, startup) in [
        ("1024:1024", "max_connections=896"),
        ("1024:4096", "raised from 1024 to the hard limit 4096"),
    ] {
        let mut server = ServeProcess::spawn_with(
            &config,
            Spawn {
                prefix: vec!["prlimit".into(), format!("--nofile={limit}"), "--".into()],
                ..Spawn::default()
            },
        )
        .await;
        let said = server.startup.join("\n");
        assert!(said.contains(startup), "{limit}: {said}");
        let port = server.port();
        let idle = tokio::task::spawn_blocking(move || {
            (0..1100)
                .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let started = Instant::now();
        let listed = tokio::time::timeout(
            Duration::from_secs(10),
            server.client().modern("tools/list", serde_json::json!({})),
        )
        .await
        .unwrap_or_else(|_| panic!("{limit}: a good client was not answered within 10 s"));
        let took = started.elapsed();
        assert_eq!(listed.status, 200, "{limit}: {}", listed.text);
        let later = server
            .stderr_until("accept failed", Duration::from_secs(1))
            .await;
        let failures = later.iter().filter(|l| l.contains("accept failed")).count();
        eprintln!(
            "nofile {limit}: 1,100 idle connections held, a good client answered in {took:?}; \
             'accept failed' lines: {failures}"
        );
        assert!(
            failures <= 1,
            "{limit}: accept failed {failures} times: {later:?}"
        );
        drop(idle);
        let status = server.terminate().await;
        assert!(status.success(), "{limit}: {status:?}");
    }
}

/// Point 8: `/healthz`, `/readyz` and `/metrics` answer only through the same Host/Origin
/// guard as `/mcp`; with tokens, `/metrics` needs one; `/readyz` reuses a recent probe of
/// Ollama instead of calling it per hit.
#[tokio::test]
async fn operator_endpoints_are_guarded_and_readyz_reuses_its_probe() {
    let fake = FakeOllama::start().await;
    let config = with_token(test_config(&fake.url()));
    let server = ServeProcess::spawn(&config).await;
    let http = reqwest::Client::new();
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut req = http.get(format!("{}{path}", server.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        async move {
            let resp = req.send().await.expect("send");
            (
                resp.status().as_u16(),
                resp.text().await.unwrap_or_default(),
            )
        }
    };
    for path in ["/healthz", "/readyz", "/metrics"] {
        let (status, text) = get(path, &[("host", "evil.example")]).await;
        assert_eq!(status, 403, "{path} with a foreign Host: {text}");
        let (status, _) = get(path, &[("origin", "http://evil.example")]).await;
        assert_eq!(status, 403, "{path} with a foreign Origin");
    }
    assert_eq!(get("/healthz", &[]).await.0, 200);
    let (status, text) = get("/metrics", &[]).await;
    assert_eq!(status, 401, "{text}");
    let bearer = format!("Bearer {TOKEN}");
    let (status, text) = get("/metrics", &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("agent_mcp_"), "{text}");
    let probes = fake.version_count();
    for _ in 0..100 {
        assert_eq!(get("/readyz", &[]).await.0, 200);
    }
    let made = fake.version_count() - probes;
    assert!(made <= 1, "100 /readyz hits made {made} Ollama calls");
}
