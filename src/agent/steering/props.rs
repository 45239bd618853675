//! Property tests: every text helper of steering takes any text, in any script,
//! and returns without panicking; what it returns stays within what it was given.

use proptest::prelude::*;
use serde_json::json;

use super::generated_text::text_of;
use super::text::{
    broken_call, calls_in_text, clean_answer, describes_a_call, echo, missing_file, named_file,
    names_a_tool, without_echo,
};
use crate::agent::tools::Workspace;
use crate::agent::tools::names::{LIST_DIR, READ_FILE, RUN_COMMAND, WRITE_FILE};

const OFFERED: [&str; 4] = [LIST_DIR, READ_FILE, WRITE_FILE, RUN_COMMAND];

/// Any text of [`text_of`], NUL included.
fn any_text() -> impl Strategy<Value = String> {
    text_of(24, 6, true)
}

fn workspace() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["a.txt", "README.md", "メモ.md", "שלום.txt"] {
        std::fs::write(dir.path().join(name), "x").expect("file");
    }
    let ws = Workspace::open(dir.path()).expect("workspace");
    (dir, ws)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn reading_reply_text_never_panics(text in any_text(), ours in any_text()) {
        for call in calls_in_text(&text, &OFFERED) {
            prop_assert!(OFFERED.contains(&call.function.name.as_str()));
            prop_assert!(call.function.arguments.is_object());
        }
        let cleaned = clean_answer(&text);
        prop_assert!(cleaned.len() <= text.len());
        let kept = without_echo(&text, std::iter::once(ours.as_str()));
        prop_assert!(kept.len() <= text.len());
        let _ = describes_a_call(&text, &OFFERED, &text);
        let _ = names_a_tool(&text, &OFFERED);
        if let Some(tool) = broken_call(&text, &OFFERED) {
            prop_assert!(OFFERED.contains(&tool));
        }
        prop_assert!(echo(&text).chars().count() <= 301);
    }

    #[test]
    fn names_in_any_text_are_found_where_they_are(text in any_text(), word in any_text()) {
        if super::text::request_names(&text, &word) {
            prop_assert!(!word.is_empty() && text.contains(word.as_str()));
        }
    }

    #[test]
    fn reading_a_whole_file_block_of_any_text_never_panics(
        text in any_text(),
        before in any_text(),
        request in any_text(),
    ) {
        super::whole_file::check_any_text(&text, &before, &request);
    }

    #[test]
    fn files_named_in_any_text_exist(text in any_text()) {
        let (_dir, ws) = workspace();
        if let Some(found) = named_file(&text, &ws) {
            prop_assert!(ws.existing(&found).is_ok(), "{found}");
        }
        if let Some(missing) = missing_file(&text, &ws) {
            prop_assert!(ws.existing(&missing).is_err(), "{missing}");
        }
    }

    #[test]
    fn a_call_in_any_text_is_found_with_its_arguments(path in any_text()) {
        prop_assume!(!path.contains("</tool_call>"));
        let text = format!(
            "<tool_call>{}</tool_call>",
            json!({"name": READ_FILE, "arguments": {"path": path}})
        );
        let calls = calls_in_text(&text, &OFFERED);
        prop_assert_eq!(calls.len(), 1);
        prop_assert_eq!(&calls[0].function.arguments["path"], &json!(path));
    }
}
