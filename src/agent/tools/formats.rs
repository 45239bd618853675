//! A change that breaks a structured file is refused: `package.json` that parses as JSON now
//! is not replaced by text that does not, and likewise a YAML file. A small model that
//! "bumps a version" by writing `version": "1.5.0"` over a whole `package.json` is told, with
//! the parser's line and column, and the file is left as it was; a capable model never writes
//! broken JSON, so it never meets this.
//!
//! Only a file that parses *before* the change is guarded: fixing a broken file, writing a new
//! one, or editing a JSON-with-comments file (`tsconfig.json`, which strict JSON does not
//! parse) is never refused here.

use super::ToolError;
use super::names::EDIT_FILE;

/// The formats read, by file ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Yaml,
}

impl Format {
    fn of(shown: &str) -> Option<Format> {
        let (_, ext) = shown.rsplit_once('.')?;
        match ext.to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        }
    }

    /// `None` when `text` parses, else the parser's message (with its line and column).
    fn problem(self, text: &str) -> Option<String> {
        match self {
            Format::Json => serde_json::from_str::<serde::de::IgnoredAny>(text)
                .err()
                .map(|e| e.to_string()),
            Format::Yaml => serde_yaml_ng::from_str::<serde::de::IgnoredAny>(text)
                .err()
                .map(|e| e.to_string()),
        }
    }
}

/// What is wrong with `text` as the structured file `shown` (`config.json does not parse as
/// JSON: …`), `None` when it parses or is not a format read here.
pub(crate) fn parse_problem(shown: &str, text: &str) -> Option<String> {
    let format = Format::of(shown)?;
    let problem = format.problem(text)?;
    Some(format!(
        "{shown} does not parse as {}: {problem}",
        format.name()
    ))
}

/// Whether replacing the file's text now (`before`, read only for a structured file; `None`
/// for a new file) with `after` keeps `shown` parsing; the refusal says where the new text
/// breaks and what to send instead. `tool` names the call in the message.
pub(super) fn keeps_parsing(
    tool: &str,
    shown: &str,
    before: impl FnOnce() -> Option<String>,
    after: &str,
) -> Result<(), ToolError> {
    let Some(format) = Format::of(shown) else {
        return Ok(());
    };
    let Some(before) = before() else {
        return Ok(());
    };
    if format.problem(&before).is_some() {
        return Ok(());
    }
    let Some(problem) = format.problem(after) else {
        return Ok(());
    };
    let what = format.name();
    let fix = if tool == EDIT_FILE {
        "make the edit so the whole file is still valid"
    } else {
        "send the whole file as valid"
    };
    Err(ToolError::Refused(format!(
        "not changed: '{shown}' is valid {what} now, and after this {tool} it would not be \
         ({problem}); the file is left as it was; {fix} {what}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_file_is_not_replaced_by_one_that_does_not_parse() {
        let before = "{\n  \"name\": \"widget\",\n  \"version\": \"1.4.2\"\n}\n";
        let broken = "version\": \"1.5.0\"\n\n# Your other package.json content here";
        let err = keeps_parsing("write_file", "package.json", || Some(before.into()), broken)
            .expect_err("broken JSON over valid JSON");
        let text = err.to_string();
        assert!(text.contains("'package.json' is valid JSON now"), "{text}");
        assert!(text.contains("line 1"), "the parser's position: {text}");
        assert!(text.contains("send the whole file as valid JSON"), "{text}");
        let fixed = before.replace("1.4.2", "1.5.0");
        assert!(
            keeps_parsing("write_file", "package.json", || Some(before.into()), &fixed).is_ok()
        );
    }

    #[test]
    fn new_broken_and_unstructured_files_are_not_judged() {
        // New file, a file broken before (the fix may take several edits), JSON with comments
        // (strict JSON does not parse it), and any other ending.
        assert!(keeps_parsing("write_file", "a.json", || None, "{").is_ok());
        assert!(
            keeps_parsing(
                "edit_file",
                "a.json",
                || Some("{\"a\": 1,}".into()),
                "{\"a\": 1,,}"
            )
            .is_ok()
        );
        assert!(
            keeps_parsing(
                "edit_file",
                "tsconfig.json",
                || Some("// c\n{}".into()),
                "// c\n{"
            )
            .is_ok()
        );
        assert!(keeps_parsing("write_file", "notes.txt", || Some("{}".into()), "{").is_ok());
        assert!(
            keeps_parsing("write_file", "VERSION", || Some("1.4.2\n".into()), "x\": 1").is_ok()
        );
    }

    #[test]
    fn yaml_is_guarded_too() {
        let before = "log:\n  level: info\nport: 8000\n";
        let err = keeps_parsing(
            "edit_file",
            "settings.YML",
            || Some(before.into()),
            "log:\n level: [\n",
        )
        .expect_err("broken YAML");
        assert!(err.to_string().contains("valid YAML"), "{err}");
        assert!(
            keeps_parsing(
                "edit_file",
                "s.yaml",
                || Some(before.into()),
                "log:\n  level: debug\n"
            )
            .is_ok()
        );
    }

    #[test]
    fn any_text_is_judged_without_a_panic() {
        for text in [
            "",
            "\u{0}",
            "プロジェクト: [",
            "🦀\"",
            "{\"a\":\"\u{202e}\"}",
            "- - -\n\t",
        ] {
            let _ = keeps_parsing("write_file", "x.json", || Some("{}".into()), text);
            let _ = keeps_parsing("write_file", "x.yaml", || Some("a: 1".into()), text);
            let _ = keeps_parsing("write_file", text, || Some(text.into()), text);
        }
    }
}
