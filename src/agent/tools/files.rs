//! The reading tools: `list_dir`, `read_file`, `search_text`, and their handlers.
//!
//! They report what is there and nothing else: a missing file is an error that shows its
//! folder and names the one file it most likely meant ([`LookAlike`]), a search matches
//! exactly as asked. Reading another file instead, or searching again in another case, is a
//! choice of the steering policy (`agent::steering`), not of the tools.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};

use serde::Deserialize;

use super::spec::BlockingTool;
use super::workspace::{PathError, Workspace, io_error};
use super::{CallError, LookAlike, LookAlikeKind, ToolContext, ToolError, ToolOutput};

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
pub(super) const SEARCH_EXPECTED: &str = "{\"pattern\": string, \"path\": string (optional), \
     \"max_results\": integer (optional), \"ignore_case\": boolean (optional)}";

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
    #[serde(default)]
    ignore_case: bool,
}

/// `list_dir`.
pub(super) struct ListDir;
/// `read_file`: a read makes the file the task's to replace or edit ([`super::Ledger`]).
pub(super) struct ReadFile;
/// `search_text`.
pub(super) struct SearchText;

impl BlockingTool for ListDir {
    type Args = ListDirArgs;
    fn work(ctx: &ToolContext, args: ListDirArgs) -> Result<ToolOutput, CallError> {
        Ok(ToolOutput::text(list_dir(&ctx.workspace, &args)?))
    }
}

impl BlockingTool for ReadFile {
    type Args = ReadFileArgs;
    fn work(ctx: &ToolContext, args: ReadFileArgs) -> Result<ToolOutput, CallError> {
        let (text, path) = read_file(&ctx.workspace, &args, ctx.settings.max_read_bytes)?;
        ctx.ledger.saw(&path);
        Ok(ToolOutput::text(text))
    }
}

impl BlockingTool for SearchText {
    type Args = SearchArgs;
    fn work(ctx: &ToolContext, args: SearchArgs) -> Result<ToolOutput, CallError> {
        Ok(search_text(
            &ctx.workspace,
            &args,
            ctx.settings.max_read_bytes,
        )?)
    }
}

pub(super) fn list_dir(ws: &Workspace, args: &ListDirArgs) -> Result<String, ToolError> {
    let dir = ws.existing(&args.path)?;
    let shown = ws.display(&dir);
    if !dir.is_dir() {
        return Err(not_a_folder(&shown));
    }
    // Read through the folder held open beneath the root, never by path again: a folder
    // swapped for a link after the check cannot redirect the listing.
    let held = ws.open_dir(&dir).map_err(|e| match e {
        PathError::Invalid(_) => not_a_folder(&shown),
        e => e.into(),
    })?;
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut reader = rustix::fs::Dir::read_from(&held).map_err(|e| io_error(&shown, &e.into()))?;
    while let Some(entry) = reader.read() {
        let entry = entry.map_err(|e| io_error(&shown, &e.into()))?;
        let raw = entry.file_name();
        if raw == c"." || raw == c".." {
            continue;
        }
        let name = raw.to_string_lossy().into_owned();
        let st = rustix::fs::statat(&held, raw, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
        let kind = st
            .as_ref()
            .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode))
            .unwrap_or_else(|_| entry.file_type());
        let line = match kind {
            rustix::fs::FileType::Symlink => format!("{name}@ (symbolic link)"),
            rustix::fs::FileType::Directory => format!("{name}/"),
            rustix::fs::FileType::Fifo => format!("{name}| (FIFO)"),
            rustix::fs::FileType::Socket => format!("{name}= (socket)"),
            rustix::fs::FileType::CharacterDevice | rustix::fs::FileType::BlockDevice => {
                format!("{name} (device)")
            }
            _ => {
                let size = st.map(|st| st.st_size).unwrap_or(0);
                format!("{name} ({size} bytes)")
            }
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

/// Most entries of the folder shown when `read_file` names a file that does not exist.
const NOT_FOUND_ENTRIES: usize = 30;

/// `read_file` of a missing file: says so, names the one file it most likely meant, and shows
/// what the folder it names holds (a model that guessed the name can pick the right one at
/// once, without a `list_dir` round).
fn not_found(
    ws: &Workspace,
    asked: &str,
    missing: &str,
    (folder, listing): (String, Result<String, ToolError>),
) -> ToolError {
    // `.\\notes.txt`: a model trained on Windows paths; the same path with `/` is likely meant.
    let slashed = asked.replace('\\', "/");
    if slashed != asked && ws.existing(&slashed).is_ok_and(|p| p.is_file()) {
        return ToolError::NotFound {
            message: format!(
                "'{missing}' does not exist; did you mean '{slashed}'? Folders are separated \
                 by /"
            ),
            look_alike: Some(LookAlike {
                path: slashed,
                why: LookAlikeKind::Backslashes,
            }),
        };
    }
    let Ok(listing) = listing else {
        return ToolError::NotFound {
            message: format!(
                "'{missing}' does not exist; use list_dir to see what the workspace holds"
            ),
            look_alike: None,
        };
    };
    let mut lines = listing.lines();
    let head = lines.next().unwrap_or_default();
    let mut text = format!("'{missing}' does not exist.");
    let look_alike = likely_meant(asked, listing.lines().skip(1)).map(|name| inside(&folder, name));
    if let Some(path) = &look_alike {
        let _ = write!(
            text,
            " Did you mean '{path}'? Call read_file with that path."
        );
    }
    let _ = write!(text, " The folder {head}:");
    for line in lines.by_ref().take(NOT_FOUND_ENTRIES) {
        text.push('\n');
        text.push_str(line);
    }
    if lines.next().is_some() {
        text.push_str("\n[more: use list_dir]");
    }
    ToolError::NotFound {
        message: text,
        look_alike: look_alike.map(|path| LookAlike {
            path,
            why: LookAlikeKind::SimilarName,
        }),
    }
}

/// The one file in its folder that a missing `asked` most likely means, as a workspace path
/// (what `read_file` of it would name), or `None`.
pub(crate) fn look_alike_of(ws: &Workspace, asked: &str) -> Option<String> {
    let (folder, listing) = folder_of(ws, asked);
    let listing = listing.ok()?;
    likely_meant(asked, listing.lines().skip(1)).map(|name| inside(&folder, name))
}

/// The folder a missing file's path names (`.` for none) and that folder's listing.
fn folder_of(ws: &Workspace, asked: &str) -> (String, Result<String, ToolError>) {
    let folder = std::path::Path::new(asked)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".to_owned());
    let listing = list_dir(
        ws,
        &ListDirArgs {
            path: folder.clone(),
        },
    );
    (folder, listing)
}

/// `name` in `folder`, as a workspace path.
fn inside(folder: &str, name: &str) -> String {
    match folder {
        "." => name.to_owned(),
        folder => format!("{folder}/{name}"),
    }
}

/// The file of a listing (`name (N bytes)` lines) the missing `asked` name most likely meant:
/// the only one whose stem contains the asked stem (or the other way round, the shorter of at
/// least 3 characters), else the only one with the same extension; `None` when none or several
/// fit.
fn likely_meant<'a>(asked: &str, entries: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let asked = std::path::Path::new(asked.rsplit(['/', '\\']).next().unwrap_or(asked));
    let lower = |s: Option<&std::ffi::OsStr>| s.map(|s| s.to_string_lossy().to_lowercase());
    let (stem, ext) = (lower(asked.file_stem()), lower(asked.extension()));
    let files: Vec<&str> = entries
        .filter_map(|line| Some(line.strip_suffix(" bytes)")?.rsplit_once(" (")?.0))
        .collect();
    let only = |fits: &dyn Fn(&std::path::Path) -> bool| {
        let mut found = files.iter().filter(|name| fits(std::path::Path::new(name)));
        let first = found.next()?;
        found.next().is_none().then_some(*first)
    };
    // The shorter stem inside the longer, and at least 3 characters: `a.txt` is not what
    // `password.txt` meant.
    let by_stem = only(&|path| match (&stem, lower(path.file_stem())) {
        (Some(a), Some(b)) => {
            let (short, long) = if a.len() <= b.len() { (a, &b) } else { (&b, a) };
            short.chars().count() >= 3 && long.contains(short.as_str())
        }
        _ => false,
    });
    by_stem.or_else(|| only(&|path| ext.is_some() && lower(path.extension()) == ext))
}

fn not_a_folder(shown: &str) -> ToolError {
    ToolError::Refused(format!("'{shown}' is a file, not a folder; use read_file"))
}

/// `read_file`: the text, and the file's resolved path.
pub(super) fn read_file(
    ws: &Workspace,
    args: &ReadFileArgs,
    max_bytes: usize,
) -> Result<(String, std::path::PathBuf), ToolError> {
    let path = match ws.existing(&args.path) {
        Ok(path) => path,
        Err(PathError::NotFound(missing)) => {
            return Err(not_found(
                ws,
                &args.path,
                &missing,
                folder_of(ws, &args.path),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let text = read_resolved(ws, &path, args, max_bytes)?;
    Ok((text, path))
}

/// `read_file` of a resolved, existing path.
fn read_resolved(
    ws: &Workspace,
    path: &std::path::Path,
    args: &ReadFileArgs,
    max_bytes: usize,
) -> Result<String, ToolError> {
    let shown = ws.display(path);
    if path.is_dir() {
        return Err(ToolError::Refused(format!(
            "'{shown}' is a folder; use list_dir"
        )));
    }
    let file = ws.open_read(path)?;
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
            "'{shown}' has {number} lines; start_line {start} is past its end: call read_file \
             without start_line to read it from the top"
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
) -> Result<ToolOutput, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::Refused("pattern must not be empty".into()));
    }
    let start = ws.existing(&args.path)?;
    let limit = args.max_results.unwrap_or(100).clamp(1, MAX_RESULTS);
    let folded = args.ignore_case.then(|| args.pattern.to_lowercase());
    let mut search = Search {
        ws,
        pattern: &args.pattern,
        folded: folded.as_deref(),
        limit,
        max_file_bytes,
        hits: Vec::new(),
        scanned: 0,
        truncated: false,
    };
    if start.is_dir() {
        // Walk through held folders: each entry is opened relative to its folder with
        // O_NOFOLLOW, so no link is followed and no swap redirects the walk.
        let held = ws.open_dir(&start)?;
        search.walk(held, ws.display(&start));
    } else {
        let file = ws.open_read(&start)?;
        search.scan(file, &ws.display(&start));
    }
    let (matches, truncated) = (search.hits, search.truncated);
    if matches.is_empty() {
        return Ok(ToolOutput {
            text: format!("no matches for '{}'", args.pattern),
            matches: Some(0),
        });
    }
    let mut out = show_hits(&matches);
    if truncated {
        let _ = write!(
            out,
            "\n[stopped after {} matches; narrow the path or pattern]",
            matches.len()
        );
    }
    Ok(ToolOutput {
        text: out,
        matches: Some(matches.len()),
    })
}

/// Deepest folder `search_text` descends into.
const MAX_DEPTH: usize = 64;

struct Search<'a> {
    ws: &'a Workspace,
    pattern: &'a str,
    /// The pattern in lowercase, when matching ignores case.
    folded: Option<&'a str>,
    limit: usize,
    max_file_bytes: usize,
    hits: Vec<Hit>,
    scanned: usize,
    truncated: bool,
}

impl Search<'_> {
    /// Depth first, in name order; stops at the result limit or [`MAX_FILES_SCANNED`].
    fn walk(&mut self, root: std::os::fd::OwnedFd, root_shown: String) {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags};
        // (the folder, its entries left to visit in reverse order, its display path)
        let names = entry_names(&root);
        let mut stack = vec![(root, names, root_shown)];
        loop {
            let depth = stack.len();
            let Some((dir, names, shown)) = stack.last_mut() else {
                break;
            };
            let Some(name) = names.pop() else {
                stack.pop();
                continue;
            };
            let child_shown = if shown == "." {
                name.to_string_lossy().into_owned()
            } else {
                format!("{shown}/{}", name.to_string_lossy())
            };
            let Ok(st) = rustix::fs::statat(&*dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    if SKIPPED_DIRS.iter().any(|s| name == *s) || depth >= MAX_DEPTH {
                        continue;
                    }
                    let Ok(child) = rustix::fs::openat(
                        &*dir,
                        &name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) else {
                        continue;
                    };
                    let names = entry_names(&child);
                    stack.push((child, names, child_shown));
                }
                // Never links (a link out would escape), never FIFOs, devices or sockets.
                FileType::RegularFile => {
                    if u64::try_from(st.st_size).unwrap_or(u64::MAX) > self.max_file_bytes as u64 {
                        continue;
                    }
                    self.scanned += 1;
                    if self.scanned > MAX_FILES_SCANNED {
                        self.truncated = true;
                        return;
                    }
                    let Ok(file) = self.ws.open_read_at(&*dir, &name, &child_shown) else {
                        continue;
                    };
                    if !self.scan(file, &child_shown) {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Adds the matches of one file; `false` once the result limit is reached.
    fn scan(&mut self, file: std::fs::File, shown: &str) -> bool {
        let Some(text) = read_text(file, self.max_file_bytes) else {
            return true;
        };
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let found = match self.folded {
                None => line.contains(self.pattern),
                Some(folded) => line.to_lowercase().contains(folded),
            };
            if found {
                if self.hits.len() == self.limit {
                    self.truncated = true;
                    return false;
                }
                let first = i.saturating_sub(CONTEXT_LINES);
                let last = (i + CONTEXT_LINES).min(lines.len() - 1);
                self.hits.push(Hit {
                    file: shown.to_owned(),
                    line: i + 1,
                    first: first + 1,
                    lines: lines[first..=last]
                        .iter()
                        .map(|l| shorten(l.trim_end()))
                        .collect(),
                });
            }
        }
        true
    }
}

/// Lines shown before and after each match when there are at most [`CONTEXT_WHEN_AT_MOST`].
const CONTEXT_LINES: usize = 2;
/// Matches up to which each is shown with its surrounding lines: the enclosing function or
/// heading is what a model asks about next, and a handful of them costs little. More matches
/// are shown one line each.
const CONTEXT_WHEN_AT_MOST: usize = 5;

/// One matching line of a file, with the lines around it (numbered from `first`).
struct Hit {
    file: String,
    line: usize,
    first: usize,
    lines: Vec<String>,
}

/// `file:N: text` per match. With at most [`CONTEXT_WHEN_AT_MOST`] matches, each also has
/// [`CONTEXT_LINES`] lines around it, as grep shows them: `file-N- text` for a line of context,
/// overlapping ranges of a file merged, `--` between ranges that do not touch.
fn show_hits(hits: &[Hit]) -> String {
    if hits.len() > CONTEXT_WHEN_AT_MOST {
        return hits
            .iter()
            .map(|h| format!("{}:{}: {}", h.file, h.line, h.lines[h.line - h.first]))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let matched: std::collections::HashSet<(&str, usize)> =
        hits.iter().map(|h| (h.file.as_str(), h.line)).collect();
    let mut out: Vec<String> = Vec::new();
    // The last line shown: (file, number).
    let mut shown: Option<(&str, usize)> = None;
    for hit in hits {
        for (offset, text) in hit.lines.iter().enumerate() {
            let n = hit.first + offset;
            match shown {
                Some((file, last)) if file == hit.file && n <= last => continue,
                Some((file, last)) if file != hit.file || n > last + 1 => out.push("--".into()),
                _ => {}
            }
            let mark = if matched.contains(&(hit.file.as_str(), n)) {
                ':'
            } else {
                '-'
            };
            out.push(format!("{}{mark}{n}{mark} {text}", hit.file));
            shown = Some((hit.file.as_str(), n));
        }
    }
    out.join("\n")
}

/// The entry names of a held folder, sorted and reversed for popping.
fn entry_names(dir: &std::os::fd::OwnedFd) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let mut names = Vec::new();
    if let Ok(mut reader) = rustix::fs::Dir::read_from(dir) {
        while let Some(Ok(entry)) = reader.read() {
            let raw = entry.file_name();
            if raw != c"." && raw != c".." {
                names.push(std::ffi::OsStr::from_bytes(raw.to_bytes()).to_owned());
            }
        }
    }
    names.sort();
    names.reverse();
    names
}

/// The file as text, or `None` for a binary file.
fn read_text(file: std::fs::File, max_bytes: usize) -> Option<String> {
    let mut bytes = Vec::new();
    file.take(max_bytes as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() > max_bytes {
        return None;
    }
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
            Ok((t, _)) => t,
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
            ignore_case: false,
        };
        // Two matches: each with the lines around it, as grep -C2 shows them.
        assert_eq!(
            search_text(&ws, &args, 1000).unwrap().text,
            "b.txt:1: needle at top\n--\nsrc/a.rs-1- one\nsrc/a.rs:2: two needle\nsrc/a.rs-3- three"
        );
        let one = SearchArgs {
            max_results: Some(1),
            ..args
        };
        assert!(
            search_text(&ws, &one, 1000)
                .unwrap()
                .text
                .contains("[stopped after 1 matches")
        );
    }

    #[test]
    fn the_likely_meant_file_is_the_one_look_alike_by_stem_else_by_extension() {
        let listing = [
            "a.txt (1 bytes)",
            "notes-2024.txt (9 bytes)",
            "data.csv (4 bytes)",
            "docs/ (folder)",
        ];
        let meant = |asked: &str| likely_meant(asked, listing.iter().copied());
        assert_eq!(meant("notes.txt"), Some("notes-2024.txt"));
        assert_eq!(meant(".\\NOTES.md"), Some("notes-2024.txt"));
        assert_eq!(meant("table.csv"), Some("data.csv"), "the only .csv");
        // `a` is inside `password`, but a one-letter stem says nothing; two .txt files.
        assert_eq!(meant("password.txt"), None);
        assert_eq!(meant("readme"), None);
    }

    #[test]
    fn a_few_matches_come_with_their_surroundings_many_come_one_line_each() {
        let (dir, ws) = ws();
        let search = |pattern: &str| {
            let args = SearchArgs {
                pattern: pattern.into(),
                path: "src".into(),
                max_results: None,
                ignore_case: false,
            };
            search_text(&ws, &args, 1000).unwrap().text
        };
        let lines: Vec<String> = (1..=12).map(|n| format!("line {n}")).collect();
        let mut text = lines.join("\n");
        text = text
            .replace("line 3", "line 3 TODO")
            .replace("line 5", "line 5 TODO");
        text = text.replace("line 11", "line 11 TODO");
        std::fs::write(dir.path().join("src/a.rs"), &text).unwrap();
        // Overlapping ranges merge; a gap is marked; the file's ends are not passed.
        assert_eq!(
            search("TODO"),
            "src/a.rs-1- line 1\nsrc/a.rs-2- line 2\nsrc/a.rs:3: line 3 TODO\n\
             src/a.rs-4- line 4\nsrc/a.rs:5: line 5 TODO\nsrc/a.rs-6- line 6\n\
             src/a.rs-7- line 7\n--\nsrc/a.rs-9- line 9\nsrc/a.rs-10- line 10\n\
             src/a.rs:11: line 11 TODO\nsrc/a.rs-12- line 12"
        );
        // Past five matches, one line each.
        let one_each: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(i, l)| format!("src/a.rs:{}: {l}", i + 1))
            .collect();
        assert_eq!(search("line"), one_each.join("\n"));
    }

    #[test]
    fn a_search_matches_exactly_unless_asked_to_ignore_case() {
        let (dir, ws) = ws();
        std::fs::write(dir.path().join("b.txt"), "Secret word: tangerine\n").unwrap();
        let search = |pattern: &str, ignore_case| {
            let args = SearchArgs {
                pattern: pattern.into(),
                path: String::new(),
                max_results: None,
                ignore_case,
            };
            search_text(&ws, &args, 1000).unwrap()
        };
        assert_eq!(
            search("secret", false),
            ToolOutput {
                text: "no matches for 'secret'".into(),
                matches: Some(0)
            }
        );
        assert_eq!(
            search("secret", true),
            ToolOutput {
                text: "b.txt:1: Secret word: tangerine".into(),
                matches: Some(1)
            }
        );
        assert_eq!(search("Secret", false).matches, Some(1));
    }

    #[test]
    fn a_missing_file_names_its_look_alike_and_shows_its_folder() {
        let (dir, ws) = ws();
        std::fs::write(dir.path().join("notes-2024.txt"), "juniper\n").unwrap();
        let missing = |path: &str| {
            let args = ReadFileArgs {
                path: path.into(),
                start_line: None,
                max_lines: None,
            };
            match read_file(&ws, &args, 1000) {
                Err(ToolError::NotFound {
                    message,
                    look_alike,
                }) => (message, look_alike),
                other => panic!("{other:?}"),
            }
        };
        let (message, look_alike) = missing("notes.txt");
        assert!(
            message.starts_with(
                "'notes.txt' does not exist. Did you mean 'notes-2024.txt'? Call read_file with \
                 that path. The folder .: 5 entries:\n.git/\nb.txt (14 bytes)"
            ),
            "{message}"
        );
        assert_eq!(
            look_alike,
            Some(LookAlike {
                path: "notes-2024.txt".into(),
                why: LookAlikeKind::SimilarName
            })
        );
        let (message, look_alike) = missing("src\\a.rs");
        assert_eq!(
            message,
            "'src\\a.rs' does not exist; did you mean 'src/a.rs'? Folders are separated by /"
        );
        assert_eq!(look_alike.map(|l| l.why), Some(LookAlikeKind::Backslashes));
        assert_eq!(missing("nowhere/x.txt").1, None);
    }
}
