//! `svc_tls::material`: the identity cache, and corrupted material never panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::material::*;

// ---------------------------------------------------------------- the identity cache

#[test]
fn identity_cache_reuses_identical_bytes_and_reloads_changed_ones() {
    let ca = TestCa::new("ca");
    let key_a = Alg::Rsa2048.generate();
    let leaf_a = ca.issue(&key_a, &leaf_params(&[0xa1]));
    let secret_a = tls_secret(&[
        (TLS_CRT, leaf_a.as_bytes()),
        (TLS_KEY, key_a.serialize_pem().as_bytes()),
    ]);
    let key_b = Alg::P256.generate();
    let leaf_b = ca.issue(&key_b, &leaf_params(&[0xb2]));
    let secret_b = tls_secret(&[
        (TLS_CRT, leaf_b.as_bytes()),
        (TLS_KEY, key_b.serialize_pem().as_bytes()),
    ]);
    let cache = IdentityCache::new(Arc::new(material::crypto_provider()));

    // Unchanged bytes: the very same loaded key is served again, with one parse.
    assert_eq!(cache.full_loads(), 0);
    let first = cache.load(&secret_a).unwrap();
    let again = cache.load(&secret_a.clone()).unwrap();
    assert!(Arc::ptr_eq(first.certified_key(), again.certified_key()));
    assert_eq!(again.serial_hex(), "a1");
    assert_eq!(cache.full_loads(), 1);

    // A rotation is picked up at once: one more parse, then none.
    let rotated = cache.load(&secret_b).unwrap();
    cache.load(&secret_b).unwrap();
    assert_eq!(cache.full_loads(), 2);
    assert_eq!(rotated.serial_hex(), "b2");
    assert_eq!(rotated.key_kind(), KeyKind::EcdsaP256);

    // Only the key changes (to one that does not match): the full check runs.
    let mut mismatched = secret_b.clone();
    mismatched.data.as_mut().unwrap().insert(
        TLS_KEY.to_owned(),
        ByteString(key_a.serialize_pem().into_bytes()),
    );
    let err = cache.load(&mismatched).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{err:?}"
    );

    // A failed load does not evict the good entry, and is remembered (one parse).
    let again = cache.load(&secret_b).unwrap();
    assert!(Arc::ptr_eq(rotated.certified_key(), again.certified_key()));
    cache.load(&mismatched).unwrap_err();
    assert_eq!(cache.full_loads(), 3);

    // Checks that do not depend on the two values still run on a hit.
    let mut opaque = secret_b.clone();
    opaque.type_ = Some("Opaque".into());
    let err = cache.load(&opaque).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::WrongType { .. }),
        "{err:?}"
    );

    // Validity is checked against the given time even on a hit.
    let after = rotated.not_after() + Duration::from_secs(1);
    let err = cache.load_at(&secret_b, after).unwrap_err();
    assert!(
        matches!(err.kind(), MaterialErrorKind::CertificateExpired { .. }),
        "{err:?}"
    );
    let err = cache
        .load_at(&secret_b, SystemTime::UNIX_EPOCH)
        .unwrap_err();
    assert!(err.is_not_yet_valid(), "{err:?}");
    // ...and the entry is still there for the present.
    let again = cache.load(&secret_b).unwrap();
    assert!(Arc::ptr_eq(rotated.certified_key(), again.certified_key()));

    // Cleared: a full load, a new key object with the same content.
    cache.clear();
    let fresh = cache.load(&secret_b).unwrap();
    assert!(!Arc::ptr_eq(rotated.certified_key(), fresh.certified_key()));
    assert_eq!(fresh.chain(), rotated.chain());

    let debug = format!("{cache:?}");
    assert!(debug.contains("b2"), "{debug}");
    assert_no_key_material(&debug, &key_b);
}

// ---------------------------------------------------------------- robustness

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Corrupts `der`: flips bytes, truncates, or changes a length byte.
fn mutate(rng: &mut Rng, der: &[u8]) -> Vec<u8> {
    let mut out = der.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
        }
        1 => out.truncate(rng.below(out.len())),
        2 => {
            // Early bytes hold the tags and lengths of the outer structures.
            let i = rng.below(out.len().min(40));
            out[i] = rng.next() as u8;
        }
        _ => {
            let i = rng.below(out.len());
            out.insert(i, rng.next() as u8);
        }
    }
    out
}

#[test]
fn corrupted_material_gives_errors_never_panics() {
    let ca = TestCa::new("ca");
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let providers = [provider(), material::crypto_provider()];
    for (alg, format, label) in [
        (Alg::P256, Format::Pkcs8, "PRIVATE KEY"),
        (Alg::P384, Format::Sec1, "EC PRIVATE KEY"),
        (Alg::Ed25519, Format::Pkcs8, "PRIVATE KEY"),
        (Alg::Rsa2048, Format::Pkcs1, "RSA PRIVATE KEY"),
    ] {
        let key = alg.generate();
        let leaf = ca.issue(&key, &leaf_params(&[0x33]));
        let leaf_der = CertificateDer::from_pem_slice(leaf.as_bytes()).unwrap();
        let good_key_pem = key_pem(&key, format);
        let key_der = PrivateKeyDer::from_pem_slice(good_key_pem.as_bytes())
            .unwrap()
            .secret_der()
            .to_vec();
        for i in 0..150 {
            let provider = &providers[i % 2];
            let bad_key = pem(label, &mutate(&mut rng, &key_der));
            let bad_cert = pem("CERTIFICATE", &mutate(&mut rng, &leaf_der));
            // Corrupt key with a good certificate, and the reverse. Either may
            // still load (a flipped bit in an unused field); none may panic,
            // and an identity that loads must never pair a foreign key.
            for (cert, key_text) in [
                (leaf.as_str(), bad_key.as_str()),
                (bad_cert.as_str(), good_key_pem.as_str()),
            ] {
                match load_identity_from_pem(
                    &secret_ref(),
                    cert.as_bytes(),
                    key_text.as_bytes(),
                    provider,
                ) {
                    // (rustls's check re-parses the leaf with webpki, which is
                    // stricter than a peer needs to be; only a key mismatch counts.)
                    Ok(identity) => assert!(
                        !matches!(
                            identity.certified_key().keys_match(),
                            Err(rustls::Error::InconsistentKeys(
                                rustls::InconsistentKeys::KeyMismatch
                            ))
                        ),
                        "a mismatched key was accepted"
                    ),
                    Err(err) => {
                        let msg = err.to_string();
                        assert!(msg.contains("unikorn/unikorn-client-certificate"), "{msg}");
                        assert_no_key_material(&msg, &key);
                    }
                }
            }
        }
    }
}

/// The aws-lc-rs key loader, counting the keys it is asked to load.
#[derive(Debug, Default)]
struct CountingKeys(std::sync::atomic::AtomicUsize);

impl rustls::crypto::KeyProvider for CountingKeys {
    fn load_private_key(
        &self,
        key: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn rustls::sign::SigningKey>, rustls::Error> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        material::crypto_provider()
            .key_provider
            .load_private_key(key)
    }
}

#[test]
fn identical_failing_bytes_get_the_remembered_error_without_a_reload() {
    static KEYS: CountingKeys = CountingKeys(std::sync::atomic::AtomicUsize::new(0));
    let loads = || KEYS.0.load(std::sync::atomic::Ordering::SeqCst);
    let provider = CryptoProvider {
        key_provider: &KEYS,
        ..material::crypto_provider()
    };
    let cache = IdentityCache::new(Arc::new(provider));
    let ca = TestCa::new("ca");
    let (key, other) = (Alg::P256.generate(), Alg::P256.generate());
    let leaf = ca.issue(&key, &leaf_params(&[0x0b]));
    // A certificate with another key of the same type: found only after loading it.
    let broken = tls_secret(&[
        (TLS_CRT, leaf.as_bytes()),
        (TLS_KEY, other.serialize_pem().as_bytes()),
    ]);
    let first = cache.load(&broken).unwrap_err();
    assert!(
        matches!(first.kind(), MaterialErrorKind::KeyMismatch { .. }),
        "{first:?}"
    );
    assert_eq!(loads(), 1);
    for _ in 0..5 {
        assert_eq!(cache.load(&broken.clone()).unwrap_err(), first);
    }
    assert_eq!(loads(), 1, "the same broken bytes are not loaded again");

    // Fixed: loaded at once.
    let fixed = tls_secret(&[
        (TLS_CRT, leaf.as_bytes()),
        (TLS_KEY, key.serialize_pem().as_bytes()),
    ]);
    assert_eq!(cache.load(&fixed).unwrap().serial_hex(), "0b");
    assert_eq!(loads(), 2);
    // Broken again with other bytes: a full load, then remembered.
    let mut other_broken = broken.clone();
    other_broken.data.as_mut().unwrap().insert(
        TLS_KEY.to_owned(),
        ByteString(Alg::P256.generate().serialize_pem().into_bytes()),
    );
    let err = cache.load(&other_broken).unwrap_err();
    assert!(matches!(err.kind(), MaterialErrorKind::KeyMismatch { .. }));
    assert_eq!(loads(), 3);
    let _ = cache.load(&other_broken).unwrap_err();
    assert_eq!(loads(), 3);
}

#[test]
fn a_remembered_not_yet_valid_error_ends_when_the_certificate_becomes_valid() {
    // TestCa::leaf_params: valid from 2020 to 2090.
    let ca = TestCa::new("ca");
    let key = Alg::P256.generate();
    let leaf = ca.issue(&key, &leaf_params(&[0x0c]));
    let secret = tls_secret(&[
        (TLS_CRT, leaf.as_bytes()),
        (TLS_KEY, key.serialize_pem().as_bytes()),
    ]);
    let year = |y: u64| SystemTime::UNIX_EPOCH + Duration::from_secs((y - 1970) * 31_557_600);
    let cache = IdentityCache::new(Arc::new(material::crypto_provider()));
    for _ in 0..2 {
        let err = cache.load_at(&secret, year(2010)).unwrap_err();
        assert!(err.is_not_yet_valid(), "{err:?}");
    }
    assert_eq!(
        cache.load_at(&secret, year(2030)).unwrap().serial_hex(),
        "0c"
    );
    // Expired stays expired for the same bytes.
    for _ in 0..2 {
        let err = cache.load_at(&secret, year(2100)).unwrap_err();
        assert!(
            matches!(err.kind(), MaterialErrorKind::CertificateExpired { .. }),
            "{err:?}"
        );
    }
    assert_eq!(
        cache.load_at(&secret, year(2030)).unwrap().serial_hex(),
        "0c"
    );
}

#[test]
fn concurrent_loads_of_the_same_bytes_serve_one_key() {
    // The watch's loader and a first handshake may both miss on a new version: both
    // must end up holding the one key the cache keeps (warmed once, shared).
    let ca = TestCa::new("ca");
    let key = Alg::P256.generate();
    let leaf = ca.issue(&key, &leaf_params(&[0x5e]));
    let secret = tls_secret(&[
        (TLS_CRT, leaf.as_bytes()),
        (TLS_KEY, key.serialize_pem().as_bytes()),
    ]);
    let cache = Arc::new(IdentityCache::new(Arc::new(material::crypto_provider())));
    for _ in 0..50 {
        cache.clear();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let loads: Vec<_> = (0..2)
            .map(|_| {
                let (cache, barrier, secret) = (cache.clone(), barrier.clone(), secret.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    cache.load(&secret).unwrap()
                })
            })
            .collect();
        let loaded: Vec<_> = loads.into_iter().map(|t| t.join().unwrap()).collect();
        let kept = cache.load(&secret).unwrap();
        for identity in &loaded {
            assert!(Arc::ptr_eq(identity.certified_key(), kept.certified_key()));
        }
    }
}
