//! The PostgreSQL server of the tests: `AGENT_MCP_TEST_PG_URL`, set by `scripts/postgres.sh`.
//! Without it a test is skipped with a loud note, except under CI (`CI` set), where it fails.

#![allow(dead_code)]

#[path = "../../src/store/postgres/test_server.rs"]
mod test_server;

// Each test binary uses a part of it.
#[allow(unused_imports)]
pub use test_server::{connect, fresh_database, server_url};

/// The `host:port` part of a `postgres://user:password@host:port/db` URL.
fn authority(url: &str) -> &str {
    let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The server of `url` as an IPv4 address on this machine (`localhost` is 127.0.0.1), for a
/// [`super::proxy::Proxy`] in front of it.
pub fn server_addr(url: &str) -> std::net::SocketAddr {
    let port = authority(url)
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(5432);
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// `url` with its server replaced by 127.0.0.1:`port` (a proxy in front of it).
pub fn via_port(url: &str, port: u16) -> String {
    url.replacen(authority(url), &format!("127.0.0.1:{port}"), 1)
}

/// The PostgreSQL programs (`initdb`, `pg_ctl`) for a cluster of the test's own:
/// `AGENT_MCP_TEST_PG_BIN` (set by `scripts/postgres.sh`). Without it the test is skipped with a
/// loud note, except under CI, where it fails, like [`server_url`].
pub fn bin_dir() -> Option<std::path::PathBuf> {
    match std::env::var_os("AGENT_MCP_TEST_PG_BIN") {
        Some(dir) if !dir.is_empty() => Some(dir.into()),
        _ if std::env::var_os("CI").is_some() => panic!(
            "AGENT_MCP_TEST_PG_BIN is not set, and CI must run the PostgreSQL tests: run them \
             as `bash scripts/postgres.sh cargo test --locked`"
        ),
        _ => {
            eprintln!(
                "SKIPPED: no PostgreSQL programs for this test (AGENT_MCP_TEST_PG_BIN is not \
                 set); run `bash scripts/postgres.sh cargo test --locked` to include it"
            );
            None
        }
    }
}

/// A PostgreSQL cluster of the test's own, which the test may stop and start (the shared test
/// server must not be: other tests use it). On 127.0.0.1, trust authentication, no fsync.
/// PostgreSQL refuses to run as root, so as root its programs run as the `postgres` user.
/// Dropped: stopped at once and deleted.
pub struct Cluster {
    bin: std::path::PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
}

impl Cluster {
    /// `initdb` and start; `None` when the test is skipped (see [`bin_dir`]).
    pub fn start() -> Option<Cluster> {
        let bin = bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("agent-mcp-pg-")
            .tempdir()
            .expect("a folder for the cluster");
        if is_root() {
            let (uid, gid) = postgres_ids();
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("give the cluster's folder to the postgres user");
        }
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().expect("its address").port()
        };
        let cluster = Cluster { bin, dir, port };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        cluster.start_server();
        Some(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            std::process::Command::new(&path)
        };
        let out = command
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server and waits until it takes connections.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("postgres.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server the way a restart does (`pg_ctl stop -m fast`: sessions are ended and
    /// their transactions rolled back) and waits until it is down.
    pub fn stop_server(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    /// The URL of database `postgres` on this cluster.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's address, for a [`super::proxy::Proxy`].
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let path = self.bin.join("pg_ctl");
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = if is_root() {
            std::process::Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&path)
                .args(args)
                .output()
        } else {
            std::process::Command::new(&path).args(args).output()
        };
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The uid and gid of the `postgres` user.
fn postgres_ids() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&"postgres"))
                .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))
                .flatten()
        })
        .expect("a postgres user (PostgreSQL refuses to run as root)")
}
