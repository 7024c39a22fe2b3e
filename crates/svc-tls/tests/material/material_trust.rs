//! `svc_tls::material`, trust: CA Secrets to root stores, and their errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::material::*;

// ---------------------------------------------------------------- trust

fn verify_with(roots: RootCertStore, ca: &TestCa) -> Result<(), rustls::Error> {
    let key = Alg::P256.generate();
    let mut params = CertificateParams::new(vec!["server.unikorn.test".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, ca.issuer()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(provider()),
    )
    .build()
    .unwrap();
    verifier
        .verify_server_cert(
            cert.der(),
            &[],
            &ServerName::try_from("server.unikorn.test").unwrap(),
            &[],
            rustls::pki_types::UnixTime::now(),
        )
        .map(|_| ())
}

#[test]
fn trust_takes_every_certificate_of_ca_crt_and_of_tls_crt_only_without_it() {
    let a = TestCa::new("issuer a");
    let b = TestCa::new("issuer b");
    let c = TestCa::new("issuer c");
    let d = TestCa::new("issuer d");
    let tls_crt = format!("{}{}", a.pem(), b.pem());
    let ca_crt = format!("{}{}", c.pem(), d.pem());
    // With ca.crt, tls.crt is no root (issue 50): in an intermediate's or a leaf's
    // Secret it is not the CA chosen to be trusted.
    let secret = tls_secret(&[
        (TLS_CRT, tls_crt.as_bytes()),
        (TLS_KEY, b"ignored for trust"),
        ("ca.crt", ca_crt.as_bytes()),
    ]);
    let roots = load_trust(&secret).unwrap();
    assert_eq!(roots.len(), 2);
    for ca in [&c, &d] {
        verify_with(roots.clone(), ca).unwrap();
    }
    for ca in [&a, &b] {
        assert!(
            verify_with(roots.clone(), ca).is_err(),
            "tls.crt is no root"
        );
    }
    let stranger = TestCa::new("stranger");
    assert!(verify_with(roots, &stranger).is_err());

    // Without ca.crt (Go's CA Secrets), every certificate of tls.crt is.
    let secret = tls_secret(&[(TLS_CRT, tls_crt.as_bytes()), (TLS_KEY, b"ignored")]);
    let roots = load_trust(&secret).unwrap();
    assert_eq!(roots.len(), 2);
    for ca in [&a, &b] {
        verify_with(roots.clone(), ca).unwrap();
    }
    // An empty ca.crt is no ca.crt.
    let secret = tls_secret(&[(TLS_CRT, a.pem().as_bytes()), ("ca.crt", b"")]);
    verify_with(load_trust(&secret).unwrap(), &a).unwrap();

    // cert-manager's CA issuer Secret: tls.crt and ca.crt are the same CA.
    let secret = tls_secret(&[
        (TLS_CRT, a.pem().as_bytes()),
        ("ca.crt", a.pem().as_bytes()),
    ]);
    verify_with(load_trust(&secret).unwrap(), &a).unwrap();

    // An empty tls.crt is fine when ca.crt has the roots.
    let secret = tls_secret(&[(TLS_CRT, b""), ("ca.crt", b.pem().as_bytes())]);
    verify_with(load_trust(&secret).unwrap(), &b).unwrap();
}

#[test]
fn trust_errors_name_the_secret_and_key() {
    let a = TestCa::new("issuer a");
    let check = |err: &MaterialError| {
        let msg = err.to_string();
        assert!(msg.contains("unikorn/unikorn-client-certificate"), "{msg}");
    };

    // With ca.crt, tls.crt is not read, so it need not be there (the trust-only
    // watch drops it before caching).
    verify_with(
        load_trust(&tls_secret(&[("ca.crt", a.pem().as_bytes())])).unwrap(),
        &a,
    )
    .unwrap();
    let err = load_trust(&tls_secret(&[(TLS_KEY, b"key")])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::MissingKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    let err = load_trust(&tls_secret(&[(TLS_CRT, b"")])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::EmptyKey, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    let err = load_trust(&tls_secret(&[(TLS_CRT, b"not pem at all")])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    let err = load_trust(&tls_secret(&[
        (TLS_CRT, a.pem().as_bytes()),
        ("ca.crt", b"garbage"),
    ]))
    .unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NotPem { .. }, Some("ca.crt"))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("ca.crt"));

    let err = load_trust(&tls_secret(&[(
        TLS_CRT,
        a.pem().replace("CERTIFICATE", "PUBLIC KEY").as_bytes(),
    )]))
    .unwrap_err();
    check(&err);
    assert!(
        matches!(
            (err.kind(), err.data_key()),
            (MaterialErrorKind::NoCertificate, Some(TLS_CRT))
        ),
        "{err:?}"
    );

    // Certificates that are not usable as trust anchors.
    let junk = format!(
        "{}{}",
        pem("CERTIFICATE", b"\x30\x03\x02\x01\x01"),
        pem("CERTIFICATE", b"\x30\x00")
    );
    let err = load_trust(&tls_secret(&[(TLS_CRT, junk.as_bytes())])).unwrap_err();
    check(&err);
    assert!(
        matches!(
            err.kind(),
            MaterialErrorKind::NoUsableRoot { ignored: 2, .. }
        ),
        "{err:?}"
    );

    // One usable among unusable ones: used, and the others counted.
    let mixed = format!("{junk}{}", a.pem());
    let trust = load_trust_detailed(&tls_secret(&[(TLS_CRT, mixed.as_bytes())])).unwrap();
    assert_eq!((trust.len(), trust.ignored()), (1, 2));
    assert!(trust.not_after().is_some(), "the usable root's notAfter");
    verify_with((**trust.roots()).clone(), &a).unwrap();
}
