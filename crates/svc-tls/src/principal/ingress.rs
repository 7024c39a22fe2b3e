//! Behind the nginx ingress: the forwarded client certificate and the
//! `X-Principal` header of a request.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Once};

use reqwest::header::{HeaderMap, HeaderValue};
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use serde::de::DeserializeOwned;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer as _;

use super::PRINCIPAL_HEADER;
use super::jws::TokenTimes;
use super::jws::{AlgorithmPolicy, sender_text};
use super::recorder::Recorder;
use super::verify::{
    CertificateError, DEFAULT_MAX_TOKEN_BYTES, PeerCertificate, Settled, VerifyError,
    VerifyOptions, audiences_of,
};
use crate::trust::TrustVerifier;

/// The ingress header carrying the peer's certificate as URL-encoded PEM.
pub const INGRESS_CLIENT_CERT_HEADER: &str = "ssl-client-cert";

/// The ingress header carrying the outcome of client-certificate verification.
pub const INGRESS_CLIENT_VERIFY_HEADER: &str = "ssl-client-verify";

/// The only `ssl-client-verify` value under which the forwarded certificate is trusted.
pub const INGRESS_VERIFY_SUCCESS: &str = "SUCCESS";

/// The default cap on the `ssl-client-cert` header, in bytes, checked before it is
/// decoded. A real client certificate is 0.5 to 3 KiB of PEM (RSA-4096 with a few
/// SANs); even a 16 KiB PEM with every byte percent-encoded fits in 48 KiB.
pub const DEFAULT_MAX_CERT_HEADER_BYTES: usize = 48 * 1024;

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
        /// The value received (e.g. `NONE`, `FAILED:...`), truncated to 64
        /// characters and shown Debug-escaped.
        value: String,
    },
    /// A header is longer than its cap; refused before it is decoded.
    #[error("header {name} is {len} bytes, more than the {max}-byte limit")]
    TooLarge {
        /// The header name.
        name: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The cap in force.
        max: usize,
    },
    /// The forwarded certificate does not chain to one of the trust anchors, is
    /// outside its validity period, or is not for client authentication.
    #[error(
        "ssl-client-cert is not a valid client certificate issued under the configured trust anchors"
    )]
    Untrusted(#[source] webpki::Error),
    /// An allow-list is configured and none of the certificate's typed names (URI
    /// SANs, DNS SANs, its one subject common name) is on it.
    #[error("ssl-client-cert names no allowed peer (subject {subject:?})")]
    NotAllowed {
        /// The certificate's subject DN, truncated to 64 characters and shown
        /// Debug-escaped.
        subject: String,
    },
    /// A configured trust anchor is not a usable CA certificate.
    #[error("an ingress trust anchor is not a usable CA certificate")]
    TrustAnchor(#[source] webpki::Error),
    /// The watched CA gives no roots to verify against now: its source withdrew its
    /// trust, or fails and the last good roots have expired. Every forwarded
    /// certificate is refused until it recovers.
    #[error("the ingress CA trust gives no usable roots now")]
    AnchorsUnavailable(#[source] rustls::Error),
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

/// Why an ingress request's principal was not accepted ([`IngressVerifier::verify_request`]).
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

/// One name a peer may be allowed under ([`IngressVerifier::with_allowed_peers`]).
///
/// Each kind is compared with that kind of name in the certificate only, never with
/// a rendered subject DN: a certificate whose common name is the text
/// `svc, O=Acme` is not the peer `CN=svc, O=Acme`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AllowedPeer {
    /// A URI SAN, compared exactly: a SPIFFE ID such as
    /// `spiffe://example.org/ns/unikorn/sa/identity`.
    Uri(String),
    /// A DNS SAN, compared ASCII case-insensitively.
    Dns(String),
    /// The subject common name, compared exactly, and only when the subject has
    /// exactly one common name.
    CommonName(String),
}

impl AllowedPeer {
    /// A URI SAN (a SPIFFE ID).
    pub fn uri(uri: impl Into<String>) -> Self {
        Self::Uri(uri.into())
    }

    /// A DNS SAN.
    pub fn dns(name: impl Into<String>) -> Self {
        Self::Dns(name.into())
    }

    /// The subject common name.
    pub fn common_name(name: impl Into<String>) -> Self {
        Self::CommonName(name.into())
    }
}

/// Why a text is not an [`AllowedPeer`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "allowed peer {value:?} names no kind of name: write spiffe://..., uri:URI, dns:NAME or cn:NAME"
)]
pub struct AllowedPeerError {
    /// The value given (at most 64 characters, shown Debug-escaped).
    pub value: String,
}

/// `spiffe://...` (a URI SAN), `uri:URI`, `dns:NAME` or `cn:NAME`; anything else,
/// such as a DN text `CN=svc, O=Acme`, is refused.
impl FromStr for AllowedPeer {
    type Err = AllowedPeerError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let typed = if text.starts_with("spiffe://") {
            Some(Self::Uri(text.to_owned()))
        } else if let Some(uri) = text.strip_prefix("uri:") {
            Some(Self::Uri(uri.to_owned()))
        } else if let Some(name) = text.strip_prefix("dns:") {
            Some(Self::Dns(name.to_owned()))
        } else {
            text.strip_prefix("cn:")
                .map(|name| Self::CommonName(name.to_owned()))
        };
        match typed {
            Some(peer) if !peer.value().is_empty() => Ok(peer),
            _ => Err(AllowedPeerError {
                value: sender_text(text),
            }),
        }
    }
}

impl AllowedPeer {
    fn value(&self) -> &str {
        match self {
            Self::Uri(v) | Self::Dns(v) | Self::CommonName(v) => v,
        }
    }
}

/// What the forwarded certificate is verified against.
#[derive(Clone)]
enum Anchors {
    /// Believed on the ingress's `ssl-client-verify` header alone.
    UnverifiedHeadersOnly,
    /// Fixed roots given in code.
    Fixed(Arc<[TrustAnchor<'static>]>),
    /// The roots of a watched CA (a Secret), read on every request.
    Watched(TrustVerifier),
}

/// The receiving side behind the ingress: the forwarded client certificate is
/// verified against trust anchors (chain, validity, client-auth usage), then the
/// `X-Principal` header against that certificate.
///
/// The default and documented way is [`IngressVerifier::verified`]: the anchors are
/// the roots of a watched CA Secret, read through the trust seam on every request,
/// so a CA rotation needs no restart. Give it the Secret the ingress's
/// `nginx.ingress.kubernetes.io/auth-tls-secret` names (see `docs/operations.md`).
///
/// ingress-nginx sets `ssl-client-verify` / `ssl-client-cert` only on hosts with
/// `auth-tls` configured; a request reaching the service through any other host of
/// the same controller arrives with whatever headers its sender wrote. Trusting them
/// alone ([`IngressVerifier::unverified_headers_only`]) lets anyone sign any
/// principal with a self-made certificate: it exists for migration only and says so
/// in the log.
///
/// ```no_run
/// # async fn f(client: kube::Client, headers: reqwest::header::HeaderMap)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use svc_tls::principal::{AllowedPeer, IngressVerifier, Principal};
/// use svc_tls::{SecretRef, TrustVerifier};
///
/// // The Secret the ingress's auth-tls-secret annotation names, watched.
/// let ca = TrustVerifier::builder(client, SecretRef::new("unikorn", "client-ca"))
///     .build()
///     .await?;
/// let ingress = IngressVerifier::verified(ca)
///     .with_allowed_peers([AllowedPeer::uri("spiffe://example.org/ns/unikorn/sa/region")]);
/// let who: Principal = ingress.verify_request(&headers)?;
/// # let _ = who; Ok(()) }
/// ```
#[derive(Clone)]
pub struct IngressVerifier {
    policy: AlgorithmPolicy,
    max_token_bytes: usize,
    times: TokenTimes,
    clock_skew: std::time::Duration,
    max_lifetime: std::time::Duration,
    audiences: Arc<[String]>,
    max_cert_header_bytes: usize,
    anchors: Anchors,
    intermediates: Vec<CertificateDer<'static>>,
    allowed: Option<Vec<AllowedPeer>>,
    recorder: Arc<dyn Recorder>,
}

impl fmt::Debug for IngressVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let anchors = match &self.anchors {
            Anchors::UnverifiedHeadersOnly => "unverified (headers only)".to_owned(),
            Anchors::Fixed(roots) => format!("{} fixed", roots.len()),
            Anchors::Watched(trust) => format!("watched {}", trust.trust_source().origin()),
        };
        f.debug_struct("IngressVerifier")
            .field("policy", &self.policy)
            .field("max_token_bytes", &self.max_token_bytes)
            .field("times", &self.times)
            .field("max_lifetime", &self.max_lifetime)
            .field("audiences", &self.audiences)
            .field("max_cert_header_bytes", &self.max_cert_header_bytes)
            .field("anchors", &anchors)
            .field("intermediates", &self.intermediates.len())
            .field("allowed", &self.allowed)
            .finish_non_exhaustive()
    }
}

/// The one start-up warning for header-only trust.
static UNVERIFIED_WARNING: Once = Once::new();

/// What the start-up warning for header-only trust says (for tests matching it).
pub const UNVERIFIED_WARNING_TEXT: &str = "ingress principals: the forwarded client certificate is trusted on the ingress's ssl-client-verify header alone (IngressVerifier::unverified_headers_only)";

impl IngressVerifier {
    fn with_anchors(anchors: Anchors) -> Self {
        Self {
            policy: AlgorithmPolicy::default(),
            max_token_bytes: DEFAULT_MAX_TOKEN_BYTES,
            times: TokenTimes::default(),
            clock_skew: super::jws::DEFAULT_CLOCK_SKEW,
            max_lifetime: super::jws::DEFAULT_MAX_PRINCIPAL_LIFETIME,
            audiences: Arc::from(Vec::new()),
            max_cert_header_bytes: DEFAULT_MAX_CERT_HEADER_BYTES,
            anchors,
            intermediates: Vec::new(),
            allowed: None,
            recorder: super::recorder::noop(),
        }
    }

    /// The default: the forwarded certificate must chain to the roots `trust`
    /// holds at the time of each request (a watched CA Secret, built with
    /// [`TrustVerifier::builder`]; share one watch per Secret with
    /// `.watches(&SecretWatches)`), be within its validity period and be for client
    /// authentication. Default caps and algorithm policy, no allow-list.
    pub fn verified(trust: TrustVerifier) -> Self {
        Self::with_anchors(Anchors::Watched(trust))
    }

    /// Verified against fixed CA certificates (no rotation without a new verifier):
    /// for tests, and for services that restart when their CA file changes. Prefer
    /// [`IngressVerifier::verified`].
    ///
    /// # Errors
    /// [`IngressError::TrustAnchor`] when a certificate is not a usable anchor.
    pub fn from_trust_anchors<I>(anchors: I) -> Result<Self, IngressError>
    where
        I: IntoIterator<Item = CertificateDer<'static>>,
    {
        Self::with_anchors(Anchors::UnverifiedHeadersOnly).with_trust_anchors(anchors)
    }

    /// **Unverified**: the forwarded certificate is believed because the ingress
    /// says `ssl-client-verify: SUCCESS`. Anyone who reaches the service other than
    /// through an `auth-tls` host of the ingress can send those headers with a
    /// self-made certificate and sign any principal. For migrating services whose
    /// CA Secret is not wired yet; logs one WARN per process. What
    /// [`IngressVerifier::new`] and the deprecated free functions did.
    pub fn unverified_headers_only() -> Self {
        UNVERIFIED_WARNING.call_once(|| {
            tracing::warn!(
                "{UNVERIFIED_WARNING_TEXT}: anyone reaching this service other than through an \
                 auth-tls ingress host can claim any principal; verify it against the ingress's \
                 CA Secret with IngressVerifier::verified (docs/operations.md)"
            );
        });
        Self::with_anchors(Anchors::UnverifiedHeadersOnly)
    }

    /// Header-only trust under its old name.
    #[deprecated(
        note = "the forwarded certificate was trusted on headers alone: use IngressVerifier::verified(trust).with_policy(policy), or, knowingly, IngressVerifier::unverified_headers_only().with_policy(policy)"
    )]
    pub fn new(policy: AlgorithmPolicy) -> Self {
        Self::unverified_headers_only().with_policy(policy)
    }

    /// Header-only trust under its old name (no longer `Default`).
    #[deprecated(
        note = "the forwarded certificate was trusted on headers alone: use IngressVerifier::verified(trust), or, knowingly, IngressVerifier::unverified_headers_only()"
    )]
    #[allow(clippy::should_implement_trait)]
    pub fn default() -> Self {
        Self::unverified_headers_only()
    }

    /// Whether the forwarded certificate is believed on the headers alone.
    pub fn is_unverified(&self) -> bool {
        matches!(self.anchors, Anchors::UnverifiedHeadersOnly)
    }

    /// The JWS algorithms accepted (default [`AlgorithmPolicy::Ps512OrEcdsa`]).
    #[must_use]
    pub fn with_policy(mut self, policy: AlgorithmPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether tokens must carry `iat`, `exp` and `aud` (default: checked when
    /// present; [`TokenTimes::Required`], the strict mode, refuses tokens without
    /// them, such as Go senders', and needs [`IngressVerifier::with_audiences`]).
    /// Before switching, watch the metrics of tokens accepted without times or
    /// audience (`svc_tls_principal_accepted_without_times_total`,
    /// `svc_tls_principal_accepted_without_audience_total`) stay flat.
    #[must_use]
    pub fn with_token_times(mut self, times: TokenTimes) -> Self {
        self.times = times;
        self
    }

    /// This service's audiences: the URLs its senders call it at, e.g. the
    /// ingress host `https://identity.example.com` (only the origin counts). A
    /// token signed for another origin is refused
    /// ([`VerifyError::AudienceMismatch`]): a principal captured on its way to
    /// another service cannot be replayed here. Without audiences, a token's `aud`
    /// is not checked.
    #[must_use]
    pub fn with_audiences<I: IntoIterator<Item = url::Url>>(mut self, audiences: I) -> Self {
        self.audiences = audiences_of(audiences);
        self
    }

    /// The longest token lifetime (`exp - iat`) accepted (default
    /// [`DEFAULT_MAX_PRINCIPAL_LIFETIME`](super::DEFAULT_MAX_PRINCIPAL_LIFETIME)).
    #[must_use]
    pub fn with_max_token_lifetime(mut self, max: std::time::Duration) -> Self {
        self.max_lifetime = max;
        self
    }

    /// The clock-skew allowance for `iat` and `exp` (default
    /// [`DEFAULT_CLOCK_SKEW`](super::DEFAULT_CLOCK_SKEW)).
    #[must_use]
    pub fn with_clock_skew(mut self, skew: std::time::Duration) -> Self {
        self.clock_skew = skew;
        self
    }

    /// The cap on the `X-Principal` token (default [`DEFAULT_MAX_TOKEN_BYTES`]).
    #[must_use]
    pub fn with_max_token_bytes(mut self, max: usize) -> Self {
        self.max_token_bytes = max;
        self
    }

    /// The cap on the `ssl-client-cert` header (default
    /// [`DEFAULT_MAX_CERT_HEADER_BYTES`]).
    #[must_use]
    pub fn with_max_cert_header_bytes(mut self, max: usize) -> Self {
        self.max_cert_header_bytes = max;
        self
    }

    /// Replaces the anchors with these fixed CA certificates (see
    /// [`IngressVerifier::from_trust_anchors`]): the certificate is checked as
    /// rustls would check it in the handshake (webpki path building, validity at
    /// the current time, client-auth usage).
    ///
    /// # Errors
    /// [`IngressError::TrustAnchor`] when a certificate is not a usable anchor.
    pub fn with_trust_anchors<I>(mut self, anchors: I) -> Result<Self, IngressError>
    where
        I: IntoIterator<Item = CertificateDer<'static>>,
    {
        let mut out = Vec::new();
        for der in anchors {
            let anchor = webpki::anchor_from_trusted_cert(&der)
                .map_err(IngressError::TrustAnchor)?
                .to_owned();
            out.push(anchor);
        }
        self.anchors = Anchors::Fixed(out.into());
        Ok(self)
    }

    /// Intermediate CA certificates for path building (nginx forwards the leaf
    /// only).
    #[must_use]
    pub fn with_intermediates<I>(mut self, intermediates: I) -> Self
    where
        I: IntoIterator<Item = CertificateDer<'static>>,
    {
        self.intermediates = intermediates.into_iter().collect();
        self
    }

    /// Peers allowed to send principals, by typed name ([`AllowedPeer`]: URI SAN /
    /// SPIFFE ID, DNS SAN, subject common name). A rendered subject DN is never
    /// compared. Parse configuration text with [`AllowedPeer::from_str`].
    #[must_use]
    pub fn with_allowed_peers<I>(mut self, peers: I) -> Self
    where
        I: IntoIterator<Item = AllowedPeer>,
    {
        self.allowed = Some(peers.into_iter().collect());
        self
    }

    /// The peer certificate forwarded by the nginx ingress: `ssl-client-verify`
    /// must be exactly `SUCCESS`, and the certificate must pass the trust anchors
    /// (unless [`unverified`](IngressVerifier::unverified_headers_only)) and the
    /// allow-list.
    ///
    /// # Errors
    /// An [`IngressError`] naming the missing, repeated, oversized, unusable or
    /// untrusted header.
    pub fn peer_certificate(&self, headers: &HeaderMap) -> Result<PeerCertificate, IngressError> {
        let verify =
            single(headers, INGRESS_CLIENT_VERIFY_HEADER)?.ok_or(IngressError::MissingVerify)?;
        if verify.as_bytes() != INGRESS_VERIFY_SUCCESS.as_bytes() {
            return Err(IngressError::NotVerified {
                value: sender_text(&String::from_utf8_lossy(verify.as_bytes())),
            });
        }
        let cert =
            single(headers, INGRESS_CLIENT_CERT_HEADER)?.ok_or(IngressError::MissingCertificate)?;
        if cert.len() > self.max_cert_header_bytes {
            return Err(IngressError::TooLarge {
                name: INGRESS_CLIENT_CERT_HEADER,
                len: cert.len(),
                max: self.max_cert_header_bytes,
            });
        }
        let pem: Vec<u8> = percent_encoding::percent_decode(cert.as_bytes()).collect();
        if std::str::from_utf8(&pem).is_err() {
            return Err(IngressError::CertificateEncoding);
        }
        let certificate = PeerCertificate::from_pem(&pem).map_err(IngressError::Certificate)?;
        match &self.anchors {
            Anchors::UnverifiedHeadersOnly => {}
            Anchors::Fixed(roots) => self.verify_chain(&certificate, roots)?,
            Anchors::Watched(trust) => {
                let anchors = trust
                    .roots_now()
                    .map_err(IngressError::AnchorsUnavailable)?;
                self.verify_chain(&certificate, &anchors.roots().roots)?;
            }
        }
        if let Some(allowed) = &self.allowed {
            let names = PeerNames::of(certificate.der())?;
            if !allowed.iter().any(|peer| names.matches(peer)) {
                return Err(IngressError::NotAllowed {
                    subject: sender_text(&names.subject),
                });
            }
        }
        Ok(certificate)
    }

    fn verify_chain(
        &self,
        certificate: &PeerCertificate,
        roots: &[TrustAnchor<'_>],
    ) -> Result<(), IngressError> {
        let end_entity =
            webpki::EndEntityCert::try_from(certificate.der()).map_err(IngressError::Untrusted)?;
        end_entity
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                roots,
                &self.intermediates,
                UnixTime::now(),
                webpki::KeyUsage::client_auth(),
                None,
                None,
            )
            .map(|_| ())
            .map_err(IngressError::Untrusted)
    }

    /// The same verifier reporting every request it judges in
    /// [`IngressVerifier::verify_request`] to `recorder` (e.g.
    /// `svc_tls::metrics::Metrics::principal_recorder`, feature `metrics`). A verifier
    /// from [`IngressVerifier::watching`] already reports to the metrics of the
    /// registry it was built over.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<dyn Recorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// The whole receiving side: the forwarded peer certificate, then the single
    /// `X-Principal` header, verified and decoded. Each call is reported to the
    /// verifier's [`Recorder`](super::Recorder) with the token's algorithm (once
    /// accepted) and the bounded reason of a refusal.
    ///
    /// # Errors
    /// A [`RequestPrincipalError`] naming which step failed.
    pub fn verify_request<T: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
    ) -> Result<T, RequestPrincipalError> {
        let mut settled = Settled::default();
        let result = self.verify_request_settling(headers, &mut settled);
        match &result {
            Ok(_) => {
                self.recorder.verified(settled.algorithm, "ok");
                if settled.without_times {
                    self.recorder.accepted_without_times();
                }
                if settled.without_audience {
                    self.recorder.accepted_without_audience();
                }
            }
            Err(e) => self.recorder.verified(settled.algorithm, e.reason()),
        }
        result
    }

    fn verify_request_settling<T: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
        settled: &mut Settled,
    ) -> Result<T, RequestPrincipalError> {
        let certificate = self.peer_certificate(headers)?;
        let mut values = headers.get_all(PRINCIPAL_HEADER).iter();
        let (Some(token), None) = (values.next(), values.next()) else {
            return Err(RequestPrincipalError::MissingPrincipal);
        };
        if token.len() > self.max_token_bytes {
            return Err(VerifyError::TooLarge {
                len: token.len(),
                max: self.max_token_bytes,
            }
            .into());
        }
        let token = token
            .to_str()
            .map_err(|_| RequestPrincipalError::MissingPrincipal)?;
        let mut options = VerifyOptions::new(self.policy)
            .with_max_len(self.max_token_bytes)
            .with_times(self.times)
            .with_clock_skew(self.clock_skew)
            .with_max_lifetime(self.max_lifetime);
        options.audiences = self.audiences.clone();
        Ok(certificate.verify_settling(token, &options, settled)?)
    }
}

/// The typed names of a certificate an allow-list entry may match.
struct PeerNames {
    /// The rendered subject DN: for error messages only, never matched.
    subject: String,
    uris: Vec<String>,
    dns: Vec<String>,
    /// The subject common name, when there is exactly one.
    common_name: Option<String>,
}

impl PeerNames {
    fn of(der: &CertificateDer<'_>) -> Result<Self, IngressError> {
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref())
            .map_err(|e| IngressError::Certificate(CertificateError::X509(e.to_string())))?;
        let mut common_names = cert.subject().iter_common_name();
        let common_name = match (common_names.next(), common_names.next()) {
            (Some(cn), None) => cn.as_str().ok().map(str::to_owned),
            _ => None,
        };
        let (mut uris, mut dns) = (Vec::new(), Vec::new());
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::URI(uri) => uris.push((*uri).to_owned()),
                    GeneralName::DNSName(name) => dns.push((*name).to_owned()),
                    _ => {}
                }
            }
        }
        Ok(Self {
            subject: cert.subject().to_string(),
            uris,
            dns,
            common_name,
        })
    }

    fn matches(&self, peer: &AllowedPeer) -> bool {
        match peer {
            AllowedPeer::Uri(uri) => self.uris.iter().any(|u| u == uri),
            AllowedPeer::Dns(name) => self.dns.iter().any(|d| d.eq_ignore_ascii_case(name)),
            AllowedPeer::CommonName(name) => self.common_name.as_deref() == Some(name.as_str()),
        }
    }
}

/// The peer certificate forwarded by the nginx ingress, believed on
/// `ssl-client-verify: SUCCESS` alone (header-only trust; logs one WARN per
/// process).
///
/// # Errors
/// An [`IngressError`] naming the missing, repeated or unusable header.
#[deprecated(
    note = "trusts the forwarded certificate on headers alone: use IngressVerifier::verified(trust).peer_certificate(headers), or, knowingly, IngressVerifier::unverified_headers_only()"
)]
pub fn peer_certificate_from_ingress(headers: &HeaderMap) -> Result<PeerCertificate, IngressError> {
    IngressVerifier::unverified_headers_only().peer_certificate(headers)
}

/// The receiving side in one call, believing the forwarded certificate on
/// `ssl-client-verify: SUCCESS` alone (header-only trust; logs one WARN per
/// process).
///
/// # Errors
/// A [`RequestPrincipalError`] naming which step failed.
#[deprecated(
    note = "trusts the forwarded certificate on headers alone: use IngressVerifier::verified(trust).with_policy(policy).verify_request(headers), or, knowingly, IngressVerifier::unverified_headers_only()"
)]
pub fn verify_ingress_request<T: DeserializeOwned>(
    headers: &HeaderMap,
    policy: AlgorithmPolicy,
) -> Result<T, RequestPrincipalError> {
    IngressVerifier::unverified_headers_only()
        .with_policy(policy)
        .verify_request(headers)
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

impl IngressError {
    /// Why, as one of [`VERIFY_RESULTS`](super::VERIFY_RESULTS): a bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingVerify | Self::MissingCertificate => "certificate_missing",
            Self::NotVerified { .. } => "certificate_not_verified",
            Self::TooLarge { .. } => "too_large",
            Self::Duplicate { .. } | Self::CertificateEncoding | Self::Certificate(_) => {
                "certificate_invalid"
            }
            Self::Untrusted(_) => "certificate_untrusted",
            Self::NotAllowed { .. } => "peer_not_allowed",
            Self::TrustAnchor(_) | Self::AnchorsUnavailable(_) => "trust_unavailable",
        }
    }
}

impl RequestPrincipalError {
    /// Why, as one of [`VERIFY_RESULTS`](super::VERIFY_RESULTS): a bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Ingress(e) => e.reason(),
            Self::MissingPrincipal => "principal_missing",
            Self::Verify(e) => e.reason(),
        }
    }
}
