//! [`TokenError`]: which check a presented token failed, in words a client can act on, and
//! what kind of refusal that is ([`RefusalKind`]: `401 invalid_token`, `403
//! insufficient_scope`, or the server unable to check any token just now).
//!
//! No message holds the token. What a message quotes from a token's header (`alg`, `kid`,
//! `typ`) is cut to a few safe characters first ([`shown`]), because it is the sender's text.
//!
//! ```
//! use agent_mcp::oauth::{RefusalKind, TokenError};
//!
//! assert_eq!(TokenError::Expired.kind(), RefusalKind::InvalidToken);
//! let scope = TokenError::InsufficientScope {
//!     operation: "agent_run".into(),
//!     needed: "agent:run".into(),
//! };
//! assert_eq!(scope.kind(), RefusalKind::InsufficientScope);
//! assert_eq!(scope.needed_scope(), Some("agent:run"));
//! assert_eq!(
//!     scope.to_string(),
//!     "agent_run needs the scope agent:run, which this token was not granted; ask the \
//!      authorization server for a token with scope agent:run"
//! );
//! ```

/// How an edge answers a [`TokenError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// `401`, `WWW-Authenticate: Bearer error="invalid_token"`: get another token.
    InvalidToken,
    /// `403`, `WWW-Authenticate: Bearer error="insufficient_scope"`: get a token with more
    /// scope ([`TokenError::needed_scope`]).
    InsufficientScope,
    /// The server cannot check any token now (the issuer's keys are out of reach): `503`; the
    /// token may be fine.
    Unavailable,
}

/// Why a token is not accepted. Each message says what was wrong and what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    #[error(
        "the bearer token is not a signed JWT access token ({why}); this server takes JWT \
         access tokens (RFC 9068) from its authorization server"
    )]
    Malformed { why: &'static str },
    #[error(
        "the token is signed with alg {alg}, which this server does not accept ({why}); tokens \
         must be signed with the key the issuer publishes for them"
    )]
    Algorithm { alg: String, why: &'static str },
    #[error(
        "the token says alg {alg}, but the key it names is published for {pinned}; a key \
         verifies only the algorithm its issuer publishes it for"
    )]
    KeyAlgorithm { alg: String, pinned: &'static str },
    #[error(
        "the token names signing key {kid}, which the issuer does not publish; if the issuer \
         rotated its keys, retry in a minute, else get a new token"
    )]
    UnknownKey { kid: String },
    #[error(
        "the token names no signing key (kid) and the issuer publishes several for its alg; \
         get a token whose header names its key"
    )]
    AmbiguousKey,
    #[error(
        "the token's signature does not verify against the issuer's key: it was altered, or \
         signed by someone else; get a new token from the authorization server"
    )]
    Signature,
    #[error(
        "the token's header says typ {typ}, not at+jwt, so it is not an access token (RFC \
         9068); send an access token, not an ID token"
    )]
    TokenType { typ: String },
    #[error(
        "the token was not issued by this server's authorization server; get one from {expected}"
    )]
    Issuer { expected: String },
    #[error(
        "the token is not for this server: its audience (aud) does not name {resource}; ask \
         for a token with resource={resource}"
    )]
    Audience { resource: String },
    #[error("the token has expired; get a new one")]
    Expired,
    #[error("the token is not valid yet (nbf); check that the clocks agree, or retry shortly")]
    NotYetValid,
    #[error("the token has no {claim} claim, which every access token carries (RFC 9068)")]
    MissingClaim { claim: &'static str },
    #[error("the token's {claim} claim {why}")]
    BadClaim {
        claim: &'static str,
        why: &'static str,
    },
    #[error(
        "{operation} needs the scope {needed}, which this token was not granted; ask the \
         authorization server for a token with scope {needed}"
    )]
    InsufficientScope { operation: String, needed: String },
    #[error(
        "the server cannot check tokens just now, because the issuer's signing keys are out \
         of reach ({why}); retry later"
    )]
    KeysUnavailable { why: String },
}

impl TokenError {
    /// How an edge answers it.
    pub fn kind(&self) -> RefusalKind {
        match self {
            TokenError::InsufficientScope { .. } => RefusalKind::InsufficientScope,
            TokenError::KeysUnavailable { .. } => RefusalKind::Unavailable,
            _ => RefusalKind::InvalidToken,
        }
    }

    /// The scope to ask for, for [`TokenError::InsufficientScope`].
    pub fn needed_scope(&self) -> Option<&str> {
        match self {
            TokenError::InsufficientScope { needed, .. } => Some(needed),
            _ => None,
        }
    }

    /// A short name of the failed check, for logs and metrics labels (a fixed set).
    pub fn check(&self) -> &'static str {
        match self {
            TokenError::Malformed { .. } => "malformed",
            TokenError::Algorithm { .. } | TokenError::KeyAlgorithm { .. } => "algorithm",
            TokenError::UnknownKey { .. } | TokenError::AmbiguousKey => "key",
            TokenError::Signature => "signature",
            TokenError::TokenType { .. } => "typ",
            TokenError::Issuer { .. } => "issuer",
            TokenError::Audience { .. } => "audience",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::MissingClaim { .. } | TokenError::BadClaim { .. } => "claims",
            TokenError::InsufficientScope { .. } => "scope",
            TokenError::KeysUnavailable { .. } => "keys_unavailable",
        }
    }
}

/// `text` (from a token's header) as a message may quote it: at most 40 characters, quoted,
/// anything but ASCII letters, digits and `-_.:+/=` shown as `?`.
pub(super) fn shown(text: &str) -> String {
    let mut out = String::with_capacity(42);
    out.push('"');
    for (i, c) in text.chars().enumerate() {
        if i == 40 {
            out.push_str("...");
            break;
        }
        let safe = c.is_ascii_alphanumeric() || "-_.:+/=".contains(c);
        out.push(if safe { c } else { '?' });
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_text_is_quoted_short_and_tame() {
        assert_eq!(shown("rsa-1"), "\"rsa-1\"");
        assert_eq!(shown("a\"b\nc é"), "\"a?b?c??\"");
        let long = "k".repeat(100);
        assert_eq!(shown(&long), format!("\"{}...\"", "k".repeat(40)));
    }

    #[test]
    fn every_error_has_one_kind_and_check() {
        let invalid = [
            TokenError::Malformed { why: "x" },
            TokenError::Algorithm {
                alg: "\"none\"".into(),
                why: "x",
            },
            TokenError::KeyAlgorithm {
                alg: "\"HS256\"".into(),
                pinned: "RS256",
            },
            TokenError::UnknownKey {
                kid: "\"k\"".into(),
            },
            TokenError::AmbiguousKey,
            TokenError::Signature,
            TokenError::TokenType {
                typ: "\"JWT\"".into(),
            },
            TokenError::Issuer {
                expected: "https://a".into(),
            },
            TokenError::Audience {
                resource: "https://r".into(),
            },
            TokenError::Expired,
            TokenError::NotYetValid,
            TokenError::MissingClaim { claim: "sub" },
            TokenError::BadClaim {
                claim: "sub",
                why: "x",
            },
        ];
        for e in &invalid {
            assert_eq!(e.kind(), RefusalKind::InvalidToken, "{e:?}");
            assert_eq!(e.needed_scope(), None);
            assert!(e.to_string().is_ascii(), "{e}");
        }
        let unavailable = TokenError::KeysUnavailable { why: "x".into() };
        assert_eq!(unavailable.kind(), RefusalKind::Unavailable);
        assert_eq!(unavailable.check(), "keys_unavailable");
    }
}
