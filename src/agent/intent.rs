//! Whether a request asks for the workspace to be changed ("fix the bug", "rename f to g",
//! "VERSION を更新してください") rather than for an answer ("how do I create a file?",
//! "この関数が何をするか説明して").
//!
//! A task asked for a change that changed nothing has not done its work, whatever its answer
//! says (the runner fails it). Reading intent from natural language is a judgement, so this
//! errs towards "no change asked": a request counts only when one of its clauses starts with
//! a verb that changes things (or, in Japanese, a sentence carries one), that clause is not a
//! question, and the request names something to change: a file, or code ("the function",
//! "the tests"). "Write a haiku" and "add 2 and 3" ask for nothing on disk.
//!
//! ```
//! use agent_mcp::agent::asks_for_change;
//! assert!(asks_for_change("Fix the bug that makes python3 -m unittest fail."));
//! assert!(asks_for_change("Tell me the port in PORT.txt, and create notes/todo.md."));
//! assert!(!asks_for_change("How do I create a file data.json from a shell?"));
//! assert!(asks_for_change("プロジェクトのテスト失敗を調査し、原因を修正してください。"));
//! assert!(!asks_for_change("この関数が何をするか一文で説明してください。"));
//! ```

/// Verbs that start a clause asking for a change (lowercase).
const CHANGE_VERBS: [&str; 34] = [
    "add",
    "append",
    "apply",
    "bump",
    "change",
    "convert",
    "correct",
    "create",
    "delete",
    "downgrade",
    "edit",
    "fix",
    "generate",
    "implement",
    "insert",
    "merge",
    "modify",
    "move",
    "patch",
    "put",
    "refactor",
    "remove",
    "rename",
    "repair",
    "replace",
    "rewrite",
    "save",
    "set",
    "store",
    "update",
    "upgrade",
    "write",
    "drop",
    "uncomment",
];

/// Words a clause may start with before its verb.
const FILLERS: [&str; 10] = [
    "please", "now", "then", "also", "and", "kindly", "just", "first", "finally", "next",
];

/// Words that make a clause a question when it starts with one.
const QUESTION_WORDS: [&str; 17] = [
    "how", "what", "why", "which", "where", "when", "who", "can", "could", "would", "should", "is",
    "are", "do", "does", "did", "will",
];

/// Things a change is made to, besides a file name (English and Japanese).
const CODE_NOUNS: [&str; 40] = [
    "file",
    "files",
    "function",
    "functions",
    "method",
    "class",
    "test",
    "tests",
    "bug",
    "line",
    "lines",
    "docstring",
    "comment",
    "import",
    "variable",
    "field",
    "key",
    "version",
    "module",
    "code",
    "script",
    "config",
    "setting",
    "project",
    "readme",
    "changelog",
    "folder",
    "directory",
    "ファイル",
    "関数",
    "テスト",
    "コード",
    "バグ",
    "行",
    "クラス",
    "バージョン",
    "設定",
    "プロジェクト",
    "メソッド",
    "変数",
];

/// Japanese stems of verbs asking for a change.
const JA_CHANGE: [&str; 22] = [
    "修正",
    "直し",
    "直して",
    "変更",
    "追加",
    "削除",
    "作成",
    "作って",
    "作り",
    "書いて",
    "書き込",
    "書き換",
    "更新",
    "置き換",
    "置換",
    "実装",
    "名前を変",
    "改名",
    "保存",
    "消して",
    "取り除",
    "上げて",
];

/// What makes a Japanese sentence a question or a request for an explanation.
const JA_QUESTION: [&str; 8] = [
    "教えて",
    "説明",
    "ですか",
    "ますか",
    "でしょうか",
    "か？",
    "？",
    "方法",
];

/// Whether `request` asks for the workspace to change (see the module's documentation).
pub fn asks_for_change(request: &str) -> bool {
    names_something_to_change(request) && (english_change(request) || japanese_change(request))
}

fn english_change(request: &str) -> bool {
    sentences(request).any(|(sentence, question)| {
        !question
            && clauses(sentence).any(|clause| {
                let words: Vec<String> = clause
                    .split(|c: char| !(c.is_alphanumeric() || c == '\''))
                    .filter(|w| !w.is_empty())
                    .map(str::to_lowercase)
                    .collect();
                let mut words = words.iter().map(String::as_str);
                let first = words.find(|w| !FILLERS.contains(w));
                first.is_some_and(|w| CHANGE_VERBS.contains(&w) && !QUESTION_WORDS.contains(&w))
            })
    })
}

fn japanese_change(request: &str) -> bool {
    request
        .split(['。', '！', '!', '\n'])
        .filter(|s| !JA_QUESTION.iter().any(|q| s.contains(q)))
        .any(|s| JA_CHANGE.iter().any(|v| s.contains(v)))
}

/// The request's sentences, each with whether it is a question (ends with `?`).
fn sentences(text: &str) -> impl Iterator<Item = (&str, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        // A `.` inside a word (`calc.py`, `1.4.2`) ends no sentence.
        let ends = match c {
            '?' | '!' | '\n' | ';' | '？' | '。' => true,
            '.' => text[at + 1..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace),
            _ => false,
        };
        if ends {
            out.push((&text[start..at], c == '?' || c == '？'));
            start = at + c.len_utf8();
        }
    }
    out.push((&text[start..], false));
    out.into_iter()
}

/// The clauses of a sentence: split at `, `, ` and `, ` then `` and `:`.
fn clauses(sentence: &str) -> impl Iterator<Item = &str> {
    sentence
        .split([',', ':', '、'])
        .flat_map(|part| part.split(" and "))
        .flat_map(|part| part.split(" then "))
}

fn names_something_to_change(request: &str) -> bool {
    let lower = request.to_lowercase();
    let file_like = request.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| !(c.is_alphanumeric() || c == '/' || c == '_'));
        word.contains('/')
            || word.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty() && ext.chars().next().is_some_and(char::is_alphabetic)
            })
            || (word.len() >= 3 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    });
    file_like
        || CODE_NOUNS.iter().any(|noun| {
            super::steering::names_word(&lower, noun) || (!noun.is_ascii() && lower.contains(noun))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_for_a_change_are_told_apart_from_questions() {
        for (request, change) in [
            (
                "`python3 -m unittest` fails. Find the bug in calc.py and fix it so the tests pass.",
                true,
            ),
            (
                "Rename the function fetch_data to load_data everywhere it is defined or used.",
                true,
            ),
            (
                "Read the file VERSION, then write its version number into release.txt.",
                true,
            ),
            (
                "In greeting.txt, replace the word Hello with Goodbye.",
                true,
            ),
            (
                "Release 0.10.0: update the version in pyproject.toml and in README.md.",
                true,
            ),
            ("The test in test_cart.py fails. Fix cart.py.", true),
            (
                "Please add a one-line docstring to the function area in geometry.py.",
                true,
            ),
            (
                "Create a .gitignore file that ignores __pycache__/ and *.log.",
                true,
            ),
            (
                "Bump the version from 1.4.2 to 1.5.0 in both VERSION and package.json.",
                true,
            ),
            ("How do I create a file data.json from a shell?", false),
            (
                "Without using any tools, tell me in one sentence why a good summary matters.",
                false,
            ),
            (
                "My ticket is 4410. Reply with the ticket number only.",
                false,
            ),
            ("What port does config.yaml set for the server?", false),
            ("Write a haiku about autumn.", false),
            ("Add 2 and 3.", false),
            ("Can you fix calc.py?", false),
            (
                "Run `wc -l data.csv` and tell me how many lines data.csv has.",
                false,
            ),
            (
                "Use the sort command on names.txt and tell me which name comes first.",
                false,
            ),
            (
                "VERSION ファイルのバージョンを 2.0.0 から 2.0.1 に更新してください。",
                true,
            ),
            (
                "test_text.py が期待する関数 count_vowels を text.py に追加してください。",
                true,
            ),
            ("NOTE.txt を読んで、秘密の言葉を教えてください。", false),
            (
                "slugify.py の関数 slugify が何をするか一文で説明してください。",
                false,
            ),
            ("詩を作ってください。", false),
            ("", false),
        ] {
            assert_eq!(asks_for_change(request), change, "{request}");
        }
    }
}
