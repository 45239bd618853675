//! The filesystem sandbox of every command: a [`SandboxPolicy`] (what a command may read, what
//! it may write) built once per command and enforced by the kernel with **Landlock**, applied in
//! the child between `fork` and `exec` (a step of `child.rs`), where it holds for the program and
//! everything it starts: an interpreter, a build script, a program that follows a link another
//! one made.
//!
//! - **Write** (create, change, rename, remove) only beneath the workspace and the task's own
//!   temporary folder ([`TaskScratch`]; `TMPDIR` and `HOME` point at it), plus `/dev/null`.
//! - **Read and execute** beneath those, the system's program and library folders (`/usr`,
//!   `/bin`, `/lib`…, `/opt`, `/nix/store`), the few files of `/etc` programs need to start
//!   (the loader cache, users and groups, time zone, locales, CA certificates, language
//!   runtimes' own folders), `/proc` and the CPU topology in `/sys`, the folders on the command
//!   `PATH`, the toolchain folders a developer expects in `HOME` (rustup, cargo's registry,
//!   pyenv, nvm, go's module cache, Maven's and Gradle's caches) and `agent.commands.read_paths`.
//! - **Nothing else**: not the server's state folder, its configuration, token files or audit
//!   log, not other projects, not `~/.ssh` or the rest of `HOME`. A folder that would open one of
//!   those (`/`, `HOME` itself, an ancestor of the server's own files) is never added, even when
//!   it is on `PATH`.
//! - The server's process is out of reach: it is not dumpable ([`guard_this_process`]) and its
//!   commands start without capabilities ([`drop_capabilities`], also when the server runs as
//!   root), so they cannot read its `/proc/<pid>/environ`, `mem` or `fd/…`; from Landlock ABI
//!   6 they cannot signal it either.
//!
//! The kernel's Landlock ABI is found once ([`landlock()`]); a policy is enforced with every right
//! that ABI knows, or the command does not start.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What a command may read and write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Beneath these it may read files, list folders and execute programs.
    pub read: Vec<PathBuf>,
    /// Beneath these it may also create, change, rename and remove files and folders.
    pub write: Vec<PathBuf>,
    /// Device files it may read and write (`/dev/null`, `/dev/zero`).
    pub devices: Vec<PathBuf>,
}

/// Folders of the system's programs and libraries.
const SYSTEM_FOLDERS: [&str; 10] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/proc",
];

/// Files and folders of `/etc` a program may need to start and run: the loader, users and
/// groups (`id`, `git`, Python's `getpass`), name resolution (a test's own 127.0.0.1 server),
/// time zone, locales, certificates, shells and the language runtimes' own settings. Not
/// `/etc` as a whole: it holds `shadow`, SSH host keys and other services' secrets.
const ETC_ENTRIES: [&str; 34] = [
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "default",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "alternatives",
    "os-release",
    "debian_version",
    "lsb-release",
    "mime.types",
    "magic",
    "inputrc",
    "terminfo",
    "shells",
    "profile",
    "gitconfig",
    "maven",
];

/// Names in `/etc` that start a language runtime's own folder (`python3.11`, `java-17-openjdk`,
/// `perl`).
const ETC_PREFIXES: [&str; 3] = ["python", "java", "perl"];

/// Read-only device files and the `/sys` parts programs read to size themselves (how many
/// CPUs: `cargo`, `make -j`, Node's `os.cpus()`).
const SYSTEM_FILES: [&str; 4] = [
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
];

/// Devices a command may write.
const DEVICES: [&str; 2] = ["/dev/null", "/dev/zero"];

/// Toolchain folders beneath `HOME` (or the variable that moves them) that commands may read.
/// Never `~/.cargo` itself (its `credentials.toml` holds registry tokens).
const TOOLCHAINS: [(&str, &str); 12] = [
    ("RUSTUP_HOME", ".rustup"),
    ("CARGO_HOME", ".cargo/bin"),
    ("CARGO_HOME", ".cargo/registry"),
    ("CARGO_HOME", ".cargo/git"),
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
    ("", ".local/bin"),
    ("", ".local/lib"),
    ("GOPATH", "go/pkg/mod"),
    ("GOROOT", "go/root"),
    ("", ".m2/repository"),
    ("", ".gradle/caches"),
];

/// Variables that tell a toolchain where it lives, passed on to commands when the server has
/// them or their usual folder exists, since a command's `HOME` is its task's temporary folder.
const TOOLCHAIN_HOMES: [(&str, &str); 5] = [
    ("RUSTUP_HOME", ".rustup"),
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
    ("GOPATH", "go"),
    // Python's user site-packages (`pip install --user`), in `~/.local/lib`, which commands
    // may read.
    ("PYTHONUSERBASE", ".local"),
];

/// The server's `HOME`, if set and absolute.
pub(super) fn server_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
}

/// `(variable, folder)` for each toolchain home the server has: its own value of the variable,
/// else the usual folder in `HOME` when it exists. Commands get these in their environment.
pub fn toolchain_homes() -> Vec<(&'static str, PathBuf)> {
    let home = server_home();
    TOOLCHAIN_HOMES
        .iter()
        .filter_map(|(var, usual)| {
            let from_env = std::env::var_os(var)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute());
            let path =
                from_env.or_else(|| home.as_ref().map(|h| h.join(usual)).filter(|p| p.is_dir()))?;
            Some((*var, path))
        })
        .collect()
}

/// The server's cargo home (`CARGO_HOME`, else `~/.cargo`), if there is one.
pub fn server_cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| server_home().map(|h| h.join(".cargo")))
        .filter(|p| p.is_dir())
}

/// A `CARGO_HOME` for a task's commands, in its temporary folder: cargo keeps its locks and
/// caches there (the sandbox lets it write nowhere in the server's `~/.cargo`), and finds the
/// crates the server has downloaded through links to the server's `registry` and `git`
/// (readable, not writable). Without it a project with dependencies does not build offline.
/// Made at the task's first command; `None` when the server has no cargo home.
pub(super) fn task_cargo_home(scratch: &Path) -> Option<PathBuf> {
    let real = server_cargo_home()?;
    let home = scratch.join(".cargo");
    if !home.is_dir() {
        std::fs::create_dir_all(&home).ok()?;
        #[cfg(unix)]
        for name in ["registry", "git"] {
            let target = real.join(name);
            if target.is_dir() {
                let _ = std::os::unix::fs::symlink(&target, home.join(name));
            }
        }
    }
    Some(home)
}

/// The toolchain folders commands may read (see [`TOOLCHAINS`]).
fn toolchain_folders() -> Vec<PathBuf> {
    let home = server_home();
    TOOLCHAINS
        .iter()
        .filter_map(|(var, in_home)| {
            let moved = (!var.is_empty())
                .then(|| std::env::var_os(var))
                .flatten()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute());
            match moved {
                // CARGO_HOME moves `.cargo`: its `bin`, `registry`, `git` beneath it.
                Some(root) if *var == "CARGO_HOME" => {
                    Path::new(in_home).file_name().map(|leaf| root.join(leaf))
                }
                Some(root) if *var == "GOPATH" => Some(root.join("pkg/mod")),
                Some(root) => Some(root),
                None => home.as_ref().map(|h| h.join(in_home)),
            }
        })
        .collect()
}

impl SandboxPolicy {
    /// The policy of a command run in `workspace` by a task whose temporary folder is `scratch`,
    /// with `path` its `PATH`, `extra` the operator's `agent.commands.read_paths`, and
    /// `guarded` the server's own files: no folder that holds one of them (or `HOME`, or `/`)
    /// is made readable.
    pub fn for_command(
        workspace: &Path,
        scratch: &Path,
        path: &str,
        extra: &[PathBuf],
        guarded: &[PathBuf],
    ) -> Self {
        let mut guarded: Vec<PathBuf> = guarded.iter().map(|p| resolved(p)).collect();
        guarded.extend(server_home().map(|h| resolved(&h)));
        // A folder is too wide when a guarded path lies beneath it (or it is one).
        let too_wide = |folder: &Path| {
            folder == Path::new("/") || guarded.iter().any(|g| g.starts_with(folder))
        };
        let mut read: Vec<PathBuf> = SYSTEM_FOLDERS.iter().map(PathBuf::from).collect();
        read.extend(etc_entries());
        read.extend(SYSTEM_FILES.iter().map(PathBuf::from));
        read.extend(
            std::env::split_paths(path)
                .filter(|p| p.is_absolute())
                .map(|p| resolved(&p))
                .filter(|p| !too_wide(p)),
        );
        read.extend(toolchain_folders().into_iter().filter(|p| !too_wide(p)));
        read.extend(
            extra
                .iter()
                .filter(|p| p.is_absolute())
                .map(|p| resolved(p))
                .filter(|p| !too_wide(p)),
        );
        read.retain(|p| p.exists());
        read.sort();
        read.dedup();
        Self {
            read,
            write: vec![resolved(workspace), resolved(scratch)],
            devices: DEVICES
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect(),
        }
    }
}

/// `path` with its links resolved when it exists (Landlock rules hold for what a path opens).
fn resolved(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The entries of `/etc` in [`ETC_ENTRIES`] and [`ETC_PREFIXES`] that exist.
fn etc_entries() -> Vec<PathBuf> {
    let etc = Path::new("/etc");
    let mut out: Vec<PathBuf> = ETC_ENTRIES.iter().map(|name| etc.join(name)).collect();
    if let Ok(entries) = std::fs::read_dir(etc) {
        out.extend(entries.flatten().filter_map(|entry| {
            let name = entry.file_name();
            let name = name.to_str()?;
            ETC_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix))
                .then(|| entry.path())
        }));
    }
    out
}

/// A task's private temporary folder, made at its first command (mode 0700 in the system's
/// temporary folder) and removed with everything in it when the task's toolbox is dropped,
/// i.e. when the task ends.
#[derive(Debug, Default)]
pub struct TaskScratch(OnceLock<Result<tempfile::TempDir, String>>);

impl TaskScratch {
    /// The folder, made now if this is the task's first command.
    pub fn path(&self) -> Result<&Path, String> {
        self.0
            .get_or_init(|| {
                tempfile::Builder::new()
                    .prefix("agent-mcp-task-")
                    .tempdir()
                    .map_err(|e| {
                        format!(
                            "cannot make the task's temporary folder in {}: {e}",
                            std::env::temp_dir().display()
                        )
                    })
            })
            .as_ref()
            .map(tempfile::TempDir::path)
            .map_err(Clone::clone)
    }

    /// The folder if it was made.
    pub fn made(&self) -> Option<&Path> {
        self.0.get()?.as_ref().ok().map(tempfile::TempDir::path)
    }
}

/// What the model is told when a command it ran was refused access: the sandbox's rules, so it
/// can work inside them instead of trying again.
pub(super) const DENIED_NOTE: &str = "note: commands run in a sandbox: they may write only \
     inside the workspace and $TMPDIR, read only the workspace, the system's program and \
     library folders and the toolchains, and have no network. 'Permission denied' or 'Operation \
     not permitted' for a path outside those is the sandbox; work inside the workspace instead";

/// Whether a failed command's output shows the kernel refusing it access.
pub(super) fn was_denied(output: &str) -> bool {
    [
        "Permission denied",
        "Operation not permitted",
        "EACCES",
        "EPERM",
    ]
    .iter()
    .any(|sign| output.contains(sign))
}

#[cfg(any(target_os = "linux", target_os = "android"))]
pub use linux::{
    DropCapabilities, EnforceLandlock, Landlock, ReadOnlyMounts, drop_capabilities,
    guard_this_process, landlock, read_only_mounts,
};

/// Landlock is Linux's: elsewhere there is none.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Landlock;

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn landlock() -> Result<Landlock, &'static str> {
    Err("Landlock is a Linux sandbox and this system is not Linux")
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
impl Landlock {
    pub fn abi(self) -> i32 {
        0
    }
}

/// One line for the start-up log and `check-config`: how commands are confined, or (`Err`)
/// why they are off or run without the filesystem sandbox.
pub fn describe(enabled: crate::config::CommandsSwitch) -> Result<String, String> {
    use crate::config::CommandsSwitch;
    match (enabled, landlock()) {
        (CommandsSwitch::Off, _) => Err("commands are off (agent.commands.enabled: false); \
             the agent cannot run the project's tests"
            .to_owned()),
        (_, Ok(found)) => Ok(format!(
            "commands run in a Landlock sandbox (kernel ABI {}): they write only the workspace \
                 and a temporary folder of their task, and read only the workspace, the system's \
                 and the toolchains' folders",
            found.abi()
        )),
        (CommandsSwitch::Auto, Err(why)) => Err(format!(
            "commands are off: they cannot be sandboxed here ({why}). Run on Linux 5.13 or \
                 later with Landlock enabled, or set agent.commands.enabled: true to run them \
                 without the filesystem sandbox (they can then read and write whatever the \
                 server's user can)"
        )),
        (CommandsSwitch::On, Err(why)) => Err(format!(
            "commands run WITHOUT a filesystem sandbox ({why}; agent.commands.enabled: true): \
                 they can read and write whatever the server's user can"
        )),
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux {
    use std::sync::OnceLock;

    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, RestrictionStatus, Ruleset, RulesetAttr,
        RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope, path_beneath_rules,
    };

    use super::SandboxPolicy;

    /// The Landlock ABI this kernel enforces, as a number (1 = Linux 5.13 … 6 = 6.12).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Landlock {
        abi: ABI,
    }

    /// The ABIs this crate knows, newest first.
    const ABIS: [ABI; 7] = [
        ABI::V7,
        ABI::V6,
        ABI::V5,
        ABI::V4,
        ABI::V3,
        ABI::V2,
        ABI::V1,
    ];

    /// Landlock as this kernel has it, found once: the newest ABI a ruleset can be made for.
    /// `Err` says why there is none (an old kernel, Landlock not enabled at boot).
    pub fn landlock() -> Result<Landlock, &'static str> {
        static FOUND: OnceLock<Result<Landlock, String>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                ABIS.into_iter()
                    .find(|abi| ruleset(*abi).is_ok())
                    .map(|abi| Landlock { abi })
                    .ok_or_else(|| {
                        "the kernel has no Landlock (Linux 5.13 or later, with landlock in \
                         the lsm= boot parameter or CONFIG_LSM)"
                            .to_owned()
                    })
            })
            .as_ref()
            .copied()
            .map_err(String::as_str)
    }

    /// A ruleset handling every access `abi` knows, made only if the kernel enforces all of it.
    fn ruleset(abi: ABI) -> Result<RulesetCreated, RulesetError> {
        let ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))?;
        let ruleset = if abi >= ABI::V6 {
            ruleset.scope(Scope::from_all(abi))?
        } else {
            ruleset
        };
        ruleset.create()
    }

    /// Runs in the child between `fork` and `exec`, last: empties the capability bounding set
    /// and the thread's capability sets, so a command of a server run as root starts without
    /// root's powers (tracing or reading other processes, loading modules, mounting, ignoring
    /// file permissions). Landlock confines the files; this keeps the rest of the kernel from
    /// being asked. A server that is not root has no capabilities to drop, and is not refused.
    pub fn drop_capabilities() -> std::io::Result<()> {
        use rustix::thread::{CapabilitySet, CapabilitySets};
        for cap in 0..64u32 {
            match rustix::thread::remove_capability_from_bounding_set(
                CapabilitySet::from_bits_retain(1 << cap),
            ) {
                // Past the kernel's last capability; without CAP_SETPCAP there is nothing to
                // drop.
                Ok(()) | Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::PERM) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let _ = rustix::thread::clear_ambient_capability_set();
        rustix::thread::set_capabilities(
            None,
            CapabilitySets {
                effective: CapabilitySet::empty(),
                permitted: CapabilitySet::empty(),
                inheritable: CapabilitySet::empty(),
            },
        )?;
        Ok(())
    }

    /// The workspace's version-control metadata (`.git`, `.hg`, `.svn`: what
    /// `agent.tools.read_only_paths` names at the workspace's top), mounted read-only in a mount
    /// namespace of the command's own. Landlock cannot take a folder back out of the writable
    /// workspace, and a repository's config and hooks run commands for the user outside any
    /// sandbox (`core.fsmonitor` at the next `git status`, `.git/hooks/pre-commit` at the next
    /// commit), so a command must not be able to write them, whatever program it is.
    #[derive(Debug, Default)]
    pub struct ReadOnlyMounts {
        /// Each folder or file with the flags of the mount it lives on (kept when remounting).
        targets: Vec<(std::ffi::CString, rustix::mount::MountFlags)>,
    }

    impl ReadOnlyMounts {
        /// The entries at the top of `root` that `read_only` covers.
        pub fn for_workspace(
            root: &std::path::Path,
            read_only: &super::super::ReadOnlyPaths,
        ) -> std::io::Result<ReadOnlyMounts> {
            use std::os::unix::ffi::OsStrExt;
            let mut targets = Vec::new();
            for entry in std::fs::read_dir(root)?.flatten() {
                let name = entry.file_name();
                if read_only.covering(std::path::Path::new(&name)).is_none() {
                    continue;
                }
                // Not through a link: the mount would land where the link points.
                if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    continue;
                }
                let path = entry.path();
                let flags = mount_flags_of(&path)?;
                let path = std::ffi::CString::new(path.as_os_str().as_bytes())
                    .map_err(std::io::Error::other)?;
                targets.push((path, flags));
            }
            Ok(ReadOnlyMounts { targets })
        }

        pub fn is_empty(&self) -> bool {
            self.targets.is_empty()
        }

        /// In the child (only system calls, on values made before the fork): a mount namespace
        /// of its own, not shared back, with each target bound onto itself read-only.
        pub fn enter(&self) -> std::io::Result<()> {
            use rustix::mount::{MountFlags, MountPropagationFlags};
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            rustix::mount::mount_change(
                c"/",
                MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
            )?;
            for (target, flags) in &self.targets {
                rustix::mount::mount_bind_recursive(target.as_c_str(), target.as_c_str())?;
                rustix::mount::mount_remount(
                    target.as_c_str(),
                    MountFlags::BIND | MountFlags::RDONLY | *flags,
                    c"",
                )?;
            }
            Ok(())
        }
    }

    impl super::super::child::ChildStep for ReadOnlyMounts {
        fn apply(&mut self) -> std::io::Result<()> {
            self.enter()
        }
    }

    /// Enforces a prepared Landlock ruleset in the child ([`Landlock::enforce`]).
    pub struct EnforceLandlock(Option<RulesetCreated>);

    impl EnforceLandlock {
        pub fn new(ruleset: RulesetCreated) -> Self {
            Self(Some(ruleset))
        }
    }

    impl super::super::child::ChildStep for EnforceLandlock {
        fn apply(&mut self) -> std::io::Result<()> {
            match self.0.take() {
                Some(ruleset) => Landlock::enforce(ruleset),
                // Enforced once already: a second spawn of the same setup does not run
                // unconfined.
                None => Err(rustix::io::Errno::NOSYS.into()),
            }
        }
    }

    /// Drops the child's capabilities ([`drop_capabilities`]); the last step.
    pub struct DropCapabilities;

    impl super::super::child::ChildStep for DropCapabilities {
        fn apply(&mut self) -> std::io::Result<()> {
            drop_capabilities()
        }
    }

    /// The flags of the mount `path` is on that a remount must keep (an unprivileged one may not
    /// drop them).
    fn mount_flags_of(path: &std::path::Path) -> std::io::Result<rustix::mount::MountFlags> {
        use rustix::fs::StatVfsMountFlags as St;
        use rustix::mount::MountFlags as Ms;
        let on = rustix::fs::statvfs(path)?.f_flag;
        let mut flags = Ms::empty();
        for (st, ms) in [
            (St::NOSUID, Ms::NOSUID),
            (St::NODEV, Ms::NODEV),
            (St::NOEXEC, Ms::NOEXEC),
            (St::NOATIME, Ms::NOATIME),
            (St::NODIRATIME, Ms::NODIRATIME),
            (St::RELATIME, Ms::RELATIME),
        ] {
            if on.contains(st) {
                flags |= ms;
            }
        }
        Ok(flags)
    }

    /// Whether this server can give a command a mount namespace ([`ReadOnlyMounts`]), found
    /// once by starting `true` in one; `Err` says why not.
    pub fn read_only_mounts() -> Result<(), &'static str> {
        static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                let probe = || -> std::io::Result<()> {
                    let dir = tempfile::tempdir()?;
                    std::fs::create_dir(dir.path().join(".git"))?;
                    let read_only = super::super::ReadOnlyPaths::new([".git".to_owned()]);
                    let mounts = ReadOnlyMounts::for_workspace(dir.path(), &read_only)?;
                    let mut command = std::process::Command::new("true");
                    command
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null());
                    super::super::child::set_up_child(
                        &mut command,
                        super::super::child::ChildSetup::default().then(mounts),
                    );
                    let status = command.spawn()?.wait()?;
                    if status.success() {
                        Ok(())
                    } else {
                        Err(std::io::Error::other(format!(
                            "the probe ended with {status}"
                        )))
                    }
                };
                probe().map_err(|e| {
                    format!(
                        "no mount namespace for commands ({e}): run as root or with \
                             CAP_SYS_ADMIN"
                    )
                })
            })
            .as_ref()
            .copied()
            .map_err(String::as_str)
    }

    /// Keeps this process's memory, environment and open files out of its commands' reach:
    /// a process that is not dumpable can be traced (and its `/proc/<pid>/environ`, `mem`,
    /// `fd/…` read) only with `CAP_SYS_PTRACE`, which commands no longer have
    /// ([`drop_capabilities`]). Called once when commands are enabled.
    pub fn guard_this_process() -> std::io::Result<()> {
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        Ok(())
    }

    impl Landlock {
        /// The ABI number, for the start-up line.
        pub fn abi(self) -> i32 {
            self.abi as i32
        }

        /// The ruleset of `policy`, ready to be enforced in a child ([`Self::enforce`]).
        pub fn prepare(self, policy: &SandboxPolicy) -> Result<RulesetCreated, RulesetError> {
            let read = AccessFs::from_read(self.abi);
            let all = AccessFs::from_all(self.abi);
            let device = AccessFs::ReadFile | AccessFs::WriteFile;
            ruleset(self.abi)?
                .add_rules(path_beneath_rules(&policy.read, read))?
                .add_rules(path_beneath_rules(&policy.write, all))?
                .add_rules(path_beneath_rules(&policy.devices, device))
        }

        /// Runs in the child between `fork` and `exec`: restricts it (and all it will start)
        /// to `ruleset`, or fails so the command does not start unconfined.
        pub fn enforce(ruleset: RulesetCreated) -> std::io::Result<()> {
            match ruleset.restrict_self() {
                Ok(RestrictionStatus {
                    ruleset: RulesetStatus::FullyEnforced,
                    ..
                }) => Ok(()),
                // Not enforced in full: the command does not start (ENOSYS), as when the
                // kernel refuses the ruleset (EPERM).
                Ok(_) => Err(rustix::io::Errno::NOSYS.into()),
                Err(_) => Err(rustix::io::Errno::PERM.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_never_opens_home_the_root_or_the_servers_files() {
        let Some(home) = server_home() else {
            return;
        };
        let state = home.join(".local/state/agent-mcp/x.db");
        let path = format!(
            "/:{}:{}:/usr/bin",
            home.display(),
            home.join(".local").display()
        );
        let policy = SandboxPolicy::for_command(
            Path::new("/tmp"),
            Path::new("/tmp"),
            &path,
            &[home.clone(), PathBuf::from("/")],
            &[state],
        );
        let home = resolved(&home);
        for folder in &policy.read {
            assert_ne!(folder, Path::new("/"));
            assert!(
                !home.starts_with(folder),
                "{} opens HOME ({})",
                folder.display(),
                home.display()
            );
        }
        assert!(policy.read.iter().any(|p| p.starts_with("/usr")));
    }

    #[test]
    fn was_denied_reads_the_kernels_words() {
        assert!(was_denied("cat: /root/x: Permission denied"));
        assert!(was_denied(
            "PermissionError: [Errno 13] Permission denied: '/etc/shadow'"
        ));
        assert!(!was_denied("1 failed"));
    }
}
