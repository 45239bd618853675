//! The response future shared by the layers that answer a request themselves (validate, images,
//! auth, rate_limit) or pass it on.

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::protocol::McpResponse;

pin_project! {
    /// Response future of a layer that either rejects a request with a finished response or
    /// hands it to the inner service (validate, images). A rejection allocates nothing beyond
    /// its response.
    #[project = ResponseFutureProj]
    pub enum ResponseFuture<F> {
        Rejected { #[pin] response: Ready<Result<McpResponse, Infallible>> },
        Inner { #[pin] future: F },
    }
}

impl<F> ResponseFuture<F> {
    pub fn rejected(response: McpResponse) -> Self {
        Self::Rejected {
            response: std::future::ready(Ok(response)),
        }
    }

    pub fn inner(future: F) -> Self {
        Self::Inner { future }
    }
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<McpResponse, Infallible>>,
{
    type Output = Result<McpResponse, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ResponseFutureProj::Rejected { response } => response.poll(cx),
            ResponseFutureProj::Inner { future } => future.poll(cx),
        }
    }
}
