//! Commands without network: each command runs in a network namespace of its own, where the
//! only interface is a loopback that is up, so it reaches nothing outside itself (not the
//! internet, not this server's `/mcp`, not Ollama, not another service on 127.0.0.1) while
//! tools that talk to themselves over 127.0.0.1 (a test suite's own server) still work.
//!
//! The child enters the namespace between `fork` and `exec` (a step of `child.rs`): it calls
//! `unshare(CLONE_NEWNET)`, then brings `lo` up with one `RTM_NEWLINK` netlink message. That
//! needs `CAP_SYS_ADMIN` (root, or a container that grants it). A server without it tries an
//! unprivileged user namespace first (`CLONE_NEWUSER | CLONE_NEWNET`, the command's uid and gid
//! mapped to themselves), where the kernel allows those. Which of the two works is found once,
//! by starting `true` that way ([`isolation`]); where neither does, commands run with the
//! server's network and the server says so at start and in `check-config` ([`describe`]).
//! `agent.commands.network: true` turns the namespace off.

use std::ffi::CString;
use std::io;
use std::sync::OnceLock;

/// How a command is cut off from the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// `unshare(CLONE_NEWNET)` (the server has `CAP_SYS_ADMIN`).
    NetworkNamespace,
    /// `unshare(CLONE_NEWUSER | CLONE_NEWNET)`, the uid and gid mapped to themselves.
    UserAndNetworkNamespace,
}

/// The isolation this machine allows, found once; `Err` says why there is none.
pub fn isolation() -> Result<Isolation, &'static str> {
    static FOUND: OnceLock<Result<Isolation, String>> = OnceLock::new();
    FOUND
        .get_or_init(probe)
        .as_ref()
        .copied()
        .map_err(String::as_str)
}

/// One line for the start-up log and `check-config`: whether commands reach the network.
/// `Err` when they should not (`network` is false) but the kernel allows no isolation.
pub fn describe(network: bool) -> Result<String, String> {
    if network {
        return Ok("commands reach the network as the server does \
                   (agent.commands.network: true)"
            .to_owned());
    }
    match isolation() {
        Ok(how) => Ok(format!(
            "commands run without network: each in a network namespace of its own with only \
             loopback up ({}); set agent.commands.network: true to let them reach it",
            match how {
                Isolation::NetworkNamespace => "unshare(CLONE_NEWNET)",
                Isolation::UserAndNetworkNamespace =>
                    "an unprivileged user namespace, unshare(CLONE_NEWUSER | CLONE_NEWNET)",
            }
        )),
        Err(why) => Err(format!(
            "commands cannot be cut off from the network here ({why}); they reach it as the \
             server does, this server's /mcp and Ollama included. Run agent-mcp as root, with \
             CAP_SYS_ADMIN, or where unprivileged user namespaces are allowed \
             (kernel.unprivileged_userns_clone=1), or in a container without network"
        )),
    }
}

fn probe() -> Result<Isolation, String> {
    let mut tried = Vec::new();
    for how in [
        Isolation::NetworkNamespace,
        Isolation::UserAndNetworkNamespace,
    ] {
        match try_in_child(how) {
            Ok(()) => return Ok(how),
            Err(e) => tried.push(format!("{}: {e}", flag_names(how))),
        }
    }
    Err(tried.join("; "))
}

fn flag_names(how: Isolation) -> &'static str {
    match how {
        Isolation::NetworkNamespace => "unshare(CLONE_NEWNET)",
        Isolation::UserAndNetworkNamespace => "unshare(CLONE_NEWUSER | CLONE_NEWNET)",
    }
}

/// Starts `true` in the namespace `how` makes and waits for it.
fn try_in_child(how: Isolation) -> io::Result<()> {
    let mut command = std::process::Command::new("true");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    super::child::set_up_child(
        &mut command,
        super::child::ChildSetup::default().then(NetnsSetup::new(how)?),
    );
    let status = command.spawn()?.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("the probe ended with {status}")))
    }
}

/// What a child needs to enter its namespace, prepared before the fork (the child may only
/// make system calls: no allocation there).
#[derive(Debug)]
pub(super) struct NetnsSetup {
    how: Isolation,
    /// `/proc/self/uid_map`, `/proc/self/setgroups`, `/proc/self/gid_map` and what to write,
    /// for the user namespace.
    maps: Vec<(CString, Vec<u8>)>,
}

/// `RTM_NEWLINK` for interface 1 (`lo`, the first interface of every new network namespace)
/// with `IFF_UP` set and acknowledged: `struct nlmsghdr` then `struct ifinfomsg`.
const LOOPBACK_UP: [u8; 32] = {
    let mut msg = [0u8; 32];
    let len = 32u32.to_ne_bytes();
    let kind = 16u16.to_ne_bytes(); // RTM_NEWLINK
    let flags = (0x1u16 | 0x4).to_ne_bytes(); // NLM_F_REQUEST | NLM_F_ACK
    let seq = 1u32.to_ne_bytes();
    let index = 1i32.to_ne_bytes();
    let up = 1u32.to_ne_bytes(); // IFF_UP, in ifi_flags and ifi_change
    let mut i = 0;
    while i < 4 {
        msg[i] = len[i];
        msg[8 + i] = seq[i];
        msg[20 + i] = index[i];
        msg[24 + i] = up[i];
        msg[28 + i] = up[i];
        i += 1;
    }
    msg[4] = kind[0];
    msg[5] = kind[1];
    msg[6] = flags[0];
    msg[7] = flags[1];
    // ifi_family (AF_UNSPEC), ifi_type and the pid stay 0.
    msg
};

impl NetnsSetup {
    pub(super) fn new(how: Isolation) -> io::Result<NetnsSetup> {
        let mut maps = Vec::new();
        if how == Isolation::UserAndNetworkNamespace {
            let path = |p: &str| CString::new(p).map_err(io::Error::other);
            let uid = rustix::process::getuid().as_raw();
            let gid = rustix::process::getgid().as_raw();
            maps.push((
                path("/proc/self/uid_map")?,
                format!("{uid} {uid} 1").into_bytes(),
            ));
            // Writing gid_map unprivileged needs setgroups denied first.
            maps.push((path("/proc/self/setgroups")?, b"deny".to_vec()));
            maps.push((
                path("/proc/self/gid_map")?,
                format!("{gid} {gid} 1").into_bytes(),
            ));
        }
        Ok(NetnsSetup { how, maps })
    }

    /// In the child: the new namespace, then `lo` up. Only system calls, on values made
    /// before the fork.
    pub(super) fn enter(&self) -> io::Result<()> {
        use nix::sched::{CloneFlags, unshare};
        use rustix::fs::{Mode, OFlags};
        let flags = match self.how {
            Isolation::NetworkNamespace => CloneFlags::CLONE_NEWNET,
            Isolation::UserAndNetworkNamespace => {
                CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET
            }
        };
        unshare(flags).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        for (path, content) in &self.maps {
            let fd = rustix::fs::open(
                path.as_c_str(),
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            rustix::io::write(&fd, content)?;
        }
        bring_loopback_up()
    }
}

impl super::child::ChildStep for NetnsSetup {
    fn apply(&mut self) -> io::Result<()> {
        self.enter()
    }
}

/// Sends [`LOOPBACK_UP`] to the kernel and reads its acknowledgement.
fn bring_loopback_up() -> io::Result<()> {
    use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::send(&socket, &LOOPBACK_UP, SendFlags::empty())?;
    let mut ack = [0u8; 64];
    let (got, _) = rustix::net::recv(&socket, &mut ack[..], RecvFlags::empty())?;
    // NLMSG_ERROR (2) carries the result: 0, or a negative errno.
    if got < 20 || u16::from_ne_bytes([ack[4], ack[5]]) != 2 {
        return Err(io::Error::from(io::ErrorKind::InvalidData));
    }
    let code = i32::from_ne_bytes([ack[16], ack[17], ack[18], ack[19]]);
    if code != 0 {
        return Err(io::Error::from_raw_os_error(-code));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_message_is_rtm_newlink_up_for_interface_one() {
        assert_eq!(
            u32::from_ne_bytes(LOOPBACK_UP[0..4].try_into().unwrap()),
            32
        );
        assert_eq!(u16::from_ne_bytes([LOOPBACK_UP[4], LOOPBACK_UP[5]]), 16);
        assert_eq!(u16::from_ne_bytes([LOOPBACK_UP[6], LOOPBACK_UP[7]]), 5);
        assert_eq!(
            i32::from_ne_bytes(LOOPBACK_UP[20..24].try_into().unwrap()),
            1
        );
        assert_eq!(
            u32::from_ne_bytes(LOOPBACK_UP[24..28].try_into().unwrap()),
            1
        );
        assert_eq!(
            u32::from_ne_bytes(LOOPBACK_UP[28..32].try_into().unwrap()),
            1
        );
    }

    #[test]
    fn describe_says_what_holds() {
        assert!(
            describe(true)
                .unwrap()
                .contains("agent.commands.network: true")
        );
        match describe(false) {
            Ok(line) => assert!(line.contains("without network"), "{line}"),
            Err(why) => assert!(why.contains("cannot be cut off"), "{why}"),
        }
    }
}
