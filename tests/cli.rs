//! The `agent-mcp` command line: configuration checks and the example file.

mod support;

use std::process::Command;

use agent_mcp::config::Config;
use support::harness::listening_url;

fn agent_mcp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agent-mcp"))
}

#[test]
fn the_example_config_documents_exactly_the_defaults() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/agent.yaml.example"))
        .expect("agent.yaml.example");
    // Values worked out at run time are not pinned: copying the example changes nothing.
    let defaults = Config::default();
    assert_eq!(Config::from_yaml(&text).expect("example parses"), defaults);
    let tree: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("yaml");
    for (section, key) in [
        ("ollama", "url"),
        ("agent", "workspace"),
        ("store", "path"),
        ("http", "max_body_bytes"),
        ("audit", "file"),
    ] {
        assert!(
            tree[section].get(key).is_none(),
            "agent.yaml.example pins {section}.{key}, whose default is derived at run time; \
             leave it commented"
        );
        assert!(
            text.contains(&format!("# {key}: ")),
            "agent.yaml.example does not show {section}.{key} (commented)"
        );
    }
    // Every key of the effective configuration appears in the example.
    let effective = serde_yaml_ng::to_string(&defaults).unwrap();
    for line in effective.lines() {
        let key = line.split(':').next().unwrap().trim();
        if !key.is_empty() && !key.starts_with('-') {
            assert!(
                text.contains(&format!("{key}:")),
                "agent.yaml.example lacks {key}"
            );
        }
    }
}

/// A user who exports `OLLAMA_HOST` and copies the example to ./agent.yaml gets that Ollama:
/// a task runs to `completed` against it, and check-config says where the URL came from.
#[tokio::test]
async fn the_copied_example_talks_to_ollama_host() {
    let fake = support::fake_ollama::FakeOllama::start_with(
        support::fake_ollama::FakeConfig::default().with_model("qwen3:8b"),
    )
    .await;
    // Ollama's own form: host:port, no scheme.
    let host = fake.url().trim_start_matches("http://").to_owned();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/agent.yaml.example"),
        dir.path().join("agent.yaml"),
    )
    .unwrap();
    let state = dir.path().join("state");
    let out = agent_mcp()
        .arg("check-config")
        .current_dir(dir.path())
        .env("OLLAMA_HOST", &host)
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    let url_line = printed
        .lines()
        .find(|l| l.trim_start().starts_with("url:"))
        .unwrap_or_default();
    assert_eq!(
        url_line.trim(),
        format!("url: http://{host}  # environment OLLAMA_HOST={host}"),
        "{printed}"
    );
    assert!(
        printed.contains("model: qwen3:8b  # file agent.yaml"),
        "{printed}"
    );

    // The real server, in that folder, with nothing else set.
    let mut serve = serve_command(&["serve", "--bind", "127.0.0.1:0"]);
    serve
        .current_dir(dir.path())
        .env("OLLAMA_HOST", &host)
        .env("XDG_STATE_HOME", &state);
    let (_child, url) = start_serving(serve).await;
    let client = support::harness::HttpClient::new(&url);
    let task_id = client.agent_run("say hello").await;
    let text = support::harness::wait_terminal(|| client.agent_status(&task_id)).await;
    assert!(text.contains("status: completed"), "{text}");
    assert!(text.contains("Hello from the fake model."), "{text}");
    assert!(fake.chat_count() >= 1, "the task talked to OLLAMA_HOST");
    // The default database is outside the folder the server (and its agent) works in.
    assert!(!dir.path().join(".agent-mcp").exists());
    assert!(state.join("agent-mcp/workspaces").is_dir());
}

/// `agent-mcp` with `args`, logging at info to a piped stderr, killed when dropped.
fn serve_command(args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-mcp"));
    cmd.args(args)
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Spawns `cmd` and waits until it listens; the child and its MCP URL.
async fn start_serving(mut cmd: tokio::process::Command) -> (tokio::process::Child, String) {
    let mut child = cmd.spawn().unwrap();
    let url = listening_url(&mut child).await;
    (child, url)
}

/// The README's first command, `agent-mcp serve`, answers MCP on loopback and stops cleanly on
/// SIGTERM.
#[tokio::test]
async fn serve_answers_on_loopback_and_stops_on_sigterm() {
    let fake = support::fake_ollama::FakeOllama::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = support::harness::test_config(&fake.url());
    let path = support::harness::write_config(&dir, &config);
    let mut serve = serve_command(&["serve", "--bind", "127.0.0.1:0", "--config"]);
    serve.arg(&path);
    let (mut child, url) = start_serving(serve).await;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let client = support::harness::HttpClient::new(&url);
    let r = client.modern("tools/list", serde_json::json!({})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["result"]["tools"].as_array().unwrap().len(), 2);
    // Other paths are not the MCP endpoint.
    let other = reqwest::get(url.replace("/mcp", "/other")).await.unwrap();
    assert_eq!(other.status(), 404);

    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .expect("exit within 20 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// What a command-line run must end with.
#[derive(Clone, Copy, Debug)]
enum Exit {
    Success,
    Failure,
    Code(i32),
}

/// One `agent-mcp` run in a fresh folder (its working directory), and what it must print.
/// `{dir}` in `args`, `env` and the expected texts stands for that folder.
struct CliCase {
    name: &'static str,
    /// Files written into the folder first: (relative path, contents).
    files: &'static [(&'static str, &'static str)],
    /// An `agent.yaml` written into the folder and passed with `--config` after `args`.
    config: Option<&'static str>,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    env_remove: &'static [&'static str],
    exit: Exit,
    stdout_has: &'static [&'static str],
    stdout_lacks: &'static [&'static str],
    stderr_has: &'static [&'static str],
    /// Any further check of the output.
    check: Option<fn(&std::process::Output)>,
}

const CASE: CliCase = CliCase {
    name: "",
    files: &[],
    config: None,
    args: &["check-config"],
    env: &[],
    env_remove: &[],
    exit: Exit::Success,
    stdout_has: &[],
    stdout_lacks: &[],
    stderr_has: &[],
    check: None,
};

/// A token hash that check-config must not print.
macro_rules! token_hash {
    () => {
        "abababababababababababababababababababababababababababababababab"
    };
}

const CLI_CASES: &[CliCase] = &[
    CliCase {
        name: "serve refuses a static token name with ':' (kept for OAuth callers), exit 2",
        config: Some(concat!(
            "auth:\n  tokens:\n    - {name: \"oauth:https://as.example#bot\", sha256: ",
            token_hash!(),
            "}\n"
        )),
        args: &["serve", "--bind", "127.0.0.1:0"],
        exit: Exit::Code(2),
        stderr_has: &[
            "auth.tokens: entry 0 is named \"oauth:https://as.example#bot\", with a ':'",
            "give the token a name without ':'",
        ],
        ..CASE
    },
    CliCase {
        name: "serve with auth.oauth on every address needs auth.oauth.resource, exit 2",
        config: Some("auth:\n  oauth:\n    issuer: https://auth.example.com\n"),
        args: &["serve", "--bind", "0.0.0.0:0"],
        exit: Exit::Code(2),
        stderr_has: &["auth.oauth.resource: must be set when http.bind is 0.0.0.0:0"],
        ..CASE
    },
    CliCase {
        name: "check-config names a bad value's key and exits 2",
        config: Some("ollama:\n  temperature: 9\n"),
        exit: Exit::Code(2),
        stderr_has: &["ollama.temperature"],
        ..CASE
    },
    CliCase {
        name: "audit.max_bytes without audit.file is shown to have no effect",
        args: &["check-config"],
        config: Some("audit:\n  max_bytes: 10 MiB\n"),
        exit: Exit::Success,
        stdout_has: &[
            "max_bytes: 10 MiB  # file ",
            "(no effect while audit lines go to stderr)",
        ],
        ..CASE
    },
    CliCase {
        name: "a tiny audit.max_bytes is refused with the minimum",
        config: Some("audit:\n  file: a.jsonl\n  max_bytes: 1 KiB\n"),
        exit: Exit::Code(2),
        stderr_has: &["audit.max_bytes: must be at least 64 KiB, got 1024 bytes"],
        ..CASE
    },
    CliCase {
        name: "audit.keep 0 is refused",
        env: &[("AGENT_MCP_AUDIT_KEEP", "0")],
        exit: Exit::Code(2),
        stderr_has: &["audit.keep: must be from 1 through 1000"],
        ..CASE
    },
    CliCase {
        name: "check-config says what a null audit.max_bytes means",
        config: Some("audit:\n  file: a.jsonl\n  max_bytes: null\n"),
        stdout_has: &["no size limit; SIGHUP reopens audit.file"],
        ..CASE
    },
    CliCase {
        name: "audit.file rotates by size by default",
        config: Some("audit:\n  file: a.jsonl\n"),
        stdout_has: &["max_bytes: 100 MiB  # default"],
        ..CASE
    },
    CliCase {
        name: "audit.max_bytes from the environment",
        env: &[
            ("AGENT_MCP_AUDIT_MAX_BYTES", "100 MiB"),
            ("AGENT_MCP_AUDIT_FILE", "{dir}/a.jsonl"),
        ],
        check: Some(|out| {
            let printed = Config::from_yaml(&String::from_utf8_lossy(&out.stdout)).unwrap();
            assert_eq!(printed.audit.max_bytes, Some(bytesize::ByteSize::mib(100)));
        }),
        ..CASE
    },
    CliCase {
        name: "check-config names an unknown key and exits 2",
        config: Some("http:\n  bnid: 127.0.0.1:1\n"),
        exit: Exit::Code(2),
        stderr_has: &["bnid"],
        ..CASE
    },
    CliCase {
        name: "check-config prints the effective configuration, which parses",
        config: Some("ollama:\n  model: llama3.2\n"),
        check: Some(|out| {
            let printed = String::from_utf8_lossy(&out.stdout);
            let reparsed = Config::from_yaml(&printed).expect("printed config parses");
            assert_eq!(reparsed.ollama.model, "llama3.2");
        }),
        ..CASE
    },
    CliCase {
        name: "without a config file the defaults apply",
        env_remove: &["OLLAMA_HOST"],
        stdout_has: &["url: http://127.0.0.1:11434", "bind: 127.0.0.1:8080"],
        ..CASE
    },
    CliCase {
        name: "OLLAMA_HOST supplies the url",
        env: &[("OLLAMA_HOST", "0.0.0.0:11500")],
        stdout_has: &["url: http://127.0.0.1:11500"],
        ..CASE
    },
    CliCase {
        name: "the environment overrides scalar keys",
        env: &[
            ("AGENT_MCP_OLLAMA_MODEL", "from-env"),
            ("AGENT_MCP_MCP_IMAGES_MAX_COUNT", "2"),
            ("AGENT_MCP_HTTP_BIND", "127.0.0.1:9191"),
        ],
        check: Some(|out| {
            let printed = Config::from_yaml(&String::from_utf8_lossy(&out.stdout)).unwrap();
            assert_eq!(printed.ollama.model, "from-env");
            assert_eq!(printed.mcp.images.max_count, 2);
            assert_eq!(printed.http.bind.port(), 9191);
        }),
        ..CASE
    },
    CliCase {
        name: "a bad environment override is named and exits 2",
        env: &[("AGENT_MCP_OLLAMA_TEMPERATURE", "hot")],
        exit: Exit::Code(2),
        stderr_has: &["AGENT_MCP_OLLAMA_TEMPERATURE"],
        ..CASE
    },
    CliCase {
        name: "check-config redacts token hashes",
        config: Some(concat!(
            "auth:\n  tokens:\n    - name: ci\n      sha256: ",
            token_hash!(),
            "\n"
        )),
        stdout_has: &["name: ci", "<redacted>"],
        stdout_lacks: &[token_hash!()],
        ..CASE
    },
    CliCase {
        name: "--log-format json writes one object per line",
        args: &["--log-format", "json", "check-config"],
        env: &[("AGENT_MCP_NOT_A_KEY", "1")],
        check: Some(|out| {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let line = stderr.lines().next().expect("a warning line");
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON log line");
            assert_eq!(v["level"], "WARN");
            assert!(
                v["fields"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("AGENT_MCP_NOT_A_KEY")
            );
        }),
        ..CASE
    },
    CliCase {
        name: "check-config never prints the PostgreSQL password, from the environment either",
        env: &[
            ("AGENT_MCP_STORE_BACKEND", "postgres"),
            (
                "AGENT_MCP_STORE_URL",
                "postgres://agent:hunter2-secret@127.0.0.1:5432/agent_mcp",
            ),
        ],
        stdout_has: &[
            "backend: postgres",
            "url: postgres://agent:<redacted>@127.0.0.1:5432/agent_mcp",
            "# environment AGENT_MCP_STORE_URL",
        ],
        stdout_lacks: &["hunter2-secret"],
        ..CASE
    },
    CliCase {
        name: "store.url without store.backend postgres is refused, not ignored",
        env: &[("AGENT_MCP_STORE_URL", "postgres://a@127.0.0.1/x")],
        exit: Exit::Code(2),
        stderr_has: &["store.url", "store.backend"],
        ..CASE
    },
    CliCase {
        name: "store.backend postgres without store.url says what to set",
        env: &[("AGENT_MCP_STORE_BACKEND", "postgres")],
        exit: Exit::Code(2),
        stderr_has: &["store.url", "postgres://"],
        ..CASE
    },
    CliCase {
        name: "a store.timeout outside 100ms..store.lease is refused, saying the range",
        env: &[
            ("AGENT_MCP_STORE_BACKEND", "postgres"),
            ("AGENT_MCP_STORE_URL", "postgres://a@127.0.0.1/x"),
            ("AGENT_MCP_STORE_TIMEOUT", "30s"),
        ],
        exit: Exit::Code(2),
        stderr_has: &[
            "store.timeout",
            "between 100ms and store.lease (10s)",
            "got 30s",
        ],
        ..CASE
    },
    CliCase {
        name: "a PostgreSQL URL asking for TLS is refused, without its password",
        config: Some(
            "store:\n  backend: postgres\n  url: postgres://a:hunter2-secret@db/x?sslmode=require\n",
        ),
        exit: Exit::Code(2),
        stderr_has: &["store.url", "TLS", "<redacted>"],
        check: Some(|out| {
            assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2-secret"));
        }),
        ..CASE
    },
    CliCase {
        name: "the server says so when PostgreSQL is unreachable, without the password",
        args: &["stdio"],
        env: &[
            ("AGENT_MCP_STORE_BACKEND", "postgres"),
            // Port 9 (discard): nothing listens there on loopback.
            (
                "AGENT_MCP_STORE_URL",
                "postgres://agent:hunter2-secret@127.0.0.1:9/agent_mcp",
            ),
        ],
        exit: Exit::Failure,
        stderr_has: &["PostgreSQL at postgres://agent:<redacted>@127.0.0.1:9/agent_mcp"],
        check: Some(|out| {
            assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2-secret"));
        }),
        ..CASE
    },
    // An `audit.file` that cannot be opened stops the server at start with the key, the path
    // and what to do, rather than moving the audit trail elsewhere.
    CliCase {
        name: "the server refuses an audit file it cannot open",
        // A regular file where a folder of the path should be.
        files: &[("not-a-folder", "x")],
        args: &["stdio"],
        env: &[
            ("AGENT_MCP_STORE_BACKEND", "memory"),
            ("AGENT_MCP_AUDIT_FILE", "{dir}/not-a-folder/audit.jsonl"),
        ],
        exit: Exit::Failure,
        stderr_has: &[
            "cannot open audit.file {dir}/not-a-folder/audit.jsonl",
            "leave audit.file unset",
        ],
        ..CASE
    },
];

#[test]
fn check_config_and_startup_runs() {
    for case in CLI_CASES {
        let name = case.name;
        let dir = tempfile::tempdir().unwrap();
        let at = |text: &str| text.replace("{dir}", &dir.path().display().to_string());
        for (path, contents) in case.files {
            std::fs::write(dir.path().join(path), contents).unwrap();
        }
        let mut cmd = agent_mcp();
        cmd.args(case.args.iter().map(|a| at(a)));
        if let Some(contents) = case.config {
            let path = dir.path().join("agent.yaml");
            std::fs::write(&path, contents).unwrap();
            cmd.arg("--config").arg(path);
        }
        cmd.current_dir(dir.path())
            .stdin(std::process::Stdio::null());
        for (key, value) in case.env {
            cmd.env(key, at(value));
        }
        for key in case.env_remove {
            cmd.env_remove(key);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match case.exit {
            Exit::Success => assert!(out.status.success(), "{name}: {}\n{stderr}", out.status),
            Exit::Failure => assert!(!out.status.success(), "{name}: succeeded"),
            Exit::Code(code) => {
                assert_eq!(out.status.code(), Some(code), "{name}: {stderr}")
            }
        }
        for text in case.stdout_has {
            assert!(
                stdout.contains(&at(text)),
                "{name}: no {text:?} in\n{stdout}"
            );
        }
        for text in case.stdout_lacks {
            assert!(!stdout.contains(&at(text)), "{name}: {text:?} in\n{stdout}");
        }
        for text in case.stderr_has {
            assert!(
                stderr.contains(&at(text)),
                "{name}: no {text:?} in\n{stderr}"
            );
        }
        if let Some(check) = case.check {
            // A failure inside names the case too.
            let checked = std::panic::catch_unwind(|| check(&out));
            assert!(checked.is_ok(), "{name}: the check above failed");
        }
    }
}
