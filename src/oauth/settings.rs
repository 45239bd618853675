//! [`OAuthSettings`]: what the validator is told (the issuer it trusts, the resource it is, the
//! scope policy, the clock leeway, how often it may fetch keys), and the checks made when a
//! validator is built from them ([`SettingsError`]).
//!
//! Plain `http` is refused for the issuer, the resource and the key set unless the host is a
//! loopback address (`127.0.0.0/8`, `[::1]`, `localhost`) or the settings say
//! [`OAuthSettings::allow_insecure_http`]: a token or a key set read off a network in clear is
//! a token anyone on that network can replay, and a key set anyone can replace.
//!
//! ```
//! use std::time::Duration;
//! use agent_mcp::oauth::{OAuthSettings, ScopePolicy, TokenValidator};
//!
//! let settings = OAuthSettings::new("https://auth.example.com", "https://mcp.example.com/mcp")
//!     .with_scopes(ScopePolicy::default().grant("agent:run", ["agent_run"]))
//!     .with_leeway(Duration::from_secs(30));
//! assert!(TokenValidator::new(settings).is_ok());
//!
//! let insecure = OAuthSettings::new("http://auth.example.com", "https://mcp.example.com/mcp");
//! let err = TokenValidator::new(insecure).unwrap_err();
//! assert!(err.to_string().contains("plain http"), "{err}");
//! let local = OAuthSettings::new("http://127.0.0.1:9000", "http://localhost:8080/mcp");
//! assert!(TokenValidator::new(local).is_ok());
//! ```

use std::net::IpAddr;
use std::time::Duration;

use url::{Host, Url};

use super::scope::{BadScope, ScopePolicy};

/// The most clock leeway the settings accept: beyond a few minutes it stops being leeway for
/// skewed clocks and becomes a longer token lifetime.
pub const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// How the issuer's key set is fetched and kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JwksPolicy {
    /// Keys are fetched again at most this often, whatever the tokens say: a token naming an
    /// unknown key (`kid`) may trigger a fetch (a rotation), but a flood of them is one fetch
    /// per interval.
    pub min_refresh_interval: Duration,
    /// Keys older than this are fetched again before use, so a key the issuer withdrew stops
    /// being trusted; if that fetch fails the old keys stay in use.
    pub max_age: Duration,
    /// The most one fetch (metadata, then key set) may take.
    pub timeout: Duration,
}

impl Default for JwksPolicy {
    fn default() -> Self {
        Self {
            min_refresh_interval: Duration::from_secs(30),
            max_age: Duration::from_secs(3600),
            timeout: Duration::from_secs(10),
        }
    }
}

/// What a [`TokenValidator`](super::TokenValidator) is built from. Plain data; checked by
/// [`TokenValidator::new`](super::TokenValidator::new).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthSettings {
    pub(super) issuer: String,
    pub(super) resource: String,
    pub(super) scopes: ScopePolicy,
    pub(super) leeway: Duration,
    pub(super) require_at_jwt: bool,
    pub(super) jwks: JwksPolicy,
    pub(super) allow_insecure_http: bool,
}

impl OAuthSettings {
    /// Tokens of `issuer` (exactly as its metadata names itself) for `resource` (this server's
    /// URL as clients reach it, the audience its tokens carry). Defaults: no scope policy,
    /// 30 s leeway, `typ: at+jwt` required, [`JwksPolicy::default`], no plain http off loopback.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            resource: resource.into(),
            scopes: ScopePolicy::default(),
            leeway: Duration::from_secs(30),
            require_at_jwt: true,
            jwks: JwksPolicy::default(),
            allow_insecure_http: false,
        }
    }

    /// Which scope allows which operation.
    pub fn with_scopes(mut self, scopes: ScopePolicy) -> Self {
        self.scopes = scopes;
        self
    }

    /// Clock leeway for `exp` and `nbf` (at most [`MAX_LEEWAY`]).
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Whether the token's header must say `typ: at+jwt` (RFC 9068 §4). On by default: it is
    /// what keeps an ID token of the same issuer from passing as an access token. Turn it off
    /// only for an issuer that types its access tokens `JWT`; the audience check still holds.
    pub fn with_require_at_jwt(mut self, require: bool) -> Self {
        self.require_at_jwt = require;
        self
    }

    /// How keys are fetched and kept.
    pub fn with_jwks(mut self, jwks: JwksPolicy) -> Self {
        self.jwks = jwks;
        self
    }

    /// Accept plain `http` URLs to hosts that are not loopback (a trusted private network).
    pub fn allow_insecure_http(mut self, allow: bool) -> Self {
        self.allow_insecure_http = allow;
        self
    }

    /// The issuer, as given.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The resource, as given.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The issuer's URL, checked: absolute, `https` (or allowed `http`), no query or fragment
    /// (RFC 8414 §2).
    pub(super) fn issuer_url(&self) -> Result<Url, SettingsError> {
        self.checked_url(
            "issuer",
            &self.issuer,
            "has a query or a fragment, which an issuer identifier never has (RFC 8414)",
        )
    }

    /// The resource's URL, checked: absolute, `https` (or allowed `http`), no query or fragment
    /// (RFC 8707 §2, and the metadata URL is built from its path).
    pub(super) fn resource_url(&self) -> Result<Url, SettingsError> {
        self.checked_url(
            "resource",
            &self.resource,
            "has a query or a fragment; name the MCP endpoint, e.g. https://host/mcp",
        )
    }

    /// `text` (the `what` setting) as a URL: absolute, `https` (or allowed `http`), and with
    /// no query or fragment, which `query_why` explains.
    fn checked_url(
        &self,
        what: &'static str,
        text: &str,
        query_why: &'static str,
    ) -> Result<Url, SettingsError> {
        let url = parse(what, text)?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(SettingsError::Shape {
                what,
                url: text.to_owned(),
                why: query_why,
            });
        }
        check_transport(what, text, &url, self.allow_insecure_http)?;
        Ok(url)
    }

    /// Everything but the URLs.
    pub(super) fn check_limits(&self) -> Result<(), SettingsError> {
        if self.leeway > MAX_LEEWAY {
            return Err(SettingsError::Limit {
                what: "leeway",
                why: format!(
                    "is {}, more than the {} allowed",
                    humantime::format_duration(self.leeway),
                    humantime::format_duration(MAX_LEEWAY)
                ),
            });
        }
        let jwks = &self.jwks;
        if jwks.min_refresh_interval < Duration::from_secs(1) {
            return Err(SettingsError::Limit {
                what: "jwks.min_refresh_interval",
                why: "must be at least 1s, or every forged key id would be a fetch from the \
                      issuer"
                    .into(),
            });
        }
        if jwks.max_age < jwks.min_refresh_interval {
            return Err(SettingsError::Limit {
                what: "jwks.max_age",
                why: "must be at least jwks.min_refresh_interval".into(),
            });
        }
        if jwks.timeout.is_zero() || jwks.timeout > Duration::from_secs(60) {
            return Err(SettingsError::Limit {
                what: "jwks.timeout",
                why: "must be from 1ms through 60s: a request waits for it".into(),
            });
        }
        Ok(self.scopes.check()?)
    }
}

/// Why settings cannot make a validator. Each names the setting and says what to write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    #[error("{what} \"{url}\" is not an absolute URL ({why}); write e.g. https://auth.example.com")]
    NotAUrl {
        what: &'static str,
        url: String,
        why: String,
    },
    #[error("{what} \"{url}\" {why}")]
    Shape {
        what: &'static str,
        url: String,
        why: &'static str,
    },
    #[error(
        "{what} \"{url}\" is plain http to a host that is not loopback; use https, or allow \
         insecure http for a network you trust"
    )]
    InsecureHttp { what: &'static str, url: String },
    #[error("{what} {why}")]
    Limit { what: &'static str, why: String },
    #[error(transparent)]
    Scope(#[from] BadScope),
    #[error("cannot set up the HTTP client for the issuer: {0}")]
    HttpClient(String),
}

fn parse(what: &'static str, text: &str) -> Result<Url, SettingsError> {
    let url = Url::parse(text).map_err(|e| SettingsError::NotAUrl {
        what,
        url: text.to_owned(),
        why: e.to_string(),
    })?;
    if !matches!(url.scheme(), "https" | "http") || url.host().is_none() {
        return Err(SettingsError::NotAUrl {
            what,
            url: text.to_owned(),
            why: "it must be an http(s) URL with a host".into(),
        });
    }
    Ok(url)
}

/// `https`, or `http` to a loopback host, or `http` anywhere when `insecure` is allowed; `text`
/// is `url` as it was written, for the message.
pub(super) fn check_transport(
    what: &'static str,
    text: &str,
    url: &Url,
    insecure: bool,
) -> Result<(), SettingsError> {
    if url.scheme() == "https" || insecure || is_loopback(url) {
        return Ok(());
    }
    Err(SettingsError::InsecureHttp {
        what,
        url: text.to_owned(),
    })
}

/// `localhost`, `127.0.0.0/8` or `[::1]`.
pub(super) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(issuer: &str, resource: &str) -> OAuthSettings {
        OAuthSettings::new(issuer, resource)
    }

    #[test]
    fn https_and_loopback_http_are_accepted() {
        for (issuer, resource) in [
            ("https://auth.example.com", "https://mcp.example.com/mcp"),
            (
                "https://auth.example.com/tenant/1",
                "https://mcp.example.com",
            ),
            ("http://127.0.0.1:9000", "http://127.0.0.1:8080/mcp"),
            ("http://127.8.9.10", "http://[::1]:8080/mcp"),
            ("http://LOCALHOST:1", "http://localhost/mcp"),
        ] {
            let s = settings(issuer, resource);
            assert!(s.issuer_url().is_ok(), "{issuer}");
            assert!(s.resource_url().is_ok(), "{resource}");
        }
    }

    #[test]
    fn plain_http_elsewhere_needs_the_explicit_setting() {
        let s = settings("http://auth.internal", "http://10.0.0.5:8080/mcp");
        assert_eq!(
            s.issuer_url().unwrap_err(),
            SettingsError::InsecureHttp {
                what: "issuer",
                url: "http://auth.internal".into()
            }
        );
        assert!(matches!(
            s.resource_url(),
            Err(SettingsError::InsecureHttp {
                what: "resource",
                ..
            })
        ));
        // A name that merely starts like loopback is not loopback.
        let s = settings("http://localhost.example.com", "https://x");
        assert!(s.issuer_url().is_err());
        let s = s.allow_insecure_http(true);
        assert!(s.issuer_url().is_ok());
    }

    #[test]
    fn urls_must_be_absolute_http_without_query_or_fragment() {
        let cases = [
            ("auth.example.com", "not an absolute URL"),
            ("ftp://auth.example.com", "http(s) URL with a host"),
            ("https://auth.example.com/?tenant=1", "query or a fragment"),
            ("https://auth.example.com/#x", "query or a fragment"),
        ];
        for (issuer, expected) in cases {
            let err = settings(issuer, "https://mcp.example.com")
                .issuer_url()
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{issuer}: {err}");
            assert!(err.starts_with("issuer \""), "{err}");
        }
        let err = settings("https://a", "https://mcp.example.com/mcp#frag")
            .resource_url()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("resource \"") && err.contains("fragment"),
            "{err}"
        );
    }

    #[test]
    fn limits_are_checked() {
        let base = settings("https://a", "https://b");
        assert!(base.check_limits().is_ok());
        let err = base
            .clone()
            .with_leeway(Duration::from_secs(301))
            .check_limits()
            .unwrap_err();
        assert_eq!(err.to_string(), "leeway is 5m 1s, more than the 5m allowed");
        let jwks = |min, max, timeout| {
            base.clone()
                .with_jwks(JwksPolicy {
                    min_refresh_interval: Duration::from_millis(min),
                    max_age: Duration::from_millis(max),
                    timeout: Duration::from_millis(timeout),
                })
                .check_limits()
                .map_err(|e| e.to_string())
        };
        assert!(jwks(1000, 1000, 1).is_ok());
        assert!(
            jwks(999, 5000, 10)
                .unwrap_err()
                .starts_with("jwks.min_refresh_interval")
        );
        assert!(
            jwks(2000, 1000, 10)
                .unwrap_err()
                .starts_with("jwks.max_age")
        );
        assert!(jwks(1000, 1000, 0).unwrap_err().starts_with("jwks.timeout"));
        assert!(
            jwks(1000, 1000, 60_001)
                .unwrap_err()
                .starts_with("jwks.timeout")
        );
        let bad_scope = base.with_scopes(ScopePolicy::default().grant("a b", ["x"]));
        assert!(matches!(
            bad_scope.check_limits(),
            Err(SettingsError::Scope(_))
        ));
    }
}
