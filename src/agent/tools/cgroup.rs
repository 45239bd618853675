//! One cgroup per command: a process limit that also holds for root, and a kill that reaches
//! every process the command started, wherever it moved in the process tree.
//!
//! `RLIMIT_NPROC` does not apply to uid 0 and counts per user, and a process group is left by
//! any `setsid`. A cgroup holds both: `pids.max` counts every task in it whoever owns it, and
//! a process cannot leave its cgroup without write access to another one's `cgroup.procs`.
//! The command joins its cgroup between `fork` and `exec` (writing `0` to `cgroup.procs`), so
//! nothing it starts is ever outside.
//!
//! Where: the cgroup v1 `pids` hierarchy if it is mounted (limit and kill), else cgroup v2
//! (kill always; the limit when the `pids` controller is enabled for the server's cgroup's
//! children). The server needs write access to its own cgroup folder (root, or a delegated
//! cgroup). Without it commands run as before (rlimits and a process-group kill) and the
//! server says so at start ([`describe`]).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Where the per-command cgroups are made.
#[derive(Debug)]
pub(super) struct Cgroups {
    /// The server's own cgroup folder; command cgroups are made inside it.
    base: PathBuf,
    /// cgroup v2 (`cgroup.kill`) rather than v1.
    v2: bool,
    /// Command cgroups have `pids.max`.
    pids: bool,
}

/// The cgroups the server can use, found once; `Err` says why there are none.
pub(super) fn available() -> Result<&'static Cgroups, &'static str> {
    static FOUND: OnceLock<Result<Cgroups, String>> = OnceLock::new();
    FOUND.get_or_init(find).as_ref().map_err(String::as_str)
}

/// One line for the start-up log: what holds for commands here.
pub fn describe() -> Result<String, String> {
    match available() {
        Ok(c) if c.pids => Ok(format!(
            "each command runs in its own cgroup under {} (cgroup {}): \
             agent.commands.limits.processes is its pids.max (for root too), and every process \
             it leaves behind is killed when the call ends",
            c.base.display(),
            if c.v2 { "v2" } else { "v1 pids" }
        )),
        Ok(c) => Err(format!(
            "each command runs in its own cgroup under {} (cgroup v2), so every process it \
             leaves behind is killed when the call ends, but the pids controller is not enabled \
             there: agent.commands.limits.processes is RLIMIT_NPROC only, which does not hold \
             for root. Enable it with `echo +pids > {}/cgroup.subtree_control` (the folder must \
             have no processes of its own) or run agent-mcp in a container",
            c.base.display(),
            c.base.display()
        )),
        Err(why) => Err(format!(
            "no cgroup for commands ({why}): agent.commands.limits.processes is RLIMIT_NPROC \
             only, which does not hold for root, and a process a command moves out of its \
             process group (setsid) can outlive the call. Run agent-mcp as root or with a \
             delegated cgroup (systemd Delegate=yes), or in a container"
        )),
    }
}

fn find() -> Result<Cgroups, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mut tried = Vec::new();
    // cgroup v1 `pids` first: it has the limit wherever it is mounted.
    if let Some(path) = own_path(&own, |controllers| {
        controllers.split(',').any(|c| c == "pids")
    }) && let Some((root, mount)) = mount_of(&mounts, "cgroup", Some("pids"))
    {
        let base = under(&mount, &root, &path);
        match probe(&base) {
            Ok(()) => {
                return Ok(Cgroups {
                    base,
                    v2: false,
                    pids: true,
                });
            }
            Err(e) => tried.push(format!("{}: {e}", base.display())),
        }
    }
    if let Some(path) = own_path(&own, str::is_empty)
        && let Some((root, mount)) = mount_of(&mounts, "cgroup2", None)
    {
        let base = under(&mount, &root, &path);
        match probe(&base) {
            Ok(()) => {
                let pids = std::fs::read_to_string(base.join("cgroup.subtree_control"))
                    .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"));
                return Ok(Cgroups {
                    base,
                    v2: true,
                    pids,
                });
            }
            Err(e) => tried.push(format!("{}: {e}", base.display())),
        }
    }
    if tried.is_empty() {
        Err("no cgroup v1 pids hierarchy or cgroup v2 is mounted".into())
    } else {
        Err(format!("cannot make cgroups in {}", tried.join("; ")))
    }
}

/// The server's cgroup path in the hierarchy whose controller list satisfies `wanted`.
fn own_path(own: &str, wanted: impl Fn(&str) -> bool) -> Option<String> {
    own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        wanted(controllers).then(|| path.to_owned())
    })
}

/// `(root, mount point)` of the first mount of `fstype` (with `option` among its super
/// options, for v1).
fn mount_of(mounts: &str, fstype: &str, option: Option<&str>) -> Option<(String, PathBuf)> {
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut right = right.split(' ');
        if right.next()? != fstype {
            return None;
        }
        let _source = right.next()?;
        let options = right.next().unwrap_or_default();
        if let Some(option) = option
            && !options.split(',').any(|o| o == option)
        {
            return None;
        }
        let fields: Vec<&str> = left.split(' ').collect();
        Some((
            unescape(fields.get(3)?),
            PathBuf::from(unescape(fields.get(4)?)),
        ))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The folder of cgroup `path` in a hierarchy whose `root` is mounted at `mount`.
fn under(mount: &Path, root: &str, path: &str) -> PathBuf {
    let relative = path
        .strip_prefix(root)
        .unwrap_or(path)
        .trim_start_matches('/');
    if relative.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(relative)
    }
}

/// Can a cgroup be made (and removed) in `base`?
fn probe(base: &Path) -> std::io::Result<()> {
    let dir = base.join(format!("agent-mcp-probe-{}", std::process::id()));
    std::fs::create_dir(&dir)?;
    std::fs::remove_dir(&dir)
}

/// The cgroup of one command. Dropping it kills what is left in it and removes it.
#[derive(Debug)]
pub(super) struct Cage {
    dir: PathBuf,
    v2: bool,
    /// `cgroup.procs`, open for writing: the child writes `0` to it to join.
    procs: OwnedFd,
    /// A background clean-up after a drop: it does not hand on again.
    last_try: bool,
}

impl Cage {
    /// A new cgroup for one command, with `pids.max` = `processes` where the controller is
    /// there.
    pub(super) fn create(cgroups: &Cgroups, processes: Option<u64>) -> std::io::Result<Cage> {
        let dir = cgroups.base.join(format!(
            "agent-mcp-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&dir)?;
        let made = (|| {
            if cgroups.pids {
                let max = processes.map_or_else(|| "max".to_owned(), |n| n.to_string());
                std::fs::write(dir.join("pids.max"), max)?;
            }
            let procs = rustix::fs::open(
                dir.join("cgroup.procs"),
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?;
            Ok::<_, std::io::Error>(procs)
        })();
        match made {
            Ok(procs) => Ok(Cage {
                dir,
                v2: cgroups.v2,
                procs,
                last_try: false,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The open `cgroup.procs` (a duplicate), for the child to join with `write(fd, "0")`.
    pub(super) fn procs(&self) -> std::io::Result<OwnedFd> {
        self.procs.as_fd().try_clone_to_owned()
    }

    /// Processes in the cgroup now.
    fn members(&self) -> Vec<rustix::process::Pid> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter_map(rustix::process::Pid::from_raw)
            .collect()
    }

    /// Sends SIGKILL to everything in the cgroup once; `true` if it was empty.
    fn kill_once(&self) -> bool {
        if self.v2 {
            // Linux 5.14+: the kernel kills every member, forks in flight included.
            let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        }
        let members = self.members();
        for pid in &members {
            // ESRCH: it died meanwhile.
            let _ = rustix::process::kill_process(*pid, rustix::process::Signal::KILL);
        }
        members.is_empty()
    }

    /// Kills every process in the cgroup, repeating until it is empty (a process may fork
    /// while the list is read), then removes it. Waits at most about two seconds.
    pub(super) async fn kill_all(self) {
        for _ in 0..200 {
            if self.kill_once() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Drop finds it gone (or tries once more).
    }
}

impl Drop for Cage {
    fn drop(&mut self) {
        if !self.dir.exists() {
            return;
        }
        self.kill_once();
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        if self.last_try {
            tracing::warn!(
                cgroup = %self.dir.display(),
                "a command's cgroup could not be removed: a process in it did not die"
            );
            return;
        }
        // Killed processes take a moment to leave; finish in the background.
        let Ok(procs) = self.procs.try_clone() else {
            return;
        };
        let rest = Cage {
            dir: std::mem::take(&mut self.dir),
            v2: self.v2,
            procs,
            last_try: true,
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(rest.kill_all());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_own_cgroup_of_each_version() {
        let own = "9:name=systemd:/\n8:pids:/a/b\n4:memory:/x\n0::/user.slice/u\n";
        assert_eq!(
            own_path(own, |c| c.split(',').any(|c| c == "pids")),
            Some("/a/b".into())
        );
        assert_eq!(own_path(own, str::is_empty), Some("/user.slice/u".into()));
        let mounts = "30 25 0:26 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n\
                      31 25 0:27 /inner /sys/fs/cgroup/unified\\040x rw - cgroup2 cgroup2 rw\n";
        let (root, mount) = mount_of(mounts, "cgroup", Some("pids")).unwrap();
        assert_eq!(
            under(&mount, &root, "/a/b"),
            Path::new("/sys/fs/cgroup/pids/a/b")
        );
        let (root, mount) = mount_of(mounts, "cgroup2", None).unwrap();
        assert_eq!(
            under(&mount, &root, "/inner/c"),
            Path::new("/sys/fs/cgroup/unified x/c")
        );
        assert!(mount_of(mounts, "cgroup", Some("memory")).is_none());
    }
}
