//! What the terminal client shows while a task runs: the `agent_status` text read back into a
//! [`StatusSnapshot`], one progress line per snapshot, and the two ways of writing it.
//!
//! The progress line is `<state> <done>/<total>[ <current_task>] tokens=<total>`, or just
//! `queued` while the task waits:
//!
//! ```text
//! queued
//! running 0/1 ollama chat tokens=0
//! completed 1/1 tokens=19
//! ```
//!
//! On a terminal ([`ProgressView::terminal`]) the line is redrawn in place (`\r`, clear line)
//! and cut to the terminal's width; elsewhere ([`ProgressView::plain`]) every change is one
//! plain line without control characters, so logs and tests can read it line by line.
//!
//! The test `a_status_text_becomes_one_progress_line` below shows both in use.

use std::io::{self, Write};

/// `\r` then "erase the whole line" (ECMA-48 EL 2).
const REDRAW: &str = "\r\x1b[2K";
/// Width assumed when `COLUMNS` does not say.
const DEFAULT_COLUMNS: usize = 80;

/// The fields of an `agent_status` text the client shows (`docs/contract.md` §3.4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusSnapshot {
    pub task_id: String,
    pub session_id: Option<String>,
    /// `queued`, `planning`, `running`, `completed`, `failed` or `cancelled`.
    pub state: String,
    /// `completed_tasks` as (done, total).
    pub steps: Option<(u64, u64)>,
    pub current_task: String,
    /// `token_usage` as (input, output, total).
    pub tokens: Option<(u64, u64, u64)>,
    pub message: String,
    /// Everything after `result:` (it may span lines).
    pub result: String,
}

impl StatusSnapshot {
    /// Reads a status text; `None` when it has no `status:` line. The not-found answer (only
    /// `task_id`, `status`, `message`) parses with `steps` and `tokens` left empty.
    pub fn parse(text: &str) -> Option<StatusSnapshot> {
        let (head, result) = match text.split_once("\nresult:") {
            Some((head, rest)) => (head, rest.strip_prefix(' ').unwrap_or(rest)),
            None => (text, ""),
        };
        let mut snapshot = StatusSnapshot {
            result: result.to_owned(),
            ..StatusSnapshot::default()
        };
        let mut has_status = false;
        for line in head.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.strip_prefix(' ').unwrap_or(value);
            match key {
                "task_id" => snapshot.task_id = value.to_owned(),
                "session_id" => snapshot.session_id = Some(value.to_owned()),
                "status" => {
                    snapshot.state = value.to_owned();
                    has_status = true;
                }
                "completed_tasks" => snapshot.steps = parse_steps(value),
                "current_task" => snapshot.current_task = value.to_owned(),
                "token_usage" => snapshot.tokens = parse_tokens(value),
                "message" => snapshot.message = value.to_owned(),
                _ => {}
            }
        }
        has_status.then_some(snapshot)
    }

    /// `completed`, `failed` or `cancelled`: the state never changes again.
    pub fn is_terminal(&self) -> bool {
        matches!(self.state.as_str(), "completed" | "failed" | "cancelled")
    }

    /// The progress line, without control characters.
    pub fn progress_line(&self) -> String {
        let mut line = clean(&self.state);
        if self.state == "queued" {
            return line;
        }
        if let Some((done, total)) = self.steps {
            line.push_str(&format!(" {done}/{total}"));
        }
        let current = clean(self.current_task.trim());
        if !current.is_empty() {
            line.push(' ');
            line.push_str(&current);
        }
        if let Some((_, _, total)) = self.tokens {
            line.push_str(&format!(" tokens={total}"));
        }
        line
    }
}

fn parse_steps(value: &str) -> Option<(u64, u64)> {
    let (done, total) = value.split_once('/')?;
    Some((done.trim().parse().ok()?, total.trim().parse().ok()?))
}

fn parse_tokens(value: &str) -> Option<(u64, u64, u64)> {
    let mut input = None;
    let mut output = None;
    let mut total = None;
    for part in value.split_whitespace() {
        match part.split_once('=') {
            Some(("input", n)) => input = n.parse().ok(),
            Some(("output", n)) => output = n.parse().ok(),
            Some(("total", n)) => total = n.parse().ok(),
            _ => {}
        }
    }
    Some((input?, output?, total?))
}

/// Control characters (a newline in a step title, an escape sequence) become spaces.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Writes progress lines: redrawn in place on a terminal, one plain line per change elsewhere.
#[derive(Debug)]
pub struct ProgressView {
    /// `Some(columns)` on a terminal.
    terminal: Option<usize>,
    last: Option<String>,
    /// A redrawn line is on screen without its newline.
    open_line: bool,
}

impl ProgressView {
    /// For output that is not a terminal: one line per change.
    pub fn plain() -> ProgressView {
        ProgressView {
            terminal: None,
            last: None,
            open_line: false,
        }
    }

    /// For a terminal `columns` wide: one line, redrawn.
    pub fn terminal(columns: usize) -> ProgressView {
        ProgressView {
            terminal: Some(columns.max(10)),
            last: None,
            open_line: false,
        }
    }

    /// [`ProgressView::terminal`] when stdout is a terminal (width from `COLUMNS`, else 80),
    /// [`ProgressView::plain`] otherwise.
    pub fn for_stdout() -> ProgressView {
        if io::IsTerminal::is_terminal(&io::stdout()) {
            let columns = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(DEFAULT_COLUMNS);
            ProgressView::terminal(columns)
        } else {
            ProgressView::plain()
        }
    }

    /// Shows the snapshot's progress line if it differs from the last one shown.
    pub fn show(&mut self, snapshot: &StatusSnapshot, out: &mut impl Write) -> io::Result<()> {
        let line = snapshot.progress_line();
        if self.last.as_deref() == Some(line.as_str()) {
            return Ok(());
        }
        match self.terminal {
            Some(columns) => {
                // One column stays free so the cursor never wraps onto a new row.
                let fitted = fit(&line, columns.saturating_sub(1));
                write!(out, "{REDRAW}{fitted}")?;
                self.open_line = true;
            }
            None => writeln!(out, "{line}")?,
        }
        out.flush()?;
        self.last = Some(line);
        Ok(())
    }

    /// Ends a redrawn line so what follows starts on its own row (a no-op for plain output).
    pub fn finish(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.open_line {
            writeln!(out)?;
            out.flush()?;
            self.open_line = false;
        }
        Ok(())
    }
}

/// Cuts `line` to `width` characters, marking the cut with `…`.
fn fit(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_text_becomes_one_progress_line() {
        let text = "task_id: 9ab4a40b-86fe-432a-904f-8e429c01ea8b\n\
                    session_id: 2a8105cc-84f9-4d37-a5bd-e48e04654eb7\nstatus: running\n\
                    completed_tasks: 0/1\ncurrent_task: ollama chat\n\
                    token_usage: input=1536 output=284 total=1820\ncritical_path_tokens: 0\n\
                    message: タスクを実行しています。\nresult:";
        let snapshot = StatusSnapshot::parse(text).unwrap();
        let mut out = Vec::new();
        let mut view = ProgressView::plain();
        view.show(&snapshot, &mut out).unwrap();
        view.show(&snapshot, &mut out).unwrap(); // unchanged: nothing printed
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "running 0/1 ollama chat tokens=1820\n"
        );
    }

    // What the server renders for a running task (`agent::status`'s contract test).
    use crate::agent::status::tests::RUNNING;

    fn snapshot(text: &str) -> StatusSnapshot {
        StatusSnapshot::parse(text).unwrap()
    }

    fn with_state(state: &str, current: &str, tokens: u64) -> StatusSnapshot {
        StatusSnapshot {
            state: state.into(),
            steps: Some((0, 1)),
            current_task: current.into(),
            tokens: Some((tokens, 0, tokens)),
            ..StatusSnapshot::default()
        }
    }

    #[test]
    fn parses_the_contract_running_text() {
        assert_eq!(
            snapshot(RUNNING),
            StatusSnapshot {
                task_id: "9ab4a40b-86fe-432a-904f-8e429c01ea8b".into(),
                session_id: Some("2a8105cc-84f9-4d37-a5bd-e48e04654eb7".into()),
                state: "running".into(),
                steps: Some((0, 1)),
                current_task: "ollama chat".into(),
                tokens: Some((1536, 284, 1820)),
                message: "タスクを実行しています。".into(),
                result: String::new(),
            }
        );
    }

    #[test]
    fn a_result_keeps_its_lines_and_colons() {
        let text = RUNNING.replace("status: running", "status: completed")
            + " first line\nsecond: line\n\nfourth";
        let s = snapshot(&text);
        assert!(s.is_terminal());
        assert_eq!(s.result, "first line\nsecond: line\n\nfourth");
        assert_eq!(s.state, "completed");
    }

    #[test]
    fn the_not_found_text_parses_without_counts() {
        let s = snapshot(
            "task_id: 00000000-0000-0000-0000-000000000000\nstatus: failed\n\
             message: タスク 00000000-0000-0000-0000-000000000000 が見つかりません。",
        );
        assert_eq!(s.state, "failed");
        assert_eq!(s.steps, None);
        assert_eq!(s.progress_line(), "failed");
        assert!(StatusSnapshot::parse("task_id: x\nmessage: y").is_none());
    }

    #[test]
    fn progress_lines() {
        assert_eq!(with_state("queued", "", 0).progress_line(), "queued");
        assert_eq!(
            with_state("planning", "planning", 0).progress_line(),
            "planning 0/1 planning tokens=0"
        );
        assert_eq!(
            snapshot(RUNNING).progress_line(),
            "running 0/1 ollama chat tokens=1820"
        );
        let mut done = with_state("completed", "", 19);
        done.steps = Some((1, 1));
        assert_eq!(done.progress_line(), "completed 1/1 tokens=19");
        // Control characters in a step title never reach the output.
        assert_eq!(
            with_state("running", "read\nfile\x1b[2J", 5).progress_line(),
            "running 0/1 read file [2J tokens=5"
        );
    }

    #[test]
    fn plain_output_prints_each_change_once() {
        let mut out = Vec::new();
        let mut view = ProgressView::plain();
        for s in [
            with_state("queued", "", 0),
            with_state("queued", "", 0),
            with_state("running", "ollama chat", 0),
            with_state("running", "ollama chat", 0),
            with_state("running", "ollama chat", 12),
            with_state("completed", "", 12),
        ] {
            view.show(&s, &mut out).unwrap();
        }
        view.finish(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "queued\nrunning 0/1 ollama chat tokens=0\nrunning 0/1 ollama chat tokens=12\n\
             completed 0/1 tokens=12\n"
        );
    }

    #[test]
    fn terminal_output_redraws_one_line() {
        let mut out = Vec::new();
        let mut view = ProgressView::terminal(80);
        view.show(&with_state("queued", "", 0), &mut out).unwrap();
        view.show(&with_state("running", "ollama chat", 0), &mut out)
            .unwrap();
        view.show(&with_state("running", "ollama chat", 0), &mut out)
            .unwrap();
        view.finish(&mut out).unwrap();
        view.finish(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\r\x1b[2Kqueued\r\x1b[2Krunning 0/1 ollama chat tokens=0\n"
        );
    }

    #[test]
    fn terminal_output_fits_the_width() {
        let mut out = Vec::new();
        let mut view = ProgressView::terminal(20);
        view.show(
            &with_state("running", "a very long step title", 7),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\r\x1b[2Krunning 0/1 a very…"
        );
        assert_eq!(fit("short", 19), "short");
    }
}
