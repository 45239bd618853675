//! The store's shared rate-limit buckets as the [`SharedBuckets`] of the rate-limit layer
//! (`store.backend: postgres`): the glue lives here, since the layer imports nothing of the
//! core and the store nothing of the layers.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;

use crate::layers::rate_limit::{SharedBuckets, Verdict};
use crate::store::TaskStore;

/// A shared store's buckets, for a [`SharedRateLimitLayer`](crate::layers::rate_limit::SharedRateLimitLayer)
/// of your own ([`StackBuilder::rate_limit`](super::StackBuilder::rate_limit) builds the
/// configured one).
#[derive(Debug)]
pub struct StoreBuckets(pub Arc<dyn TaskStore>);

impl SharedBuckets for StoreBuckets {
    fn take(
        &self,
        key: String,
        per_minute: NonZeroU32,
        burst: NonZeroU32,
    ) -> Pin<Box<dyn Future<Output = Result<Verdict, String>> + Send + 'static>> {
        let store = self.0.clone();
        Box::pin(async move {
            let shared = store
                .shared()
                .ok_or_else(|| "the store keeps no shared buckets".to_owned())?;
            match shared
                .take_cell(&key, per_minute.get(), burst.get())
                .await
                .map_err(|e| e.to_string())?
            {
                None => Ok(Ok(())),
                Some(wait) => Ok(Err(wait)),
            }
        })
    }
}
