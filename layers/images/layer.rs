use tower_layer::Layer;

use super::Images;
use crate::config::ImageLimits;

/// Applies [`Images`] to a service: the image rules of `docs/contract.md` §2.5 under the given
/// limits (`mcp.images` in `agent.yaml`).
#[derive(Clone, Copy, Debug)]
pub struct ImagesLayer {
    limits: ImageLimits,
}

impl ImagesLayer {
    pub const fn new(limits: ImageLimits) -> Self {
        Self { limits }
    }

    pub fn limits(&self) -> &ImageLimits {
        &self.limits
    }
}

impl<S> Layer<S> for ImagesLayer {
    type Service = Images<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Images::new(inner, self.limits)
    }
}
