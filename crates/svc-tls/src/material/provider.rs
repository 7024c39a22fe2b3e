//! The provider's key loader: aws-lc-rs, calling only the loader for the key
//! type the DER names.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::sign::SigningKey;
use rustls_pki_types::PrivateKeyDer;

use super::KeyKind;
use super::key::classify_der;

/// The aws-lc-rs crypto provider with a key loader that reads the key type from
/// the DER first and calls only the matching aws-lc-rs loader.
///
/// rustls's own aws-lc-rs key provider tries RSA, then ECDSA P-256, P-384, P-521,
/// then Ed25519, and each failed attempt on a PKCS#8 key fully parses it (for
/// Ed25519 and EC keys that includes a scalar multiplication). An Ed25519 key is
/// thus parsed five times and a P-384 PKCS#8 key three times. This provider
/// parses each key once. Everything else (cipher suites, key exchange,
/// signature verification) is `rustls::crypto::aws_lc_rs::default_provider()`.
/// Keys this loader does not recognise go to rustls's loader unchanged.
pub fn crypto_provider() -> CryptoProvider {
    CryptoProvider {
        key_provider: &KEY_TYPE_DISPATCH,
        ..rustls::crypto::aws_lc_rs::default_provider()
    }
}

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
