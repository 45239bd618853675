//! The reading tools: `list_dir`, `read_file`, `search_text`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use serde::Deserialize;

use super::ToolError;
use super::workspace::{Workspace, io_error};

/// Most entries `list_dir` shows.
const MAX_ENTRIES: usize = 1000;
/// Most files `search_text` opens in one call.
const MAX_FILES_SCANNED: usize = 20_000;
/// Longest matching line shown by `search_text`.
const MAX_MATCH_CHARS: usize = 300;
/// Most matches `search_text` returns, whatever the model asks.
const MAX_RESULTS: usize = 500;
/// Folders `search_text` does not descend into: VCS data and build output.
const SKIPPED_DIRS: [&str; 3] = [".git", "target", "node_modules"];

pub(super) const LIST_DIR_EXPECTED: &str = "{\"path\": string (optional)}";
pub(super) const READ_FILE_EXPECTED: &str =
    "{\"path\": string, \"start_line\": integer (optional), \"max_lines\": integer (optional)}";
pub(super) const SEARCH_EXPECTED: &str =
    "{\"pattern\": string, \"path\": string (optional), \"max_results\": integer (optional)}";

#[derive(Debug, Deserialize)]
pub(super) struct ListDirArgs {
    #[serde(default)]
    path: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct ReadFileArgs {
    path: String,
    #[serde(default)]
    start_line: Option<u64>,
    #[serde(default)]
    max_lines: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(super) struct SearchArgs {
    pattern: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    max_results: Option<usize>,
}

pub(super) fn list_dir(ws: &Workspace, args: &ListDirArgs) -> Result<String, ToolError> {
    let dir = ws.existing(&args.path)?;
    let shown = ws.display(&dir);
    if !dir.is_dir() {
        return Err(ToolError::Refused(format!(
            "'{shown}' is a file, not a folder; use read_file"
        )));
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    let reader = std::fs::read_dir(&dir).map_err(|e| io_error(&shown, &e))?;
    for entry in reader {
        let entry = entry.map_err(|e| io_error(&shown, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().map_err(|e| io_error(&shown, &e))?;
        let line = if kind.is_symlink() {
            format!("{name}@ (symbolic link)")
        } else if kind.is_dir() {
            format!("{name}/")
        } else {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            format!("{name} ({size} bytes)")
        };
        entries.push((name, line));
    }
    entries.sort();
    let total = entries.len();
    let mut out = format!("{shown}: {total} entries\n");
    for (_, line) in entries.iter().take(MAX_ENTRIES) {
        out.push_str(line);
        out.push('\n');
    }
    if total > MAX_ENTRIES {
        let _ = writeln!(out, "[{} more entries not shown]", total - MAX_ENTRIES);
    }
    Ok(out)
}

pub(super) fn read_file(
    ws: &Workspace,
    args: &ReadFileArgs,
    max_bytes: usize,
) -> Result<String, ToolError> {
    let path = ws.existing(&args.path)?;
    let shown = ws.display(&path);
    if path.is_dir() {
        return Err(ToolError::Refused(format!(
            "'{shown}' is a folder; use list_dir"
        )));
    }
    let file = ws.open_read(&path)?;
    let start = args.start_line.unwrap_or(1).max(1);
    let max_lines = args.max_lines.unwrap_or(u64::MAX).max(1);
    let mut reader = BufReader::new(file);
    let mut out: Vec<u8> = Vec::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut taken = 0u64;
    let mut stopped_at = None;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(max_bytes as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error(&shown, &e))?;
        if n == 0 {
            break;
        }
        if line.contains(&0) {
            return Err(ToolError::Refused(format!(
                "'{shown}' looks like a binary file; it is not shown"
            )));
        }
        number += 1;
        if number < start {
            continue;
        }
        if taken == max_lines {
            stopped_at = Some(number);
            break;
        }
        if out.len() + line.len() > max_bytes {
            let room = max_bytes - out.len();
            out.extend_from_slice(&line[..room]);
            stopped_at = Some(number);
            break;
        }
        out.extend_from_slice(&line);
        taken += 1;
    }
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if number < start && start > 1 {
        return Ok(format!(
            "'{shown}' has {number} lines; start_line {start} is past its end"
        ));
    }
    if let Some(at) = stopped_at {
        let _ = write!(
            text,
            "\n[stopped at line {at}: more follows; call read_file with start_line={at} to continue]"
        );
    }
    Ok(text)
}

pub(super) fn search_text(
    ws: &Workspace,
    args: &SearchArgs,
    max_file_bytes: usize,
) -> Result<String, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::Refused("pattern must not be empty".into()));
    }
    let start = ws.existing(&args.path)?;
    let limit = args.max_results.unwrap_or(100).clamp(1, MAX_RESULTS);
    let mut matches = Vec::new();
    let mut scanned = 0usize;
    let mut stack: Vec<PathBuf> = vec![start];
    let mut truncated = false;
    'walk: while let Some(path) = stack.pop() {
        // Never follow links while walking: a link out would escape the workspace.
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            let Ok(reader) = std::fs::read_dir(&path) else {
                continue;
            };
            let mut children: Vec<PathBuf> = reader
                .filter_map(Result::ok)
                .filter(|e| !SKIPPED_DIRS.iter().any(|s| e.file_name() == *s))
                .map(|e| e.path())
                .collect();
            children.sort();
            stack.extend(children.into_iter().rev());
            continue;
        }
        if !meta.is_file() || meta.len() > max_file_bytes as u64 {
            continue;
        }
        scanned += 1;
        if scanned > MAX_FILES_SCANNED {
            truncated = true;
            break;
        }
        let Ok(file) = ws.open_read(&path) else {
            continue;
        };
        let Some(text) = read_text(file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if line.contains(&args.pattern) {
                if matches.len() == limit {
                    truncated = true;
                    break 'walk;
                }
                matches.push(format!(
                    "{}:{}: {}",
                    ws.display(&path),
                    i + 1,
                    shorten(line.trim_end())
                ));
            }
        }
    }
    if matches.is_empty() {
        return Ok(format!("no matches for '{}'", args.pattern));
    }
    let mut out = matches.join("\n");
    if truncated {
        let _ = write!(
            out,
            "\n[stopped after {} matches; narrow the path or pattern]",
            matches.len()
        );
    }
    Ok(out)
}

/// The file as text, or `None` for a binary file.
fn read_text(mut file: std::fs::File) -> Option<String> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn shorten(line: &str) -> String {
    if line.chars().count() <= MAX_MATCH_CHARS {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(MAX_MATCH_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "one\ntwo needle\nthree\n").unwrap();
        std::fs::write(dir.path().join("b.txt"), "needle at top\n").unwrap();
        std::fs::write(dir.path().join(".git/x"), "needle in git\n").unwrap();
        std::fs::write(dir.path().join("bin"), b"\0\x01needle").unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    fn read(
        ws: &Workspace,
        path: &str,
        start: Option<u64>,
        max: Option<u64>,
        cap: usize,
    ) -> String {
        let args = ReadFileArgs {
            path: path.into(),
            start_line: start,
            max_lines: max,
        };
        match read_file(ws, &args, cap) {
            Ok(t) => t,
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn lists_a_folder() {
        let (_d, ws) = ws();
        let out = list_dir(
            &ws,
            &ListDirArgs {
                path: String::new(),
            },
        )
        .unwrap();
        assert_eq!(
            out,
            ".: 4 entries\n.git/\nb.txt (14 bytes)\nbin (8 bytes)\nsrc/\n"
        );
    }

    #[test]
    fn reads_whole_files_and_windows() {
        let (_d, ws) = ws();
        assert_eq!(
            read(&ws, "src/a.rs", None, None, 1000),
            "one\ntwo needle\nthree\n"
        );
        assert_eq!(
            read(&ws, "src/a.rs", Some(2), Some(1), 1000),
            "two needle\n\n[stopped at line 3: more follows; call read_file with start_line=3 to continue]"
        );
        assert!(read(&ws, "src/a.rs", None, None, 5).starts_with("one\nt\n[stopped at line 2"));
        assert!(read(&ws, "bin", None, None, 1000).contains("binary"));
        assert!(read(&ws, "src", None, None, 1000).contains("folder"));
        assert!(read(&ws, "src/a.rs", Some(10), None, 1000).contains("past its end"));
    }

    #[test]
    fn searches_text_files_only_outside_git() {
        let (_d, ws) = ws();
        let args = SearchArgs {
            pattern: "needle".into(),
            path: String::new(),
            max_results: None,
        };
        assert_eq!(
            search_text(&ws, &args, 1000).unwrap(),
            "b.txt:1: needle at top\nsrc/a.rs:2: two needle"
        );
        let one = SearchArgs {
            max_results: Some(1),
            ..args
        };
        assert!(
            search_text(&ws, &one, 1000)
                .unwrap()
                .contains("[stopped after 1 matches")
        );
    }
}
