//! The repository stands alone: no file links or points outside it, and every relative link in
//! its Markdown resolves.
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
