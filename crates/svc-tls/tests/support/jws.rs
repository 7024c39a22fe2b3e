//! Shared parts of the `principal_*` tests: the policies, a sample principal,
//! token forging with a fixture's key, and rejection helpers. The `pub use` block
//! is the prelude those tests import with `use support::jws::*` (each test binary
//! uses part of it).
#![allow(unused_imports)]

pub(crate) use super::keys::{self, Fixture};
pub(crate) use base64::Engine as _;
pub(crate) use base64::engine::general_purpose::URL_SAFE_NO_PAD;
pub(crate) use rsa::pkcs8::DecodePublicKey as _;
pub(crate) use rsa::signature::Verifier as _;
pub(crate) use rustls::SignatureScheme;
pub(crate) use serde::Deserialize;
pub(crate) use svc_tls::principal::{
    Algorithm, AlgorithmPolicy, CertificateError, DEFAULT_MAX_TOKEN_BYTES, Part, PeerCertificate,
    Principal, SignError, VerifyError, sign_with_key, verify,
};

/// The strict policy, for peers that still run the PS512-only verifier.
pub(crate) const PS512_ONLY: AlgorithmPolicy = AlgorithmPolicy::Ps512Only;
/// The default policy: the key decides (PS512, ES256, ES384).
pub(crate) const BY_KEY: AlgorithmPolicy = AlgorithmPolicy::Ps512OrEcdsa;

pub(crate) fn principal() -> Principal {
    Principal {
        organization_id: Some("org-7f3a".into()),
        project_id: Some("proj-19c2".into()),
        actor: Some("alice@example.com".into()),
    }
}

/// The URL the sample principals are signed for; its origin is their audience.
pub(crate) fn peer_url() -> reqwest::Url {
    reqwest::Url::parse("https://peer.svc.test/api").unwrap()
}

/// The audience of tokens signed for [`peer_url`].
pub(crate) const PEER_AUDIENCE: &str = "https://peer.svc.test";

pub(crate) fn peer(fixture: &Fixture) -> PeerCertificate {
    PeerCertificate::from_der(fixture.cert_der.clone()).unwrap()
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A token with any header and payload, correctly signed with the fixture's key
/// through the provider (RSA-PSS SHA-512 for RSA keys, DER ECDSA converted to r||s
/// is not needed here: only RSA keys forge).
pub(crate) fn forge(fixture: &Fixture, header: &str, payload: &[u8]) -> String {
    let input = format!("{}.{}", b64(header.as_bytes()), b64(payload));
    let signer = fixture
        .signing_key
        .choose_scheme(&[SignatureScheme::RSA_PSS_SHA512])
        .unwrap();
    let signature = signer.sign(input.as_bytes()).unwrap();
    format!("{input}.{}", b64(&signature))
}

pub(crate) fn good_token(fixture: &Fixture) -> String {
    sign_with_key(
        fixture.signing_key.as_ref(),
        &peer_url(),
        &principal(),
        PS512_ONLY,
    )
    .unwrap()
    .into_string()
}

pub(crate) fn reject(token: &str, fixture: &Fixture, policy: AlgorithmPolicy) -> VerifyError {
    match verify::<Principal>(token, &peer(fixture), policy) {
        Ok(p) => panic!("token was accepted: {p:?}: {token}"),
        Err(e) => e,
    }
}
