//! The text results of `agent_run` and `agent_status` (`docs/contract.md` §2.6, §3.4, §3.5).
//!
//! One function renders a task's status; `agent_status`, the Tasks extension's final result and
//! the terminal client all show exactly this text.

use std::fmt::Write;

use crate::task::{Task, TaskState};

/// The human message for a state; `queue_position` (1-based) is shown while queued.
pub fn state_message(state: TaskState, queue_position: Option<usize>) -> String {
    match state {
        TaskState::Queued => match queue_position {
            Some(p) => format!("タスクは実行待ちです（待ち順: {p}）。"),
            None => "タスクは実行待ちです。".to_owned(),
        },
        TaskState::Planning => "タスクを計画しています。".to_owned(),
        TaskState::Running => "タスクを実行しています。".to_owned(),
        TaskState::Completed => "タスクが完了しました。".to_owned(),
        TaskState::Failed => "タスクが失敗しました。".to_owned(),
        TaskState::Cancelled => "タスクは取り消されました。".to_owned(),
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

/// The `agent_status` text.
pub fn render_status(task: &Task, queue_position: Option<usize>) -> String {
    let mut out = String::with_capacity(320 + task.result.len());
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "task_id: {}\nsession_id: {}\nstatus: {}\ncompleted_tasks: {}/{}\n",
        task.id, task.session_id, task.state, task.steps_done, task.steps_total
    );
    line(&mut out, "current_task", &task.current_task);
    let _ = write!(
        out,
        "\ntoken_usage: input={} output={} total={}\ncritical_path_tokens: {}\n",
        task.tokens.input,
        task.tokens.output,
        task.tokens.total(),
        task.critical_path_tokens
    );
    line(
        &mut out,
        "message",
        &state_message(task.state, queue_position),
    );
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
pub use crate::tools::args::parse_uuid;

#[cfg(test)]
mod tests {
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

    #[test]
    fn running_status_matches_the_contract() {
        let mut t = task();
        t.state = TaskState::Running;
        t.current_task = "ollama chat".into();
        t.tokens = TokenUsage {
            input: 1536,
            output: 284,
        };
        assert_eq!(
            render_status(&t, None),
            "task_id: 9ab4a40b-86fe-432a-904f-8e429c01ea8b\n\
             session_id: 2a8105cc-84f9-4d37-a5bd-e48e04654eb7\n\
             status: running\n\
             completed_tasks: 0/1\n\
             current_task: ollama chat\n\
             token_usage: input=1536 output=284 total=1820\n\
             critical_path_tokens: 0\n\
             message: タスクを実行しています。\n\
             result:"
        );
    }

    #[test]
    fn completed_status_matches_the_contract() {
        let mut t = task();
        t.state = TaskState::Completed;
        t.steps_done = 1;
        t.tokens = TokenUsage {
            input: 2048,
            output: 512,
        };
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
