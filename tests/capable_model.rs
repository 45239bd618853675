//! The capable-model benchmark: a scripted model that does each task right the first time (as
//! `qwen3:8b` and larger models do), on the fake Ollama over real HTTP, in a real workspace.
//! The loop must make exactly the model's own calls, add nothing of its own to the
//! conversation, and return the model's answer unchanged (followed, for a task that changed
//! files, by the list of changes and how the checks ended).
//!
//! Each case runs three times: with `agent.steering: auto` against a model that reports 8B
//! parameters, and with `steering: off` against one that reports 1.5B — exact calls, answer
//! unchanged — and with `auto` against one that reports 3.2B, which gets the `files` policy:
//! extra calls allowed, never a failure, a lost write or another answer. The test prints one
//! line per case and run, then fails listing every case that did not pass.

mod support;

use std::path::Path;

use agent_mcp::config::SteeringMode;
use serde_json::{Value, json};
use support::fake_ollama::{FakeConfig, FakeOllama, Reply};
use support::harness::{HttpServer, field, result_of, test_config, wait_terminal};

/// One reply of the scripted model.
enum Turn {
    /// Tool calls, in one reply.
    Calls(Vec<(&'static str, Value)>),
    /// The final answer.
    Answer(&'static str),
}

struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    request: &'static str,
    turns: Vec<Turn>,
    /// Programs `run_command` may start.
    allow: &'static [&'static str],
    /// Files that must hold exactly this afterwards.
    after: &'static [(&'static str, &'static str)],
    /// The lines expected after the answer (`None`: the result is the answer alone).
    changes: Option<&'static str>,
    /// `agent.checks`.
    checks: &'static [&'static [&'static str]],
    /// Tool results that must be sent exactly so (by their index in the task), or start so
    /// (a text ending in `…`).
    results: &'static [(usize, &'static str)],
}

impl Default for Case {
    /// No files, no turns, nothing allowed or checked: each case sets what it needs.
    fn default() -> Self {
        Case {
            name: "",
            files: &[],
            request: "",
            turns: Vec::new(),
            allow: &[],
            after: &[],
            changes: None,
            checks: &[],
            results: &[],
        }
    }
}

fn calls(list: &[(&'static str, Value)]) -> Turn {
    Turn::Calls(list.to_vec())
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "direct-answer",
            files: &[("a.txt", "alpha\n")],
            request: "What is 2 + 2?",
            turns: vec![Turn::Answer("4.")],
            ..Case::default()
        },
        Case {
            name: "direct-answer-ja",
            files: &[("a.txt", "alpha\n")],
            request: "この関数が何をするか一文で説明してください。def add(a, b): return a + b",
            turns: vec![Turn::Answer("二つの引数を足した値を返す関数です。")],
            ..Case::default()
        },
        Case {
            name: "question-about-tools",
            files: &[("README.md", "# demo\n")],
            request: "How do I create a file data.json from a shell?",
            turns: vec![Turn::Answer(
                "Run `echo '{}' > data.json`, or `touch data.json` for an empty file.",
            )],
            ..Case::default()
        },
        Case {
            name: "which-tool-would-you-use",
            files: &[("README.md", "# demo\n")],
            request: "Which of your tools would you use to look inside a file?",
            turns: vec![Turn::Answer(
                "I would use read_file: it returns the file's text.",
            )],
            ..Case::default()
        },
        Case {
            name: "named-stem-without-tools",
            files: &[("summary.md", "# Summary\nThe quarter went well.\n")],
            request: "Without using any tools, tell me in one sentence why a good summary matters.",
            turns: vec![Turn::Answer(
                "A good summary lets a reader take in the point without reading everything.",
            )],
            ..Case::default()
        },
        Case {
            name: "carries-its-own-answer",
            files: &[("ticket.md", "# Tickets\n- 1200: done\n")],
            request: "My ticket is 4410. Reply with the ticket number only.",
            turns: vec![Turn::Answer("4410")],
            ..Case::default()
        },
        Case {
            name: "json-example-in-the-answer",
            files: &[("a.txt", "alpha\n")],
            request: "Show me, as JSON, what a call of your read_file tool for a.txt looks like. \
                      Do not call it.",
            turns: vec![Turn::Answer(
                r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#,
            )],
            ..Case::default()
        },
        Case {
            name: "read-and-answer",
            files: &[("config.yaml", "server:\n  port: 7421\n")],
            request: "What port does config.yaml set for the server?",
            turns: vec![
                calls(&[("read_file", json!({"path": "config.yaml"}))]),
                Turn::Answer("7421"),
            ],
            ..Case::default()
        },
        Case {
            name: "read-and-answer-ja",
            files: &[("NOTE.txt", "The secret word is: marigold\n")],
            request: "NOTE.txt に書かれた秘密の言葉は何ですか？",
            turns: vec![
                calls(&[("read_file", json!({"path": "NOTE.txt"}))]),
                Turn::Answer("秘密の言葉は marigold です。"),
            ],
            ..Case::default()
        },
        Case {
            name: "tool-word-quoted-from-a-file",
            files: &[(
                "README.md",
                "# Tour\nRun `list_dir` first to see the layout.\n",
            )],
            request: "What does README.md say to run first?",
            turns: vec![
                calls(&[("read_file", json!({"path": "README.md"}))]),
                Turn::Answer("It says to run `list_dir` first, to see the layout."),
            ],
            ..Case::default()
        },
        Case {
            name: "users-function-named-read-file",
            files: &[(
                "io_utils.py",
                "def read_file(path):\n    with open(path) as f:\n        return f.read().splitlines()\n\n\ndef main():\n    return read_file('config.txt')\n",
            )],
            request: "What does main in io_utils.py call, and what does that return?",
            turns: vec![
                calls(&[("read_file", json!({"path": "io_utils.py"}))]),
                Turn::Answer(
                    "main calls read_file('config.txt'), which returns the file's lines as a list.",
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "list-then-read",
            files: &[
                ("xq7_memo.txt", "password: copperleaf\n"),
                ("image.bin", "\u{1}\u{2}"),
            ],
            request: "There is one .txt file here. Tell me the password written in it.",
            turns: vec![
                calls(&[("list_dir", json!({"path": "."}))]),
                calls(&[("read_file", json!({"path": "xq7_memo.txt"}))]),
                Turn::Answer("The password is copperleaf."),
            ],
            ..Case::default()
        },
        Case {
            name: "exact-search-without-matches",
            files: &[("notes.txt", "remember: fixme later\n")],
            request: "Is there an upper-case FIXME marker anywhere in the workspace?",
            turns: vec![
                calls(&[("search_text", json!({"pattern": "FIXME"}))]),
                Turn::Answer("No: no file contains FIXME in upper case."),
            ],
            results: &[(0, "no matches for 'FIXME'")],
            ..Case::default()
        },
        Case {
            name: "missing-file-listed",
            files: &[("notes-2024.txt", "juniper\n")],
            request: "Is there a file called notes.txt here? Answer yes or no and say what is there.",
            turns: vec![
                calls(&[("list_dir", json!({"path": "."}))]),
                Turn::Answer("No. The folder holds only notes-2024.txt."),
            ],
            ..Case::default()
        },
        Case {
            name: "batched-read-and-write",
            files: &[("PORT.txt", "8080\n")],
            request: "Tell me the port in PORT.txt, and create notes/todo.md with the line start.",
            turns: vec![
                calls(&[
                    ("read_file", json!({"path": "PORT.txt"})),
                    (
                        "write_file",
                        json!({"path": "notes/todo.md", "content": "start\n"}),
                    ),
                ]),
                Turn::Answer("The port is 8080. I created notes/todo.md with the line start."),
            ],
            after: &[("notes/todo.md", "start\n")],
            changes: Some("changed: notes/todo.md (new, +1)\nchecks: none found"),
            ..Case::default()
        },
        Case {
            name: "create-a-file",
            files: &[("README.md", "# demo\n")],
            request: "Create hello.txt containing the line hi.",
            turns: vec![
                calls(&[(
                    "write_file",
                    json!({"path": "hello.txt", "content": "hi\n"}),
                )]),
                Turn::Answer("Created hello.txt with the line hi."),
            ],
            after: &[("hello.txt", "hi\n")],
            changes: Some("changed: hello.txt (new, +1)\nchecks: none found"),
            ..Case::default()
        },
        Case {
            name: "read-then-edit",
            files: &[("config.yaml", "server:\n  port: 8080\n")],
            request: "Change the port in config.yaml from 8080 to 9090.",
            turns: vec![
                calls(&[("read_file", json!({"path": "config.yaml"}))]),
                calls(&[(
                    "edit_file",
                    json!({"path": "config.yaml", "old_text": "port: 8080", "new_text": "port: 9090"}),
                )]),
                Turn::Answer("config.yaml now sets port 9090."),
            ],
            after: &[("config.yaml", "server:\n  port: 9090\n")],
            changes: Some("changed: config.yaml (+1 -1)\nchecks: none found"),
            ..Case::default()
        },
        Case {
            name: "run-a-command",
            files: &[("README.md", "# demo\n")],
            request: "Run echo hello-agent-42 and tell me what it printed.",
            turns: vec![
                calls(&[("run_command", json!({"argv": ["echo", "hello-agent-42"]}))]),
                Turn::Answer("It printed hello-agent-42."),
            ],
            allow: &["echo"],
            ..Case::default()
        },
        Case {
            name: "emoji-and-right-to-left",
            files: &[("greeting.md", "שלום 👋 مرحبا\n")],
            request: "What greeting does greeting.md hold? 🙂",
            turns: vec![
                calls(&[("read_file", json!({"path": "greeting.md"}))]),
                Turn::Answer("It holds שלום 👋 مرحبا: hello in Hebrew and Arabic."),
            ],
            ..Case::default()
        },
        Case {
            name: "fix-the-tests-ja",
            files: &[
                ("calc.py", "def add(a, b):\n    return a - b\n"),
                (
                    "test_calc.py",
                    "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
                ),
            ],
            request: "プロジェクトのテスト失敗を調査し、原因を修正してください。",
            turns: vec![
                calls(&[("read_file", json!({"path": "calc.py"}))]),
                calls(&[(
                    "edit_file",
                    json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
                )]),
                Turn::Answer("calc.py の add が引き算をしていたので、足し算に直しました。"),
            ],
            after: &[("calc.py", "def add(a, b):\n    return a + b\n")],
            // The project's tests run before the change and after it where commands are on
            // (by default, where the kernel has Landlock to confine them).
            changes: Some(if agent_mcp::agent::tools::sandbox::landlock().is_ok() {
                "changed: calc.py (+1 -1)\nchecks: 1 failing → 0 failing (python3 -m unittest); \
                 Python syntax and names (calc.py): passed"
            } else {
                "changed: calc.py (+1 -1)\nchecks: not run (commands are off: \
                 agent.commands.enabled is false, or auto on a system without Landlock)"
            }),
            ..Case::default()
        },
        Case {
            // A question in Spanish that names a file: read, answered, nothing written.
            name: "question-es",
            files: &[("config.yaml", "server:\n  port: 8080\n")],
            request: "¿Qué puerto configura config.yaml para el servidor?",
            turns: vec![
                calls(&[("read_file", json!({"path": "config.yaml"}))]),
                Turn::Answer("El puerto es 8080."),
            ],
            after: &[("config.yaml", "server:\n  port: 8080\n")],
            results: &[(0, "server:\n  port: 8080\n")],
            ..Case::default()
        },
        Case {
            // A fix asked in Chinese: read, edited, reported with what changed.
            name: "fix-zh",
            files: &[("calc.py", "def add(a, b):\n    return a - b\n")],
            request: "修复 calc.py 中 add 的错误：它在做减法。",
            turns: vec![
                calls(&[("read_file", json!({"path": "calc.py"}))]),
                calls(&[(
                    "edit_file",
                    json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
                )]),
                Turn::Answer("add 现在返回 a + b。"),
            ],
            after: &[("calc.py", "def add(a, b):\n    return a + b\n")],
            // The changed Python file's syntax and names are read where commands are on.
            changes: Some(if agent_mcp::agent::tools::sandbox::landlock().is_ok() {
                "changed: calc.py (+1 -1)\nchecks: none found; Python syntax and names \
                 (calc.py): passed"
            } else {
                "changed: calc.py (+1 -1)\nchecks: none found"
            }),
            ..Case::default()
        },
        Case {
            // A Russian request to explain code, answered from the file alone.
            name: "explain-ru",
            files: &[(
                "slug.py",
                "def slug(s):\n    return s.lower().replace(' ', '-')\n",
            )],
            request: "Объясни одним предложением, что делает функция slug в slug.py.",
            turns: vec![
                calls(&[("read_file", json!({"path": "slug.py"}))]),
                Turn::Answer("Она переводит строку в нижний регистр и заменяет пробелы дефисами."),
            ],
            ..Case::default()
        },
        Case {
            name: "missing-file-then-its-look-alike",
            files: &[("notes-2024.txt", "juniper\n")],
            request: "Read notes.txt, or the notes file that is there instead, and tell me the \
                      word in it.",
            turns: vec![
                calls(&[("read_file", json!({"path": "notes.txt"}))]),
                calls(&[("read_file", json!({"path": "notes-2024.txt"}))]),
                Turn::Answer("notes.txt is not there; notes-2024.txt says juniper."),
            ],
            results: &[
                (
                    0,
                    "error: 'notes.txt' does not exist. Did you mean 'notes-2024.txt'? Call \
                     read_file with that path.…",
                ),
                (1, "juniper\n"),
            ],
            ..Case::default()
        },
        Case {
            name: "fix-judged-by-the-checks",
            files: &[("calc.py", "def add(a, b):\n    return a - b\n")],
            request: "Fix add in calc.py: it subtracts.",
            turns: vec![
                calls(&[("read_file", json!({"path": "calc.py"}))]),
                calls(&[(
                    "edit_file",
                    json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
                )]),
                Turn::Answer("add now returns a + b."),
            ],
            after: &[("calc.py", "def add(a, b):\n    return a + b\n")],
            // The operator's checks run always; the names check where commands are on.
            changes: Some(if agent_mcp::agent::tools::sandbox::landlock().is_ok() {
                "changed: calc.py (+1 -1)\n\
                 checks: 1 failing → 0 failing (grep -q return a + b calc.py); Python syntax \
                 and names (calc.py): passed"
            } else {
                "changed: calc.py (+1 -1)\n\
                 checks: 1 failing → 0 failing (grep -q return a + b calc.py)"
            }),
            checks: &[&["grep", "-q", "return a + b", "calc.py"]],
            ..Case::default()
        },
    ]
}

/// How one case ran, and what was wrong with it.
struct Ran {
    name: &'static str,
    variant: &'static str,
    calls: usize,
    expected_calls: usize,
    problems: Vec<String>,
}

impl Ran {
    /// Its problems in one line, `-` for none.
    fn problems_said(&self) -> String {
        if self.problems.is_empty() {
            "-".to_owned()
        } else {
            self.problems.join("; ")
        }
    }
}

/// The messages the loop added to request `n + 1` beyond request `n` and the model's reply:
/// must be exactly one tool result per call of that reply.
fn check_conversation(sent: &[Value], case: &Case, problems: &mut Vec<String>) {
    for (n, turn) in case.turns.iter().enumerate() {
        let Turn::Calls(list) = turn else { continue };
        let (Some(before), Some(after)) = (sent.get(n), sent.get(n + 1)) else {
            return;
        };
        let before = before["messages"].as_array().cloned().unwrap_or_default();
        let after = after["messages"].as_array().cloned().unwrap_or_default();
        if !after.starts_with(&before) {
            problems.push(format!("call {} rewrote the earlier conversation", n + 2));
            continue;
        }
        let added = &after[before.len()..];
        let Some((said, results)) = added.split_first() else {
            problems.push(format!("call {} added nothing after call {}", n + 2, n + 1));
            continue;
        };
        let said_calls: Vec<(String, Value)> = said["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| {
                        (
                            c["function"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_owned(),
                            c["function"]["arguments"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let wanted: Vec<(String, Value)> = list
            .iter()
            .map(|(name, args)| ((*name).to_owned(), args.clone()))
            .collect();
        if said["role"] != "assistant" || said_calls != wanted {
            problems.push(format!(
                "reply {} went back as {said}, not as the model's own calls",
                n + 1
            ));
        }
        let names: Vec<&str> = results
            .iter()
            .map(|m| {
                if m["role"] == "tool" {
                    m["tool_name"].as_str().unwrap_or("?")
                } else {
                    "(a message of the loop's own)"
                }
            })
            .collect();
        let wanted_names: Vec<&str> = list.iter().map(|(name, _)| *name).collect();
        if names != wanted_names {
            problems.push(format!(
                "after reply {} the loop sent {names:?}, not one result per call {wanted_names:?}",
                n + 1
            ));
        }
    }
}

async fn run_case(case: &Case, variant: &'static str, fake: FakeOllama) -> Ran {
    let ws = tempfile::tempdir().expect("workspace");
    for (path, content) in case.files {
        let path = ws.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("folders");
        std::fs::write(path, content).expect("file");
    }
    let files_policy = variant.starts_with("files");
    if files_policy {
        // The `files` policy first reads the request in one JSON-schema call; the scripted
        // model answers it as a capable one would: a change when the case reports changes.
        let change = case.changes.is_some();
        fake.push_reply(Reply::text(
            &json!({
                "goal": "the request",
                "wants": if change { "file changes" } else { "an answer" },
                "tests": false,
                "fix_failing": false
            })
            .to_string(),
            50,
            10,
        ));
    }
    for turn in &case.turns {
        fake.push_reply(match turn {
            Turn::Calls(list) => Reply::tool_calls(list, 50, 10),
            Turn::Answer(text) => Reply::text(text, 50, 10),
        });
    }
    let mut config = test_config(&fake.url());
    config.agent.workspace = Some(ws.path().to_path_buf());
    config.rate_limit.enabled = false;
    config.agent.commands.allow = case.allow.iter().map(|p| (*p).to_owned()).collect();
    config.agent.checks = case
        .checks
        .iter()
        .map(|argv| argv.iter().map(|a| (*a).to_owned()).collect())
        .collect();
    configure(&mut config, variant);
    let server = HttpServer::start(config).await;
    let client = server.client();
    let id = client.agent_run(case.request).await;
    let done = wait_terminal(|| client.agent_status(&id)).await;
    let mut problems = Vec::new();
    let status = field(&done, "status");
    if status != "completed" {
        problems.push(format!("ended {status}: {}", result_of(&done)));
    }
    let answer = case
        .turns
        .iter()
        .find_map(|t| match t {
            Turn::Answer(text) => Some(*text),
            Turn::Calls(_) => None,
        })
        .unwrap_or_default();
    let result = result_of(&done);
    let wanted = match case.changes {
        Some(changes) => format!("{answer}\n\n{changes}"),
        None => answer.to_owned(),
    };
    let sent = fake.chat_requests();
    if files_policy {
        // Extra calls are allowed under a small model's policy; a failure, a lost write or a
        // changed answer are not.
        if status == "completed" && !result.starts_with(answer) {
            problems.push(format!("result {result:?}, not starting {answer:?}"));
        }
        check_files(ws.path(), case, &mut problems);
        return Ran {
            name: case.name,
            variant,
            calls: sent.len(),
            expected_calls: case.turns.len() + 1,
            problems,
        };
    }
    if status == "completed" && result != wanted {
        problems.push(format!("result {result:?}, not {wanted:?}"));
    }
    if sent.len() != case.turns.len() {
        problems.push(format!(
            "{} model calls, not the model's own {}",
            sent.len(),
            case.turns.len()
        ));
    }
    check_conversation(&sent, case, &mut problems);
    check_results(&sent, case, &mut problems);
    check_files(ws.path(), case, &mut problems);
    Ran {
        name: case.name,
        variant,
        calls: sent.len(),
        expected_calls: case.turns.len(),
        problems,
    }
}

fn check_results(sent: &[Value], case: &Case, problems: &mut Vec<String>) {
    let Some(last) = sent.last() else { return };
    let results: Vec<&str> = last["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    for (index, wanted) in case.results {
        let found = results.get(*index).copied().unwrap_or_default();
        let fits = match wanted.strip_suffix('…') {
            Some(start) => found.starts_with(start),
            None => found == *wanted,
        };
        if !fits {
            problems.push(format!("tool result {index} was {found:?}, not {wanted:?}"));
        }
    }
}

fn check_files(root: &Path, case: &Case, problems: &mut Vec<String>) {
    for (path, wanted) in case.after {
        let found = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        if found != *wanted {
            problems.push(format!("{path} holds {found:?}, not {wanted:?}"));
        }
    }
}

/// The configuration of a run: `auto` against an 8B model, `off` against a 1.5B one.
fn configure(config: &mut agent_mcp::config::Config, variant: &str) {
    config.agent.steering = if variant.starts_with("auto") || variant.starts_with("files") {
        SteeringMode::Auto
    } else {
        SteeringMode::Off
    };
}

fn fake_for(variant: &str) -> FakeOllama {
    let fake = FakeConfig::default();
    FakeOllama::spawn(if variant.starts_with("files") {
        fake.with_parameters("3.2B", 3_212_749_888)
    } else if variant.starts_with("auto") {
        fake.with_parameters("8.0B", 8_030_261_248)
    } else {
        fake.with_parameters("1.5B", 1_543_714_304)
    })
}

#[tokio::test]
async fn a_capable_model_is_never_steered() {
    let mut ran = Vec::new();
    for case in cases() {
        for variant in ["auto, 8B", "off, 1.5B", "files, 3B"] {
            ran.push(run_case(&case, variant, fake_for(variant)).await);
        }
    }
    println!(
        "{:<32} {:<10} {:>5} {:>8}  problems",
        "case", "run", "calls", "expected"
    );
    for r in &ran {
        println!(
            "{:<32} {:<10} {:>5} {:>8}  {}",
            r.name,
            r.variant,
            r.calls,
            r.expected_calls,
            r.problems_said()
        );
    }
    let failing: Vec<String> = ran
        .iter()
        .filter(|r| !r.problems.is_empty())
        .map(|r| format!("{} ({}): {}", r.name, r.variant, r.problems_said()))
        .collect();
    println!(
        "# capable model: {}/{} runs passed",
        ran.len() - failing.len(),
        ran.len()
    );
    assert!(failing.is_empty(), "{}", failing.join("\n"));
}
