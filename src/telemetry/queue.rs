//! The export queue: the SDK's `BatchSpanProcessor` (a bounded channel drained by its own
//! thread) behind a gate that counts what it turns away.
//!
//! A request's thread only ever hands a finished span to the queue; it never waits for the
//! collector. When the queue is full the span is dropped, counted in
//! [`SPANS_DROPPED`](super::SPANS_DROPPED) (`/metrics`) and in [`QueueStats`]. The SDK keeps
//! its own drop count private, so the gate keeps its own: a slot is taken when a span ends and
//! given back when the exporter receives it, and a span finding no slot is refused before it
//! reaches the SDK's channel (of the same capacity), which therefore never overflows
//! unseen. Failed exports are counted and logged by [`health`](super::health).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::health::ExportHealth;
use super::otlp::{OtlpSpanExporter, SharedAttributes};
use super::settings::MAX_EXPORT_BATCH;
use super::spans::{ServerSpanData, SpanQueue};
use opentelemetry::Context;
use opentelemetry_http::HttpClient;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor};

/// Counts of one export queue, shared by the gate, the exporter and whoever reports them.
#[derive(Debug)]
pub struct QueueStats {
    capacity: usize,
    /// Spans accepted and not yet handed to the exporter.
    queued: AtomicUsize,
    dropped: AtomicU64,
    health: ExportHealth,
}

impl QueueStats {
    pub(super) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            queued: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            health: ExportHealth::new("traces"),
        })
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Export requests that failed (their spans are lost).
    pub fn failed_exports(&self) -> u64 {
        self.health.failed()
    }

    /// Takes a slot for one span; false (and counted) when the queue is full.
    fn admit(&self) -> bool {
        let taken = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.capacity).then_some(n + 1)
            })
            .is_ok();
        if !taken {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(super::SPANS_DROPPED).increment(1);
        }
        taken
    }

    /// Gives back the slots of a batch the exporter has received.
    fn release(&self, spans: usize) {
        // Saturating: a span that ended before the gate existed is never counted twice down.
        let _ = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(spans))
            });
    }
}

/// The server spans' own queue ([`ServerSpanData`], not the SDK's spans): bounded by the same
/// [`QueueStats`] slots as the SDK's channel, so one capacity and one drop count cover both,
/// and drained by a thread of its own ([`run_server_export`]) in batches of at most
/// [`MAX_EXPORT_BATCH`], every [`SCHEDULED_DELAY`](super::settings::SCHEDULED_DELAY) or as soon
/// as a batch is full. A request's thread takes an uncontended lock and pushes; it wakes the
/// export thread only when a batch is full.
#[derive(Debug)]
pub(super) struct ServerQueue {
    state: Mutex<ServerQueueState>,
    ready: Condvar,
    stats: Arc<QueueStats>,
}

#[derive(Debug, Default)]
struct ServerQueueState {
    spans: Vec<ServerSpanData>,
    closed: bool,
}

impl SpanQueue for ServerQueue {
    fn push(&self, span: ServerSpanData) {
        ServerQueue::push(self, span);
    }
}

impl ServerQueue {
    pub(super) fn new(stats: Arc<QueueStats>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(ServerQueueState::default()),
            ready: Condvar::new(),
            stats,
        })
    }

    /// Queues a finished span, or drops and counts it when the queue is full (and drops it
    /// once the export has shut down).
    pub(super) fn push(&self, span: ServerSpanData) {
        if !self.stats.admit() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            drop(state);
            self.stats.release(1);
            return;
        }
        state.spans.push(span);
        if state.spans.len() == MAX_EXPORT_BATCH {
            self.ready.notify_one();
        }
    }

    /// No more spans are taken; the export thread sends what is queued and ends.
    pub(super) fn close(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.ready.notify_one();
    }

    /// The next batch, once one is full, `delay` has passed or the queue is closed (then
    /// perhaps empty); `None` once closed and empty. Its slots are given back.
    fn next_batch(&self, delay: Duration) -> Option<Vec<ServerSpanData>> {
        let deadline = Instant::now() + delay;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = Instant::now();
            if state.spans.len() >= MAX_EXPORT_BATCH || state.closed || now >= deadline {
                break;
            }
            state = self
                .ready
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if state.spans.is_empty() && state.closed {
            return None;
        }
        let batch = if state.spans.len() <= MAX_EXPORT_BATCH {
            // The next batch starts with room for as many as this one had, so a request's push
            // does not grow (and copy) the queue under load.
            let room = state.spans.len().clamp(16, MAX_EXPORT_BATCH);
            std::mem::replace(&mut state.spans, Vec::with_capacity(room))
        } else {
            state.spans.drain(..MAX_EXPORT_BATCH).collect()
        };
        drop(state);
        self.stats.release(batch.len());
        Some(batch)
    }
}

/// The server spans' export thread: batches from `queue` posted by `exporter` until the
/// queue is closed and empty. A failed export is counted like the SDK spans' ones.
pub(super) fn run_server_export<C: HttpClient + 'static>(
    queue: &ServerQueue,
    exporter: &OtlpSpanExporter<C>,
    delay: Duration,
) {
    let mut shared = SharedAttributes::default();
    while let Some(batch) = queue.next_batch(delay) {
        if batch.is_empty() {
            continue;
        }
        let result = block_on(exporter.export_server_spans(&batch, &mut shared));
        drop(batch);
        queue.stats.health.finished(&result);
    }
}

/// Runs `future` to completion on this thread. The export's futures wait on a task of the
/// server's runtime (see [`http_client`](super::http_client)), so they need no reactor here.
pub(super) fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// The gate in front of the SDK's batch processor.
#[derive(Debug)]
pub(super) struct GatedProcessor {
    inner: BatchSpanProcessor,
    stats: Arc<QueueStats>,
}

impl GatedProcessor {
    pub(super) fn new(inner: BatchSpanProcessor, stats: Arc<QueueStats>) -> Self {
        Self { inner, stats }
    }
}

impl SpanProcessor for GatedProcessor {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.stats.admit() {
            self.inner.on_end(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter behind the queue: gives the gate its slots back and counts failures.
#[derive(Debug)]
pub(super) struct CountedExporter<E> {
    inner: E,
    stats: Arc<QueueStats>,
}

impl<E> CountedExporter<E> {
    pub(super) fn new(inner: E, stats: Arc<QueueStats>) -> Self {
        Self { inner, stats }
    }
}

impl<E: SpanExporter> SpanExporter for CountedExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        // The batch has left the SDK's channel: its slots are free again, whatever the
        // collector does with it.
        self.stats.release(batch.len());
        let result = self.inner.export(batch).await;
        self.stats.health.finished(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_admits_up_to_capacity_and_counts_the_rest() {
        let stats = QueueStats::new(3);
        let admitted = (0..10).filter(|_| stats.admit()).count();
        assert_eq!(admitted, 3);
        assert_eq!(stats.dropped(), 7);
        stats.release(2);
        assert!(stats.admit() && stats.admit());
        assert!(!stats.admit());
        assert_eq!(stats.dropped(), 8);
        // More released than held never wraps around.
        stats.release(100);
        assert!(stats.admit());
    }
}
