//! The `run_command` handler: the call's arguments to [`command::run_command`], bounded by the
//! command's timeout plus a margin for what comes around it (starting, draining pipes, killing
//! what is left).

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::command::{self, CommandEnd, RunCommandArgs};
use super::spec::{Invocation, ToolHandler};
use super::{COMMAND_DEADLINE_MARGIN, CallError, ToolError, ToolOutput};

/// `run_command`. A command that exits with a failure has still run: its output is the
/// result, and the model reads the exit status in it.
pub(super) struct RunCommand;

#[async_trait]
impl ToolHandler for RunCommand {
    async fn run(&self, call: Invocation<'_>) -> Result<ToolOutput, CallError> {
        let args: RunCommandArgs = call.spec.arguments(call.args)?;
        let commands = &call.ctx.settings.commands;
        let limit = commands.timeout + COMMAND_DEADLINE_MARGIN;
        let run = tokio::select! {
            run = command::run_command(
                &call.ctx.workspace, commands, &call.ctx.scratch, &args, call.cancel,
            ) => run?,
            () = tokio::time::sleep(limit) => return Err(ToolError::Deadline {
                tool: call.spec.name,
                limit: humantime::format_duration(limit).to_string(),
            }.into()),
        };
        match run.end {
            CommandEnd::Cancelled => Err(CallError::Cancelled),
            _ => Ok(ToolOutput::text(run.text)),
        }
    }
}

impl super::Toolbox {
    /// Runs one of the operator's `agent.checks` commands (`argv`, its program need not be on
    /// `agent.commands.allow`) in the workspace, with the sandbox, environment, limits and
    /// timeout of `run_command`.
    pub async fn run_check(
        &self,
        argv: &[String],
        cancel: &CancellationToken,
    ) -> Result<command::CommandRun, CallError> {
        self.run_check_within(argv, None, cancel).await
    }

    /// [`Self::run_check_within`] as a command the engine runs of itself (a check, a trial
    /// run, a snippet): in an `execute_tool run_command` span of its own, its outcome
    /// recorded, so that the trace shows every command, the engine's included.
    pub(crate) async fn run_engine_command(
        &self,
        argv: &[String],
        within: Option<std::time::Duration>,
        cancel: &CancellationToken,
    ) -> Result<command::CommandRun, CallError> {
        let span = super::engine_tool_span(super::names::RUN_COMMAND);
        let run = tracing::Instrument::instrument(
            self.run_check_within(argv, within, cancel),
            span.clone(),
        )
        .await;
        super::record_engine_outcome(&span, run.as_ref().map(|_| ()));
        run
    }

    /// [`Self::run_check`], ended by `within` when that is shorter than the commands' timeout
    /// (a trial run of a script the task wrote, which may be a server that never ends).
    pub async fn run_check_within(
        &self,
        argv: &[String],
        within: Option<std::time::Duration>,
        cancel: &CancellationToken,
    ) -> Result<command::CommandRun, CallError> {
        let mut commands = self.ctx.settings.commands.clone();
        if let Some(within) = within {
            commands.timeout = commands.timeout.min(within);
        }
        commands.allow = argv.first().cloned().into_iter().collect();
        let args = RunCommandArgs {
            argv: argv.to_vec(),
            cwd: String::new(),
        };
        let run = command::run_command(
            &self.ctx.workspace,
            &commands,
            &self.ctx.scratch,
            &args,
            cancel,
        )
        .await?;
        if run.end == CommandEnd::Cancelled {
            return Err(CallError::Cancelled);
        }
        Ok(run)
    }
}
