//! What a request says the workspace will hold once it is done, checked against the workspace:
//! "rename `fetch_data` to `load_data`" means no `fetch_data` is left and `load_data` is there;
//! "bump the version from 1.4.2 to 1.5.0 in VERSION and package.json" means neither file still
//! says 1.4.2 and both say 1.5.0; "remove the line DEBUG=true from settings.env" means it is
//! gone.
//!
//! Only what a request states plainly is read (the patterns below, with the old and new text
//! quoted or one word each); anything else expects nothing, so a request this cannot read is
//! judged by the checks and by whether anything changed. The words compared are whole words:
//! `Cart` is not found in `ShoppingCart`.
//!
//! | the request says | expected |
//! |---|---|
//! | rename X to Y | X nowhere, Y somewhere; each file named keeps a line of its own |
//! | replace X with Y; change X to Y; from X to Y; X から Y に | X gone, Y there |
//! | remove / delete X (elimina, supprime, entferne, remova, rimuovi, удали …; X を削除) | X gone |
//! | fix … X to Y, X para Y, X → Y (in any language; X and Y spelled alike) | X gone, Y there |
//! | add / with / containing (the line) X; add a line to F: X | X there |
//! | add / append / insert … line(s) … to F; F に「X」という行を追加 | F's lines kept (and first, unless a place is named) |
//! | delete / elimina … the line …; 删除 … 这一行; …の行を削除 | F's lines kept but one |
//! | set … to Y | Y there |
//!
//! "There" and "gone" are in the files the request names, or, when it names none, in the
//! workspace's text files.

use std::ops::ControlFlow;
use std::path::Path;

use crate::agent::judge::lexicon::{ENGLISH, Spaced};
use crate::agent::tools::Workspace;

/// What the workspace must show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// This text, as a word, is in none of the files.
    Gone(String),
    /// This text, as a word, is in every file named (or some text file, if none is named).
    There(String),
    /// This line, which the file had when the task began, is still one of its lines: a
    /// request that adds a line removes none.
    Kept(String),
    /// The file no longer holds this text, which it held when the task began: "fix stats.py"
    /// changes stats.py (a model that edits the test instead has not done it).
    Changed(String),
    /// These top-level keys of a JSON object are still there: "add the key debug to
    /// settings.json" keeps the others.
    KeysKept(Vec<String>),
    /// The file (its text when the task began, of two lines or more) keeps at least one of its
    /// lines, the names the request changes aside: "rename X to Y in app.py" changes names in
    /// app.py, it does not replace it with other content.
    Resembles(String),
    /// Of the file's lines when the task began (blank ones aside), all but one are still there:
    /// "delete the line TODO from notes.md" deletes that line, not the one after it.
    AllButOne(Vec<String>),
    /// The file's lines, as it had them (blank ones aside), still come first: "add a line to
    /// todo.txt: call mum" (with no place named: before, after, at the top…) adds it at the end.
    Leads(Vec<String>),
}

/// One expectation and the files it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Scoped {
    expect: Expect,
    /// The files its clause names; when it names none, the request's (and then what is
    /// expected there may be in any one of them); when the request names none either, the
    /// workspace's text files.
    files: Vec<String>,
    /// `files` came from its own clause: what is expected there is expected in each.
    own: bool,
}

/// The request's expectations, each with the files it is about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expectations {
    scoped: Vec<Scoped>,
}

/// One expectation the workspace does not show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unmet {
    /// What is wrong, as a line for the model and the result.
    pub line: String,
    /// The files where it does not hold (empty when it is in no file and none was named).
    pub files: Vec<String>,
}

impl Unmet {
    fn new(line: String, files: &[&str]) -> Unmet {
        Unmet {
            line,
            files: files.iter().map(|f| (*f).to_owned()).collect(),
        }
    }
}

/// Most lines of one file kept by an "add a line" request.
const MAX_KEPT: usize = 500;
/// Largest file read to check an expectation; most files looked at when none is named.
const MAX_FILE_BYTES: u64 = 256 * 1024;
const MAX_FILES: usize = 2000;
/// Folders not looked into.
const SKIPPED: [&str; 6] = [
    ".git",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
];

impl Expectations {
    /// A request that expects nothing.
    #[cfg(test)]
    pub const NONE: Expectations = Expectations { scoped: Vec::new() };

    /// Whether the request expects `word` to be gone ("remove X", "rename X to Y").
    pub fn expects_gone(&self, word: &str) -> bool {
        self.scoped
            .iter()
            .any(|s| matches!(&s.expect, Expect::Gone(w) if w == word))
    }

    /// Whether the request names `word` as gone or there ("rename X to Y": X and Y).
    pub fn names(&self, word: &str) -> bool {
        !word.is_empty()
            && self
                .scoped
                .iter()
                .any(|s| matches!(&s.expect, Expect::Gone(w) | Expect::There(w) if w == word))
    }

    /// The words the request wants gone from `path` (a `Gone` whose files are `path`'s, or
    /// any file's when it names none) that `text`, the file's would-be content, still has.
    pub fn still_in(&self, path: &str, text: &str) -> Vec<&str> {
        self.scoped
            .iter()
            .filter_map(|s| match &s.expect {
                Expect::Gone(word)
                    if (s.files.is_empty() || s.files.iter().any(|f| f == path))
                        && has_word(text, word) =>
                {
                    Some(word.as_str())
                }
                _ => None,
            })
            .collect()
    }

    /// What `request` expects (see the module's table).
    pub fn of(request: &str, ws: &Workspace) -> Expectations {
        let all_files = file_words(request, ws);
        let mut scoped: Vec<Scoped> = Vec::new();
        let mut add = |expects: Vec<Expect>, clause: &str| {
            let own = file_words(clause, ws);
            for expect in expects {
                if scoped.iter().any(|s| s.expect == expect) {
                    continue;
                }
                let (files, own) = if own.is_empty() {
                    (all_files.clone(), false)
                } else {
                    (own.clone(), true)
                };
                scoped.push(Scoped { expect, files, own });
            }
        };
        let mut kept: Vec<Scoped> = Vec::new();
        for clause in clauses(request) {
            let mut expects = Vec::new();
            read_clause(&clause, &mut expects);
            if let Some(line) = unspaced_line(&clause) {
                expects.push(Expect::There(line));
            }
            // "add a line to F: X", "add the line X": the clause gives the line it adds.
            let gives_a_line = expects.iter().any(|e| matches!(e, Expect::There(_)));
            if renames(&expects) {
                resembles(&file_words(&clause, ws), ws, &mut kept);
            }
            add(expects, &clause);
            for file in file_words(&clause, ws) {
                let Some(text) = ws.existing(&file).ok().and_then(|p| read_small(&p)) else {
                    continue;
                };
                let mut extra = Vec::new();
                if fixes(&clause) && !crate::agent::steering::text::is_test_file(&file) {
                    extra.push(Expect::Changed(text.clone()));
                }
                if adds(&clause)
                    && file.to_ascii_lowercase().ends_with(".json")
                    && let Ok(serde_json::Value::Object(map)) =
                        serde_json::from_str::<serde_json::Value>(&text)
                {
                    extra.push(Expect::KeysKept(map.keys().cloned().collect()));
                }
                for expect in extra {
                    guard(&mut kept, expect, &file);
                }
            }
            if deletes_a_line(&clause) {
                for file in file_words(&clause, ws) {
                    let Some(text) = ws.existing(&file).ok().and_then(|p| read_small(&p)) else {
                        continue;
                    };
                    let lines = content_lines(&text);
                    if lines.len() >= 2 {
                        guard(&mut kept, Expect::AllButOne(lines), &file);
                    }
                }
            }
            if adds_lines(&clause) {
                for file in file_words(&clause, ws) {
                    let text = ws
                        .existing(&file)
                        .ok()
                        .and_then(|p| read_small(&p))
                        .unwrap_or_default();
                    let lines = content_lines(&text);
                    if gives_a_line && !lines.is_empty() && !places_the_line(&clause) {
                        guard(&mut kept, Expect::Leads(lines), &file);
                    }
                    for line in text.lines().filter(|l| !l.trim().is_empty()).take(MAX_KEPT) {
                        guard(&mut kept, Expect::Kept(line.to_owned()), &file);
                    }
                }
            }
        }
        let mut expects = Vec::new();
        japanese(request, &mut expects);
        if renames(&expects) {
            resembles(&all_files, ws, &mut kept);
        }
        add(expects, request);
        scoped.extend(kept);
        Expectations { scoped }
    }

    /// Whether the request states a result the workspace can be checked against (a word gone
    /// or there); the guards — a file changed, lines or keys kept — say nothing of the result.
    pub fn expects_anything(&self) -> bool {
        self.scoped
            .iter()
            .any(|s| matches!(s.expect, Expect::Gone(_) | Expect::There(_)))
    }

    /// The expectations, for tests and logs.
    #[cfg(test)]
    fn expects(&self) -> Vec<Expect> {
        self.scoped.iter().map(|s| s.expect.clone()).collect()
    }

    /// What the workspace does not show, as lines for the model and the result; empty when
    /// everything expected holds.
    pub fn unmet(&self, ws: &Workspace) -> Vec<String> {
        self.unmet_in(ws).into_iter().map(|u| u.line).collect()
    }

    /// What the workspace does not show, each with the files where it does not.
    pub fn unmet_in(&self, ws: &Workspace) -> Vec<Unmet> {
        let mut whole: Option<Vec<(String, String)>> = None;
        let mut unmet = Vec::new();
        for scoped in &self.scoped {
            let texts: Vec<(String, String)> = if scoped.files.is_empty() {
                whole.get_or_insert_with(|| workspace_texts(ws)).clone()
            } else {
                scoped
                    .files
                    .iter()
                    .map(|f| {
                        let text = ws
                            .existing(f)
                            .ok()
                            .and_then(|p| read_small(&p))
                            .unwrap_or_default();
                        (f.clone(), text)
                    })
                    .collect()
            };
            match &scoped.expect {
                Expect::Gone(word) => {
                    let left: Vec<&str> = texts
                        .iter()
                        .filter(|(_, t)| has_word(t, word))
                        .map(|(f, _)| f.as_str())
                        .collect();
                    if !left.is_empty() {
                        unmet.push(Unmet::new(
                            format!("'{word}' is still in {}", left.join(", ")),
                            &left,
                        ));
                    }
                }
                Expect::Kept(line) => {
                    let lost: Vec<&str> = texts
                        .iter()
                        .filter(|(_, t)| !t.lines().any(|l| l == line))
                        .map(|(f, _)| f.as_str())
                        .collect();
                    if !lost.is_empty() {
                        unmet.push(Unmet::new(
                            format!(
                                "the line '{line}' of {} is gone, but the request adds a line \
                                 and removes none",
                                lost.join(", ")
                            ),
                            &lost,
                        ));
                    }
                }
                Expect::Changed(original) => {
                    let same: Vec<&str> = texts
                        .iter()
                        .filter(|(_, t)| t == original)
                        .map(|(f, _)| f.as_str())
                        .collect();
                    if !same.is_empty() {
                        unmet.push(Unmet::new(
                            format!(
                                "{} is unchanged, but the request asks for it to be changed",
                                same.join(", ")
                            ),
                            &same,
                        ));
                    }
                }
                Expect::AllButOne(lines) => {
                    for (file, text) in &texts {
                        let mut now = content_lines(text);
                        let lost: Vec<&str> = lines
                            .iter()
                            .filter(|line| match now.iter().position(|l| l == *line) {
                                Some(at) => {
                                    now.swap_remove(at);
                                    false
                                }
                                None => true,
                            })
                            .map(String::as_str)
                            .collect();
                        if lost.len() > 1 {
                            unmet.push(Unmet::new(
                                format!(
                                    "{file} lost {} lines ({}), but the request deletes one line",
                                    lost.len(),
                                    lost.iter()
                                        .map(|l| format!("'{}'", one_line(l)))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                                &[file.as_str()],
                            ));
                        }
                    }
                }
                Expect::Resembles(original) => {
                    let replaced: Vec<&str> = texts
                        .iter()
                        .filter(|(_, t)| keeps_no_line(original, t, self))
                        .map(|(f, _)| f.as_str())
                        .collect();
                    if !replaced.is_empty() {
                        unmet.push(Unmet::new(
                            format!(
                                "{} no longer has any of the lines it had, but the request \
                                 changes names in it, not the whole file",
                                replaced.join(", ")
                            ),
                            &replaced,
                        ));
                    }
                }
                Expect::Leads(lines) => {
                    let moved: Vec<&str> = texts
                        .iter()
                        .filter(|(_, t)| {
                            // A line lost is `Kept`'s to say; this is about their place.
                            let now = content_lines(t);
                            !now.starts_with(lines) && lines.iter().all(|l| now.contains(l))
                        })
                        .map(|(f, _)| f.as_str())
                        .collect();
                    if !moved.is_empty() {
                        unmet.push(Unmet::new(
                            format!(
                                "the lines {} had no longer come first, but the request adds a \
                                 line at the end",
                                moved.join(", ")
                            ),
                            &moved,
                        ));
                    }
                }
                Expect::KeysKept(keys) => {
                    for (file, text) in &texts {
                        let now = serde_json::from_str::<serde_json::Value>(text).ok();
                        let lost: Vec<&str> = keys
                            .iter()
                            .filter(|k| now.as_ref().and_then(|v| v.get(k.as_str())).is_none())
                            .map(String::as_str)
                            .collect();
                        if !lost.is_empty() {
                            unmet.push(Unmet::new(
                                format!(
                                    "{file} lost the key{} {}, but the request adds and removes \
                                     nothing",
                                    if lost.len() == 1 { "" } else { "s" },
                                    lost.join(", ")
                                ),
                                &[file.as_str()],
                            ));
                        }
                    }
                }
                Expect::There(word) => {
                    let missing: Vec<&str> = texts
                        .iter()
                        .filter(|(_, t)| !has_word(t, word))
                        .map(|(f, _)| f.as_str())
                        .collect();
                    if scoped.own && !missing.is_empty() {
                        unmet.push(Unmet::new(
                            format!("'{word}' is not in {}", missing.join(", ")),
                            &missing,
                        ));
                    } else if missing.len() == texts.len() {
                        let place = if scoped.files.is_empty() {
                            "any file".to_owned()
                        } else {
                            scoped.files.join(" or ")
                        };
                        // Where it belongs is not known when no file was named.
                        let files: Vec<&str> = scoped.files.iter().map(String::as_str).collect();
                        unmet.push(Unmet::new(format!("'{word}' is not in {place}"), &files));
                    }
                }
            }
        }
        unmet
    }
}

/// The test files a request is checked by and does not ask to change: "the unit tests fail;
/// fix stats.py", "add the function that test_text.py expects to text.py",
/// "test_text.py が期待する関数を text.py に追加して". The tools keep them as they are, so a
/// model cannot make the tests pass by changing them (and a task is not judged done by tests
/// it rewrote).
///
/// Only when the request names a file to change that is no test file (or, naming no file at
/// all, asks for a fault to be fixed: "fix the bug that makes python3 -m unittest fail",
/// "テスト失敗を調査し、原因を修正して"), mentions tests (a test file, "test(s)", "unittest",
/// "pytest", "テスト"), and every mention is the check, not the object of the change: followed by a verb such as "fail", "expect", "pass", "check",
/// "import", or in Japanese by が / は / の. "Write a unit test", "fix the failing test",
/// "test_calc.py にテストを追加して" ask to change tests: nothing is kept then. The files kept
/// are the test files the request names, or when it names none (but speaks of tests), the
/// workspace's test files.
pub(crate) fn tests_kept(request: &str, ws: &Workspace) -> Vec<String> {
    let named = file_words(request, ws);
    let is_test = crate::agent::steering::text::is_test_file;
    // What is to change: a file that is no test, or, when the request names no file, the fault
    // it asks to be fixed ("fix the bug that makes the tests fail", "原因を修正して").
    let to_change = if named.is_empty() {
        crate::agent::judge::intent::asks_for_change(request)
            && crate::agent::judge::lexicon::names_a_fault(request)
    } else {
        named.iter().any(|f| !is_test(f))
    };
    if !to_change {
        return Vec::new();
    }
    let named_tests: Vec<&String> = named.iter().filter(|f| is_test(f)).collect();
    let mut mentions = 0;
    for (at, word) in test_mentions(request, &named_tests) {
        if !is_reference(&request[at + word.len()..]) {
            return Vec::new();
        }
        mentions += 1;
    }
    if mentions == 0 {
        return Vec::new();
    }
    let mut kept: Vec<String> = named_tests
        .into_iter()
        .filter(|f| ws.existing(f).is_ok_and(|p| p.is_file()))
        .cloned()
        .collect();
    if kept.is_empty() {
        kept = workspace_files(ws)
            .iter()
            .map(|path| ws.display(path))
            .filter(|f| is_test(f))
            .collect();
    }
    kept
}

/// Where `request` speaks of tests: (byte offset, the word) for each test file it names and
/// each of the lexicon's words for tests (whole words, any case: test, tests, unittest,
/// pruebas, тесты …; テスト, 测试, 테스트 wherever they stand).
fn test_mentions<'a>(request: &'a str, files: &[&'a String]) -> Vec<(usize, &'a str)> {
    let mut found: Vec<(usize, &str)> = Vec::new();
    for file in files {
        found.extend(request.match_indices(file.as_str()));
    }
    for language in &crate::agent::judge::lexicon::UNSPACED {
        for word in language.tests {
            found.extend(request.match_indices(word));
        }
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut at = 0;
    for word in request.split(|c: char| !is_word(c)) {
        let start = at;
        at += word.len()
            + request[at + word.len()..]
                .chars()
                .next()
                .map_or(0, char::len_utf8);
        if word.is_empty()
            || found
                .iter()
                .any(|(f, w)| (*f..f + w.len()).contains(&start))
        {
            continue;
        }
        let lower = word.to_lowercase();
        if crate::agent::judge::lexicon::SPACED
            .iter()
            .any(|l| l.tests.contains(&lower.as_str()))
        {
            found.push((start, word));
        }
    }
    found.sort_unstable();
    found
}

/// Whether the words after a mention of tests make them the check ("… fail", "… expects",
/// "… must pass", "… が期待する", "… fallan", "… 失败") rather than what is to be changed.
fn is_reference(after: &str) -> bool {
    let after = after.trim_start();
    if crate::agent::judge::lexicon::UNSPACED
        .iter()
        .any(|l| l.checked.iter().any(|w| after.starts_with(w)))
    {
        return true;
    }
    let words = after.split_whitespace().map(|w| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    });
    let lexicon = &crate::agent::judge::lexicon::SPACED;
    // "the unit tests in test_x.py still fail": places ("in test_x.py") and adverbs ("still")
    // may stand between the mention and its verb.
    let mut after_between = false;
    for word in words.take(6) {
        if lexicon.iter().any(|l| l.checked.contains(&word.as_str())) {
            return true;
        }
        if lexicon.iter().any(|l| l.between.contains(&word.as_str())) {
            after_between = true;
        } else if after_between && !word.is_empty() {
            after_between = false;
        } else {
            return false;
        }
    }
    false
}

/// A request's clauses.
fn clauses(request: &str) -> Vec<String> {
    request
        .split(['\n', ';', '!', '?'])
        .flat_map(|s| s.split(". "))
        .flat_map(|s| s.split(", "))
        .flat_map(|s| s.split(['—', '–']))
        .flat_map(|s| s.split(" and then "))
        .map(|s| s.trim().trim_end_matches('.').to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A verb's object: its text, and whether it was quoted.
struct Object<'a> {
    text: String,
    quoted: bool,
    rest: &'a str,
}

impl Object<'_> {
    /// Looks like code or a value, not a plain word: quoted, or with a digit, `_`, `.`, `=`,
    /// `/`, `:` or an upper-case letter after its first.
    fn code_like(&self) -> bool {
        self.quoted
            || self
                .text
                .chars()
                .any(|c| c.is_ascii_digit() || "_.=/:".contains(c))
            || self.text.chars().skip(1).any(char::is_uppercase)
    }
}

/// The first quoted text of `rest` ('…', "…", `…`), or its first word.
fn object(rest: &str) -> Option<Object<'_>> {
    let rest = rest.trim_start();
    let first = rest.chars().next()?;
    if matches!(first, '\'' | '"' | '`' | '‘' | '“' | '「') {
        let close = match first {
            '‘' => '’',
            '“' => '”',
            '「' => '」',
            other => other,
        };
        let inner = &rest[first.len_utf8()..];
        let end = inner.find(close)?;
        let text = inner[..end].trim();
        return (!text.is_empty()).then(|| Object {
            text: text.to_owned(),
            quoted: true,
            rest: &inner[end + close.len_utf8()..],
        });
    }
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let word = rest[..end].trim_end_matches([',', '.', ':', ';', ')']);
    (!word.is_empty() && word.chars().any(char::is_alphanumeric)).then(|| Object {
        text: word.to_owned(),
        quoted: false,
        rest: &rest[end..],
    })
}

/// What a remove verb's object names: after a noun of code, the word that follows it, or the
/// one after that when only that one looks like code ("la función obsoleta legacy_sum": an
/// adjective after the noun); else the first of the next three words that looks like code.
/// A file name is not one (the clause names the file it is removed from).
fn removed(rest: &str, named_code: bool) -> Option<String> {
    let file_like = |o: &Object| {
        o.text.contains('/')
            || o.text
                .rsplit_once('.')
                .is_some_and(|(_, ext)| !ext.is_empty() && ext.chars().all(char::is_alphabetic))
    };
    let names = |o: &Object| o.code_like() && !file_like(o);
    let first = object(rest)?;
    let second = object(first.rest);
    if named_code {
        return Some(match second {
            Some(second) if !names(&first) && names(&second) => second.text,
            _ => first.text,
        });
    }
    let mut next = Some(first);
    for _ in 0..3 {
        let candidate = next.take()?;
        if names(&candidate) {
            return Some(candidate.text);
        }
        next = object(candidate.rest);
    }
    None
}

/// `text` with its first words dropped while they are articles or nouns of code of the verb's
/// language (`the`, `la`, `die`; `function`, `Funktion`, `функцию`: one language only, since
/// the Portuguese article `os` is the English word `os`); whether a noun of code was among
/// them ("the function f": f names code).
fn skip_words<'a>(mut text: &'a str, language: &Spaced) -> (&'a str, bool) {
    let mut named_code = false;
    loop {
        let trimmed = text.trim_start();
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        let word = trimmed[..end].to_lowercase();
        if end == 0 {
            return (trimmed, named_code);
        }
        if language.identifiers.contains(&word.as_str()) {
            named_code = true;
        } else if !language.articles.contains(&word.as_str()) {
            return (trimmed, named_code);
        }
        text = &trimmed[end..];
    }
}

/// The text after the first occurrence of `word` (a lowercase word) in `clause`, compared
/// without case, as a whole word.
fn after_word<'a>(clause: &'a str, word: &str) -> Option<&'a str> {
    let chars = word.chars().count();
    let first = word.chars().next()?;
    clause.char_indices().find_map(|(at, c)| {
        if c.to_lowercase().next() != Some(first) {
            return None;
        }
        let rest = &clause[at..];
        let end = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(i, _)| i);
        let candidate = &rest[..end];
        let before = clause[..at].chars().next_back();
        let after = rest[end..].chars().next();
        (candidate.chars().count() == chars
            && candidate.to_lowercase() == word
            && !before.is_some_and(char::is_alphanumeric)
            && !after.is_some_and(char::is_alphanumeric))
        .then_some(&rest[end..])
    })
}

fn read_clause(clause: &str, out: &mut Vec<Expect>) {
    // `verb OLD link NEW`; `plain`: a plain word will do for OLD (replace), else it must look
    // like code or follow a code noun (rename the class Cart).
    let pair =
        |language: &Spaced, verb: &str, link: &str, plain: bool, out: &mut Vec<Expect>| -> bool {
            let Some(rest) = after_word(clause, verb) else {
                return false;
            };
            let (rest, named_code) = skip_words(rest, language);
            let Some(old) = object(rest) else {
                return false;
            };
            if !(plain || named_code || old.code_like()) {
                return false;
            }
            let Some(rest) = old
                .rest
                .trim_start()
                .strip_prefix(link)
                .filter(|r| r.starts_with(char::is_whitespace))
            else {
                return false;
            };
            let Some(new) = object(rest) else {
                return false;
            };
            if old.text != new.text {
                out.push(Expect::Gone(old.text));
                out.push(Expect::There(new.text));
            }
            true
        };
    let renamed = crate::agent::judge::lexicon::SPACED.iter().any(|l| {
        l.rename
            .iter()
            .any(|(verb, link)| pair(l, verb, link, false, out))
    });
    if renamed
        || pair(&ENGLISH, "replace", "with", true, out)
        || pair(&ENGLISH, "change", "to", false, out)
    {
        return;
    }
    if let Some(rest) = after_word(clause, "from")
        && let Some(old) = object(rest)
        && let Some(rest) = old.rest.trim_start().strip_prefix("to ")
        && let Some(new) = object(rest)
        && old.text != new.text
        && old.code_like()
    {
        // "from 1.4.2 to 1.5.0": versions, ports, values.
        out.push(Expect::Gone(old.text));
        out.push(Expect::There(new.text));
        return;
    }
    for language in &crate::agent::judge::lexicon::SPACED {
        for verb in language.remove {
            if let Some(rest) = after_word(clause, verb) {
                let (rest, named_code) = skip_words(rest, language);
                if let Some(gone) = removed(rest, named_code) {
                    out.push(Expect::Gone(gone));
                    return;
                }
            }
        }
    }
    if let Some((old, new)) = corrected_spelling(clause) {
        out.push(Expect::Gone(old));
        out.push(Expect::There(new));
        return;
    }
    // "add a second line to todo.txt: call mum": the line follows the colon.
    if adds_lines(clause)
        && let Some((_, line)) = clause.rsplit_once(':')
    {
        let line = line.trim();
        let line = object(line)
            .filter(|o| o.quoted && o.rest.trim().is_empty())
            .map_or_else(|| line.to_owned(), |o| o.text);
        if !line.is_empty() {
            out.push(Expect::There(line));
            return;
        }
    }
    for marker in [
        "containing the line",
        "with the line",
        "add the line",
        "append the line",
    ] {
        if let Some(rest) = after_word(clause, marker) {
            let rest = rest.trim_start_matches([':', ' ']);
            let line = match object(rest) {
                Some(o) if o.quoted => o.text,
                _ => rest.trim().to_owned(),
            };
            if !line.is_empty() {
                out.push(Expect::There(line));
                return;
            }
        }
    }
}

/// Whether `after`, a file's whole new content, keeps none of the lines of `before` (its
/// text, of two lines or more that are not blank), lines compared trimmed and without the
/// words the request names as gone or there (`from cart import calc_total` is kept as `from
/// cart import compute_total` by a rename).
pub(crate) fn keeps_no_line(before: &str, after: &str, expected: &Expectations) -> bool {
    let plain = |line: &str| -> String {
        line.trim()
            .split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(|piece| {
                let end = piece.len()
                    - piece
                        .chars()
                        .next_back()
                        .filter(|c| !(c.is_alphanumeric() || *c == '_'))
                        .map_or(0, char::len_utf8);
                let (word, rest) = piece.split_at(end);
                if expected.names(word) { rest } else { piece }
            })
            .collect()
    };
    // A set: each line of `after` is looked up once, not compared with every line before
    // (files of up to 256 KiB); the count is of lines, repeated ones included.
    let mut was = std::collections::HashSet::new();
    let mut lines = 0;
    for line in before.lines().filter(|l| !l.trim().is_empty()) {
        lines += 1;
        was.insert(plain(line));
    }
    if lines < 2 {
        return false;
    }
    !after
        .lines()
        .filter(|l| !l.trim().is_empty())
        .any(|l| was.contains(&plain(l)))
}

/// Whether two names differ by a slip of spelling (`format_nmae`, `format_name`): at most two
/// edits, or a quarter of the longer name's characters.
pub(crate) fn spelled_alike(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) =
        (a.chars().take(64).collect(), b.chars().take(64).collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()] <= 2.max(a.len().max(b.len()) / 4)
}

/// Whether `clause` starts (after fillers) with a verb that changes the files it names (fix,
/// correct, update, corrige, behebe, исправь …, see the lexicon), or, in Japanese, Chinese or
/// Korean, carries such a verb's stem outside a question (修正して, 修复, 수정해).
fn fixes(clause: &str) -> bool {
    clause
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .find(|w| !w.is_empty() && !crate::agent::judge::lexicon::is_filler(w))
        .is_some_and(|w| crate::agent::judge::lexicon::is_fix_verb(&w))
        || crate::agent::judge::intent::unspaced_fix(clause)
}

/// A misspelling and its correction in a clause asking for a fix, in any language: two
/// words spelled alike (of four letters or more) with one short word or an arrow between
/// them — "fix the typo recieve to receive", "corrija recieve para receive", "recieve →
/// receive".
fn corrected_spelling(clause: &str) -> Option<(String, String)> {
    if !fixes(clause) {
        return None;
    }
    let words: Vec<&str> = clause
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_')))
        .collect();
    let long =
        |w: &str| w.chars().count() >= 4 && w.chars().all(|c| c.is_alphanumeric() || c == '_');
    words.windows(3).find_map(|w| {
        let link = w[1];
        let linked =
            link.is_empty() || (link.chars().count() <= 4 && link.chars().all(char::is_alphabetic));
        (linked
            && long(w[0])
            && long(w[2])
            && w[0] != w[2]
            && w[0].to_lowercase() != w[2].to_lowercase()
            && spelled_alike(w[0], w[2]))
        .then(|| (w[0].to_owned(), w[2].to_owned()))
    })
}

/// Whether `expects` change one name or value into another (a rename, a replace: X gone and
/// Y there).
fn renames(expects: &[Expect]) -> bool {
    expects.iter().any(|e| matches!(e, Expect::Gone(_)))
        && expects.iter().any(|e| matches!(e, Expect::There(_)))
}

/// [`Expect::Resembles`] for each of `files` that has two lines or more.
fn resembles(files: &[String], ws: &Workspace, kept: &mut Vec<Scoped>) {
    for file in files {
        let Some(text) = ws.existing(file).ok().and_then(|p| read_small(&p)) else {
            continue;
        };
        if text.lines().filter(|l| !l.trim().is_empty()).count() < 2 {
            continue;
        }
        guard(kept, Expect::Resembles(text), file);
    }
}

/// Adds `expect` about `file` alone to the guards, once.
fn guard(kept: &mut Vec<Scoped>, expect: Expect, file: &str) {
    if !kept.iter().any(|s| s.expect == expect && s.files == [file]) {
        kept.push(Scoped {
            expect,
            files: vec![file.to_owned()],
            own: true,
        });
    }
}

/// Whether `clause` asks for one line to be deleted: a remove verb of the lexicon and a word
/// for one line ("delete the line …", "elimina la línea …"), or 删除 … 这一行 / 行を削除 / 줄을
/// 삭제. ("the lines" asks for more than one.)
fn deletes_a_line(clause: &str) -> bool {
    const LINE: &str = "line línea ligne zeile linha riga строку строка строчку";
    const UNSPACED: [(&str, &str); 6] = [
        ("删除", "这一行"),
        ("删除", "这行"),
        ("删除", "的行"),
        ("削除", "行を"),
        ("消し", "行を"),
        ("삭제", "줄을"),
    ];
    let lower = clause.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let removes = crate::agent::judge::lexicon::SPACED
        .iter()
        .any(|l| l.remove.iter().any(|v| words.contains(v)));
    (removes && words.iter().any(|w| LINE.split(' ').any(|l| l == *w)))
        || UNSPACED
            .iter()
            .any(|(verb, line)| clause.contains(verb) && clause.contains(line))
}

/// A line shortened for a message: its first 60 characters.
fn one_line(line: &str) -> String {
    let mut short: String = line.trim().chars().take(60).collect();
    if line.trim().chars().count() > 60 {
        short.push('…');
    }
    short
}

/// Whether `clause` asks for something to be added ("add", "append", "insert").
fn adds(clause: &str) -> bool {
    ["add", "append", "insert"]
        .iter()
        .any(|verb| after_word(clause, verb).is_some())
}

/// Whether `clause` asks for a line to be added to a file: "add" (or "append", "insert")
/// and then "line" or "lines"; in Japanese, Chinese or Korean, a stem of adding and a word for
/// a line ("notes.txt の最後に「done」という行を追加して").
fn adds_lines(clause: &str) -> bool {
    ["add", "append", "insert"].iter().any(|verb| {
        after_word(clause, verb).is_some_and(|rest| {
            after_word(rest, "line").is_some() || after_word(rest, "lines").is_some()
        })
    }) || (UNSPACED_ADDS.iter().any(|a| clause.contains(a))
        && UNSPACED_LINES.iter().any(|l| clause.contains(l)))
}

/// Stems of adding and words for a line, in Japanese, Chinese and Korean.
const UNSPACED_ADDS: [&str; 4] = ["追加", "追記", "添加", "추가"];
const UNSPACED_LINES: [&str; 3] = ["行", "줄", "라인"];

/// The line an unspaced "add a line" clause gives, in corner brackets before its word for a
/// line: 「done」という行, 「done」の行, “done”这一行.
fn unspaced_line(clause: &str) -> Option<String> {
    if !adds_lines(clause) {
        return None;
    }
    let (open, close) = [('「', '」'), ('『', '』'), ('“', '”')]
        .into_iter()
        .find(|(open, _)| clause.contains(*open))?;
    let (_, rest) = clause.split_once(open)?;
    let (line, after) = rest.split_once(close)?;
    let line = line.trim();
    let names_a_line = [
        "という行",
        "と言う行",
        "の行",
        "行",
        "这一行",
        "这行",
        "라는 줄",
        "줄",
    ]
    .iter()
    .any(|w| after.trim_start().starts_with(w));
    (names_a_line && !line.is_empty() && !line.contains('\n')).then(|| line.to_owned())
}

/// A text's lines that are not blank, without their trailing white space.
fn content_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .take(MAX_KEPT)
        .map(str::to_owned)
        .collect()
}

/// Whether an "add a line" clause says where the line goes (before or after another, at the
/// top, as the first line…): then the file's lines need not come first.
fn places_the_line(clause: &str) -> bool {
    const PLACES: &str =
        "before after above below under top beginning start first between insert prepend";
    // 先頭 / 冒頭 (the top), の前 / の後 / の上 / の下 (before, after, above, below), 間 (between),
    // 挿入 (insert); 开头, 之前, 之后; 맨 앞, 앞에, 뒤에. (最後, "the end", is no other place.)
    const UNSPACED: [&str; 16] = [
        "先頭",
        "冒頭",
        "の前",
        "の後",
        "の上に",
        "の下に",
        "の間",
        "挿入",
        "开头",
        "之前",
        "之后",
        "插入",
        "맨 앞",
        "앞에",
        "뒤에",
        "사이",
    ];
    clause
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| PLACES.split(' ').any(|p| p == w.to_lowercase()))
        || UNSPACED.iter().any(|p| clause.contains(p))
}

/// `X を Y に名前を変えて` (改名, リネーム, 変更, 置き換え): the Japanese "rename X to Y".
fn japanese_rename(request: &str, out: &mut Vec<Expect>) {
    const RENAMES: [&str; 7] = [
        "名前を変",
        "改名",
        "リネーム",
        "変更",
        "置き換",
        "置換",
        "変え",
    ];
    let ident = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    for (at, _) in request.match_indices('を') {
        let before = request[..at].trim_end();
        let old_start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| ident(*c))
            .last()
            .map_or(before.len(), |(i, _)| i);
        let old = &before[old_start..];
        let after = request[at + 'を'.len_utf8()..].trim_start();
        let new_end = after.find(|c: char| !ident(c)).unwrap_or(after.len());
        let new = &after[..new_end];
        let Some(rest) = after[new_end..].trim_start().strip_prefix('に') else {
            continue;
        };
        if !old.is_empty()
            && !new.is_empty()
            && old != new
            && RENAMES
                .iter()
                .any(|r| rest.starts_with(r) || rest.contains(r))
        {
            out.push(Expect::Gone(old.to_owned()));
            out.push(Expect::There(new.to_owned()));
            return;
        }
    }
}

/// `X から Y に`: the Japanese "from X to Y".
fn japanese(request: &str, out: &mut Vec<Expect>) {
    japanese_rename(request, out);
    if !out.is_empty() {
        return;
    }
    // `X を削除して` (消して, 取り除いて): X, when it looks like code, is gone.
    for (at, _) in request.match_indices('を') {
        let after = &request[at + 'を'.len_utf8()..];
        if !["削除", "消し", "消す", "取り除", "除去"]
            .iter()
            .any(|v| after.starts_with(v))
        {
            continue;
        }
        let name: String = {
            let mut name: Vec<char> = request[..at]
                .chars()
                .rev()
                .skip_while(|c| c.is_whitespace())
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            name.reverse();
            name.into_iter().collect()
        };
        let object = Object {
            text: name,
            quoted: false,
            rest: "",
        };
        if !object.text.is_empty() && object.code_like() {
            out.push(Expect::Gone(object.text));
            return;
        }
    }
    let Some((before, after)) = request.split_once("から") else {
        return;
    };
    let old = before.split_whitespace().next_back().unwrap_or_default();
    // "X から Y に": Y is followed by に (`1.0 に`, `1.0に`), else から is "from" in another
    // sense ("app.py から print の行を削除": remove the print line from app.py).
    let Some(new) = after.split_whitespace().next() else {
        return;
    };
    let new = match new.strip_suffix('に') {
        Some(new) => new,
        None if after.trim_start()[new.len()..]
            .trim_start()
            .starts_with('に') =>
        {
            new
        }
        None => return,
    };
    let versionish = |t: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c))
    };
    if versionish(old) && versionish(new) && old != new {
        out.push(Expect::Gone(old.to_owned()));
        out.push(Expect::There(new.to_owned()));
    }
}

/// The files a request names, as workspace paths: existing ones, and new ones it asks for.
fn file_words(request: &str, ws: &Workspace) -> Vec<String> {
    let mut files = crate::agent::steering::text::named_files(request, ws);
    if let Some(missing) = crate::agent::steering::text::missing_file(request, ws)
        && !files.contains(&missing)
    {
        files.push(missing);
    }
    files
}

fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    (!bytes.contains(&0)).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// The workspace's small text files, as (path, text).
fn workspace_texts(ws: &Workspace) -> Vec<(String, String)> {
    workspace_files(ws)
        .into_iter()
        .filter_map(|path| Some((ws.display(&path), read_small(&path)?)))
        .collect()
}

/// The workspace's files (not in [`SKIPPED`] folders, not the server's own), at most
/// [`MAX_FILES`].
fn workspace_files(ws: &Workspace) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    ws.walk_files(&SKIPPED, |path| {
        out.push(path);
        if out.len() == MAX_FILES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    out
}

/// Whether `text` holds `word` with no letter, digit or `_` right before or after it.
fn has_word(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, found)| {
        let before = text[..at].chars().next_back();
        let after = text[at + found.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expects(request: &str) -> Vec<Expect> {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        Expectations::of(request, &ws).expects()
    }

    /// The tests a request keeps, in a workspace of stats.py, test_stats.py, text.py,
    /// test_text.py and tests/test_more.py.
    fn kept(request: &str) -> Vec<String> {
        let (_dir, ws) = workspace_with(&[
            ("stats.py", "x = 1\n"),
            ("test_stats.py", "x = 1\n"),
            ("text.py", "x = 1\n"),
            ("test_text.py", "x = 1\n"),
            ("tests/test_more.py", "x = 1\n"),
        ]);
        let mut kept = tests_kept(request, &ws);
        kept.sort();
        kept
    }

    #[test]
    fn tests_that_are_the_check_are_kept() {
        let all = ["test_stats.py", "test_text.py", "tests/test_more.py"];
        assert_eq!(kept("The unit tests fail; fix stats.py."), all);
        assert_eq!(kept("Make the tests pass by fixing stats.py"), all);
        assert_eq!(kept("python3 -m unittest fails; correct text.py"), all);
        assert_eq!(
            kept("Add the function count_vowels that test_text.py expects to text.py"),
            ["test_text.py"]
        );
        assert_eq!(
            kept("test_text.py が期待する関数 count_vowels を text.py に追加してください。"),
            ["test_text.py"]
        );
        assert_eq!(kept("テストが通るように stats.py を直して"), all);
        assert_eq!(
            kept("The tests in test_stats.py still fail: fix stats.py"),
            ["test_stats.py"]
        );
        assert_eq!(kept("🧪 tests fail ✓; fix stats.py ✓ 直して"), all);
        // No file named: the fault is what is to change.
        assert_eq!(
            kept("Fix the bug that makes python3 -m unittest fail."),
            all
        );
        assert_eq!(
            kept("プロジェクトのテスト失敗を調査し、原因を修正してください。"),
            all
        );
    }

    #[test]
    fn tests_the_request_changes_or_does_not_mention_are_not_kept() {
        for request in [
            // The tests are what is to be written or changed.
            "Write a unit test for mean() in test_stats.py",
            "Fix the failing test in test_stats.py and stats.py",
            "Add tests for text.py",
            "test_text.py にテストを追加して text.py も直して",
            "テストを書いて stats.py を直して",
            // No test is spoken of: nothing to keep.
            "fix stats.py",
            // No other file to change: the request may well be about the tests.
            "The tests fail; fix them",
            "Run the tests and fix what fails in stats.py",
            // Any text at all, in any script, never panics.
            "テスト",
            "🧪 tests ✓ fail; fix stats.py ✓",
        ] {
            let got = kept(request);
            assert!(got.is_empty(), "{request}: {got:?}");
        }
    }

    fn gone(w: &str) -> Expect {
        Expect::Gone(w.into())
    }

    fn there(w: &str) -> Expect {
        Expect::There(w.into())
    }

    /// What a rename or a replacement expects: `old` gone, `new` there.
    fn replaced(old: &str, new: &str) -> Vec<Expect> {
        vec![gone(old), there(new)]
    }

    #[test]
    fn plain_requests_say_what_the_workspace_will_hold() {
        for (request, wanted) in [
            (
                "Rename the function fetch_data to load_data everywhere it is defined or used.",
                replaced("fetch_data", "load_data"),
            ),
            (
                "In greeting.txt, replace the word Hello with Goodbye.",
                replaced("Hello", "Goodbye"),
            ),
            (
                "In docs/guide.md, replace every 'colour' with 'color'.",
                replaced("colour", "color"),
            ),
            (
                "Bump the version from 1.4.2 to 1.5.0 in both VERSION and package.json.",
                replaced("1.4.2", "1.5.0"),
            ),
            (
                "Change the port in config.yaml from 8080 to 9090.",
                replaced("8080", "9090"),
            ),
            (
                "Remove the line DEBUG=true from settings.env.",
                vec![gone("DEBUG=true")],
            ),
            (
                "Remove the unused function old_helper from utils.py.",
                vec![gone("old_helper")],
            ),
            (
                "Create a file todo.txt containing the line: buy milk",
                vec![there("buy milk")],
            ),
            (
                "Tell me the port in PORT.txt, and create notes/todo.md with the line start.",
                vec![there("start")],
            ),
            (
                "VERSION ファイルのバージョンを 2.0.0 から 2.0.1 に更新してください。",
                replaced("2.0.0", "2.0.1"),
            ),
            ("Fix the bug in calc.py.", vec![]),
            ("What is 2 + 2?", vec![]),
            ("Change the wording to be friendlier.", vec![]),
            ("Rename the config module to settings.", vec![]),
            ("Remove the first paragraph from README.md.", vec![]),
            (
                "Rename the class Cart to ShoppingCart in every file that uses it.",
                replaced("Cart", "ShoppingCart"),
            ),
            (
                "Now add a second line to todo.txt: call mum",
                vec![there("call mum")],
            ),
            ("Append the line 'done' to log.txt.", vec![there("done")]),
            ("Remove the unused import os from app.py.", vec![gone("os")]),
            (
                "config.py の定数 TIMEOUT を TIMEOUT_SECONDS に名前を変えて、main.py も直してください。",
                replaced("TIMEOUT", "TIMEOUT_SECONDS"),
            ),
            (
                "関数 greet を welcome にリネームしてください。",
                replaced("greet", "welcome"),
            ),
            ("README.md を読んでください。", vec![]),
            // Renames in the other languages of the lexicon.
            (
                "Benenne die Funktion calc_sum in sum_all um, in utils.py und in main.py.",
                replaced("calc_sum", "sum_all"),
            ),
            (
                "Renombra la función fetch_data a load_data.",
                replaced("fetch_data", "load_data"),
            ),
            (
                "Renommez la fonction fetch_data en load_data.",
                replaced("fetch_data", "load_data"),
            ),
            (
                "Renomeie a função fetch_data para load_data.",
                replaced("fetch_data", "load_data"),
            ),
            (
                "Rinomina la funzione fetch_data in load_data.",
                replaced("fetch_data", "load_data"),
            ),
            (
                "Переименуйте функцию fetch_data в load_data.",
                replaced("fetch_data", "load_data"),
            ),
            // A plain word after the verb names no code: nothing is read.
            ("Renombra la carpeta docs a manual.", vec![]),
        ] {
            assert_eq!(expects(request), wanted, "{request}");
        }
    }

    /// A workspace holding `files` (`(path, text)`; folders on the way are created).
    fn workspace_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in files {
            write(&dir, file, text);
        }
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    fn write(dir: &tempfile::TempDir, file: &str, text: &str) {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Writes each `(file, text)` of `steps` in turn, and after each checks that `expected`
    /// finds unmet what the step says (nothing: the request is met).
    fn after_writes(
        dir: &tempfile::TempDir,
        ws: &Workspace,
        expected: &Expectations,
        steps: &[(&str, &str, &[&str])],
    ) {
        for (file, text, unmet) in steps {
            write(dir, file, text);
            assert_eq!(
                expected.unmet(ws),
                *unmet,
                "after writing {text:?} to {file}"
            );
        }
    }

    #[test]
    fn the_workspace_is_compared_word_by_word() {
        let (dir, ws) = workspace_with(&[
            ("shop.py", "class ShoppingCart:\n    pass\n"),
            ("VERSION", "1.5.0\n"),
            ("package.json", "{\"version\": \"1.4.2\"}\n"),
        ]);
        let rename = Expectations::of("Rename the class Cart to ShoppingCart in every file.", &ws);
        assert!(rename.unmet(&ws).is_empty(), "{:?}", rename.unmet(&ws));
        let bump = Expectations::of(
            "Bump the version from 1.4.2 to 1.5.0 in VERSION and package.json.",
            &ws,
        );
        assert_eq!(
            bump.unmet(&ws),
            [
                "'1.4.2' is still in package.json",
                "'1.5.0' is not in package.json"
            ]
        );
        // What one clause asks is checked in its own files, not in every file named.
        write(&dir, "PORT.txt", "8080\n");
        write(&dir, "notes/todo.md", "start\n");
        let batched = Expectations::of(
            "Tell me the port in PORT.txt, and create notes/todo.md with the line start.",
            &ws,
        );
        assert!(batched.unmet(&ws).is_empty(), "{:?}", batched.unmet(&ws));
    }

    #[test]
    fn a_file_a_clause_fixes_must_change_and_a_json_file_added_to_keeps_its_keys() {
        let (dir, ws) = workspace_with(&[
            ("stats.py", "def biggest(xs):\n    return min(xs)\n"),
            ("test_stats.py", "assert biggest([1]) == 1\n"),
            ("settings.json", "{\"port\": 80, \"host\": \"localhost\"}\n"),
        ]);
        let fix = Expectations::of(
            "The tests fail. Fix stats.py so that python3 -m unittest passes.",
            &ws,
        );
        after_writes(
            &dir,
            &ws,
            &fix,
            &[
                // The test edited instead of the code (a 1.5B model's "fix").
                (
                    "test_stats.py",
                    "assert True\n",
                    &["stats.py is unchanged, but the request asks for it to be changed"],
                ),
                ("stats.py", "def biggest(xs):\n    return max(xs)\n", &[]),
            ],
        );
        // A test file a clause names may stay as it is: "fix the test" often means the code.
        let test = Expectations::of("Fix the failing test in test_stats.py.", &ws);
        assert!(test.unmet(&ws).is_empty(), "{:?}", test.unmet(&ws));
        let add = Expectations::of(
            "Add the key \"debug\" with the value false to settings.json, keeping the other keys.",
            &ws,
        );
        after_writes(
            &dir,
            &ws,
            &add,
            &[
                (
                    "settings.json",
                    "{\"debug\": false}",
                    &[
                        "settings.json lost the keys host, port, but the request adds and removes nothing",
                    ],
                ),
                (
                    "settings.json",
                    "{\"port\": 80, \"host\": \"localhost\", \"debug\": false}",
                    &[],
                ),
            ],
        );
    }

    #[test]
    fn a_removal_in_any_language_expects_the_name_gone() {
        let (_dir, ws) = workspace_with(&[("mathops.py", "def legacy_sum(xs):\n    return 0\n")]);
        expect_first(
            &ws,
            &[
                "Elimina la función obsoleta legacy_sum de mathops.py.",
                "Supprime la fonction legacy_sum de mathops.py.",
                "Entferne die Funktion legacy_sum aus mathops.py.",
                "Удали функцию legacy_sum из mathops.py.",
                "Remove the unused function legacy_sum from mathops.py.",
                "mathops.py から legacy_sum を削除してください。",
            ],
            &[gone("legacy_sum")],
        );
        // Nothing that looks like code, no noun of code: nothing expected gone.
        expect_nothing_gone(
            &ws,
            &[
                "Remove the debug prints from mathops.py.",
                "Elimina los comentarios viejos de mathops.py.",
                "app.py から print の行を削除してください。",
            ],
        );
    }

    #[test]
    fn a_line_deleted_is_the_only_line_lost() {
        let notes = "# Notes\nTODO: remove me\nkeep this\n";
        let (dir, ws) = workspace_with(&[("notes.md", notes)]);
        let all_but_one = Expect::AllButOne(vec![
            "# Notes".into(),
            "TODO: remove me".into(),
            "keep this".into(),
        ]);
        each_request(
            (&dir, &ws),
            &[
                "删除 notes.md 中的 TODO: remove me 这一行。",
                "Delete the line TODO: remove me from notes.md.",
                "notes.md の TODO: remove me の行を削除してください。",
                "Elimina la línea TODO de notes.md.",
            ],
            &all_but_one,
            &[
                // The line and the one after it: what the 1.5B model did.
                (
                    "notes.md",
                    "# Notes\n",
                    &[
                        "notes.md lost 2 lines ('TODO: remove me', 'keep this'), but the \
                       request deletes one line",
                    ],
                ),
                ("notes.md", "# Notes\nkeep this\n", &[]),
            ],
            &[("notes.md", notes)],
        );
        // Lines, not a line: any number may go.
        let lines = Expectations::of("Delete the lines with TODO from notes.md.", &ws);
        assert!(!lines.expects().contains(&all_but_one));
    }

    #[test]
    fn a_renamed_file_keeps_its_lines_but_for_the_names() {
        let app = "from config import MAX_RETRY\n\nprint(MAX_RETRY)\n";
        let config = "MAX_RETRY = 3\n";
        let (dir, ws) = workspace_with(&[("config.py", config), ("app.py", app)]);
        // config.py, one line, may change its one line.
        each_request(
            (&dir, &ws),
            &[
                "Rename MAX_RETRY to MAX_RETRIES in config.py and app.py.",
                "config.py と app.py の MAX_RETRY を MAX_RETRIES に名前を変えてください。",
            ],
            &Expect::Resembles(app.into()),
            &[
                (
                    "config.py",
                    "MAX_RETRIES = 3\n",
                    &[
                        "'MAX_RETRY' is still in app.py",
                        "'MAX_RETRIES' is not in app.py",
                    ],
                ),
                // app.py written as config.py: what the 1.5B model did.
                (
                    "app.py",
                    "MAX_RETRIES = 3\n",
                    &[
                        "app.py no longer has any of the lines it had, but the request \
                       changes names in it, not the whole file",
                    ],
                ),
                (
                    "app.py",
                    "from config import MAX_RETRIES\n\nprint(MAX_RETRIES)\n",
                    &[],
                ),
            ],
            &[("config.py", config), ("app.py", app)],
        );
    }

    /// For each of `requests`: it expects `holds`, and after each write of `steps` the
    /// workspace shows what the step says is unmet; then the files are put back as `originals`.
    fn each_request(
        (dir, ws): (&tempfile::TempDir, &Workspace),
        requests: &[&str],
        holds: &Expect,
        steps: &[(&str, &str, &[&str])],
        originals: &[(&str, &str)],
    ) {
        for expected in readings(ws, requests, |e| e.contains(holds)) {
            after_writes(dir, ws, &expected, steps);
            for (file, text) in originals {
                write(dir, file, text);
            }
        }
    }

    /// What each of `requests` expects, each checked by `holds`.
    fn readings(
        ws: &Workspace,
        requests: &[&str],
        holds: impl Fn(&[Expect]) -> bool,
    ) -> Vec<Expectations> {
        let mut all = Vec::new();
        for request in requests {
            let expected = Expectations::of(request, ws);
            assert!(
                holds(&expected.expects()),
                "{request}: {:?}",
                expected.expects()
            );
            all.push(expected);
        }
        all
    }

    #[test]
    fn a_spelling_corrected_in_any_language_is_expected_gone_and_there() {
        let (_dir, ws) = workspace_with(&[("docs.txt", "We recieve mail.\n")]);
        expect_first(
            &ws,
            &[
                "Corrija o erro de digitação recieve para receive em docs.txt.",
                "Fix the typo recieve to receive in docs.txt",
                "Fix the typo in docs.txt: recieve → receive",
            ],
            &[gone("recieve"), there("receive")],
        );
        // Not a fix, or words not spelled alike: nothing of the kind.
        expect_nothing_gone(
            &ws,
            &[
                "Explain why recieve to receive matters in docs.txt",
                "Fix the function greet to return a greeting in docs.txt",
                "Fix the tests in docs.txt to pass",
            ],
        );
    }

    /// Each of `requests` expects `first` before anything else.
    fn expect_first(ws: &Workspace, requests: &[&str], first: &[Expect]) {
        readings(ws, requests, |e| e.starts_with(first));
    }

    /// None of `requests` expects anything gone.
    fn expect_nothing_gone(ws: &Workspace, requests: &[&str]) {
        readings(ws, requests, |e| {
            !e.iter().any(|e| matches!(e, Expect::Gone(_)))
        });
    }

    #[test]
    fn a_request_to_add_a_line_keeps_the_lines_the_file_had() {
        let (dir, ws) = workspace_with(&[("todo.txt", "buy milk\n\n")]);
        let add = Expectations::of("Now add a second line to todo.txt: call mum", &ws);
        assert_eq!(
            add.expects(),
            [
                there("call mum"),
                Expect::Leads(vec!["buy milk".into()]),
                Expect::Kept("buy milk".into())
            ]
        );
        after_writes(
            &dir,
            &ws,
            &add,
            &[
                // The line replaced rather than added: what a 1.5B model did.
                (
                    "todo.txt",
                    "call mum\n",
                    &[
                        "the line 'buy milk' of todo.txt is gone, but the request adds a line \
                       and removes none",
                    ],
                ),
                // Both lines, the new one first: what the 1.5B model wrote when asked again.
                (
                    "todo.txt",
                    "call mum\nbuy milk\n",
                    &[
                        "the lines todo.txt had no longer come first, but the request adds a \
                         line at the end",
                    ],
                ),
                ("todo.txt", "buy milk\ncall mum\n", &[]),
            ],
        );
        // A docstring is no line of the file's end ("add a one-line docstring").
        let (_d, py) = workspace_with(&[("geometry.py", "def area(w, h):\n    return w * h\n")]);
        let docstring = Expectations::of(
            "Add a one-line docstring to the function area in geometry.py.",
            &py,
        );
        assert!(
            !docstring
                .expects()
                .iter()
                .any(|e| matches!(e, Expect::Leads(_)))
        );
        // The same in Japanese: the line in corner brackets, at the end unless placed.
        let (_d, ws) = workspace_with(&[("todo.txt", "buy milk\n")]);
        let ja = Expectations::of(
            "todo.txt の最後に「call mum」という行を追加してください。",
            &ws,
        );
        assert_eq!(
            ja.expects(),
            [
                there("call mum"),
                Expect::Leads(vec!["buy milk".into()]),
                Expect::Kept("buy milk".into())
            ]
        );
        let ja_top = Expectations::of("todo.txt の先頭に「call mum」という行を追加して", &ws);
        assert_eq!(
            ja_top.expects(),
            [there("call mum"), Expect::Kept("buy milk".into())]
        );
        // A line with a place of its own keeps the others, in any place.
        let top = Expectations::of("Add a line at the top of todo.txt: call mum", &ws);
        assert!(!top.expects().iter().any(|e| matches!(e, Expect::Leads(_))));
        // Replacing a line keeps nothing in particular.
        let replace = Expectations::of("In todo.txt, replace buy with sell.", &ws);
        assert!(
            !replace
                .expects()
                .iter()
                .any(|e| matches!(e, Expect::Kept(_)))
        );
    }
}
