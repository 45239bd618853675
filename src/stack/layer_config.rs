//! Each layer's own configuration type, converted from its `agent.yaml` section: the layers
//! know nothing of the configuration file (they use only the plugin surface), so the
//! composition root translates.

use std::num::NonZeroU32;

use crate::config;
use crate::layers::{audit, auth, rate_limit};
use crate::oauth::{JwksPolicy, OAuthSettings, ScopePolicy, SettingsError, TokenValidator};

/// The audit layer `audit` asks for, or `None` when it is off; an error when `audit.file`
/// cannot be opened.
pub fn audit_layer(section: &config::AuditConfig) -> std::io::Result<Option<audit::AuditLayer>> {
    if !section.enabled {
        return Ok(None);
    }
    let options = audit::AuditOptions {
        file: section.file.clone(),
        include_request: section.include_request,
        rotation: section.max_bytes.map(|max| audit::Rotation {
            max_bytes: max.as_u64(),
            keep: section.keep.max(1),
        }),
    };
    audit::Auditor::open(&options).map(|auditor| Some(audit::AuditLayer::new(auditor)))
}

/// The rate limit layer's budgets from `rate_limit`, or `None` when it is off (zero values
/// are refused when the configuration is loaded).
pub fn rate_limits(section: &config::RateLimitConfig) -> Option<rate_limit::RateLimits> {
    if !section.enabled {
        return None;
    }
    let reads = NonZeroU32::new(section.reads.per_minute).zip(NonZeroU32::new(section.reads.burst));
    Some(rate_limit::RateLimits {
        per_minute: NonZeroU32::new(section.per_minute)?,
        burst: NonZeroU32::new(section.burst)?,
        reads,
        stdio: section.stdio,
    })
}

impl From<&config::AuthConfig> for auth::Tokens {
    fn from(section: &config::AuthConfig) -> Self {
        let tokens = section
            .tokens
            .iter()
            .fold(auth::Tokens::default(), |tokens, token| {
                tokens.with_hex_hash(&token.name, &token.sha256)
            });
        if section.oauth.is_enabled() {
            tokens.accept_verified()
        } else {
            tokens
        }
    }
}

/// The OAuth access-token validator `auth.oauth` asks for, or `None` when it is off (no
/// issuer). `resource` unset (the server fills it from its bind address before it starts) is
/// refused here.
pub fn oauth_validator(
    section: &config::OAuthConfig,
) -> Result<Option<TokenValidator>, SettingsError> {
    let Some(issuer) = &section.issuer else {
        return Ok(None);
    };
    let resource = section.resource.clone().unwrap_or_default();
    let scopes = section
        .scopes
        .iter()
        .fold(ScopePolicy::default(), |policy, (scope, operations)| {
            policy.grant(scope, operations)
        });
    let settings = OAuthSettings::new(issuer, resource)
        .with_scopes(scopes)
        .with_leeway(section.leeway)
        .with_require_at_jwt(section.require_at_jwt)
        .with_jwks(JwksPolicy {
            min_refresh_interval: section.jwks.min_refresh_interval,
            max_age: section.jwks.max_age,
            timeout: section.jwks.timeout,
        })
        .allow_insecure_http(section.allow_insecure_http);
    TokenValidator::new(settings).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_tokens_come_from_the_section() {
        let section = config::AuthConfig {
            tokens: vec![config::TokenConfig {
                name: "ci".into(),
                sha256: auth::sha256_hex("s3cret"),
            }],
            ..Default::default()
        };
        assert_eq!(auth::Tokens::from(&section).len(), 1);
        assert!(auth::Tokens::from(&config::AuthConfig::default()).is_empty());
    }

    // The default read budget and the Tasks layer's advertised poll interval are two layers'
    // settings that must agree: checked here, where both are composed.
    /// Polls `tasks` (each a queue position, `None` = running) at the interval the Tasks layer
    /// suggests for it, for `minutes` of a fake clock, through the default read budget, with
    /// the phases of the polls spread as tasks created one after another spread them.
    /// Returns (polls, refusals).
    fn poll_at_the_advertised_pace(tasks: &[Option<usize>], minutes: u64) -> (u64, u64) {
        use crate::layers::rate_limit::{CallerKey, CallerLimiter};
        use crate::layers::tasks::{DEFAULT_POLL_INTERVAL, TaskTiming};
        use governor::clock::FakeRelativeClock;
        use std::time::Duration;

        let nz = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        let reads = config::RateLimitConfig::default().reads;
        let clock = FakeRelativeClock::default();
        let limiter =
            CallerLimiter::with_clock(nz(reads.per_minute), nz(reads.burst), clock.clone());
        let key = CallerKey::Peer([127, 0, 0, 1].into());
        let timing = TaskTiming {
            ttl_ms: 1,
            poll_interval_ms: u64::try_from(DEFAULT_POLL_INTERVAL.as_millis()).unwrap_or(1000),
        };
        let intervals: Vec<u64> = tasks.iter().map(|p| timing.poll_interval_ms(*p)).collect();
        // Tasks created one after another are polled out of phase: spread the first polls
        // over each task's interval (a multiplicative hash of its index).
        let mut next: Vec<u64> = intervals
            .iter()
            .enumerate()
            .map(|(k, every)| (k as u64).wrapping_mul(2_654_435_761) % every)
            .collect();
        let (mut polls, mut refused) = (0, 0);
        let end = minutes * 60_000;
        let mut now = 0;
        while now < end {
            for (due, every) in next.iter_mut().zip(&intervals) {
                if *due <= now {
                    polls += 1;
                    refused += u64::from(limiter.check(&key).is_err());
                    *due += every;
                }
            }
            clock.advance(Duration::from_millis(10));
            now += 10;
        }
        (polls, refused)
    }

    #[test]
    fn polling_at_the_advertised_interval_never_meets_the_default_read_budget() {
        // Three tasks of one caller (one running, two queued), five minutes.
        let (polls, refused) = poll_at_the_advertised_pace(&[None, Some(1), Some(2)], 5);
        assert!(polls >= 750, "{polls} polls");
        assert_eq!(refused, 0, "{refused} of {polls} polls refused");
        // The worst case the base interval allows: three tasks all polled every second.
        let (polls, refused) = poll_at_the_advertised_pace(&[None, None, None], 5);
        assert_eq!((polls, refused), (900, 0));
        // A caller with one running task and 1,000 queued behind it.
        let many: Vec<Option<usize>> = std::iter::once(None).chain((1..=1000).map(Some)).collect();
        let (polls, refused) = poll_at_the_advertised_pace(&many, 5);
        assert_eq!(refused, 0, "{refused} of {polls} polls refused");
        // Without the growing interval, the same caller would be refused (so the check bites).
        let (polls, refused) = poll_at_the_advertised_pace(&vec![None; 1001], 1);
        assert!(refused > polls / 2, "{refused} of {polls} polls refused");
    }

    #[test]
    fn rate_limit_off_means_no_layer() {
        let mut section = config::RateLimitConfig::default();
        let limits = rate_limits(&section).expect("on by default");
        assert_eq!((limits.per_minute.get(), limits.burst.get()), (60, 60));
        assert_eq!(
            limits.reads.map(|(p, b)| (p.get(), b.get())),
            Some((1200, 300))
        );
        assert!(!limits.stdio);
        section.enabled = false;
        assert!(rate_limits(&section).is_none());
    }
}
