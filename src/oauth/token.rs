//! [`VerifiedToken`]: what an access token that passed every check says, and the caller
//! [`Identity`] it stands for. Neither holds the token itself.
//!
//! The identity of a token is its issuer and its subject (`sub`; for the client credentials
//! grant, the client's id), written `oauth:<issuer>#<sub>`:
//!
//! ```
//! use agent_mcp::oauth::Identity;
//!
//! let who = Identity::new("https://auth.example.com", "ci-bot");
//! assert_eq!(who.as_str(), "oauth:https://auth.example.com#ci-bot");
//! assert_eq!((who.issuer(), who.subject()), ("https://auth.example.com", "ci-bot"));
//! ```
//!
//! That form cannot be mistaken for another caller: a static token's name is a plain name
//! (no `:`), and the issuer, an https URL without a fragment (RFC 8414), holds no `#`, so the
//! first `#` ends it and two (issuer, subject) pairs never write the same string. Tasks,
//! sessions, rate-limit budgets and audit lines belong to that string, as they belong to a
//! static token's name.

use std::collections::BTreeSet;
use std::fmt;

/// The caller a verified token stands for: `oauth:<issuer>#<subject>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    text: String,
    /// Where the subject starts in `text` (after the `#`).
    subject_at: usize,
}

impl Identity {
    /// What every OAuth identity starts with.
    pub const PREFIX: &'static str = "oauth:";

    /// The identity of `subject` at `issuer`.
    pub fn new(issuer: &str, subject: &str) -> Self {
        let text = format!("{}{issuer}#{subject}", Self::PREFIX);
        let subject_at = Self::PREFIX.len() + issuer.len() + 1;
        Self { text, subject_at }
    }

    /// The identity as tasks, sessions, limits and audit lines carry it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The issuer part.
    pub fn issuer(&self) -> &str {
        &self.text[Self::PREFIX.len()..self.subject_at - 1]
    }

    /// The subject part (`sub`).
    pub fn subject(&self) -> &str {
        &self.text[self.subject_at..]
    }

    /// The identity as an owned string.
    pub fn into_string(self) -> String {
        self.text
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

/// An access token that passed every check: who it stands for and what it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedToken {
    pub(super) identity: Identity,
    pub(super) client_id: Option<String>,
    pub(super) scopes: BTreeSet<String>,
    pub(super) expires_at: u64,
}

impl VerifiedToken {
    /// The caller.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The `client_id` claim, when the token has one (RFC 9068 §2.2).
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    /// The scopes granted (`scope`, or `scp`).
    pub fn scopes(&self) -> &BTreeSet<String> {
        &self.scopes
    }

    /// When the token expires (`exp`), in seconds since the Unix epoch.
    pub fn expires_at(&self) -> u64 {
        self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_parts_come_back_out() {
        let id = Identity::new("http://127.0.0.1:4000/tenant", "a#b:c");
        assert_eq!(id.as_str(), "oauth:http://127.0.0.1:4000/tenant#a#b:c");
        assert_eq!(id.issuer(), "http://127.0.0.1:4000/tenant");
        assert_eq!(id.subject(), "a#b:c");
        assert_eq!(id.to_string(), id.as_str());
        assert_eq!(format!("{id:?}"), format!("{:?}", id.as_str()));
    }

    #[test]
    fn two_clients_are_two_identities() {
        let a = Identity::new("https://a.example", "client-a");
        let b = Identity::new("https://a.example", "client-b");
        assert_ne!(a, b);
        assert_ne!(a, Identity::new("https://b.example", "client-a"));
        assert!(a.as_str().starts_with(Identity::PREFIX));
    }
}
