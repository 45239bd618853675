//! [`Credential`]: what a caller presented to prove who it is, read once at the edge.
//!
//! The HTTP edge reads the `Authorization` header into [`RequestContext::credential`]
//! (`None` when there is none) and passes no raw header down the stack; an auth layer checks
//! the credential and sets [`RequestContext::identity`]. stdio has no credential: its one
//! caller started the server. Neither type prints a token in `Debug` output.
//!
//! ```
//! use agent_mcp_plugin::protocol::Credential;
//! use http::HeaderValue;
//!
//! let c = Credential::from_authorization(&HeaderValue::from_static("Bearer s3cret"));
//! let Some(Credential::Bearer(token)) = &c else { panic!() };
//! assert_eq!(token.expose(), "s3cret");
//! assert!(!format!("{c:?}").contains("s3cret"));
//! let basic = HeaderValue::from_static("Basic dXNlcjpwYXNz");
//! assert!(matches!(Credential::from_authorization(&basic), Some(Credential::OtherScheme)));
//! assert!(Credential::from_authorization(&HeaderValue::from_static("Bearer  ")).is_none());
//! ```
//!
//! [`RequestContext::credential`]: super::RequestContext::credential
//! [`RequestContext::identity`]: super::RequestContext::identity

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;

use super::Refusal;

/// A credential as the transport presented it, not yet checked.
#[derive(Clone)]
pub enum Credential {
    /// `Authorization: Bearer <token>` (scheme in any case) with a non-empty token.
    Bearer(BearerToken),
    /// An `Authorization` header in another scheme (`Basic …`, or a token without a scheme).
    OtherScheme,
    /// An `Authorization` header that is not visible ASCII, so no token can be read from it.
    Unreadable,
    /// A bearer token the HTTP edge's admission check already verified (an OAuth access
    /// token, checked against its issuer's keys before the body was read), in place of the
    /// [`Credential::Bearer`] it was presented as. It holds no token.
    Verified(VerifiedBearer),
}

impl Credential {
    /// Reads an `Authorization` header value. `None` when it names the Bearer scheme but holds
    /// no token, which is the same as sending none.
    pub fn from_authorization(value: &HeaderValue) -> Option<Credential> {
        let Ok(value) = value.to_str() else {
            return Some(Credential::Unreadable);
        };
        let value = value.trim();
        let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Some(Credential::OtherScheme);
        }
        let token = token.trim();
        if token.is_empty() {
            return None;
        }
        Some(Credential::Bearer(BearerToken(token.to_owned())))
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Bearer(token) => f.debug_tuple("Bearer").field(token).finish(),
            Credential::OtherScheme => f.write_str("OtherScheme"),
            Credential::Unreadable => f.write_str("Unreadable"),
            Credential::Verified(verified) => f.debug_tuple("Verified").field(verified).finish(),
        }
    }
}

/// What a verified credential allows, asked once the request's operation is known (after the
/// body is parsed): `operation` is the tool's name for `tools/call`, else the method's.
pub trait Grants: Send + Sync {
    /// `Ok` when the credential allows `operation`; else the refusal to answer
    /// ([`Refusal::InsufficientScope`], naming the scope to ask for).
    fn allows(&self, operation: &str) -> Result<(), Refusal>;
}

/// A credential verified at the edge ([`Credential::Verified`]): the caller identity it
/// stands for and what it allows. Cheap to clone; holds no token.
#[derive(Clone)]
pub struct VerifiedBearer {
    identity: String,
    grants: Arc<dyn Grants>,
}

impl VerifiedBearer {
    /// `identity` (e.g. `oauth:<issuer>#<sub>`) allowed what `grants` allows.
    pub fn new(identity: impl Into<String>, grants: Arc<dyn Grants>) -> Self {
        Self {
            identity: identity.into(),
            grants,
        }
    }

    /// Who the credential stands for.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether the credential allows `operation` (see [`Grants::allows`]).
    pub fn allows(&self, operation: &str) -> Result<(), Refusal> {
        self.grants.allows(operation)
    }
}

impl fmt::Debug for VerifiedBearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifiedBearer")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// A bearer token. Its `Debug` output is `<redacted>`; read it with [`BearerToken::expose`]
/// only to check it.
#[derive(Clone)]
pub struct BearerToken(String);

impl BearerToken {
    /// For embedders and tests that hold a token already (the edge parses one with
    /// [`Credential::from_authorization`]).
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token's text, to check it; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &[u8]) -> Option<Credential> {
        Credential::from_authorization(&HeaderValue::from_bytes(value).unwrap())
    }

    #[test]
    fn authorization_values() {
        let bearer = |v: &[u8]| match parse(v) {
            Some(Credential::Bearer(t)) => Some(t.expose().to_owned()),
            _ => None,
        };
        assert_eq!(bearer(b"Bearer abc").as_deref(), Some("abc"));
        assert_eq!(bearer(b"  bearer   abc ").as_deref(), Some("abc"));
        assert_eq!(bearer(b"BEARER abc def").as_deref(), Some("abc def"));
        assert!(parse(b"Bearer").is_none());
        assert!(parse(b"Bearer   ").is_none());
        assert!(matches!(parse(b"Basic x"), Some(Credential::OtherScheme)));
        assert!(matches!(parse(b"abc"), Some(Credential::OtherScheme)));
        assert!(matches!(
            parse(b"Bearer\tabc"),
            Some(Credential::OtherScheme)
        ));
        assert!(matches!(
            parse(b"Bearer \xe9t\xe9"),
            Some(Credential::Unreadable)
        ));
    }

    #[test]
    fn debug_never_shows_the_token() {
        let c = parse(b"Bearer top-secret-42").unwrap();
        let text = format!("{c:?} {:?}", BearerToken::new("top-secret-42"));
        assert!(!text.contains("top-secret"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}
