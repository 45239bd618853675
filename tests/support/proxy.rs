//! A TCP proxy between one process and a server (the tests put it between one `agent-mcp`
//! instance and PostgreSQL) that can cut the path the ways a network does:
//!
//! - [`Proxy::cut_silently`]: packets dropped. Nothing flows either way and nothing is closed;
//!   a new connection is accepted (the kernel does that) but never reaches the server. What was
//!   sent meanwhile is held, and delivered when the path heals, as TCP retransmits would.
//! - [`Proxy::cut_hard`]: connections reset. Every open connection gets a TCP RST on both
//!   sides, and a new one is reset at once.
//! - [`Proxy::heal`]: traffic flows again (connections a silent cut held go on where they
//!   stopped).
//!
//! It runs on its own thread with its own runtime, like the fake Ollama, so a test that blocks
//! does not stall it.

#![allow(dead_code)]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use super::background::serve_in_background;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Silent,
    Reset,
}

/// A running proxy; stops (resetting every connection) on drop.
pub struct Proxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    stop: Option<oneshot::Sender<()>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 and forwards every connection to `target`.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("proxy address");
        let (mode, watching) = watch::channel(Mode::Pass);
        let name = format!("tcp-proxy-{}", addr.port());
        let stop = serve_in_background(name, 1, listener, move |listener| {
            accept_loop(listener, target, watching)
        });
        Proxy {
            addr,
            mode,
            stop: Some(stop),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn cut_silently(&self) {
        self.mode.send_replace(Mode::Silent);
    }

    pub fn cut_hard(&self) {
        self.mode.send_replace(Mode::Reset);
    }

    pub fn heal(&self) {
        self.mode.send_replace(Mode::Pass);
    }

    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.mode.send_replace(Mode::Reset);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, mode: watch::Receiver<Mode>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(serve(client, target, mode.clone()));
    }
}

/// Waits while the path is cut silently; `false` when it is reset (or the proxy stops).
async fn passing(mode: &mut watch::Receiver<Mode>) -> bool {
    match mode.wait_for(|m| *m != Mode::Silent).await {
        Ok(m) => *m == Mode::Pass,
        Err(_) => false,
    }
}

/// Resolves when the path is reset.
async fn reset(mut mode: watch::Receiver<Mode>) {
    let _ = mode.wait_for(|m| *m == Mode::Reset).await;
}

/// Sends an RST instead of a FIN when the socket is dropped.
fn abort(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

async fn serve(mut client: TcpStream, target: SocketAddr, mut mode: watch::Receiver<Mode>) {
    // A connection made during a silent cut waits, like a SYN nobody answers.
    if !passing(&mut mode).await {
        return abort(client);
    }
    let Ok(mut server) = TcpStream::connect(target).await else {
        return abort(client);
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let up = pump(client_read, server_write, mode.clone());
        let down = pump(server_read, client_write, mode.clone());
        tokio::select! {
            _ = async { tokio::join!(up, down) } => {}
            () = reset(mode.clone()) => {}
        }
    }
    if *mode.borrow() == Mode::Reset {
        abort(client);
        abort(server);
    }
}

/// Copies one direction, holding the bytes while the path is cut silently.
async fn pump(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if !passing(&mut mode).await {
            return;
        }
        // Stop reading as soon as a cut starts, so the sender's data waits in its buffers.
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => n,
            },
            _ = mode.changed() => continue,
        };
        if !passing(&mut mode).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
