//! Bearer-token authentication and caller identity.
//!
//! Tokens are configured as `{name, sha256}` pairs: the SHA-256 of the token (print it with
//! `agent-mcp hash-token`), never the token itself. The layer decides who is calling and puts
//! it into `req.ctx.identity`, where every inner layer and the service see it; tasks and
//! sessions belong to that identity. It also sets [`McpResponse::identity`] on the way out, so
//! outer layers (the audit log) learn who called from the response.
//!
//! | transport | tokens configured | identity |
//! |---|---|---|
//! | stdio | any | `stdio` (the trusted local user) |
//! | HTTP | none | `None`: anonymous; every anonymous caller shares one owner |
//! | HTTP | some | the token's name; a missing or unknown token is refused |
//! | HTTP | OAuth on ([`Tokens::accept_verified`]) | a [`Credential::Verified`]'s identity (`oauth:<issuer>#<sub>`), if it allows the operation |
//! | in-process | any | left as the embedding application set it |
//!
//! The layer never sees a raw header: the HTTP edge reads the `Authorization` header once into
//! the typed [`RequestContext::credential`](crate::plugin::RequestContext::credential), and
//! that is what is checked here.
//!
//! With OAuth on, the edge's admission check tries a bearer token as a static token first (the
//! hash compare below) and otherwise as an OAuth access token, which it verifies against the
//! issuer's keys before the body is read; a token that passes travels on as
//! [`Credential::Verified`]: the caller identity and what its scopes allow. Only here, once the
//! request's operation is known (the tool's name for `tools/call`, else the method's), is the
//! scope asked: a token without the scope the operation needs is refused with
//! [`Refusal::InsufficientScope`] (HTTP 403, in both eras). A raw bearer token that is no
//! static token is refused: only the edge verifies access tokens.
//!
//! A refused request never reaches the inner service. It gets
//! [`Refusal::Unauthorized`], whose message says what to send (it never echoes the token):
//! the JSON-RPC error `-32001` on every transport, which the HTTP edge sends as
//! `401 Unauthorized` with `WWW-Authenticate: Bearer`. The presented token's SHA-256 is compared
//! with every configured hash in constant time (`subtle`), without stopping at a match.
//!
//! ```
//! use agent_mcp_layers::auth::{AuthLayer, Tokens};
//! use agent_mcp_layers::plugin::*;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut svc = ServiceBuilder::new()
//!     .layer(AuthLayer::new(Tokens::default().with_token("ci", "s3cret")))
//!     .service_fn(|req: McpRequest| async move {
//!         let who = req.ctx.identity.clone().unwrap_or_default();
//!         Ok::<_, std::convert::Infallible>(req.result(McpResult::tool_text(who, false)))
//!     });
//! let call = |authorization: Option<&str>| {
//!     let mut ctx = RequestContext::new(
//!         ProtocolVersion::V2026_07_28,
//!         Transport::Http { peer: None },
//!     );
//!     // What the HTTP edge does with the `Authorization` header.
//!     ctx.credential = authorization
//!         .and_then(|v| Credential::from_authorization(&v.parse().unwrap()));
//!     McpRequest::new(Some(RequestId::Number(1)), "tools/list", Default::default(), ctx)
//! };
//! let ok = svc.ready().await.unwrap().call(call(Some("Bearer s3cret"))).await.unwrap();
//! let Payload::Result(result) = &ok.payload else { panic!() };
//! assert_eq!(result.first_text(), Some("ci"));
//!
//! let refused = svc.ready().await.unwrap().call(call(None)).await.unwrap();
//! assert!(matches!(refused.refusal(), Some(Refusal::Unauthorized { .. })));
//! assert_eq!(refused.outcome(), Outcome::Unauthorized);
//! # }
//! ```

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::plugin::{
    Around, BearerToken, Credential, Finish, McpRequest, McpResponse, Method, Refusal, Transport,
    Wrap, WrapLayer,
};

/// JSON-RPC error code of a request refused for want of a valid bearer token
/// ([`Refusal::Unauthorized`]).
pub const UNAUTHORIZED: i64 = crate::plugin::code::UNAUTHORIZED;

pub use crate::plugin::STDIO_IDENTITY;

/// SHA-256 of `token` as 64 lowercase hex digits (what `auth.tokens[].sha256` holds).
pub fn sha256_hex(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

/// One accepted token: a name and the SHA-256 of the token.
#[derive(Clone)]
struct Token {
    name: String,
    sha256: [u8; 32],
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The hash is not the token, but there is no reason to print it either.
        f.debug_struct("Token")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The auth layer's configuration: the accepted bearer tokens, each by name and SHA-256, and
/// whether credentials the edge verified (OAuth access tokens) are accepted (neither: HTTP
/// callers stay anonymous). Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    tokens: Arc<[Token]>,
    verified: bool,
}

impl Tokens {
    /// Accepts a token by its SHA-256.
    pub fn with_hash(self, name: impl Into<String>, sha256: [u8; 32]) -> Self {
        let mut tokens = self.tokens.to_vec();
        tokens.push(Token {
            name: name.into(),
            sha256,
        });
        Self {
            tokens: tokens.into(),
            verified: self.verified,
        }
    }

    /// Also accepts a [`Credential::Verified`] (what the HTTP edge makes of an OAuth access
    /// token it verified), for what it allows. HTTP callers need a credential from then on,
    /// even with no static token.
    pub fn accept_verified(mut self) -> Self {
        self.verified = true;
        self
    }

    /// Whether HTTP callers may go without a credential (no token, no OAuth).
    pub fn is_open(&self) -> bool {
        self.tokens.is_empty() && !self.verified
    }

    /// Accepts a token by its SHA-256 written as 64 hex digits (`auth.tokens[].sha256`); an
    /// entry that is not (which config validation already refuses) is left out and logged.
    pub fn with_hex_hash(self, name: &str, sha256_hex: &str) -> Self {
        match parse_hex32(sha256_hex) {
            Some(hash) => self.with_hash(name, hash),
            None => {
                tracing::error!(
                    name = %name,
                    "auth.tokens: sha256 is not 64 hex digits; this token is not accepted"
                );
                self
            }
        }
    }

    /// Accepts a plain token (hashed here; for tests and embedding).
    pub fn with_token(self, name: impl Into<String>, token: &str) -> Self {
        self.with_hash(name, Sha256::digest(token.as_bytes()).into())
    }

    /// How many static tokens are accepted.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no static token is accepted (see [`Tokens::is_open`] for OAuth).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// Applies [`Auth`] with its [`Tokens`].
pub type AuthLayer = WrapLayer<Tokens>;

/// Sets `req.ctx.identity` from the transport and the bearer token, or refuses the request
/// with `401` (see the module docs).
pub type Auth<S> = Wrap<S, Tokens>;

impl Tokens {
    /// The identity of an HTTP caller presenting `credential` (the token's name), or the
    /// [`Refusal::Unauthorized`] the layer would answer. What the HTTP edge asks before it
    /// reads a body, so a request without a valid token costs only its headers.
    pub fn check<'a>(&'a self, credential: Option<&'a Credential>) -> Result<&'a str, Refusal> {
        self.authenticate(credential)
            .map_err(|why| Refusal::unauthorized(why.message()))
    }

    /// Whether `token` is one of the static tokens (its name), compared in constant time.
    pub fn static_token(&self, token: &BearerToken) -> Option<&str> {
        let presented: [u8; 32] = Sha256::digest(token.expose().as_bytes()).into();
        // Look at every token whatever matches, so timing says nothing about which did.
        let mut found = None;
        for candidate in self.tokens.iter() {
            let equal = bool::from(candidate.sha256[..].ct_eq(&presented[..]));
            if equal && found.is_none() {
                found = Some(candidate.name.as_str());
            }
        }
        found
    }

    /// The identity of an HTTP caller presenting `credential`, or why it is refused.
    fn authenticate<'a>(&'a self, credential: Option<&'a Credential>) -> Result<&'a str, Why> {
        match credential {
            None => Err(Why::Missing),
            Some(Credential::OtherScheme) => Err(Why::WrongScheme),
            Some(Credential::Unreadable) => Err(Why::WrongToken),
            Some(Credential::Verified(verified)) if self.verified => Ok(verified.identity()),
            Some(Credential::Verified(_)) => Err(Why::WrongToken),
            Some(Credential::Bearer(token)) => self.static_token(token).ok_or(Why::WrongToken),
        }
    }
}

/// Why a caller is refused; each has its own advice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Missing,
    WrongScheme,
    WrongToken,
}

impl Why {
    fn message(self) -> &'static str {
        match self {
            Why::Missing => {
                "Unauthorized: this server needs a bearer token. Send the header \
                 Authorization: Bearer <token> with every request; ask the server's operator \
                 for a token."
            }
            Why::WrongScheme => {
                "Unauthorized: the Authorization header must use the Bearer scheme. Send \
                 Authorization: Bearer <token>."
            }
            Why::WrongToken => {
                "Unauthorized: the bearer token is not accepted. Check that you send the whole \
                 token, or ask the server's operator for a new one."
            }
        }
    }
}

/// What a request asks to do, as scopes name it: the tool's name for `tools/call`, else the
/// method's.
fn operation(req: &McpRequest) -> &str {
    match (&req.method, req.tool_name()) {
        (Method::ToolsCall, Some(tool)) => tool,
        (method, _) => method.as_str(),
    }
}

fn unauthorized(req: &McpRequest, why: Why) -> McpResponse {
    req.refuse(Refusal::unauthorized(why.message()))
}

impl Around for Tokens {
    type Pending = Caller;

    fn before(&self, req: &mut McpRequest) -> Result<Caller, McpResponse> {
        match req.ctx.transport {
            Transport::Stdio => req.ctx.identity = Some(STDIO_IDENTITY.to_owned()),
            Transport::Http { .. } if !self.is_open() => {
                match self.authenticate(req.ctx.credential.as_ref()) {
                    Ok(name) => req.ctx.identity = Some(name.to_owned()),
                    Err(why) => return Err(unauthorized(req, why)),
                }
                if let Some(Credential::Verified(verified)) = &req.ctx.credential
                    && let Err(refusal) = verified.allows(operation(req))
                {
                    // Who was refused is known: the audit line names them.
                    let mut refused = req.refuse(refusal);
                    refused.identity = req.ctx.identity.clone();
                    return Err(refused);
                }
            }
            Transport::Http { .. } | Transport::InProcess => {}
        }
        // The identity inner layers see is the one outer layers read off the response.
        Ok(Caller(req.ctx.identity.clone()))
    }
}

/// Who the caller turned out to be, set on the response ([`McpResponse::identity`]) for the
/// layers outside this one.
#[derive(Debug)]
pub struct Caller(Option<String>);

impl Finish for Caller {
    fn finish(self, response: &mut McpResponse) {
        if let Some(identity) = self.0 {
            response.identity = Some(identity);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::plugin::{McpResult, Payload, ProtocolVersion, RequestContext, RequestId};
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    const TOKEN_A: &str = "token-a-0123456789";

    fn layer() -> AuthLayer {
        AuthLayer::new(
            Tokens::default()
                .with_hex_hash("alice", &sha256_hex(TOKEN_A))
                .with_hex_hash("bob", &sha256_hex("token-b").to_uppercase())
                .with_hex_hash("broken", "not hex"),
        )
    }

    fn request(transport: Transport, authorization: Option<&str>) -> McpRequest {
        let mut ctx = RequestContext::new(ProtocolVersion::V2026_07_28, transport);
        ctx.credential = authorization
            .and_then(|v| Credential::from_authorization(&http::HeaderValue::from_str(v).unwrap()));
        McpRequest::from(agent_mcp_plugin::protocol::RequestParts {
            id: Some(RequestId::Number(9)),
            method: "tools/list".into(),
            params: Default::default(),
            ctx,
            call: None,
        })
    }

    /// Answers with the identity it saw (or `-` for none).
    async fn call(layer: AuthLayer, req: McpRequest) -> McpResponse {
        let svc =
            ServiceBuilder::new()
                .layer(layer)
                .service(service_fn(|req: McpRequest| async move {
                    let who = req.ctx.identity.clone().unwrap_or_else(|| "-".into());
                    Ok::<_, Infallible>(req.result(McpResult::tool_text(who, false)))
                }));
        let Ok(response) = svc.oneshot(req).await;
        response
    }

    fn identity_of(response: &McpResponse) -> Option<String> {
        match &response.payload {
            Payload::Result(r) => r.first_text().map(str::to_owned),
            _ => None,
        }
    }

    fn http() -> Transport {
        Transport::Http { peer: None }
    }

    #[test]
    fn hash_token_is_lowercase_sha256_hex() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            parse_hex32(&sha256_hex("abc")),
            Some(Sha256::digest(b"abc").into())
        );
        assert_eq!(parse_hex32("zz"), None);
    }

    #[tokio::test]
    async fn a_valid_token_names_the_caller() {
        let r = call(layer(), request(http(), Some(&format!("Bearer {TOKEN_A}")))).await;
        assert_eq!(identity_of(&r).as_deref(), Some("alice"));
        let r = call(layer(), request(http(), Some("bearer   token-b "))).await;
        assert_eq!(identity_of(&r).as_deref(), Some("bob"));
    }

    #[tokio::test]
    async fn missing_wrong_scheme_and_wrong_token_are_refused_as_unauthorized() {
        let cases = [
            (None, Why::Missing),
            (Some("Bearer "), Why::Missing),
            (Some("Basic dXNlcjpwYXNz"), Why::WrongScheme),
            (Some(TOKEN_A), Why::WrongScheme),
            (Some("Bearer token-a"), Why::WrongToken),
        ];
        for (header, why) in cases {
            let r = call(layer(), request(http(), header)).await;
            assert_eq!(r.id, Some(RequestId::Number(9)));
            let Payload::Refused(refusal) = &r.payload else {
                panic!("{header:?}: expected a refusal, got {:?}", r.payload);
            };
            assert_eq!(refusal, &Refusal::unauthorized(why.message()), "{header:?}");
            assert_eq!(r.error_code(), Some(UNAUTHORIZED));
            assert!(!refusal.message().contains("token-a"));
        }
        // An Authorization value that is not visible ASCII names no token.
        let mut req = request(http(), None);
        req.ctx.credential = Some(Credential::Unreadable);
        let r = call(layer(), req).await;
        assert_eq!(
            r.refusal(),
            Some(&Refusal::unauthorized(Why::WrongToken.message()))
        );
    }

    #[tokio::test]
    async fn stdio_is_stdio_and_http_without_tokens_is_anonymous() {
        let r = call(layer(), request(Transport::Stdio, None)).await;
        assert_eq!(identity_of(&r).as_deref(), Some("stdio"));
        let r = call(AuthLayer::default(), request(http(), None)).await;
        assert_eq!(identity_of(&r).as_deref(), Some("-"));
        let mut req = request(Transport::InProcess, None);
        req.ctx.identity = Some("embedder".into());
        let r = call(layer(), req).await;
        assert_eq!(identity_of(&r).as_deref(), Some("embedder"));
    }

    #[tokio::test]
    async fn the_response_names_the_caller_auth_established() {
        let r = call(layer(), request(http(), Some("Bearer token-b"))).await;
        assert_eq!(r.identity.as_deref(), Some("bob"));
        let r = call(layer(), request(Transport::Stdio, None)).await;
        assert_eq!(r.identity.as_deref(), Some("stdio"));
        let refused = call(layer(), request(http(), Some("Bearer nope"))).await;
        assert_eq!(refused.identity, None);
        let anonymous = call(AuthLayer::default(), request(http(), None)).await;
        assert_eq!(anonymous.identity, None);
        let mut req = request(Transport::InProcess, None);
        req.ctx.identity = Some("embedder".into());
        assert_eq!(
            call(layer(), req).await.identity.as_deref(),
            Some("embedder")
        );
    }

    /// Allows only `agent_status`.
    struct StatusOnly;

    impl crate::plugin::Grants for StatusOnly {
        fn allows(&self, operation: &str) -> Result<(), Refusal> {
            match operation {
                "agent_status" | "tools/list" => Ok(()),
                _ => Err(Refusal::insufficient_scope(
                    format!("Forbidden: {operation} needs run"),
                    "Bearer error=\"insufficient_scope\", scope=\"run\"",
                )),
            }
        }
    }

    fn verified_call(tool: &str) -> McpRequest {
        let mut req = request(http(), None);
        req.method = Method::ToolsCall;
        req.params = crate::plugin::Params::ToolsCall(crate::plugin::ToolsCallParams {
            name: Some(tool.into()),
            ..Default::default()
        });
        req.ctx.credential = Some(Credential::Verified(crate::plugin::VerifiedBearer::new(
            "oauth:https://as.example#bot",
            Arc::new(StatusOnly),
        )));
        req
    }

    #[tokio::test]
    async fn a_verified_credential_is_its_identity_for_what_it_allows() {
        let oauth = AuthLayer::new(Tokens::default().accept_verified());
        assert!(!oauth.around_ref().is_open());
        let r = call(oauth.clone(), verified_call("agent_status")).await;
        assert_eq!(
            identity_of(&r).as_deref(),
            Some("oauth:https://as.example#bot")
        );
        assert_eq!(r.identity.as_deref(), Some("oauth:https://as.example#bot"));
        // Not allowed: 403's refusal, naming who was refused for the audit line.
        let r = call(oauth.clone(), verified_call("agent_run")).await;
        assert!(
            matches!(r.refusal(), Some(Refusal::InsufficientScope { .. })),
            "{:?}",
            r.payload
        );
        assert_eq!(r.identity.as_deref(), Some("oauth:https://as.example#bot"));
        // Without OAuth on, a verified credential is no token of this layer's.
        let r = call(layer(), verified_call("agent_status")).await;
        assert!(matches!(r.refusal(), Some(Refusal::Unauthorized { .. })));
        // With OAuth on, a raw bearer that is no static token is refused: only the edge
        // verifies access tokens. A static token still passes.
        let both = AuthLayer::new(
            Tokens::default()
                .with_token("ci", TOKEN_A)
                .accept_verified(),
        );
        let r = call(
            both.clone(),
            request(http(), Some("Bearer eyJ.not.checked")),
        )
        .await;
        assert!(matches!(r.refusal(), Some(Refusal::Unauthorized { .. })));
        let r = call(both, request(http(), Some(&format!("Bearer {TOKEN_A}")))).await;
        assert_eq!(identity_of(&r).as_deref(), Some("ci"));
        // OAuth alone still needs a credential.
        let r = call(oauth, request(http(), None)).await;
        assert!(matches!(r.refusal(), Some(Refusal::Unauthorized { .. })));
    }

    #[test]
    fn debug_output_shows_names_only() {
        let text = format!("{:?}", layer());
        assert!(text.contains("alice"));
        assert!(!text.contains(&sha256_hex(TOKEN_A)[..16]));
    }
}
