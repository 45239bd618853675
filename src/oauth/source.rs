//! [`KeySource`]: the issuer's signing keys, fetched over HTTP: its metadata first (RFC 8414
//! `/.well-known/oauth-authorization-server`, then OpenID Connect
//! `/.well-known/openid-configuration`, in the order the MCP authorization spec gives), then
//! the key set its `jwks_uri` names.
//!
//! The metadata must name the configured issuer exactly (RFC 8414 §3.3), or it is not used:
//! a document served at the issuer's address that claims to be someone else is a mix-up, not
//! a key set. Every fetch has a deadline and a size cap, follows no redirect, and any failure
//! is a [`KeySourceError`] that says which URL did what, never a panic.

use std::time::Duration;

use url::Url;

use super::keys::KeySet;
use super::settings::{SettingsError, check_transport};

/// The largest metadata or key-set document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Why the issuer's keys could not be had.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeySourceError {
    #[error("cannot reach {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("fetching the issuer's keys took longer than {}", humantime::format_duration(*.0))]
    Timeout(Duration),
    #[error("{url} answered HTTP {status}{hint}")]
    Status {
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{url} sent more than 256 KiB")]
    TooLarge { url: String },
    #[error("{url} did not send {what}: {why}")]
    Document {
        url: String,
        what: &'static str,
        why: String,
    },
    #[error("no authorization server metadata for the issuer at {tried}")]
    NoMetadata { tried: String },
    #[error(
        "the metadata at {url} names the issuer \"{found}\", not \"{expected}\"; set \
         auth.oauth.issuer to exactly the issuer the authorization server names itself"
    )]
    IssuerMismatch {
        url: String,
        found: String,
        expected: String,
    },
    #[error("the metadata's jwks_uri is not usable: {0}")]
    JwksUri(String),
    #[error(
        "the key set at {url} has no key this server can verify signatures with (skipped {skipped})"
    )]
    NoUsableKey { url: String, skipped: usize },
}

/// Fetches one issuer's metadata and keys.
#[derive(Clone, Debug)]
pub(super) struct KeySource {
    http: reqwest::Client,
    issuer: String,
    metadata_urls: Vec<Url>,
    allow_insecure_http: bool,
    timeout: Duration,
}

impl KeySource {
    pub fn new(
        issuer: &str,
        issuer_url: &Url,
        allow_insecure_http: bool,
        timeout: Duration,
    ) -> Result<Self, SettingsError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .timeout(timeout)
            .user_agent(concat!("agent-mcp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SettingsError::HttpClient(e.to_string()))?;
        Ok(Self {
            http,
            issuer: issuer.to_owned(),
            metadata_urls: metadata_urls(issuer_url),
            allow_insecure_http,
            timeout,
        })
    }

    /// The metadata, then the key set, within the deadline: the usable keys and where they
    /// came from.
    pub async fn fetch(&self) -> Result<(KeySet, Url), KeySourceError> {
        tokio::time::timeout(self.timeout, self.fetch_unbounded())
            .await
            .map_err(|_| KeySourceError::Timeout(self.timeout))?
    }

    async fn fetch_unbounded(&self) -> Result<(KeySet, Url), KeySourceError> {
        let jwks_uri = self.jwks_uri().await?;
        let body = self.get(&jwks_uri).await?;
        let keys = KeySet::from_jwks(&body).map_err(|why| KeySourceError::Document {
            url: jwks_uri.to_string(),
            what: "a JWK set",
            why: why.into(),
        })?;
        if keys.is_empty() {
            return Err(KeySourceError::NoUsableKey {
                url: jwks_uri.to_string(),
                skipped: keys.skipped(),
            });
        }
        Ok((keys, jwks_uri))
    }

    /// The `jwks_uri` of the first metadata document found.
    async fn jwks_uri(&self) -> Result<Url, KeySourceError> {
        for url in &self.metadata_urls {
            let body = match self.get(url).await {
                Ok(body) => body,
                // Not served here: the next well-known location may be.
                Err(KeySourceError::Status { status, .. }) if (400..500).contains(&status) => {
                    continue;
                }
                Err(e) => return Err(e),
            };
            return self.jwks_uri_in(url, &body);
        }
        Err(KeySourceError::NoMetadata {
            tried: self
                .metadata_urls
                .iter()
                .map(Url::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// The `jwks_uri` of a metadata document read from `url`, once its `issuer` is checked.
    fn jwks_uri_in(&self, url: &Url, body: &[u8]) -> Result<Url, KeySourceError> {
        #[derive(serde::Deserialize)]
        struct Metadata {
            issuer: Option<serde_json::Value>,
            jwks_uri: Option<serde_json::Value>,
        }
        let document = |why: String| KeySourceError::Document {
            url: url.to_string(),
            what: "authorization server metadata",
            why,
        };
        let metadata: Metadata =
            serde_json::from_slice(body).map_err(|e| document(e.to_string()))?;
        let issuer = match metadata.issuer {
            Some(serde_json::Value::String(issuer)) => issuer,
            _ => return Err(document("it has no issuer string".into())),
        };
        if issuer != self.issuer {
            return Err(KeySourceError::IssuerMismatch {
                url: url.to_string(),
                found: issuer,
                expected: self.issuer.clone(),
            });
        }
        let text = match metadata.jwks_uri {
            Some(serde_json::Value::String(text)) => text,
            _ => return Err(document("it has no jwks_uri string".into())),
        };
        let jwks_uri = Url::parse(&text)
            .map_err(|e| KeySourceError::JwksUri(format!("\"{text}\" is not a URL ({e})")))?;
        if !matches!(jwks_uri.scheme(), "https" | "http") {
            return Err(KeySourceError::JwksUri(format!(
                "\"{text}\" is not http(s)"
            )));
        }
        check_transport("jwks_uri", &text, &jwks_uri, self.allow_insecure_http)
            .map_err(|e| KeySourceError::JwksUri(e.to_string()))?;
        Ok(jwks_uri)
    }

    /// The body of a `GET url` that answered 2xx, at most [`MAX_DOCUMENT_BYTES`].
    async fn get(&self, url: &Url) -> Result<Vec<u8>, KeySourceError> {
        let unreachable = |e: reqwest::Error| KeySourceError::Unreachable {
            url: url.to_string(),
            why: error_chain(&e),
        };
        let mut response = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            return Err(KeySourceError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                hint: if status.is_redirection() {
                    " (a redirect, which is not followed for keys)"
                } else {
                    ""
                },
            });
        }
        let too_large = || KeySourceError::TooLarge {
            url: url.to_string(),
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Where the issuer's metadata may be, in the order tried: for `https://a.example/t1`,
/// `https://a.example/.well-known/oauth-authorization-server/t1`,
/// `https://a.example/.well-known/openid-configuration/t1`,
/// `https://a.example/t1/.well-known/openid-configuration`; for an issuer without a path, the
/// first two without the suffix. A terminating `/` of the path is dropped first (RFC 8414 §3.1).
pub(super) fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |path: String| {
        let mut url = issuer.clone();
        url.set_path(&path);
        url.set_query(None);
        url.set_fragment(None);
        url
    };
    let mut urls = vec![
        at(format!("/.well-known/oauth-authorization-server{path}")),
        at(format!("/.well-known/openid-configuration{path}")),
    ];
    if !path.is_empty() {
        urls.push(at(format!("{path}/.well-known/openid-configuration")));
    }
    urls
}

/// `e` and its sources in one line ("error sending request: connection refused").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(issuer: &str) -> Vec<String> {
        metadata_urls(&Url::parse(issuer).unwrap())
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn metadata_locations_follow_the_spec_order() {
        assert_eq!(
            urls("https://auth.example.com"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            urls("https://auth.example.com/tenant1/"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            urls("http://127.0.0.1:4000/a/b"),
            [
                "http://127.0.0.1:4000/.well-known/oauth-authorization-server/a/b",
                "http://127.0.0.1:4000/.well-known/openid-configuration/a/b",
                "http://127.0.0.1:4000/a/b/.well-known/openid-configuration",
            ]
        );
    }

    fn source(issuer: &str) -> KeySource {
        KeySource::new(
            issuer,
            &Url::parse(issuer).unwrap(),
            false,
            Duration::from_secs(1),
        )
        .unwrap()
    }

    #[test]
    fn metadata_must_name_the_issuer_and_a_usable_jwks_uri() {
        let s = source("https://auth.example.com");
        let at = Url::parse("https://auth.example.com/.well-known/openid-configuration").unwrap();
        let read = |json: &str| s.jwks_uri_in(&at, json.as_bytes());
        assert_eq!(
            read(r#"{"issuer":"https://auth.example.com","jwks_uri":"https://keys.example.com/jwks"}"#)
                .unwrap()
                .as_str(),
            "https://keys.example.com/jwks"
        );
        // A trailing slash is another issuer: the comparison is exact.
        assert!(matches!(
            read(r#"{"issuer":"https://auth.example.com/","jwks_uri":"https://a/j"}"#),
            Err(KeySourceError::IssuerMismatch { .. })
        ));
        let err = read(
            r#"{"issuer":"https://auth.example.com","jwks_uri":"http://keys.example.com/jwks"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("plain http"), "{err}");
        for bad in [
            r#"{"jwks_uri":"https://a/j"}"#,
            r#"{"issuer":"https://auth.example.com"}"#,
            r#"{"issuer":"https://auth.example.com","jwks_uri":"/relative"}"#,
            r#"{"issuer":"https://auth.example.com","jwks_uri":"file:///etc/passwd"}"#,
            "not json",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_issuer_is_an_error_not_a_hang() {
        // A port nothing listens on (bound, then closed).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let err = source(&format!("http://127.0.0.1:{port}"))
            .fetch()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, KeySourceError::Unreachable { url, .. } if url.contains(&port.to_string())),
            "{err}"
        );
    }
}
