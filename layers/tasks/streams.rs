//! [`OpenStreams`]: the push streams open per caller, counted so one caller cannot hold
//! unbounded server state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Streams open per caller (identity), so one caller cannot hold unbounded server state.
#[derive(Debug, Default)]
pub struct OpenStreams {
    by_caller: Mutex<HashMap<Option<String>, usize>>,
}

impl OpenStreams {
    /// Counts one more stream for `caller`, unless it has `max` open already.
    pub(super) fn open(
        self: &Arc<Self>,
        caller: Option<String>,
        max: usize,
    ) -> Option<StreamGuard> {
        let mut by_caller = self.by_caller.lock().unwrap_or_else(|e| e.into_inner());
        let open = by_caller.entry(caller.clone()).or_default();
        if *open >= max {
            return None;
        }
        *open += 1;
        Some(StreamGuard {
            streams: self.clone(),
            caller,
        })
    }

    /// How many streams `caller` has open now.
    pub fn open_for(&self, caller: Option<&str>) -> usize {
        let by_caller = self.by_caller.lock().unwrap_or_else(|e| e.into_inner());
        by_caller
            .get(&caller.map(str::to_owned))
            .copied()
            .unwrap_or(0)
    }
}

/// One open stream; dropping it (the stream ended or was dropped) frees its place.
#[derive(Debug)]
pub(super) struct StreamGuard {
    streams: Arc<OpenStreams>,
    caller: Option<String>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut by_caller = self
            .streams
            .by_caller
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(open) = by_caller.get_mut(&self.caller) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                by_caller.remove(&self.caller);
            }
        }
    }
}
