//! [`TokenValidator`]: checks a bearer token the way OAuth 2.1 §5.2 and RFC 9068 ask a
//! resource server to, and says what it allows.
//!
//! In order, each failure its own [`TokenError`]:
//!
//! 1. the token is a compact JWS (three parts, at most 16 KiB; not encrypted, not opaque);
//! 2. its `alg` is an asymmetric signature (`none` and HMAC never are), and it names no
//!    `crit` extension;
//! 3. its claimed `iss` is the issuer, exactly (another issuer's token is refused here,
//!    before any key is looked up, so it cannot make the server fetch keys);
//! 4. the issuer publishes the key it names (`kid`), for that `alg` (the cache fetches the key
//!    set again, rate limited, when the `kid` is new: a rotation);
//! 5. the signature verifies with that key, and the claims hold: `iss` exact, `aud` names
//!    this resource (RFC 8707: as configured, or that URL in normal form), `exp` present and `exp`/`nbf` within the leeway —
//!    `jsonwebtoken` does these;
//! 6. the header says `typ: at+jwt` (unless turned off), and `sub` is there and a usable name
//!    (a string of 1 to 255 characters, no control characters).
//!
//! [`TokenValidator::authorize`] then asks the [`ScopePolicy`] whether the token's scopes
//! allow the operation.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode};
use serde::Deserialize;
use serde_json::Value;

use super::cache::KeyCache;
use super::challenge;
use super::compact;
use super::error::{RefusalKind, TokenError, shown};
use super::keys;
use super::metadata::ProtectedResourceMetadata;
use super::scope::ScopePolicy;
use super::settings::{OAuthSettings, SettingsError};
use super::source::{KeySource, KeySourceError};
use super::token::{Identity, VerifiedToken};

/// The longest `sub` taken as an identity.
const MAX_SUBJECT_CHARS: usize = 255;

/// Checks access tokens of one issuer for one resource. Cheap to clone (one shared key
/// cache).
#[derive(Clone, Debug)]
pub struct TokenValidator {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    issuer: String,
    resource: String,
    /// `resource`, and its URL written out in normal form when that differs (a client that
    /// parses the metadata's `resource` as a URL asks for `https://mcp.example.com/` where
    /// the metadata says `https://mcp.example.com`, and lower-cases the host): both name this
    /// server.
    audiences: Vec<String>,
    scopes: ScopePolicy,
    leeway: Duration,
    require_at_jwt: bool,
    keys: KeyCache,
    metadata: ProtectedResourceMetadata,
}

/// How an edge answers a refused request: the status and the `WWW-Authenticate` value (none
/// for `503`, when the server cannot check tokens at all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub status: http::StatusCode,
    pub www_authenticate: Option<String>,
}

impl TokenValidator {
    /// A validator for `settings`, checked ([`SettingsError`] names what is wrong). No request
    /// is made here: keys are fetched when the first token needs them, or by
    /// [`TokenValidator::prefetch_keys`].
    pub fn new(settings: OAuthSettings) -> Result<Self, SettingsError> {
        let issuer_url = settings.issuer_url()?;
        let resource_url = settings.resource_url()?;
        settings.check_limits()?;
        let mut audiences = vec![settings.resource.clone()];
        if resource_url.as_str() != settings.resource {
            audiences.push(resource_url.to_string());
        }
        let source = KeySource::new(
            &settings.issuer,
            &issuer_url,
            settings.allow_insecure_http,
            settings.jwks.timeout,
        )?;
        let metadata = ProtectedResourceMetadata::new(
            &settings.resource,
            &settings.issuer,
            settings.scopes.scopes(),
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                keys: KeyCache::new(source, settings.jwks),
                issuer: settings.issuer,
                resource: settings.resource,
                audiences,
                scopes: settings.scopes,
                leeway: settings.leeway,
                require_at_jwt: settings.require_at_jwt,
                metadata,
            }),
        })
    }

    /// The issuer whose tokens are accepted.
    pub fn issuer(&self) -> &str {
        &self.inner.issuer
    }

    /// This resource (the audience tokens must carry).
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// Which scope allows which operation.
    pub fn scopes(&self) -> &ScopePolicy {
        &self.inner.scopes
    }

    /// The RFC 9728 document to serve at [`ProtectedResourceMetadata::well_known_url`].
    pub fn metadata(&self) -> &ProtectedResourceMetadata {
        &self.inner.metadata
    }

    /// Fetches the issuer's keys now, for a start-up log line: how many usable keys it
    /// publishes, or why they could not be had (requests will try again, rate limited).
    pub async fn prefetch_keys(&self) -> Result<usize, KeySourceError> {
        self.inner.keys.prefetch().await
    }

    /// Checks `token` (the bearer token's text) and says who it stands for and what scopes
    /// it holds. The token is not kept, logged or quoted.
    pub async fn validate(&self, token: &str) -> Result<VerifiedToken, TokenError> {
        let inner = &self.inner;
        let unverified = compact::read(token)?;
        let header = &unverified.header;
        if !keys::accepted(&header.alg) {
            return Err(TokenError::Algorithm {
                alg: shown(&header.alg),
                why: refused_alg_reason(&header.alg),
            });
        }
        if header.crit.is_some() {
            return Err(TokenError::Malformed {
                why: "its header names crit extensions, which this server does not implement",
            });
        }
        if unverified.issuer? != inner.issuer {
            return Err(self.issuer_error());
        }
        let key = inner.keys.key(header.kid.as_deref(), &header.alg).await?;

        let mut validation = Validation::new(key.alg);
        validation.leeway = inner.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&inner.issuer]);
        validation.set_audience(&inner.audiences);
        // `sub` is checked below, where a wrong type can be told from a missing claim.
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| self.claims_error(e.kind(), &header.alg))?
            .claims;

        if inner.require_at_jwt {
            let typ = header.typ.as_deref().unwrap_or("");
            let at_jwt = typ.eq_ignore_ascii_case("at+jwt")
                || typ.eq_ignore_ascii_case("application/at+jwt");
            if !at_jwt {
                return Err(TokenError::TokenType {
                    typ: header.typ.as_deref().map_or_else(|| "(none)".into(), shown),
                });
            }
        }
        claims.verified(&inner.issuer)
    }

    /// Whether `token` may do `operation` (the tool's name for `tools/call`, else the
    /// method's): `Err(InsufficientScope)` names the scope to ask for.
    pub fn authorize(&self, token: &VerifiedToken, operation: &str) -> Result<(), TokenError> {
        self.inner
            .scopes
            .permits(&token.scopes, operation)
            .map_err(|needed| TokenError::InsufficientScope {
                operation: operation.to_owned(),
                needed: needed.to_owned(),
            })
    }

    /// [`Self::validate`], then [`Self::authorize`].
    pub async fn check(&self, token: &str, operation: &str) -> Result<VerifiedToken, TokenError> {
        let verified = self.validate(token).await?;
        self.authorize(&verified, operation)?;
        Ok(verified)
    }

    /// The answer to a request without a token (`None`) or with one refused for `error`.
    pub fn challenge(&self, error: Option<&TokenError>) -> Challenge {
        let metadata = self.inner.metadata.well_known_url();
        let all: Vec<&str> = self.inner.scopes.scopes().collect();
        let Some(error) = error else {
            return Challenge {
                status: http::StatusCode::UNAUTHORIZED,
                www_authenticate: Some(challenge::token_required(metadata, &all)),
            };
        };
        let description = error.to_string();
        match error.kind() {
            RefusalKind::InvalidToken => Challenge {
                status: http::StatusCode::UNAUTHORIZED,
                www_authenticate: Some(challenge::invalid_token(metadata, &all, &description)),
            },
            RefusalKind::InsufficientScope => Challenge {
                status: http::StatusCode::FORBIDDEN,
                www_authenticate: Some(challenge::insufficient_scope(
                    metadata,
                    &error.needed_scope().into_iter().collect::<Vec<_>>(),
                    &description,
                )),
            },
            RefusalKind::Unavailable => Challenge {
                status: http::StatusCode::SERVICE_UNAVAILABLE,
                www_authenticate: None,
            },
        }
    }

    fn issuer_error(&self) -> TokenError {
        TokenError::Issuer {
            expected: self.inner.issuer.clone(),
        }
    }

    /// `jsonwebtoken`'s verdict as the check that failed.
    fn claims_error(&self, kind: &ErrorKind, alg: &str) -> TokenError {
        match kind {
            ErrorKind::InvalidSignature => TokenError::Signature,
            ErrorKind::ExpiredSignature => TokenError::Expired,
            ErrorKind::ImmatureSignature => TokenError::NotYetValid,
            ErrorKind::InvalidIssuer => self.issuer_error(),
            ErrorKind::InvalidAudience => TokenError::Audience {
                resource: self.inner.resource.clone(),
            },
            ErrorKind::MissingRequiredClaim(claim) => TokenError::MissingClaim {
                claim: spec_claim(claim),
            },
            ErrorKind::InvalidClaimFormat(claim) => TokenError::BadClaim {
                claim: spec_claim(claim),
                why: "does not have the type RFC 7519 gives it",
            },
            ErrorKind::Json(_) => TokenError::Malformed {
                why: "its header or claims do not parse as a JWT's",
            },
            ErrorKind::InvalidAlgorithm => TokenError::Algorithm {
                alg: shown(alg),
                why: "it is not the algorithm of the key it names",
            },
            ErrorKind::Base64(_) | ErrorKind::Utf8(_) | ErrorKind::InvalidToken => {
                TokenError::Malformed {
                    why: "its parts do not decode",
                }
            }
            // A key the issuer published that cannot check this signature: the signature does
            // not verify.
            _ => TokenError::Signature,
        }
    }
}

/// Why `alg`, not an accepted one, is refused.
fn refused_alg_reason(alg: &str) -> &'static str {
    if alg.eq_ignore_ascii_case("none") {
        "an unsigned token proves nothing"
    } else if alg.starts_with("HS") {
        "HMAC needs a secret this server does not share with the issuer"
    } else {
        "only RS, PS, ES and EdDSA signatures are verified"
    }
}

/// The registered claim `jsonwebtoken` named, as a `'static` name.
fn spec_claim(claim: &str) -> &'static str {
    match claim {
        "exp" => "exp",
        "nbf" => "nbf",
        "iss" => "iss",
        "aud" => "aud",
        "sub" => "sub",
        _ => "registered",
    }
}

/// The claims read once the signature verified. Loosely typed, so a wrong type is named as
/// that claim's problem rather than a parse failure.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<Value>,
    #[serde(default)]
    client_id: Option<Value>,
    #[serde(default)]
    scope: Option<Value>,
    #[serde(default)]
    scp: Option<Value>,
    #[serde(default)]
    exp: Option<Value>,
}

impl Claims {
    fn verified(self, issuer: &str) -> Result<VerifiedToken, TokenError> {
        let bad = |claim, why| TokenError::BadClaim { claim, why };
        let subject = match self.sub {
            Some(Value::String(sub)) => sub,
            Some(_) => return Err(bad("sub", "is not a string")),
            None => return Err(TokenError::MissingClaim { claim: "sub" }),
        };
        if subject.is_empty() || subject.chars().count() > MAX_SUBJECT_CHARS {
            return Err(bad("sub", "must be 1 to 255 characters"));
        }
        if subject.chars().any(char::is_control) {
            return Err(bad("sub", "holds control characters"));
        }
        let client_id = match self.client_id {
            None => None,
            Some(Value::String(id)) => Some(id),
            Some(_) => return Err(bad("client_id", "is not a string")),
        };
        let scopes: BTreeSet<String> = match (self.scope, self.scp) {
            (Some(Value::String(scope)), _) => scope
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            (Some(_), _) => return Err(bad("scope", "is not a space-separated string")),
            // Some issuers (Okta, Entra ID) send `scp`, a list or a string.
            (None, Some(Value::String(scp))) => scp
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            (None, Some(Value::Array(list))) => list
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(bad("scp", "is not a list of strings")),
                })
                .collect::<Result<_, _>>()?,
            (None, Some(_)) => return Err(bad("scp", "is not a list of strings")),
            (None, None) => BTreeSet::new(),
        };
        // `exp` passed jsonwebtoken's check, so it is a number.
        let expires_at = self
            .exp
            .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
            .unwrap_or(0);
        Ok(VerifiedToken {
            identity: Identity::new(issuer, &subject),
            client_id,
            scopes,
            expires_at,
        })
    }
}
