//! The tool registry: one [`ToolSpec`] per tool, holding everything about it in one place: its
//! name, what it does to the workspace ([`ToolKind`]), the description and parameters the model
//! is shown, the argument shape named in errors, and its handler.
//!
//! Everything else asks the registry instead of keeping lists of names: the toolbox offers and
//! runs tools from it, steering asks a tool's kind (does it read, write or run?), the
//! configuration checks `agent.tools.disabled` against the same names
//! ([`crate::config::AGENT_TOOL_NAMES`]; a test holds them to [`TOOL_NAMES`]).
//!
//! ```
//! use agent_mcp::agent::tools::{ToolKind, spec};
//! assert_eq!(spec("write_file").map(|s| s.kind), Some(ToolKind::Write));
//! assert!(spec("format_disk").is_none());
//! ```

use ParamType::{Boolean, Integer, Text, Texts};

use super::spec::{Param, ParamType, ToolKind, ToolSpec, optional, required};
use super::{command, edit, files, run};

/// Each tool's name, for the code that names one (a rule that reads what `read_file` returned,
/// the engine that calls `write_file` on the model's behalf): the registry's names, not copies.
pub mod names {
    /// `list_dir`.
    pub const LIST_DIR: &str = "list_dir";
    /// `read_file`.
    pub const READ_FILE: &str = "read_file";
    /// `search_text`.
    pub const SEARCH_TEXT: &str = "search_text";
    /// `write_file`.
    pub const WRITE_FILE: &str = "write_file";
    /// `edit_file`.
    pub const EDIT_FILE: &str = "edit_file";
    /// `delete_file`.
    pub const DELETE_FILE: &str = "delete_file";
    /// `run_command`.
    pub const RUN_COMMAND: &str = "run_command";
}

/// The file a file tool reads or changes.
const FILE_PATH: Param = required("path", Text, "File relative to the workspace root");

/// Every tool, in the order they are offered.
pub const TOOLS: [ToolSpec; 7] = [
    ToolSpec {
        name: names::LIST_DIR,
        kind: ToolKind::Read,
        expected: files::LIST_DIR_EXPECTED,
        description: "List the entries of a folder of the workspace (folders end in /).",
        params: &[optional(
            "path",
            Text,
            "Folder relative to the workspace root; default \".\"",
        )],
        handler: &files::ListDir,
    },
    ToolSpec {
        name: names::READ_FILE,
        kind: ToolKind::Read,
        expected: files::READ_FILE_EXPECTED,
        description: "Read a text file of the workspace, optionally a window of its lines. \
                      Read a file before replacing or editing it.",
        params: &[
            FILE_PATH,
            optional("start_line", Integer, "First line to return, from 1"),
            optional("max_lines", Integer, "Most lines to return"),
        ],
        handler: &files::ReadFile,
    },
    ToolSpec {
        name: names::SEARCH_TEXT,
        kind: ToolKind::Read,
        expected: files::SEARCH_EXPECTED,
        description: "Find lines containing a literal string in the workspace's files (not a \
                      regex).",
        params: &[
            required("pattern", Text, "The exact text to find"),
            optional("path", Text, "Folder or file to search; default \".\""),
            optional("max_results", Integer, "Most matching lines; default 100"),
            optional(
                "ignore_case",
                Boolean,
                "Match regardless of case; default false",
            ),
        ],
        handler: &files::SearchText,
    },
    ToolSpec {
        name: names::WRITE_FILE,
        kind: ToolKind::Write,
        expected: edit::WRITE_FILE_EXPECTED,
        description: "Create a file of the workspace, or replace one you have read, with the \
                      given content.",
        params: &[
            FILE_PATH,
            required("content", Text, "The whole new content"),
        ],
        handler: &edit::WriteFile,
    },
    ToolSpec {
        name: names::EDIT_FILE,
        kind: ToolKind::Write,
        expected: edit::EDIT_FILE_EXPECTED,
        description: "Replace an exact piece of text in a file of the workspace you have read.",
        params: &[
            FILE_PATH,
            required(
                "old_text",
                Text,
                "Text to replace, exactly as in the file (whitespace included)",
            ),
            required(
                "new_text",
                Text,
                "The replacement; empty deletes old_text (a whole line with its line end)",
            ),
            optional(
                "replace_all",
                Boolean,
                "Replace every occurrence; default: old_text must occur once",
            ),
        ],
        handler: &edit::EditFile,
    },
    ToolSpec {
        name: names::DELETE_FILE,
        kind: ToolKind::Write,
        expected: edit::DELETE_FILE_EXPECTED,
        description: "Delete a file of the workspace you have read (to move one: write_file \
                      the new path, then delete_file the old).",
        params: &[FILE_PATH],
        handler: &edit::DeleteFile,
    },
    ToolSpec {
        name: names::RUN_COMMAND,
        kind: ToolKind::Run,
        expected: command::RUN_COMMAND_EXPECTED,
        description: "Run a program in the workspace without a shell (no pipes, globs or \
             redirection).",
        params: &[
            required(
                "argv",
                Texts,
                "Program and arguments, e.g. [\"cargo\", \"test\"]",
            ),
            optional(
                "cwd",
                Text,
                "Folder to run in, relative to the workspace root; default \".\"",
            ),
        ],
        handler: &run::RunCommand,
    },
];

/// Every tool name, in the order they are offered.
pub const TOOL_NAMES: [&str; TOOLS.len()] = {
    let mut names = [""; TOOLS.len()];
    let mut i = 0;
    while i < TOOLS.len() {
        names[i] = TOOLS[i].name;
        i += 1;
    }
    names
};

/// The tool called `name`.
pub fn spec(name: &str) -> Option<&'static ToolSpec> {
    static ALL: [ToolSpec; TOOLS.len()] = TOOLS;
    ALL.iter().find(|spec| spec.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_tool_is_defined_once_with_its_kind() {
        // The configuration validates `agent.tools.disabled` against its own list of names.
        assert_eq!(TOOL_NAMES, crate::config::AGENT_TOOL_NAMES);
        let kinds: Vec<ToolKind> = TOOLS.iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            [
                ToolKind::Read,
                ToolKind::Read,
                ToolKind::Read,
                ToolKind::Write,
                ToolKind::Write,
                ToolKind::Write,
                ToolKind::Run
            ]
        );
        for name in TOOL_NAMES {
            assert_eq!(spec(name).map(|s| s.name), Some(name));
        }
    }

    #[test]
    fn a_definition_carries_the_schema_and_the_settings() {
        let mut settings = super::super::ToolSettings::from_config(&Default::default());
        settings.commands.allow = vec!["cargo".into()];
        let def = spec("run_command").map(|s| s.definition(&settings));
        let def = def.unwrap_or_default();
        assert_eq!(def["function"]["name"], "run_command");
        assert_eq!(def["function"]["parameters"]["required"], json!(["argv"]));
        assert!(
            def["function"]["description"]
                .as_str()
                .is_some_and(|d| d.contains("Allowed programs: cargo."))
        );
    }
}
