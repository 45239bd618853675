//! [`MessageStream`]: the JSON-RPC messages one request sends over time, pulled one by one.
//!
//! A `subscriptions/listen` request (and, on stdio, a 2025-11-25 task-augmented `tools/call`)
//! is answered with [`Payload::Stream`](super::Payload::Stream): a stream of whole JSON-RPC
//! messages (notifications, and for a listen the final response) that the transport writes as
//! they come, as SSE events on HTTP and as lines on stdio.
//!
//! The stream is **pulled**: the next message is only computed when the transport asks for it,
//! that is when the previous one has been written. A client that stops reading therefore holds
//! nothing but the stream's own state; whoever produces the messages keeps only the latest
//! state of what it follows (see [`crate::task::events`]), never a queue.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;

type Next = Pin<Box<dyn Future<Output = Option<(Value, MessageStream)>> + Send>>;

/// JSON-RPC messages produced on demand; ends with `None`.
pub struct MessageStream {
    next: Option<Next>,
}

impl MessageStream {
    /// A stream that computes each message from the state the previous one left: `step(state)`
    /// answers the next message and the state after it, or `None` when the stream ends.
    pub fn unfold<S, F, Fut>(state: S, step: F) -> MessageStream
    where
        S: Send + 'static,
        F: Fn(S) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Option<(Value, S)>> + Send + 'static,
    {
        let again = step.clone();
        MessageStream {
            next: Some(Box::pin(async move {
                let (message, state) = step(state).await?;
                Some((message, MessageStream::unfold(state, again)))
            })),
        }
    }

    /// A stream that sends nothing.
    pub fn empty() -> MessageStream {
        MessageStream { next: None }
    }

    /// Polls for the next message.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Value>> {
        let Some(next) = self.next.as_mut() else {
            return Poll::Ready(None);
        };
        match next.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some((message, rest))) => {
                *self = rest;
                Poll::Ready(Some(message))
            }
            Poll::Ready(None) => {
                self.next = None;
                Poll::Ready(None)
            }
        }
    }

    /// The next message, or `None` once the stream has ended.
    pub async fn next(&mut self) -> Option<Value> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }
}

impl fmt::Debug for MessageStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageStream")
            .field("ended", &self.next.is_none())
            .finish()
    }
}

/// A [`MessageStream`] inside a response: responses are `Clone`, the stream is taken once, by
/// the transport that sends it.
#[derive(Clone, Debug)]
pub struct StreamSlot(Arc<Mutex<Option<MessageStream>>>);

impl StreamSlot {
    pub fn new(stream: MessageStream) -> Self {
        Self(Arc::new(Mutex::new(Some(stream))))
    }

    /// The stream, unless it has been taken already.
    pub fn take(&self) -> Option<MessageStream> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl PartialEq for StreamSlot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn unfold_yields_in_order_then_ends() {
        let mut s =
            MessageStream::unfold(0u32, |n| async move { (n < 3).then(|| (json!(n), n + 1)) });
        let mut got = Vec::new();
        while let Some(v) = s.next().await {
            got.push(v);
        }
        assert_eq!(got, [json!(0), json!(1), json!(2)]);
        assert_eq!(s.next().await, None, "stays ended");
        let slot = StreamSlot::new(MessageStream::empty());
        assert!(slot.clone().take().is_some());
        assert!(slot.take().is_none(), "taken once");
    }
}
