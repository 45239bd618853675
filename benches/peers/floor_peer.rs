//! The floor of any MCP server doing `agent_status`'s work on hyper and serde_json, for
//! `scripts/server-profile.sh` (PEERS=1) and `scripts/bench.sh`'s reading of the hyper ceiling:
//! bare hyper as in `hyper_peer`, plus the least an MCP server must do on that path — parse the
//! JSON-RPC request into borrowed typed fields (the best case serde_json offers), look the task
//! up in a map, render the same status text (agent-mcp's renderer), write the JSON-RPC answer.
//! Nothing else: no Host/Origin, content-type, Accept or protocol-version checks, no body cap,
//! no `_meta` reading, no audit, no rate limit, no validation against the tool's schema, no
//! Tasks negotiation. No server that is safe to expose can be cheaper than this on the same
//! stack, so it says how much of bare hyper's rate is left for everything else.
//!
//! ```text
//! cargo bench --bench floor_peer -- <task-uuid>   # prints http://127.0.0.1:PORT/mcp
//! ```

#[path = "../support/listen.rs"]
mod listen;
#[path = "../support/peer_task.rs"]
mod peer_task;
#[path = "../support/runtime.rs"]
mod runtime;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use agent_mcp::agent::status::{parse_uuid, render_not_found, render_status};
use agent_mcp::task::Task;
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    method: &'a str,
    id: u64,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(borrow)]
    arguments: Args<'a>,
}

#[derive(Deserialize)]
struct Args<'a> {
    #[serde(borrow)]
    task_id: &'a str,
}

#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: u64,
    result: ToolResult<'a>,
}

#[derive(Serialize)]
struct ToolResult<'a> {
    content: [Text<'a>; 1],
    #[serde(rename = "isError")]
    is_error: bool,
}

#[derive(Serialize)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// The answer to one request body, or `None` when it is not an `agent_status` call.
fn answer(tasks: &HashMap<Uuid, Task>, body: &[u8]) -> Option<Vec<u8>> {
    let call: Call<'_> = serde_json::from_slice(body).ok()?;
    if call.method != "tools/call" || call.params.name != "agent_status" {
        return None;
    }
    let task_id = call.params.arguments.task_id;
    let text = match parse_uuid(task_id).and_then(|id| tasks.get(&id)) {
        Some(task) => render_status(task, None),
        None => render_not_found(task_id),
    };
    // Sized once for the text, its escapes and the envelope, so the writer does not grow it.
    let mut json = Vec::with_capacity(2 * text.len() + 128);
    serde_json::to_writer(
        &mut json,
        &Answer {
            jsonrpc: "2.0",
            id: call.id,
            result: ToolResult {
                content: [Text {
                    kind: "text",
                    text: &text,
                }],
                is_error: false,
            },
        },
    )
    .ok()?;
    Some(json)
}

fn main() {
    let task = peer_task::from_args("floor_peer");
    let tasks = Arc::new(HashMap::from([(task.id, task)]));
    let runtime = runtime::start(&mut tokio::runtime::Builder::new_multi_thread());
    runtime.block_on(serve(tasks));
}

async fn serve(tasks: Arc<HashMap<Uuid, Task>>) {
    listen::serve_http1(hyper::service::service_fn(move |req: Request<Incoming>| {
        let tasks = tasks.clone();
        async move {
            let body = req.into_body().collect().await.map(|b| b.to_bytes());
            let resp = match body.ok().and_then(|b| answer(&tasks, &b)) {
                Some(json) => {
                    let mut resp = Response::new(Full::new(Bytes::from(json)));
                    resp.headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    resp
                }
                None => {
                    let mut resp = Response::new(Full::new(Bytes::new()));
                    *resp.status_mut() = StatusCode::BAD_REQUEST;
                    resp
                }
            };
            Ok::<_, Infallible>(resp)
        }
    }))
    .await;
}
