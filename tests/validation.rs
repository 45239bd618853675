//! Tool-argument validation through the full stack over real HTTP: every rule of
//! docs/contract.md §2.4, §2.5 and §6.2, one bad input per row, each answered `isError: true`
//! with the exact lines expected (§6.2: a header line, then `<field path>: <what is wrong>` per
//! violation).

mod support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytesize::ByteSize;
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{HttpClient, HttpServer, field, test_config, tool_text};

const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
const MIB: usize = 1024 * 1024;

const FIX_BASE64: &str = "encode the image file with standard base64 (A-Z, a-z, 0-9, +, /, \
    with = padding and no spaces or line breaks)";
const FIX_MIME: &str = "use image/png, image/jpeg or image/webp";
const FIX_TEMPERATURE: &str = "use a number from 0.0 through 2.0, or null for the server default";
const FIX_SESSION: &str = "pass the session_id that agent_run returned, or omit it";
const FIX_TASK: &str = "pass the task_id that agent_run returned";

/// Base64 of `len` bytes that start with `magic`.
fn image_data(magic: &[u8], len: usize) -> String {
    let mut bytes = vec![0u8; len];
    bytes[..magic.len()].copy_from_slice(magic);
    STANDARD.encode(bytes)
}

fn png(data: &str) -> Value {
    json!({"mime_type": "image/png", "data_base64": data})
}

/// The tool error text the stack must answer with.
fn invalid(tool: &str, lines: &[&str]) -> String {
    let mut text = format!("Invalid arguments for tool \"{tool}\":");
    for line in lines {
        text.push('\n');
        text.push_str(line);
    }
    text
}

struct Case {
    name: &'static str,
    tool: &'static str,
    args: Value,
    expected: String,
}

fn run(name: &'static str, args: Value, lines: &[&str]) -> Case {
    Case {
        name,
        tool: "agent_run",
        args,
        expected: invalid("agent_run", lines),
    }
}

fn status(name: &'static str, args: Value, lines: &[&str]) -> Case {
    Case {
        name,
        tool: "agent_status",
        args,
        expected: invalid("agent_status", lines),
    }
}

fn cases() -> Vec<Case> {
    let eight_mib = image_data(PNG_MAGIC, 8 * MIB);
    let unknown_session = "0f6e3f5a-1b2c-4d5e-8f90-a1b2c3d4e5f6";
    let mut cases = vec![
        run(
            "extra property",
            json!({"request": "x", "colour": "red"}),
            &["colour: unknown property; allowed: images, request, session_id, temperature"],
        ),
        run(
            "empty request",
            json!({"request": ""}),
            &["request: must not be empty or whitespace-only"],
        ),
        run(
            "whitespace request",
            json!({"request": " \t\n "}),
            &["request: must not be empty or whitespace-only"],
        ),
        run(
            "missing request",
            json!({"temperature": 0.5}),
            &["request: missing; describe the work to do as a non-empty string"],
        ),
        run(
            "request not a string",
            json!({"request": 42}),
            &[
                "request: must be a string, got a number; describe the work to do as a non-empty string",
            ],
        ),
        run(
            "temperature -0.1",
            json!({"request": "x", "temperature": -0.1}),
            &[&format!(
                "temperature: -0.1 is out of range; {FIX_TEMPERATURE}"
            )],
        ),
        run(
            "temperature 2.01",
            json!({"request": "x", "temperature": 2.01}),
            &[&format!(
                "temperature: 2.01 is out of range; {FIX_TEMPERATURE}"
            )],
        ),
        run(
            "temperature a string",
            json!({"request": "x", "temperature": "0.5"}),
            &[&format!(
                "temperature: must be a number or null, got a string; {FIX_TEMPERATURE}"
            )],
        ),
        run(
            "non-UUID session_id",
            json!({"request": "x", "session_id": "abc"}),
            &[&format!("session_id: \"abc\" is not a UUID; {FIX_SESSION}")],
        ),
        run(
            "unhyphenated session_id",
            json!({"request": "x", "session_id": "2a8105cc84f94d37a5bde48e04654eb7"}),
            &[&format!(
                "session_id: \"2a8105cc84f94d37a5bde48e04654eb7\" is not a UUID; {FIX_SESSION}"
            )],
        ),
        status(
            "non-UUID task_id",
            json!({"task_id": "task-1"}),
            &[&format!("task_id: \"task-1\" is not a UUID; {FIX_TASK}")],
        ),
        status(
            "task_id not a string",
            json!({"task_id": 5}),
            &[&format!(
                "task_id: must be a string, got a number; {FIX_TASK}"
            )],
        ),
        status(
            "missing task_id",
            json!({}),
            &[&format!("task_id: missing; {FIX_TASK}")],
        ),
        status(
            "extra property on agent_status",
            json!({"task_id": unknown_session, "verbose": true}),
            &["verbose: unknown property; allowed: session_id, task_id"],
        ),
        status(
            "non-UUID session_id on agent_status",
            json!({"task_id": unknown_session, "session_id": "s1"}),
            &[&format!("session_id: \"s1\" is not a UUID; {FIX_SESSION}")],
        ),
        run(
            "images not an array",
            json!({"request": "x", "images": "a.png"}),
            &[
                "images: must be an array or null, got a string; send an array of {mime_type, data_base64} objects, or omit it",
            ],
        ),
        run(
            "null image element",
            json!({"request": "x", "images": [null]}),
            &[
                "images[0]: must be an object with mime_type and data_base64, not null; send one object per image",
            ],
        ),
        run(
            "image missing data_base64",
            json!({"request": "x", "images": [{"mime_type": "image/png"}]}),
            &["images[0].data_base64: missing; give the image bytes as standard base64"],
        ),
        run(
            "image with an extra property",
            json!({"request": "x", "images": [{"mime_type": "image/png", "data_base64": PNG_1X1, "name": "a.png"}]}),
            &["images[0].name: unknown property; allowed: data_base64, mime_type"],
        ),
        run(
            "null mime_type",
            json!({"request": "x", "images": [{"mime_type": null, "data_base64": PNG_1X1}]}),
            &[&format!(
                "images[0].mime_type: must not be null; {FIX_MIME}"
            )],
        ),
        run(
            "null data_base64",
            json!({"request": "x", "images": [{"mime_type": "image/png", "data_base64": null}]}),
            &["images[0].data_base64: must not be null; give the image bytes as standard base64"],
        ),
        run(
            "image/gif",
            json!({"request": "x", "images": [png(PNG_1X1), png(PNG_1X1), {"mime_type": "image/gif", "data_base64": "R0lGODlh"}]}),
            &[&format!(
                "images[2].mime_type: \"image/gif\" is not supported; {FIX_MIME}"
            )],
        ),
        run(
            "bad base64",
            json!({"request": "x", "images": [png("iVBORw0K*goA")]}),
            &[&format!(
                "images[0].data_base64: is not valid base64: '*' at position 8; {FIX_BASE64}"
            )],
        ),
        run(
            "base64 with a line break",
            json!({"request": "x", "images": [png("iVBORw0K\nGgoA")]}),
            &[&format!(
                "images[0].data_base64: is not valid base64: a line break at position 8; {FIX_BASE64}"
            )],
        ),
        run(
            "base64 without padding",
            json!({"request": "x", "images": [png("iVBORw0KGgo")]}),
            &[&format!(
                "images[0].data_base64: is not valid base64: its length, 11, does not fit standard = padding; {FIX_BASE64}"
            )],
        ),
        run(
            "11 MiB image",
            json!({"request": "x", "images": [png(&image_data(PNG_MAGIC, 11 * MIB))]}),
            &[
                "images[0].data_base64: the image is 11.0 MiB decoded, over the 10.0 MiB allowed per image; send a smaller image",
            ],
        ),
        run(
            "3 x 8 MiB",
            json!({"request": "x", "images": [png(&eight_mib), png(&eight_mib), png(&eight_mib)]}),
            &[
                "images: the images total 24.0 MiB decoded, over the 20.0 MiB allowed per request; send fewer or smaller images",
            ],
        ),
        run(
            "5 images",
            json!({"request": "x", "images": vec![png(PNG_1X1); 5]}),
            &["images: 5 images given, at most 4 are allowed; send fewer images"],
        ),
        run(
            "PNG declared as JPEG",
            json!({"request": "x", "images": [{"mime_type": "image/jpeg", "data_base64": PNG_1X1}]}),
            &[
                "images[0].data_base64: the data is a PNG image but mime_type says image/jpeg; set mime_type to image/png or send a JPEG image",
            ],
        ),
        run(
            "not an image at all",
            json!({"request": "x", "images": [png(&image_data(b"%PDF-1.7", 64))]}),
            &[
                "images[0].data_base64: the data is not a PNG, JPEG or WebP image (mime_type says image/png); send the image file's bytes",
            ],
        ),
        run(
            "several violations at once",
            json!({"temperature": 3, "session_id": "nope", "colour": 1, "images": [{"mime_type": 1, "data_base64": "AA=="}]}),
            &[
                "colour: unknown property; allowed: images, request, session_id, temperature",
                &format!("images[0].mime_type: must be a string or null, got a number; {FIX_MIME}"),
                "request: missing; describe the work to do as a non-empty string",
                &format!("session_id: \"nope\" is not a UUID; {FIX_SESSION}"),
                &format!("temperature: 3 is out of range; {FIX_TEMPERATURE}"),
            ],
        ),
        // Each element's shape and MIME type are part of the arguments' shape (the typed
        // parse); content rules (encoding, magic bytes, sizes) follow once the shape is right.
        run(
            "several image shape violations at once",
            json!({"request": "x", "images": [null, {"mime_type": "image/bmp", "data_base64": PNG_1X1},
                   {"mime_type": "image/jpeg", "data_base64": PNG_1X1}, png("****")]}),
            &[
                "images[0]: must be an object with mime_type and data_base64, not null; send one object per image",
                &format!("images[1].mime_type: \"image/bmp\" is not supported; {FIX_MIME}"),
            ],
        ),
        run(
            "several image content violations at once",
            json!({"request": "x", "images": [png(PNG_1X1),
                   {"mime_type": "image/jpeg", "data_base64": PNG_1X1}, png("****")]}),
            &[
                "images[1].data_base64: the data is a PNG image but mime_type says image/jpeg; set mime_type to image/png or send a JPEG image",
                &format!(
                    "images[2].data_base64: is not valid base64: '*' at position 0; {FIX_BASE64}"
                ),
            ],
        ),
    ];
    // A well-formed session_id naming no session passes validation; the service refuses it.
    cases.push(Case {
        name: "unknown session_id",
        tool: "agent_run",
        args: json!({"request": "x", "session_id": unknown_session}),
        expected: format!(
            "Unknown session_id {unknown_session}: no such session. Omit session_id to start a new \
             session, or pass a session_id returned by agent_run."
        ),
    });
    cases
}

/// The server under test. The body cap is raised above the default so that requests over the
/// image limits (3 × 8 MiB) reach the image layer instead of being cut at the HTTP edge.
async fn server() -> (FakeOllama, HttpServer) {
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.http.max_body_bytes = Some(ByteSize::mib(64));
    let server = HttpServer::start(config).await;
    (fake, server)
}

async fn call(client: &HttpClient, tool: &str, args: Value) -> (Value, u16) {
    let reply = client.tool_call(tool, args).await;
    (reply.body["result"].clone(), reply.status.as_u16())
}

#[tokio::test]
async fn every_bad_input_is_a_tool_error_naming_each_field() {
    let (_fake, server) = server().await;
    let client = server.client();
    let cases = cases();
    assert!(cases.len() >= 25, "only {} cases", cases.len());
    for case in cases {
        let (result, http) = call(&client, case.tool, case.args).await;
        assert_eq!(http, 200, "{}", case.name);
        assert_eq!(result["isError"], json!(true), "{}: {result}", case.name);
        assert_eq!(tool_text(&result), case.expected, "{}", case.name);
    }
}

#[tokio::test]
async fn valid_inputs_pass() {
    let (_fake, server) = server().await;
    let client = server.client();
    let mut session = String::new();
    for args in [
        json!({"request": "look at this", "images": [png(PNG_1X1)]}),
        json!({"request": "cold", "temperature": 0.0, "session_id": null, "images": null}),
        json!({"request": "hot", "temperature": 2.0, "images": []}),
        json!({"request": "webp and jpeg", "images": [
            {"mime_type": "image/webp", "data_base64": image_data(b"RIFF\x10\0\0\0WEBPVP8 ", 24)},
            {"mime_type": "image/jpeg", "data_base64": image_data(&[0xFF, 0xD8, 0xFF, 0xDB], 16)}]}),
    ] {
        let (result, http) = call(&client, "agent_run", args.clone()).await;
        assert_eq!(http, 200);
        assert_eq!(result["isError"], json!(false), "{args}: {result}");
        assert_eq!(field(&tool_text(&result), "status"), "queued", "{args}");
        session = field(&tool_text(&result), "session_id");
    }
    let (result, _) = call(
        &client,
        "agent_run",
        json!({"request": "again", "session_id": session}),
    )
    .await;
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(field(&tool_text(&result), "session_id"), session);
    let task = field(&tool_text(&result), "task_id");
    let (result, _) = call(
        &client,
        "agent_status",
        json!({"task_id": task, "session_id": session}),
    )
    .await;
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(field(&tool_text(&result), "task_id"), task);
}

#[tokio::test]
async fn twenty_mib_of_images_fit_the_default_body_cap() {
    let fake = FakeOllama::start().await;
    let server = HttpServer::start(test_config(&fake.url())).await;
    let ten_mib = image_data(PNG_MAGIC, 10 * MIB);
    let reply = server
        .client()
        .tool_call(
            "agent_run",
            json!({"request": "compare these",
                   "images": [png(&ten_mib), png(&ten_mib)]}),
        )
        .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        &reply.text[..reply.text.len().min(300)]
    );
    assert_eq!(
        reply.body["result"]["isError"],
        json!(false),
        "{}",
        reply.body
    );
    assert_eq!(field(&tool_text(&reply.body["result"]), "status"), "queued");
}
