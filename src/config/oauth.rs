//! `auth.oauth`: an OAuth 2.1 authorization server whose JWT access tokens HTTP callers may
//! present, next to (or instead of) the static `auth.tokens`; its defaults and its checks.
//!
//! Off while `issuer` is unset. A token's caller is `oauth:<issuer>#<sub>`, which cannot be a
//! static token's name.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::serde_with::humantime_serde_compat;

/// `auth.oauth` (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server whose tokens are accepted, exactly as its metadata names
    /// itself (`issuer`), e.g. `https://auth.example.com`. Unset: OAuth is off.
    pub issuer: Option<String>,
    /// This server's MCP URL as clients reach it, e.g. `https://mcp.example.com/mcp`: the
    /// audience every token must carry (RFC 8707) and the `resource` of the protected resource
    /// metadata. Unset: `http://<the address serve listens on>/mcp` (right for a loopback
    /// server; behind a proxy or TLS terminator, set it). Must be set when `http.bind` is
    /// every address (`0.0.0.0`, `[::]`).
    pub resource: Option<String>,
    /// Scope → the operations it allows: a tool's name for `tools/call` (`agent_run`,
    /// `agent_status`), a method's name otherwise (`tasks/cancel`). An operation listed under
    /// several scopes is allowed by any of them; one no scope lists needs only a valid token.
    pub scopes: BTreeMap<String, Vec<String>>,
    /// Clock leeway for a token's `exp` and `nbf`, at most 5m.
    #[serde(with = "humantime_serde_compat")]
    pub leeway: Duration,
    /// Refuse tokens whose header `typ` is not `at+jwt` (RFC 9068): what keeps an ID token from
    /// passing as an access token. Off only for issuers that type access tokens `JWT`.
    pub require_at_jwt: bool,
    /// `auth.oauth.jwks`: how the issuer's signing keys are fetched and kept.
    pub jwks: JwksConfig,
    /// Accept plain `http` for the issuer, the resource and the key set on hosts that are not
    /// loopback (a private network you trust). Loopback http is always accepted.
    pub allow_insecure_http: bool,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        let reads = ["agent_status", "tasks/get", "tasks/list", "tasks/result"];
        let mut run: Vec<String> = ["agent_run", "tasks/cancel", "tasks/update"]
            .into_iter()
            .map(String::from)
            .collect();
        run.extend(reads.map(String::from));
        Self {
            issuer: None,
            resource: None,
            scopes: BTreeMap::from([
                ("agent:run".to_owned(), run),
                ("agent:status".to_owned(), reads.map(String::from).to_vec()),
            ]),
            leeway: Duration::from_secs(30),
            require_at_jwt: true,
            jwks: JwksConfig::default(),
            allow_insecure_http: false,
        }
    }
}

/// `auth.oauth.jwks`: how the issuer's signing keys are fetched and kept.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwksConfig {
    /// Keys are fetched again at most this often (a token naming an unknown key, a rotation,
    /// triggers a fetch), at least 1s.
    #[serde(with = "humantime_serde_compat")]
    pub min_refresh_interval: Duration,
    /// Keys older than this are fetched again before use (the old ones stay if that fails).
    #[serde(with = "humantime_serde_compat")]
    pub max_age: Duration,
    /// The most one fetch (metadata, then the key set) may take, at most 60s.
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
}

impl Default for JwksConfig {
    fn default() -> Self {
        Self {
            min_refresh_interval: Duration::from_secs(30),
            max_age: Duration::from_secs(3600),
            timeout: Duration::from_secs(10),
        }
    }
}

/// What an operation name in `auth.oauth.scopes` may be: the tools, and the methods a scope
/// can guard (`tools/call` is named by its tool; notifications are never refused).
fn operations() -> Vec<&'static str> {
    let mut names = vec![crate::mcp_tools::AGENT_RUN, crate::mcp_tools::AGENT_STATUS];
    names.extend(
        crate::protocol::Method::LABELS
            .into_iter()
            .filter(|m| !matches!(*m, "tools/call" | "notification" | "other")),
    );
    names
}

impl OAuthConfig {
    /// Whether OAuth tokens are accepted (an issuer is set).
    pub fn is_enabled(&self) -> bool {
        self.issuer.is_some()
    }

    /// Checks the section; every error names its key and says what to write.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: String| Err(ConfigError::Invalid { key, message });
        match (&self.issuer, &self.resource) {
            (None, Some(_)) => {
                return invalid(
                    "auth.oauth.resource",
                    "is only used with auth.oauth.issuer; set the issuer too, or remove resource"
                        .into(),
                );
            }
            // The server's own URL from its bind address (`http://<bind>/mcp`), filled in when
            // it starts; refused there for a bind to every address (Config::validate).
            (Some(issuer), None) => self.check_url("auth.oauth.issuer", issuer)?,
            (Some(issuer), Some(resource)) => {
                self.check_url("auth.oauth.issuer", issuer)?;
                self.check_url("auth.oauth.resource", resource)?;
            }
            (None, None) => {}
        }
        let known = operations();
        for (scope, allowed) in &self.scopes {
            let token_char = |c: char| matches!(c, '\x21' | '\x23'..='\x5b' | '\x5d'..='\x7e');
            if scope.is_empty() || !scope.chars().all(token_char) {
                return invalid(
                    "auth.oauth.scopes",
                    format!(
                        "\"{scope}\" is not a scope name: visible ASCII but '\"' and '\\', no \
                         spaces (RFC 6749), e.g. agent:run"
                    ),
                );
            }
            for operation in allowed {
                if operation == "tools/call" {
                    return invalid(
                        "auth.oauth.scopes",
                        format!(
                            "{scope}: name the tool instead of tools/call ({} or {})",
                            crate::mcp_tools::AGENT_RUN,
                            crate::mcp_tools::AGENT_STATUS
                        ),
                    );
                }
                if !known.contains(&operation.as_str()) {
                    return invalid(
                        "auth.oauth.scopes",
                        format!(
                            "{scope}: \"{operation}\" is not an operation of this server; write \
                             one of {}",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
        self.validate_limits()
    }

    fn validate_limits(&self) -> Result<(), ConfigError> {
        let invalid = |key, message: &str| {
            Err(ConfigError::Invalid {
                key,
                message: message.into(),
            })
        };
        if self.leeway > Duration::from_secs(300) {
            return invalid(
                "auth.oauth.leeway",
                "must be at most 5m: it allows for clocks that disagree, not for old tokens",
            );
        }
        let jwks = &self.jwks;
        if jwks.min_refresh_interval < Duration::from_secs(1) {
            return invalid(
                "auth.oauth.jwks.min_refresh_interval",
                "must be at least 1s, or every made-up key id would be a request to the issuer",
            );
        }
        if jwks.max_age < jwks.min_refresh_interval {
            return invalid(
                "auth.oauth.jwks.max_age",
                "must be at least auth.oauth.jwks.min_refresh_interval",
            );
        }
        if jwks.timeout.is_zero() || jwks.timeout > Duration::from_secs(60) {
            return invalid(
                "auth.oauth.jwks.timeout",
                "must be greater than 0 and at most 60s: a request may wait for it",
            );
        }
        Ok(())
    }

    /// An absolute http(s) URL without query or fragment; plain http only to loopback unless
    /// `allow_insecure_http`.
    fn check_url(&self, key: &'static str, text: &str) -> Result<(), ConfigError> {
        let invalid = |message: String| Err(ConfigError::Invalid { key, message });
        let url = match url::Url::parse(text) {
            Ok(url) if matches!(url.scheme(), "https" | "http") && url.host().is_some() => url,
            _ => {
                return invalid(format!(
                    "\"{text}\" is not an absolute http(s) URL; write e.g. https://auth.example.com"
                ));
            }
        };
        if url.query().is_some() || url.fragment().is_some() {
            return invalid(format!(
                "\"{text}\" has a query or a fragment; neither an issuer nor a resource has one"
            ));
        }
        let loopback = match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            None => false,
        };
        if url.scheme() == "http" && !loopback && !self.allow_insecure_http {
            return invalid(format!(
                "\"{text}\" is plain http to a host that is not loopback, so tokens and keys \
                 would cross the network in clear; use https, or set \
                 auth.oauth.allow_insecure_http: true for a network you trust"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn oauth(yaml: &str) -> Result<OAuthConfig, String> {
        let config =
            Config::from_yaml(&format!("auth:\n  oauth:\n{yaml}")).map_err(|e| e.to_string())?;
        Ok(config.auth.oauth)
    }

    fn check(yaml: &str) -> Result<(), String> {
        let section: OAuthConfig = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
        section.validate().map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_off_and_valid() {
        let d = OAuthConfig::default();
        assert!(!d.is_enabled());
        assert!(d.validate().is_ok());
        assert_eq!(
            d.scopes.keys().collect::<Vec<_>>(),
            ["agent:run", "agent:status"]
        );
        assert!(d.scopes["agent:run"].contains(&"agent_status".to_owned()));
        assert!(!d.scopes["agent:status"].contains(&"agent_run".to_owned()));
        assert_eq!(oauth("    {}\n").unwrap(), d);
    }

    #[test]
    fn a_complete_section_is_read() {
        let c = check(
            "issuer: https://auth.example.com\nresource: https://mcp.example.com/mcp\n\
             scopes:\n  agent:run: [agent_run]\n  read: [agent_status, tasks/get]\n\
             leeway: 10s\njwks: {min_refresh_interval: 5s, max_age: 10m, timeout: 3s}\n",
        );
        assert_eq!(c, Ok(()));
        let section: OAuthConfig = serde_yaml_ng::from_str(
            "issuer: http://127.0.0.1:9000\nresource: http://127.0.0.1:8080/mcp\n",
        )
        .unwrap();
        assert!(section.validate().is_ok());
        assert!(section.is_enabled());
    }

    #[test]
    fn a_set_issuer_is_accepted_and_resource_defaults_from_the_bind() {
        let c =
            oauth("    issuer: https://auth.example.com\n    resource: https://m.example/mcp\n")
                .unwrap();
        assert!(c.is_enabled());
        // No resource: filled from the bind when serving; a loopback bind is a fine default.
        let c = oauth("    issuer: https://auth.example.com\n").unwrap();
        assert_eq!(c.resource, None);
        // A bind to every address says nothing of the URL clients use.
        let err = Config::from_yaml(
            "http:\n  bind: 0.0.0.0:8080\nauth:\n  oauth:\n    issuer: https://auth.example.com\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("auth.oauth.resource: must be set when http.bind is 0.0.0.0:8080"),
            "{err}"
        );
    }

    #[test]
    fn scalar_keys_have_environment_variables() {
        let vars = [
            ("AGENT_MCP_AUTH_OAUTH_LEEWAY", "10s"),
            ("AGENT_MCP_AUTH_OAUTH_JWKS_TIMEOUT", "3s"),
            ("AGENT_MCP_AUTH_OAUTH_REQUIRE_AT_JWT", "false"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let (c, unknown) = Config::default().with_env_overrides(vars).unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(c.auth.oauth.leeway, Duration::from_secs(10));
        assert_eq!(c.auth.oauth.jwks.timeout, Duration::from_secs(3));
        assert!(!c.auth.oauth.require_at_jwt);
    }

    #[test]
    fn each_mistake_names_its_key() {
        let cases = [
            (
                "resource: https://m/mcp\n",
                "auth.oauth.resource: is only used with",
            ),
            (
                "issuer: auth.example.com\nresource: https://m\n",
                "auth.oauth.issuer: \"auth.example.com\" is not an absolute",
            ),
            (
                "issuer: https://a?x=1\nresource: https://m\n",
                "auth.oauth.issuer: \"https://a?x=1\" has a query",
            ),
            (
                "issuer: https://a\nresource: https://m/mcp#f\n",
                "auth.oauth.resource: \"https://m/mcp#f\" has a query or a fragment",
            ),
            (
                "issuer: http://auth.internal\nresource: https://m\n",
                "auth.oauth.issuer: \"http://auth.internal\" is plain http",
            ),
            (
                "issuer: https://a\nresource: http://10.0.0.2/mcp\n",
                "auth.oauth.resource: \"http://10.0.0.2/mcp\" is plain http",
            ),
            (
                "scopes: {\"two words\": [agent_run]}\n",
                "auth.oauth.scopes: \"two words\" is not a scope name",
            ),
            (
                "scopes: {run: [tools/call]}\n",
                "auth.oauth.scopes: run: name the tool instead of tools/call",
            ),
            (
                "scopes: {run: [agent_rnu]}\n",
                "auth.oauth.scopes: run: \"agent_rnu\" is not an operation of this server; write one of agent_run, agent_status, server/discover",
            ),
            ("leeway: 6m\n", "auth.oauth.leeway: must be at most 5m"),
            (
                "jwks: {min_refresh_interval: 500ms}\n",
                "auth.oauth.jwks.min_refresh_interval: must be at least 1s",
            ),
            (
                "jwks: {min_refresh_interval: 2m, max_age: 1m}\n",
                "auth.oauth.jwks.max_age: must be at least",
            ),
            (
                "jwks: {timeout: 2m}\n",
                "auth.oauth.jwks.timeout: must be greater than 0 and at most 60s",
            ),
        ];
        for (yaml, expected) in cases {
            let err = check(yaml).unwrap_err();
            assert!(err.starts_with(expected), "{yaml}: {err}");
        }
        let allowed = "issuer: http://auth.internal\nresource: http://10.0.0.2/mcp\nallow_insecure_http: true\n";
        assert_eq!(check(allowed), Ok(()));
        // Unknown keys are errors, as everywhere in agent.yaml.
        let err = oauth("    isuer: https://a\n").unwrap_err();
        assert!(err.contains("isuer"), "{err}");
    }
}
