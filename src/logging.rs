//! The application log's writer: stderr behind a bounded queue, so a host that stops reading
//! stderr (or closes it) can never stall the server.
//!
//! Every log line is handed to one writer thread through a bounded channel without waiting;
//! when the queue is full (nobody drains stderr) the line is dropped and counted instead.
//! The thread writes what it gets and ignores write errors: a closed stderr (`EPIPE`) costs
//! the lines, never a panic or a blocked task. When lines had to be dropped and the writer
//! gets through again, it writes one warning line saying how many, and the count is in
//! `/metrics` (`agent_mcp_log_lines_dropped_total{log="application"}`, see
//! [`crate::metrics`]).
//!
//! Why not `tracing-appender`: its non-blocking writer does the same (a bounded channel, a
//! lossy mode, a drop counter) but pulls in `time` and crossbeam for its rolling files, which
//! this server does not use; the audit writer (`layers/audit/sink.rs`) is built the same way.
//!
//! The test `a_line_is_written_and_nothing_dropped` below shows the writer in use.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

/// Lines waiting for stderr before new ones are dropped: a few MiB at most.
pub const QUEUE_LINES: usize = 8192;

/// A `MakeWriter` for `tracing_subscriber::fmt` that never blocks (see the module docs).
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct LogWriter {
    tx: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// Stops the writer thread when dropped, after it wrote what was queued (for at most a second).
#[derive(Debug)]
pub struct LogGuard {
    writer: LogWriter,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.writer.flush(Duration::from_secs(1));
    }
}

impl LogWriter {
    /// Starts the writer thread over `out`, with room for `queue_lines` lines.
    pub fn spawn<W: Write + Send + 'static>(out: W, queue_lines: usize) -> (LogWriter, LogGuard) {
        let (tx, rx) = sync_channel(queue_lines.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        let spawned = std::thread::Builder::new()
            .name("agent-mcp-log".into())
            .spawn(move || write_lines(out, &rx, &counted));
        // Without the thread the receiver is gone, so every line is counted as dropped.
        drop(spawned);
        let writer = LogWriter { tx, dropped };
        (
            writer.clone(),
            LogGuard {
                writer: writer.clone(),
            },
        )
    }

    /// stderr, with [`QUEUE_LINES`] of room.
    pub fn stderr() -> (LogWriter, LogGuard) {
        Self::spawn(io::stderr(), QUEUE_LINES)
    }

    /// Lines dropped so far because the queue was full (or the writer gone). The server reads
    /// the count from `/metrics`; this is the tests'.
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits until the lines queued before this call are written, for at most `timeout`.
    /// `false` if the writer did not get there in time (stderr not read).
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let (done, written) = sync_channel(1);
        let mut message = Message::Flush(done);
        // A full queue: the flush waits its turn like a line would, until the deadline.
        loop {
            match self.tx.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => {
                    if std::time::Instant::now() >= deadline {
                        return false;
                    }
                    message = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        written
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .is_ok()
    }

    fn send(&self, line: &[u8]) {
        match self.tx.try_send(Message::Line(line.to_vec())) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(crate::metrics::LOG_LINES_DROPPED, "log" => "application")
                    .increment(1);
            }
        }
    }
}

/// The writer thread: writes each line, ignores write errors (a closed stderr), and after
/// lines were dropped writes one line saying how many.
fn write_lines<W: Write>(mut out: W, rx: &Receiver<Message>, dropped: &AtomicU64) {
    let mut reported = 0;
    while let Ok(message) = rx.recv() {
        match message {
            Message::Line(line) => {
                let _ = out.write_all(&line);
                // Counted once the write is through, not before it: a write that blocks (stderr
                // not read) is when lines drop, and they belong to the same one warning.
                let now = dropped.load(Ordering::Relaxed);
                if now > reported {
                    let note = format!(
                        "agent-mcp: {} log line(s) were dropped because stderr was not read fast \
                         enough (see agent_mcp_log_lines_dropped_total)\n",
                        now - reported
                    );
                    let _ = out.write_all(note.as_bytes());
                    reported = now;
                }
            }
            Message::Flush(done) => {
                let _ = out.flush();
                let _ = done.try_send(());
            }
        }
    }
    let _ = out.flush();
}

/// One event's bytes: `tracing_subscriber::fmt` formats an event and writes it whole.
#[derive(Debug)]
pub struct LineWriter<'a>(&'a LogWriter);

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    /// A writer that blocks until released, as a pipe nobody reads does.
    #[derive(Clone, Default)]
    struct Stuck {
        released: Arc<(Mutex<bool>, Condvar)>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let (lock, cvar) = &*self.released;
            let mut released = lock.lock().unwrap();
            while !*released {
                released = cvar.wait(released).unwrap();
            }
            self.written.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_is_written_and_nothing_dropped() {
        let (writer, _guard) = LogWriter::spawn(Vec::<u8>::new(), 4);
        let mut line = tracing_subscriber::fmt::MakeWriter::make_writer(&writer);
        line.write_all(b"one line\n").unwrap();
        assert_eq!(writer.dropped(), 0);
    }

    #[test]
    fn a_stuck_stderr_drops_and_counts_lines_and_never_blocks_the_logger() {
        let stuck = Stuck::default();
        let (writer, _guard) = LogWriter::spawn(stuck.clone(), 4);
        let started = std::time::Instant::now();
        // As tracing-subscriber writes an event: one write of the whole line.
        for n in 0..1000 {
            writer
                .make_writer()
                .write_all(format!("line {n}\n").as_bytes())
                .unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(2));
        // At most the queue and the line in the writer's hands got through.
        assert!(writer.dropped() >= 1000 - 6, "{}", writer.dropped());
        *stuck.released.0.lock().unwrap() = true;
        stuck.released.1.notify_all();
        assert!(
            writer.flush(Duration::from_secs(5)),
            "the released writer drains"
        );
        writer.make_writer().write_all(b"after\n").unwrap();
        assert!(writer.flush(Duration::from_secs(5)));
        let text = String::from_utf8(stuck.written.lock().unwrap().clone()).unwrap();
        assert!(text.ends_with("after\n"), "{text}");
        let warnings = text.lines().filter(|l| l.contains("were dropped")).count();
        assert_eq!(warnings, 1, "{text}");
        assert!(text.contains(&format!("{} log line(s) were dropped", writer.dropped())));
    }

    /// A closed stderr: every write fails; nothing panics and logging goes on.
    #[test]
    fn write_errors_are_ignored() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
        }
        let (writer, guard) = LogWriter::spawn(Closed, 16);
        for n in 0..100 {
            writer
                .make_writer()
                .write_all(format!("line {n}\n").as_bytes())
                .unwrap();
            if n % 10 == 0 {
                assert!(writer.flush(Duration::from_secs(5)));
            }
        }
        drop(guard);
    }
}
