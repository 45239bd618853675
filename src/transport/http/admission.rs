//! [`Admission`]: a check the HTTP edge makes from the headers alone, before it reads a byte
//! of the body.
//!
//! With bearer tokens configured, a request without a valid one must cost the server nothing
//! more than its headers: no body buffered, no parse, no queue. The edge reads the
//! `Authorization` header into a [`Credential`] anyway (for the auth layer), so it asks an
//! `Admission` first and answers a [`Refusal`] at once, before the body. The composition root
//! supplies the check (`src/stack/token_admission.rs` asks the auth layer's tokens and records the
//! refusal in the audit log and the metrics); the edge itself knows nothing of tokens.
//!
//! A check that needs I/O (an OAuth access token, whose issuer's keys may have to be fetched)
//! answers [`Admit::Check`]: a future the edge awaits, still before the body, which resolves
//! to the credential the request carries on ([`Credential::Verified`]) or to the refusal.
//!
//! ```
//! use agent_mcp::protocol::{Credential, Refusal};
//! use agent_mcp::transport::http::{Admission, Admit, Arrival};
//!
//! /// Lets in requests that present any bearer token (a real check compares it).
//! #[derive(Debug)]
//! struct AnyBearer;
//!
//! impl Admission for AnyBearer {
//!     fn admit(&self, arrival: &Arrival<'_>) -> Admit {
//!         match arrival.credential {
//!             Some(Credential::Bearer(_)) => Admit::In,
//!             _ => Admit::Refused(Refusal::unauthorized(
//!                 "Unauthorized: send Authorization: Bearer <token>.",
//!             )),
//!         }
//!     }
//! }
//! assert!(matches!(AnyBearer.admit(&Arrival::default()), Admit::Refused(_)));
//! ```

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use crate::protocol::{Credential, ProtocolVersion, Refusal};

/// What is known of a request from its headers, before its body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Arrival<'a> {
    /// The `Authorization` header, read.
    pub credential: Option<&'a Credential>,
    /// The TCP peer, when the server knows it.
    pub peer: Option<SocketAddr>,
    /// The `MCP-Protocol-Version` header, when it names a version this server speaks.
    pub version: Option<ProtocolVersion>,
}

/// The future of [`Admit::Check`].
pub type AdmitFuture = Pin<Box<dyn Future<Output = Result<Credential, Refusal>> + Send>>;

/// An [`Admission`]'s verdict.
pub enum Admit {
    /// Let in, with the credential as presented.
    In,
    /// Answered with this refusal (401 for [`Refusal::Unauthorized`]) before the body is read.
    Refused(Refusal),
    /// Decided once this resolves (still before the body): let in carrying the credential it
    /// gives (in place of the presented one), or refused.
    Check(AdmitFuture),
}

impl Admit {
    /// The verdict, awaiting a [`Admit::Check`]: `Ok(Some(c))` replaces the presented
    /// credential with `c`.
    pub async fn decide(self) -> Result<Option<Credential>, Refusal> {
        match self {
            Admit::In => Ok(None),
            Admit::Refused(refusal) => Err(refusal),
            Admit::Check(check) => check.await.map(Some),
        }
    }
}

impl Debug for Admit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Admit::In => f.write_str("In"),
            Admit::Refused(refusal) => f.debug_tuple("Refused").field(refusal).finish(),
            Admit::Check(_) => f.write_str("Check(..)"),
        }
    }
}

/// Decides from what a request's headers say whether the edge may read its body.
pub trait Admission: Send + Sync + Debug {
    /// [`Admit::Refused`] answers the request with the refusal before its body is read.
    fn admit(&self, arrival: &Arrival<'_>) -> Admit;
}
