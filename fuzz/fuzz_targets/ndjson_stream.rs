//! The Ollama `/api/chat` stream decoder (NDJSON splitting + chunk folding + caps).
//!
//! Input: byte 0 seeds where the body is cut; the rest is the body. The same body is decoded
//! whole and in pieces, and the outcomes must agree: chunk boundaries carry no meaning.

#![no_main]

use agent_mcp::ollama::{ChatResponse, ChatStreamDecoder, OllamaError};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 1024;

fn summary(outcome: Result<ChatResponse, OllamaError>) -> String {
    match outcome {
        Ok(r) => format!(
            "ok {:?} {:?} {} {} {} {:?}",
            r.message.content,
            r.message.thinking,
            r.message.tool_calls.len(),
            r.prompt_eval_count,
            r.eval_count,
            r.done_reason
        ),
        Err(e) => format!("err {e}"),
    }
}

fn decode(pieces: &[&[u8]]) -> (String, usize) {
    let mut seen = 0usize;
    let mut count = |_: &agent_mcp::ollama::ChatChunk| seen += 1;
    let mut decoder = ChatStreamDecoder::new(CAP);
    for piece in pieces {
        match decoder.push(piece, &mut count) {
            Ok(Some(done)) => return (summary(Ok(done)), seen),
            Ok(None) => {}
            Err(e) => return (summary(Err(e)), seen),
        }
    }
    let outcome = decoder.finish(&mut count);
    (summary(outcome), seen)
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let whole = decode(&[body]);
    let step = usize::from(seed % 13) + 1;
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    let cut = decode(&pieces);
    assert_eq!(whole, cut, "chunking changed the outcome (step {step})");
    if let Some(rest) = whole.0.strip_prefix("ok ") {
        // Content + thinking never exceed the cap.
        assert!(rest.len() < 4 * CAP + 200, "{rest}");
    }
});
