//! The limits on the tools' arguments that the configuration sets.

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};

use crate::serde_with::exact_size;

/// The limits on `agent_run`'s images (`mcp.images` in `agent.yaml`): how many one call may
/// carry and how large they may be once decoded. The images layer checks them, the HTTP edge
/// sizes its body cap from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageLimits {
    /// Most images in one `agent_run`.
    pub max_count: usize,
    /// Largest decoded size of one image.
    #[serde(with = "exact_size")]
    pub max_bytes: ByteSize,
    /// Largest decoded size of all images of one `agent_run`.
    #[serde(with = "exact_size")]
    pub max_total_bytes: ByteSize,
}

impl Default for ImageLimits {
    /// The contract's defaults: 4 images, 10 MiB each, 20 MiB in all.
    fn default() -> Self {
        Self {
            max_count: 4,
            max_bytes: ByteSize::mib(10),
            max_total_bytes: ByteSize::mib(20),
        }
    }
}

impl ImageLimits {
    /// A body that can carry the largest allowed images as base64 (4/3 of the decoded size)
    /// plus a generous 1 MiB for the request text and the JSON around it.
    pub fn max_request_body(&self) -> usize {
        let total = self.max_total_bytes.as_u64();
        let base64 = total.div_ceil(3).saturating_mul(4);
        usize::try_from(base64.saturating_add(1024 * 1024)).unwrap_or(usize::MAX)
    }
}
