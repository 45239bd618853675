//! Where audit lines go: a file or stderr, written by one background thread so the request
//! path never touches the disk.
//!
//! Requests hand their [`AuditRecord`] to a bounded channel (`try_send`, never blocking). The
//! writer thread serialises records, batches whole lines (up to 64 KiB, or what arrived in
//! the last 5 ms while busy) and writes each batch with one `write_all`, so lines from several
//! processes appending to one file do not interleave. A failed write is reported on the
//! application log (target `agent_mcp::audit`) with the number of lines lost; a full channel
//! drops the record, counts it, and the next batch records how many were dropped.
//!
//! Rotation of a file sink (issue 20): [`AuditSink::reopen`] (SIGHUP in the server) makes the
//! writer open the path again before its next batch, so after logrotate renames the file new
//! lines go to a fresh one and none is lost in between (they go to the renamed file until
//! then). With a size limit ([`Rotation`]) the writer itself renames `file` → `file.1` → … →
//! `file.<keep>` before a line would take the file past the limit, splitting a batch only
//! between lines. New files are created with mode 0600. A rename or open that fails is
//! reported and the writer keeps appending to the file it has, so no line is lost for it.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::{Instant, SystemTime};

use crate::plugin::task::input::{ApprovalEvent, DecisionLog};

use super::record::{AuditRecord, MAX_NAME_BYTES, capped, name_field};

/// Records waiting for the writer before new ones are dropped.
const CHANNEL_CAPACITY: usize = 16_384;
/// `agent_mcp_log_lines_dropped_total`, whose `log="audit"` series counts the records this
/// writer had to drop.
pub const LINES_DROPPED: &str = "agent_mcp_log_lines_dropped_total";
/// A batch is written once it reaches this size.
const BATCH_BYTES: usize = 64 * 1024;
/// While lines keep coming, the writer collects them for this long between writes.
const BATCH_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// A cheap-to-clone handle to the audit writer thread (one reference count).
#[derive(Clone, Debug)]
pub struct AuditSink(Arc<SinkInner>);

#[derive(Debug)]
struct SinkInner {
    tx: SyncSender<Queued>,
    dropped: Arc<AtomicU64>,
    /// Set by [`AuditSink::reopen`]; the writer reopens its file before the next batch.
    reopen: Arc<AtomicBool>,
}

impl DecisionLog for AuditSink {
    fn record(&self, event: &ApprovalEvent) {
        self.send_approval(event);
    }
}

/// Size-based rotation of a file sink: before a line would take the file past `max_bytes`,
/// `file` becomes `file.1` (the older ones move up to `file.<keep>`, the oldest is deleted) and
/// a new `file` is started. A single line longer than `max_bytes` gets a file of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    pub max_bytes: u64,
    /// Rotated files kept (at least 1).
    pub keep: u32,
}

/// What goes to the writer: a record, or a request to write out everything before it.
#[expect(
    clippy::large_enum_variant,
    reason = "records are the traffic; boxing them would allocate per request"
)]
enum Queued {
    /// A record queued by the audit layer carries the instant its request arrived, and the
    /// writer turns that into the wall-clock `time`, so the request path reads the clock
    /// once instead of twice.
    Record {
        arrived: Option<Instant>,
        record: AuditRecord,
    },
    Flush(SyncSender<()>),
    /// Wakes an idle writer so a [`AuditSink::reopen`] takes effect now.
    Wake,
    /// Refusals of one peer counted but not written (see `throttle.rs`).
    Suppressed {
        peer: String,
        count: u64,
    },
    /// An approval decided by the core (see [`DecisionLog`]).
    Approval(ApprovalEvent),
}

impl AuditSink {
    /// The sink `file` asks for (`audit.file`): that file, or stderr when it is `None`. A
    /// file that cannot be opened is an error (the server refuses to start rather than keep
    /// its audit trail somewhere the operator did not say).
    pub fn open(file: Option<&Path>, rotation: Option<Rotation>) -> io::Result<AuditSink> {
        match file {
            None => Ok(Self::stderr()),
            Some(path) => Self::file_rotating(path, rotation).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot open audit.file {}: {e}; fix the path or its permissions, or \
                         leave audit.file unset to write audit lines to stderr",
                        path.display()
                    ),
                )
            }),
        }
    }

    /// Appends to `path`, creating it with mode 0600 and its parent directories. Never
    /// rotated by size; [`AuditSink::reopen`] opens `path` again.
    pub fn file(path: &Path) -> io::Result<AuditSink> {
        Self::file_rotating(path, None)
    }

    /// [`AuditSink::file`], rotated by size when `rotation` is given.
    pub fn file_rotating(path: &Path, rotation: Option<Rotation>) -> io::Result<AuditSink> {
        let file = open_append(path)?;
        let len = file.metadata()?.len();
        let out = Output::File(LogFile {
            path: path.to_path_buf(),
            file,
            len,
            rotation,
            failing: false,
        });
        Ok(Self::spawn(out, path.display().to_string()))
    }

    pub fn stderr() -> AuditSink {
        Self::to_writer(io::stderr(), "stderr".to_owned())
    }

    /// Writes to any `Write` (tests, embedding). `label` names it in error reports.
    pub fn to_writer<W: Write + Send + 'static>(writer: W, label: String) -> AuditSink {
        Self::spawn(Output::Stream(Box::new(writer)), label)
    }

    fn spawn(out: Output, label: String) -> AuditSink {
        let (tx, rx) = sync_channel(CHANNEL_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let reopen = Arc::new(AtomicBool::new(false));
        let (writer_dropped, writer_reopen) = (dropped.clone(), reopen.clone());
        let spawned = std::thread::Builder::new()
            .name("agent-mcp-audit".into())
            .spawn(move || Writer::new(out, label, writer_dropped, writer_reopen).run(rx));
        if let Err(e) = spawned {
            // The receiver is gone with the closure, so every send reports the loss.
            tracing::error!(target: "agent_mcp::audit", error = %e, "cannot start the audit writer thread");
        }
        AuditSink(Arc::new(SinkInner {
            tx,
            dropped,
            reopen,
        }))
    }

    /// Asks the writer to open its file again (by path) before it writes the next lines:
    /// what logrotate's `postrotate` expects after renaming the file. Lines queued before the
    /// new file is open go to the old one; none is lost or split. Nothing happens for stderr
    /// or another writer. Does not block.
    pub fn reopen(&self) {
        self.0.reopen.store(true, Ordering::Release);
        // An idle writer waits for a message; a full channel means it is busy and will see
        // the flag before its next write.
        let _ = self.0.tx.try_send(Queued::Wake);
    }

    /// Queues a record without blocking.
    pub fn send(&self, record: AuditRecord) {
        self.queue(Queued::Record {
            arrived: None,
            record,
        });
    }

    /// Queues a record of a request that arrived at `arrived`; the writer sets its `time`.
    pub(super) fn send_arrived(&self, arrived: Instant, record: AuditRecord) {
        self.queue(Queued::Record {
            arrived: Some(arrived),
            record,
        });
    }

    /// Queues the line that says `count` refusals of `peer` were counted, not written.
    pub fn send_suppressed(&self, peer: &str, count: u64) {
        self.queue(Queued::Suppressed {
            peer: peer.to_owned(),
            count,
        });
    }

    /// Queues the line of one approval decision:
    /// `{"time","event":"approval","task_id","key","tool","decision","by"}`.
    pub fn send_approval(&self, event: &ApprovalEvent) {
        self.queue(Queued::Approval(event.clone()));
    }

    /// Waits until every record queued before this call is written (or its write failed and
    /// was reported), for at most `timeout`. Blocks the calling thread: for shutdown, so the
    /// last lines are not lost with the process. `false` if the writer did not answer in time.
    pub fn flush(&self, timeout: std::time::Duration) -> bool {
        let (done, written) = sync_channel(1);
        let deadline = Instant::now() + timeout;
        let mut message = Queued::Flush(done);
        // The channel may be full; the flush waits its turn like a record would.
        loop {
            match self.0.tx.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    message = back;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
        written
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }

    fn queue(&self, queued: Queued) {
        match self.0.tx.try_send(queued) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                metrics::counter!(LINES_DROPPED, "log" => "audit").increment(1);
                if self.0.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        target: "agent_mcp::audit",
                        "the audit writer is behind; dropping audit lines until it catches up"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                tracing::error!(
                    target: "agent_mcp::audit",
                    "the audit writer has stopped; an audit line was lost"
                );
            }
        }
    }
}

fn open_append(path: &Path) -> io::Result<std::fs::File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let file = options.open(path)?;
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                target: "agent_mcp::audit",
                path = %path.display(),
                mode = format!("{:o}", mode & 0o777),
                "the audit file is readable by others; chmod 600 it"
            );
        }
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// Where the writer puts its batches.
enum Output {
    File(LogFile),
    Stream(Box<dyn Write + Send>),
}

impl Output {
    fn write_batch(&mut self, batch: &[u8]) -> io::Result<()> {
        match self {
            Output::File(file) => file.write_batch(batch),
            Output::Stream(out) => out.write_all(batch).and_then(|()| out.flush()),
        }
    }

    fn reopen(&mut self) {
        if let Output::File(file) = self {
            file.reopen();
        }
    }
}

/// An audit file, its size as far as this writer knows, and its rotation.
struct LogFile {
    path: PathBuf,
    file: File,
    len: u64,
    rotation: Option<Rotation>,
    /// A rotation or reopen failed and was reported; the next failure is not reported again.
    failing: bool,
}

impl LogFile {
    /// Writes whole lines, rotating between lines when the size limit asks for it.
    fn write_batch(&mut self, mut batch: &[u8]) -> io::Result<()> {
        let Some(rotation) = self.rotation else {
            return self.append(batch);
        };
        while !batch.is_empty() {
            let room = rotation.max_bytes.saturating_sub(self.len);
            let take = if batch.len() as u64 <= room {
                batch.len()
            } else {
                // `room < batch.len()`, so it fits in usize.
                match batch[..room as usize].iter().rposition(|b| *b == b'\n') {
                    Some(end) => end + 1,
                    // A line longer than the limit: alone in a fresh file.
                    None if self.len == 0 => batch
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(batch.len(), |end| end + 1),
                    None => 0,
                }
            };
            self.append(&batch[..take])?;
            batch = &batch[take..];
            if !batch.is_empty() && !self.rotate(rotation.keep) {
                // Cannot rotate (reported): keep every line in the file we have.
                return self.append(batch);
            }
        }
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.file.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// `path.<n>` of a rotated file.
    fn numbered(&self, n: u32) -> PathBuf {
        let mut name = OsString::from(self.path.as_os_str());
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// `path.<keep-1>` → `path.<keep>` (replacing the oldest), …, `path` → `path.1`, then a
    /// new `path`. `false` (reported) if the file could not be moved aside or a new one
    /// opened; the current file stays in use then.
    fn rotate(&mut self, keep: u32) -> bool {
        for n in (1..keep).rev() {
            if let Err(e) = rename_if_present(&self.numbered(n), &self.numbered(n + 1)) {
                self.report("cannot rotate an older audit file", &e);
                return false;
            }
        }
        // Gone already (renamed by someone else): the next open starts the new file all the same.
        if let Err(e) = rename_if_present(&self.path, &self.numbered(1)) {
            self.report("cannot rotate the audit file", &e);
            return false;
        }
        self.reopen();
        !self.failing
    }

    /// Opens `path` again (creating it 0600) and writes there from now on; on failure the
    /// current file stays in use.
    fn reopen(&mut self) {
        match open_append(&self.path).and_then(|f| Ok((f.metadata()?.len(), f))) {
            Ok((len, file)) => {
                self.file = file;
                self.len = len;
                if self.failing {
                    tracing::warn!(target: "agent_mcp::audit", path = %self.path.display(), "the audit file is open again");
                    self.failing = false;
                }
            }
            Err(e) => self.report(
                "cannot open the audit file again; still writing to the file open before",
                &e,
            ),
        }
    }

    fn report(&mut self, what: &str, error: &io::Error) {
        if !self.failing {
            tracing::error!(target: "agent_mcp::audit", path = %self.path.display(), error = %error, "{what}");
            self.failing = true;
        }
    }
}

fn rename_if_present(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

struct Writer {
    out: Output,
    label: String,
    dropped: Arc<AtomicU64>,
    reopen: Arc<AtomicBool>,
    buf: Vec<u8>,
    lines: u64,
    lost: u64,
}

impl Writer {
    fn new(out: Output, label: String, dropped: Arc<AtomicU64>, reopen: Arc<AtomicBool>) -> Self {
        Self {
            out,
            label,
            dropped,
            reopen,
            buf: Vec::with_capacity(BATCH_BYTES),
            lines: 0,
            lost: 0,
        }
    }

    fn run(mut self, rx: Receiver<Queued>) {
        // Block only when idle. Under load the thread naps between batches instead: a sender
        // whose receiver is parked in `recv` must wake it with a syscall, which would cost
        // every request microseconds; a napping receiver costs senders nothing.
        while let Ok(mut record) = rx.recv() {
            self.push(&mut record);
            loop {
                let mut closed = false;
                loop {
                    match rx.try_recv() {
                        Ok(mut record) => {
                            self.push(&mut record);
                            if self.buf.len() >= BATCH_BYTES {
                                self.write_batch();
                            }
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            closed = true;
                            break;
                        }
                    }
                }
                let busy = self.lines > 0;
                self.write_batch();
                if closed {
                    return;
                }
                if !busy {
                    break;
                }
                std::thread::sleep(BATCH_PAUSE);
            }
        }
        self.write_batch();
    }

    fn push(&mut self, queued: &mut Queued) {
        match queued {
            Queued::Record { arrived, record } => {
                if let Some(arrived) = arrived {
                    let now = SystemTime::now();
                    record.time = now.checked_sub(arrived.elapsed()).unwrap_or(now);
                }
                record.write_json(&mut self.buf);
                self.buf.push(b'\n');
                self.lines += 1;
            }
            Queued::Flush(done) => {
                self.write_batch();
                let _ = done.try_send(());
            }
            Queued::Wake => {}
            Queued::Approval(event) => self.write_approval(event),
            Queued::Suppressed { peer, count } => {
                let note = serde_json::json!({
                    "time": humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
                    "event": "refusals_suppressed",
                    "peer": peer,
                    "count": count,
                });
                if serde_json::to_writer(&mut self.buf, &note).is_ok() {
                    self.buf.push(b'\n');
                    self.lines += 1;
                }
            }
        }
    }

    fn write_approval(&mut self, event: &ApprovalEvent) {
        // The key and tool are the server's own names; the identity is capped like a
        // request line's.
        let note = serde_json::json!({
            "time": humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
            "event": "approval",
            "task_id": event.task_id,
            "key": event.key.as_deref().map(|k| capped(k, MAX_NAME_BYTES)),
            "tool": name_field(&event.tool),
            "decision": event.decision,
            "by": event.by.as_deref().map(|b| capped(b, MAX_NAME_BYTES)),
        });
        if serde_json::to_writer(&mut self.buf, &note).is_ok() {
            self.buf.push(b'\n');
            self.lines += 1;
        }
    }

    fn write_batch(&mut self) {
        if self.reopen.swap(false, Ordering::Acquire) {
            self.out.reopen();
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::error!(
                target: "agent_mcp::audit",
                dropped,
                "audit lines were dropped because the audit writer was behind"
            );
            let note = serde_json::json!({
                "time": humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
                "event": "audit_lines_dropped",
                "count": dropped,
            });
            if serde_json::to_writer(&mut self.buf, &note).is_ok() {
                self.buf.push(b'\n');
                self.lines += 1;
            }
        }
        if self.buf.is_empty() {
            return;
        }
        match self.out.write_batch(&self.buf) {
            Ok(()) => {
                if self.lost > 0 {
                    tracing::warn!(
                        target: "agent_mcp::audit",
                        sink = %self.label,
                        lost = self.lost,
                        "audit writes work again"
                    );
                    self.lost = 0;
                }
            }
            Err(e) => {
                if self.lost == 0 {
                    tracing::error!(
                        target: "agent_mcp::audit",
                        sink = %self.label,
                        error = %e,
                        lines = self.lines,
                        "cannot write audit lines; they are lost (responses are not affected)"
                    );
                }
                self.lost += self.lines;
            }
        }
        self.buf.clear();
        self.lines = 0;
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::super::test_files::{self, file_names, mode};
    use super::*;
    use std::time::Duration;

    /// A line of about 250 bytes, numbered by its JSON-RPC id.
    fn record(n: i64) -> AuditRecord {
        AuditRecord {
            time: SystemTime::now(),
            id: Some(crate::plugin::RequestId::Number(n)),
            era: "modern",
            version: "2026-07-28",
            transport: "http",
            peer: Some(([127, 0, 0, 1], 4000).into()),
            identity: Some("alice".into()),
            client: None,
            method: "tools/call".into(),
            tool: Some("agent_status".into()),
            task_id: Some(uuid::Uuid::nil()),
            session_id: None,
            outcome: crate::plugin::Outcome::Ok,
            error_code: None,
            error_message: None,
            duration_us: 12,
            args: None,
            suppressed: None,
            answers: None,
        }
    }

    #[test]
    fn size_rotation_keeps_keep_files_of_whole_lines_under_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let rotation = Rotation {
            max_bytes: 4096,
            keep: 3,
        };
        let sink = AuditSink::file_rotating(&path, Some(rotation)).unwrap();
        let total = 2000;
        for n in 0..total {
            sink.send(record(n));
            if n % 500 == 499 {
                // Let the writer catch up, so nothing is dropped for a full channel.
                assert!(sink.flush(Duration::from_secs(10)));
            }
        }
        assert!(sink.flush(Duration::from_secs(10)));
        assert_eq!(
            file_names(dir.path()),
            [
                "audit.jsonl",
                "audit.jsonl.1",
                "audit.jsonl.2",
                "audit.jsonl.3"
            ]
        );
        let files: Vec<PathBuf> = [
            "audit.jsonl.3",
            "audit.jsonl.2",
            "audit.jsonl.1",
            "audit.jsonl",
        ]
        .iter()
        .map(|n| dir.path().join(n))
        .collect();
        for file in &files {
            let len = std::fs::metadata(file).unwrap().len();
            assert!(len <= rotation.max_bytes, "{file:?} has {len} bytes");
            assert_eq!(mode(file), 0o600, "{file:?}");
        }
        // Oldest to newest, the kept files hold the last lines written, in order, none missing.
        let ids = ids_in(&files);
        let first = ids[0];
        assert!(first > 0, "older lines were rotated away");
        assert_eq!(ids, (first..total).collect::<Vec<_>>());
        // The rotated files are full up to the last line that fit.
        let line_len = std::fs::read_to_string(&files[0])
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .len() as u64
            + 1;
        for file in &files[..3] {
            let len = std::fs::metadata(file).unwrap().len();
            assert!(
                len + line_len + 16 > rotation.max_bytes,
                "{file:?} rotated early at {len}"
            );
        }
    }

    #[test]
    fn reopen_after_a_rename_moves_new_lines_to_a_new_file_and_loses_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.jsonl");
        let sink = AuditSink::file(&path).unwrap();
        let mut files = Vec::new();
        let mut n = 0;
        for round in 0..5 {
            for _ in 0..300 {
                sink.send(record(n));
                n += 1;
            }
            // As logrotate does: rename, then signal; lines keep coming meanwhile.
            let rotated = dir.path().join(format!("logs/audit.jsonl.r{round}"));
            std::fs::rename(&path, &rotated).unwrap();
            files.push(rotated);
            for _ in 0..100 {
                sink.send(record(n));
                n += 1;
            }
            sink.reopen();
            assert!(sink.flush(Duration::from_secs(10)));
            assert!(path.exists(), "reopen created the file again");
            assert_eq!(mode(&path), 0o600);
        }
        files.push(path.clone());
        let mut ids = ids_in(&files);
        ids.sort_unstable();
        assert_eq!(ids, (0..n).collect::<Vec<_>>());
        // Once reopened, nothing more goes to the renamed files.
        let before = ids_in(&files[..5]).len();
        sink.send(record(n));
        assert!(sink.flush(Duration::from_secs(10)));
        assert_eq!(ids_in(&files[..5]).len(), before);
        assert_eq!(ids_in(&files[5..]).last(), Some(&n));
    }

    #[test]
    fn an_idle_writer_reopens_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = AuditSink::file(&path).unwrap();
        sink.send(record(1));
        assert!(sink.flush(Duration::from_secs(10)));
        std::fs::rename(&path, dir.path().join("old")).unwrap();
        sink.reopen();
        for _ in 0..500 {
            if path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the idle writer did not reopen the file");
    }

    #[test]
    fn a_line_longer_than_the_limit_gets_a_file_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = AuditSink::file_rotating(
            &path,
            Some(Rotation {
                max_bytes: 600,
                keep: 5,
            }),
        )
        .unwrap();
        let mut long = record(2);
        long.error_message = Some("x".repeat(1000));
        sink.send(record(1));
        sink.send(long);
        sink.send(record(3));
        assert!(sink.flush(Duration::from_secs(10)));
        let files = ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"].map(|n| dir.path().join(n));
        for (file, id) in files.iter().zip([1, 2, 3]) {
            assert_eq!(ids_in(std::slice::from_ref(file)), [id], "{file:?}");
        }
    }

    #[test]
    fn an_approval_is_a_line_of_its_own_with_a_capped_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = AuditSink::file(&path).unwrap();
        let log: &dyn DecisionLog = &sink;
        let task = uuid::Uuid::new_v4();
        log.record(&ApprovalEvent {
            task_id: task,
            key: Some("approval-1".into()),
            tool: "run_command".into(),
            decision: "accept",
            by: Some("a".repeat(500)),
        });
        log.record(&ApprovalEvent {
            task_id: task,
            key: None,
            tool: "write_file".into(),
            decision: "deny",
            by: None,
        });
        assert!(sink.flush(Duration::from_secs(10)));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["event"], "approval");
        assert_eq!(lines[0]["task_id"], task.to_string());
        assert_eq!(lines[0]["key"], "approval-1");
        assert_eq!(lines[0]["decision"], "accept");
        let by = lines[0]["by"].as_str().unwrap();
        assert!(by.len() < 200 && by.starts_with("aaaa"), "{by}");
        assert_eq!(
            lines[1],
            serde_json::json!({"time": lines[1]["time"], "event": "approval", "task_id": task,
                               "key": null, "tool": "write_file", "decision": "deny", "by": null})
        );
    }

    /// Every id in the lines of `files`, each line checked to be whole JSON.
    fn ids_in(files: &[PathBuf]) -> Vec<i64> {
        test_files::ids_in(files, |_| {})
    }
}
