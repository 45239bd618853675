//! The HTTP edge's [`Admission`] check, composed from the auth layer's tokens, the OAuth
//! validator and the audit layer: a request without a valid bearer token is refused from its
//! headers, before the edge reads its body, and the refusal is recorded as the auth layer's
//! would be.
//!
//! A bearer token is tried as a static token first (`auth.tokens`: a hash compare, no I/O).
//! When `auth.oauth` is on and it is none of them, it is checked as an OAuth access token
//! ([`TokenValidator::validate`]: signature against the issuer's keys, which may need a
//! fetch, so the edge awaits it, still before the body); a token that passes goes on as a
//! [`Credential::Verified`], whose identity is `oauth:<issuer>#<sub>` and whose scopes the
//! auth layer asks once the operation is known. Refusals carry the challenge the MCP
//! authorization spec asks for (`WWW-Authenticate: Bearer resource_metadata="…", scope="…"`).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::layers::audit::AuditLayer;
use crate::layers::auth::Tokens;
use crate::oauth::{RefusalKind, TokenError, TokenValidator, VerifiedToken};
use crate::protocol::{Credential, Grants, ProtocolVersion, Refusal, VerifiedBearer};
use crate::transport::http::{Admission, Admit, Arrival};

/// How long a client is asked to wait when the issuer's keys are out of reach.
const KEYS_RETRY_SECONDS: u64 = 5;

/// Bearer tokens checked at the edge (see the module docs). With no tokens and no OAuth every
/// request is let in (HTTP callers are anonymous).
#[derive(Clone, Debug)]
pub struct TokenAdmission {
    tokens: Tokens,
    oauth: Option<TokenValidator>,
    audit: Option<AuditLayer>,
}

impl TokenAdmission {
    /// `audit`: where refusals are recorded (`None`: audit is off).
    pub fn new(tokens: Tokens, audit: Option<AuditLayer>) -> Self {
        Self {
            tokens,
            oauth: None,
            audit,
        }
    }

    /// Also accepts the access tokens `validator` verifies.
    pub fn with_oauth(mut self, validator: Option<TokenValidator>) -> Self {
        self.oauth = validator;
        self
    }

    fn refuse(&self, arrival: &Arrival<'_>, refusal: Refusal) -> Admit {
        record(self.audit.as_ref(), arrival.peer, arrival.version, &refusal);
        Admit::Refused(refusal)
    }
}

fn record(
    audit: Option<&AuditLayer>,
    peer: Option<SocketAddr>,
    version: Option<ProtocolVersion>,
    refusal: &Refusal,
) {
    if let Some(audit) = audit {
        audit.around_ref().record_refusal(peer, version, refusal);
    }
}

impl Admission for TokenAdmission {
    fn admit(&self, arrival: &Arrival<'_>) -> Admit {
        let Some(validator) = &self.oauth else {
            if self.tokens.is_empty() {
                return Admit::In;
            }
            return match self.tokens.check(arrival.credential) {
                Ok(_) => Admit::In,
                Err(refusal) => self.refuse(arrival, refusal),
            };
        };
        let token = match arrival.credential {
            Some(Credential::Bearer(token)) => token,
            // Made by in-process code, never read from a header: trusted as the embedder's.
            Some(Credential::Verified(_)) => return Admit::In,
            None => {
                let refusal = missing_token(validator, !self.tokens.is_empty());
                return self.refuse(arrival, refusal);
            }
            other => {
                // The static check's words for a header that holds no bearer token.
                let message = match self.tokens.check(other) {
                    Ok(_) => return Admit::In,
                    Err(refusal) => refusal.message().to_owned(),
                };
                let challenge = validator.challenge(None).www_authenticate;
                let refusal = match challenge {
                    Some(challenge) => Refusal::unauthorized_with_challenge(message, challenge),
                    None => Refusal::unauthorized(message),
                };
                return self.refuse(arrival, refusal);
            }
        };
        if self.tokens.static_token(token).is_some() {
            return Admit::In;
        }
        let validator = validator.clone();
        let token = token.clone();
        let audit = self.audit.clone();
        let (peer, version) = (arrival.peer, arrival.version);
        Admit::Check(Box::pin(async move {
            match validator.validate(token.expose()).await {
                Ok(verified) => Ok(Credential::Verified(VerifiedBearer::new(
                    verified.identity().as_str().to_owned(),
                    Arc::new(Scopes {
                        validator,
                        token: verified,
                    }),
                ))),
                Err(error) => {
                    let refusal = refused_token(&validator, &error);
                    record(audit.as_ref(), peer, version, &refusal);
                    Err(refusal)
                }
            }
        }))
    }
}

/// 401 for a request without a token, saying where to get one.
fn missing_token(validator: &TokenValidator, static_tokens: bool) -> Refusal {
    let alternative = if static_tokens {
        ", or one of the server's static tokens"
    } else {
        ""
    };
    let message = format!(
        "Unauthorized: this server needs a bearer token: an access token from {} for the \
         resource {} (its metadata is at the WWW-Authenticate header's resource_metadata){alternative}. \
         Send Authorization: Bearer <token> with every request.",
        validator.issuer(),
        validator.resource()
    );
    let challenge = validator.challenge(None);
    match challenge.www_authenticate {
        Some(challenge) => Refusal::unauthorized_with_challenge(message, challenge),
        None => Refusal::unauthorized(message),
    }
}

/// The refusal of a token that is no static token and failed the OAuth checks.
fn refused_token(validator: &TokenValidator, error: &TokenError) -> Refusal {
    let answer = validator.challenge(Some(error));
    match error.kind() {
        RefusalKind::Unavailable => {
            Refusal::unavailable(KEYS_RETRY_SECONDS, format!("Service Unavailable: {error}"))
        }
        RefusalKind::InsufficientScope => Refusal::insufficient_scope(
            format!("Forbidden: {error}"),
            answer.www_authenticate.unwrap_or_default(),
        ),
        RefusalKind::InvalidToken => {
            let message = format!("Unauthorized: {error}.");
            match answer.www_authenticate {
                Some(challenge) => Refusal::unauthorized_with_challenge(message, challenge),
                None => Refusal::unauthorized(message),
            }
        }
    }
}

/// What a verified access token allows: its scopes, asked of the validator's policy.
struct Scopes {
    validator: TokenValidator,
    token: VerifiedToken,
}

impl Grants for Scopes {
    fn allows(&self, operation: &str) -> Result<(), Refusal> {
        self.validator
            .authorize(&self.token, operation)
            .map_err(|error| refused_token(&self.validator, &error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::BearerToken;

    fn with(credential: Option<&Credential>) -> Arrival<'_> {
        Arrival {
            credential,
            ..Arrival::default()
        }
    }

    #[tokio::test]
    async fn only_a_configured_token_is_let_in() {
        let open = TokenAdmission::new(Tokens::default(), None);
        assert!(matches!(open.admit(&with(None)), Admit::In));
        let guarded = TokenAdmission::new(Tokens::default().with_token("ci", "s3cret"), None);
        let bearer = |t: &str| Credential::Bearer(BearerToken::new(t));
        assert!(matches!(
            guarded.admit(&with(Some(&bearer("s3cret")))),
            Admit::In
        ));
        for credential in [None, Some(bearer("nope")), Some(Credential::OtherScheme)] {
            let refused = guarded
                .admit(&with(credential.as_ref()))
                .decide()
                .await
                .unwrap_err();
            assert!(
                matches!(refused, Refusal::Unauthorized { .. }),
                "{refused:?}"
            );
            assert_eq!(refused.challenge(), Some("Bearer"));
        }
    }

    #[tokio::test]
    async fn with_oauth_a_static_token_still_passes_and_the_rest_is_challenged() {
        let validator = TokenValidator::new(crate::oauth::OAuthSettings::new(
            "https://auth.example.com",
            "https://mcp.example.com/mcp",
        ))
        .unwrap();
        let admission = TokenAdmission::new(Tokens::default().with_token("ci", "s3cret"), None)
            .with_oauth(Some(validator));
        let bearer = |t: &str| Credential::Bearer(BearerToken::new(t));
        assert!(matches!(
            admission.admit(&with(Some(&bearer("s3cret")))),
            Admit::In
        ));
        let metadata = "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\"";
        let missing = admission.admit(&with(None)).decide().await.unwrap_err();
        assert!(
            missing.challenge().unwrap().contains(metadata),
            "{missing:?}"
        );
        assert!(missing.message().contains("static tokens"), "{missing:?}");
        // Not a JWT: refused before any key is fetched (the issuer does not exist).
        let wrong = admission
            .admit(&with(Some(&bearer("nope"))))
            .decide()
            .await
            .unwrap_err();
        let challenge = wrong.challenge().unwrap();
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\""),
            "{challenge}"
        );
        assert!(challenge.contains(metadata), "{challenge}");
        assert!(!wrong.message().contains("nope"));
    }
}
