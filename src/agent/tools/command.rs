//! `run_command`: an allow-listed program with argv, no shell, in the workspace.
//!
//! The program (argv[0]) must be a bare name on `agent.commands.allow`; it is looked up on the
//! command `PATH` and must not resolve inside the workspace (where the model can write), and
//! runs with argv[0] as written (a rustup proxy picks its tool by that name). The child gets a
//! minimal environment (`PATH`, `HOME`, `TMPDIR`, `LANG` and `agent.commands.env`), no stdin,
//! and its own process group. Between `fork` and `exec` it joins its own cgroup where the
//! machine offers one (see `cgroup.rs`), sets the rlimits of `agent.commands.limits`, and
//! changes into its `cwd` through a folder handle opened beneath the root. On timeout, on task
//! cancellation and after it exits, the whole group and everything in its cgroup are killed,
//! so background children (even `setsid` daemons, where there is a cgroup) do not outlive the
//! call; Tokio's `kill_on_drop` is the backstop if the call itself is dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::child::{ChildSetup, Limit};
use super::output::HeadTail;
use super::sandbox::TaskScratch;
use super::workspace::Workspace;
use super::{CommandSettings, ToolError};

/// How long to wait for the pipes to drain once the process group is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

pub(super) const RUN_COMMAND_EXPECTED: &str =
    "{\"argv\": [string, …] (program first), \"cwd\": string (optional)}";

#[derive(Debug, Deserialize)]
pub(super) struct RunCommandArgs {
    pub(super) argv: Vec<String>,
    #[serde(default)]
    pub(super) cwd: String,
}

/// A command that ran: how it ended, and the text the model is sent (the command line, how
/// it ended, its output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRun {
    pub end: CommandEnd,
    pub text: String,
}

/// How a command ended, as its caller judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited with this status (`None`: ended by a signal).
    Exited(Option<i32>),
    TimedOut,
    /// The task was cancelled while it ran; it was killed.
    Cancelled,
}

/// How the command ended.
enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

pub(super) async fn run_command(
    ws: &Workspace,
    settings: &CommandSettings,
    scratch: &TaskScratch,
    args: &RunCommandArgs,
    cancel: &CancellationToken,
) -> Result<CommandRun, ToolError> {
    let Some(program) = args.argv.first() else {
        return Err(ToolError::Refused(
            "argv is empty; give the program first".into(),
        ));
    };
    if program.contains(['/', '\\']) {
        return Err(ToolError::Refused(format!(
            "'{}' is a path; give a program name found on PATH (e.g. python3, cargo), and \
             run a script of the workspace through its interpreter (e.g. [\"python3\", \
             \"script.py\"])",
            crate::agent::engine::plan::one_line(program),
        )));
    }
    if !settings.allow.is_empty() && !settings.allow.iter().any(|a| a == program) {
        return Err(ToolError::Refused(format!(
            "'{}' is not an allowed program; allowed: {}",
            crate::agent::engine::plan::one_line(program),
            settings.allow.join(", ")
        )));
    }
    if args.argv.iter().any(|a| a.contains('\0')) {
        return Err(ToolError::Refused("an argument contains a NUL byte".into()));
    }
    let cwd = ws.existing(&args.cwd)?;
    // A command run inside a read-only folder could change it without naming a path.
    ws.refuse_read_only(&cwd)?;
    if !cwd.is_dir() {
        return Err(ToolError::Refused(format!(
            "cwd '{}' is not a folder",
            ws.display(&cwd)
        )));
    }
    check_arguments(ws, &cwd, &args.argv)?;
    let path_var = command_path(settings, ws);
    let scratch = scratch.path().map_err(ToolError::Io)?;
    let executable = find_program(program, &path_var, ws).ok_or_else(|| {
        ToolError::Refused(format!("'{program}' was not found on the command PATH"))
    })?;
    // The child changes into the folder held open beneath the root (fchdir), never by path:
    // a folder swapped for a link after the check cannot move the command outside.
    #[cfg(unix)]
    let held_cwd = ws.open_dir(&cwd).map_err(|e| match e {
        super::PathError::Invalid(_) => {
            ToolError::Refused(format!("cwd '{}' is not a folder", ws.display(&cwd)))
        }
        e => e.into(),
    })?;
    // Its own cgroup where the machine offers one: the process limit holds for root too, and
    // nothing it starts outlives the call.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let cage = match super::cgroup::available() {
        Ok(cgroups) => Some(
            super::cgroup::Cage::create(cgroups, settings.limits.processes).map_err(|e| {
                ToolError::Io(format!(
                    "cannot make a cgroup for '{program}': {e}; try again, or tell the operator"
                ))
            })?,
        ),
        Err(_) => None,
    };

    // The filesystem sandbox, made here (it opens the folders it names) and enforced in the
    // child.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let landlock = match settings.landlock {
        Some(landlock) => {
            let guarded: Vec<PathBuf> = ws.protected().paths().map(Path::to_path_buf).collect();
            let policy = super::sandbox::SandboxPolicy::for_command(
                ws.root(),
                scratch,
                &path_var,
                &settings.read_paths,
                &guarded,
            );
            Some(super::sandbox::EnforceLandlock::new(
                landlock.prepare(&policy).map_err(|e| {
                    ToolError::Io(format!("cannot prepare the sandbox for '{program}': {e}"))
                })?,
            ))
        }
        None => None,
    };

    // `.git` and the like read-only, where the server can make a mount namespace (see
    // `sandbox.rs`); elsewhere the argument check alone keeps commands from naming them.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let mounts = match super::sandbox::read_only_mounts() {
        Ok(()) if settings.landlock.is_some() => {
            let mounts =
                super::sandbox::ReadOnlyMounts::for_workspace(ws.root(), ws.read_only_paths())
                    .map_err(|e| {
                        ToolError::Io(format!("cannot prepare '{program}' to run: {e}"))
                    })?;
            (!mounts.is_empty()).then_some(mounts)
        }
        _ => None,
    };

    // Cut off from the network, unless the configuration lets commands reach it or the
    // kernel allows no namespace (then start-up said so).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let network = match super::netns::isolation() {
        Ok(how) if !settings.network => Some(super::netns::NetnsSetup::new(how).map_err(|e| {
            ToolError::Io(format!(
                "cannot prepare '{program}' to run without network: {e}"
            ))
        })?),
        _ => None,
    };

    // The program itself, with argv[0] as the model wrote it (not the resolved path: a
    // rustup proxy such as ~/.cargo/bin/cargo -> rustup picks the tool by its argv[0]).
    // Built as a std command, so that the one `pre_exec` of this crate sets it up.
    let mut command = std::process::Command::new(&executable);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::arg0(&mut command, program);
    command
        .args(&args.argv[1..])
        .env_clear()
        .env("PATH", &path_var)
        // The task's own folder: what a program keeps in HOME (caches, logs, dotfiles) stays
        // with the task and goes with it.
        .env("HOME", scratch)
        .env("TMPDIR", scratch)
        .env("LANG", "C.UTF-8")
        // No bytecode caches: a .pyc written in the same second as an edit can run stale code.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(super::sandbox::toolchain_homes())
        .envs(super::sandbox::task_cargo_home(scratch).map(|home| ("CARGO_HOME", home)))
        .envs(&settings.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    #[cfg(unix)]
    {
        // Between fork and exec, in this order (see `child.rs`): the cgroup, the rlimits, the
        // network namespace, the working folder, the read-only mounts, Landlock, and last the
        // capabilities (the steps before may need them).
        let mut setup = ChildSetup::default();
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(cage) = &cage {
            let procs = cage
                .procs()
                .map_err(|e| ToolError::Io(format!("cannot set up '{program}': {e}")))?;
            setup = setup.then(super::child::JoinCgroup(procs));
        }
        setup = setup.then(super::child::Limits(wanted_limits(&settings.limits)));
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(network) = network {
            setup = setup.then(network);
        }
        setup = setup.then(super::child::Cwd(held_cwd));
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            if let Some(mounts) = mounts {
                setup = setup.then(mounts);
            }
            if let Some(landlock) = landlock {
                setup = setup.then(landlock);
            }
            setup = setup.then(super::sandbox::DropCapabilities);
        }
        super::child::set_up_child(&mut command, setup);
    }
    #[cfg(not(unix))]
    command.current_dir(&cwd);
    let mut command = Command::from(command);
    command.kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| ToolError::Io(format!("cannot start '{program}': {e}")))?;
    let pid = child.id();
    let cap = settings.max_output_bytes;
    let stdout = child.stdout.take().map(|s| tokio::spawn(drain(s, cap)));
    let stderr = child.stderr.take().map(|s| tokio::spawn(drain(s, cap)));

    let ending = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => Ending::Exited(status),
            Err(e) => {
                kill_group(pid, &mut child);
                // The cage (if any) kills the rest as it is dropped.
                return Err(ToolError::Io(format!("waiting for '{program}' failed: {e}")));
            }
        },
        () = tokio::time::sleep(settings.timeout) => Ending::TimedOut,
        () = cancel.cancelled() => Ending::Cancelled,
    };
    // Also after a normal exit: background children of the command must not outlive it.
    kill_group(pid, &mut child);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(cage) = cage {
        cage.kill_all().await;
    }
    let _ = tokio::time::timeout(DRAIN_GRACE, child.wait()).await;
    let stdout = collect(stdout).await;
    let stderr = collect(stderr).await;

    let head = match ending {
        Ending::Cancelled => {
            return Ok(CommandRun {
                end: CommandEnd::Cancelled,
                text: String::new(),
            });
        }
        Ending::TimedOut => format!(
            "timed out after {}; the command and its children were killed",
            humantime::format_duration(settings.timeout)
        ),
        Ending::Exited(status) => match status.code() {
            Some(code) => format!("exit status: {code}"),
            None => format!("ended by a signal ({status})"),
        },
    };
    let mut out = format!("$ {}\n{head}\n", args.argv.join(" "));
    let denied = settings.landlock.is_some()
        && !matches!(ending, Ending::Exited(status) if status.success())
        && (super::sandbox::was_denied(&stdout) || super::sandbox::was_denied(&stderr));
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        if !text.is_empty() {
            out.push_str(&format!("{name}:\n{text}"));
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    if denied {
        out.push_str(super::sandbox::DENIED_NOTE);
        out.push('\n');
    }
    let end = match ending {
        Ending::Exited(status) => CommandEnd::Exited(status.code()),
        Ending::TimedOut | Ending::Cancelled => CommandEnd::TimedOut,
    };
    Ok(CommandRun { end, text: out })
}

/// Longest tail of a short-option cluster that is checked as a glued path (`PATH_MAX`).
const MAX_GLUED_PATH: usize = 4096;

/// Refuses arguments that name a path outside the workspace or one of the server's own files.
///
/// Each argument after the program is checked as a path (relative to `cwd`), and so are
/// - its value after the first `=` (`--file=PATH`, `dd if=PATH`, `make VAR=PATH`),
/// - in a short-option cluster (`-C/abs`, `-I..`, `-xf../a.tar`), every tail after the first
///   option letter (a value glued to its option),
/// - for `ln -s` / `--symbolic`, each target against the folder the link is made in (where the
///   link will resolve it), not only against `cwd`.
///
/// A path is refused when it is absolute outside the root, when `..` climbs above the root
/// (from `cwd`, lexically), when what exists of it resolves outside (a symbolic link out, also
/// for a new name behind it, a `..` after a link, or a dangling link), or when it is one of the
/// server's own files. This is defence in depth for programs that take paths; a program that
/// can be told to open files some other way (a script interpreter, a config file it reads) is
/// trusted with the workspace's user rights once it is on `agent.commands.allow` (see
/// SECURITY.md).
fn check_arguments(ws: &Workspace, cwd: &Path, argv: &[String]) -> Result<(), ToolError> {
    for arg in &argv[1..] {
        for candidate in path_candidates(arg) {
            check_path(ws, cwd, arg, candidate)?;
        }
    }
    if argv[0] == "ln" {
        check_symlink_targets(ws, cwd, &argv[1..])?;
    }
    Ok(())
}

/// The strings of `arg` that may be used as paths (see [`check_arguments`]).
fn path_candidates(arg: &str) -> Vec<&str> {
    let mut out = vec![arg];
    if let Some((_, value)) = arg.split_once('=') {
        out.push(value);
    }
    if arg.starts_with('-') && !arg.starts_with("--") {
        out.extend(
            arg.char_indices()
                .skip(2)
                .map(|(i, _)| &arg[i..])
                .filter(|tail| tail.len() <= MAX_GLUED_PATH),
        );
    }
    out
}

/// `ln -s TARGET… LINK|DIR` (or `-t DIR TARGET…`): each target is resolved by the kernel from
/// the link's folder, so it is checked from there.
fn check_symlink_targets(ws: &Workspace, cwd: &Path, args: &[String]) -> Result<(), ToolError> {
    let is_short = |a: &str| a.starts_with('-') && !a.starts_with("--") && a.len() > 1;
    let symbolic = args
        .iter()
        .any(|a| a == "--symbolic" || (is_short(a) && a[1..].contains('s')));
    if !symbolic {
        return Ok(());
    }
    let mut folder: Option<PathBuf> = None;
    let mut operands: Vec<&String> = Vec::new();
    let mut options_done = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if options_done || !arg.starts_with('-') || arg == "-" {
            operands.push(arg);
        } else if arg == "--" {
            options_done = true;
        } else if let Some(dir) = arg.strip_prefix("--target-directory=") {
            folder = Some(cwd.join(dir));
        } else if arg == "--target-directory" || arg == "-t" {
            folder = args.next().map(|dir| cwd.join(dir));
        } else if arg == "-S" || arg == "--suffix" {
            args.next();
        } else if is_short(arg)
            && let Some((at, _)) = arg.char_indices().find(|(_, c)| *c == 't')
            && at + 1 < arg.len()
        {
            folder = Some(cwd.join(&arg[at + 1..]));
        }
    }
    let folder = match folder {
        Some(dir) => dir,
        None if operands.len() < 2 => cwd.to_path_buf(),
        None => {
            let Some(last) = operands.pop() else {
                return Ok(());
            };
            let dest = cwd.join(last);
            if dest.is_dir() {
                dest
            } else {
                dest.parent()
                    .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf)
            }
        }
    };
    let folder = folder.canonicalize().unwrap_or(folder);
    for target in operands {
        check_path(ws, &folder, target, target)?;
    }
    Ok(())
}

/// Refuses `value` (from `arg`) as a path from `cwd` if it leads outside the workspace or to
/// one of the server's own files.
fn check_path(ws: &Workspace, cwd: &Path, arg: &str, value: &str) -> Result<(), ToolError> {
    if value.is_empty() || value == "/dev/null" {
        return Ok(());
    }
    let refuse = || {
        ToolError::Refused(format!(
            "argument '{}' names a path outside the workspace (or through a symbolic link out \
             of it); use paths inside the workspace",
            crate::agent::engine::plan::one_line(arg)
        ))
    };
    let path = Path::new(value);
    let joined = if path.is_absolute() {
        if !path.starts_with(ws.root()) {
            return Err(refuse());
        }
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    // Lexically first: `..` may not climb above the root.
    let stays_inside = joined
        .strip_prefix(ws.root())
        .map_err(|_| refuse())?
        .components()
        .try_fold(0usize, |depth, c| match c {
            std::path::Component::ParentDir => depth.checked_sub(1),
            std::path::Component::Normal(_) => Some(depth + 1),
            _ => Some(depth),
        })
        .is_some();
    if !stays_inside {
        return Err(refuse());
    }
    // Then on disk, as the kernel will resolve it: what exists of the path must resolve
    // inside. The deepest existing entry is resolved with every link and `..` in it, so a new
    // name behind a link out, or a `..` after a link, is caught; a dangling link is refused.
    let (existing, missing) = ws.deepest_existing(&joined);
    let Ok(real) = existing.canonicalize() else {
        return Err(refuse());
    };
    if !real.starts_with(ws.root()) {
        return Err(refuse());
    }
    let full = missing.iter().fold(real, |p, name| p.join(name));
    if let Err(super::PathError::ReadOnly { entry, .. }) = ws.refuse_read_only(&full) {
        return Err(ToolError::Refused(format!(
            "argument '{}' names a path inside {entry}, which commands may not name \
             (agent.tools.read_only_paths: version-control metadata and hooks run commands for \
             the user; the check cannot tell a read from a write). Work on other files",
            crate::agent::engine::plan::one_line(arg)
        )));
    }
    if ws.protected().covers(&full) {
        return Err(ToolError::Refused(format!(
            "argument '{}' names one of the agent server's own files (configuration, task \
             database, lock or audit log); commands may not touch it. Work on other files",
            crate::agent::engine::plan::one_line(arg)
        )));
    }
    Ok(())
}

/// `agent.commands.limits` as rlimits, each clamped to the server's own hard limit (an
/// unprivileged process cannot raise one).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn wanted_limits(limits: &crate::config::CommandLimits) -> Vec<Limit> {
    use rustix::process::Resource;
    [
        (
            Resource::Cpu,
            "cpu",
            limits.cpu_time.map(|t| t.as_secs().max(1)),
        ),
        (Resource::As, "as", limits.address_space.map(|b| b.as_u64())),
        (Resource::Nproc, "nproc", limits.processes),
        (
            Resource::Fsize,
            "fsize",
            limits.file_size.map(|b| b.as_u64()),
        ),
    ]
    .into_iter()
    .filter_map(|(resource, flag, value)| {
        let value = value?;
        let hard = rustix::process::getrlimit(resource).maximum;
        Some((resource, flag, hard.map_or(value, |hard| value.min(hard))))
    })
    .collect()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn wanted_limits(_limits: &crate::config::CommandLimits) -> Vec<Limit> {
    Vec::new()
}

/// Reads a pipe to its end, keeping its head and tail.
async fn drain(mut pipe: impl AsyncRead + Unpin, limit: usize) -> String {
    let mut kept = HeadTail::new(limit);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => kept.push(&buf[..n]),
        }
    }
    kept.into_text()
}

/// A reader's text, or what it had if a process outside the group still holds the pipe.
async fn collect(reader: Option<tokio::task::JoinHandle<String>>) -> String {
    let Some(mut reader) = reader else {
        return String::new();
    };
    match tokio::time::timeout(DRAIN_GRACE, &mut reader).await {
        Ok(Ok(text)) => text,
        _ => {
            reader.abort();
            "[output unavailable: the pipe stayed open]".to_owned()
        }
    }
}

fn kill_group(pid: Option<u32>, child: &mut tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        // ESRCH (the group is gone already) is the usual outcome after a clean exit.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
    let _ = child.start_kill();
}

/// `agent.commands.path`, else the server's `PATH` without relative entries or entries inside
/// the workspace (the model could plant a program there).
fn command_path(settings: &CommandSettings, ws: &Workspace) -> String {
    if let Some(path) = &settings.path {
        return path.clone();
    }
    let server = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&server)
        .filter(|p| p.is_absolute())
        .filter(|p| {
            let real = p.canonicalize().unwrap_or_else(|_| p.clone());
            !real.starts_with(ws.root())
        })
        .collect();
    std::env::join_paths(kept)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned())
}

/// The first executable file named `program` on `path`, if it is not inside the workspace.
fn find_program(program: &str, path: &str, ws: &Workspace) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .and_then(|found| found.canonicalize().ok())
        .filter(|real| !real.starts_with(ws.root()))
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    meta.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A workspace in a fresh temporary folder (kept while the returned folder lives).
    fn empty_workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        (dir, ws)
    }

    fn settings(allow: &[&str], timeout: Duration, cap: usize) -> CommandSettings {
        CommandSettings {
            enabled: true,
            landlock: super::super::sandbox::landlock().ok(),
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            read_paths: Vec::new(),
            timeout,
            max_output_bytes: cap,
            path: None,
            env: BTreeMap::new(),
            limits: crate::config::CommandLimits::default(),
            network: false,
        }
    }

    async fn run(ws: &Workspace, s: &CommandSettings, argv: &[&str]) -> Result<String, String> {
        let args = RunCommandArgs {
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            cwd: String::new(),
        };
        run_command(
            ws,
            s,
            &TaskScratch::default(),
            &args,
            &CancellationToken::new(),
        )
        .await
        .map(|run| run.text)
        .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn runs_argv_without_a_shell() {
        let (dir, ws) = empty_workspace();
        let s = settings(&["echo"], Duration::from_secs(10), 4096);
        let out = run(&ws, &s, &["echo", "a; touch pwned", "$(id)"])
            .await
            .unwrap();
        assert_eq!(
            out,
            "$ echo a; touch pwned $(id)\nexit status: 0\nstdout:\na; touch pwned $(id)\n"
        );
        assert!(!dir.path().join("pwned").exists());
    }

    #[tokio::test]
    async fn programs_off_the_list_or_with_paths_are_refused() {
        let (_dir, ws) = empty_workspace();
        let s = settings(&["echo"], Duration::from_secs(10), 4096);
        for argv in [
            &["rm", "-rf", "."][..],
            &["/bin/echo", "x"],
            &["./echo"],
            &[],
        ] {
            let e = run(&ws, &s, argv).await.unwrap_err();
            assert!(
                e.contains("not an allowed program")
                    || e.contains("argv is empty")
                    || e.contains("is a path; give a program name found on PATH"),
                "{e}"
            );
        }
    }

    #[tokio::test]
    async fn an_empty_allow_list_runs_any_program_on_path() {
        let (_dir, ws) = empty_workspace();
        let s = settings(&[], Duration::from_secs(10), 4096);
        let out = run(&ws, &s, &["echo", "hi"]).await.unwrap();
        assert_eq!(out, "$ echo hi\nexit status: 0\nstdout:\nhi\n");
        let e = run(&ws, &s, &["no-such-program-here"]).await.unwrap_err();
        assert_eq!(
            e,
            "'no-such-program-here' was not found on the command PATH"
        );
    }

    #[tokio::test]
    async fn the_environment_is_minimal() {
        let (_dir, ws) = empty_workspace();
        let mut s = settings(&["env"], Duration::from_secs(10), 1 << 16);
        s.env.insert("CARGO_TERM_COLOR".into(), "never".into());
        let out = run(&ws, &s, &["env"]).await.unwrap();
        let mut names: Vec<&str> = out
            .lines()
            .skip(3)
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        names.sort_unstable();
        // The toolchains' own variables (RUSTUP_HOME, PYENV_ROOT…) where this machine has them.
        let mut expected = vec![
            "CARGO_TERM_COLOR",
            "HOME",
            "LANG",
            "PATH",
            "PYTHONDONTWRITEBYTECODE",
            "TMPDIR",
        ];
        expected.extend(
            super::super::sandbox::toolchain_homes()
                .iter()
                .map(|(v, _)| *v),
        );
        if super::super::sandbox::server_cargo_home().is_some() {
            expected.push("CARGO_HOME");
        }
        expected.sort_unstable();
        assert_eq!(names, expected, "{out}");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_command() {
        let (_dir, ws) = empty_workspace();
        let s = settings(&["sleep"], Duration::from_millis(300), 4096);
        let started = std::time::Instant::now();
        let out = run(&ws, &s, &["sleep", "30"]).await.unwrap();
        assert!(out.contains("timed out after 300ms"), "{out}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn arguments_naming_paths_outside_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let ws_dir = base.path().join("ws");
        std::fs::create_dir_all(ws_dir.join("src")).unwrap();
        std::fs::write(ws_dir.join("src/lib.rs"), "inside").unwrap();
        std::fs::write(base.path().join("secret.txt"), "secret").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(base.path().join("secret.txt"), ws_dir.join("link")).unwrap();
        let ws = Workspace::open(&ws_dir).unwrap();
        let s = settings(&["cat", "echo"], Duration::from_secs(10), 4096);
        let secret = base.path().join("secret.txt");
        let abs_secret = secret.to_str().unwrap();
        let flag = format!("--file={abs_secret}");
        for argv in [
            &["cat", "../secret.txt"][..],
            &["cat", "src/../../secret.txt"],
            &["cat", abs_secret],
            &["cat", "/etc/passwd"],
            &["echo", "--file=../secret.txt"],
            &["echo", &flag],
            #[cfg(unix)]
            &["cat", "link"],
        ] {
            let e = run(&ws, &s, argv).await.unwrap_err();
            assert!(
                e.contains("names a path outside the workspace"),
                "{argv:?}: {e}"
            );
        }
        assert_eq!(
            run(&ws, &s, &["cat", "src/../src/lib.rs"]).await.unwrap(),
            "$ cat src/../src/lib.rs\nexit status: 0\nstdout:\ninside\n"
        );
        let inside = ws.root().join("src/lib.rs");
        let out = run(&ws, &s, &["cat", inside.to_str().unwrap(), "/dev/null"]).await;
        assert!(out.unwrap().contains("inside"));
        // Words that are not paths pass untouched.
        let out = run(&ws, &s, &["echo", "a..b", "s/../x/", "-n"])
            .await
            .unwrap();
        assert!(out.contains("a..b s/../x/"), "{out}");
    }

    /// What `sh -c script` reports in an empty workspace, run under `limits`.
    #[cfg(target_os = "linux")]
    async fn sh_under(
        limits: crate::config::CommandLimits,
        timeout: Duration,
        script: &str,
    ) -> String {
        let (_dir, ws) = empty_workspace();
        let mut s = settings(&["sh"], timeout, 4096);
        s.limits = limits;
        run(&ws, &s, &["sh", "-c", script]).await.unwrap()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn resource_limits_reach_the_command() {
        let limits = crate::config::CommandLimits {
            cpu_time: Some(Duration::from_secs(7)),
            address_space: Some(bytesize::ByteSize::gib(2)),
            processes: Some(50_000),
            file_size: Some(bytesize::ByteSize::kib(64)),
        };
        let script = "ulimit -t; ulimit -v; ulimit -f";
        let out = sh_under(limits, Duration::from_secs(10), script).await;
        // ulimit -f counts 512-byte blocks.
        assert!(out.ends_with("stdout:\n7\n2097152\n128\n"), "{out}");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_cpu_bound_command_is_stopped_by_its_cpu_limit() {
        let limits = crate::config::CommandLimits {
            cpu_time: Some(Duration::from_secs(1)),
            ..crate::config::CommandLimits::default()
        };
        let started = std::time::Instant::now();
        let out = sh_under(limits, Duration::from_secs(30), "while :; do :; done").await;
        assert!(out.contains("ended by a signal"), "{out}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn huge_output_is_capped() {
        let (_dir, ws) = empty_workspace();
        let s = settings(&["yes"], Duration::from_millis(500), 1000);
        let out = run(&ws, &s, &["yes"]).await.unwrap();
        assert!(out.contains("timed out"), "{}", &out[..200.min(out.len())]);
        assert!(out.contains("bytes omitted"));
        assert!(out.len() < 1200, "{} bytes", out.len());
    }

    /// The argument check beyond plain paths: `key=value`, glued short options, new names
    /// behind a link out, `..` after an inside link, `ln -s` targets from the link's folder,
    /// and the server's own files.
    #[cfg(unix)]
    #[test]
    fn the_argument_check_covers_values_glued_options_new_names_and_link_targets() {
        let base = tempfile::tempdir().unwrap();
        let base_path = base.path().canonicalize().unwrap();
        let ws_dir = base_path.join("ws");
        std::fs::create_dir_all(ws_dir.join("a/b")).unwrap();
        std::fs::write(ws_dir.join("agent.yaml"), "x").unwrap();
        std::os::unix::fs::symlink(&base_path, ws_dir.join("out")).unwrap();
        std::os::unix::fs::symlink(".", ws_dir.join("self")).unwrap();
        let ws = Workspace::open(&ws_dir)
            .unwrap()
            .protect(super::super::ProtectedFiles::new([
                ws_dir.join("agent.yaml")
            ]));
        let root = ws.root().to_path_buf();
        let check = |cwd: &str, argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
            check_arguments(&ws, &root.join(cwd), &argv).map_err(|e| e.to_string())
        };
        let outside = base_path.display().to_string();
        for (cwd, argv) in [
            ("", vec!["dd", &*format!("if={outside}/x")]),
            ("", vec!["make", "DESTDIR=../x"]),
            ("", vec!["tar", &*format!("-C{outside}")]),
            ("", vec!["tar", &*format!("-xf{outside}/a.tar")]),
            ("", vec!["ls", "-I.."]),
            ("", vec!["touch", "out/NEW"]),
            ("", vec!["touch", "self/../NEW"]),
            ("a/b", vec!["ln", "-s", "../x", "../../lnk"]),
            ("a/b", vec!["ln", "-sf", "../x", "../../lnk"]),
            ("a/b", vec!["ln", "--symbolic", "-t", "../..", "../x"]),
            ("a/b", vec!["ln", "-s", "--target-directory=../..", "../x"]),
        ] {
            let e = check(cwd, &argv).unwrap_err();
            assert!(
                e.contains("names a path outside the workspace"),
                "{argv:?}: {e}"
            );
        }
        let e = check("", &["cat", "agent.yaml"]).unwrap_err();
        assert!(e.contains("server's own files"), "{e}");
        // Read-only paths: named directly, through a value, a glued option, `..`, a link.
        std::fs::create_dir_all(ws_dir.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", ws_dir.join("hooks")).unwrap();
        let ro = ws
            .clone()
            .read_only(super::super::workspace::ReadOnlyPaths::new([
                ".git".to_owned()
            ]));
        for (cwd, argv) in [
            ("", vec!["cp", "evil", ".git/config"]),
            ("", vec!["tee", ".git/hooks/pre-commit"]),
            ("", vec!["dd", "of=.git/config"]),
            ("a", vec!["cp", "x", "../.git/hooks/pre-commit"]),
            ("", vec!["cp", "x", "hooks/pre-commit"]),
            ("", vec!["tar", "-C.git", "-xf", "a.tar"]),
        ] {
            let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
            let e = check_arguments(&ro, &root.join(cwd), &argv)
                .unwrap_err()
                .to_string();
            assert!(e.contains("inside .git"), "{argv:?}: {e}");
        }
        let plain: Vec<String> = ["cp", "a", ".gitignore"].map(str::to_owned).to_vec();
        assert!(check_arguments(&ro, &root, &plain).is_ok());
        let e = check("a", &["cp", "../agent.yaml", "b/x"]).unwrap_err();
        assert!(e.contains("server's own files"), "{e}");
        for (cwd, argv) in [
            ("", vec!["echo", "a..b", "s/../x/", "k=v", "-n"]),
            ("", vec!["cat", "-n", "a"]),
            ("", vec!["touch", "a/NEW"]),
            ("a/b", vec!["ln", "-s", "../../agent", "lnk"]),
            ("a/b", vec!["ln", "-s", "../x", "../lnk"]),
            ("", vec!["ln", "-s", "x", "a/b/lnk"]),
        ] {
            assert_eq!(check(cwd, &argv), Ok(()), "{argv:?}");
        }
    }
}
