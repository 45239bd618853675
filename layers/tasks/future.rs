//! [`ResponseFuture`] of [`Tasks`](super::Tasks): the inner service's own future for requests
//! the layer has nothing to do with (`agent_status`, `tools/list`, …), so those cost no
//! allocation or clone here; a boxed future for the task routes.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::plugin::McpResponse;

pub(super) type Routed = Pin<Box<dyn Future<Output = Result<McpResponse, Infallible>> + Send>>;

pin_project! {
    /// The response future of [`Tasks`](super::Tasks).
    #[project = ResponseFutureProj]
    pub enum ResponseFuture<F> {
        /// Passed straight to the inner service.
        Inner { #[pin] future: F },
        /// Handled (at least in part) by the layer.
        Routed { future: Routed },
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<McpResponse, Infallible>>,
{
    type Output = Result<McpResponse, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ResponseFutureProj::Inner { future } => future.poll(cx),
            ResponseFutureProj::Routed { future } => future.as_mut().poll(cx),
        }
    }
}
