//! Secrets out of printed text: the one place that knows how a URL carries a password.
//!
//! A URL's userinfo (`scheme://user:PASSWORD@host`) and a `password=` query parameter are the
//! ways a secret rides along in the URLs this server is given (`ollama.url` / `OLLAMA_HOST`,
//! `store.url`, and whatever comes later). Everything that prints a configured URL, or text
//! that may quote one (an error from a client library, a readiness report, a task's failure
//! message), goes through [`redact_url`] or [`redact_urls_in`], so the password reaches no log
//! line, `check-config` output, `/readyz` body, task result or audit line.
//!
//! ```
//! use agent_mcp_plugin::redact::{redact_url, redact_urls_in};
//!
//! assert_eq!(redact_url("http://user:s3cret@ollama:11434"), "http://user:<redacted>@ollama:11434");
//! assert_eq!(
//!     redact_urls_in("cannot reach http://u:s3cret@h:1/api/chat: refused"),
//!     "cannot reach http://u:<redacted>@h:1/api/chat: refused"
//! );
//! ```

use std::borrow::Cow;

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// `url` with its password (`user:password@`, or a `password=` parameter) replaced by
/// `<redacted>`, for printing and logs. The user name stays: it says which account, and is no
/// secret by itself.
pub fn redact_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            // The authority ends at the first '/', the userinfo at its last '@'.
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => {
                    let user = match userinfo.split_once(':') {
                        Some((user, _)) => format!("{user}:{REDACTED}"),
                        None => userinfo.to_owned(),
                    };
                    format!("{scheme}://{user}@{host}{path}")
                }
                None => head.to_owned(),
            }
        }
        None => head.to_owned(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}={REDACTED}"),
                _ => p.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

/// `text` with the password of every URL in it redacted (see [`redact_url`]); borrowed when
/// there is none. A URL here is `scheme://` followed by everything up to whitespace or a
/// quote, so prose around it is left alone.
pub fn redact_urls_in(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` just before `://`.
        let scheme_start = rest[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(at, |(i, _)| i);
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .map_or(rest.len(), |i| at + i);
        let url = &rest[scheme_start..end];
        let shown = redact_url(url);
        out.push_str(&rest[..scheme_start]);
        changed |= shown != url;
        out.push_str(&shown);
        rest = &rest[end..];
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_redaction() {
        let cases = [
            (
                "postgres://app:s3cret@db:5432/agent",
                "postgres://app:<redacted>@db:5432/agent",
            ),
            (
                "postgresql://app:p@ss@db/agent?sslmode=disable",
                "postgresql://app:<redacted>@db/agent?sslmode=disable",
            ),
            (
                "postgres://app@db/agent?password=s3cret&application_name=x",
                "postgres://app@db/agent?password=<redacted>&application_name=x",
            ),
            ("postgres://db/agent", "postgres://db/agent"),
            (
                "http://user:s3cret@127.0.0.1:11434",
                "http://user:<redacted>@127.0.0.1:11434",
            ),
            ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    #[test]
    fn urls_inside_text_lose_their_password_and_the_prose_stays() {
        let text = "cannot reach Ollama at http://user:s3cret@127.0.0.1:1: error sending \
                    request for url (http://user:s3cret@127.0.0.1:1/api/chat). Start Ollama.";
        let shown = redact_urls_in(text);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            shown,
            "cannot reach Ollama at http://user:<redacted>@127.0.0.1:1: error sending request \
             for url (http://user:<redacted>@127.0.0.1:1/api/chat). Start Ollama."
        );
        for plain in [
            "no url here",
            "http://127.0.0.1:11434/api/chat",
            "a :// b",
            "://",
        ] {
            assert!(matches!(redact_urls_in(plain), Cow::Borrowed(_)), "{plain}");
        }
        assert_eq!(
            redact_urls_in("\"postgres://a:b@h/d\" and http://x:y@z"),
            "\"postgres://a:<redacted>@h/d\" and http://x:<redacted>@z"
        );
    }
}
