//! Typed refusals at each edge: a plugin layer refuses with a `Refusal` from the protocol types
//! alone, the HTTP edge (real HTTP on 127.0.0.1) maps it to its status and headers, stdio to
//! the JSON-RPC error alone; the real `agent-mcp stdio` child refuses a rate-limited request
//! that way; and no layer behind the HTTP edge sees the `Authorization` header.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agent_mcp::protocol::{Credential, McpRequest, McpResult, Refusal};
use agent_mcp::transport::http::{HttpRules, McpHttpService};
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{HttpClient, MODERN, StdioServer, modern_meta, test_config};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tower::service_fn;

/// What a plugin outside the crate would write: refuse by `params.refuse`, else answer.
async fn refuser(req: McpRequest) -> Result<agent_mcp::protocol::McpResponse, Infallible> {
    let refuse = req.params.other().and_then(|p| p.get("refuse"));
    let refusal = match refuse.and_then(Value::as_str) {
        Some("unauthorized") => Some(Refusal::unauthorized("Unauthorized: the plugin says no.")),
        Some("rate_limited") => Some(Refusal::rate_limited(
            42,
            "Rate limit exceeded: retry after 42 s.",
        )),
        Some("too_large") => Some(Refusal::payload_too_large(
            "Payload Too Large: the plugin takes at most 10 bytes.",
        )),
        _ => None,
    };
    Ok(match refusal {
        Some(refusal) => req.refuse(refusal),
        None => req.result(McpResult::empty()),
    })
}

/// `(params.refuse, HTTP status, the one header that goes with it, JSON-RPC error)`.
type Case = (
    &'static str,
    u16,
    Option<(&'static str, &'static str)>,
    Value,
);

fn cases() -> Vec<Case> {
    vec![
        (
            "unauthorized",
            401,
            Some(("www-authenticate", "Bearer")),
            json!({"code": -32001, "message": "Unauthorized: the plugin says no."}),
        ),
        (
            "rate_limited",
            429,
            Some(("retry-after", "42")),
            json!({"code": -32000, "message": "Rate limit exceeded: retry after 42 s.",
                   "data": {"retryAfterSeconds": 42}}),
        ),
        (
            "too_large",
            413,
            None,
            json!({"code": -32000,
                   "message": "Payload Too Large: the plugin takes at most 10 bytes."}),
        ),
    ]
}

/// Serves `svc` behind the HTTP edge on a loopback port; the URL of its `/mcp`.
async fn serve_http<S>(svc: S) -> String
where
    S: tower::Service<McpRequest, Response = agent_mcp::protocol::McpResponse, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let edge = McpHttpService::new(svc, HttpRules::default());
    tokio::spawn(agent_mcp::transport::server::serve(
        listener,
        edge,
        std::future::pending(),
    ));
    format!("http://{addr}/mcp")
}

const REFUSAL_HEADERS: [&str; 2] = ["www-authenticate", "retry-after"];

#[tokio::test]
async fn each_refusal_maps_to_its_status_and_headers_over_http_in_both_eras() {
    let client = HttpClient::new(&serve_http(service_fn(refuser)).await);
    for (refuse, status, header, error) in cases() {
        let params = json!({"refuse": refuse});
        for (era, r) in [
            ("modern", client.modern("tools/list", params.clone()).await),
            ("legacy", client.legacy("tools/list", params, None).await),
        ] {
            assert_eq!(r.status, status, "{refuse} ({era}): {}", r.text);
            assert_eq!(r.headers["content-type"], "application/json");
            assert_eq!(r.body["error"], error, "{refuse} ({era})");
            assert!(r.body["id"].is_number(), "{refuse} ({era}): {}", r.text);
            for name in REFUSAL_HEADERS {
                let expected = header.filter(|(h, _)| *h == name).map(|(_, v)| v);
                let got = r.headers.get(name).map(|v| v.to_str().unwrap());
                assert_eq!(got, expected, "{refuse} ({era}): header {name}");
            }
        }
    }
    // Not refused: 200 and none of the refusal headers.
    let r = client.modern("tools/list", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    for name in REFUSAL_HEADERS {
        assert!(r.headers.get(name).is_none(), "{name} on a plain answer");
    }
}

#[tokio::test]
async fn each_refusal_is_the_json_rpc_error_alone_over_stdio() {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server);
    let serving = tokio::spawn(agent_mcp::transport::stdio::serve(
        service_fn(refuser),
        server_read,
        server_write,
    ));
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    for (id, (refuse, _, _, error)) in cases().into_iter().enumerate() {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
                         "params": {"refuse": refuse, "_meta": modern_meta(json!({}))}});
        client_write
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("an answer within 20 s")
            .unwrap()
            .expect("an answer");
        let answer: Value = serde_json::from_str(&line).unwrap();
        // The whole message: the error and nothing about HTTP.
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": id, "error": error}),
            "{refuse}"
        );
    }
    // End of input: the server answers what is in flight and returns.
    client_write.shutdown().await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(20), serving)
        .await
        .expect("stdio serve returns on end of input")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_real_stdio_server_refuses_over_its_limit_with_retry_after_seconds() {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.rate_limit.stdio = true;
    config.rate_limit.reads.per_minute = 1;
    config.rate_limit.reads.burst = 1;
    let mut server = StdioServer::spawn(&config).await;
    let first = server.modern("tools/list", json!({})).await;
    assert!(first["result"]["tools"].is_array(), "{first}");
    let second = server.modern("tools/list", json!({})).await;
    let secs = second["error"]["data"]["retryAfterSeconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("no retryAfterSeconds: {second}"));
    assert!((1..=60).contains(&secs), "{second}");
    assert_eq!(
        second,
        json!({"jsonrpc": "2.0", "id": second["id"], "error": {
            "code": -32000,
            "message": format!(
                "Rate limit exceeded: at most 1 requests per minute per caller. Retry after {secs} s."
            ),
            "data": {"retryAfterSeconds": secs},
        }})
    );
    assert!(server.close().await.success());
}

/// What a layer behind the HTTP edge saw of one request.
#[derive(Debug, Default)]
struct Seen {
    header_map: bool,
    header_value: bool,
    peer: bool,
    token: Option<String>,
    debug: String,
}

#[tokio::test]
async fn no_layer_sees_the_authorization_header_only_a_typed_credential() {
    const TOKEN: &str = "s3cret-token-9c1f7e";
    let seen = Arc::new(Mutex::new(Seen::default()));
    let spy = {
        let seen = seen.clone();
        service_fn(move |req: McpRequest| {
            let seen = seen.clone();
            async move {
                let ext = &req.ctx.extensions;
                *seen.lock().unwrap() = Seen {
                    header_map: ext.get::<http::HeaderMap>().is_some(),
                    header_value: ext.get::<http::HeaderValue>().is_some(),
                    peer: ext.get::<SocketAddr>().is_some(),
                    token: match &req.ctx.credential {
                        Some(Credential::Bearer(t)) => Some(t.expose().to_owned()),
                        _ => None,
                    },
                    debug: format!("{:?}", req.ctx),
                };
                Ok::<_, Infallible>(req.result(McpResult::empty()))
            }
        })
    };
    let client = HttpClient::new(&serve_http(spy).await);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": modern_meta(json!({}))}});
    let authorization = format!("Bearer {TOKEN}");
    let r = client
        .post_raw(
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "tools/list"),
                ("authorization", &authorization),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let seen = seen.lock().unwrap();
    // The extensions did come through (the peer address is there), the headers did not.
    assert!(seen.peer, "{seen:?}");
    assert!(!seen.header_map && !seen.header_value, "{seen:?}");
    assert_eq!(seen.token.as_deref(), Some(TOKEN));
    assert!(!seen.debug.contains(TOKEN), "{}", seen.debug);
    assert!(seen.debug.contains("<redacted>"), "{}", seen.debug);
}
