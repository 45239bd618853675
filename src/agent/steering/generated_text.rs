//! Generated text for the property tests: what steering's text helpers are given in their
//! own properties (`props.rs`) and what the whole agent is given end to end
//! (`tests/any_text.rs`, which includes this file by `#[path]`).

use proptest::prelude::*;

/// Pieces the generated texts are made of: Japanese, emoji (with joiners and skin tones),
/// combining marks, right-to-left text and its override marks, and the ASCII the helpers look
/// for (paths, backticks, JSON, tags, fences), and requests in several languages (with letters whose lower case is longer than they are: `İ`, `ẞ`), and broken JSON.
pub const PIECES: [&str; 54] = [
    "プロジェクトのテスト失敗を調査し、原因を修正してください。",
    "この関数が何をするか",
    "この関数が何をするか一文で説明してください。",
    "ファイル",
    "設定",
    "👨‍👩‍👧",
    "👍🏽",
    "🙂",
    "e\u{301}",
    "\u{338}",
    "a\u{20dd}",
    "שלום",
    "مرحبا",
    "\u{202e}",
    "\u{200f}",
    "\u{feff}",
    " ",
    "\n",
    ".",
    "/",
    "\\",
    "`",
    "'",
    "\"",
    "a.txt",
    "notes/メモ.md",
    "メモ.md",
    "README",
    "the",
    "for example",
    "write",
    "fix",
    "read_file",
    "{\"name\": \"read_file\", \"arguments\": {\"path\": \"",
    "\"}}",
    "{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"x\"y\"}}",
    "<tool_call>",
    "</tool_response>",
    "```",
    "```json\n",
    "Renombra la función ",
    " a ",
    "Переименуйте функцию ",
    " в ",
    "Benenne die Funktion ",
    " in ",
    "修复",
    "测试失败",
    "수정해 주세요",
    "테스트가 ",
    " — ",
    "İ",
    "ẞ",
    "the tests fail",
];

/// Any text of at most `most` parts, each a piece of [`PIECES`], one arbitrary character (NUL
/// only when `nul`), or up to `run` other printable characters.
pub fn text_of(most: usize, run: usize, nul: bool) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(&PIECES[..]).prop_map(str::to_owned),
            any::<char>()
                .prop_filter("no NUL", move |c| nul || *c != '\0')
                .prop_map(|c| c.to_string()),
            proptest::string::string_regex(&format!("\\PC{{0,{run}}}")).expect("a regex"),
        ],
        0..most,
    )
    .prop_map(|pieces| pieces.concat())
}
