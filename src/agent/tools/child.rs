//! What a command's child does between `fork` and `exec`: a [`ChildSetup`] of steps, each
//! prepared in the server and run in the child in the order they were added. The network
//! namespace (`netns.rs`), the read-only mounts, Landlock and the dropped capabilities
//! (`sandbox.rs`) are steps like the cgroup, the rlimits and the working folder here, so those
//! modules plug into this one and none of them imports the command runner.
//!
//! A step runs in the forked child of a multi-threaded process, where only async-signal-safe
//! work is sound: system calls on values made before the fork, no allocation, no lock.

use std::io;

/// One thing the child does before `exec`.
pub(super) trait ChildStep: Send + Sync + 'static {
    /// Runs in the child: only system calls on values prepared before the fork, no allocation,
    /// no lock. An error stops the child before `exec` and fails the spawn.
    fn apply(&mut self) -> io::Result<()>;
}

/// The steps of one child, in order.
#[derive(Default)]
pub(super) struct ChildSetup {
    steps: Vec<Box<dyn ChildStep>>,
}

impl ChildSetup {
    /// This setup, then `step`.
    pub(super) fn then(mut self, step: impl ChildStep) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    fn apply(&mut self) -> io::Result<()> {
        for step in &mut self.steps {
            step.apply()?;
        }
        Ok(())
    }
}

/// A resource to limit, its name in messages, and the value.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) type Limit = (rustix::process::Resource, &'static str, u64);
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) type Limit = ((), &'static str, u64);

/// Joins the command's own cgroup: writes `0` ("the writing process") to its `cgroup.procs`,
/// held open here, so the child is in it before it can fork.
pub(super) struct JoinCgroup(pub std::os::fd::OwnedFd);

impl ChildStep for JoinCgroup {
    fn apply(&mut self) -> io::Result<()> {
        rustix::io::write(&self.0, b"0")?;
        Ok(())
    }
}

/// Sets each rlimit, soft and hard.
pub(super) struct Limits(pub Vec<Limit>);

impl ChildStep for Limits {
    fn apply(&mut self) -> io::Result<()> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        for &(resource, _, value) in &self.0 {
            let limit = rustix::process::Rlimit {
                current: Some(value),
                maximum: Some(value),
            };
            rustix::process::setrlimit(resource, limit)?;
        }
        Ok(())
    }
}

/// Changes into the folder held open beneath the workspace's root (`fchdir`, never by path).
pub(super) struct Cwd(pub std::os::fd::OwnedFd);

impl ChildStep for Cwd {
    fn apply(&mut self) -> io::Result<()> {
        rustix::process::fchdir(&self.0)?;
        Ok(())
    }
}

/// Has the child run `setup`'s steps between `fork` and `exec`.
#[allow(unsafe_code)]
pub(super) fn set_up_child(command: &mut std::process::Command, mut setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `pre_exec` runs the closure in the forked child, where only async-signal-safe
    // operations are sound (another thread may have held the allocator's or any other lock at
    // the fork). Every `ChildStep` makes only raw system calls on values prepared before the
    // fork (through rustix: `write`, `prlimit64`, `open`, `socket`, `sendto`, `recvfrom`,
    // `fchdir`, `mount`, `prctl`, `capset`; through nix: `unshare`; through landlock:
    // `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self`, `close`); a step takes what it
    // consumes out of itself with `Option::take` (a move), none allocates (a rustix, nix or
    // landlock error holds an `io::Error` made from an errno, without allocating), takes a
    // lock or touches thread-local state. The steps are iterated in place (a slice walk over
    // boxes made before the fork).
    unsafe {
        command.pre_exec(move || setup.apply());
    }
}
