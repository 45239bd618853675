//! The text results of `agent_run` and `agent_status` (`docs/contract.md` §2.6, §3.4, §3.5).
//!
//! One function renders a task's status; `agent_status`, the Tasks extension's final result and
//! the terminal client all show exactly this text.

use crate::task::{Task, TaskState};

/// The human message for a state; `queue_position` (1-based) is shown while queued.
pub fn state_message(state: TaskState, queue_position: Option<usize>) -> String {
    match (state, queue_position) {
        (TaskState::Queued, Some(p)) => format!("タスクは実行待ちです（待ち順: {p}）。"),
        _ => fixed_state_message(state).to_owned(),
    }
}

/// The message of a running task whose tool call waits for a person's decision (what on is in
/// `current_task`).
pub const WAITING_FOR_APPROVAL: &str = "タスクは承認を待っています。";

/// [`state_message`] of every state but a queued task with its position.
fn fixed_state_message(state: TaskState) -> &'static str {
    match state {
        TaskState::Queued => "タスクは実行待ちです。",
        TaskState::Planning => "タスクを計画しています。",
        TaskState::Running => "タスクを実行しています。",
        TaskState::Completed => "タスクが完了しました。",
        TaskState::Failed => "タスクが失敗しました。",
        TaskState::Cancelled => "タスクは取り消されました。",
    }
}

fn line(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push(':');
    if !value.is_empty() {
        out.push(' ');
        out.push_str(value);
    }
}

/// `id` as `Display` writes it (hyphenated, lowercase), without the formatting machinery:
/// this text is rendered on every `agent_status`.
fn push_uuid(out: &mut String, id: &uuid::Uuid) {
    out.push_str(
        id.hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    );
}

/// `n` in decimal, as `Display` writes it.
fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// The `agent_status` text.
pub fn render_status(task: &Task, queue_position: Option<usize>) -> String {
    let mut out = String::with_capacity(320 + task.current_task.len() + task.result.len());
    out.push_str("task_id: ");
    push_uuid(&mut out, &task.id);
    out.push_str("\nsession_id: ");
    push_uuid(&mut out, &task.session_id);
    out.push_str("\nstatus: ");
    out.push_str(task.state.as_str());
    out.push_str("\ncompleted_tasks: ");
    push_u64(&mut out, task.steps_done.into());
    out.push('/');
    push_u64(&mut out, task.steps_total.into());
    out.push('\n');
    line(&mut out, "current_task", &task.current_task);
    out.push_str("\ntoken_usage: input=");
    push_u64(&mut out, task.tokens.input);
    out.push_str(" output=");
    push_u64(&mut out, task.tokens.output);
    out.push_str(" total=");
    push_u64(&mut out, task.tokens.total());
    out.push_str("\ncritical_path_tokens: ");
    push_u64(&mut out, task.critical_path_tokens);
    out.push('\n');
    match (task.state, queue_position) {
        (TaskState::Queued, Some(_)) => line(
            &mut out,
            "message",
            &state_message(task.state, queue_position),
        ),
        (TaskState::Running, _) if task.input.is_waiting() => {
            line(&mut out, "message", WAITING_FOR_APPROVAL)
        }
        (state, _) => line(&mut out, "message", fixed_state_message(state)),
    }
    out.push('\n');
    line(&mut out, "result", &task.result);
    out
}

/// The `agent_run` acknowledgement for clients without the Tasks extension.
pub fn render_accepted(task: &Task) -> String {
    format!(
        "task_id: {id}\nsession_id: {sid}\nstatus: {state}\nmessage: タスク {id} をセッション {sid} に登録しました。",
        id = task.id,
        sid = task.session_id,
        state = task.state,
    )
}

/// The answer for an unknown task, or one the given session does not own.
pub fn render_not_found(task_id: &str) -> String {
    format!("task_id: {task_id}\nstatus: failed\nmessage: タスク {task_id} が見つかりません。")
}

/// Parses a UUID for lookups, accepting exactly what `format: uuid` accepts.
pub use crate::mcp_tools::args::parse_uuid;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::task::TokenUsage;
    use uuid::Uuid;

    fn task() -> Task {
        let mut t = Task::new(
            Uuid::parse_str("2a8105cc-84f9-4d37-a5bd-e48e04654eb7").unwrap(),
            None,
            "x".into(),
            None,
        );
        t.id = Uuid::parse_str("9ab4a40b-86fe-432a-904f-8e429c01ea8b").unwrap();
        t
    }

    /// The contract's example task in `state`, having used `input` and `output` tokens.
    fn task_in(state: TaskState, input: u64, output: u64) -> Task {
        Task {
            state,
            tokens: TokenUsage { input, output },
            ..task()
        }
    }

    /// `render_status` as it was written with `format!`: the text must not change by a byte.
    fn formatted(task: &Task, queue_position: Option<usize>) -> String {
        format!(
            "task_id: {}\nsession_id: {}\nstatus: {}\ncompleted_tasks: {}/{}\ncurrent_task{}\n\
             token_usage: input={} output={} total={}\ncritical_path_tokens: {}\nmessage: {}\nresult{}",
            task.id,
            task.session_id,
            task.state,
            task.steps_done,
            task.steps_total,
            if task.current_task.is_empty() {
                ":".to_owned()
            } else {
                format!(": {}", task.current_task)
            },
            task.tokens.input,
            task.tokens.output,
            task.tokens.total(),
            task.critical_path_tokens,
            state_message(task.state, queue_position),
            if task.result.is_empty() {
                ":".to_owned()
            } else {
                format!(": {}", task.result)
            },
        )
    }

    #[test]
    fn the_status_text_is_the_formatted_one_for_extreme_values_and_every_state() {
        let numbers = [0u64, 1, 9, 10, 99, 1_000_000, u64::from(u32::MAX), u64::MAX];
        let mut checked = 0;
        for state in [
            TaskState::Queued,
            TaskState::Planning,
            TaskState::Running,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Cancelled,
        ] {
            for (i, &n) in numbers.iter().enumerate() {
                let mut t = task_in(state, n, numbers[numbers.len() - 1 - i]);
                t.id = Uuid::from_u128(u128::from(n) << 64 | u128::from(n));
                t.steps_done = u32::try_from(n).unwrap_or(u32::MAX);
                t.steps_total = u32::try_from(n / 2).unwrap_or(7);
                t.critical_path_tokens = n;
                t.current_task = if i % 2 == 0 {
                    String::new()
                } else {
                    "step 2".into()
                };
                t.result = if i % 3 == 0 {
                    String::new()
                } else {
                    "答え\nline".into()
                };
                for position in [None, Some(1), Some(usize::MAX)] {
                    assert_eq!(render_status(&t, position), formatted(&t, position));
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 6 * numbers.len() * 3);
    }

    #[test]
    fn running_status_matches_the_contract() {
        let mut t = task_in(TaskState::Running, 1536, 284);
        t.current_task = "ollama chat".into();
        assert_eq!(render_status(&t, None), RUNNING);
    }

    /// The contract's text of a running task; the client's parser
    /// ([`StatusSnapshot`](crate::client::progress::StatusSnapshot)) is tested on it too.
    pub(crate) const RUNNING: &str = "task_id: 9ab4a40b-86fe-432a-904f-8e429c01ea8b\n\
        session_id: 2a8105cc-84f9-4d37-a5bd-e48e04654eb7\n\
        status: running\n\
        completed_tasks: 0/1\n\
        current_task: ollama chat\n\
        token_usage: input=1536 output=284 total=1820\n\
        critical_path_tokens: 0\n\
        message: タスクを実行しています。\n\
        result:";

    #[test]
    fn completed_status_matches_the_contract() {
        let mut t = task_in(TaskState::Completed, 2048, 512);
        t.steps_done = 1;
        t.result = "修正とテストが完了しました。".into();
        assert_eq!(
            render_status(&t, None),
            "task_id: 9ab4a40b-86fe-432a-904f-8e429c01ea8b\n\
             session_id: 2a8105cc-84f9-4d37-a5bd-e48e04654eb7\n\
             status: completed\n\
             completed_tasks: 1/1\n\
             current_task:\n\
             token_usage: input=2048 output=512 total=2560\n\
             critical_path_tokens: 0\n\
             message: タスクが完了しました。\n\
             result: 修正とテストが完了しました。"
        );
    }

    #[test]
    fn accepted_and_not_found_match_the_contract() {
        assert_eq!(
            render_accepted(&task()),
            "task_id: 9ab4a40b-86fe-432a-904f-8e429c01ea8b\n\
             session_id: 2a8105cc-84f9-4d37-a5bd-e48e04654eb7\n\
             status: queued\n\
             message: タスク 9ab4a40b-86fe-432a-904f-8e429c01ea8b をセッション 2a8105cc-84f9-4d37-a5bd-e48e04654eb7 に登録しました。"
        );
        assert_eq!(
            render_not_found("00000000-0000-0000-0000-000000000000"),
            "task_id: 00000000-0000-0000-0000-000000000000\n\
             status: failed\n\
             message: タスク 00000000-0000-0000-0000-000000000000 が見つかりません。"
        );
    }

    #[test]
    fn queued_message_shows_the_position() {
        let t = task();
        assert!(
            render_status(&t, Some(3)).contains("message: タスクは実行待ちです（待ち順: 3）。\n")
        );
    }

    #[test]
    fn uuid_parsing_is_strict() {
        assert!(parse_uuid("9ab4a40b-86fe-432a-904f-8e429c01ea8b").is_some());
        assert!(parse_uuid("9ab4a40b86fe432a904f8e429c01ea8b").is_none());
        assert!(parse_uuid("{9ab4a40b-86fe-432a-904f-8e429c01ea8b}").is_none());
        assert!(parse_uuid("not-a-uuid").is_none());
    }
}
