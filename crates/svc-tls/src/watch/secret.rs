//! The Secret's room in the watched-object cache: how a Secret is named, what to
//! grant for it, and what a trust-only reader keeps of it (`ca.crt`, never a key).
//!
//! RBAC for one watched Secret:
//!
//! ```yaml
//! rules:
//! - apiGroups: [""]
//!   resources: ["secrets"]
//!   resourceNames: ["my-release-client-certificate"]
//!   verbs: ["get", "list", "watch"]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Secret;
use rustls::SignatureScheme;
use rustls::crypto::CryptoProvider;

use super::kind::{DroppedKeys, WatchedKind, WatchedRef, sealed};
use super::object::{WatchError, WatchedObject};
use super::shared::SharedObject;
use crate::material::{CA_CRT, IdentityCache, TrustCache};
use crate::origin::SecretRef;

/// The watch-driven cache of one Secret.
#[deprecated(since = "0.2.0", note = "use `watch::WatchedObject<Secret>`")]
pub type SecretSource = WatchedObject<Secret>;

/// Why a Secret's cache could not be started.
#[deprecated(since = "0.2.0", note = "use `watch::WatchError<Secret>`")]
pub type SourceError = WatchError<Secret>;

impl WatchedRef for SecretRef {
    type Kind = Secret;
}

impl WatchedKind for Secret {
    type Ref = SecretRef;
    const KIND: &'static str = "Secret";

    fn namespace(object: &SecretRef) -> &str {
        &object.namespace
    }

    fn name(object: &SecretRef) -> &str {
        &object.name
    }

    fn grant(_: &SecretRef) -> String {
        "grant get, list and watch on this Secret to the service account".to_owned()
    }
}

/// One watched Secret as a registry shares it.
#[deprecated(since = "0.2.0", note = "use `watch::SharedObject<Secret>`")]
pub type SharedSecret = SharedObject<Secret>;

impl sealed::Sealed for Secret {
    type Loads = SecretLoads;

    fn loads(provider: Arc<CryptoProvider>) -> SecretLoads {
        SecretLoads {
            identity: Arc::new(IdentityCache::new(provider)),
            trust: Arc::new(TrustCache::new()),
            wants_identity: AtomicBool::new(false),
            wants_trust: AtomicBool::new(false),
        }
    }

    fn load(loads: &SecretLoads, secret: &Arc<Secret>) {
        if loads.wants_identity.load(Ordering::Acquire) {
            loads.load_identity(secret);
        }
        if loads.wants_trust.load(Ordering::Acquire) {
            let _ = loads.trust.load(secret);
        }
    }

    fn keep_trust_only(&mut self) -> DroppedKeys {
        keep_trust_only(self)
    }
}

/// What a shared Secret loads from each version: the identity and root-set caches
/// every user of the Secret reads, each from the first time one is asked for.
/// `pub` inside a private module: named by the sealed trait, reachable by no caller.
#[allow(unreachable_pub)]
pub struct SecretLoads {
    identity: Arc<IdentityCache>,
    trust: Arc<TrustCache>,
    wants_identity: AtomicBool,
    wants_trust: AtomicBool,
}

impl SecretLoads {
    /// Loads `secret` as an identity (a failure is remembered by the cache and
    /// reported by the resolver) and warms a new key with one signature.
    fn load_identity(&self, secret: &Arc<Secret>) {
        if let Ok(identity) = self.identity.load_shared(secret) {
            warm(identity.certified_key());
        }
    }
}

impl SharedObject<Secret> {
    /// The Secret ([`SharedObject::object_ref`]).
    pub fn secret_ref(&self) -> &SecretRef {
        self.object_ref()
    }

    /// The identity cache every user of this Secret reads; from now on each new
    /// version is loaded into it (and its key warmed) when the watch delivers it.
    pub fn identity_cache(&self) -> Arc<IdentityCache> {
        let loads = self.loads();
        if !loads.wants_identity.swap(true, Ordering::AcqRel)
            && let Some(secret) = self.source().get()
        {
            loads.load_identity(&secret);
        }
        loads.identity.clone()
    }

    /// The root-set cache every user of this Secret as a CA reads; from now on each
    /// new version is loaded into it when the watch delivers it.
    pub fn trust_cache(&self) -> Arc<TrustCache> {
        let loads = self.loads();
        if !loads.wants_trust.swap(true, Ordering::AcqRel)
            && let Some(secret) = self.source().get()
        {
            let _ = loads.trust.load(&secret);
        }
        loads.trust.clone()
    }
}

/// One signature with the key, so the first handshake does not pay for the key's
/// lazily built state. Idempotent; cheap when already warm.
fn warm(key: &rustls::sign::CertifiedKey) {
    const SCHEMES: &[SignatureScheme] = &[
        SignatureScheme::RSA_PSS_SHA256,
        SignatureScheme::ECDSA_NISTP256_SHA256,
        SignatureScheme::ECDSA_NISTP384_SHA384,
        SignatureScheme::ECDSA_NISTP521_SHA512,
        SignatureScheme::ED25519,
    ];
    if let Some(signer) = key.key.choose_scheme(SCHEMES) {
        let _ = signer.sign(b"svc-tls key warm-up");
    }
}

impl WatchedObject<Secret> {
    /// The Secret this cache watches ([`WatchedObject::object_ref`]).
    pub fn secret_ref(&self) -> &SecretRef {
        self.object_ref()
    }
}

/// Keeps of `secret` only what trust is read from, so that a service that only
/// trusts a CA never holds its private key in memory: `ca.crt` when it is present
/// and not empty, else `tls.crt` of a `kubernetes.io/tls` Secret (Go's CA Secrets
/// hold `tls.crt` only; when `ca.crt` is there, `tls.crt` is not a root: for a
/// leaf's or an intermediate's Secret it is no trust anchor of the caller's choice).
/// Every other data key, all of `stringData`, the annotations
/// (`kubectl.kubernetes.io/last-applied-configuration` holds the whole Secret,
/// `tls.key` included, whenever it was `kubectl apply`-ed) and `managedFields` are
/// dropped. A `ca.crt` that embeds a private key (a PEM `PRIVATE KEY` block) keeps
/// its `CERTIFICATE` blocks only: the received value is overwritten with zeros and
/// dropped here, before the cache stores the object. Labels, name, namespace and
/// `resourceVersion` stay. Returns what dropped looked like key material (a key
/// name ending in `.key`, or a value holding `PRIVATE KEY`), for the WARN, the
/// counter and the metric.
fn keep_trust_only(secret: &mut Secret) -> DroppedKeys {
    use crate::material::{SECRET_TYPE_TLS, TLS_CRT};
    let is_tls = secret.type_.as_deref() == Some(SECRET_TYPE_TLS);
    let has_ca_crt = secret
        .data
        .as_ref()
        .and_then(|data| data.get(CA_CRT))
        .is_some_and(|value| !value.0.is_empty());
    let kept = |key: &str| key == CA_CRT || (is_tls && !has_ca_crt && key == TLS_CRT);
    let looks_like_key =
        |name: &str, value: &[u8]| name.ends_with(".key") || contains(value, b"PRIVATE KEY");
    let mut dropped = DroppedKeys::default();
    if let Some(data) = secret.data.as_mut() {
        data.retain(|name, value| {
            let keep = kept(name);
            dropped.elsewhere |= !keep && looks_like_key(name, &value.0);
            keep
        });
        if let Some(ca) = data.get_mut(CA_CRT)
            && contains(&ca.0, b"PRIVATE KEY")
        {
            let certificates = certificate_blocks(&ca.0);
            let mut received = std::mem::replace(&mut ca.0, certificates);
            received.fill(0);
            dropped.in_ca_crt = true;
        }
    }
    if let Some(data) = secret.string_data.take() {
        dropped.elsewhere |= data
            .iter()
            .any(|(name, value)| looks_like_key(name, value.as_bytes()));
    }
    if let Some(annotations) = secret.metadata.annotations.take() {
        dropped.elsewhere |= annotations.iter().any(|(name, value)| {
            looks_like_key(name, value.as_bytes()) || value.contains("tls.key")
        });
    }
    secret.metadata.managed_fields = None;
    dropped
}

/// The `-----BEGIN CERTIFICATE-----` ... `-----END CERTIFICATE-----` blocks of a PEM
/// text, each on its own lines; everything else (a private key, text between
/// blocks, an unterminated block) is left out. Textual: nothing is decoded.
fn certificate_blocks(pem: &[u8]) -> Vec<u8> {
    const BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
    const END: &[u8] = b"-----END CERTIFICATE-----";
    let mut out = Vec::with_capacity(pem.len());
    let mut rest = pem;
    while let Some(start) = find(rest, BEGIN) {
        let block = &rest[start..];
        let Some(end) = find(block, END) else {
            break;
        };
        let Some(block) = block.get(..end + END.len()) else {
            break;
        };
        out.extend_from_slice(block);
        out.push(b'\n');
        rest = &rest[start + block.len()..];
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(type_: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            type_: Some(type_.to_owned()),
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    fn keys(secret: &Secret) -> Vec<&str> {
        secret
            .data
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nU0VDUkVU\n-----END PRIVATE KEY-----\n";

    #[test]
    fn tls_crt_is_kept_only_without_a_ca_crt() {
        let mut go = secret("kubernetes.io/tls", &[("tls.crt", CERT), ("tls.key", KEY)]);
        assert_eq!(
            keep_trust_only(&mut go),
            DroppedKeys {
                elsewhere: true,
                in_ca_crt: false
            }
        );
        assert_eq!(keys(&go), ["tls.crt"], "Go's CA Secrets: tls.crt only");

        let mut both = secret("kubernetes.io/tls", &[("tls.crt", CERT), ("ca.crt", CERT)]);
        assert!(!keep_trust_only(&mut both).any());
        assert_eq!(keys(&both), ["ca.crt"], "with ca.crt, tls.crt is no root");

        // An empty ca.crt is no ca.crt.
        let mut empty = secret("kubernetes.io/tls", &[("tls.crt", CERT), ("ca.crt", "")]);
        keep_trust_only(&mut empty);
        assert_eq!(keys(&empty), ["ca.crt", "tls.crt"]);
    }

    #[test]
    fn a_private_key_inside_ca_crt_is_dropped_and_its_certificates_kept() {
        for type_ in ["kubernetes.io/tls", "Opaque"] {
            let bundle = format!("{CERT}{KEY}{CERT}");
            let mut with_key = secret(type_, &[("ca.crt", &bundle)]);
            let dropped = keep_trust_only(&mut with_key);
            assert!(dropped.in_ca_crt, "{type_}");
            assert!(!dropped.elsewhere, "{type_}");
            let kept = &with_key.data.as_ref().unwrap()["ca.crt"].0;
            let kept = std::str::from_utf8(kept).unwrap();
            assert_eq!(kept, format!("{CERT}{CERT}"), "{type_}");
            assert!(!kept.contains("PRIVATE KEY") && !kept.contains("U0VDUkVU"));
        }
        // An RSA or EC key block is a private key too.
        let rsa = KEY.replace("PRIVATE KEY", "RSA PRIVATE KEY");
        let mut with_rsa = secret("Opaque", &[("ca.crt", &format!("{rsa}{CERT}"))]);
        assert!(keep_trust_only(&mut with_rsa).in_ca_crt);
        assert_eq!(with_rsa.data.as_ref().unwrap()["ca.crt"].0, CERT.as_bytes());
    }
}
