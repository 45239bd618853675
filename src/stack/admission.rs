//! The HTTP edge's [`Admission`] check, composed from the auth layer's tokens and the audit
//! layer: a request without a valid bearer token is refused from its headers, before the edge
//! reads its body, and the refusal is recorded as the auth layer's would be.

use crate::layers::audit::AuditLayer;
use crate::layers::auth::Tokens;
use crate::protocol::Refusal;
use crate::transport::http::{Admission, Arrival};

/// Bearer tokens checked at the edge (see the module docs). With no tokens every request is
/// let in (HTTP callers are anonymous).
#[derive(Clone, Debug)]
pub struct TokenAdmission {
    tokens: Tokens,
    audit: Option<AuditLayer>,
}

impl TokenAdmission {
    /// `audit`: where refusals are recorded (`None`: audit is off).
    pub fn new(tokens: Tokens, audit: Option<AuditLayer>) -> Self {
        Self { tokens, audit }
    }
}

impl Admission for TokenAdmission {
    fn admit(&self, arrival: &Arrival<'_>) -> Result<(), Refusal> {
        if self.tokens.is_empty() {
            return Ok(());
        }
        let refusal = match self.tokens.check(arrival.credential) {
            Ok(_) => return Ok(()),
            Err(refusal) => refusal,
        };
        if let Some(audit) = &self.audit {
            audit
                .around_ref()
                .record_refusal(arrival.peer, arrival.version, &refusal);
        }
        Err(refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{BearerToken, Credential};

    #[test]
    fn only_a_configured_token_is_let_in() {
        fn with(credential: Option<&Credential>) -> Arrival<'_> {
            Arrival {
                credential,
                ..Arrival::default()
            }
        }
        let open = TokenAdmission::new(Tokens::default(), None);
        assert!(open.admit(&with(None)).is_ok());
        let guarded = TokenAdmission::new(Tokens::default().with_token("ci", "s3cret"), None);
        let bearer = |t: &str| Credential::Bearer(BearerToken::new(t));
        assert!(guarded.admit(&with(Some(&bearer("s3cret")))).is_ok());
        for credential in [None, Some(bearer("nope")), Some(Credential::OtherScheme)] {
            let refused = guarded.admit(&with(credential.as_ref())).unwrap_err();
            assert!(
                matches!(refused, Refusal::Unauthorized { .. }),
                "{refused:?}"
            );
        }
    }
}
