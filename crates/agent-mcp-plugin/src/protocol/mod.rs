//! JSON-RPC 2.0 and MCP wire types for both protocol eras.
//!
//! - [`jsonrpc`]: the envelope (ids and messages).
//! - [`error`]: the JSON-RPC error object and the codes on the wire.
//! - [`era`]: which era and version a message speaks, and the modern `_meta` rules.
//! - [`message`]: [`McpRequest`]/[`McpResponse`], the types the tower stack carries, and the one
//!   place where results are shaped per era.
//! - [`method`]: [`Method`], the JSON-RPC method parsed once where a message arrives.
//! - [`params`]: [`Params`], the typed `params` of the methods this server serves.
//! - [`outcome`]: [`Outcome`], how a request ended, shared by the audit log and the metrics.
//! - [`refusal`]: [`Refusal`], why a layer turned a request away; each transport maps it.
//! - [`credential`]: [`Credential`], what a caller presented to prove who it is, read once at
//!   the edge so that no layer sees raw headers.

pub mod credential;
pub mod era;
pub mod error;
mod json_out;
pub mod jsonrpc;
pub mod message;
pub mod method;
pub mod outcome;
pub mod params;
pub mod refusal;
pub mod stream;

pub use credential::{BearerToken, Credential, Grants, VerifiedBearer};
pub use era::{
    Classified, Era, MetaFields, ProtocolVersion, VersionHints, classify, classify_meta,
};
pub use jsonrpc::{ErrorObject, Incoming, MetaRead, ReadParams, RequestId, ToolsCallRead, code};
pub use message::{
    CacheHint, McpRequest, McpResponse, McpResult, ParsedCall, Payload, RequestContext,
    RequestParts, ResponseIds, ResultBody, ResultKind, STDIO_IDENTITY, Transport, invalid_args,
    server_info,
};
pub use method::Method;
pub use outcome::Outcome;
pub use params::{
    InitializeParams, ListenParams, Params, SetLevelParams, TaskParams, TaskUpdateParams,
    ToolsCallParams,
};
pub use refusal::Refusal;
pub use stream::{MessageStream, StreamSlot};
