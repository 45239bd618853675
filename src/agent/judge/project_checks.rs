//! The workspace's own test command, found from its files when `agent.checks` is not set:
//!
//! | the workspace holds | the command |
//! |---|---|
//! | `Cargo.toml` | `cargo test` |
//! | `package.json` with a `scripts.test` (not npm's placeholder) | `npm test` |
//! | Python test files (`test_*.py`, `*_test.py`) | `python3 -m unittest` (`pytest` when the project uses it and it is on the command `PATH`) |
//! | `go.mod` | `go test ./...` |
//! | a Makefile with a `test` target | `make test` |
//!
//! Only file names and file contents decide, never the request's words. Every command found is
//! a candidate, in the order above; the checks run the first whose program the agent may run.
//! [`failures_in`] reads how many tests failed from a runner's summary line.
//!
//! ```text
//! workspace/Cargo.toml + workspace/Makefile (test:)  →  [cargo test], [make test]
//! ```

use std::path::Path;

/// Largest manifest read (`package.json`, `pyproject.toml`, a Makefile…).
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Folders deep the search for Python test files goes.
const MAX_DEPTH: usize = 4;
/// Most folder entries the search for Python test files looks at.
const MAX_ENTRIES: usize = 5000;
/// Folders that hold no project tests of their own (dependencies, builds, caches).
const SKIPPED_FOLDERS: [&str; 8] = [
    "node_modules",
    "target",
    "venv",
    "env",
    "__pycache__",
    "site-packages",
    "build",
    "dist",
];
/// npm's placeholder `scripts.test` says this and fails.
const NPM_PLACEHOLDER: &str = "no test specified";

/// The test commands `root` declares, most specific first (empty: none found). `path_var` is
/// the command `PATH`, to tell whether `pytest` is installed.
pub(crate) fn test_commands(root: &Path, path_var: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    if regular_file(&root.join("Cargo.toml")) {
        found.push(argv(&["cargo", "test"]));
    }
    if npm_test_script(root) {
        found.push(argv(&["npm", "test"]));
    }
    if let Some(python) = python_tests(root, path_var) {
        found.push(python);
    }
    if regular_file(&root.join("go.mod")) {
        found.push(argv(&["go", "test", "./..."]));
    }
    if ["Makefile", "makefile", "GNUmakefile"]
        .iter()
        .any(|name| manifest(&root.join(name)).is_some_and(|text| has_test_target(&text)))
    {
        found.push(argv(&["make", "test"]));
    }
    found
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// A regular file (not a link: a link may lead out of the workspace).
fn regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// The text of a regular file of at most [`MAX_MANIFEST_BYTES`].
fn manifest(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_MANIFEST_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// `package.json` declares a test script that is not npm's placeholder.
fn npm_test_script(root: &Path) -> bool {
    let Some(text) = manifest(&root.join("package.json")) else {
        return false;
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    json["scripts"]["test"]
        .as_str()
        .is_some_and(|script| !script.trim().is_empty() && !script.contains(NPM_PLACEHOLDER))
}

/// A Makefile rule line whose targets include `test` (`test:`, `check test: all`), not a
/// variable assignment (`test := …`).
fn has_test_target(makefile: &str) -> bool {
    makefile.lines().any(|line| {
        if line.starts_with(['\t', ' ', '#']) {
            return false;
        }
        let Some((targets, rest)) = line.split_once(':') else {
            return false;
        };
        !rest.starts_with('=') && targets.split_whitespace().any(|t| t == "test")
    })
}

/// The Python test command, when the workspace holds Python test files.
fn python_tests(root: &Path, path_var: &str) -> Option<Vec<String>> {
    let files = python_test_files(root);
    if files.is_empty() {
        return None;
    }
    if uses_pytest(root) && on_path("pytest", path_var) {
        return Some(argv(&["pytest"]));
    }
    let mut command = argv(&["python3", "-m", "unittest"]);
    // unittest discovers `test*.py` by default, from folders it can import.
    let default_pattern = files.iter().any(|f| file_name(f).starts_with("test"));
    let outside_packages: Vec<&str> = files
        .iter()
        .filter_map(|f| f.split_once('/').map(|(top, _)| top))
        .filter(|top| !regular_file(&root.join(top).join("__init__.py")))
        .collect();
    let top_level = files.iter().any(|f| !f.contains('/'));
    let start = match outside_packages.first() {
        Some(first) if !top_level && outside_packages.iter().all(|t| t == first) => Some(*first),
        _ => None,
    };
    if start.is_some() || !default_pattern {
        command.push("discover".into());
        if let Some(start) = start {
            command.extend(["-s".into(), start.to_owned()]);
        }
        if !default_pattern {
            command.extend(["-p".into(), "*_test.py".into()]);
        }
    }
    Some(command)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a file (a name, or a path with `/`) is a Python test's.
pub(crate) fn is_python_test(path: &str) -> bool {
    file_name(path)
        .strip_suffix(".py")
        .is_some_and(|stem| stem.starts_with("test_") || stem.ends_with("_test"))
}

/// The Python test files under `root` (paths with `/`), a bounded search that skips hidden,
/// dependency and build folders and does not follow links.
fn python_test_files(root: &Path) -> Vec<String> {
    project_files(root, is_python_test, usize::MAX)
}

/// The project's first `limit` Python files (the same bounded search).
pub(crate) fn python_files(root: &Path, limit: usize) -> Vec<String> {
    project_files(root, |name| name.ends_with(".py"), limit)
}

/// The first `limit` files under `root` whose names `wanted` takes, sorted (paths with `/`):
/// a bounded search that skips hidden, dependency and build folders and does not follow
/// links.
fn project_files(root: &Path, wanted: impl Fn(&str) -> bool, limit: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![(root.to_path_buf(), String::new(), 0usize)];
    let mut seen = 0usize;
    while let Some((folder, prefix, depth)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if kind.is_dir() {
                let skipped = name.starts_with('.') || SKIPPED_FOLDERS.contains(&name.as_str());
                if !skipped && depth + 1 < MAX_DEPTH {
                    folders.push((entry.path(), path, depth + 1));
                }
            } else if kind.is_file() && wanted(&name) {
                found.push(path);
                if found.len() >= limit {
                    found.sort();
                    return found;
                }
            }
        }
    }
    found.sort();
    found
}

/// The project says it runs pytest: a `pytest.ini` or `conftest.py`, or pytest named in its
/// `pyproject.toml`, `setup.cfg`, `tox.ini` or a requirements file.
fn uses_pytest(root: &Path) -> bool {
    if regular_file(&root.join("pytest.ini")) || regular_file(&root.join("conftest.py")) {
        return true;
    }
    let mut manifests = vec![
        "pyproject.toml".to_owned(),
        "setup.cfg".to_owned(),
        "tox.ini".to_owned(),
    ];
    if let Ok(entries) = std::fs::read_dir(root) {
        manifests.extend(
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("requirements") && n.ends_with(".txt")),
        );
    }
    manifests
        .iter()
        .any(|name| manifest(&root.join(name)).is_some_and(|text| text.contains("pytest")))
}

/// Whether an executable file named `program` is in one of `path_var`'s folders.
fn on_path(program: &str, path_var: &str) -> bool {
    std::env::split_paths(path_var).any(|folder| {
        let candidate = folder.join(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            return false;
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            meta.is_file() && meta.permissions().mode() & 0o111 != 0
        }
        #[cfg(not(unix))]
        {
            meta.is_file()
        }
    })
}

/// How many tests failed, read from a test runner's summary in `output`: unittest's
/// `FAILED (failures=2, errors=1)`, cargo's `test result: FAILED. 3 passed; 2 failed; …`
/// (summed over its test binaries), pytest's `2 failed, 1 error`, go's `--- FAIL:` lines.
/// `None` when no summary says.
pub(crate) fn failures_in(output: &str) -> Option<u64> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    // unittest: the last `FAILED (…)` line.
    if let Some(line) = lines.iter().rev().find(|l| l.starts_with("FAILED (")) {
        let inner = line
            .trim_start_matches("FAILED (")
            .split(')')
            .next()
            .unwrap_or_default();
        let count: u64 = inner
            .split(',')
            .filter_map(|part| part.trim().split_once('='))
            .filter(|(key, _)| matches!(*key, "failures" | "errors"))
            .filter_map(|(_, n)| n.trim().parse::<u64>().ok())
            .sum();
        return Some(count);
    }
    // cargo: one `test result:` line per test binary.
    let results: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("test result:"))
        .collect();
    if !results.is_empty() {
        return Some(results.iter().map(|l| counted(l, "failed")).sum());
    }
    // pytest: `=== 2 failed, 1 passed in 0.1s ===` or, quiet, `2 failed, 1 passed in 0.1s`.
    if let Some(line) = lines
        .iter()
        .rev()
        .find(|l| l.contains(" in ") && (l.contains(" passed") || l.contains(" failed")))
    {
        return Some(counted(line, "failed") + counted(line, "error") + counted(line, "errors"));
    }
    // go test.
    let go = lines.iter().filter(|l| l.starts_with("--- FAIL:")).count();
    (go > 0).then_some(go as u64)
}

/// The number before `word` in `line` (`2 failed` → 2), summed where it occurs more than once.
fn counted(line: &str, word: &str) -> u64 {
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '='))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|pair| pair[1] == word)
        .filter_map(|pair| pair[0].parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace holding `files` (`(path, content)`).
    fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        dir
    }

    /// The files of a workspace, `(path, content)`.
    type Files<'a> = &'a [(&'a str, &'a str)];

    fn found(files: Files) -> Vec<String> {
        let ws = workspace(files);
        test_commands(ws.path(), "")
            .iter()
            .map(|c| c.join(" "))
            .collect()
    }

    #[test]
    fn each_kind_of_project_has_its_test_command() {
        let cases: &[(Files, &[&str])] = &[
            (&[("Cargo.toml", "[package]\n")], &["cargo test"]),
            (
                &[("package.json", r#"{"scripts": {"test": "jest"}}"#)],
                &["npm test"],
            ),
            (
                &[(
                    "package.json",
                    r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#,
                )],
                &[],
            ),
            (&[("package.json", "{not json")], &[]),
            (&[("go.mod", "module x\n")], &["go test ./..."]),
            (
                &[("Makefile", "all:\n\tcc x.c\n\ntest: all\n\t./x\n")],
                &["make test"],
            ),
            (&[("Makefile", "test := yes\nall:\n\techo\n")], &[]),
            (
                &[("calc.py", ""), ("test_calc.py", "")],
                &["python3 -m unittest"],
            ),
            (
                &[("calc.py", ""), ("calc_test.py", "")],
                &["python3 -m unittest discover -p *_test.py"],
            ),
            (
                &[("pkg/__init__.py", ""), ("pkg/test_a.py", "")],
                &["python3 -m unittest"],
            ),
            (
                &[("calc.py", ""), ("tests/test_calc.py", "")],
                &["python3 -m unittest discover -s tests"],
            ),
            (&[("notes.md", "run the tests"), ("calc.py", "")], &[]),
            (&[(".venv/lib/test_x.py", "")], &[]),
            (
                &[
                    ("Cargo.toml", ""),
                    ("Makefile", "test:\n\tcargo test\n"),
                    ("go.mod", ""),
                ],
                &["cargo test", "go test ./...", "make test"],
            ),
        ];
        for (files, expected) in cases {
            assert_eq!(found(files), *expected, "{files:?}");
        }
    }

    /// pytest only where the project uses it and it is installed on the command `PATH`.
    #[test]
    fn pytest_when_the_project_uses_it_and_it_is_installed() {
        let ws = workspace(&[
            ("test_calc.py", ""),
            ("requirements-dev.txt", "pytest==8.0\n"),
        ]);
        let bin = tempfile::tempdir().unwrap();
        let path_var = bin.path().to_string_lossy().into_owned();
        assert_eq!(
            test_commands(ws.path(), &path_var),
            [["python3", "-m", "unittest"]]
        );
        let pytest = bin.path().join("pytest");
        std::fs::write(&pytest, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&pytest, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert_eq!(test_commands(ws.path(), &path_var), [["pytest"]]);
        let plain = workspace(&[("test_calc.py", "")]);
        assert_eq!(
            test_commands(plain.path(), &path_var),
            [["python3", "-m", "unittest"]]
        );
    }

    #[test]
    fn runner_summaries_give_the_failure_count() {
        let cases = [
            ("....\n---\nRan 4 tests in 0.001s\n\nOK\n", None),
            (
                "Ran 4 tests in 0.001s\n\nFAILED (failures=2, errors=1)\n",
                Some(3),
            ),
            ("Ran 1 test\n\nFAILED (errors=1, skipped=2)\n", Some(1)),
            (
                "test result: ok. 3 passed; 0 failed; 0 ignored\n\
                 test result: FAILED. 1 passed; 2 failed; 0 ignored\n",
                Some(2),
            ),
            (
                "===== 2 failed, 5 passed, 1 error in 0.12s =====\n",
                Some(3),
            ),
            ("1 failed, 1 passed in 0.03s\n", Some(1)),
            (
                "--- FAIL: TestA (0.00s)\n--- FAIL: TestB (0.00s)\nFAIL\n",
                Some(2),
            ),
            ("error: could not compile `x`\n", None),
            ("", None),
        ];
        for (output, count) in cases {
            assert_eq!(failures_in(output), count, "{output}");
        }
    }

    #[test]
    fn any_text_is_read_without_a_panic() {
        for text in [
            "FAILED (",
            "FAILED (failures=é)",
            "test result: é failed",
            "é in passed",
        ] {
            let _ = failures_in(text);
            let _ = has_test_target(text);
        }
    }
}
