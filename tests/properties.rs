//! Property tests (proptest) of the five hostile-input surfaces the fuzz targets cover
//! (`fuzz/`), sized to run in CI under plain `cargo test`: JSON-RPC through the whole HTTP
//! edge and stack, tool-argument validation, image validation, the Ollama stream decoder and
//! `agent.yaml`. Each asserts no panic plus an invariant a user would rely on. Regression
//! cases for what fuzzing found sit at the end.

use std::convert::Infallible;
use std::sync::OnceLock;

use agent_mcp::config::Config;
use agent_mcp::layers::images::ImageLimits;
use agent_mcp::layers::images::{ImageRules, ImagesLayer};
use agent_mcp::layers::validate::ValidateLayer;
use agent_mcp::ollama::{ChatStreamDecoder, OllamaError};
use agent_mcp::protocol::{McpRequest, McpResponse, McpResult, Payload};
use agent_mcp::transport::http::McpHttpService;
use agent_mcp::{AgentMcp, Stack};
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};

#[path = "support/surfaces.rs"]
mod surfaces;

use surfaces::{images_reached, offline_config, through_edge, tool_call};

const CASES: u32 = 256;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// The whole edge + stack with a memory store and an Ollama nobody listens on.
fn edge() -> &'static McpHttpService<Stack> {
    static EDGE: OnceLock<(McpHttpService<Stack>, AgentMcp)> = OnceLock::new();
    &EDGE
        .get_or_init(|| {
            let server = runtime()
                .block_on(AgentMcp::start(&offline_config()))
                .expect("server starts");
            (server.http_service(), server)
        })
        .0
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One of `list`, as an owned string.
fn one_of(list: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(list).prop_map(str::to_owned)
}

fn method() -> impl Strategy<Value = String> {
    const METHODS: &[&str] = &[
        "tools/list",
        "tools/call",
        "initialize",
        "server/discover",
        "ping",
        "tasks/get",
        "tasks/cancel",
        "notifications/initialized",
    ];
    // Weighted as one arm per method.
    prop_oneof![
        METHODS.len() as u32 => one_of(METHODS),
        1 => "[a-z/]{0,16}",
    ]
}

fn params() -> impl Strategy<Value = Value> {
    let meta = prop_oneof![
        Just(Value::Null),
        Just(
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}})
        ),
        Just(json!({"io.modelcontextprotocol/protocolVersion": "2031-01-01"})),
        json_value(),
    ];
    let name = prop_oneof![
        Just(Value::from("agent_run")),
        Just(Value::from("agent_status")),
        json_value()
    ];
    (meta, name, json_value(), any::<bool>()).prop_map(|(meta, name, arguments, plain)| {
        if plain {
            return arguments;
        }
        let mut p = json!({"name": name, "arguments": arguments});
        if !meta.is_null() {
            p["_meta"] = meta;
        }
        p
    })
}

/// A message: usually a well-formed envelope, sometimes broken on purpose.
fn message() -> impl Strategy<Value = Value> {
    let id = prop_oneof![
        Just(None),
        any::<i64>().prop_map(|n| Some(Value::from(n))),
        "[a-z0-9-]{0,12}".prop_map(|s| Some(Value::from(s))),
        json_value().prop_map(Some),
    ];
    (id, method(), params(), 0u8..8).prop_map(|(id, method, params, twist)| {
        let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if let Some(id) = id {
            m["id"] = id;
        }
        match twist {
            0 => m["jsonrpc"] = "1.0".into(),
            1 => {
                m.as_object_mut().map(|o| o.remove("method"));
            }
            2 => m = Value::Array(vec![m]),
            _ => {}
        }
        m
    })
}

/// POSTs `body` through the edge (on the shared runtime).
fn post(body: Vec<u8>, version: Option<&str>, method: Option<&str>) -> (u16, Bytes) {
    // Built before entering the runtime: starting the server blocks on it.
    let edge = edge().clone();
    runtime().block_on(post_to(edge, body, version, method))
}

async fn post_to(
    edge: McpHttpService<Stack>,
    body: Vec<u8>,
    version: Option<&str>,
    method: Option<&str>,
) -> (u16, Bytes) {
    let mut req = http::Request::post("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json");
    if let Some(v) = version {
        req = req.header("mcp-protocol-version", v);
    }
    if let Some(m) = method.filter(|m| http::HeaderValue::from_str(m).is_ok()) {
        req = req.header("mcp-method", m);
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    let (status, bytes) = through_edge(edge, req).await;
    (status.as_u16(), bytes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    /// Every request (an object with an id) gets exactly one JSON-RPC answer echoing its id
    /// (or null when the id itself was unreadable); a notification gets no result.
    #[test]
    fn each_message_gets_one_answer_or_none(msg in message(), modern in any::<bool>()) {
        let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
        let version = modern.then_some("2026-07-28");
        let (status, bytes) = post(
            serde_json::to_vec(&msg).expect("json"),
            version,
            method.as_deref(),
        );
        prop_assert!(
            matches!(status, 200 | 202 | 400 | 404),
            "status {} for {}: {}", status, msg, String::from_utf8_lossy(&bytes)
        );
        let id = msg.get("id").filter(|v| !v.is_null());
        if bytes.is_empty() {
            // No body: a notification, or a response object, acknowledged or refused.
            prop_assert!(
                id.is_none() || msg.get("method").is_none() || !msg.is_object(),
                "a request with an id got no answer: {}", msg
            );
            return Ok(());
        }
        let answer: Value = serde_json::from_slice(&bytes).expect("JSON body");
        prop_assert_eq!(&answer["jsonrpc"], "2.0");
        prop_assert!(answer.get("result").is_some() != answer.get("error").is_some());
        if answer.get("result").is_some() {
            prop_assert_eq!(Some(&answer["id"]), id, "{}", answer);
        } else if !answer["id"].is_null() {
            prop_assert_eq!(Some(&answer["id"]), id, "{}", answer);
        }
    }

    /// Arbitrary bytes are answered, never a panic, never a 5xx.
    #[test]
    fn arbitrary_bytes_are_answered(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let (status, _) = post(body, None, None);
        prop_assert!(status < 500, "status {}", status);
    }

    /// Validation either passes arguments that keep the contract, or answers with the
    /// `Invalid arguments for tool` header and one `path: problem` line per violation.
    #[test]
    fn validation_passes_or_explains(
        tool in prop_oneof![Just("agent_run"), Just("agent_status")],
        request in prop_oneof![json_value(), "\\PC{0,20}".prop_map(Value::from), Just(Value::from("   "))],
        temperature in prop_oneof![Just(None), (-5f64..5.0).prop_map(|t| Some(Value::from(t))), json_value().prop_map(Some)],
        extra in prop::collection::btree_map("[a-z_]{1,10}", json_value(), 0..3),
        task_id in prop_oneof![Just(None), Just(Some(Value::from("6f1c1d0e-2b7a-4c1e-9a3e-1c2d3e4f5a6b"))), json_value().prop_map(Some)],
    ) {
        let mut args = Map::new();
        if tool == "agent_run" {
            args.insert("request".into(), request);
            if let Some(t) = temperature { args.insert("temperature".into(), t); }
        } else if let Some(id) = task_id {
            args.insert("task_id".into(), id);
        }
        for (k, v) in extra { args.insert(k, v); }
        let args = Value::Object(args);
        let resp = runtime().block_on(call_layer(ValidateLayer::default(), tool, args.clone()));
        let Payload::Result(result) = &resp.payload else {
            panic!("a tool result: {:?}", resp.payload)
        };
        let text = result.first_text().unwrap_or_default();
        if !result.is_tool_error() {
            if tool == "agent_run" {
                // The typed arguments reached the inner service (no images layer: none checked).
                prop_assert_eq!(text, "[]");
                prop_assert!(args["request"].as_str().is_some_and(|r| !r.trim().is_empty()), "{}", args);
                if let Some(t) = args.get("temperature").and_then(Value::as_f64) {
                    prop_assert!((0.0..=2.0).contains(&t));
                }
            } else {
                prop_assert_eq!(text, "passed");
            }
            return Ok(());
        }
        let header = format!("Invalid arguments for tool \"{tool}\":\n");
        prop_assert!(text.starts_with(&header), "{}", text);
        for line in text[header.len()..].lines() {
            prop_assert!(line.contains(": "), "{:?}", line);
        }
    }

    /// Images that pass are within the limits and of an allowed kind; the rest are refused
    /// with the validation header.
    #[test]
    fn images_pass_within_limits_or_are_refused(
        images in prop::collection::vec(
            (0usize..5, prop::collection::vec(any::<u8>(), 0..64), 0usize..3, any::<bool>()),
            0..6,
        )
    ) {
        const MAGIC: [&[u8]; 3] = [b"\x89PNG\r\n\x1a\n", b"\xFF\xD8\xFF", b"RIFF\0\0\0\0WEBP"];
        const MIMES: [&str; 5] = ["image/png", "image/jpeg", "image/webp", "image/gif", ""];
        let items: Vec<Value> = images
            .iter()
            .map(|(mime, bytes, magic, damage)| {
                let mut raw = MAGIC[*magic].to_vec();
                raw.extend_from_slice(bytes);
                let mut data = base64::engine::general_purpose::STANDARD.encode(&raw);
                if *damage { data.insert(1, '*'); }
                json!({"mime_type": MIMES[*mime], "data_base64": data})
            })
            .collect();
        let limits = ImageLimits {
            max_count: 3,
            max_bytes: bytesize::ByteSize::b(48),
            max_total_bytes: bytesize::ByteSize::b(100),
        };
        let args = json!({"request": "look", "images": items});
        let resp = runtime().block_on(call_layer(ImagesLayer::new(ImageRules(limits)), "agent_run", args));
        let Payload::Result(result) = &resp.payload else {
            panic!("a tool result: {:?}", resp.payload)
        };
        let text = result.first_text().unwrap_or_default();
        if result.is_tool_error() {
            prop_assert!(text.starts_with("Invalid arguments for tool \"agent_run\":\n"), "{}", text);
            return Ok(());
        }
        let passed: Vec<(String, usize)> = serde_json::from_str(text).expect("inner's JSON");
        prop_assert_eq!(passed.len(), images.len());
        prop_assert!(passed.len() <= 3);
        prop_assert!(passed.iter().all(|(_, n)| *n <= 48));
        prop_assert!(passed.iter().map(|(_, n)| n).sum::<usize>() <= 100);
        for ((mime, _), (m, _, magic, damage)) in passed.iter().zip(&images) {
            prop_assert!(!damage);
            prop_assert_eq!(mime.as_str(), MIMES[*m]);
            prop_assert_eq!(*m, *magic, "the bytes match the declared type");
        }
    }

    /// The stream decoder's outcome does not depend on where the body is cut.
    #[test]
    fn stream_decoding_is_chunking_invariant(
        lines in prop::collection::vec(stream_line(), 0..8),
        crlf in any::<bool>(),
        cuts in prop::collection::vec(1usize..40, 0..20),
    ) {
        let sep = if crlf { "\r\n" } else { "\n" };
        let body = lines.join(sep).into_bytes();
        let whole = decode(&[&body]);
        let mut pieces = Vec::new();
        let mut rest = &body[..];
        for cut in cuts {
            let at = cut.min(rest.len());
            let (a, b) = rest.split_at(at);
            pieces.push(a);
            rest = b;
        }
        pieces.push(rest);
        prop_assert_eq!(&whole, &decode(&pieces));
        let byte_at_a_time: Vec<&[u8]> = body.chunks(1).collect();
        prop_assert_eq!(&whole, &decode(&byte_at_a_time));
    }

    /// `agent.yaml` never panics the loader; a loaded config is valid and prints to YAML that
    /// loads again, and printing is stable from then on.
    #[test]
    fn config_yaml_loads_or_names_the_problem(yaml in config_yaml()) {
        match Config::from_yaml(&yaml) {
            Ok(config) => {
                prop_assert!(config.validate().is_ok());
                let printed = serde_yaml_ng::to_string(&config).expect("serializes");
                let again = Config::from_yaml(&printed).expect("printed config loads");
                prop_assert_eq!(printed, serde_yaml_ng::to_string(&again).expect("serializes"));
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn config_loader_survives_any_text(text in "\\PC{0,200}") {
        let _ = Config::from_yaml(&text);
    }
}

fn stream_line() -> impl Strategy<Value = String> {
    let text = "[a-zé世 \\\\\"]{0,12}".prop_map(|s| serde_json::to_string(&s).expect("string"));
    prop_oneof![
        4 => text.clone().prop_map(|t| format!(r#"{{"message":{{"role":"assistant","content":{t}}},"done":false}}"#)),
        1 => text.clone().prop_map(|t| format!(r#"{{"message":{{"role":"assistant","content":"","thinking":{t}}}}}"#)),
        1 => (0u64..100).prop_map(|n| format!(r#"{{"done":true,"done_reason":"stop","eval_count":{n}}}"#)),
        1 => text.prop_map(|t| format!(r#"{{"error":{t}}}"#)),
        1 => "[ -~]{0,10}",
        1 => Just(String::new()),
        1 => Just(r#"{"message":{"role":"assistant","tool_calls":[{"function":{"name":"ls","arguments":{}}}]}}"#.to_owned()),
    ]
}

fn config_yaml() -> impl Strategy<Value = String> {
    const SCALARS: &[&str] = &[
        "true",
        "null",
        "10s",
        "1.5 KiB",
        "\"http://127.0.0.1:11434\"",
        "[]",
        "[echo, cargo]",
    ];
    // Weighted as one arm per fixed scalar.
    let scalar = prop_oneof![
        1 => any::<i32>().prop_map(|n| n.to_string()),
        1 => (0f64..3.0).prop_map(|f| format!("{f}")),
        SCALARS.len() as u32 => one_of(SCALARS),
        1 => "[a-z ]{0,8}",
    ];
    let key = prop::sample::select(
        &[
            "ollama.url",
            "ollama.model",
            "ollama.temperature",
            "ollama.num_ctx",
            "ollama.request_timeout",
            "ollama.retries",
            "ollama.retry_backoff",
            "ollama.max_reply_bytes",
            "http.max_body_bytes",
            "http.header_timeout",
            "http.body_timeout",
            "http.allowed_hosts",
            "agent.max_steps",
            "agent.commands.allow",
            "agent.commands.timeout",
            "agent.tools.max_read_bytes",
            "mcp.images.max_bytes",
            "mcp.images.max_total_bytes",
            "rate_limit.burst",
            "store.backend",
            "nope.key",
        ][..],
    );
    prop::collection::vec((key, scalar), 0..6).prop_map(|pairs| {
        let mut tree = serde_yaml_ng::Mapping::new();
        for (key, value) in pairs {
            let value: serde_yaml_ng::Value =
                serde_yaml_ng::from_str(&value).unwrap_or(serde_yaml_ng::Value::Null);
            let mut node = &mut tree;
            let parts: Vec<&str> = key.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                let entry = node
                    .entry((*part).into())
                    .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
                if !entry.is_mapping() {
                    *entry = serde_yaml_ng::Value::Mapping(Default::default());
                }
                node = entry.as_mapping_mut().expect("a mapping");
            }
            node.insert(parts[parts.len() - 1].into(), value);
        }
        serde_yaml_ng::to_string(&tree).unwrap_or_default()
    })
}

fn decode(pieces: &[&[u8]]) -> String {
    let mut decoder = ChatStreamDecoder::new(4096);
    let mut seen = 0usize;
    let mut count = |_: &agent_mcp::ollama::ChatChunk| seen += 1;
    let mut outcome: Option<Result<_, OllamaError>> = None;
    for piece in pieces {
        match decoder.push(piece, &mut count) {
            Ok(None) => {}
            Ok(Some(done)) => {
                outcome = Some(Ok(done));
                break;
            }
            Err(e) => {
                outcome = Some(Err(e));
                break;
            }
        }
    }
    let outcome = outcome.unwrap_or_else(|| decoder.finish(&mut count));
    let text = match outcome {
        Ok(r) => format!(
            "ok {:?} {:?} {} {}",
            r.message.content,
            r.message.thinking,
            r.message.tool_calls.len(),
            r.eval_count
        ),
        Err(e) => format!("err {e}"),
    };
    format!("{text} after {seen} chunks")
}

async fn call_layer<L>(layer: L, tool: &str, arguments: Value) -> McpResponse
where
    L: tower::Layer<
            tower::util::ServiceFn<
                fn(McpRequest) -> std::future::Ready<Result<McpResponse, Infallible>>,
            >,
        >,
    L::Service: Service<McpRequest, Response = McpResponse, Error = Infallible>,
{
    let req = tool_call(tool, arguments);
    let inner: fn(McpRequest) -> std::future::Ready<Result<McpResponse, Infallible>> = passed;
    let mut svc = ServiceBuilder::new().layer(layer).service_fn(inner);
    let Ok(resp) = async { svc.ready().await?.call(req).await }.await;
    resp
}

/// The inner service: the images of a typed `agent_run` that reached it (those the images
/// layer checked), or "passed" for anything else.
fn passed(req: McpRequest) -> std::future::Ready<Result<McpResponse, Infallible>> {
    let text = images_reached(&req).unwrap_or_else(|| "passed".to_owned());
    std::future::ready(Ok(req.result(McpResult::tool_text(text, false))))
}
