//! The crypto provider: aws-lc-rs, with the hybrid post-quantum key exchange
//! offered first and a key loader calling only the loader for the key type the DER
//! names.

use std::sync::Arc;

use rustls::crypto::aws_lc_rs::kx_group;
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::sign::SigningKey;
use rustls_pki_types::PrivateKeyDer;

use super::KeyKind;
use super::key::classify_der;

/// The aws-lc-rs crypto provider offering `X25519MLKEM768` first, with a key
/// loader that reads the key type from the DER first and calls only the matching
/// aws-lc-rs loader.
///
/// **Key exchange**: `X25519MLKEM768`, then `X25519`, `secp256r1`,
/// `secp384r1`, the order of rustls's own default with its `prefer-post-quantum`
/// feature, and what Go's `crypto/tls` offers since Go 1.24. The order is set here
/// rather than by that cargo feature (off in this workspace, and unified by
/// whichever crate in a graph turns it on), so it does not depend on the build. A
/// client hello carries two key shares, the hybrid and a plain `X25519` one made
/// from the same X25519 key, so a server without ML-KEM (OpenSSL 3.0, Go 1.23)
/// picks `X25519` in the same round trip (no HelloRetryRequest).
///
/// rustls's own aws-lc-rs key provider tries RSA, then ECDSA P-256, P-384, P-521,
/// then Ed25519, and each failed attempt on a PKCS#8 key fully parses it (for
/// Ed25519 and EC keys that includes a scalar multiplication). An Ed25519 key is
/// thus parsed five times and a P-384 PKCS#8 key three times. This provider
/// parses each key once. Keys this loader does not recognise go to rustls's loader
/// unchanged.
///
/// **Cipher suites**: rustls's aws-lc-rs suites, in Go's `crypto/tls` order (as
/// BoringSSL's and Chrome's): `TLS13_AES_128_GCM_SHA256`, then
/// `TLS13_CHACHA20_POLY1305_SHA256`, then `TLS13_AES_256_GCM_SHA384` (and the TLS 1.2
/// suites likewise, 128-bit AES first). rustls offers AES-256 first, whose SHA-384
/// key schedule cost our client about a tenth of its handshake CPU. Why:
/// `docs/decisions/cipher-suites-go-order.md`.
///
/// **Signature checks**: aws-lc-rs's, with a certificate's signature by its
/// issuer remembered per thread once checked (the same chain is presented on
/// every handshake); every other check of a chain runs each time. Why:
/// `docs/decisions/certificate-signature-memo.md`.
pub fn crypto_provider() -> CryptoProvider {
    let default = rustls::crypto::aws_lc_rs::default_provider();
    let mut cipher_suites = default.cipher_suites.clone();
    // Stable: TLS 1.3 before TLS 1.2 as rustls has them, AES-256 last in each.
    cipher_suites.sort_by_key(|suite| {
        (
            suite.version().version == rustls::ProtocolVersion::TLSv1_2,
            aes_256(suite.suite()),
        )
    });
    CryptoProvider {
        cipher_suites,
        kx_groups: KX_GROUPS.to_vec(),
        signature_verification_algorithms: super::verify_memo::memoized(
            default.signature_verification_algorithms,
        ),
        key_provider: &KEY_TYPE_DISPATCH,
        ..default
    }
}

fn aes_256(suite: rustls::CipherSuite) -> bool {
    use rustls::CipherSuite as S;
    matches!(
        suite,
        S::TLS13_AES_256_GCM_SHA384
            | S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    )
}

/// The key exchange groups [`crypto_provider`] offers, most preferred first: the
/// hybrid post-quantum `X25519MLKEM768`, then the classical `X25519`, `secp256r1`
/// and `secp384r1` for servers without ML-KEM. Why:
/// `docs/decisions/key-exchange-hybrid-first.md`.
static KX_GROUPS: &[&dyn SupportedKxGroup] = &[
    kx_group::X25519MLKEM768,
    kx_group::X25519,
    kx_group::SECP256R1,
    kx_group::SECP384R1,
];

static KEY_TYPE_DISPATCH: KeyTypeDispatch = KeyTypeDispatch;

#[derive(Debug)]
struct KeyTypeDispatch;

impl rustls::crypto::KeyProvider for KeyTypeDispatch {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        use rustls::crypto::aws_lc_rs::sign;
        let kind = classify_der(&key_der).ok().flatten();
        match (kind, &key_der) {
            (Some(KeyKind::EcdsaP256 | KeyKind::EcdsaP384 | KeyKind::EcdsaP521), _)
            | (_, PrivateKeyDer::Sec1(_)) => sign::any_ecdsa_type(&key_der),
            (Some(KeyKind::Ed25519), PrivateKeyDer::Pkcs8(pkcs8)) => sign::any_eddsa_type(pkcs8),
            // RSA is rustls's first attempt anyway.
            _ => rustls::crypto::aws_lc_rs::default_provider()
                .key_provider
                .load_private_key(key_der),
        }
    }

    fn fips(&self) -> bool {
        rustls::crypto::aws_lc_rs::default_provider()
            .key_provider
            .fips()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_suites_are_go_s_order_and_all_of_rustls_s() {
        let ours: Vec<_> = crypto_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        let mut theirs: Vec<_> = rustls::crypto::aws_lc_rs::default_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        use rustls::CipherSuite as S;
        assert_eq!(
            ours[..3],
            [
                S::TLS13_AES_128_GCM_SHA256,
                S::TLS13_CHACHA20_POLY1305_SHA256,
                S::TLS13_AES_256_GCM_SHA384
            ]
        );
        let mut sorted = ours.clone();
        sorted.sort_by_key(|s| u16::from(*s));
        theirs.sort_by_key(|s| u16::from(*s));
        assert_eq!(sorted, theirs, "the same suites, reordered");
    }
}
