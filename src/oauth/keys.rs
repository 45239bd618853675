//! [`KeySet`]: the issuer's published signing keys, each pinned to the one algorithm it may
//! verify.
//!
//! A key's algorithm is the `alg` it is published with; a key published without one gets the
//! single algorithm its type and curve imply (RSA: `RS256`, EC P-256: `ES256`, EC P-384:
//! `ES384`, OKP Ed25519: `EdDSA`). A token is then verified only with a key whose algorithm is
//! the token's `alg`, so a token cannot choose how the issuer's key is used: `HS256` over an
//! RSA public key, or `none`, never reaches a key. Keys that cannot verify a signature are
//! left out, not trusted: symmetric (`oct`) keys, encryption keys (`use: enc`), algorithms and
//! curves this server does not implement, and keys whose `alg` does not fit their type.

use std::sync::Arc;

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use serde::Deserialize;

/// The `alg` values a token may carry, as a header writes them: the asymmetric signatures
/// `jsonwebtoken` verifies. No `none`, no HMAC: this server holds no secret shared with the
/// issuer.
const ACCEPTED: [(&str, Algorithm); 9] = [
    ("RS256", Algorithm::RS256),
    ("RS384", Algorithm::RS384),
    ("RS512", Algorithm::RS512),
    ("PS256", Algorithm::PS256),
    ("PS384", Algorithm::PS384),
    ("PS512", Algorithm::PS512),
    ("ES256", Algorithm::ES256),
    ("ES384", Algorithm::ES384),
    ("EdDSA", Algorithm::EdDSA),
];

/// Whether a token's `alg` is one this server verifies.
pub(super) fn accepted(alg: &str) -> bool {
    ACCEPTED.iter().any(|(name, _)| *name == alg)
}

/// One signing key, with the one algorithm it verifies.
pub(super) struct TrustedKey {
    pub kid: Option<String>,
    pub alg: Algorithm,
    pub key: DecodingKey,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// The usable keys of one JWKS.
#[derive(Debug, Default)]
pub(super) struct KeySet {
    keys: Vec<Arc<TrustedKey>>,
    /// Keys of the document left out (not for signatures, or not usable here).
    skipped: usize,
}

/// What [`KeySet::find`] found for a token's `kid` and `alg`.
#[derive(Debug)]
pub(super) enum Lookup {
    Found(Arc<TrustedKey>),
    /// The key the token names is published for another algorithm (its name).
    OtherAlg(&'static str),
    /// No key with that `kid` (or, without a `kid`, none for that `alg`).
    Unknown,
    /// No `kid`, and several keys for that `alg`.
    Ambiguous,
}

/// The JWKS document: only `keys`, each read on its own so that one key of a kind this
/// library does not know leaves the others usable.
#[derive(Deserialize)]
struct Document {
    keys: Vec<serde_json::Value>,
}

impl KeySet {
    /// The signing keys of a JWKS document. `Err` says why the document is unusable as a
    /// whole; keys that are merely not for us are counted in [`KeySet::skipped`].
    pub fn from_jwks(json: &[u8]) -> Result<KeySet, &'static str> {
        let document: Document = serde_json::from_slice(json)
            .map_err(|_| "it is not a JSON object with a \"keys\" array")?;
        let mut set = KeySet::default();
        for value in document.keys {
            match serde_json::from_value::<Jwk>(value)
                .ok()
                .and_then(|jwk| trusted(&jwk))
            {
                Some(key) => set.keys.push(Arc::new(key)),
                None => set.skipped += 1,
            }
        }
        Ok(set)
    }

    /// How many keys are usable.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys of the document were left out.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The key for a token whose header says `kid` and `alg`.
    pub fn find(&self, kid: Option<&str>, alg: &str) -> Lookup {
        if let Some(kid) = kid {
            return match self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)) {
                Some(key) if alg_name(key.alg) == alg => Lookup::Found(Arc::clone(key)),
                Some(key) => Lookup::OtherAlg(alg_name(key.alg)),
                None => Lookup::Unknown,
            };
        }
        let mut candidates = self.keys.iter().filter(|k| alg_name(k.alg) == alg);
        match (candidates.next(), candidates.next()) {
            (Some(key), None) => Lookup::Found(Arc::clone(key)),
            (Some(_), Some(_)) => Lookup::Ambiguous,
            (None, _) => Lookup::Unknown,
        }
    }
}

/// The wire name of `alg` when it is one of [`ACCEPTED`] (every pinned key's is).
pub(super) fn alg_name(alg: Algorithm) -> &'static str {
    ACCEPTED
        .iter()
        .find(|(_, a)| *a == alg)
        .map_or("", |(name, _)| name)
}

/// `jwk` as a trusted signing key, or `None` when it is not one (see the module docs).
fn trusted(jwk: &Jwk) -> Option<TrustedKey> {
    let common = &jwk.common;
    if matches!(common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    if let Some(ops) = &common.key_operations
        && !ops.contains(&KeyOperations::Verify)
    {
        return None;
    }
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        // Symmetric keys, X25519, and key types this library does not know.
        _ => return None,
    };
    let alg = match common.key_algorithm {
        None => implied,
        Some(published) => published_alg(published)?,
    };
    // The published alg must fit the key: ES384 is not for a P-256 key, PS256 is for RSA.
    let fits = match implied {
        Algorithm::RS256 => alg.family() == AlgorithmFamily::Rsa,
        other => alg == other,
    };
    if !fits {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(TrustedKey {
        kid: common.key_id.clone(),
        alg,
        key,
    })
}

/// A JWK's published `alg` as a signature algorithm this server verifies with.
fn published_alg(alg: KeyAlgorithm) -> Option<Algorithm> {
    let alg = Algorithm::try_from(alg).ok()?;
    ACCEPTED.iter().any(|(_, a)| *a == alg).then_some(alg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Real public keys (RFC 7517 Appendix A.1 and RFC 8037 Appendix A.2).
    fn rsa() -> serde_json::Value {
        json!({"kty": "RSA", "kid": "rsa-1",
               "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
               "e": "AQAB"})
    }

    fn ec(crv: &str) -> serde_json::Value {
        json!({"kty": "EC", "crv": crv, "kid": format!("ec-{crv}"),
               "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
               "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})
    }

    fn ed() -> serde_json::Value {
        json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed-1",
               "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})
    }

    fn with(
        mut key: serde_json::Value,
        field: &str,
        value: serde_json::Value,
    ) -> serde_json::Value {
        key[field] = value;
        key
    }

    fn set(keys: Vec<serde_json::Value>) -> KeySet {
        KeySet::from_jwks(json!({ "keys": keys }).to_string().as_bytes()).unwrap()
    }

    fn pinned(keys: Vec<serde_json::Value>) -> Vec<(Option<String>, &'static str)> {
        set(keys)
            .keys
            .iter()
            .map(|k| (k.kid.clone(), alg_name(k.alg)))
            .collect()
    }

    #[test]
    fn each_key_is_pinned_to_its_published_or_implied_algorithm() {
        let kids = |v: &[(&str, &'static str)]| {
            v.iter()
                .map(|(k, a)| (Some((*k).to_owned()), *a))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            pinned(vec![rsa(), ec("P-256"), ed()]),
            kids(&[("rsa-1", "RS256"), ("ec-P-256", "ES256"), ("ed-1", "EdDSA")])
        );
        assert_eq!(
            pinned(vec![
                with(rsa(), "alg", json!("PS384")),
                with(ed(), "alg", json!("EdDSA"))
            ]),
            kids(&[("rsa-1", "PS384"), ("ed-1", "EdDSA")])
        );
    }

    #[test]
    fn keys_that_cannot_verify_a_signature_are_left_out() {
        let left_out = [
            json!({"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}),
            with(rsa(), "alg", json!("HS256")),
            with(rsa(), "alg", json!("RSA-OAEP")),
            with(rsa(), "alg", json!("ML-DSA-44")),
            with(rsa(), "alg", json!("ES256")),
            with(rsa(), "use", json!("enc")),
            with(rsa(), "key_ops", json!(["encrypt"])),
            with(ec("P-256"), "alg", json!("ES384")),
            ec("P-521"),
            json!({"kty": "OKP", "crv": "X25519", "x": "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}),
            json!({"kty": "RSA", "n": 5}),
            json!("not a key"),
        ];
        for key in left_out {
            let s = set(vec![key.clone(), ed()]);
            assert_eq!((s.len(), s.skipped()), (1, 1), "{key}");
        }
        let s = set(vec![
            with(rsa(), "use", json!("sig")),
            with(ed(), "key_ops", json!(["verify"])),
        ]);
        assert_eq!((s.len(), s.skipped()), (2, 0));
    }

    #[test]
    fn a_document_without_keys_is_unusable() {
        for bad in [&b"[]"[..], b"{}", b"{\"keys\": 1}", b"not json"] {
            assert!(KeySet::from_jwks(bad).is_err(), "{bad:?}");
        }
        assert!(KeySet::from_jwks(b"{\"keys\": []}").unwrap().is_empty());
    }

    #[test]
    fn lookup_by_kid_checks_the_algorithm() {
        let s = set(vec![rsa(), ec("P-256"), ed()]);
        assert!(
            matches!(s.find(Some("rsa-1"), "RS256"), Lookup::Found(k) if k.alg == Algorithm::RS256)
        );
        assert!(matches!(
            s.find(Some("rsa-1"), "HS256"),
            Lookup::OtherAlg("RS256")
        ));
        assert!(matches!(
            s.find(Some("rsa-1"), "PS256"),
            Lookup::OtherAlg("RS256")
        ));
        assert!(matches!(s.find(Some("ed-1"), "EdDSA"), Lookup::Found(_)));
        assert!(matches!(s.find(Some("gone"), "RS256"), Lookup::Unknown));
    }

    #[test]
    fn lookup_without_kid_needs_exactly_one_key_for_the_algorithm() {
        let anonymous = |k: serde_json::Value| with(k, "kid", serde_json::Value::Null);
        let s = set(vec![anonymous(rsa()), anonymous(ed())]);
        assert!(matches!(s.find(None, "RS256"), Lookup::Found(_)));
        assert!(matches!(s.find(None, "ES256"), Lookup::Unknown));
        let two = set(vec![rsa(), with(rsa(), "kid", json!("rsa-2"))]);
        assert!(matches!(two.find(None, "RS256"), Lookup::Ambiguous));
    }
}
