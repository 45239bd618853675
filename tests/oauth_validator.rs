//! The OAuth resource server's validator (`agent_mcp::oauth`) against a real authorization
//! server: oidc-provider on 127.0.0.1 (`tests/support/oauth_provider.rs`), tokens from its
//! token endpoint, keys from its published metadata and JWKS.
//!
//! Tokens the provider would never issue (wrong audience or type with a valid signature,
//! `alg: none`, HMAC over its public key, another key) are built here with `jsonwebtoken`,
//! from the provider's own private keys or from keys this test generates. A forged token with
//! every claim right is accepted, so each refusal below is for the one thing changed.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use agent_mcp::oauth::{
    Identity, JwksPolicy, KeySourceError, OAuthSettings, RefusalKind, ScopePolicy, TokenError,
    TokenValidator, VerifiedToken,
};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use support::oauth_provider::{
    CLIENT_A, CLIENT_B, CLIENT_EDDSA, CLIENT_ES256, CLIENT_SHORT, Provider, SigningKey, claims_of,
    with_altered_claims,
};

/// This server as tokens name it. Port 9 is never contacted: a resource is an identifier.
const RESOURCE: &str = "http://127.0.0.1:9/mcp";
/// Another resource of the same authorization server.
const OTHER_RESOURCE: &str = "http://127.0.0.1:9/other";
const BOTH: &str = "agent:run agent:status";

/// The scope policy the server ships with: agent:status reads, agent:run also runs and
/// cancels.
fn policy() -> ScopePolicy {
    let reads = ["agent_status", "tasks/get", "tasks/list", "tasks/result"];
    ScopePolicy::default().grant("agent:status", reads).grant(
        "agent:run",
        reads.into_iter().chain(["agent_run", "tasks/cancel"]),
    )
}

fn settings(issuer: &str) -> OAuthSettings {
    OAuthSettings::new(issuer, RESOURCE)
        .with_scopes(policy())
        .with_jwks(JwksPolicy {
            min_refresh_interval: Duration::from_secs(1),
            ..JwksPolicy::default()
        })
}

fn validator(provider: &Provider) -> TokenValidator {
    TokenValidator::new(settings(&provider.issuer)).expect("valid settings")
}

async fn start() -> Option<Provider> {
    Provider::start(&[
        RESOURCE,
        OTHER_RESOURCE,
        "http://127.0.0.1:9/",
        "http://127.0.0.1:9/mcp/",
    ])
    .await
}

/// The provider from [`start`], or return from the test (it is skipped, loudly, when the
/// provider is not installed).
macro_rules! provider_or_skip {
    () => {
        match start().await {
            Some(provider) => provider,
            None => return,
        }
    };
}

fn scopes(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// `token`'s claims, read without checking.
/// A JWT with `header` and `claims`, signed by `key` with `alg`.
fn sign(alg: Algorithm, kid: Option<&str>, typ: &str, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    header.typ = Some(typ.to_owned());
    jsonwebtoken::encode(&header, claims, key).expect("sign")
}

/// An access token (`typ: at+jwt`) with `claims`, signed by `key` with `alg` under `kid`.
fn at_jwt(alg: Algorithm, kid: &str, claims: &Value, key: &EncodingKey) -> String {
    sign(alg, Some(kid), "at+jwt", claims, key)
}

/// The JOSE header of `token`.
fn header_of(token: &str) -> Value {
    let header = token.split('.').next().unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap()
}

/// `client`'s token for this server with `scope`, validated by `v`.
async fn validated(
    v: &TokenValidator,
    provider: &Provider,
    client: &str,
    scope: Option<&str>,
) -> VerifiedToken {
    let token = provider.token(client, RESOURCE, scope).await;
    v.validate(&token)
        .await
        .unwrap_or_else(|e| panic!("{client}: {e}"))
}

/// A validator of `provider`'s tokens whose key-set policy is the default one as `tweak`
/// changes it.
fn validator_with(provider: &Provider, tweak: impl FnOnce(&mut JwksPolicy)) -> TokenValidator {
    let mut jwks = JwksPolicy::default();
    tweak(&mut jwks);
    TokenValidator::new(settings(&provider.issuer).with_jwks(jwks)).unwrap()
}

/// The provider's private key as an encoding key.
fn encoding_key(key: &SigningKey) -> EncodingKey {
    match key.alg.as_str() {
        "RS256" => EncodingKey::from_rsa_der(&key.der),
        "ES256" => EncodingKey::from_ec_der(&key.der),
        "EdDSA" => EncodingKey::from_ed_der(&key.der),
        other => panic!("no key for {other}"),
    }
}

/// Claims as the provider writes them, for `sub` at `issuer`, valid for five minutes.
fn good_claims(issuer: &str, sub: &str) -> Value {
    let now = jsonwebtoken::get_current_timestamp();
    json!({
        "jti": "forged-by-the-test", "sub": sub, "client_id": sub, "iat": now, "exp": now + 300,
        "scope": BOTH, "iss": issuer, "aud": RESOURCE,
    })
}

/// Asserts that `token` is refused with `expected` (compared by variant and fields), as a 401
/// `invalid_token` whose texts do not hold the token.
async fn assert_refused(
    validator: &TokenValidator,
    token: &str,
    expected: &TokenError,
    case: &str,
) {
    let err = validator
        .validate(token)
        .await
        .expect_err(&format!("{case}: accepted"));
    assert_eq!(&err, expected, "{case}");
    assert_eq!(err.kind(), RefusalKind::InvalidToken, "{case}");
    let challenge = validator.challenge(Some(&err));
    assert_eq!(challenge.status, 401, "{case}");
    let header = challenge.www_authenticate.expect("a challenge");
    assert!(
        header.starts_with("Bearer error=\"invalid_token\""),
        "{case}: {header}"
    );
    let signature = token.rsplit('.').next().unwrap_or_default();
    for text in [err.to_string(), header] {
        assert!(!text.contains(token), "{case}: the token is in {text}");
        if signature.len() > 8 {
            assert!(
                !text.contains(signature),
                "{case}: its signature is in {text}"
            );
        }
    }
}

#[tokio::test]
async fn a_real_token_is_accepted_with_its_identity_and_scopes_for_each_algorithm() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    for (client, alg) in [
        (CLIENT_A, "RS256"),
        (CLIENT_ES256, "ES256"),
        (CLIENT_EDDSA, "EdDSA"),
    ] {
        let token = provider.token(client, RESOURCE, Some(BOTH)).await;
        let header = header_of(&token);
        assert_eq!(
            (header["alg"].as_str(), header["typ"].as_str()),
            (Some(alg), Some("at+jwt"))
        );
        let verified = v
            .validate(&token)
            .await
            .unwrap_or_else(|e| panic!("{client}: {e}"));
        assert_eq!(
            verified.identity(),
            &Identity::new(&provider.issuer, client),
            "{client}"
        );
        assert_eq!(
            verified.identity().as_str(),
            format!("oauth:{}#{client}", provider.issuer)
        );
        assert_eq!(verified.client_id(), Some(client));
        assert_eq!(verified.scopes(), &scopes(&["agent:run", "agent:status"]));
        assert_eq!(
            Some(verified.expires_at()),
            claims_of(&token)["exp"].as_u64(),
            "{client}"
        );
        for operation in ["agent_run", "agent_status", "tasks/cancel", "tools/list"] {
            assert_eq!(
                v.authorize(&verified, operation),
                Ok(()),
                "{client} {operation}"
            );
        }
        assert!(v.check(&token, "agent_run").await.is_ok());
    }
    // One discovery and one key-set fetch served all three.
    assert_eq!(provider.stats().await.jwks, 1);
    assert_eq!(v.prefetch_keys().await, Ok(3));
}

#[tokio::test]
async fn two_clients_are_two_identities() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    let a = validated(&v, &provider, CLIENT_A, Some(BOTH)).await;
    let b = validated(&v, &provider, CLIENT_B, Some(BOTH)).await;
    assert_ne!(a.identity(), b.identity());
    assert_eq!(
        (a.identity().subject(), b.identity().subject()),
        (CLIENT_A, CLIENT_B)
    );
    assert_eq!(a.identity().issuer(), b.identity().issuer());
    // The same client's next token is the same caller.
    let again = validated(&v, &provider, CLIENT_A, None).await;
    assert_eq!(again.identity(), a.identity());
}

#[tokio::test]
async fn too_little_scope_is_insufficient_scope_naming_the_scope_needed() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    let reader = validated(&v, &provider, CLIENT_A, Some("agent:status")).await;
    assert_eq!(reader.scopes(), &scopes(&["agent:status"]));
    assert_eq!(v.authorize(&reader, "agent_status"), Ok(()));
    assert_eq!(v.authorize(&reader, "tasks/get"), Ok(()));
    for operation in ["agent_run", "tasks/cancel"] {
        let err = v.authorize(&reader, operation).unwrap_err();
        assert_eq!(
            err,
            TokenError::InsufficientScope {
                operation: operation.into(),
                needed: "agent:run".into()
            }
        );
        assert_eq!(err.kind(), RefusalKind::InsufficientScope);
        assert_eq!(err.needed_scope(), Some("agent:run"));
    }
    let err = v.authorize(&reader, "agent_run").unwrap_err();
    let challenge = v.challenge(Some(&err));
    assert_eq!(challenge.status, 403);
    assert_eq!(
        challenge.www_authenticate.as_deref(),
        Some(
            "Bearer error=\"insufficient_scope\", scope=\"agent:run\", \
             resource_metadata=\"http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp\", \
             error_description=\"agent_run needs the scope agent:run, which this token was not \
             granted; ask the authorization server for a token with scope agent:run\""
        )
    );

    // A token with no scope at all: valid, but it may only do what no scope guards.
    let bare = validated(&v, &provider, CLIENT_A, None).await;
    assert!(bare.scopes().is_empty());
    assert_eq!(v.authorize(&bare, "tools/list"), Ok(()));
    assert_eq!(
        v.authorize(&bare, "agent_status")
            .unwrap_err()
            .needed_scope(),
        Some("agent:status")
    );
    assert!(matches!(
        v.check(
            &provider
                .token(CLIENT_A, RESOURCE, Some("agent:status"))
                .await,
            "agent_run"
        )
        .await,
        Err(TokenError::InsufficientScope { .. })
    ));
}

#[tokio::test]
async fn a_token_for_another_resource_is_refused() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    let token = provider.token(CLIENT_A, OTHER_RESOURCE, Some(BOTH)).await;
    assert_eq!(claims_of(&token)["aud"], OTHER_RESOURCE);
    let expected = TokenError::Audience {
        resource: RESOURCE.into(),
    };
    assert_refused(&v, &token, &expected, "other resource").await;
    // The same token is fine where it belongs.
    let there = TokenValidator::new(
        OAuthSettings::new(&provider.issuer, OTHER_RESOURCE).with_scopes(policy()),
    )
    .unwrap();
    assert!(there.validate(&token).await.is_ok());
}

#[tokio::test]
async fn an_expired_token_is_refused_and_the_leeway_is_applied() {
    let provider = provider_or_skip!();
    let strict =
        TokenValidator::new(settings(&provider.issuer).with_leeway(Duration::ZERO)).unwrap();
    let lenient =
        TokenValidator::new(settings(&provider.issuer).with_leeway(Duration::from_secs(60)))
            .unwrap();
    let token = provider.token(CLIENT_SHORT, RESOURCE, Some(BOTH)).await;
    let claims = claims_of(&token);
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        1
    );
    // Past exp by more than a second (exp is whole seconds).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_refused(&strict, &token, &TokenError::Expired, "expired").await;
    assert!(
        lenient.validate(&token).await.is_ok(),
        "within the 60 s leeway"
    );
}

#[tokio::test]
async fn forged_tokens_are_refused_for_what_was_forged() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    let issuer = provider.issuer.as_str();
    let rsa = provider.key("RS256").await;
    let ec = provider.key("ES256").await;
    let ed = provider.key("EdDSA").await;
    let key = encoding_key(&rsa);

    // The control: a token built here with the provider's key and every claim right passes,
    // so each refusal below is for the one thing changed.
    let control = at_jwt(
        Algorithm::RS256,
        &rsa.kid,
        &good_claims(issuer, "forger"),
        &key,
    );
    let verified = v
        .validate(&control)
        .await
        .expect("the forgery harness itself works");
    assert_eq!(verified.identity().subject(), "forger");

    // Another key: the test's own, under the provider's kid.
    let rng = SystemRandom::new();
    let own_ec = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let own_ed = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let claims = good_claims(issuer, "forger");
    for (case, token) in [
        (
            "ES256 by another key",
            at_jwt(
                Algorithm::ES256,
                &ec.kid,
                &claims,
                &EncodingKey::from_ec_der(own_ec.as_ref()),
            ),
        ),
        (
            "EdDSA by another key",
            at_jwt(
                Algorithm::EdDSA,
                &ed.kid,
                &claims,
                &EncodingKey::from_ed_der(own_ed.as_ref()),
            ),
        ),
    ] {
        assert_refused(&v, &token, &TokenError::Signature, case).await;
    }

    // An altered payload: a real token with more scope and another subject, its signature kept.
    let real = provider
        .token(CLIENT_A, RESOURCE, Some("agent:status"))
        .await;
    let altered = with_altered_claims(&real, |claims| {
        claims["scope"] = json!(BOTH);
        claims["sub"] = json!(CLIENT_B);
    });
    assert_refused(&v, &altered, &TokenError::Signature, "altered payload").await;
    let parts: Vec<&str> = real.split('.').collect();

    // alg none: the real claims, no signature.
    let none_header =
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "at+jwt", "kid": rsa.kid}).to_string());
    let unsigned = format!("{none_header}.{}.", parts[1]);
    let none = TokenError::Algorithm {
        alg: "\"none\"".into(),
        why: "an unsigned token proves nothing",
    };
    assert_refused(&v, &unsigned, &none, "alg none").await;

    // HS256 with the provider's RSA public key as the shared secret (the classic confusion),
    // with and without the RSA key's kid.
    let hmac = TokenError::Algorithm {
        alg: "\"HS256\"".into(),
        why: "HMAC needs a secret this server does not share with the issuer",
    };
    let secret = EncodingKey::from_secret(rsa.public_pem.as_bytes()).unwrap();
    for kid in [Some(rsa.kid.as_str()), None] {
        let token = sign(Algorithm::HS256, kid, "at+jwt", &claims_of(&real), &secret);
        assert_refused(&v, &token, &hmac, "HS256 over the public key").await;
    }

    // An alg the named key is not published for: ES256 under the RSA key's kid.
    let token = at_jwt(Algorithm::ES256, &rsa.kid, &claims, &encoding_key(&ec));
    let mismatch = TokenError::KeyAlgorithm {
        alg: "\"ES256\"".into(),
        pinned: "RS256",
    };
    assert_refused(&v, &token, &mismatch, "alg not the key's").await;

    // Validly signed by the provider's key, one claim wrong each.
    let now = jsonwebtoken::get_current_timestamp();
    let with = |field: &str, value: Value| {
        let mut c = good_claims(issuer, "forger");
        c[field] = value;
        c
    };
    let without = |field: &str| {
        let mut c = good_claims(issuer, "forger");
        c.as_object_mut().unwrap().remove(field);
        c
    };
    let cases: Vec<(&str, Value, &str, TokenError)> = vec![
        (
            "another audience",
            with("aud", json!("http://127.0.0.1:9/other")),
            "at+jwt",
            TokenError::Audience {
                resource: RESOURCE.into(),
            },
        ),
        (
            "audience list without us",
            with("aud", json!(["https://api.example", OTHER_RESOURCE])),
            "at+jwt",
            TokenError::Audience {
                resource: RESOURCE.into(),
            },
        ),
        (
            "no audience",
            without("aud"),
            "at+jwt",
            TokenError::MissingClaim { claim: "aud" },
        ),
        (
            "expired",
            with("exp", json!(now - 3600)),
            "at+jwt",
            TokenError::Expired,
        ),
        (
            "not yet valid",
            with("nbf", json!(now + 3600)),
            "at+jwt",
            TokenError::NotYetValid,
        ),
        (
            "no exp",
            without("exp"),
            "at+jwt",
            TokenError::MissingClaim { claim: "exp" },
        ),
        (
            "no sub",
            without("sub"),
            "at+jwt",
            TokenError::MissingClaim { claim: "sub" },
        ),
        (
            "sub not a string",
            with("sub", json!(42)),
            "at+jwt",
            TokenError::BadClaim {
                claim: "sub",
                why: "is not a string",
            },
        ),
        (
            "sub with a newline",
            with("sub", json!("a\nb")),
            "at+jwt",
            TokenError::BadClaim {
                claim: "sub",
                why: "holds control characters",
            },
        ),
        (
            "an ID token's typ",
            good_claims(issuer, "forger"),
            "JWT",
            TokenError::TokenType {
                typ: "\"JWT\"".into(),
            },
        ),
        (
            "issued by someone else",
            with("iss", json!("https://evil.example")),
            "at+jwt",
            TokenError::Issuer {
                expected: provider.issuer.clone(),
            },
        ),
        (
            "no issuer",
            without("iss"),
            "at+jwt",
            TokenError::MissingClaim { claim: "iss" },
        ),
    ];
    for (case, claims, typ, expected) in cases {
        let token = sign(Algorithm::RS256, Some(&rsa.kid), typ, &claims, &key);
        assert_refused(&v, &token, &expected, case).await;
    }
    // A list audience that names us is fine.
    let listed = at_jwt(
        Algorithm::RS256,
        &rsa.kid,
        &with("aud", json!(["https://api.example", RESOURCE])),
        &key,
    );
    assert!(v.validate(&listed).await.is_ok());

    // A kid the issuer never published.
    let token = at_jwt(Algorithm::RS256, "no-such-key", &claims, &key);
    let unknown = TokenError::UnknownKey {
        kid: "\"no-such-key\"".into(),
    };
    assert_refused(&v, &token, &unknown, "unknown kid").await;

    // Not a JWT at all (an opaque token), and an encrypted one.
    let malformed = |why| TokenError::Malformed { why };
    assert_refused(
        &v,
        "2YotnFZFEjr1zCsicMWpAA",
        &malformed("it is not three base64url parts joined by dots"),
        "opaque",
    )
    .await;
    assert_refused(
        &v,
        "a.b.c.d.e",
        &malformed("it is an encrypted JWT (JWE)"),
        "JWE",
    )
    .await;
}

#[tokio::test]
async fn another_issuers_token_is_refused_without_fetching_keys() {
    let Some(ours) = start().await else { return };
    let Some(theirs) = start().await else { return };
    assert_ne!(ours.issuer, theirs.issuer);
    let v = validator(&ours);
    let foreign = theirs.token(CLIENT_A, RESOURCE, Some(BOTH)).await;
    let expected = TokenError::Issuer {
        expected: ours.issuer.clone(),
    };
    assert_refused(&v, &foreign, &expected, "another issuer").await;
    // Refused on its claimed issuer: our issuer was not even asked for keys.
    assert_eq!(ours.stats().await.jwks, 0);

    // Their key, claiming to be ours: their kid is not ours (a refetch, then unknown); our
    // kid over their signature does not verify.
    let their_rsa = theirs.key("RS256").await;
    let our_rsa = ours.key("RS256").await;
    let claims = good_claims(&ours.issuer, "impostor");
    let token = at_jwt(
        Algorithm::RS256,
        &their_rsa.kid,
        &claims,
        &encoding_key(&their_rsa),
    );
    let unknown = TokenError::UnknownKey {
        kid: format!("\"{}\"", their_rsa.kid),
    };
    assert_refused(&v, &token, &unknown, "their kid").await;
    let token = at_jwt(
        Algorithm::RS256,
        &our_rsa.kid,
        &claims,
        &encoding_key(&their_rsa),
    );
    assert_refused(&v, &token, &TokenError::Signature, "our kid, their key").await;
}

#[tokio::test]
async fn a_key_rotation_is_picked_up_without_a_restart() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    let before = provider.token(CLIENT_A, RESOURCE, Some(BOTH)).await;
    assert!(v.validate(&before).await.is_ok());
    assert_eq!(provider.stats().await.jwks, 1);

    let new_kid = provider.rotate().await;
    let after = provider.token(CLIENT_A, RESOURCE, Some(BOTH)).await;
    let kid_of = |token: &str| header_of(token)["kid"].as_str().unwrap().to_owned();
    assert_eq!(kid_of(&after), new_kid);
    assert_ne!(kid_of(&before), new_kid);
    // Past the refetch interval (1 s here), the unknown kid makes the validator fetch again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let verified = v
        .validate(&after)
        .await
        .expect("the rotated key is fetched");
    assert_eq!(verified.identity().subject(), CLIENT_A);
    assert_eq!(provider.stats().await.jwks, 2);
    // The old key is still published, so older tokens still pass, without another fetch.
    assert!(v.validate(&before).await.is_ok());
    assert_eq!(provider.stats().await.jwks, 2);
}

#[tokio::test]
async fn unknown_kids_are_refetched_at_most_once_per_interval() {
    let provider = provider_or_skip!();
    let v = validator_with(&provider, |k| {
        k.min_refresh_interval = Duration::from_secs(60)
    });
    validated(&v, &provider, CLIENT_A, Some(BOTH)).await;
    let rsa = provider.key("RS256").await;
    let key = encoding_key(&rsa);
    for i in 0..20 {
        let kid = format!("made-up-{i}");
        let token = at_jwt(
            Algorithm::RS256,
            &kid,
            &good_claims(&provider.issuer, "x"),
            &key,
        );
        let err = v.validate(&token).await.unwrap_err();
        assert!(matches!(err, TokenError::UnknownKey { .. }), "{err}");
    }
    // Twenty unknown kids within the interval: no fetch beyond the first.
    assert_eq!(provider.stats().await.jwks, 1);
    // Which also means a real rotation inside the interval waits for it.
    provider.rotate().await;
    let rotated = provider.token(CLIENT_A, RESOURCE, Some(BOTH)).await;
    assert!(matches!(
        v.validate(&rotated).await,
        Err(TokenError::UnknownKey { .. })
    ));
    assert_eq!(provider.stats().await.jwks, 1);
}

#[tokio::test]
async fn the_issuer_must_be_named_exactly_by_its_metadata() {
    let provider = provider_or_skip!();
    // A trailing slash is another issuer identifier (RFC 8414 compares exactly).
    let slashed = format!("{}/", provider.issuer);
    let v = TokenValidator::new(settings(&slashed)).unwrap();
    match v.prefetch_keys().await {
        Err(KeySourceError::IssuerMismatch {
            found, expected, ..
        }) => {
            assert_eq!(
                (found, expected),
                (provider.issuer.clone(), slashed.clone())
            );
        }
        other => panic!("{other:?}"),
    }
    // Its tokens say the issuer without the slash, so they are refused on that before keys.
    let token = provider.token(CLIENT_A, RESOURCE, Some(BOTH)).await;
    assert_eq!(
        v.validate(&token).await.unwrap_err(),
        TokenError::Issuer { expected: slashed }
    );
    assert_eq!(
        provider.stats().await.jwks,
        0,
        "no key set read from a mismatched issuer"
    );
}

#[tokio::test]
async fn the_metadata_and_challenges_name_the_real_issuer() {
    let provider = provider_or_skip!();
    let v = validator(&provider);
    let metadata = v.metadata();
    assert_eq!(
        metadata.well_known_url(),
        "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        metadata.to_json_value(),
        json!({
            "resource": RESOURCE,
            "authorization_servers": [provider.issuer],
            "scopes_supported": ["agent:run", "agent:status"],
            "bearer_methods_supported": ["header"],
        })
    );
    // What a client does with the metadata: the listed authorization server issues it a token
    // for the listed resource, with the advertised scopes, and this validator takes it.
    let server = metadata.to_json_value()["authorization_servers"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(server, provider.issuer);
    let token = provider
        .token(
            CLIENT_B,
            metadata.resource(),
            Some(&metadata.scopes_supported().join(" ")),
        )
        .await;
    assert!(v.check(&token, "agent_run").await.is_ok());

    let none = v.challenge(None);
    assert_eq!(none.status, 401);
    assert_eq!(
        none.www_authenticate.as_deref(),
        Some(
            "Bearer resource_metadata=\"http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp\", \
             scope=\"agent:run agent:status\""
        )
    );
    let unavailable = v.challenge(Some(&TokenError::KeysUnavailable { why: "x".into() }));
    assert_eq!(
        (unavailable.status.as_u16(), unavailable.www_authenticate),
        (503, None)
    );
}

#[tokio::test]
async fn keys_older_than_max_age_are_fetched_again_before_use() {
    let provider = provider_or_skip!();
    let v = validator_with(&provider, |k| {
        k.min_refresh_interval = Duration::from_secs(1);
        k.max_age = Duration::from_secs(1);
    });
    let token = provider.token(CLIENT_A, RESOURCE, Some(BOTH)).await;
    assert!(v.validate(&token).await.is_ok());
    assert!(v.validate(&token).await.is_ok());
    assert_eq!(provider.stats().await.jwks, 1, "fresh keys are reused");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(v.validate(&token).await.is_ok());
    assert_eq!(provider.stats().await.jwks, 2, "old keys are fetched again");
}

#[tokio::test]
async fn the_audience_is_the_resource_as_written_or_as_a_client_normalises_it() {
    let provider = provider_or_skip!();
    // Configured without a path; a client that parses it as a URL asks for ".../".
    let root =
        TokenValidator::new(OAuthSettings::new(&provider.issuer, "http://127.0.0.1:9")).unwrap();
    let token = provider.token(CLIENT_A, "http://127.0.0.1:9/", None).await;
    assert!(root.validate(&token).await.is_ok());
    // Normal form is not a looser match: another path is still another resource.
    let token = provider
        .token(CLIENT_A, "http://127.0.0.1:9/mcp/", None)
        .await;
    let v = validator(&provider);
    assert_eq!(
        v.validate(&token).await.unwrap_err(),
        TokenError::Audience {
            resource: RESOURCE.into()
        }
    );
}
