//! [`KeyCache`]: the issuer's keys, fetched when first needed, kept, and fetched again when a
//! token names a key the cache does not have (a rotation) or the keys are older than
//! [`JwksPolicy::max_age`] — but never more often than [`JwksPolicy::min_refresh_interval`],
//! whatever tokens arrive, so a stream of made-up key ids costs the issuer one request per
//! interval.
//!
//! Concurrent requests that miss share one fetch: the first one fetches, the others wait for
//! it and use its result. A failed fetch keeps the keys already held (an issuer that is down
//! for a minute does not lock every caller out); with no keys at all it is the error every
//! request gets until a fetch succeeds.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use super::error::{TokenError, shown};
use super::keys::{KeySet, Lookup, TrustedKey};
use super::settings::JwksPolicy;
use super::source::{KeySource, KeySourceError};

/// The keys held, and what the last fetch did.
#[derive(Debug, Default)]
struct Snapshot {
    keys: Option<Arc<KeySet>>,
    fetched_at: Option<Instant>,
    /// Bumped by every fetch, successful or not: a waiter that sees it moved knows a fetch
    /// happened while it waited.
    generation: u64,
    last_error: Option<KeySourceError>,
}

/// The issuer's keys, kept (see the module docs).
#[derive(Debug)]
pub(super) struct KeyCache {
    source: KeySource,
    policy: JwksPolicy,
    current: RwLock<Arc<Snapshot>>,
    /// Held while a fetch runs; holds when the last one started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

impl KeyCache {
    pub fn new(source: KeySource, policy: JwksPolicy) -> Self {
        Self {
            source,
            policy,
            current: RwLock::new(Arc::new(Snapshot::default())),
            fetching: tokio::sync::Mutex::new(None),
        }
    }

    /// The key to verify a token whose header says `kid` and `alg` with.
    pub async fn key(&self, kid: Option<&str>, alg: &str) -> Result<Arc<TrustedKey>, TokenError> {
        let seen = self.snapshot();
        let fresh = seen
            .fetched_at
            .is_some_and(|at| at.elapsed() < self.policy.max_age);
        if let Some(keys) = &seen.keys {
            match keys.find(kid, alg) {
                Lookup::Unknown => {}
                found if fresh => return resolve(found, kid, alg),
                // Old but holding the key: this request refreshes, unless another one is at
                // it already, in which case the old key serves rather than a wait.
                found => {
                    return match self.fetching.try_lock() {
                        Ok(last_start) => {
                            let now = self.refresh_locked(last_start, seen.generation).await;
                            match &now.keys {
                                Some(keys) => resolve(keys.find(kid, alg), kid, alg),
                                None => resolve(found, kid, alg),
                            }
                        }
                        Err(_) => resolve(found, kid, alg),
                    };
                }
            }
        }
        let now = self.refresh(seen.generation).await;
        match &now.keys {
            Some(keys) => resolve(keys.find(kid, alg), kid, alg),
            None => Err(TokenError::KeysUnavailable {
                why: now
                    .last_error
                    .as_ref()
                    .map_or_else(|| "no fetch has succeeded yet".into(), ToString::to_string),
            }),
        }
    }

    /// Fetches the keys now (unless a fetch ran within the interval), for a start-up check:
    /// how many usable keys are held, or why none are.
    pub async fn prefetch(&self) -> Result<usize, KeySourceError> {
        let seen = self.snapshot();
        let now = self.refresh(seen.generation).await;
        match (&now.keys, &now.last_error) {
            (_, Some(e)) => Err(e.clone()),
            (Some(keys), None) => Ok(keys.len()),
            (None, None) => Ok(0),
        }
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(guard) => Arc::clone(&guard),
            // A writer only swaps an Arc, so a poisoned lock still holds a whole snapshot.
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    fn publish(&self, snapshot: Snapshot) -> Arc<Snapshot> {
        let snapshot = Arc::new(snapshot);
        match self.current.write() {
            Ok(mut guard) => *guard = Arc::clone(&snapshot),
            Err(poisoned) => *poisoned.into_inner() = Arc::clone(&snapshot),
        }
        snapshot
    }

    /// Fetches unless another fetch ran since `seen_generation` or one started within
    /// the interval; the newest snapshot either way.
    async fn refresh(&self, seen_generation: u64) -> Arc<Snapshot> {
        let last_start = self.fetching.lock().await;
        self.refresh_locked(last_start, seen_generation).await
    }

    /// [`Self::refresh`] with the fetch lock held.
    async fn refresh_locked(
        &self,
        mut last_start: tokio::sync::MutexGuard<'_, Option<Instant>>,
        seen_generation: u64,
    ) -> Arc<Snapshot> {
        let current = self.snapshot();
        if current.generation != seen_generation {
            return current;
        }
        if last_start.is_some_and(|at| at.elapsed() < self.policy.min_refresh_interval) {
            return current;
        }
        *last_start = Some(Instant::now());
        match self.source.fetch().await {
            Ok((keys, from)) => {
                tracing::debug!(keys = keys.len(), skipped = keys.skipped(), jwks_uri = %from,
                    "oauth: fetched the issuer's signing keys");
                self.publish(Snapshot {
                    keys: Some(Arc::new(keys)),
                    fetched_at: Some(Instant::now()),
                    generation: current.generation + 1,
                    last_error: None,
                })
            }
            Err(e) => {
                tracing::warn!(error = %e, "oauth: cannot fetch the issuer's signing keys");
                self.publish(Snapshot {
                    keys: current.keys.clone(),
                    fetched_at: current.fetched_at,
                    generation: current.generation + 1,
                    last_error: Some(e),
                })
            }
        }
    }
}

/// A lookup's result as the key or the token's error.
fn resolve(found: Lookup, kid: Option<&str>, alg: &str) -> Result<Arc<TrustedKey>, TokenError> {
    match found {
        Lookup::Found(key) => Ok(key),
        Lookup::OtherAlg(pinned) => Err(TokenError::KeyAlgorithm {
            alg: shown(alg),
            pinned,
        }),
        Lookup::Unknown => Err(TokenError::UnknownKey {
            kid: kid.map_or_else(|| "(none)".to_owned(), shown),
        }),
        Lookup::Ambiguous => Err(TokenError::AmbiguousKey),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A listener that counts connections and closes each at once: an issuer that is down.
    async fn dead_issuer() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                drop(conn);
            }
        });
        (url, count)
    }

    fn cache(issuer: &str, interval: Duration) -> KeyCache {
        let url = url::Url::parse(issuer).unwrap();
        let source = KeySource::new(issuer, &url, false, Duration::from_secs(2)).unwrap();
        KeyCache::new(
            source,
            JwksPolicy {
                min_refresh_interval: interval,
                max_age: interval,
                timeout: Duration::from_secs(2),
            },
        )
    }

    #[tokio::test]
    async fn a_down_issuer_is_asked_once_per_interval_and_every_request_hears_why() {
        let (issuer, connections) = dead_issuer().await;
        let keys = cache(&issuer, Duration::from_secs(1));
        let first = keys.key(Some("k"), "RS256").await.unwrap_err();
        assert!(
            matches!(&first, TokenError::KeysUnavailable { why } if why.contains(&issuer)),
            "{first}"
        );
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        // Within the interval: the same answer, and the issuer is not asked again.
        for kid in ["k", "other", "third"] {
            assert_eq!(keys.key(Some(kid), "RS256").await.unwrap_err(), first);
        }
        assert_eq!(connections.load(Ordering::SeqCst), 1);
        assert_eq!(
            keys.prefetch().await.map_err(|e| e.to_string()),
            Err(first_why(&first))
        );
        // After it: asked again.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(keys.key(Some("k"), "RS256").await.is_err());
        assert_eq!(connections.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn concurrent_misses_share_one_fetch() {
        let (issuer, connections) = dead_issuer().await;
        let keys = Arc::new(cache(&issuer, Duration::from_secs(60)));
        let misses = (0..16).map(|i| {
            let keys = Arc::clone(&keys);
            tokio::spawn(async move { keys.key(Some(&format!("kid-{i}")), "ES256").await })
        });
        for miss in misses {
            assert!(matches!(
                miss.await.unwrap(),
                Err(TokenError::KeysUnavailable { .. })
            ));
        }
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }

    fn first_why(e: &TokenError) -> String {
        match e {
            TokenError::KeysUnavailable { why } => why.clone(),
            other => panic!("{other:?}"),
        }
    }
}
