//! The OAuth resource server through the real HTTP edge: `agent-mcp serve` (the binary) with
//! `auth.oauth` pointing at a real authorization server (oidc-provider on 127.0.0.1, see
//! `tests/support/oauth_provider.rs`), tokens from its token endpoint, a fake Ollama behind.
//!
//! `auth.oauth.resource` is left unset, so the server names itself from its bind address
//! (`http://127.0.0.1:<port>/mcp`): the port is chosen first, and the provider told to issue
//! tokens for that resource.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use support::fake_ollama::FakeOllama;
use support::harness::{
    HttpClient, Reply, ServeProcess, Spawn, field, free_port, test_config, tool_text, wait_terminal,
};
use support::oauth_provider::{
    CLIENT_A, CLIENT_B, CLIENT_SHORT, Provider, claims_of, with_altered_claims,
};

const BOTH: &str = "agent:run agent:status";
const STATIC_TOKEN: &str = "static-ci-token-0123456789";

/// A server with `auth.oauth` on, its provider and fake Ollama, and its audit file.
struct Rig {
    provider: Provider,
    server: ServeProcess,
    fake: FakeOllama,
    /// `http://127.0.0.1:<port>/mcp`.
    resource: String,
    /// `http://127.0.0.1:<port>` (the metadata's host).
    base: String,
    audit: PathBuf,
    _dir: tempfile::TempDir,
}

/// Another resource the provider also issues tokens for (the wrong audience).
fn other_resource(port: u16) -> String {
    format!("http://127.0.0.1:{port}/other")
}

/// `static_token`: also accept [`STATIC_TOKEN`] as the caller `ci`.
async fn rig(static_token: bool) -> Option<Rig> {
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(&[&resource, &other_resource(port)]).await?;
    let fake = FakeOllama::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.log");
    let mut config = test_config(&fake.url());
    config.auth.oauth.issuer = Some(provider.issuer.clone());
    config.auth.oauth.leeway = Duration::ZERO;
    config.auth.oauth.jwks.min_refresh_interval = Duration::from_secs(1);
    config.audit.enabled = true;
    config.audit.file = Some(audit.clone());
    if static_token {
        config
            .auth
            .tokens
            .push(support::harness::bearer("ci", STATIC_TOKEN));
    }
    let server = ServeProcess::spawn_with(
        &config,
        Spawn {
            port,
            ..Spawn::default()
        },
    )
    .await;
    Some(Rig {
        provider,
        server,
        fake,
        base: format!("http://127.0.0.1:{port}"),
        resource,
        audit,
        _dir: dir,
    })
}

impl Rig {
    fn client(&self, token: Option<&str>) -> HttpClient {
        let mut client = self.server.client();
        if let Some(token) = token {
            client.set_token(token);
        }
        client
    }

    async fn token(&self, client: &str, scope: &str) -> String {
        self.provider
            .token(client, &self.resource, Some(scope))
            .await
    }

    fn metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.base)
    }
}

/// `reply` is a 401 whose challenge says `invalid_token` and points at the metadata
/// (`metadata_url`): that challenge. `case` names the reply in failures.
fn invalid_token_challenge(reply: &Reply, metadata_url: &str, case: &str) -> String {
    assert_eq!(reply.status, 401, "{case}: {}", reply.text);
    let challenge = www_authenticate(reply);
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\""),
        "{case}: {challenge}"
    );
    assert!(challenge.contains(metadata_url), "{case}: {challenge}");
    challenge
}

/// An `at+jwt` access token with `claims`, signed with `key` by `alg` under `kid`.
fn access_token(alg: Algorithm, kid: &str, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    header.typ = Some("at+jwt".into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn www_authenticate(reply: &Reply) -> String {
    reply
        .headers
        .get("www-authenticate")
        .unwrap_or_else(|| panic!("no WWW-Authenticate on {}: {}", reply.status, reply.text))
        .to_str()
        .expect("ASCII")
        .to_owned()
}

/// A legacy (2025-11-25) `tools/call`.
async fn legacy_call(client: &HttpClient, tool: &str, arguments: Value) -> Reply {
    client
        .legacy(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            Some("2025-11-25"),
        )
        .await
}

#[tokio::test]
async fn metadata_is_served_without_a_token_and_401s_point_at_it() {
    let Some(rig) = rig(false).await else { return };
    let http = reqwest::Client::new();
    let expected = json!({
        "resource": rig.resource,
        "authorization_servers": [rig.provider.issuer],
        "scopes_supported": ["agent:run", "agent:status"],
        "bearer_methods_supported": ["header"],
    });
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let get = |header: Option<(&str, &str)>| {
            let mut request = http.get(format!("{}{path}", rig.base));
            if let Some((name, value)) = header {
                request = request.header(name, value);
            }
            request.send()
        };
        let resp = get(None).await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(resp.headers()["content-type"], "application/json", "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body, expected, "{path}");
        // Behind the same Host/Origin guard as /mcp.
        for guarded in [("host", "evil.example"), ("origin", "http://evil.example")] {
            let resp = get(Some(guarded)).await.unwrap();
            assert_eq!(resp.status(), 403, "{path} {guarded:?}");
        }
    }

    let needs_token = format!(
        "Bearer resource_metadata=\"{}\", scope=\"{BOTH}\"",
        rig.metadata_url()
    );
    // No token: 401 with where to get one, in both eras.
    let anonymous = rig.client(None);
    let modern = anonymous.modern("tools/list", json!({})).await;
    assert_eq!(modern.status, 401, "{}", modern.text);
    assert_eq!(www_authenticate(&modern), needs_token);
    assert_eq!(modern.body["error"]["code"], -32001);
    let message = modern.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&rig.provider.issuer), "{message}");
    let legacy = legacy_call(&anonymous, "agent_status", json!({"task_id": "x"})).await;
    assert_eq!(legacy.status, 401, "{}", legacy.text);
    assert_eq!(www_authenticate(&legacy), needs_token);
    // Another scheme: 401, the same challenge.
    let basic = anonymous
        .post_raw(
            &[("authorization", "Basic dXNlcjpwYXNz")],
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
        )
        .await;
    assert_eq!(basic.status, 401);
    assert_eq!(www_authenticate(&basic), needs_token);
    // A token that is no JWT: invalid_token, and still where to get a good one.
    let garbage = rig.client(Some("not-a-jwt"));
    let refused = garbage.modern("tools/list", json!({})).await;
    let challenge = invalid_token_challenge(&refused, &rig.metadata_url(), "not a JWT");
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\", error_description=\""),
        "{challenge}"
    );
    assert!(
        challenge.ends_with(&format!(
            "resource_metadata=\"{}\", scope=\"{BOTH}\"",
            rig.metadata_url()
        )),
        "{challenge}"
    );
    assert!(!refused.text.contains("not-a-jwt"));
}

#[tokio::test]
async fn a_valid_token_runs_tasks_for_its_own_identity_and_scope_is_enforced() {
    let Some(rig) = rig(true).await else { return };
    let token_a = rig.token(CLIENT_A, BOTH).await;
    let token_b = rig.token(CLIENT_B, BOTH).await;
    let a = rig.client(Some(&token_a));
    let b = rig.client(Some(&token_b));

    // agent_run, then agent_status to the end, as client A.
    let task = a.agent_run("say hello").await;
    let done = wait_terminal(|| a.agent_status(&task)).await;
    assert_eq!(field(&done, "status"), "completed", "{done}");

    // Client B does not see A's task: not through agent_status (an unknown task, as the
    // contract words it), not through tasks/get.
    let theirs = tool_text(&b.call_tool("agent_status", json!({"task_id": task})).await);
    assert_eq!(field(&theirs, "status"), "failed", "{theirs}");
    assert!(theirs.contains("見つかりません"), "{theirs}");
    let tasks_ext = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let got = b
        .modern_with_caps("tasks/get", json!({"taskId": task}), tasks_ext.clone())
        .await;
    assert_eq!(got.status, 400, "{}", got.text);
    assert_eq!(got.body["error"]["code"], -32602, "{}", got.text);
    let got = a
        .modern_with_caps("tasks/get", json!({"taskId": task}), tasks_ext.clone())
        .await;
    assert_eq!(got.status, 200, "{}", got.text);

    // A static token works next to OAuth, as its own caller.
    let ci = rig.client(Some(STATIC_TOKEN));
    let ci_task = ci.agent_run("say hello too").await;
    let theirs = tool_text(
        &a.call_tool("agent_status", json!({"task_id": ci_task}))
            .await,
    );
    assert!(theirs.contains("見つかりません"), "{theirs}");
    wait_terminal(|| ci.agent_status(&ci_task)).await;

    // Too little scope: agent:status reads, but agent_run and cancelling are 403, both eras.
    let reader_token = rig.token(CLIENT_A, "agent:status").await;
    let reader = rig.client(Some(&reader_token));
    let status = reader
        .call_tool("agent_status", json!({"task_id": task}))
        .await;
    assert_eq!(status["isError"], json!(false), "{status}");
    let needs_run = format!(
        "Bearer error=\"insufficient_scope\", scope=\"agent:run\", resource_metadata=\"{}\"",
        rig.metadata_url()
    );
    let modern = reader.tool_call("agent_run", json!({"request": "x"})).await;
    assert_eq!(modern.status, 403, "{}", modern.text);
    assert!(
        www_authenticate(&modern).starts_with(&needs_run),
        "{}",
        www_authenticate(&modern)
    );
    assert_eq!(modern.body["error"]["code"], -32001);
    let legacy = legacy_call(&reader, "agent_run", json!({"request": "x"})).await;
    assert_eq!(legacy.status, 403, "{}", legacy.text);
    assert!(www_authenticate(&legacy).starts_with(&needs_run));
    let cancel = reader
        .modern_with_caps("tasks/cancel", json!({"taskId": task}), tasks_ext)
        .await;
    assert_eq!(cancel.status, 403, "{}", cancel.text);
    assert!(www_authenticate(&cancel).starts_with(&needs_run));
    // A token with no scope at all reads nothing either.
    let none_token = rig.provider.token(CLIENT_A, &rig.resource, None).await;
    let nothing = rig.client(Some(&none_token));
    let refused = nothing
        .tool_call("agent_status", json!({"task_id": task}))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert!(
        www_authenticate(&refused)
            .starts_with("Bearer error=\"insufficient_scope\", scope=\"agent:status\""),
        "{}",
        www_authenticate(&refused)
    );

    // The audit log names each caller by identity, the 403 included.
    let identity_a = format!("oauth:{}#{CLIENT_A}", rig.provider.issuer);
    let identity_b = format!("oauth:{}#{CLIENT_B}", rig.provider.issuer);
    let mut server = rig.server;
    let audit = wait_for_audit(&rig.audit, &identity_b).await;
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let has = |who: &str, what: &dyn Fn(&Value) -> bool| {
        lines.iter().any(|l| l["identity"] == who && what(l))
    };
    assert!(
        has(&identity_a, &|l| l["tool"] == "agent_run"
            && l["outcome"] == "ok"),
        "{audit}"
    );
    assert!(
        has(&identity_a, &|l| l["outcome"] == "unauthorized"),
        "{audit}"
    );
    assert!(has("ci", &|l| l["tool"] == "agent_run"), "{audit}");

    // No token text anywhere: not in the audit file, not in the server's log, not in what
    // Ollama was sent.
    let stderr = server
        .stderr_until("never printed", Duration::from_millis(300))
        .await;
    let stderr = [server.startup.clone(), stderr].concat().join("\n");
    let ollama = serde_json::to_string(&rig.fake.chat_requests()).unwrap();
    assert!(!ollama.is_empty() && ollama.contains("say hello"));
    for token in [
        &token_a,
        &token_b,
        &reader_token,
        &none_token,
        &STATIC_TOKEN.to_owned(),
    ] {
        // The signature part alone is what makes a token; none of it may leak.
        let signature = token.rsplit('.').next().unwrap();
        for (place, text) in [("audit", &audit), ("log", &stderr), ("ollama", &ollama)] {
            assert!(!text.contains(signature), "a token is in the {place}");
        }
    }
}

/// The audit file once it holds a line mentioning `needle` (lines are written in the
/// background).
async fn wait_for_audit(path: &std::path::Path, needle: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) || tokio::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bad_tokens_are_401_for_what_is_wrong_with_them() {
    let Some(rig) = rig(false).await else { return };
    let port = rig.server.port();
    let issuer = rig.provider.issuer.clone();
    let good = rig.token(CLIENT_A, BOTH).await;
    // The control: the good token passes.
    let ok = rig
        .client(Some(&good))
        .modern("tools/list", json!({}))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text);

    let mut cases: Vec<(&str, String, &str)> = Vec::new();
    // Wrong audience: a real token of the same issuer for another resource.
    let other = rig
        .provider
        .token(CLIENT_A, &other_resource(port), Some(BOTH))
        .await;
    cases.push(("wrong audience", other, "aud"));
    // Expired: a one-second token, a second later (leeway 0 here).
    let short = rig.token(CLIENT_SHORT, BOTH).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    cases.push(("expired", short, "expired"));
    // Signed by another key, under the provider's ES256 kid.
    let ec = rig.provider.key("ES256").await;
    let own = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
        .unwrap();
    let forged = access_token(
        Algorithm::ES256,
        &ec.kid,
        &claims_of(&good),
        &EncodingKey::from_ec_der(own.as_ref()),
    );
    cases.push(("another key", forged, "signature"));
    // The real token's payload altered (another subject), its signature kept.
    let altered = with_altered_claims(&good, |claims| {
        claims["sub"] = json!(CLIENT_B);
        claims["client_id"] = json!(CLIENT_B);
    });
    cases.push(("altered payload", altered, "signature"));
    let parts: Vec<&str> = good.split('.').collect();
    // alg none.
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "at+jwt"}).to_string()),
        parts[1]
    );
    cases.push(("alg none", none, "alg"));
    // HS256 with the provider's RSA public key as the secret.
    let rsa = rig.provider.key("RS256").await;
    let hmac = access_token(
        Algorithm::HS256,
        &rsa.kid,
        &claims_of(&good),
        &EncodingKey::from_secret(rsa.public_pem.as_bytes()).unwrap(),
    );
    cases.push(("HS256 over the public key", hmac, "HMAC"));
    // Another issuer's real token, for this very resource.
    let theirs = Provider::start(&[&rig.resource])
        .await
        .expect("second provider");
    let foreign = theirs.token(CLIENT_A, &rig.resource, Some(BOTH)).await;
    cases.push(("another issuer", foreign, "issued"));

    for (case, token, says) in &cases {
        let client = rig.client(Some(token));
        for reply in [
            client
                .tool_call("agent_status", json!({"task_id": "x"}))
                .await,
            legacy_call(&client, "agent_status", json!({"task_id": "x"})).await,
        ] {
            invalid_token_challenge(&reply, &rig.metadata_url(), case);
            let message = reply.body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{case}: {message}");
            assert!(!reply.text.contains(token.as_str()), "{case}");
        }
    }
    assert!(issuer.starts_with("http://127.0.0.1:"));
    // Nothing was run for any of them.
    assert_eq!(rig.fake.chat_count(), 0);
}

#[tokio::test]
async fn a_key_rotation_is_picked_up_without_a_restart() {
    let Some(rig) = rig(false).await else { return };
    let before = rig.token(CLIENT_A, BOTH).await;
    let client = rig.client(Some(&before));
    assert_eq!(client.modern("tools/list", json!({})).await.status, 200);
    let jwks_fetches = rig.provider.stats().await.jwks;

    rig.provider.rotate().await;
    let after = rig.token(CLIENT_A, BOTH).await;
    assert_ne!(
        before.split('.').next(),
        after.split('.').next(),
        "the new token names the new key"
    );
    // Past the refetch interval (1 s here), the new kid makes the server fetch the keys again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let client = rig.client(Some(&after));
    let reply = client.modern("tools/list", json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(rig.provider.stats().await.jwks, jwks_fetches + 1);
    // The old key is still published: older tokens still pass.
    let reply = rig
        .client(Some(&before))
        .modern("tools/list", json!({}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

#[tokio::test]
async fn an_issuer_out_of_reach_is_503_with_retry_after_not_a_401() {
    // No provider needed: the issuer is a port nobody listens on.
    let fake = FakeOllama::start().await;
    let mut config = test_config(&fake.url());
    config.auth.oauth.issuer = Some(format!("http://127.0.0.1:{}", free_port()));
    config.auth.oauth.jwks.timeout = Duration::from_secs(2);
    let server = ServeProcess::spawn(&config).await;
    // A well-formed token of that issuer, so the server has to ask for its keys.
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({
        "iss": config.auth.oauth.issuer, "sub": "bot", "aud": format!("{}/mcp", server.base),
        "exp": now + 300,
    });
    let mut header = Header::new(Algorithm::HS256);
    header.typ = Some("at+jwt".into());
    let hs =
        jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(b"x").unwrap()).unwrap();
    // HS256 is refused before any fetch: 401.
    let mut client = server.client();
    client.set_token(&hs);
    assert_eq!(client.modern("tools/list", json!({})).await.status, 401);
    // An RS256-looking token needs the keys: they cannot be had, so 503, retry later.
    let parts: Vec<&str> = hs.split('.').collect();
    let rs_header =
        URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "at+jwt", "kid": "k"}).to_string());
    client.set_token(&format!("{rs_header}.{}.{}", parts[1], parts[2]));
    let reply = client.modern("tools/list", json!({})).await;
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert_eq!(reply.headers["retry-after"], "5");
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("signing keys are out of reach"),
        "{message}"
    );
}
