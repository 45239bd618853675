//! The checks that refuse a request before its body is read, each a small validator plugged
//! into tower-http's [`ValidateRequestHeaderLayer`](tower_http::validate_request::ValidateRequestHeaderLayer):
//! POST only, a loopback-or-listed Host and Origin, and a JSON content type.

use std::sync::Arc;

use http::header::{ALLOW, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderValue, Method, Request, StatusCode};
use tower_http::validate_request::ValidateRequest;

use super::{HttpResponse, HttpRules, transport_error};
use crate::protocol::code;

/// Only `POST` carries JSON-RPC here; anything else is 405 with `Allow: POST`.
#[derive(Clone, Copy, Debug)]
pub struct PostOnly;

impl<B> ValidateRequest<B> for PostOnly {
    type ResponseBody = super::HttpBody;

    fn validate(&mut self, req: &mut Request<B>) -> Result<(), HttpResponse> {
        if req.method() == Method::POST {
            return Ok(());
        }
        let mut resp = transport_error(
            StatusCode::METHOD_NOT_ALLOWED,
            code::TRANSPORT,
            format!(
                "Method Not Allowed: {} is not served here; send each JSON-RPC message as a POST",
                req.method()
            ),
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        Err(resp)
    }
}

/// DNS-rebinding guard: the Host (or the URI's authority) and any Origin must be loopback or
/// listed in [`HttpRules`]; otherwise 403.
#[derive(Clone, Debug)]
pub struct LoopbackOnly {
    rules: Arc<HttpRules>,
}

impl LoopbackOnly {
    pub fn new(rules: Arc<HttpRules>) -> Self {
        Self { rules }
    }
}

impl<B> ValidateRequest<B> for LoopbackOnly {
    type ResponseBody = super::HttpBody;

    fn validate(&mut self, req: &mut Request<B>) -> Result<(), HttpResponse> {
        check_host_and_origin(&self.rules, req)
    }
}

/// The DNS-rebinding guard of [`LoopbackOnly`] for any request: the operator endpoints
/// (`/healthz`, `/readyz`, `/metrics`) answer only what `/mcp` would, so a web page that
/// rebinds a name to 127.0.0.1 cannot read them either. 403 otherwise.
#[allow(clippy::result_large_err)] // the refusal is the response: it is sent, not passed on
pub fn check_host_and_origin<B>(rules: &HttpRules, req: &Request<B>) -> Result<(), HttpResponse> {
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    if let Some(host) = host
        && !rules.host_allowed(host)
    {
        return Err(transport_error(
            StatusCode::FORBIDDEN,
            code::TRANSPORT,
            format!(
                "Forbidden: Host \"{host}\" is not allowed; add it to http.allowed_hosts to serve it"
            ),
        ));
    }
    if let Some(origin) = req.headers().get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("<non-ASCII>");
        if !rules.origin_allowed(origin) {
            return Err(transport_error(
                StatusCode::FORBIDDEN,
                code::TRANSPORT,
                format!(
                    "Forbidden: Origin \"{origin}\" is not allowed; add it to http.allowed_origins to serve it"
                ),
            ));
        }
    }
    Ok(())
}

/// The body must be declared `application/json` (parameters such as `charset` allowed); else 415.
#[derive(Clone, Copy, Debug)]
pub struct JsonContentType;

impl<B> ValidateRequest<B> for JsonContentType {
    type ResponseBody = super::HttpBody;

    fn validate(&mut self, req: &mut Request<B>) -> Result<(), HttpResponse> {
        let content_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let mime = content_type.split(';').next().unwrap_or("").trim();
        if mime.eq_ignore_ascii_case("application/json") {
            return Ok(());
        }
        Err(transport_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::TRANSPORT,
            format!(
                "Unsupported Media Type: Content-Type is \"{content_type}\"; send Content-Type: application/json"
            ),
        ))
    }
}

impl HttpRules {
    pub(super) fn host_allowed(&self, host: &str) -> bool {
        let name = strip_port(host);
        is_loopback_name(name)
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    pub(super) fn origin_allowed(&self, origin: &str) -> bool {
        if self
            .allowed_origins
            .iter()
            .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
        {
            return true;
        }
        match origin.split_once("://") {
            Some((scheme, authority)) if scheme == "http" || scheme == "https" => {
                !authority.contains('/') && is_loopback_name(strip_port(authority))
            }
            _ => false,
        }
    }
}

fn strip_port(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // [::1]:8080 → [::1]
        return match rest.find(']') {
            Some(i) => &authority[..i + 2],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    }
}

fn is_loopback_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "[::1]"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_origins() {
        let rules = HttpRules::default();
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:3000",
            "[::1]",
        ] {
            assert!(rules.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:80",
            "127.0.0.2",
            "localhost.evil",
        ] {
            assert!(!rules.host_allowed(host), "{host}");
        }
        assert!(rules.origin_allowed("http://localhost:5173"));
        assert!(rules.origin_allowed("https://127.0.0.1"));
        assert!(!rules.origin_allowed("http://evil.example"));
        assert!(!rules.origin_allowed("null"));
        assert!(!rules.origin_allowed("http://localhost/x"));
        let rules = HttpRules {
            allowed_hosts: vec!["mcp.internal".into()],
            allowed_origins: vec!["https://ide.example".into()],
            ..HttpRules::default()
        };
        assert!(rules.host_allowed("mcp.internal:9000"));
        assert!(rules.origin_allowed("https://ide.example"));
    }
}
