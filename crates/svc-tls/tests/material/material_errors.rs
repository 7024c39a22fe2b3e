//! `svc_tls::material`, malformed material: every malformed Secret gives its
//! specific error, naming the Secret and data key, without key bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::material::*;

#[test]
fn wrong_secret_type_is_rejected() {
    let f = Fixture::new();
    for type_ in [Some("Opaque"), None] {
        let secret = secret_of_type(
            type_,
            &[
                (TLS_CRT, f.leaf.as_bytes()),
                (TLS_KEY, f.key_pem.as_bytes()),
            ],
        );
        let err = load_identity(&secret, &provider()).unwrap_err();
        f.check_message(&err);
        assert!(
            matches!(err.kind(), MaterialErrorKind::WrongType { found, .. } if found.as_deref() == type_),
            "{err:?}"
        );
        assert!(err.to_string().contains("kubernetes.io/tls"));
        // As a CA, a Secret of another type is read for `ca.crt` alone (an Opaque
        // bundle): without one, it is refused naming that key.
        let err = load_trust(&secret).unwrap_err();
        assert!(
            matches!(err.kind(), MaterialErrorKind::MissingKey) && err.data_key() == Some("ca.crt"),
            "{err:?}"
        );
    }
}

#[test]
fn missing_and_empty_data_keys_are_named() {
    let f = Fixture::new();
    for (data, want_key, empty) in [
        (vec![(TLS_KEY, f.key_pem.as_bytes())], TLS_CRT, false),
        (vec![(TLS_CRT, f.leaf.as_bytes())], TLS_KEY, false),
        (
            vec![(TLS_CRT, &b""[..]), (TLS_KEY, f.key_pem.as_bytes())],
            TLS_CRT,
            true,
        ),
        (
            vec![(TLS_CRT, f.leaf.as_bytes()), (TLS_KEY, &b""[..])],
            TLS_KEY,
            true,
        ),
    ] {
        let err = load_identity(&tls_secret(&data), &provider()).unwrap_err();
        f.check_message(&err);
        match (err.kind(), err.data_key(), empty) {
            (MaterialErrorKind::MissingKey, Some(key), false)
            | (MaterialErrorKind::EmptyKey, Some(key), true) => assert_eq!(key, want_key),
            _ => panic!("{err:?}"),
        }
    }
    // No data at all.
    let mut secret = tls_secret(&[]);
    secret.data = None;
    let err = load_identity(&secret, &provider()).unwrap_err();
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::MissingKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // The pure core reports empty input the same way.
    let err =
        load_identity_from_pem(&secret_ref(), b"", f.key_pem.as_bytes(), &provider()).unwrap_err();
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EmptyKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );
}

#[test]
fn certificate_that_is_not_pem_or_has_no_certificate() {
    let f = Fixture::new();
    let leaf_der = CertificateDer::from_pem_slice(f.leaf.as_bytes())
        .unwrap()
        .to_vec();
    let key = f.key_pem.as_bytes();

    // DER instead of PEM.
    let err = f.load(&leaf_der, key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // Broken base64 inside a CERTIFICATE section.
    let broken = f.leaf.replacen('M', "*", 3);
    let err = f.load(broken.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // A section without its END line.
    let truncated = &f.leaf[..f.leaf.len() - 30];
    let err = f.load(truncated.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // PEM, but only a public key.
    let public = f.key.public_key_pem();
    let err = f.load(public.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NoCertificate, Some(TLS_CRT))
        ),
        "{err:?}"
    );
    // A CERTIFICATE section that is not X.509.
    let garbage = pem(
        "CERTIFICATE",
        b"\x30\x03\x02\x01\x01 definitely not a certificate",
    );
    let err = f.load(garbage.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::InvalidCertificate { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );
}

#[test]
fn key_that_is_not_pem_has_no_key_or_is_unparseable() {
    let f = Fixture::new();
    let cert = f.leaf.as_bytes();

    let err = f.load(cert, &f.key.serialize_der());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    let err = f.load(cert, f.key_pem.replacen('M', "*", 2).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // Only a certificate in tls.key (a common copy-paste mistake).
    let err = f.load(cert, cert);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NoPrivateKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // A PRIVATE KEY section that is not a key.
    let err = f.load(
        cert,
        pem("PRIVATE KEY", b"\x01\x02\x03 nonsense").as_bytes(),
    );
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::UnparseableKey { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // A real key, truncated.
    let der = f.key.serialize_der();
    let err = f.load(cert, pem("PRIVATE KEY", &der[..der.len() - 10]).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::UnparseableKey { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // An RSA key whose private exponent is corrupted: the provider's consistency
    // check rejects it.
    let rsa = Alg::Rsa2048.generate();
    let rsa_leaf = f.ca.issue(&rsa, &leaf_params(&[8]));
    let mut pkcs1 = to_pkcs1(&rsa.serialize_der());
    let n = pkcs1.len();
    pkcs1[n / 2] ^= 0x55;
    let err = f.load(
        rsa_leaf.as_bytes(),
        pem("RSA PRIVATE KEY", &pkcs1).as_bytes(),
    );
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::UnparseableKey { .. }, Some(TLS_KEY))
        ),
        "{err:?}"
    );
}

#[test]
fn encrypted_keys_are_recognised() {
    let f = Fixture::new();
    let cert = f.leaf.as_bytes();
    // PKCS#8 EncryptedPrivateKeyInfo: SEQUENCE { AlgorithmIdentifier (PBES2), OCTET STRING }.
    let pbes2_oid = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d];
    let mut alg = tlv_of(Tag::ObjectIdentifier, &pbes2_oid);
    alg.extend(tlv_of(Tag::Sequence, &[]));
    let mut body = tlv_of(Tag::Sequence, &alg);
    body.extend(tlv_of(Tag::OctetString, &[0xa5; 200]));
    let encrypted = tlv_of(Tag::Sequence, &body);

    // As `openssl pkcs8 -topk8 -v2 aes256` writes it.
    let err = f.load(cert, pem("ENCRYPTED PRIVATE KEY", &encrypted).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EncryptedKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // Mislabelled as an ordinary PRIVATE KEY.
    let err = f.load(cert, pem("PRIVATE KEY", &encrypted).as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EncryptedKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    // Legacy OpenSSL encryption headers.
    let legacy = pem("EC PRIVATE KEY", &[0x11; 120]).replacen(
        "-----\n",
        "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\n",
        1,
    );
    let err = f.load(cert, legacy.as_bytes());
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EncryptedKey, Some(TLS_KEY))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("encrypted"));
}

/// An RSA public key with a `bits`-bit modulus, as a certificate subject. Only
/// the certificate is needed: the loader rejects it before reading any key.
struct RsaPublicKeyOfSize(Vec<u8>);

impl RsaPublicKeyOfSize {
    fn new(bits: usize) -> Self {
        let mut modulus = vec![0x00, 0xc3];
        modulus.resize(bits / 8 + 1, 0x5b);
        let last = modulus.len() - 1;
        modulus[last] |= 1;
        let mut rsa_key = tlv_of(Tag::Integer, &modulus);
        rsa_key.extend(tlv_of(Tag::Integer, &[0x01, 0x00, 0x01]));
        Self(tlv_of(Tag::Sequence, &rsa_key))
    }
}

impl rcgen::PublicKeyData for RsaPublicKeyOfSize {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }
    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_RSA_SHA256
    }
}

#[test]
fn unsupported_algorithms_are_named() {
    let f = Fixture::new();
    let key = f.key_pem.as_bytes();

    // RSA outside 2048..=8192 bits, in the certificate.
    for bits in [1024, 16384] {
        let leaf =
            f.ca.issue(&RsaPublicKeyOfSize::new(bits), &leaf_params(&[9]));
        let err = f.load(leaf.as_bytes(), key);
        match (err.kind(), err.data_key()) {
            (MaterialErrorKind::UnsupportedAlgorithm { algorithm, .. }, Some(TLS_CRT)) => {
                assert_eq!(algorithm, &format!("RSA-{bits}"));
            }
            _ => panic!("{err:?}"),
        }
        assert!(err.to_string().contains(&format!("RSA-{bits}")));
    }

    // A curve outside P-256/P-384/P-521 (secp256k1), in the certificate: the
    // curve is named. rcgen cannot make one, so a P-384 leaf's curve OID
    // (1.3.132.0.34) is rewritten to secp256k1's (1.3.132.0.10), same length.
    let p384 = Alg::P384.generate();
    let leaf = f.ca.issue(&p384, &leaf_params(&[10]));
    let der = rustls_pki_types::CertificateDer::from_pem_slice(leaf.as_bytes()).unwrap();
    let p384_oid = [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];
    let mut der = der.to_vec();
    let at = der
        .windows(p384_oid.len())
        .position(|w| w == p384_oid)
        .unwrap();
    der[at + p384_oid.len() - 1] = 0x0a;
    let leaf = pem("CERTIFICATE", &der);
    let err = f.load(leaf.as_bytes(), p384.serialize_pem().as_bytes());
    match (err.kind(), err.data_key()) {
        (MaterialErrorKind::UnsupportedAlgorithm { algorithm, .. }, Some(TLS_CRT)) => {
            assert!(algorithm.contains("1.3.132.0.10"), "{algorithm}");
        }
        _ => panic!("{err:?}"),
    }
    // The error lists what is supported, P-521 included.
    assert!(err.to_string().contains("ECDSA P-521"), "{err}");
}

#[test]
fn p521_key_next_to_another_certificate_is_a_mismatch_naming_both() {
    let f = Fixture::new();
    let p521 = Alg::P521.generate();
    for format in [Format::Pkcs8, Format::Sec1] {
        let err = f.load(f.leaf.as_bytes(), key_pem(&p521, format).as_bytes());
        match (err.kind(), err.data_key()) {
            (MaterialErrorKind::KeyMismatch { detail, .. }, Some(TLS_KEY)) => {
                assert!(detail.contains("ECDSA P-521"), "{detail}");
            }
            _ => panic!("{format:?}: {err:?}"),
        }
    }
    // And the other way round: a P-521 certificate with a P-256 key.
    let leaf = f.ca.issue(&p521, &leaf_params(&[11]));
    let err = f.load(leaf.as_bytes(), f.key_pem.as_bytes());
    match (err.kind(), err.data_key()) {
        (MaterialErrorKind::KeyMismatch { detail, .. }, Some(TLS_KEY)) => {
            assert!(detail.contains("ECDSA P-521"), "{detail}");
        }
        _ => panic!("{err:?}"),
    }
}

#[test]
fn key_not_matching_the_certificate_is_rejected() {
    let f = Fixture::new();
    // Same type, different key.
    let other = Alg::P256.generate();
    let err = f.load(f.leaf.as_bytes(), other.serialize_pem().as_bytes());
    match (err.kind(), err.data_key()) {
        (MaterialErrorKind::KeyMismatch { cert_key, .. }, key) => {
            assert_eq!((key, *cert_key), (Some(TLS_KEY), TLS_CRT));
        }
        _ => panic!("{err:?}"),
    }
    assert!(err.to_string().contains("does not match"));
    // Same type in another format.
    let err = f.load(f.leaf.as_bytes(), key_pem(&other, Format::Sec1).as_bytes());
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );
    // Different types: the message says which.
    for alg in [Alg::Rsa2048, Alg::P384, Alg::Ed25519] {
        let other = alg.generate();
        let err = f.load(f.leaf.as_bytes(), other.serialize_pem().as_bytes());
        match err.kind() {
            MaterialErrorKind::KeyMismatch { detail, .. } => {
                assert!(detail.contains("ECDSA P-256"), "{detail}");
            }
            _ => panic!("{alg:?}: {err:?}"),
        }
    }
    // RSA of the same size, different key, PKCS#1.
    let rsa = Alg::Rsa2048.generate();
    let rsa_leaf = f.ca.issue(&rsa, &leaf_params(&[11]));
    let other = Alg::Rsa2048.generate();
    let err = f.load(
        rsa_leaf.as_bytes(),
        key_pem(&other, Format::Pkcs1).as_bytes(),
    );
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );
    // Ed25519, different key.
    let ed = Alg::Ed25519.generate();
    let ed_leaf = f.ca.issue(&ed, &leaf_params(&[12]));
    let err = f.load(
        ed_leaf.as_bytes(),
        Alg::Ed25519.generate().serialize_pem().as_bytes(),
    );
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );
}

#[test]
fn certificate_outside_its_validity_is_an_error() {
    let f = Fixture::new();
    let key = f.key_pem.as_bytes();

    let mut expired = leaf_params(&[13]);
    expired.not_before = rcgen::date_time_ymd(2001, 1, 1);
    expired.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let leaf = f.ca.issue(&f.key, &expired);
    let err = f.load(leaf.as_bytes(), key);
    match (err.kind(), err.data_key()) {
        (
            MaterialErrorKind::CertificateExpired {
                not_after,
                not_after_text,
                ..
            },
            Some(TLS_CRT),
        ) => {
            assert_eq!(
                *not_after,
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_009_843_200)
            );
            assert!(not_after_text.contains("2002"), "{not_after_text}");
        }
        _ => panic!("{err:?}"),
    }
    assert!(!err.is_not_yet_valid());

    let mut future = leaf_params(&[14]);
    future.not_before = rcgen::date_time_ymd(2080, 1, 1);
    let leaf = f.ca.issue(&f.key, &future);
    let err = f.load(leaf.as_bytes(), key);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (
                MaterialErrorKind::CertificateNotYetValid { .. },
                Some(TLS_CRT)
            )
        ),
        "{err:?}"
    );
    assert!(err.is_not_yet_valid());

    // The same certificate loads once its time has come (explicit clock).
    let secret = tls_secret(&[(TLS_CRT, leaf.as_bytes()), (TLS_KEY, key)]);
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(3_471_292_800 + 60); // 2080-01-01
    let identity = load_identity_at(&secret, &provider(), at).unwrap();
    assert_eq!(identity.serial_hex(), "0e");
    // ...and is expired after notAfter.
    let after = identity.not_after() + Duration::from_secs(1);
    let err = load_identity_at(&secret, &provider(), after).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::CertificateExpired { .. }),
        "{err:?}"
    );
}

#[test]
fn oversized_values_are_refused_before_parsing_naming_the_key() {
    use svc_tls::material::{CA_CRT, MAX_CERTIFICATE_VALUE_BYTES, MAX_KEY_VALUE_BYTES};
    let f = Fixture::new();
    // A real certificate followed by padding past the cap: valid PEM up front, so only
    // the size check can refuse it.
    let padded = |pem: &str, cap: usize| {
        let mut v = pem.as_bytes().to_vec();
        v.resize(cap + 1, b'\n');
        v
    };
    let big_crt = padded(&f.leaf, MAX_CERTIFICATE_VALUE_BYTES);
    let big_key = padded(&f.key_pem, MAX_KEY_VALUE_BYTES);
    for (data, key, max) in [
        (
            vec![(TLS_CRT, &big_crt[..]), (TLS_KEY, f.key_pem.as_bytes())],
            TLS_CRT,
            MAX_CERTIFICATE_VALUE_BYTES,
        ),
        (
            vec![(TLS_CRT, f.leaf.as_bytes()), (TLS_KEY, &big_key[..])],
            TLS_KEY,
            MAX_KEY_VALUE_BYTES,
        ),
    ] {
        let err = load_identity(&tls_secret(&data), &provider()).unwrap_err();
        f.check_message(&err);
        assert_eq!(err.data_key(), Some(key));
        assert_eq!(
            err.kind(),
            &MaterialErrorKind::TooLarge { len: max + 1, max }
        );
        assert!(
            err.to_string()
                .contains(&format!("more than the {max} bytes")),
            "{err}"
        );
    }
    // At the cap exactly, the value is read (and here loads).
    let mut at_cap = f.leaf.as_bytes().to_vec();
    at_cap.resize(MAX_CERTIFICATE_VALUE_BYTES, b'\n');
    load_identity(
        &tls_secret(&[(TLS_CRT, &at_cap[..]), (TLS_KEY, f.key_pem.as_bytes())]),
        &provider(),
    )
    .unwrap();

    // CA Secrets: tls.crt and ca.crt alike.
    for key in [TLS_CRT, CA_CRT] {
        let data = if key == TLS_CRT {
            vec![(TLS_CRT, &big_crt[..])]
        } else {
            vec![(TLS_CRT, f.leaf.as_bytes()), (CA_CRT, &big_crt[..])]
        };
        let err = load_trust(&tls_secret(&data)).unwrap_err();
        assert_eq!(err.data_key(), Some(key), "{err}");
        assert!(
            matches!(err.kind(), MaterialErrorKind::TooLarge { .. }),
            "{err:?}"
        );
    }
}
