//! [`ProtectedResourceMetadata`]: this server's RFC 9728 document, which tells a client where
//! to get a token for it (`authorization_servers`), what to ask for (`scopes_supported`), and
//! how to send it (`bearer_methods_supported`: the `Authorization` header only).
//!
//! It is served at the URL RFC 9728 §3.1 builds from the resource, the well-known suffix put
//! between the host and the path ([`ProtectedResourceMetadata::well_known_url`]): for
//! `https://mcp.example.com/mcp`, `https://mcp.example.com/.well-known/oauth-protected-resource/mcp`.
//! MCP clients try that, then the root form `/.well-known/oauth-protected-resource`
//! ([`ProtectedResourceMetadata::ROOT_PATH`]); the `401` challenge names the first, so a
//! client that reads the challenge needs no guess.
//!
//! ```
//! use agent_mcp::oauth::ProtectedResourceMetadata;
//!
//! let metadata = ProtectedResourceMetadata::new(
//!     "https://mcp.example.com/mcp",
//!     "https://auth.example.com",
//!     ["agent:run", "agent:status"],
//! )
//! .unwrap();
//! assert_eq!(
//!     metadata.well_known_url(),
//!     "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
//! );
//! assert_eq!(metadata.well_known_path(), "/.well-known/oauth-protected-resource/mcp");
//! let body: serde_json::Value = serde_json::from_str(&metadata.to_json()).unwrap();
//! assert_eq!(
//!     body,
//!     serde_json::json!({
//!         "resource": "https://mcp.example.com/mcp",
//!         "authorization_servers": ["https://auth.example.com"],
//!         "scopes_supported": ["agent:run", "agent:status"],
//!         "bearer_methods_supported": ["header"],
//!     })
//! );
//! ```

use serde_json::json;
use url::Url;

use super::settings::SettingsError;

/// RFC 9728 metadata of this protected resource, with the URL it is served at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtectedResourceMetadata {
    resource: String,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    well_known_url: String,
    well_known_path: String,
}

impl ProtectedResourceMetadata {
    /// The root form of the metadata's path, which MCP clients try second.
    pub const ROOT_PATH: &'static str = "/.well-known/oauth-protected-resource";

    /// The metadata of `resource` (this server's URL, exactly as tokens name it), whose tokens
    /// come from `authorization_server` (its issuer identifier), with `scopes`.
    pub fn new<'a>(
        resource: &str,
        authorization_server: &str,
        scopes: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, SettingsError> {
        let url = Url::parse(resource).map_err(|e| SettingsError::NotAUrl {
            what: "resource",
            url: resource.to_owned(),
            why: e.to_string(),
        })?;
        // RFC 9728 §3.1: a terminating slash after the host is dropped before the suffix.
        let path = url.path().trim_end_matches('/');
        let well_known_path = format!("{}{path}", Self::ROOT_PATH);
        let mut well_known = url.clone();
        well_known.set_path(&well_known_path);
        well_known.set_query(None);
        well_known.set_fragment(None);
        Ok(Self {
            resource: resource.to_owned(),
            authorization_servers: vec![authorization_server.to_owned()],
            scopes_supported: scopes.into_iter().map(str::to_owned).collect(),
            well_known_url: well_known.into(),
            well_known_path,
        })
    }

    /// The resource identifier (the audience tokens must carry).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Where the metadata is served (RFC 9728 §3.1), the `resource_metadata` of challenges.
    pub fn well_known_url(&self) -> &str {
        &self.well_known_url
    }

    /// The path part of [`Self::well_known_url`], for an edge's router.
    pub fn well_known_path(&self) -> &str {
        &self.well_known_path
    }

    /// The scopes advertised.
    pub fn scopes_supported(&self) -> &[String] {
        &self.scopes_supported
    }

    /// The document as JSON; `scopes_supported` is left out when empty.
    pub fn to_json_value(&self) -> serde_json::Value {
        let mut doc = json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes_supported.is_empty() {
            doc["scopes_supported"] = json!(self.scopes_supported);
        }
        doc
    }

    /// The document as a JSON body (`application/json`).
    pub fn to_json(&self) -> String {
        self.to_json_value().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(resource: &str) -> ProtectedResourceMetadata {
        ProtectedResourceMetadata::new(resource, "https://auth.example.com", ["a"]).unwrap()
    }

    #[test]
    fn the_well_known_suffix_goes_between_host_and_path() {
        let cases = [
            (
                "https://mcp.example.com/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "https://mcp.example.com",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://mcp.example.com/",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://mcp.example.com:8443/server/mcp/",
                "https://mcp.example.com:8443/.well-known/oauth-protected-resource/server/mcp",
            ),
            (
                "http://127.0.0.1:8080/mcp",
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
            ),
        ];
        for (resource, expected) in cases {
            let m = metadata(resource);
            assert_eq!(m.well_known_url(), expected, "{resource}");
            assert!(expected.ends_with(m.well_known_path()), "{resource}");
            // The document names the resource exactly as configured, not normalised.
            assert_eq!(m.to_json_value()["resource"], resource);
        }
    }

    #[test]
    fn the_document_is_exactly_rfc_9728() {
        let m = ProtectedResourceMetadata::new(
            "https://mcp.example.com/mcp",
            "https://auth.example.com/tenant",
            ["agent:run", "agent:status"],
        )
        .unwrap();
        assert_eq!(
            m.to_json_value(),
            json!({
                "resource": "https://mcp.example.com/mcp",
                "authorization_servers": ["https://auth.example.com/tenant"],
                "scopes_supported": ["agent:run", "agent:status"],
                "bearer_methods_supported": ["header"],
            })
        );
        let bare = ProtectedResourceMetadata::new("https://m", "https://a", []).unwrap();
        assert!(bare.to_json_value().get("scopes_supported").is_none());
        assert!(ProtectedResourceMetadata::new("mcp.example.com", "https://a", []).is_err());
    }
}
