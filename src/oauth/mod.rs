//! OAuth 2.1 resource server: JWT access tokens checked against an authorization server's
//! published keys, the way the MCP authorization spec asks an HTTP server to.
//!
//! - [`TokenValidator`] checks a bearer token (OAuth 2.1 §5.2, RFC 9068): signature by a key
//!   of the issuer's JWKS pinned to its algorithm (`none` and HMAC refused), `iss` and `aud`
//!   (RFC 8707: this server's resource URL) exact, `exp`/`nbf` within a small leeway, `typ:
//!   at+jwt`. A token that passes is a [`VerifiedToken`]: its caller [`Identity`]
//!   (`oauth:<issuer>#<sub>`) and its scopes. [`TokenValidator::authorize`] asks the
//!   [`ScopePolicy`] whether those scopes allow an operation.
//! - The keys are found from the issuer's metadata (RFC 8414, or OpenID Connect discovery),
//!   fetched when first needed, kept, and fetched again when a token names a key not held
//!   (a rotation needs no restart), at most once per [`JwksPolicy::min_refresh_interval`].
//! - [`TokenError`] says which check failed and its [`RefusalKind`]: `401 invalid_token`,
//!   `403 insufficient_scope` (with the scope to ask for), or `503` when the issuer's keys
//!   are out of reach. [`TokenValidator::challenge`] is the status and `WWW-Authenticate`
//!   value for each ([`challenge`] has the strings themselves).
//! - [`ProtectedResourceMetadata`] is the RFC 9728 document clients discover the
//!   authorization server from.
//!
//! The module stands alone: it uses the standard library, its crates (`jsonwebtoken`,
//! `reqwest`, `url`) and its own [`OAuthSettings`], nothing else of this crate.
//! No token is kept, logged or quoted in an error.
//!
//! ```
//! use agent_mcp::oauth::*;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let validator = TokenValidator::new(
//!     OAuthSettings::new("https://auth.example.com", "https://mcp.example.com/mcp")
//!         .with_scopes(
//!             ScopePolicy::default()
//!                 .grant("agent:status", ["agent_status"])
//!                 .grant("agent:run", ["agent_run", "agent_status"]),
//!         ),
//! )
//! .unwrap();
//!
//! // No token: 401, and where to get one.
//! let answer = validator.challenge(None);
//! assert_eq!(answer.status, 401);
//! assert_eq!(
//!     answer.www_authenticate.as_deref(),
//!     Some(
//!         "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", \
//!          scope=\"agent:run agent:status\""
//!     )
//! );
//!
//! // An unsigned token is refused before any key is fetched.
//! let unsigned = "eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20ifQ.";
//! let refused = validator.validate(unsigned).await.unwrap_err();
//! assert!(matches!(refused, TokenError::Algorithm { .. }));
//! assert_eq!(refused.kind(), RefusalKind::InvalidToken);
//! let answer = validator.challenge(Some(&refused));
//! assert_eq!(answer.status, 401);
//! assert!(answer.www_authenticate.unwrap().starts_with("Bearer error=\"invalid_token\""));
//! # }
//! ```

mod cache;
pub mod challenge;
mod compact;
mod error;
mod keys;
mod metadata;
mod scope;
mod settings;
mod source;
mod token;
mod validator;

pub use error::{RefusalKind, TokenError};
pub use metadata::ProtectedResourceMetadata;
pub use scope::{BadScope, ScopePolicy};
pub use settings::{JwksPolicy, MAX_LEEWAY, OAuthSettings, SettingsError};
pub use source::KeySourceError;
pub use token::{Identity, VerifiedToken};
pub use validator::{Challenge, TokenValidator};
