//! Tool calls as a scripted model makes them: the tool's name and its arguments, one
//! constructor a tool, so a list of hostile or ordinary calls reads as what it asks for.

#![allow(dead_code)]

use serde_json::{Value, json};

/// One tool call: the tool's name and its arguments.
pub type Call = (&'static str, Value);

pub fn read(path: &str) -> Call {
    ("read_file", json!({"path": path}))
}

pub fn list(path: &str) -> Call {
    ("list_dir", json!({"path": path}))
}

/// `search_text` for `pattern` below `path`.
pub fn search(pattern: &str, path: &str) -> Call {
    ("search_text", json!({"pattern": pattern, "path": path}))
}

/// `search_text` for `pattern` in the whole workspace.
pub fn search_all(pattern: &str) -> Call {
    ("search_text", json!({"pattern": pattern}))
}

pub fn write(path: &str, content: &str) -> Call {
    ("write_file", json!({"path": path, "content": content}))
}

pub fn edit(path: &str, old_text: &str, new_text: &str) -> Call {
    (
        "edit_file",
        json!({"path": path, "old_text": old_text, "new_text": new_text}),
    )
}

/// `run_command` of `argv` in the workspace.
pub fn run(argv: &[&str]) -> Call {
    ("run_command", json!({"argv": argv}))
}

/// `run_command` of `argv` in the workspace's folder `cwd`.
pub fn run_in(cwd: &str, argv: &[&str]) -> Call {
    ("run_command", json!({"argv": argv, "cwd": cwd}))
}
