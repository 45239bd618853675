//! Audit log rotation in the real `agent-mcp serve` under load: logrotate's rename + SIGHUP,
//! and size rotation (`audit.max_bytes`, `audit.keep`). No line may be lost or split.
#![cfg(unix)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::fake_ollama::FakeOllama;
use support::files::{file_names, ids_in, mode};
use support::harness::{ServeProcess, test_config};

/// Calls in flight at once, and in all.
const CONCURRENCY: usize = 64;
const CALLS: usize = 4000;

fn audited_config(ollama: &str, file: &Path) -> agent_mcp::config::Config {
    let mut config = test_config(ollama);
    config.audit.enabled = true;
    config.audit.file = Some(file.to_path_buf());
    config.rate_limit.enabled = false;
    config
}

/// `CALLS` audited `tools/call agent_status` requests, `CONCURRENCY` at a time; each must be
/// answered. Their JSON-RPC ids are 1..=CALLS (the client numbers its requests).
async fn load(server: &ServeProcess) {
    let client = server.client();
    let gate = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let client = client.clone();
        calls.spawn(async move {
            let task = uuid::Uuid::new_v4().to_string();
            let reply = client
                .tool_call("agent_status", json!({"task_id": task}))
                .await;
            drop(permit);
            assert_eq!(reply.status, 200, "{}", reply.text);
        });
    }
    while let Some(joined) = calls.join_next().await {
        joined.unwrap();
    }
}

fn signal(server: &ServeProcess, name: &str) {
    let pid = server.child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// The ids of every line of `files`, each line checked to be one whole audit record.
fn audited_ids(files: &[PathBuf]) -> Vec<i64> {
    ids_in(files, |record| {
        assert_eq!(record["tool"], "agent_status", "{record}")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_while_thousands_of_calls_are_in_flight_loses_and_splits_no_line() {
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let server = ServeProcess::spawn(&audited_config(&fake.url(), &path)).await;
    let rotations = 6;
    let rotator = {
        let (dir, path) = (dir.path().to_path_buf(), path.clone());
        let pid = server.child.id().expect("running").to_string();
        tokio::spawn(async move {
            let mut rotated = Vec::new();
            for n in 0..rotations {
                tokio::time::sleep(Duration::from_millis(40)).await;
                // What logrotate does: rename, then SIGHUP from postrotate.
                let to = dir.join(format!("audit.jsonl.{n}"));
                std::fs::rename(&path, &to).expect("the audit file exists again by now");
                rotated.push(to);
                let sent = std::process::Command::new("kill")
                    .args(["-HUP", &pid])
                    .status()
                    .expect("kill");
                assert!(sent.success());
                // The server reopens before it writes again (at once when idle).
                for _ in 0..2500 {
                    if path.exists() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            rotated
        })
    };
    load(&server).await;
    let mut files = rotator.await.unwrap();
    assert!(server.terminate().await.success());
    files.push(path.clone());
    let mut counts = Vec::new();
    for file in &files {
        counts.push(audited_ids(std::slice::from_ref(file)).len());
        assert_eq!(mode(file), 0o600, "{file:?}");
    }
    // The rotations happened while calls were being written, not all before or after.
    assert!(
        counts.iter().filter(|c| **c > 0).count() >= 3,
        "lines per file: {counts:?}"
    );
    let ids = audited_ids(&files);
    let unique: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), CALLS, "lines per file: {counts:?}");
    assert_eq!(unique, (1..=CALLS as i64).collect(), "every call once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn size_rotation_under_load_keeps_audit_keep_files_of_whole_lines() {
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut config = audited_config(&fake.url(), &path);
    let max_bytes = 64 * 1024;
    config.audit.max_bytes = Some(bytesize::ByteSize::b(max_bytes));
    config.audit.keep = 3;
    let server = ServeProcess::spawn(&config).await;
    // About 300 bytes a line: 4000 lines fill 64 KiB files many times over.
    load(&server).await;
    // A SIGHUP in between changes nothing about the numbering.
    signal(&server, "HUP");
    assert!(server.terminate().await.success());
    let names = file_names(dir.path());
    assert_eq!(
        names,
        [
            "audit.jsonl",
            "audit.jsonl.1",
            "audit.jsonl.2",
            "audit.jsonl.3"
        ]
    );
    let files: Vec<PathBuf> = names.iter().map(|n| dir.path().join(n)).collect();
    for file in &files {
        let len = std::fs::metadata(file).unwrap().len();
        assert!(len <= max_bytes, "{file:?}: {len} bytes");
        assert_eq!(mode(file), 0o600, "{file:?}");
    }
    let ids = audited_ids(&files);
    let unique: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "no line twice");
    // The three rotated files are (nearly) full: rotation happened at the limit.
    let kept: u64 = files[1..]
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(
        kept > 3 * (max_bytes - 1024),
        "rotated files hold {kept} bytes"
    );
}
