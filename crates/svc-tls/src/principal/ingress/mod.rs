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
use super::recorder::TokenRecorder;
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

mod allowed;
mod error;
mod mode;

use allowed::PeerNames;
pub use allowed::{AllowedPeer, AllowedPeerError};
pub use error::{IngressError, RequestPrincipalError};
pub(crate) use mode::ModeState;
pub use mode::{CompatibilityWindow, ReceiverConfigError, ReceivingMode};

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
/// use svc_tls::principal::{Principal};
/// use svc_tls::receiving::{AllowedPeer, IngressVerifier};
/// use svc_tls::{SecretRef, TrustVerifier};
///
/// // The Secret the ingress's auth-tls-secret annotation names, watched.
/// let ca = TrustVerifier::builder(client, SecretRef::new("unikorn", "client-ca"))
///     .build()
///     .await?;
/// let ingress = IngressVerifier::verified(ca)
///     .with_audiences(["https://identity.example.com".parse()?])
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
    recorder: Arc<dyn TokenRecorder>,
    mode: Arc<ModeState>,
    audience_unchecked: bool,
    unsigned_log: Arc<crate::last_good::WarningLimiter>,
    replay: Option<Arc<super::ReplayCache>>,
}

impl fmt::Debug for IngressVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let anchors = match &self.anchors {
            Anchors::UnverifiedHeadersOnly => "unverified (headers only)".to_owned(),
            Anchors::Fixed(roots) => format!("{} fixed", roots.len()),
            Anchors::Watched(trust) => format!("watched {}", trust.trust_source().origin()),
        };
        f.debug_struct("IngressVerifier")
            .field("mode", &self.mode.mode)
            .field("compatibility", &self.mode.window)
            .field("policy", &self.policy)
            .field("max_token_bytes", &self.max_token_bytes)
            .field("times", &self.times)
            .field("max_lifetime", &self.max_lifetime)
            .field("audiences", &self.audiences)
            .field("audience_unchecked", &self.audience_unchecked)
            .field("max_cert_header_bytes", &self.max_cert_header_bytes)
            .field("anchors", &anchors)
            .field("intermediates", &self.intermediates.len())
            .field("allowed", &self.allowed)
            .field("replay", &self.replay)
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
            times: TokenTimes::CheckedWhenPresent,
            clock_skew: super::jws::DEFAULT_CLOCK_SKEW,
            max_lifetime: super::jws::DEFAULT_MAX_PRINCIPAL_LIFETIME,
            audiences: Arc::from(Vec::new()),
            max_cert_header_bytes: DEFAULT_MAX_CERT_HEADER_BYTES,
            anchors,
            intermediates: Vec::new(),
            allowed: None,
            recorder: super::recorder::noop(),
            mode: ModeState::new(ReceivingMode::Strict, None),
            audience_unchecked: false,
            unsigned_log: mode::unsigned_log_limiter(),
            replay: None,
        }
    }

    /// The default: the forwarded certificate must chain to the roots `trust`
    /// holds at the time of each request (a watched CA Secret, built with
    /// [`TrustVerifier::builder`]; share one watch per Secret with
    /// `.watches(&WatchedObjects)`), be within its validity period and be for client
    /// authentication. Default caps and algorithm policy, no allow-list, the strict
    /// mode ([`ReceivingMode`]); give it its audiences
    /// ([`IngressVerifier::with_audiences`]). Prefer
    /// [`IngressBuilder`](crate::receiving::IngressBuilder), which refuses to build
    /// without them.
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
    /// CA Secret is not wired yet; logs one WARN per process.
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

    /// The replay cache, when there is one.
    pub fn replay_cache(&self) -> Option<&Arc<super::ReplayCache>> {
        self.replay.as_ref()
    }

    /// Whether the forwarded certificate is believed on the headers alone.
    pub fn is_unverified(&self) -> bool {
        matches!(self.anchors, Anchors::UnverifiedHeadersOnly)
    }

    /// Refuses a second use of any signed principal, remembering accepted ones in
    /// `cache` until they expire ([`ReplayCache`](super::ReplayCache): its bound and
    /// eviction). Signed tokens must then carry a `jti` (this crate's signers write
    /// one; Go senders' signed tokens have none and are refused, except from the
    /// senders of an open [`CompatibilityWindow`]). A verifier from
    /// [`IngressBuilder`](crate::receiving::IngressBuilder) has one by default.
    #[must_use]
    pub fn with_replay_cache(mut self, cache: Arc<super::ReplayCache>) -> Self {
        self.replay = Some(cache);
        self
    }

    /// The JWS algorithms accepted (default [`AlgorithmPolicy::Ps512OrEcdsa`]).
    #[must_use]
    pub fn with_policy(mut self, policy: AlgorithmPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether the compatibility mode's senders must sign with `iat`, `exp` and
    /// `aud` too (default [`TokenTimes::CheckedWhenPresent`]: Go's signed form is
    /// accepted from them within the [`CompatibilityWindow`]). It can only tighten:
    /// the strict mode, any sender not in the window and any request after its end
    /// require times and audience whatever is set here ([`TokenTimes::Required`]);
    /// the mode decides ([`IngressVerifier::with_mode`],
    /// [`IngressVerifier::with_compatibility`]).
    #[must_use]
    pub fn with_times(mut self, times: TokenTimes) -> Self {
        self.times = times;
        self
    }

    /// This service's audiences: the URLs its senders call it at, e.g. the
    /// ingress host `https://identity.example.com` (only the origin counts). A
    /// token signed for another origin is refused
    /// ([`VerifyError::AudienceMismatch`]): a principal captured on its way to
    /// another service cannot be replayed here. Without audiences every request is
    /// refused ([`RequestPrincipalError::Configuration`]) unless the check is
    /// opted out of ([`IngressVerifier::without_audience_check`]).
    #[must_use]
    pub fn with_audiences<I: IntoIterator<Item = url::Url>>(mut self, audiences: I) -> Self {
        self.audiences = audiences_of(audiences);
        self
    }

    /// The longest token lifetime (`exp - iat`) accepted (default
    /// [`DEFAULT_MAX_PRINCIPAL_LIFETIME`](super::DEFAULT_MAX_PRINCIPAL_LIFETIME)).
    #[must_use]
    pub fn with_max_lifetime(mut self, max: std::time::Duration) -> Self {
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
    pub fn with_max_len(mut self, max: usize) -> Self {
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
    /// from [`receiving::IngressBuilder`](crate::receiving::IngressBuilder) already
    /// reports to the metrics of the registry it was built over.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<dyn TokenRecorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// The whole receiving side: the forwarded peer certificate, then the single
    /// `X-Principal` header, verified and decoded. Each call is reported to the
    /// verifier's [`TokenRecorder`](super::TokenRecorder) with the token's algorithm (once
    /// accepted) and the bounded reason of a refusal.
    ///
    /// # Errors
    /// A [`RequestPrincipalError`] naming which step failed.
    pub fn verify_request<T: DeserializeOwned>(
        &self,
        headers: &HeaderMap,
    ) -> Result<T, RequestPrincipalError> {
        // Names the result, never the token. With the feature `otel`, a verifier
        // reached outside a traced request (a service behind the ingress serving
        // with its own server) continues the trace the headers carry.
        let span = tracing::info_span!("svc_tls.principal.verify", result = tracing::field::Empty);
        #[cfg(feature = "otel")]
        if crate::telemetry::propagate::context_of(&tracing::Span::current()).is_none() {
            crate::telemetry::continue_trace(&span, headers);
        }
        let _entered = span.enter();
        let mut settled = Settled::default();
        let result = self.verify_request_settling(headers, &mut settled);
        span.record(
            "result",
            result
                .as_ref()
                .map_or_else(RequestPrincipalError::reason, |_| "ok"),
        );
        match &result {
            Ok(_) => {
                self.recorder.verified(settled.algorithm, "ok");
                if settled.without_times {
                    self.recorder.accepted_without_times();
                }
                if settled.without_audience {
                    self.recorder.accepted_without_audience();
                }
                if settled.unsigned {
                    self.recorder.accepted_unsigned();
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
        self.check_configuration()
            .map_err(RequestPrincipalError::Configuration)?;
        // The Go forms only from the compatibility window's senders, before its
        // end; everything else is judged strictly, whatever `with_times` said.
        let go = self
            .mode
            .admits_go_forms(&certificate, std::time::SystemTime::now());
        if let Some(unsigned) = self.unsigned_principal(token, &certificate, go, settled) {
            return unsigned;
        }
        let mut options = VerifyOptions::new(self.policy)
            .with_max_len(self.max_token_bytes)
            .with_times(if go { self.times } else { TokenTimes::Required })
            .with_clock_skew(self.clock_skew)
            .with_max_lifetime(self.max_lifetime);
        options.audiences = self.audiences.clone();
        options.replay = self.replay.clone();
        // A Go sender's signed token has no `jti` to remember: within the window it
        // is accepted without (one that has a `jti` is still accepted once only).
        options.jti_optional = go;
        Ok(certificate.verify_settling(token, &options, settled)?)
    }
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
