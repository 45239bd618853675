//! Where audit lines go: a file or stderr, written by one background thread so the request
//! path never touches the disk.
//!
//! Requests hand their [`AuditRecord`] to a bounded channel (`try_send`, never blocking). The
//! writer thread serialises records, batches whole lines (up to 64 KiB, or what arrived in
//! the last 5 ms while busy) and writes each batch with one `write_all`, so lines from several
//! processes appending to one file do not interleave. A failed write is reported on the
//! application log (target `agent_mcp::audit`) with the number of lines lost; a full channel
//! drops the record, counts it, and the next batch records how many were dropped.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::{Instant, SystemTime};

use super::record::AuditRecord;
use crate::config::AuditConfig;

/// Records waiting for the writer before new ones are dropped.
const CHANNEL_CAPACITY: usize = 16_384;
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
}

impl AuditSink {
    /// The sink `audit.file` asks for: that file, or stderr when it is unset. A file that
    /// cannot be opened is an error (the server refuses to start rather than keep its audit
    /// trail somewhere the operator did not say).
    pub fn from_config(config: &AuditConfig) -> io::Result<AuditSink> {
        match &config.file {
            None => Ok(Self::stderr()),
            Some(path) => Self::file(path).map_err(|e| {
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

    /// Appends to `path`, creating it with mode 0600 and its parent directories.
    pub fn file(path: &Path) -> io::Result<AuditSink> {
        let file = open_append(path)?;
        Ok(Self::to_writer(file, path.display().to_string()))
    }

    pub fn stderr() -> AuditSink {
        Self::to_writer(io::stderr(), "stderr".to_owned())
    }

    /// Writes to any `Write` (tests, embedding). `label` names it in error reports.
    pub fn to_writer<W: Write + Send + 'static>(writer: W, label: String) -> AuditSink {
        let (tx, rx) = sync_channel(CHANNEL_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let writer_dropped = dropped.clone();
        let spawned = std::thread::Builder::new()
            .name("agent-mcp-audit".into())
            .spawn(move || Writer::new(writer, label, writer_dropped).run(rx));
        if let Err(e) = spawned {
            // The receiver is gone with the closure, so every send reports the loss.
            tracing::error!(target: "agent_mcp::audit", error = %e, "cannot start the audit writer thread");
        }
        AuditSink(Arc::new(SinkInner { tx, dropped }))
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

struct Writer<W> {
    out: W,
    label: String,
    dropped: Arc<AtomicU64>,
    buf: Vec<u8>,
    lines: u64,
    lost: u64,
}

impl<W: Write> Writer<W> {
    fn new(out: W, label: String, dropped: Arc<AtomicU64>) -> Self {
        Self {
            out,
            label,
            dropped,
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
        }
    }

    fn write_batch(&mut self) {
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
        match self
            .out
            .write_all(&self.buf)
            .and_then(|()| self.out.flush())
        {
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
