//! [`Admission`]: a check the HTTP edge makes from the headers alone, before it reads a byte
//! of the body.
//!
//! With bearer tokens configured, a request without a valid one must cost the server nothing
//! more than its headers: no body buffered, no parse, no queue. The edge reads the
//! `Authorization` header into a [`Credential`] anyway (for the auth layer), so it asks an
//! `Admission` first and answers a [`Refusal`] at once, before the body. The composition root
//! supplies the check (`src/stack/admission.rs` asks the auth layer's tokens and records the
//! refusal in the audit log and the metrics); the edge itself knows nothing of tokens.
//!
//! ```
//! use agent_mcp::protocol::{Credential, Refusal};
//! use agent_mcp::transport::http::{Admission, Arrival};
//!
//! /// Lets in requests that present any bearer token (a real check compares it).
//! #[derive(Debug)]
//! struct AnyBearer;
//!
//! impl Admission for AnyBearer {
//!     fn admit(&self, arrival: &Arrival<'_>) -> Result<(), Refusal> {
//!         match arrival.credential {
//!             Some(Credential::Bearer(_)) => Ok(()),
//!             _ => Err(Refusal::unauthorized("Unauthorized: send Authorization: Bearer <token>.")),
//!         }
//!     }
//! }
//! assert!(AnyBearer.admit(&Arrival::default()).is_err());
//! ```

use std::fmt::Debug;
use std::net::SocketAddr;

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

/// Decides from what a request's headers say whether the edge may read its body.
pub trait Admission: Send + Sync + Debug {
    /// `Err` answers the request with the refusal (401 for [`Refusal::Unauthorized`]) before
    /// its body is read.
    fn admit(&self, arrival: &Arrival<'_>) -> Result<(), Refusal>;
}
