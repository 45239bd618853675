//! Who a request to the oversight routes comes from ([`Identify`]): the same bearer tokens and
//! OAuth access tokens as `/mcp`, checked by the same [`TokenAdmission`], named as the auth
//! layer names them (a static token's name; `oauth:<issuer>#<sub>`).

use std::sync::Arc;

use super::token_admission::TokenAdmission;
use crate::layers::auth::Tokens;
use crate::oversight::http::{Identify, IdentifyFuture};
use crate::protocol::Credential;
use crate::transport::http::{Admission, Arrival};

/// [`Identify`] from `auth.tokens` and `auth.oauth`.
#[derive(Clone, Debug)]
pub struct TokenIdentity {
    admission: Arc<TokenAdmission>,
    tokens: Arc<Tokens>,
}

impl TokenIdentity {
    pub fn new(admission: TokenAdmission, tokens: Tokens) -> Self {
        Self {
            admission: Arc::new(admission),
            tokens: Arc::new(tokens),
        }
    }
}

impl Identify for TokenIdentity {
    fn identify(&self, credential: Option<Credential>) -> IdentifyFuture {
        if self.tokens.is_open() {
            // No tokens and no OAuth: every HTTP caller is the anonymous one, as on `/mcp`.
            return Box::pin(async { Ok(None) });
        }
        let verdict = self.admission.admit(&Arrival {
            credential: credential.as_ref(),
            ..Default::default()
        });
        let tokens = self.tokens.clone();
        Box::pin(async move {
            let checked = verdict.decide().await?;
            let credential = checked.or(credential);
            tokens
                .check(credential.as_ref())
                .map(|name| Some(name.to_owned()))
        })
    }
}
