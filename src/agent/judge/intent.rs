//! Whether a request asks for the workspace to be changed ("fix the bug", "rename f to g",
//! "VERSION を更新してください") rather than for an answer ("how do I create a file?",
//! "この関数が何をするか説明して").
//!
//! A task asked for a change that changed nothing has not done its work, whatever its answer
//! says (the runner fails it). Reading intent from natural language is a judgement, so this
//! errs towards "no change asked": a request counts only when one of its clauses starts with
//! a verb that changes things (or, in Japanese, Chinese and Korean, a sentence carries one),
//! that clause is not a question, and the request names something to change: a file, or code
//! ("the function", "the tests"). "Write a haiku" and "add 2 and 3" ask for nothing on disk.
//! A clause that says how named code ought to behave ("count in inventory.py should return 0")
//! counts too, in a request that asks no question and for no answer. The words of each
//! language are in the engine's lexicon (English, Spanish, French, German, Portuguese,
//! Italian, Russian, Japanese, Chinese, Korean); a request in another language is read as
//! asking for an answer.
//!
//! ```
//! use agent_mcp::agent::asks_for_change;
//! assert!(asks_for_change("Fix the bug that makes python3 -m unittest fail."));
//! assert!(asks_for_change("Tell me the port in PORT.txt, and create notes/todo.md."));
//! assert!(!asks_for_change("How do I create a file data.json from a shell?"));
//! assert!(asks_for_change("プロジェクトのテスト失敗を調査し、原因を修正してください。"));
//! assert!(!asks_for_change("この関数が何をするか一文で説明してください。"));
//! assert!(asks_for_change("Corrige el error de calc.py para que pasen las pruebas."));
//! assert!(!asks_for_change("¿Qué hace la función slugify?"));
//! ```

use crate::agent::judge::lexicon::{self, Unspaced};

/// Words that make an English clause a question when it starts with one (other languages'
/// questions end with `?`, or start with `¿`).
const QUESTION_WORDS: [&str; 17] = [
    "how", "what", "why", "which", "where", "when", "who", "can", "could", "would", "should", "is",
    "are", "do", "does", "did", "will",
];

/// Whether `request` asks for the workspace to change (see the module's documentation).
pub fn asks_for_change(request: &str) -> bool {
    names_something_to_change(request) && (spaced_change(request) || unspaced_change(request))
}

/// A clause's words, lower case.
fn words(clause: &str) -> Vec<String> {
    clause
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(|w| w.replace('’', "'").to_lowercase())
        .collect()
}

/// The first word of a clause that is no filler ("please", "bitte", "por favor").
fn first_word(words: &[String]) -> Option<&str> {
    words
        .iter()
        .map(String::as_str)
        .find(|w| !lexicon::is_filler(w))
}

/// A language written with spaces: a clause that starts with a change verb, in a sentence that
/// is no question; or a clause that says how named code ought to behave ("count in
/// inventory.py should return 0"), in a request that asks no question and for no answer.
fn spaced_change(request: &str) -> bool {
    let sentences: Vec<(&str, bool)> = sentences(request).collect();
    let imperative = sentences.iter().any(|(sentence, question)| {
        !question
            && clauses(sentence).any(|clause| {
                first_word(&words(clause))
                    .is_some_and(|w| lexicon::is_change_verb(w) && !QUESTION_WORDS.contains(&w))
            })
    });
    if imperative {
        return true;
    }
    let asks = sentences.iter().any(|(sentence, question)| {
        *question
            || clauses(sentence).any(|clause| {
                first_word(&words(clause))
                    .is_some_and(|w| lexicon::is_tell_verb(w) || QUESTION_WORDS.contains(&w))
            })
    });
    !asks
        && sentences
            .iter()
            .flat_map(|(sentence, _)| clauses(sentence))
            .any(states_behaviour)
}

/// A clause in which named code ("inventory.py", "the function", `count()`) is followed by a
/// modal ("should", "muss", "doit"): a statement of what the code must do.
fn states_behaviour(clause: &str) -> bool {
    let raw: Vec<&str> = clause.split_whitespace().collect();
    raw.windows(2).any(|pair| {
        let subject = pair[0].trim_matches(|c: char| !(c.is_alphanumeric() || "._/()".contains(c)));
        let modal = pair[1]
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        lexicon::is_modal(&modal)
            && (file_like(subject) || subject.ends_with(')') || is_noun(subject))
    })
}

/// The language of a sentence without spaces, by its script: kana is Japanese, Hangul is
/// Korean, Han characters alone are Chinese.
fn unspaced_language(sentence: &str) -> Option<&'static Unspaced> {
    let [japanese, chinese, korean] = &lexicon::UNSPACED;
    let kana = |c: char| matches!(c, '\u{3040}'..='\u{30ff}');
    let hangul = |c: char| matches!(c, '\u{ac00}'..='\u{d7af}' | '\u{1100}'..='\u{11ff}');
    let han = |c: char| matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3400}'..='\u{4dbf}');
    if sentence.chars().any(kana) {
        Some(japanese)
    } else if sentence.chars().any(hangul) {
        Some(korean)
    } else if sentence.chars().any(han) {
        Some(chinese)
    } else {
        None
    }
}

/// Japanese, Chinese, Korean: a sentence that carries a change stem and no question marker
/// of its language.
fn unspaced_change(request: &str) -> bool {
    unspaced_sentence_with(request, |l| l.change)
}

/// Whether `clause` asks, in a language without spaces, for the files it names to be fixed in
/// place (修正して, 修复, 수정해): a sentence of it carries a fix stem and no question marker.
pub(crate) fn unspaced_fix(clause: &str) -> bool {
    unspaced_sentence_with(clause, |l| l.fix)
}

/// Whether a sentence of `text` in a language without spaces holds one of the stems `stems`
/// picks from its language, and none of its question markers.
fn unspaced_sentence_with(text: &str, stems: fn(&Unspaced) -> &'static [&'static str]) -> bool {
    text.split_inclusive(['。', '！', '!', '\n', '？', '?'])
        .any(|sentence| {
            unspaced_language(sentence).is_some_and(|l| {
                !l.question.iter().any(|q| sentence.contains(q))
                    && stems(l).iter().any(|v| sentence.contains(v))
            })
        })
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

/// The clauses of a sentence: split at `,`, `:`, `、`, a dash (`—`, `–`), ` and ` and
/// ` then `.
fn clauses(sentence: &str) -> impl Iterator<Item = &str> {
    sentence
        .split([',', ':', '、', '—', '–'])
        .flat_map(|part| part.split(" and "))
        .flat_map(|part| part.split(" then "))
}

/// A word that names a file: with a `/`, an extension, or in capitals (`VERSION`).
fn file_like(word: &str) -> bool {
    let word = word.trim_matches(|c: char| !(c.is_alphanumeric() || c == '/' || c == '_'));
    word.contains('/')
        || word.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && ext.chars().next().is_some_and(char::is_alphabetic)
        })
        || (word.len() >= 3 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// A noun of code in any spaced language ("function", "Datei").
fn is_noun(word: &str) -> bool {
    let word = word.to_lowercase();
    lexicon::SPACED
        .iter()
        .any(|l| l.nouns.contains(&word.as_str()))
}

fn names_something_to_change(request: &str) -> bool {
    let lower = request.to_lowercase();
    let words: std::collections::HashSet<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    request.split_whitespace().any(file_like)
        || lexicon::SPACED
            .iter()
            .any(|l| l.nouns.iter().any(|noun| words.contains(noun)))
        || lexicon::UNSPACED
            .iter()
            .any(|l| l.nouns.iter().any(|noun| request.contains(noun)))
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
            // Other languages: imperatives, and questions that name the same things.
            (
                "Corrige el error en calc.py para que pasen las pruebas.",
                true,
            ),
            ("Por favor, añade la función double a utils.py.", true),
            ("¿Cómo creo el archivo data.json desde una terminal?", false),
            ("Dime qué puerto usa config.yaml.", false),
            ("Corrigez la fonction total dans cart.py.", true),
            ("Veuillez renommer la fonction fetch en load.", true),
            ("Que fait la fonction slugify dans slugify.py ?", false),
            ("Bitte behebe den Fehler in calc.py.", true),
            ("Benenne die Funktion parse in load um.", true),
            ("Erkläre, was die Funktion parse in parse.py macht.", false),
            ("Adicione a função double em utils.py.", true),
            ("O que faz a função slugify?", false),
            ("Aggiorna la versione in VERSION a 2.0.0.", true),
            ("Cosa fa la funzione slugify in slugify.py?", false),
            ("Исправьте ошибку в temp.py, чтобы тесты проходили.", true),
            ("Что делает функция slugify в slugify.py?", false),
            ("修复 discount.py 中的错误，让测试通过。", true),
            ("discount.py 里的函数是做什么的？", false),
            ("请解释 discount.py 中的函数。", false),
            ("calc.py 의 버그를 수정해 주세요.", true),
            ("calc.py 의 함수가 무엇을 하는지 설명해 주세요.", false),
            // Japanese stems that are Chinese stems too are read as Japanese in Japanese.
            ("calc.py の修正方法を教えてください。", false),
            // How named code ought to behave, with no question asked.
            (
                "count in inventory.py should return 0 for a missing item; it raises KeyError.",
                true,
            ),
            ("Why should count in inventory.py return 0?", false),
            // A dash starts a clause.
            (
                "The tests fail 😢 — please fix shout.py so they pass 🙏",
                true,
            ),
            ("You must not use tools: say what README.md is for.", false),
        ] {
            assert_eq!(asks_for_change(request), change, "{request}");
        }
    }
}
