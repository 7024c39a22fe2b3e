//! A memo of certificate signature checks: a peer presents the same chain on every
//! handshake, so the issuer's signature over the same to-be-signed bytes is checked
//! once per thread instead of once per handshake.
//!
//! Signature verification is a pure function of the algorithm, the public key, the
//! message and the signature. The memo remembers only successes, keyed by all four
//! byte for byte, so it answers exactly what the check would have answered; every
//! other judgement of a chain (names, validity period, key usage, path building, the
//! roots in force, withdrawal) still runs on every handshake. Only messages shaped
//! like a certificate's to-be-signed part (a DER `SEQUENCE`) are remembered: a TLS 1.3
//! `CertificateVerify` (64 spaces first, different every handshake) is checked and
//! never stored, so it cannot push a chain's entry out.
//!
//! Per thread, a few slots (no lock, no atomic on a hit: a thread-local look-up and a
//! byte comparison), each holding one success; a new success replaces the slot's
//! previous one. Why: docs/decisions/certificate-signature-memo.md.

use std::cell::RefCell;
use std::sync::OnceLock;

use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls_pki_types::{AlgorithmIdentifier, InvalidSignature, SignatureVerificationAlgorithm};

/// Remembered successes per thread.
const SLOTS: usize = 8;

/// Messages longer than this are checked and not remembered (a certificate's
/// to-be-signed part is a few hundred bytes to a few kilobytes).
const MAX_MESSAGE: usize = 16 * 1024;

/// `algorithms` with each signature algorithm checking certificate signatures through
/// the memo. Built once per process from the first table it is given (the provider's;
/// the wrappers are allocated once and live as long as the process, like the statics
/// they wrap).
pub(super) fn memoized(algorithms: WebPkiSupportedAlgorithms) -> WebPkiSupportedAlgorithms {
    static TABLE: OnceLock<WebPkiSupportedAlgorithms> = OnceLock::new();
    *TABLE.get_or_init(|| wrap(algorithms))
}

fn wrap(algorithms: WebPkiSupportedAlgorithms) -> WebPkiSupportedAlgorithms {
    let wrappers: &'static [Memoized] = Vec::leak(
        algorithms
            .all
            .iter()
            .enumerate()
            .map(|(id, inner)| Memoized { inner: *inner, id })
            .collect(),
    );
    let as_dyn =
        |wrapper: &'static Memoized| -> &'static dyn SignatureVerificationAlgorithm { wrapper };
    let all: &'static [&'static dyn SignatureVerificationAlgorithm] =
        Vec::leak(wrappers.iter().map(as_dyn).collect());
    let mapping = algorithms
        .mapping
        .iter()
        .map(|(scheme, inners)| {
            let wrapped: Vec<&'static dyn SignatureVerificationAlgorithm> = inners
                .iter()
                .map(
                    |inner| match wrappers.iter().find(|w| same(w.inner, *inner)) {
                        Some(wrapper) => as_dyn(wrapper),
                        // In the mapping but not in `all`: checked as before.
                        None => *inner,
                    },
                )
                .collect();
            (*scheme, &*Vec::leak(wrapped))
        })
        .collect::<Vec<_>>();
    WebPkiSupportedAlgorithms {
        all,
        mapping: Vec::leak(mapping),
    }
}

/// The same algorithm: the same public-key and signature algorithm identifiers.
fn same(a: &dyn SignatureVerificationAlgorithm, b: &dyn SignatureVerificationAlgorithm) -> bool {
    a.public_key_alg_id() == b.public_key_alg_id() && a.signature_alg_id() == b.signature_alg_id()
}

/// One algorithm, its certificate signature checks remembered.
struct Memoized {
    inner: &'static dyn SignatureVerificationAlgorithm,
    /// Which algorithm of the table: part of every entry's key.
    id: usize,
}

impl std::fmt::Debug for Memoized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Memoized").field(&self.inner).finish()
    }
}

impl SignatureVerificationAlgorithm for Memoized {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        check(self.inner, self.id, public_key, message, signature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        self.inner.public_key_alg_id()
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.inner.signature_alg_id()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

/// One remembered success: the algorithm and the three inputs, byte for byte.
struct Entry {
    id: usize,
    public_key_len: usize,
    message_len: usize,
    /// public key, message and signature, one after the other.
    bytes: Box<[u8]>,
}

impl Entry {
    fn new(id: usize, public_key: &[u8], message: &[u8], signature: &[u8]) -> Self {
        Self {
            id,
            public_key_len: public_key.len(),
            message_len: message.len(),
            bytes: [public_key, message, signature].concat().into_boxed_slice(),
        }
    }

    fn matches(&self, id: usize, public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
        let (key, rest) = self
            .bytes
            .split_at(self.public_key_len.min(self.bytes.len()));
        let (msg, sig) = rest.split_at(self.message_len.min(rest.len()));
        self.id == id && key == public_key && sig == signature && msg == message
    }
}

thread_local! {
    static MEMO: RefCell<[Option<Entry>; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
}

fn check(
    inner: &dyn SignatureVerificationAlgorithm,
    id: usize,
    public_key: &[u8],
    message: &[u8],
    signature: &[u8],
) -> Result<(), InvalidSignature> {
    if !rememberable(message) {
        return inner.verify_signature(public_key, message, signature);
    }
    let slot = slot_of(signature);
    let remembered = MEMO
        .try_with(|memo| {
            memo.try_borrow().is_ok_and(|memo| {
                memo[slot]
                    .as_ref()
                    .is_some_and(|entry| entry.matches(id, public_key, message, signature))
            })
        })
        .unwrap_or(false);
    if remembered {
        return Ok(());
    }
    inner.verify_signature(public_key, message, signature)?;
    // A thread being torn down, or a re-entrant check, just does not remember.
    let _ = MEMO.try_with(|memo| {
        if let Ok(mut memo) = memo.try_borrow_mut() {
            memo[slot] = Some(Entry::new(id, public_key, message, signature));
        }
    });
    Ok(())
}

/// A certificate's (or CRL's) to-be-signed part: a DER `SEQUENCE` of bounded size.
/// A TLS 1.3 `CertificateVerify` input starts with 64 spaces.
fn rememberable(message: &[u8]) -> bool {
    message.first() == Some(&0x30) && message.len() <= MAX_MESSAGE
}

/// The slot of a signature: its last eight bytes (the random part of an ECDSA `s`
/// or of an RSA signature), with the length folded in.
fn slot_of(signature: &[u8]) -> usize {
    let tail = signature.len().saturating_sub(8);
    let folded = signature[tail..]
        .iter()
        .fold(signature.len() as u64, |acc, b| {
            acc.rotate_left(8) ^ u64::from(*b)
        });
    (folded % SLOTS as u64) as usize
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Accepts a signature equal to the message's last byte repeated; counts calls.
    #[derive(Debug)]
    struct Counting(AtomicUsize);

    impl SignatureVerificationAlgorithm for Counting {
        fn verify_signature(
            &self,
            _public_key: &[u8],
            message: &[u8],
            signature: &[u8],
        ) -> Result<(), InvalidSignature> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let last = message.last().copied().unwrap_or_default();
            if !signature.is_empty() && signature.iter().all(|b| *b == last) {
                Ok(())
            } else {
                Err(InvalidSignature)
            }
        }

        fn public_key_alg_id(&self) -> AlgorithmIdentifier {
            AlgorithmIdentifier::from_slice(b"test key")
        }

        fn signature_alg_id(&self) -> AlgorithmIdentifier {
            AlgorithmIdentifier::from_slice(b"test sig")
        }
    }

    fn counting() -> &'static Counting {
        Box::leak(Box::new(Counting(AtomicUsize::new(0))))
    }

    fn calls(inner: &Counting) -> usize {
        inner.0.load(Ordering::SeqCst)
    }

    const TBS: &[u8] = &[0x30, 0x03, 1, 2, 7];
    const SIG: &[u8] = &[7; 64];

    #[test]
    fn a_certificate_signature_is_checked_once_per_thread() {
        let inner = counting();
        let memo = Memoized { inner, id: 1 };
        for _ in 0..5 {
            memo.verify_signature(b"key", TBS, SIG).unwrap();
        }
        assert_eq!(calls(inner), 1);
        std::thread::scope(|s| {
            s.spawn(|| memo.verify_signature(b"key", TBS, SIG).unwrap());
        });
        assert_eq!(calls(inner), 2, "another thread checks it itself");
    }

    #[test]
    fn nothing_but_the_same_four_inputs_is_answered_from_the_memo() {
        let inner = counting();
        let memo = Memoized { inner, id: 2 };
        memo.verify_signature(b"key", TBS, SIG).unwrap();
        // A different key, message or signature is checked, and a bad one refused.
        memo.verify_signature(b"other key", TBS, SIG).unwrap();
        assert_eq!(calls(inner), 2);
        let forged = [0x30, 0x03, 1, 2, 8];
        memo.verify_signature(b"key", &forged, SIG).unwrap_err();
        let mut bad = SIG.to_vec();
        bad[0] = 9;
        memo.verify_signature(b"key", TBS, &bad).unwrap_err();
        // Another algorithm of the table with the same inputs is its own entry.
        let other = Memoized { inner, id: 3 };
        other.verify_signature(b"key", TBS, SIG).unwrap();
        assert_eq!(calls(inner), 5);
    }

    #[test]
    fn failures_are_not_remembered() {
        let inner = counting();
        let memo = Memoized { inner, id: 4 };
        let bad = [1u8; 64];
        for _ in 0..3 {
            memo.verify_signature(b"key", TBS, &bad).unwrap_err();
        }
        assert_eq!(calls(inner), 3);
    }

    #[test]
    fn a_certificate_verify_input_is_never_remembered() {
        let inner = counting();
        let memo = Memoized { inner, id: 5 };
        let mut message = vec![0x20; 64];
        message.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
        message.push(7);
        for _ in 0..3 {
            memo.verify_signature(b"key", &message, SIG).unwrap();
        }
        assert_eq!(calls(inner), 3);
        let mut large = vec![0x30; MAX_MESSAGE + 1];
        large.push(7);
        memo.verify_signature(b"key", &large, SIG).unwrap();
        memo.verify_signature(b"key", &large, SIG).unwrap();
        assert_eq!(calls(inner), 5, "over the size bound: checked every time");
    }

    #[test]
    fn the_wrapped_table_keeps_every_algorithm_and_scheme() {
        let plain = rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms;
        let wrapped = wrap(plain);
        assert_eq!(wrapped.all.len(), plain.all.len());
        for (a, b) in wrapped.all.iter().zip(plain.all) {
            assert!(same(*a, *b));
            assert_eq!(a.fips(), b.fips());
        }
        assert_eq!(wrapped.mapping.len(), plain.mapping.len());
        for ((scheme_a, a), (scheme_b, b)) in wrapped.mapping.iter().zip(plain.mapping) {
            assert_eq!(scheme_a, scheme_b);
            assert_eq!(a.len(), b.len());
        }
    }
}
