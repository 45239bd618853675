//! Reading a compact JWS before it is verified: its shape, the header fields that choose the
//! key (`alg`, `kid`) and say what it is (`typ`, `crit`), and the claimed issuer.
//!
//! Nothing read here is trusted: it only decides which key to verify with, and lets a token
//! that is plainly not ours (another issuer, `alg: none`, an HMAC, an encrypted or opaque
//! token) be refused with its own reason before any key is looked up or fetched. The
//! signature and every claim are then checked by `jsonwebtoken` against the issuer's key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use super::error::TokenError;

/// Larger tokens are refused unread: a JWT access token is a few KiB at most.
pub(super) const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The header fields the validator looks at.
#[derive(Debug, Deserialize)]
pub(super) struct Header {
    pub alg: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub typ: Option<String>,
    /// Extensions the token says a reader must understand (RFC 7515 §4.1.11): this server
    /// understands none, so a token with any is refused.
    #[serde(default)]
    pub crit: Option<serde_json::Value>,
}

/// The claims read before verification: only the issuer, to refuse another issuer's token
/// without a key lookup.
#[derive(Debug, Deserialize)]
struct Claims {
    #[serde(default)]
    iss: Option<serde_json::Value>,
}

/// A compact JWS, read but not verified.
#[derive(Debug)]
pub(super) struct Unverified {
    pub header: Header,
    /// The `iss` claim when it is a string; `Err` says what is wrong with it.
    pub issuer: Result<String, TokenError>,
}

/// Reads `token`'s header and claimed issuer.
pub(super) fn read(token: &str) -> Result<Unverified, TokenError> {
    let malformed = |why| TokenError::Malformed { why };
    if token.len() > MAX_TOKEN_BYTES {
        return Err(malformed("it is longer than 16 KiB"));
    }
    let parts: Vec<&str> = token.split('.').collect();
    match parts.len() {
        3 => {}
        5 => return Err(malformed("it is an encrypted JWT (JWE)")),
        _ => return Err(malformed("it is not three base64url parts joined by dots")),
    }
    if parts[0].is_empty() || parts[1].is_empty() {
        return Err(malformed("its header or claims part is empty"));
    }
    let header_json = URL_SAFE_NO_PAD
        .decode(parts[0])
        .map_err(|_| malformed("its header is not base64url"))?;
    let header: Header = serde_json::from_slice(&header_json)
        .map_err(|_| malformed("its header is not a JSON object with an alg"))?;
    let claims_json = URL_SAFE_NO_PAD
        .decode(parts[1])
        .map_err(|_| malformed("its claims are not base64url"))?;
    let claims: Claims = serde_json::from_slice(&claims_json)
        .map_err(|_| malformed("its claims are not a JSON object"))?;
    let issuer = match claims.iss {
        None => Err(TokenError::MissingClaim { claim: "iss" }),
        Some(serde_json::Value::String(iss)) => Ok(iss),
        Some(_) => Err(TokenError::BadClaim {
            claim: "iss",
            why: "is not a string",
        }),
    };
    Ok(Unverified { header, issuer })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    fn token(header: &str, claims: &str) -> String {
        format!("{}.{}.c2ln", b64(header), b64(claims))
    }

    #[test]
    fn reads_the_header_and_the_claimed_issuer() {
        let t = token(
            r#"{"alg":"RS256","kid":"k1","typ":"at+jwt"}"#,
            r#"{"iss":"https://a","sub":"x"}"#,
        );
        let u = read(&t).unwrap();
        assert_eq!(u.header.alg, "RS256");
        assert_eq!(u.header.kid.as_deref(), Some("k1"));
        assert_eq!(u.header.typ.as_deref(), Some("at+jwt"));
        assert!(u.header.crit.is_none());
        assert_eq!(u.issuer, Ok("https://a".to_owned()));
        // alg none reads fine here: refusing it is the validator's job, with its own reason.
        let none = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"iss":"x"}"#));
        assert_eq!(read(&none).unwrap().header.alg, "none");
    }

    #[test]
    fn issuer_problems_are_kept_for_later() {
        let u = read(&token(r#"{"alg":"ES256"}"#, r#"{"sub":"x"}"#)).unwrap();
        assert_eq!(u.issuer, Err(TokenError::MissingClaim { claim: "iss" }));
        let u = read(&token(r#"{"alg":"ES256"}"#, r#"{"iss":["a","b"]}"#)).unwrap();
        assert!(matches!(
            u.issuer,
            Err(TokenError::BadClaim { claim: "iss", .. })
        ));
    }

    #[test]
    fn what_is_not_a_compact_jws_is_malformed_with_a_reason() {
        let cases = [
            ("opaque-token-value".to_owned(), "three base64url parts"),
            ("a.b".to_owned(), "three base64url parts"),
            ("a.b.c.d.e".to_owned(), "encrypted JWT"),
            (".x.y".to_owned(), "empty"),
            ("!!.e30.x".to_owned(), "header is not base64url"),
            (
                format!("{}.e30.x", b64("[1]")),
                "header is not a JSON object",
            ),
            (
                format!("{}.e30.x", b64("{}")),
                "header is not a JSON object",
            ),
            (
                format!("{}.!!.x", b64(r#"{"alg":"RS256"}"#)),
                "claims are not base64url",
            ),
            (
                format!("{}.{}.x", b64(r#"{"alg":"RS256"}"#), b64("7")),
                "claims are not a JSON",
            ),
            ("x".repeat(MAX_TOKEN_BYTES + 1), "16 KiB"),
        ];
        for (token, expected) in cases {
            let err = read(&token).unwrap_err();
            assert!(matches!(err, TokenError::Malformed { .. }), "{err:?}");
            assert!(err.to_string().contains(expected), "{expected}: {err}");
        }
    }
}
