//! The response future: a finished rejection, or the inner service's future.

pub use crate::layers::reject::ResponseFuture;
