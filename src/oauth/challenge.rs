//! `WWW-Authenticate` challenges (RFC 6750 §3, RFC 9728 §5.1) for the three answers an OAuth
//! resource server gives a request it refuses:
//!
//! | answer | when | challenge |
//! |---|---|---|
//! | `401` | no token | `Bearer resource_metadata="…", scope="…"` |
//! | `401` | a token that failed a check | `Bearer error="invalid_token", error_description="…", resource_metadata="…", scope="…"` |
//! | `403` | a valid token without the scope | `Bearer error="insufficient_scope", scope="…", resource_metadata="…", error_description="…"` |
//!
//! `resource_metadata` is where the client finds the authorization server; `scope`, what to
//! ask it for: on a `401` every scope of the policy (a client credentials client then gets
//! one token that does everything it is allowed), on a `403` the scope the operation needs.
//! An empty scope list leaves `scope` out.
//!
//! ```
//! use agent_mcp::oauth::challenge;
//!
//! let metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
//! assert_eq!(
//!     challenge::token_required(metadata, &["agent:run", "agent:status"]),
//!     "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", \
//!      scope=\"agent:run agent:status\""
//! );
//! assert_eq!(
//!     challenge::insufficient_scope(metadata, &["agent:run"], "agent_run needs agent:run"),
//!     "Bearer error=\"insufficient_scope\", scope=\"agent:run\", \
//!      resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", \
//!      error_description=\"agent_run needs agent:run\""
//! );
//! ```
//!
//! Every value is sent as an RFC 7230 quoted string holding only what RFC 6750 allows in
//! one (`%x20-21 / %x23-5B / %x5D-7E`): `"` becomes `'`, `\` and anything not visible ASCII
//! are dropped, so a description can never end the string early or break the header.

/// `401` for a request that carried no token.
pub fn token_required(resource_metadata: &str, scopes: &[&str]) -> String {
    bearer(&[("resource_metadata", resource_metadata)], scopes, &[])
}

/// `401` for a token that failed a check; `description` says which.
pub fn invalid_token(resource_metadata: &str, scopes: &[&str], description: &str) -> String {
    let before = [
        ("error", "invalid_token"),
        ("error_description", description),
        ("resource_metadata", resource_metadata),
    ];
    bearer(&before, scopes, &[])
}

/// `403` for a valid token that lacks the scope `scopes` an operation needs.
pub fn insufficient_scope(resource_metadata: &str, scopes: &[&str], description: &str) -> String {
    let after = [
        ("resource_metadata", resource_metadata),
        ("error_description", description),
    ];
    bearer(&[("error", "insufficient_scope")], scopes, &after)
}

/// A `Bearer` challenge: the parameters `before`, then `scope` (left out when there are no
/// `scopes`), then the parameters `after`.
fn bearer(before: &[(&str, &str)], scopes: &[&str], after: &[(&str, &str)]) -> String {
    let mut out = String::from("Bearer ");
    for (name, value) in before {
        param(&mut out, name, value);
    }
    if !scopes.is_empty() {
        param(&mut out, "scope", &scopes.join(" "));
    }
    for (name, value) in after {
        param(&mut out, name, value);
    }
    out
}

/// Appends `, name="value"` (no comma first), `value` made safe for a quoted string.
fn param(out: &mut String, name: &str, value: &str) {
    if !out.ends_with(' ') {
        out.push_str(", ");
    }
    out.push_str(name);
    out.push_str("=\"");
    for c in value.chars() {
        match c {
            '"' => out.push('\''),
            '\x20'..='\x21' | '\x23'..='\x5b' | '\x5d'..='\x7e' => out.push(c),
            _ => {}
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp";

    #[test]
    fn the_three_challenges_exactly() {
        assert_eq!(
            token_required(META, &["agent:run", "agent:status"]),
            format!("Bearer resource_metadata=\"{META}\", scope=\"agent:run agent:status\"")
        );
        assert_eq!(
            invalid_token(META, &["agent:run"], "the token has expired; get a new one"),
            format!(
                "Bearer error=\"invalid_token\", error_description=\"the token has expired; get \
                 a new one\", resource_metadata=\"{META}\", scope=\"agent:run\""
            )
        );
        assert_eq!(
            insufficient_scope(META, &["agent:run"], "agent_run needs the scope agent:run"),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"agent:run\", \
                 resource_metadata=\"{META}\", error_description=\"agent_run needs the scope \
                 agent:run\""
            )
        );
    }

    #[test]
    fn no_scopes_no_scope_parameter() {
        assert_eq!(
            token_required(META, &[]),
            format!("Bearer resource_metadata=\"{META}\"")
        );
        assert!(!invalid_token(META, &[], "x").contains("scope="));
    }

    #[test]
    fn a_description_cannot_break_out_of_its_quotes_or_the_header() {
        let header = invalid_token(META, &[], "kid \"x\", error=\"none\"\r\nSet-Cookie: a\\b é");
        assert_eq!(
            header,
            format!(
                "Bearer error=\"invalid_token\", error_description=\"kid 'x', error='none'\
                 Set-Cookie: ab \", resource_metadata=\"{META}\""
            )
        );
        assert!(http::HeaderValue::from_str(&header).is_ok());
    }
}
