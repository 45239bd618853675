//! Module boundaries inside the core that CI keeps: the store never reaches into the agent, and
//! neither imports a layer. The boundaries between crates need no scan: the task model and the
//! plugin surface are the `agent-mcp-plugin` crate, the built-in layers the `agent-mcp-layers`
//! crate that depends on it alone, so the compiler keeps them.
//!
//! The check reads the source: every line that is code or a doc comment (doc examples are
//! compiled too) is searched for a path into a forbidden module, written as `crate::agent`,
//! `agent_mcp::agent`, `crate::{agent, …}` or a `super::` chain that climbs to the crate root.
//! Plain `//` comments are skipped.

use std::path::{Path, PathBuf};

/// `(source under src/, modules it must not import)`. The core (agent, store) imports no layer
/// either: the layers are plugins around it, glued in `src/stack.rs`.
const RULES: &[(&str, &[&str])] = &[("store", &["agent", "layers"]), ("agent", &["layers"])];

#[test]
fn store_and_task_model_do_not_import_the_agent() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for (root, forbidden) in RULES {
        let files = rust_files(&src.join(root));
        // Not vacuous: the rule has files to read, and the store's include its core ones.
        assert!(!files.is_empty(), "no Rust files under src/{root}");
        if *root == "store" {
            for expected in ["mod.rs", "memory.rs", "sqlite/mod.rs"] {
                assert!(
                    files.iter().any(|f| f.ends_with(expected)),
                    "src/store/{expected} was not read; the scan would pass without looking"
                );
            }
        }
        for file in &files {
            let text = std::fs::read_to_string(file).expect("read a source file");
            assert!(!text.trim().is_empty(), "{} is empty", file.display());
            let depth = module_depth(&src, file);
            offences.extend(find_imports(&text, forbidden, depth).into_iter().map(
                |(line, module, code)| {
                    format!(
                        "{}:{line}: imports crate::{module}: {code}",
                        file.strip_prefix(src.parent().unwrap()).unwrap().display()
                    )
                },
            ));
        }
    }
    assert!(
        offences.is_empty(),
        "the store stays beneath the agent, and the core imports no layer (src/stack.rs glues \
         them); these files reach past that boundary:\n{}",
        offences.join("\n")
    );
}

/// Every top-level module of the crate, so a rule over "the rest of the crate" is an
/// allowlist: a module added later is forbidden until it is allowed.
fn crate_modules(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read src/lib.rs");
    let mut modules: Vec<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            ["pub mod ", "pub(crate) mod ", "mod "]
                .iter()
                .find_map(|prefix| l.strip_prefix(prefix))
        })
        .filter(|m| m.ends_with(';'))
        .map(|m| m.trim_end_matches(';').to_owned())
        .collect();
    // A module declared once per visibility (`pub` with the `internals` feature,
    // `pub(crate)` without) is one module.
    modules.sort();
    modules.dedup();
    assert!(
        modules.len() >= 10
            && modules.iter().any(|m| m == "service")
            && modules.iter().any(|m| m == "app"),
        "src/lib.rs lists its modules as `[pub[(crate)]] mod name;` lines; found {modules:?}"
    );
    modules
}

/// The composition root (`src/app.rs`: [`AgentMcp`](agent_mcp::AgentMcp) and its start-up
/// errors) composes the rest; nothing it composes imports it back, by module or by the names
/// the crate root re-exports from it. Only the command line (`src/cli.rs`, what the binary
/// runs) stands above it and starts servers through it.
#[test]
fn nothing_below_the_composition_root_imports_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let forbidden = ["app", "AgentMcp", "StartError", "ModelError", "OAuthError"];
    let mut read = 0;
    let mut offences = Vec::new();
    let above = ["app", "cli"];
    for module in crate_modules(&src)
        .into_iter()
        .filter(|m| !above.contains(&m.as_str()))
    {
        let dir = src.join(&module);
        let file = src.join(format!("{module}.rs"));
        let mut files = rust_files(&dir);
        if file.is_file() {
            files.push(file);
        }
        for file in &files {
            read += 1;
            // Doc examples are programs of the crate's users, who start from `AgentMcp`: only
            // the code itself is read here.
            let text: String = std::fs::read_to_string(file)
                .expect("read a source file")
                .lines()
                .map(|l| {
                    if l.trim_start().starts_with("//") {
                        "\n".to_owned()
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            let depth = module_depth(&src, file);
            for (line, name, code) in find_imports(&text, &forbidden, depth) {
                offences.push(format!(
                    "{}:{line}: imports crate::{name}: {code}",
                    file.strip_prefix(src.parent().unwrap()).unwrap().display()
                ));
            }
        }
    }
    assert!(
        read > 50,
        "only {read} files read; the scan would pass without looking"
    );
    assert!(
        offences.is_empty(),
        "the composition root (src/app.rs) is imported by nothing it composes:\n{}",
        offences.join("\n")
    );
}

/// The configuration (`src/config/`) is value types beneath everything that reads them: it
/// imports no module of the crate but the telemetry settings it checks.
#[test]
fn config_imports_nothing_above_it() {
    assert_stands_alone_but(
        "config",
        &["telemetry"],
        &["mod.rs", "sources.rs", "validate.rs"],
    );
}

/// The OAuth resource server (`src/oauth/`) stands alone on its crates and its own settings,
/// so that it can move beside the layers that use it: it imports no other module of this
/// crate, in code or in doc examples.
#[test]
fn oauth_imports_nothing_of_the_crate() {
    assert_stands_alone("oauth", &["mod.rs", "validator.rs", "cache.rs"]);
}

/// The telemetry module (`src/telemetry/`: export, span vocabulary, trace context) stands alone
/// on its crates and its own settings, so that the HTTP edge, the layers (their own crate
/// soon) and the agent can all use it without an import cycle: it imports no other module of
/// this crate, in code or in doc examples.
#[test]
fn telemetry_imports_nothing_of_the_crate() {
    let files = [
        "mod.rs",
        "semconv.rs",
        "spans.rs",
        "context.rs",
        "export.rs",
    ];
    assert_stands_alone("telemetry", &files);
}

/// No file of `src/<module>/` imports another module of the crate; `expected` are files the
/// scan must have read (so that it cannot pass without looking).
fn assert_stands_alone(module: &str, expected: &[&str]) {
    assert_stands_alone_but(module, &[], expected)
}

/// [`assert_stands_alone`], allowing the modules `allowed`.
fn assert_stands_alone_but(module: &str, allowed: &[&str], expected: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let forbidden: Vec<String> = crate_modules(&src)
        .into_iter()
        .filter(|m| m != module && !allowed.contains(&m.as_str()))
        .collect();
    let forbidden: Vec<&str> = forbidden.iter().map(String::as_str).collect();
    let files = rust_files(&src.join(module));
    for expected in expected {
        assert!(
            files.iter().any(|f| f.ends_with(expected)),
            "src/{module}/{expected} was not read; the scan would pass without looking"
        );
    }
    let mut offences = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        let depth = module_depth(&src, file);
        for (line, module, code) in find_imports(&text, &forbidden, depth) {
            offences.push(format!(
                "{}:{line}: imports crate::{module}: {code}",
                file.strip_prefix(src.parent().unwrap()).unwrap().display()
            ));
        }
    }
    assert!(
        offences.is_empty(),
        "src/{module} uses only std, its crates and its own settings; these lines reach into \
         the rest of the crate:\n{}",
        offences.join("\n")
    );
}

/// The checker itself: each way of naming the agent is caught, comments are not.
#[test]
fn the_scan_catches_each_spelling() {
    let hits = |text: &str, depth| find_imports(text, &["agent"], depth).len();
    assert_eq!(hits("use crate::agent::AgentError;", 1), 1);
    assert_eq!(hits("use agent_mcp::agent::Agent;", 1), 1);
    assert_eq!(
        hits("//! ```\n//! use agent_mcp::agent::Agent;\n//! ```", 1),
        1
    );
    assert_eq!(
        hits("/// ```\n/// # use agent_mcp::agent::Agent;\n/// ```", 1),
        1
    );
    assert_eq!(hits("//! It sits beneath [`crate::agent`].", 1), 0);
    assert_eq!(hits("    let e: crate::agent::AgentError = todo!();", 1), 1);
    assert_eq!(
        hits("use crate::{\n    agent::Agent,\n    task::Task,\n};", 1),
        1
    );
    assert_eq!(hits("use crate::{agent, task};", 1), 1);
    assert_eq!(hits("use super::agent::Agent;", 1), 1);
    assert_eq!(hits("use super::super::agent::Agent;", 2), 1);
    assert_eq!(hits("use super::sqlite::Store;", 1), 0);
    assert_eq!(hits("use crate::task::{Task, TaskState};", 1), 0);
    assert_eq!(hits("use crate::{task::Task, store::TaskStore};", 1), 0);
    assert_eq!(hits("// was crate::agent::task before", 1), 0);
    assert_eq!(hits("let name = \"crate::agent\"; // crate::agent", 1), 0);
    assert_eq!(hits("use crate::agents::Other;", 1), 0);
}

fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(path) else {
        return out;
    };
    for entry in entries {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// How many `super::` reach the crate root from the file's own module (src/store/mod.rs: 1,
/// src/store/memory.rs: 2). An inline `mod tests` is one deeper, so a chain at least this long
/// is treated as reaching the root: stricter, never looser.
fn module_depth(src: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(src).expect("a file under src/");
    let parts = rel.components().count();
    if rel.file_name().is_some_and(|n| n == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// `(line number, forbidden module, the line)` for each path into a forbidden module, in code
/// and in the code blocks of doc comments.
fn find_imports(text: &str, forbidden: &[&str], depth: usize) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    // A `use crate::{` group may span lines: the nesting depth while inside one.
    let mut group: Option<usize> = None;
    let mut in_doc_code = false;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        let code = if line.starts_with("///") || line.starts_with("//!") {
            // Doc prose may link to any module; a doc example is compiled, so it counts.
            let doc = &line[3..];
            if doc.trim_start().starts_with("```") {
                in_doc_code = !in_doc_code;
                continue;
            }
            if !in_doc_code {
                continue;
            }
            doc.trim_start_matches(" # ")
        } else if line.starts_with("//") {
            continue;
        } else {
            line
        };
        let tokens = tokens(code);
        let mut i = 0;
        while i < tokens.len() {
            let token = tokens[i].as_str();
            let after_path = i > 0 && tokens[i - 1] == "::";
            if let Some(nesting) = group.as_mut() {
                match token {
                    "{" => *nesting += 1,
                    "}" => {
                        *nesting -= 1;
                        if *nesting == 0 {
                            group = None;
                        }
                    }
                    name if *nesting == 1 && !after_path && forbidden.contains(&name) => {
                        found.push((index + 1, name.to_string(), raw.to_string()))
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            if after_path {
                i += 1;
                continue;
            }
            let root = matches!(token, "crate" | "agent_mcp")
                && tokens.get(i + 1).is_some_and(|t| t == "::");
            let supers = tokens[i..]
                .chunks(2)
                .take_while(|pair| pair[0] == "super" && pair.get(1).is_some_and(|t| t == "::"))
                .count();
            let next = if root {
                i + 2
            } else if supers > 0 && supers >= depth {
                i + 2 * supers
            } else {
                i += 1;
                continue;
            };
            match tokens.get(next).map(String::as_str) {
                Some("{") if root => group = Some(1),
                Some(name) if forbidden.contains(&name) => {
                    found.push((index + 1, name.to_string(), raw.to_string()))
                }
                _ => {}
            }
            i = next + 1;
        }
    }
    found
}

/// Identifiers, `::`, `{`, `}` and `,` up to a `//` comment; string literals and other
/// punctuation are dropped.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' {
            for c in chars.by_ref() {
                if c == '"' {
                    break;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let mut ident = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                ident.push(n);
                chars.next();
            }
            out.push(ident);
        } else if c == '/' && chars.peek() == Some(&'/') {
            break; // the rest of the line is a comment
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push("::".into());
        } else if matches!(c, '{' | '}' | ',') {
            out.push(c.to_string());
        }
    }
    out
}
