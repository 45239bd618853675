//! [`Inner`]: the service the Tasks layer wraps, as its handlers call it.

use std::convert::Infallible;

use tower::ServiceExt;
use tower_service::Service;

use crate::plugin::{McpRequest, McpResponse};

/// The wrapped service as the task handlers call it: infallible, answering MCP, and `Send`
/// with its future.
pub(super) trait Stack:
    Service<McpRequest, Response = McpResponse, Error = Infallible, Future: Send> + Send
{
}

impl<S> Stack for S where
    S: Service<McpRequest, Response = McpResponse, Error = Infallible, Future: Send> + Send
{
}

/// The wrapped service, already polled ready, used at most once.
pub(super) struct Inner<S>(pub(super) S);

impl<S: Stack> Inner<S> {
    pub(super) async fn call(mut self, req: McpRequest) -> McpResponse {
        // `Tasks::poll_ready` readied this service; `ready` returns at once then.
        let Ok(svc) = self.0.ready().await;
        let Ok(response) = svc.call(req).await;
        response
    }
}
