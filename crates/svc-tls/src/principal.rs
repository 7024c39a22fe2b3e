//! Signed principals: the `X-Principal` header, wire-compatible with the Go services.
//!
//! A service says on whose behalf it calls a peer by sending a JWS in **compact**
//! serialization, algorithm **PS512** (RSA-PSS, SHA-512, MGF1-SHA-512, salt length 64),
//! protected header exactly `{"alg":"PS512"}`, signed with the private key of its mTLS
//! client identity. The receiver verifies it against the certificate the peer
//! presented in the TLS handshake (behind the ingress: the `ssl-client-cert` header).
//!
//! # Signing
//! [`PrincipalSigner`] signs with the identity its [`CurrentIdentity`] source returns
//! *at the time of the call* — the same Secret the handshake presents, never a copy
//! kept from before a rotation. [`sign_with`] signs with one given [`Identity`].
//!
//! Private-key operations go through the rustls crypto provider (aws-lc-rs, the one
//! that performs the handshake): the `rsa` crate is used for public-key verification
//! only, never with a private key (RUSTSEC-2023-0071 concerns its private-key
//! operations).
//!
//! Non-RSA identities are refused by default ([`SignError::UnsupportedKeyType`], Go's
//! "private key type is unsupported"), because the Go verifiers accept PS512 only.
//! [`AlgorithmPolicy::Ps512OrEcdsa`] opts into ES256 (P-256) and ES384 (P-384) with
//! JWS raw `r||s` signatures for peers that accept them.
//!
//! # Verifying
//! [`verify`] (or [`PeerCertificate::verify`]) checks a token against a peer
//! certificate and decodes the payload into any [`DeserializeOwned`] type. Only PS512 is
//! accepted (plus ES256/ES384 under [`AlgorithmPolicy::Ps512OrEcdsa`]), and the
//! algorithm must match the certificate's key type. Every rejection is a
//! [`VerifyError`] variant naming what is wrong. RSA-PSS salt length is auto-detected,
//! as the Go verifier does, so tokens signed with another salt length still verify.
//!
//! Behind the nginx ingress, [`peer_certificate_from_ingress`] turns the forwarded
//! `ssl-client-cert` / `ssl-client-verify` headers into a [`PeerCertificate`], and
//! [`verify_ingress_request`] does the whole receiving side in one call.
//!
//! ```no_run
//! # fn demo(identity: svc_tls::material::Identity, headers: reqwest::header::HeaderMap)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use svc_tls::principal::{self, AlgorithmPolicy, Principal, PrincipalSigner};
//!
//! // Sending side (usually over the resolver, so rotations are followed).
//! let signer = PrincipalSigner::new(identity);
//! let who = Principal { organization_id: Some("org-1".into()), ..Default::default() };
//! let request = signer.attach(reqwest::Client::new().get("https://peer/api"), &who)?;
//!
//! // Receiving side, behind the ingress.
//! let who: Principal = principal::verify_ingress_request(&headers, AlgorithmPolicy::default())?;
//! # let _ = (request, who); Ok(()) }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::{HeaderMap, HeaderValue};
use rsa::pkcs8::DecodePublicKey as _;
use rsa::signature::Verifier as _;
use rsa::traits::PublicKeyParts as _;
use rustls::sign::SigningKey;
use rustls::{SignatureAlgorithm, SignatureScheme};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm};
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use sha2::Sha512;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
};
use x509_parser::prelude::FromDer as _;

use crate::material::Identity;
use crate::resolver::IdentityResolver;

/// The HTTP header that carries the signed principal.
pub const PRINCIPAL_HEADER: &str = "X-Principal";

/// The ingress header carrying the peer's certificate as URL-encoded PEM.
pub const INGRESS_CLIENT_CERT_HEADER: &str = "ssl-client-cert";

/// The ingress header carrying the outcome of client-certificate verification.
pub const INGRESS_CLIENT_VERIFY_HEADER: &str = "ssl-client-verify";

/// The only `ssl-client-verify` value under which the forwarded certificate is trusted.
pub const INGRESS_VERIFY_SUCCESS: &str = "SUCCESS";

/// RSA keys shorter than this are refused when verifying.
pub const MIN_RSA_BITS: usize = 2048;

/// The principal the identity service understands: on whose behalf a call is made.
///
/// JSON names are `organizationId`, `projectId` and `actor`; each is omitted when empty
/// (Go's `omitempty`), and an empty string received is read as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// The organization the call is for.
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub organization_id: Option<String>,
    /// The project the call is for.
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub project_id: Option<String>,
    /// Who is acting (the end user or service the call originates from).
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub actor: Option<String>,
}

fn is_empty(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

fn empty_as_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Option::<String>::deserialize(deserializer)?;
    Ok(value.filter(|s| !s.is_empty()))
}

/// Which JWS algorithms may be produced and accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AlgorithmPolicy {
    /// PS512 only: what the Go services produce and accept. The default.
    #[default]
    Ps512Only,
    /// PS512 for RSA keys, and ES256 / ES384 for P-256 / P-384 keys. Only for peers
    /// known to accept ECDSA principals (the Go verifiers do not).
    Ps512OrEcdsa,
}

impl AlgorithmPolicy {
    fn ecdsa(self) -> bool {
        self == Self::Ps512OrEcdsa
    }
}

/// A JWS algorithm this module can produce or accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// RSASSA-PSS with SHA-512 (salt 64 when signing).
    Ps512,
    /// ECDSA P-256 with SHA-256, raw `r||s`.
    Es256,
    /// ECDSA P-384 with SHA-384, raw `r||s`.
    Es384,
}

impl Algorithm {
    /// The JWS `alg` name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ps512 => "PS512",
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "PS512" => Some(Self::Ps512),
            "ES256" => Some(Self::Es256),
            "ES384" => Some(Self::Es384),
            _ => None,
        }
    }

    /// The exact protected header this module emits for the algorithm, base64url.
    fn encoded_header(self) -> String {
        URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"{}"}}"#, self.name()))
    }

    /// Length of one ECDSA coordinate in bytes.
    fn ecdsa_field_len(self) -> Option<usize> {
        match self {
            Self::Ps512 => None,
            Self::Es256 => Some(32),
            Self::Es384 => Some(48),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A signed principal: a compact JWS. Its `Debug` output never shows the token.
#[derive(Clone)]
pub struct PrincipalToken {
    token: String,
    header: HeaderValue,
    algorithm: Algorithm,
}

impl PrincipalToken {
    /// The compact serialization, for sending.
    pub fn as_str(&self) -> &str {
        &self.token
    }

    /// The compact serialization, owned.
    pub fn into_string(self) -> String {
        self.token
    }

    /// The algorithm it was signed with.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The token as an HTTP header value, marked sensitive (kept out of HPACK
    /// indexing and debug output).
    pub fn header_value(&self) -> HeaderValue {
        self.header.clone()
    }
}

impl fmt::Debug for PrincipalToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrincipalToken")
            .field("algorithm", &self.algorithm)
            .field("len", &self.token.len())
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Why a principal could not be signed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    /// The current identity could not be obtained.
    #[error("principal signing: the current client identity is unavailable")]
    Identity(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The identity's key cannot sign a principal under the policy.
    #[error(
        "private key type is unsupported: {key} key (principal signing needs RSA{})",
        if *.ecdsa_allowed { ", ECDSA P-256 or P-384" } else { "; ECDSA is not enabled" }
    )]
    UnsupportedKeyType {
        /// The key type found.
        key: &'static str,
        /// Whether the policy allowed ECDSA.
        ecdsa_allowed: bool,
    },
    /// The value could not be encoded as JSON.
    #[error("principal payload could not be encoded as JSON")]
    Encode(#[source] serde_json::Error),
    /// The crypto provider refused to sign.
    #[error("the TLS crypto provider failed to sign the principal")]
    Provider(#[source] rustls::Error),
    /// The provider's ECDSA signature was not the expected DER structure.
    #[error("the TLS crypto provider returned a malformed ECDSA signature")]
    MalformedProviderSignature,
}

/// A part of a compact JWS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The protected header.
    Header,
    /// The payload.
    Payload,
    /// The signature.
    Signature,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Header => "header",
            Self::Payload => "payload",
            Self::Signature => "signature",
        })
    }
}

/// Why a token was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The token is empty.
    #[error("principal token is empty")]
    Empty,
    /// Not three dot-separated parts (JWS compact serialization); JWE (five parts),
    /// JSON serialization and appended segments land here.
    #[error("principal token is not a compact JWS: {found} dot-separated parts, expected 3")]
    SegmentCount {
        /// How many parts there were.
        found: usize,
    },
    /// A part is not unpadded base64url (this includes padding, whitespace, trailing
    /// data and non-canonical encodings).
    #[error("principal token {part} is not canonical unpadded base64url")]
    Base64 {
        /// Which part.
        part: Part,
    },
    /// The protected header is not a JSON object with unique member names.
    #[error("principal token header is not a valid JSON object")]
    MalformedHeader(#[source] serde_json::Error),
    /// The header has no `alg`.
    #[error("principal token header has no \"alg\"")]
    MissingAlgorithm,
    /// `alg` is `none` (an unsecured JWS).
    #[error("principal token is unsigned (alg \"none\")")]
    AlgorithmNone,
    /// `alg` is an HMAC algorithm (a shared-secret token, never a principal).
    #[error("principal token uses HMAC algorithm {alg}, which is never accepted")]
    Hmac {
        /// The algorithm named.
        alg: String,
    },
    /// `alg` is not accepted by the policy.
    #[error("principal token algorithm {alg} is not accepted (policy: {policy:?})")]
    AlgorithmNotAllowed {
        /// The algorithm named.
        alg: String,
        /// The policy in force.
        policy: AlgorithmPolicy,
    },
    /// `alg` is acceptable but does not fit the certificate's key.
    #[error("principal token algorithm {alg} does not match the peer certificate's {key} key")]
    AlgorithmKeyMismatch {
        /// The algorithm named.
        alg: Algorithm,
        /// The certificate key type.
        key: &'static str,
    },
    /// The header has `crit`: no JWS extension is understood here.
    #[error("principal token has critical header parameters that are not understood: {crit:?}")]
    UnsupportedCritical {
        /// The names listed (as far as they are strings).
        crit: Vec<String>,
    },
    /// The peer certificate's key cannot verify principals.
    #[error("peer certificate has an unsupported key type: {key}")]
    UnsupportedKeyType {
        /// The key type found.
        key: &'static str,
    },
    /// The peer certificate's RSA key is too short.
    #[error("peer certificate RSA key has {bits} bits, at least {MIN_RSA_BITS} are required")]
    WeakRsaKey {
        /// The modulus size.
        bits: usize,
    },
    /// The signature does not verify: wrong key, or header, payload or signature altered.
    #[error("principal token signature does not verify against the peer certificate")]
    BadSignature,
    /// The verified payload is not JSON.
    #[error("principal token payload is not JSON")]
    PayloadNotJson(#[source] serde_json::Error),
    /// The verified payload is JSON but not of the expected shape.
    #[error("principal token payload does not have the expected structure")]
    PayloadType(#[source] serde_json::Error),
}

/// Why a peer certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertificateError {
    /// The PEM could not be read.
    #[error("peer certificate PEM is malformed")]
    Pem(#[source] rustls_pki_types::pem::Error),
    /// The PEM holds no `CERTIFICATE` section.
    #[error("peer certificate PEM holds no CERTIFICATE")]
    NoCertificate,
    /// The DER is not an X.509 certificate.
    #[error("peer certificate is not a valid X.509 certificate: {0}")]
    X509(String),
    /// The certificate's RSA public key is invalid.
    #[error("peer certificate RSA public key is invalid: {0}")]
    RsaKey(String),
    /// The certificate's EC public key is invalid.
    #[error("peer certificate EC public key is invalid")]
    EcKey,
}

/// Why the ingress-forwarded headers give no trusted peer certificate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngressError {
    /// `ssl-client-verify` is absent: the ingress did not check a client certificate.
    #[error("ssl-client-verify header is missing: no verified client certificate")]
    MissingVerify,
    /// `ssl-client-verify` is not `SUCCESS`.
    #[error("client certificate was not verified by the ingress (ssl-client-verify: {value:?})")]
    NotVerified {
        /// The value received (e.g. `NONE`, `FAILED:...`).
        value: String,
    },
    /// `ssl-client-cert` is absent.
    #[error("ssl-client-cert header is missing")]
    MissingCertificate,
    /// A header appears more than once (ambiguous; possibly injected).
    #[error("header {name} appears more than once")]
    Duplicate {
        /// The header name.
        name: &'static str,
    },
    /// `ssl-client-cert` is not URL-encoded UTF-8 text.
    #[error("ssl-client-cert header is not URL-encoded PEM text")]
    CertificateEncoding,
    /// The certificate itself is unusable.
    #[error("ssl-client-cert header holds no usable certificate")]
    Certificate(#[source] CertificateError),
}

/// Why an ingress request's principal was not accepted ([`verify_ingress_request`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestPrincipalError {
    /// No trusted peer certificate.
    #[error(transparent)]
    Ingress(#[from] IngressError),
    /// No (or more than one) `X-Principal` header, or not visible ASCII.
    #[error("X-Principal header is missing, repeated or not ASCII")]
    MissingPrincipal,
    /// The principal token was rejected.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// A source of the identity in force *now* (the one the next handshake presents).
///
/// The TLS resolver implements it, so a [`PrincipalSigner`] built over the resolver
/// signs with the same Secret as the handshake and follows rotations. An [`Identity`]
/// implements it for itself (a fixed identity).
pub trait CurrentIdentity {
    /// Why the identity is unavailable.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The identity in force at the time of the call.
    fn current(&self) -> Result<Identity, Self::Error>;
}

impl CurrentIdentity for Identity {
    type Error = Infallible;

    fn current(&self) -> Result<Identity, Infallible> {
        Ok(self.clone())
    }
}

impl<T: CurrentIdentity + ?Sized> CurrentIdentity for Arc<T> {
    type Error = T::Error;

    fn current(&self) -> Result<Identity, Self::Error> {
        (**self).current()
    }
}

impl<T: CurrentIdentity + ?Sized> CurrentIdentity for &T {
    type Error = T::Error;

    fn current(&self) -> Result<Identity, Self::Error> {
        (**self).current()
    }
}

/// The resolver's identity: the Secret is re-read from the watched cache now, exactly
/// as a handshake does ([`IdentityResolver::reload`]); when that fails, the last good
/// identity (the one handshakes keep presenting) signs. Go's `EncodeAndSign` also read
/// the Secret afresh for every principal.
///
/// A pooled connection keeps the identity it was opened with, so just after a
/// rotation a principal signed with the new key can travel on a connection that
/// presented the old certificate; Go's client behaves the same way.
impl CurrentIdentity for IdentityResolver {
    type Error = Infallible;

    fn current(&self) -> Result<Identity, Infallible> {
        Ok(self.reload())
    }
}

/// Signs principals with the identity current at each call.
#[derive(Clone, Debug)]
pub struct PrincipalSigner<S> {
    source: S,
    policy: AlgorithmPolicy,
}

impl<S: CurrentIdentity> PrincipalSigner<S> {
    /// A PS512-only signer over `source`.
    pub fn new(source: S) -> Self {
        Self {
            source,
            policy: AlgorithmPolicy::default(),
        }
    }

    /// The same signer with another algorithm policy.
    #[must_use]
    pub fn with_policy(mut self, policy: AlgorithmPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The identity source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// JSON-encodes `value` and signs it with the current identity.
    ///
    /// # Errors
    /// [`SignError::Identity`] when the source fails, otherwise as [`sign_with`].
    pub fn sign<T: Serialize + ?Sized>(&self, value: &T) -> Result<PrincipalToken, SignError> {
        let identity = self
            .source
            .current()
            .map_err(|e| SignError::Identity(Box::new(e)))?;
        sign_with(&identity, value, self.policy)
    }

    /// Signs `value` and attaches it to `request` as the `X-Principal` header.
    ///
    /// # Errors
    /// As [`PrincipalSigner::sign`].
    pub fn attach<T: Serialize + ?Sized>(
        &self,
        request: reqwest::RequestBuilder,
        value: &T,
    ) -> Result<reqwest::RequestBuilder, SignError> {
        Ok(attach_principal(request, &self.sign(value)?))
    }
}

/// Sets the `X-Principal` header of `request` to `token` (replacing any previous one).
pub fn attach_principal(
    request: reqwest::RequestBuilder,
    token: &PrincipalToken,
) -> reqwest::RequestBuilder {
    request.header(PRINCIPAL_HEADER, token.header_value())
}

/// JSON-encodes `value` and signs it with `identity`'s private key.
///
/// # Errors
/// [`SignError::UnsupportedKeyType`] for keys the policy does not allow,
/// [`SignError::Encode`] when `value` does not serialize, [`SignError::Provider`] when
/// the crypto provider fails.
pub fn sign_with<T: Serialize + ?Sized>(
    identity: &Identity,
    value: &T,
    policy: AlgorithmPolicy,
) -> Result<PrincipalToken, SignError> {
    sign_with_key(identity.certified_key().key.as_ref(), value, policy)
}

/// As [`sign_with`], for a rustls signing key held directly.
///
/// # Errors
/// As [`sign_with`].
pub fn sign_with_key<T: Serialize + ?Sized>(
    key: &dyn SigningKey,
    value: &T,
    policy: AlgorithmPolicy,
) -> Result<PrincipalToken, SignError> {
    let payload = serde_json::to_vec(value).map_err(SignError::Encode)?;
    sign_payload(key, &payload, policy)
}

fn sign_payload(
    key: &dyn SigningKey,
    payload: &[u8],
    policy: AlgorithmPolicy,
) -> Result<PrincipalToken, SignError> {
    let unsupported = |key: &'static str| SignError::UnsupportedKeyType {
        key,
        ecdsa_allowed: policy.ecdsa(),
    };
    let (algorithm, signer) = match key.algorithm() {
        SignatureAlgorithm::RSA => {
            let signer = key
                .choose_scheme(&[SignatureScheme::RSA_PSS_SHA512])
                .ok_or(unsupported("RSA"))?;
            (Algorithm::Ps512, signer)
        }
        SignatureAlgorithm::ECDSA if policy.ecdsa() => {
            let signer = key
                .choose_scheme(&[
                    SignatureScheme::ECDSA_NISTP256_SHA256,
                    SignatureScheme::ECDSA_NISTP384_SHA384,
                ])
                .ok_or(unsupported("ECDSA (curve other than P-256/P-384)"))?;
            let algorithm = match signer.scheme() {
                SignatureScheme::ECDSA_NISTP256_SHA256 => Algorithm::Es256,
                SignatureScheme::ECDSA_NISTP384_SHA384 => Algorithm::Es384,
                _ => return Err(unsupported("ECDSA")),
            };
            (algorithm, signer)
        }
        SignatureAlgorithm::ECDSA => return Err(unsupported("ECDSA")),
        SignatureAlgorithm::ED25519 => return Err(unsupported("Ed25519")),
        SignatureAlgorithm::ED448 => return Err(unsupported("Ed448")),
        _ => return Err(unsupported("unknown")),
    };

    let mut token = algorithm.encoded_header();
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(payload, &mut token);
    let signature = signer.sign(token.as_bytes()).map_err(SignError::Provider)?;
    let signature = match algorithm.ecdsa_field_len() {
        None => signature,
        Some(len) => {
            ecdsa_der_to_raw(&signature, len).ok_or(SignError::MalformedProviderSignature)?
        }
    };
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(&signature, &mut token);

    let mut header =
        HeaderValue::from_str(&token).map_err(|_| SignError::MalformedProviderSignature)?;
    header.set_sensitive(true);
    Ok(PrincipalToken {
        token,
        header,
        algorithm,
    })
}

/// The public key of a peer certificate, prepared for verifying principals.
#[derive(Clone)]
enum PeerKey {
    Rsa {
        key: rsa::pss::VerifyingKey<Sha512>,
        bits: usize,
    },
    EcP256(Vec<u8>),
    EcP384(Vec<u8>),
    Unsupported(&'static str),
}

impl PeerKey {
    fn name(&self) -> &'static str {
        match self {
            Self::Rsa { .. } => "RSA",
            Self::EcP256(_) => "ECDSA P-256",
            Self::EcP384(_) => "ECDSA P-384",
            Self::Unsupported(name) => name,
        }
    }
}

/// A peer's certificate (what it presented in the TLS handshake), with its public
/// key parsed once for verifying any number of principals.
#[derive(Clone)]
pub struct PeerCertificate {
    der: CertificateDer<'static>,
    key: PeerKey,
}

impl fmt::Debug for PeerCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerCertificate")
            .field("key", &self.key.name())
            .field("der_len", &self.der.len())
            .finish()
    }
}

impl PeerCertificate {
    /// Loads a DER certificate.
    ///
    /// # Errors
    /// When it is not an X.509 certificate or its public key is malformed.
    pub fn from_der(der: impl Into<CertificateDer<'static>>) -> Result<Self, CertificateError> {
        let der = der.into();
        let key = peer_key(&der)?;
        Ok(Self { der, key })
    }

    /// Loads the first `CERTIFICATE` of a PEM text.
    ///
    /// # Errors
    /// [`CertificateError::Pem`] / [`CertificateError::NoCertificate`] for bad PEM,
    /// otherwise as [`PeerCertificate::from_der`].
    pub fn from_pem(pem: &[u8]) -> Result<Self, CertificateError> {
        let der = match CertificateDer::from_pem_slice(pem) {
            Ok(der) => der,
            Err(rustls_pki_types::pem::Error::NoItemsFound) => {
                return Err(CertificateError::NoCertificate);
            }
            Err(e) => return Err(CertificateError::Pem(e)),
        };
        Self::from_der(der)
    }

    /// The certificate, DER.
    pub fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    /// The certificate's key type, e.g. `RSA` or `ECDSA P-256`.
    pub fn key_type(&self) -> &'static str {
        self.key.name()
    }

    /// Verifies `token` against this certificate and decodes its payload.
    ///
    /// # Errors
    /// A [`VerifyError`] naming why the token was rejected.
    pub fn verify<T: DeserializeOwned>(
        &self,
        token: &str,
        policy: AlgorithmPolicy,
    ) -> Result<T, VerifyError> {
        let payload = self.verify_bytes(token, policy)?;
        serde_json::from_slice(&payload).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => VerifyError::PayloadType(e),
            _ => VerifyError::PayloadNotJson(e),
        })
    }

    fn verify_bytes(&self, token: &str, policy: AlgorithmPolicy) -> Result<Vec<u8>, VerifyError> {
        if token.is_empty() {
            return Err(VerifyError::Empty);
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [header_b64, payload_b64, signature_b64] = parts[..] else {
            return Err(VerifyError::SegmentCount { found: parts.len() });
        };

        let header = decode_part(header_b64, Part::Header)?;
        let header: RawHeader =
            serde_json::from_slice(&header).map_err(VerifyError::MalformedHeader)?;
        let algorithm = accept_algorithm(&header, policy)?;
        if let Some(crit) = header.crit {
            return Err(VerifyError::UnsupportedCritical { crit });
        }
        let payload = decode_part(payload_b64, Part::Payload)?;
        let signature = decode_part(signature_b64, Part::Signature)?;

        // The signing input is the received ASCII, as is.
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
        match (&self.key, algorithm) {
            (PeerKey::Rsa { bits, .. }, Algorithm::Ps512) if *bits < MIN_RSA_BITS => {
                return Err(VerifyError::WeakRsaKey { bits: *bits });
            }
            (PeerKey::Rsa { key, .. }, Algorithm::Ps512) => {
                let signature = rsa::pss::Signature::try_from(signature.as_slice())
                    .map_err(|_| VerifyError::BadSignature)?;
                key.verify(signing_input.as_bytes(), &signature)
                    .map_err(|_| VerifyError::BadSignature)?;
            }
            (PeerKey::EcP256(point), Algorithm::Es256) => verify_ecdsa(
                webpki::aws_lc_rs::ECDSA_P256_SHA256,
                point,
                signing_input.as_bytes(),
                &signature,
                32,
            )?,
            (PeerKey::EcP384(point), Algorithm::Es384) => verify_ecdsa(
                webpki::aws_lc_rs::ECDSA_P384_SHA384,
                point,
                signing_input.as_bytes(),
                &signature,
                48,
            )?,
            (PeerKey::Unsupported(key), _) => return Err(VerifyError::UnsupportedKeyType { key }),
            (key, alg) => {
                return Err(VerifyError::AlgorithmKeyMismatch {
                    alg,
                    key: key.name(),
                });
            }
        }
        Ok(payload)
    }
}

/// Verifies `token` against `certificate` and decodes its payload into `T`.
///
/// # Errors
/// A [`VerifyError`] naming why the token was rejected.
pub fn verify<T: DeserializeOwned>(
    token: &str,
    certificate: &PeerCertificate,
    policy: AlgorithmPolicy,
) -> Result<T, VerifyError> {
    certificate.verify(token, policy)
}

/// The peer certificate forwarded by the nginx ingress, trusted only when
/// `ssl-client-verify` is exactly `SUCCESS`.
///
/// # Errors
/// An [`IngressError`] naming the missing, repeated or unusable header.
pub fn peer_certificate_from_ingress(headers: &HeaderMap) -> Result<PeerCertificate, IngressError> {
    let verify =
        single(headers, INGRESS_CLIENT_VERIFY_HEADER)?.ok_or(IngressError::MissingVerify)?;
    if verify.as_bytes() != INGRESS_VERIFY_SUCCESS.as_bytes() {
        return Err(IngressError::NotVerified {
            value: String::from_utf8_lossy(verify.as_bytes()).into_owned(),
        });
    }
    let cert =
        single(headers, INGRESS_CLIENT_CERT_HEADER)?.ok_or(IngressError::MissingCertificate)?;
    let pem: Vec<u8> = percent_encoding::percent_decode(cert.as_bytes()).collect();
    if std::str::from_utf8(&pem).is_err() {
        return Err(IngressError::CertificateEncoding);
    }
    PeerCertificate::from_pem(&pem).map_err(IngressError::Certificate)
}

/// The receiving side in one call: the ingress-forwarded peer certificate, the
/// `X-Principal` header, verified and decoded.
///
/// # Errors
/// A [`RequestPrincipalError`] naming which step failed.
pub fn verify_ingress_request<T: DeserializeOwned>(
    headers: &HeaderMap,
    policy: AlgorithmPolicy,
) -> Result<T, RequestPrincipalError> {
    let certificate = peer_certificate_from_ingress(headers)?;
    let mut values = headers.get_all(PRINCIPAL_HEADER).iter();
    let (Some(token), None) = (values.next(), values.next()) else {
        return Err(RequestPrincipalError::MissingPrincipal);
    };
    let token = token
        .to_str()
        .map_err(|_| RequestPrincipalError::MissingPrincipal)?;
    Ok(certificate.verify(token, policy)?)
}

fn single<'a>(
    headers: &'a HeaderMap,
    name: &'static str,
) -> Result<Option<&'a HeaderValue>, IngressError> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(value), None) => Ok(Some(value)),
        (Some(_), Some(_)) => Err(IngressError::Duplicate { name }),
    }
}

fn decode_part(part: &str, which: Part) -> Result<Vec<u8>, VerifyError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| VerifyError::Base64 { part: which })
}

/// The protected header: a JSON object, every member name unique.
struct RawHeader {
    alg: Option<serde_json::Value>,
    crit: Option<Vec<String>>,
}

impl<'de> Deserialize<'de> for RawHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HeaderVisitor;
        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = RawHeader;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JWS protected header object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
                let mut seen = std::collections::HashSet::new();
                let mut header = RawHeader {
                    alg: None,
                    crit: None,
                };
                while let Some(name) = map.next_key::<String>()? {
                    let value: serde_json::Value = map.next_value()?;
                    match name.as_str() {
                        "alg" => header.alg = Some(value),
                        "crit" => {
                            header.crit = Some(match value {
                                serde_json::Value::Array(names) => names
                                    .into_iter()
                                    .map(|n| match n {
                                        serde_json::Value::String(s) => s,
                                        other => other.to_string(),
                                    })
                                    .collect(),
                                other => vec![other.to_string()],
                            });
                        }
                        _ => {}
                    }
                    if !seen.insert(name) {
                        return Err(serde::de::Error::custom("duplicate header member"));
                    }
                }
                Ok(header)
            }
        }
        deserializer.deserialize_map(HeaderVisitor)
    }
}

fn accept_algorithm(header: &RawHeader, policy: AlgorithmPolicy) -> Result<Algorithm, VerifyError> {
    let alg = match &header.alg {
        None => return Err(VerifyError::MissingAlgorithm),
        Some(serde_json::Value::String(alg)) => alg.as_str(),
        Some(other) => {
            return Err(VerifyError::AlgorithmNotAllowed {
                alg: other.to_string(),
                policy,
            });
        }
    };
    if alg.eq_ignore_ascii_case("none") {
        return Err(VerifyError::AlgorithmNone);
    }
    if alg
        .as_bytes()
        .get(..2)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"HS"))
    {
        return Err(VerifyError::Hmac { alg: alg.into() });
    }
    match Algorithm::from_name(alg) {
        Some(Algorithm::Ps512) => Ok(Algorithm::Ps512),
        Some(ecdsa) if policy.ecdsa() => Ok(ecdsa),
        _ => Err(VerifyError::AlgorithmNotAllowed {
            alg: alg.into(),
            policy,
        }),
    }
}

fn peer_key(der: &CertificateDer<'_>) -> Result<PeerKey, CertificateError> {
    let (rest, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref())
        .map_err(|e| CertificateError::X509(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CertificateError::X509(
            "trailing data after the certificate".into(),
        ));
    }
    let spki = cert.public_key();
    let algorithm = &spki.algorithm.algorithm;
    if *algorithm == OID_PKCS1_RSAENCRYPTION {
        let key = rsa::PublicKey::from_public_key_der(spki.raw)
            .map_err(|e| CertificateError::RsaKey(e.to_string()))?;
        let bits = key.n().bit_width() as usize;
        return Ok(PeerKey::Rsa {
            key: rsa::pss::VerifyingKey::new_with_auto_salt_len(key),
            bits,
        });
    }
    if *algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| x509_parser::der_parser::oid::Oid::try_from(p).ok())
            .ok_or(CertificateError::EcKey)?;
        let point = spki.subject_public_key.data.to_vec();
        return Ok(if curve == OID_EC_P256 {
            PeerKey::EcP256(point)
        } else if curve == OID_NIST_EC_P384 {
            PeerKey::EcP384(point)
        } else {
            PeerKey::Unsupported("ECDSA (curve other than P-256/P-384)")
        });
    }
    Ok(PeerKey::Unsupported(
        match algorithm.to_id_string().as_str() {
            "1.3.101.112" => "Ed25519",
            "1.3.101.113" => "Ed448",
            "1.2.840.113549.1.1.10" => "RSASSA-PSS",
            _ => "unknown",
        },
    ))
}

fn verify_ecdsa(
    algorithm: &dyn SignatureVerificationAlgorithm,
    point: &[u8],
    message: &[u8],
    raw: &[u8],
    field_len: usize,
) -> Result<(), VerifyError> {
    let der = ecdsa_raw_to_der(raw, field_len).ok_or(VerifyError::BadSignature)?;
    algorithm
        .verify_signature(point, message, &der)
        .map_err(|_| VerifyError::BadSignature)
}

/// DER `SEQUENCE { INTEGER r, INTEGER s }` to JWS `r||s`, each `len` bytes.
fn ecdsa_der_to_raw(der: &[u8], len: usize) -> Option<Vec<u8>> {
    let (tag, body, rest) = der_tlv(der)?;
    if tag != 0x30 || !rest.is_empty() {
        return None;
    }
    let (tag_r, r, body) = der_tlv(body)?;
    let (tag_s, s, body) = der_tlv(body)?;
    if tag_r != 0x02 || tag_s != 0x02 || !body.is_empty() {
        return None;
    }
    let mut raw = vec![0u8; 2 * len];
    let (raw_r, raw_s) = raw.split_at_mut(len);
    for (integer, out) in [(r, raw_r), (s, raw_s)] {
        let digits = strip_leading_zeros(integer);
        let start = len.checked_sub(digits.len())?;
        out[start..].copy_from_slice(digits);
    }
    Some(raw)
}

/// JWS `r||s` (exactly `2 * len` bytes) to DER `SEQUENCE { INTEGER r, INTEGER s }`.
fn ecdsa_raw_to_der(raw: &[u8], len: usize) -> Option<Vec<u8>> {
    if raw.len() != 2 * len {
        return None;
    }
    let mut body = Vec::with_capacity(2 * len + 6);
    for half in [&raw[..len], &raw[len..]] {
        let digits = strip_leading_zeros(half);
        let pad = digits.first().is_none_or(|b| b & 0x80 != 0);
        body.push(0x02);
        push_der_len(&mut body, digits.len() + usize::from(pad));
        if pad {
            body.push(0);
        }
        body.extend_from_slice(digits);
    }
    let mut der = Vec::with_capacity(body.len() + 3);
    der.push(0x30);
    push_der_len(&mut der, body.len());
    der.extend_from_slice(&body);
    Some(der)
}

fn strip_leading_zeros(mut bytes: &[u8]) -> &[u8] {
    while let [0, rest @ ..] = bytes {
        bytes = rest;
    }
    bytes
}

fn push_der_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        out.push(0x81);
        out.push((len & 0xff) as u8);
    }
}

/// One DER tag-length-value with short or one-byte long length: (tag, value, rest).
fn der_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    let (&first, input) = input.split_first()?;
    let (len, input) = match first {
        0..=0x7f => (usize::from(first), input),
        0x81 => {
            let (&len, input) = input.split_first()?;
            (usize::from(len), input)
        }
        _ => return None,
    };
    if input.len() < len {
        return None;
    }
    let (value, rest) = input.split_at(len);
    Some((tag, value, rest))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn header_is_exactly_alg_ps512() {
        assert_eq!(Algorithm::Ps512.encoded_header(), "eyJhbGciOiJQUzUxMiJ9");
        let decoded = URL_SAFE_NO_PAD
            .decode(Algorithm::Ps512.encoded_header())
            .unwrap();
        assert_eq!(decoded, br#"{"alg":"PS512"}"#);
    }

    #[test]
    fn ecdsa_conversion_round_trips_including_high_bit_and_short_integers() {
        for len in [32usize, 48] {
            for (r0, s0) in [(0x80u8, 0x01u8), (0x00, 0x7f), (0xff, 0x00)] {
                let mut raw = vec![0x11u8; 2 * len];
                raw[0] = r0;
                raw[len] = s0;
                if s0 == 0 {
                    raw[len + 1] = 0; // two leading zero bytes in s
                }
                let der = ecdsa_raw_to_der(&raw, len).unwrap();
                assert_eq!(ecdsa_der_to_raw(&der, len).unwrap(), raw);
            }
        }
        assert!(ecdsa_raw_to_der(&[0u8; 63], 32).is_none());
        assert!(ecdsa_der_to_raw(&[0x30, 0x03, 0x02, 0x01], 32).is_none());
    }

    #[test]
    fn principal_json_names_and_omission() {
        let p = Principal {
            organization_id: Some("o".into()),
            project_id: Some(String::new()),
            actor: None,
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"organizationId":"o"}"#
        );
        let back: Principal =
            serde_json::from_str(r#"{"organizationId":"o","projectId":"","actor":"a"}"#).unwrap();
        assert_eq!(back.organization_id.as_deref(), Some("o"));
        assert_eq!(back.project_id, None);
        assert_eq!(back.actor.as_deref(), Some("a"));
        assert_eq!(serde_json::to_string(&Principal::default()).unwrap(), "{}");
    }
}
