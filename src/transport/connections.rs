//! [`Connections`]: the open HTTP connections, at most a cap of them, and which one to close
//! when a new one needs the room.
//!
//! Every connection costs a file descriptor and a few KiB, so their number is capped
//! (`http.max_connections`, kept below the descriptor limit). A cap alone would let idle
//! connections lock everyone out: 1,100 peers that connect and say nothing would hold every
//! slot until their header timeouts. So at the cap a new connection does not wait: the
//! connection that has been *idle* longest (no request in progress: still sending its headers,
//! or kept alive between requests) is closed to make room. A connection busy with a request
//! (its body being read, its answer being computed or streamed) is never closed; when every
//! slot is busy, the new connection is answered 503 and closed at once.
//!
//! A peer that keeps opening connections therefore only ever displaces idle ones, oldest
//! first, and a client that has sent its request is served to the end.
//!
//! A crate-private part of the HTTP server, so its example is the unit test at the bottom of
//! this file (`at_the_cap_the_connection_idle_longest_makes_room_and_busy_ones_stay`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// The open connections (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Connections {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cap: usize,
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    next: u64,
    open: HashMap<u64, Slot>,
}

#[derive(Debug)]
struct Slot {
    /// Requests in progress on the connection (HTTP/1.1 serves one at a time; a counter keeps
    /// a late drop of the previous answer's body from marking the next request idle).
    busy: usize,
    /// Since when nothing is in progress.
    idle_since: Instant,
    close: CancellationToken,
}

/// What [`Connections::admit`] decided for a new connection.
#[derive(Debug)]
pub enum Admitted {
    /// Serve it; the slot is freed when the [`Slot`](ConnectionSlot) is dropped.
    Open(ConnectionSlot),
    /// Every slot is busy with a request: answer 503 and close it.
    Full,
}

/// One connection's place among the [`Connections`]; dropped when the connection ends.
#[derive(Debug)]
pub struct ConnectionSlot {
    id: u64,
    close: CancellationToken,
    conns: Connections,
}

impl Connections {
    /// Room for `cap` connections (at least one).
    pub fn new(cap: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                cap: cap.max(1),
                slots: Mutex::default(),
            }),
        }
    }

    /// Connections now open: a slot is freed when the last of its connection's handles (the
    /// service hyper was given, an answer's body still being written) is dropped.
    pub fn len(&self) -> usize {
        self.slots().open.len()
    }

    /// No connection open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // Every critical section leaves the map consistent before it could panic.
        self.inner.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection: a free one, or the one of the connection idle longest
    /// (which is told to close), or none when every connection is busy.
    pub fn admit(&self) -> Admitted {
        let mut slots = self.slots();
        if slots.open.len() >= self.inner.cap {
            let oldest_idle = slots
                .open
                .iter()
                .filter(|(_, slot)| slot.busy == 0)
                .min_by_key(|(_, slot)| slot.idle_since)
                .map(|(id, _)| *id);
            let Some(id) = oldest_idle else {
                return Admitted::Full;
            };
            if let Some(shed) = slots.open.remove(&id) {
                shed.close.cancel();
                crate::metrics::record_connection_shed();
            }
        }
        let id = slots.next;
        slots.next += 1;
        let close = CancellationToken::new();
        slots.open.insert(
            id,
            Slot {
                busy: 0,
                idle_since: Instant::now(),
                close: close.clone(),
            },
        );
        crate::metrics::set_http_connections(slots.open.len());
        Admitted::Open(ConnectionSlot {
            id,
            close,
            conns: self.clone(),
        })
    }
}

impl ConnectionSlot {
    /// Fires when this connection is to be closed to make room for a newer one.
    pub fn closed(&self) -> &CancellationToken {
        &self.close
    }

    /// A request started on this connection: it is not closed for room until
    /// [`ConnectionSlot::idle`].
    pub fn busy(&self) {
        if let Some(slot) = self.conns.slots().open.get_mut(&self.id) {
            slot.busy += 1;
        }
    }

    /// A request's answer is done (its body written or dropped).
    pub fn idle(&self) {
        if let Some(slot) = self.conns.slots().open.get_mut(&self.id) {
            slot.busy = slot.busy.saturating_sub(1);
            if slot.busy == 0 {
                slot.idle_since = Instant::now();
            }
        }
    }

    /// A handle that marks this connection busy now and idle again when dropped.
    pub fn request(self: &Arc<Self>) -> InRequest {
        self.busy();
        InRequest(self.clone())
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut slots = self.conns.slots();
        slots.open.remove(&self.id);
        crate::metrics::set_http_connections(slots.open.len());
    }
}

/// A request in progress on a connection (see [`ConnectionSlot::request`]); carried by the
/// answer's body so that a streamed answer keeps its connection busy until it ends.
#[derive(Debug)]
pub struct InRequest(Arc<ConnectionSlot>);

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(conns: &Connections) -> ConnectionSlot {
        match conns.admit() {
            Admitted::Open(slot) => slot,
            Admitted::Full => panic!("no room"),
        }
    }

    #[test]
    fn at_the_cap_the_connection_idle_longest_makes_room_and_busy_ones_stay() {
        let conns = Connections::new(3);
        let a = Arc::new(open(&conns));
        let b = open(&conns);
        let c = open(&conns);
        // a served a request and is idle again, so it is now the most recently idle.
        drop(a.request());
        let d = open(&conns);
        assert!(b.closed().is_cancelled(), "b was idle longest");
        assert!(!a.closed().is_cancelled() && !c.closed().is_cancelled());
        assert_eq!(conns.len(), 3);
        // All busy: no room, nobody closed.
        let _in_a = a.request();
        c.busy();
        d.busy();
        assert!(matches!(conns.admit(), Admitted::Full));
        assert!(!a.closed().is_cancelled() && !c.closed().is_cancelled());
        // A connection that ends frees its slot.
        drop(c);
        let _e = open(&conns);
        assert_eq!(conns.len(), 3);
        drop(b);
        assert_eq!(conns.len(), 3, "a closed slot is not counted twice");
    }
}
