//! `svc_tls::material`, supported material: every key type and format loads into
//! an identity that completes a real TLS 1.3 client-auth handshake.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::material::*;

#[test]
fn rsa_keys_load_in_pkcs8_and_pkcs1() {
    let ca = TestCa::new("rsa ca");
    for alg in [Alg::Rsa2048, Alg::Rsa3072, Alg::Rsa4096] {
        let key = alg.generate();
        check_loads(&ca, alg, &key, Format::Pkcs8);
        check_loads(&ca, alg, &key, Format::Pkcs1);
    }
}

/// cert-manager issues RSA-8192 too, and Go loads it: so do we (the load happens when
/// the watch delivers the Secret, not on the handshake path).
#[test]
fn an_rsa_8192_key_loads() {
    let ca = TestCa::new("rsa ca");
    let key = Alg::Rsa8192.generate();
    check_loads(&ca, Alg::Rsa8192, &key, Format::Pkcs8);
}

#[test]
fn ecdsa_keys_load_in_pkcs8_and_sec1() {
    let ca = TestCa::new("ec ca");
    for alg in [Alg::P256, Alg::P384, Alg::P521] {
        let key = alg.generate();
        check_loads(&ca, alg, &key, Format::Pkcs8);
        check_loads(&ca, alg, &key, Format::Sec1);
        check_loads(&ca, alg, &key, Format::Sec1NoCurve);
    }
}

#[test]
fn ed25519_key_loads_in_pkcs8() {
    let ca = TestCa::new("ed ca");
    check_loads(&ca, Alg::Ed25519, &Alg::Ed25519.generate(), Format::Pkcs8);
}

#[test]
fn a_chain_without_intermediates_and_extra_sections_is_fine() {
    // A lone leaf; a key file that also carries the certificate (some tools
    // concatenate them); CRLF line endings.
    let ca = TestCa::new("ca");
    let key = Alg::P256.generate();
    let leaf = ca.issue(&key, &leaf_params(&[1]));
    let key_file = format!("{leaf}{}", key.serialize_pem()).replace('\n', "\r\n");
    let identity = load_identity_from_pem(
        &secret_ref(),
        leaf.as_bytes(),
        key_file.as_bytes(),
        &provider(),
    )
    .unwrap();
    assert_eq!(identity.chain().len(), 1);
    assert_eq!(identity.serial_hex(), "01");
}

#[test]
fn identity_debug_shows_serial_expiry_and_kind_but_no_key_material() {
    let ca = TestCa::new("ca");
    for alg in [Alg::Rsa2048, Alg::P256, Alg::Ed25519] {
        let key = alg.generate();
        let leaf = ca.issue(&key, &leaf_params(&[0x42, 0x17]));
        let key_pem = key.serialize_pem();
        let identity = load_identity_from_pem(
            &secret_ref(),
            leaf.as_bytes(),
            key_pem.as_bytes(),
            &provider(),
        )
        .unwrap();
        let debug = format!("{identity:?}");
        let pretty = format!("{identity:#?}");
        assert!(debug.contains("4217"), "{debug}");
        assert!(debug.contains("not_after"), "{debug}");
        assert!(debug.contains(&format!("{:?}", alg.kind())), "{debug}");
        for text in [&debug, &pretty] {
            assert_no_key_material(text, &key);
        }
        // Also no certificate dump: Debug is for logs.
        assert!(debug.len() < 200, "{debug}");
    }
}
