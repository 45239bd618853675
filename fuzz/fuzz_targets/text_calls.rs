//! Reading a small model's reply text (`agent::steering`): tool calls written as text (bare
//! JSON, fenced blocks, `<tool_call>` tags) and echoed markup.
//!
//! Input: any bytes, as UTF-8 text (lossy). Nothing may panic; every call found names an
//! offered tool with object arguments; cleaning never adds text; a call found in the text is
//! found again, with the same arguments, when it is written alone between `<tool_call>` tags
//! (unless its arguments hold the closing tag itself).

#![no_main]

use agent_mcp::agent::steering::{calls_in_text, clean_answer};
use libfuzzer_sys::fuzz_target;

const OFFERED: [&str; 4] = ["list_dir", "read_file", "write_file", "run_command"];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let calls = calls_in_text(&text, &OFFERED);
    for call in &calls {
        assert!(OFFERED.contains(&call.function.name.as_str()), "{call:?}");
        assert!(call.function.arguments.is_object(), "{call:?}");
        let again = format!(
            "<tool_call>{}</tool_call>",
            serde_json::json!({"name": call.function.name, "arguments": call.function.arguments})
        );
        if again.matches("</tool_call>").count() > 1 {
            continue;
        }
        let found = calls_in_text(&again, &OFFERED);
        assert_eq!(found.len(), 1, "{again}");
        assert_eq!(found[0].function.arguments, call.function.arguments, "{again}");
    }
    let cleaned = clean_answer(&text);
    assert!(cleaned.len() <= text.len(), "{text:?} → {cleaned:?}");
});
