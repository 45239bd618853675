//! The repository stands alone: no file links or points outside it, and every relative link in
//! its Markdown resolves. Its pages are true to the configuration: every `agent.yaml` key they
//! name exists, and docs/configuration.md names every key with the default the code has.
//!
//! A reader of the repository has only the repository. A path into a sibling folder or into the
//! machine it was written on (an absolute path, `..` above the root) names something that reader
//! does not have, and a Markdown link to a file that is not there is a dead end. This test reads
//! every file git knows (tracked, plus new files not ignored) and fails on either.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Strings that point outside the repository, whatever the file. Built from pieces so this
/// file does not match itself.
fn outside_markers() -> Vec<String> {
    vec![
        ["..", "/shared"].concat(),
        ["shared", "/seeds"].concat(),
        ["/", "work/"].concat(),
    ]
}

/// Folders that are not the repository's own files: build output, installed tools, VCS data.
const NOT_OURS: [&str; 5] = [".git", "target", ".tools", "node_modules", "corpus"];

/// Every file under `dir` except [`NOT_OURS`], relative to the root: the fallback when git is
/// not there (a source archive).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let path = dir.join(&name);
        match entry.file_type() {
            Ok(t) if t.is_dir() && !NOT_OURS.iter().any(|n| name == *n) => walk(&path, out),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
}

/// Tracked files and new files git does not ignore, relative to the root (every file but
/// [`NOT_OURS`] when git is not available).
fn repository_files() -> Vec<PathBuf> {
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root())
        .output();
    let out = match listed {
        Ok(out) if out.status.success() => out,
        _ => {
            let mut files = Vec::new();
            walk(Path::new(""), &mut files);
            files.sort();
            return files;
        }
    };
    let files: BTreeSet<PathBuf> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
        // Deleted in the work tree but still in the index: nothing to read.
        .filter(|path| root().join(path).is_file())
        .collect();
    files.into_iter().collect()
}

/// The file as text, or `None` for binary content.
fn read_text(path: &Path) -> Option<String> {
    let bytes = std::fs::read(root().join(path)).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Markdown with fenced code blocks and inline code spans blanked out: links are only what a
/// renderer shows as links.
fn prose_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut prose = String::with_capacity(line.len());
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                prose.push(c);
            }
        }
        out.push((i + 1, prose));
    }
    out
}

/// The targets of inline links `[text](target)` and images `![alt](target)` in one line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let inner = after[..end].trim();
        // `[x](<path with spaces> "title")`
        let target = inner
            .strip_prefix('<')
            .and_then(|t| t.split_once('>').map(|(t, _)| t))
            .unwrap_or_else(|| inner.split_whitespace().next().unwrap_or(""));
        targets.push(target.to_owned());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a Markdown file's headings make, duplicates numbered as GitHub numbers them.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#');
        if !text.starts_with(' ') {
            continue;
        }
        let base = slug(&text.replace('`', ""));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// `base/target` with `.` and `..` folded; `None` when it climbs above the repository root.
fn resolve(base: &Path, target: &str) -> Option<PathBuf> {
    let mut parts: Vec<String> = Vec::new();
    for component in base.join(target).components() {
        match component {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Every problem found: `path:line: what`.
fn problems(files: &[PathBuf]) -> (Vec<String>, BTreeSet<PathBuf>) {
    let markers = outside_markers();
    let mut found = Vec::new();
    let mut read = BTreeSet::new();
    let texts: HashMap<&PathBuf, String> = files
        .iter()
        .filter_map(|path| read_text(path).map(|text| (path, text)))
        .collect();
    for (path, text) in &texts {
        read.insert((*path).clone());
        for (i, line) in text.lines().enumerate() {
            for marker in &markers {
                if line.contains(marker.as_str()) {
                    found.push(format!(
                        "{}:{}: points outside the repository ({marker:?})",
                        path.display(),
                        i + 1
                    ));
                }
            }
        }
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let dir = path.parent().unwrap_or(Path::new(""));
        for (line_no, line) in prose_lines(text) {
            for target in link_targets(&line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file_part, anchor) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target.as_str(), None),
                };
                let where_ = format!("{}:{line_no}: link {target:?}", path.display());
                let linked = if file_part.is_empty() {
                    (*path).clone()
                } else if file_part.starts_with('/') {
                    found.push(format!("{where_} is an absolute path"));
                    continue;
                } else {
                    match resolve(dir, file_part) {
                        Some(p) => p,
                        None => {
                            found.push(format!("{where_} leaves the repository"));
                            continue;
                        }
                    }
                };
                if !root().join(&linked).exists() {
                    found.push(format!("{where_}: no such file {}", linked.display()));
                    continue;
                }
                if let Some(anchor) = anchor {
                    let linked_text = texts.get(&linked).cloned().unwrap_or_default();
                    if linked.extension().is_some_and(|e| e == "md")
                        && !anchors(&linked_text).contains(anchor)
                    {
                        found.push(format!(
                            "{where_}: {} has no heading #{anchor}",
                            linked.display()
                        ));
                    }
                }
            }
        }
    }
    found.sort();
    (found, read)
}

#[test]
fn nothing_links_or_points_outside_the_repository() {
    let files = repository_files();
    let (found, read) = problems(&files);
    // Not vacuous: the files this is about were read.
    for must in [
        "README.md",
        "docs/contract.md",
        "benches/README.md",
        "src/lib.rs",
    ] {
        assert!(
            read.contains(Path::new(must)),
            "{must} was not among the files read; read {} files",
            read.len()
        );
    }
    assert!(read.len() > 50, "only {} text files read", read.len());
    assert!(
        found.is_empty(),
        "{} problem(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_what_it_must_refuse() {
    assert_eq!(
        link_targets("see [a](docs/x.md#y) and ![i](<img 1.png> \"t\") and [b](https://e.org)"),
        vec!["docs/x.md#y", "img 1.png", "https://e.org"]
    );
    assert_eq!(
        resolve(Path::new("benches"), "../README.md"),
        Some(PathBuf::from("README.md"))
    );
    assert_eq!(resolve(Path::new("docs"), "../../elsewhere/x.md"), None);
    assert_eq!(
        slug("§2.1 Description and annotations"),
        "21-description-and-annotations"
    );
    assert_eq!(
        slug("Troubleshooting: every error you may meet"),
        "troubleshooting-every-error-you-may-meet"
    );
    let lines = prose_lines("```\n[x](gone.md)\n```\n`[y](gone.md)` [z](here.md)");
    let targets: Vec<String> = lines.iter().flat_map(|(_, l)| link_targets(l)).collect();
    assert_eq!(targets, vec!["here.md"]);
    assert_eq!(
        anchors("# A\n## Rate limits\n```\n# not a heading\n```\n## A\n"),
        ["a", "a-1", "rate-limits"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}

// ---------------------------------------------------------------------------------------------
// `agent.yaml` keys in the documentation.
//
// The configuration reference (docs/configuration.md) names every key the configuration types
// accept, each once, as the first cell of a table row, and nothing else; every page that names
// a dotted key in backticks (`agent.commands.allow`, `store.backend: postgres`) names one that
// exists; every `yaml` block made of configuration sections reads as a configuration. The keys
// come from `agent_mcp::config::Config` itself, so a key added, renamed or removed in the code
// fails here until the pages follow.

use agent_mcp::config::Config;
use serde_yaml_ng::Value;

/// The top-level sections of `agent.yaml`: a backticked word starting with one of these and a
/// dot is read as a key.
const SECTIONS: [&str; 9] = [
    "ollama",
    "agent",
    "http",
    "mcp",
    "store",
    "auth",
    "rate_limit",
    "audit",
    "telemetry",
];

/// Backticked names that look like keys and are not: file names and OpenTelemetry names.
const NOT_KEYS: [&str; 9] = [
    "agent.yaml",
    "agent.yaml.example",
    "audit.jsonl",
    "mcp.method.name",
    "mcp.protocol.version",
    "mcp.session.id",
    "mcp.server.operation.duration",
    "http.rs",
    "http.client",
];

/// Keys of a second shape of one key: `agent.approvals.run_command` is one policy or these
/// patterns. Each is read back by [`every_key_the_configuration_accepts`] before it counts.
const ALTERNATE_SHAPES: [(&str, &str); 1] = [(
    "agent.approvals.run_command",
    "agent:\n  approvals:\n    run_command:\n      deny: ['git push *']\n      allow: ['cargo test']\n      ask: ['cargo *']\n      default: deny\n",
)];

/// Does `err` say the probe key is unknown (the mapping is a struct with `deny_unknown_fields`),
/// rather than that its value has the wrong type (a map of the user's own keys)?
fn refuses_unknown_key(err: &serde_yaml_ng::Error, probe: &str) -> bool {
    err.to_string()
        .contains(&format!("unknown field `{probe}`"))
}

/// Dotted paths of the leaves of the default configuration: a mapping is a section when a key
/// it does not know is refused as unknown, and a leaf (a map of the user's own keys, such as
/// `agent.commands.env`) when it is not.
fn leaf_keys(root: &Value, path: &[String], out: &mut BTreeSet<String>) {
    let mut node = root;
    for part in path {
        node = &node[part.as_str()];
    }
    let Value::Mapping(map) = node else {
        out.insert(path.join("."));
        return;
    };
    const PROBE: &str = "zz_docs_probe";
    let mut probed = root.clone();
    let mut at = &mut probed;
    for part in path {
        at = &mut at[part.as_str()];
    }
    if let Value::Mapping(m) = at {
        m.insert(Value::String(PROBE.into()), Value::String("x".into()));
    }
    let is_section = path.is_empty()
        || match serde_yaml_ng::from_value::<Config>(probed) {
            Ok(_) => false,
            Err(e) => refuses_unknown_key(&e, PROBE),
        };
    if !is_section {
        out.insert(path.join("."));
        return;
    }
    for key in map.keys() {
        let Some(key) = key.as_str() else { continue };
        let mut next = path.to_vec();
        next.push(key.to_owned());
        leaf_keys(root, &next, out);
    }
}

/// The default configuration as a YAML tree.
fn default_tree() -> Value {
    serde_yaml_ng::to_value(Config::default()).expect("the default configuration serialises")
}

/// Every key `agent.yaml` accepts, leaves only, dotted.
fn every_key_the_configuration_accepts() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    leaf_keys(&default_tree(), &[], &mut keys);
    for (key, yaml) in ALTERNATE_SHAPES {
        let tree: Value = serde_yaml_ng::from_str(yaml).expect("the alternate shape is YAML");
        serde_yaml_ng::from_value::<Config>(tree.clone())
            .unwrap_or_else(|e| panic!("the second shape of {key} is not read: {e}"));
        let mut node = &tree;
        for part in key.split('.') {
            node = &node[part];
        }
        if let Value::Mapping(map) = node {
            for sub in map.keys().filter_map(Value::as_str) {
                keys.insert(format!("{key}.{sub}"));
            }
        }
    }
    keys
}

/// A dotted configuration key, when `text` (a code span's content, up to a `:` and a value) is
/// one: `store.backend: postgres` → `store.backend`.
fn key_in(text: &str) -> Option<&str> {
    let candidate = text.split(": ").next().unwrap_or(text).trim();
    let (section, rest) = candidate.split_once('.')?;
    let looks_like_a_key = SECTIONS.contains(&section)
        && !rest.is_empty()
        && rest.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        });
    let not_a_key = NOT_KEYS.contains(&candidate)
        || NOT_KEYS
            .iter()
            .any(|n| candidate.starts_with(&format!("{n}.")));
    (looks_like_a_key && !not_a_key).then_some(candidate)
}

/// The inline code spans of a Markdown text outside fenced blocks, with their line numbers.
fn code_spans(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let Some(span) = parts.next() {
            out.push((i + 1, span.to_owned()));
            // The text between this span and the next.
            parts.next();
        }
    }
    out
}

/// The fenced blocks of one language, with the line each starts on.
fn fenced_blocks(markdown: &str, language: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            match open.take() {
                Some((start, true, text)) => out.push((start, text)),
                Some(_) => {}
                None => open = Some((i + 1, info.trim() == language, String::new())),
            }
            continue;
        }
        if let Some((_, _, text)) = open.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// Is `key` a key the configuration accepts, or a section of such keys?
fn names_a_key(key: &str, accepted: &BTreeSet<String>) -> bool {
    accepted.contains(key) || accepted.iter().any(|k| k.starts_with(&format!("{key}.")))
}

/// The Markdown files of the repository.
fn markdown_files() -> Vec<PathBuf> {
    repository_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect()
}

#[test]
fn every_key_the_pages_name_exists() {
    let accepted = every_key_the_configuration_accepts();
    let mut found = Vec::new();
    let mut seen = 0;
    for path in markdown_files() {
        let Some(text) = read_text(&path) else {
            continue;
        };
        for (line, span) in code_spans(&text) {
            let Some(key) = key_in(&span) else { continue };
            seen += 1;
            if !names_a_key(key, &accepted) {
                found.push(format!(
                    "{}:{line}: `{key}` is not a key of agent.yaml (a name that is not a key: \
                     add it to NOT_KEYS in tests/docs.rs)",
                    path.display()
                ));
            }
        }
        for (line, block) in fenced_blocks(&text, "yaml") {
            let Ok(Value::Mapping(tree)) = serde_yaml_ng::from_str::<Value>(&block) else {
                continue;
            };
            let is_config = tree
                .keys()
                .all(|k| k.as_str().is_some_and(|k| SECTIONS.contains(&k)));
            if !is_config {
                continue;
            }
            seen += 1;
            if let Err(e) = serde_yaml_ng::from_str::<Config>(&block) {
                found.push(format!(
                    "{}:{line}: this yaml block is not a configuration: {e}",
                    path.display()
                ));
            }
        }
    }
    assert!(seen > 100, "only {seen} keys and blocks seen in the pages");
    assert!(
        found.is_empty(),
        "{} problem(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The rows of the configuration reference: key, default cell, line.
fn reference_rows() -> Vec<(String, String, usize)> {
    let text = read_text(Path::new("docs/configuration.md")).expect("docs/configuration.md");
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(row) = line.strip_prefix("| `") else {
            continue;
        };
        let mut cells = row.split(" | ");
        let key = cells.next().unwrap_or_default().trim_end_matches('`');
        let default = cells.next().unwrap_or_default().to_owned();
        if key_in(key) == Some(key) {
            rows.push((key.to_owned(), default, i + 1));
        }
    }
    rows
}

#[test]
fn the_configuration_reference_names_every_key_once() {
    let accepted = every_key_the_configuration_accepts();
    assert!(
        accepted.len() > 100 && accepted.contains("agent.commands.limits.cpu_time"),
        "the keys were not all found: {accepted:?}"
    );
    let rows = reference_rows();
    let mut documented = BTreeSet::new();
    let mut problems = Vec::new();
    for (key, _, line) in &rows {
        if !documented.insert(key.clone()) {
            problems.push(format!(
                "docs/configuration.md:{line}: `{key}` has a second row"
            ));
        }
        if !accepted.contains(key) {
            problems.push(format!(
                "docs/configuration.md:{line}: `{key}` is not a key of agent.yaml"
            ));
        }
    }
    for key in accepted.difference(&documented) {
        problems.push(format!(
            "docs/configuration.md: no row for `{key}`, which agent.yaml accepts"
        ));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_configuration_reference_gives_the_defaults_of_the_code() {
    let defaults = default_tree();
    let mut compared = 0;
    let mut problems = Vec::new();
    for (key, cell, line) in reference_rows() {
        // Only a default written as one literal (`10m`, `[]`, `FULL`) is compared; prose such
        // as "unset (stderr)" or "derived" says what a value worked out at run time stands for.
        let cell = cell.trim();
        let Some(literal) = cell
            .strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .filter(|c| !c.contains('`'))
        else {
            continue;
        };
        let mut node = &defaults;
        for part in key.split('.') {
            node = &node[part];
        }
        if node.is_null() {
            continue;
        }
        // The same configuration with the documented value written in: equal to the default
        // when the page is right (`7d` and `7days` are one duration).
        let mut tree = defaults.clone();
        let mut at = &mut tree;
        for part in key.split('.') {
            at = &mut at[part];
        }
        *at = serde_yaml_ng::from_str(literal).unwrap_or(Value::Null);
        compared += 1;
        let same = serde_yaml_ng::from_value::<Config>(tree).is_ok_and(|c| c == Config::default());
        if !same {
            let actual = serde_yaml_ng::to_string(node).unwrap_or_default();
            problems.push(format!(
                "docs/configuration.md:{line}: `{key}` defaults to {}, not `{literal}`",
                actual.trim()
            ));
        }
    }
    assert!(compared > 60, "only {compared} defaults compared");
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_key_reader_sees_keys_and_only_keys() {
    assert_eq!(key_in("store.backend: postgres"), Some("store.backend"));
    assert_eq!(key_in("agent.commands.allow"), Some("agent.commands.allow"));
    assert_eq!(key_in("agent.yaml"), None);
    assert_eq!(key_in("audit.jsonl.1"), None);
    assert_eq!(key_in("mcp.server.operation.duration"), None);
    assert_eq!(key_in("auth.tokens[].sha256"), None);
    assert_eq!(key_in("src/store/sqlite"), None);
    assert_eq!(
        code_spans("a `x` b `y.z`\n```\n`no`\n```\n`w`"),
        vec![(1, "x".into()), (1, "y.z".into()), (5, "w".into())]
    );
    let accepted = every_key_the_configuration_accepts();
    assert!(names_a_key("agent.commands", &accepted), "a section");
    assert!(
        names_a_key("agent.commands.env", &accepted),
        "a map of its own"
    );
    assert!(!names_a_key("agent.commands.env.PATH", &accepted));
    assert!(names_a_key("auth.oauth.scopes", &accepted));
    assert!(names_a_key(
        "agent.approvals.run_command.default",
        &accepted
    ));
    assert!(!names_a_key("agent.commands.alow", &accepted));
}
