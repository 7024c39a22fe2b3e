//! The handshake-time server-certificate verifier: peer trust that follows its Secret.
//!
//! [`TrustVerifier`] implements rustls's [`ServerCertVerifier`]. On **every**
//! handshake it asks its [`TrustSource`] (the trust seam, see
//! [`crate::trust_source`]) for the root set it holds now, and verifies the server's
//! chain with webpki's verifier ([`WebPkiServerVerifier`]) for exactly those roots.
//! The webpki verifier is built again only when the root set changes: the Secret
//! source returns the same `Arc` for byte-identical `tls.crt`/`ca.crt`, so an
//! unchanged Secret costs a cache read, a byte comparison and a pointer comparison.
//! The verifier for the roots being served lives in an [`ArcSwap`]: no lock is held
//! and nothing on this path does I/O. A handshake takes one snapshot of that slot,
//! so it verifies against one whole root set, never part of two.
//!
//! When a read fails after a good one (malformed CA Secret, no usable root, deleted
//! Secret), the last good roots are used, the failure is counted, and a warning is
//! logged at most once per period (a minute by default) with how many failures were
//! suppressed and how long the stale roots have been used, through the same
//! [`WarningLimiter`] as the identity. A Secret with no usable root therefore never
//! replaces good roots; a recreated Secret is used on the next handshake.
//!
//! # Rotation with overlap
//! cert-manager rotates a CA by writing `ca.crt` with the old and the new CA, then
//! the new one only. While both are present, servers with either chain are accepted;
//! afterwards only the new one. No restart and no new client is needed; connections
//! already open keep the trust decision they were opened with (see
//! [`crate::client`]).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::builder::WatchedSecretBuilder;
use crate::report::{MonotonicClock, NoopRecorder, WarningLimiter};
use crate::secret_ref::SecretRef;
use crate::source::{SecretSource, SourceError};
use crate::trust_source::{
    SecretTrustSource, TrustAnchors, TrustOrigin, TrustReloadError, TrustSource,
};

/// Which server a verified chain must belong to, once it leads to a trusted root.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerAuthorization {
    /// The host name the client connects to (webpki's check of the DNS or IP SANs),
    /// as for any HTTPS server. The default, and the only choice for CA-Secret trust.
    HostName,
    /// Exactly this SPIFFE ID, as the one URI SAN of the server's leaf (SPIFFE mode).
    /// No host-name check is made: an X509-SVID names a workload, not a host, and the
    /// Workload API vouches for no DNS name the client could check.
    SpiffeId(spiffe::SpiffeId),
}

/// A server whose chain is trusted presented another SPIFFE ID than the one
/// authorized (or none, or several).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("server presented SPIFFE ID {presented}, expected {expected}")]
pub struct SpiffeIdMismatch {
    /// The authorized SPIFFE ID.
    pub expected: String,
    /// What the leaf carries: its URI SANs, or a description when it has none.
    pub presented: String,
}

/// Verifies `end_entity`'s chain to `anchors` for server authentication at `now`,
/// without any name check.
fn verify_chain(
    anchors: &TrustAnchors,
    provider: &CryptoProvider,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
) -> Result<(), rustls::Error> {
    use rustls::CertificateError as C;
    let cert = webpki::EndEntityCert::try_from(end_entity).map_err(pki_error)?;
    cert.verify_for_usage(
        provider.signature_verification_algorithms.all,
        &anchors.roots().roots,
        intermediates,
        now,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .map(|_| ())
    .map_err(|e| match e {
        webpki::Error::UnknownIssuer => rustls::Error::InvalidCertificate(C::UnknownIssuer),
        other => pki_error(other),
    })
}

fn pki_error(error: webpki::Error) -> rustls::Error {
    use rustls::CertificateError as C;
    rustls::Error::InvalidCertificate(match error {
        webpki::Error::BadDer | webpki::Error::BadDerTime => C::BadEncoding,
        webpki::Error::CertExpired { .. } => C::Expired,
        webpki::Error::CertNotValidYet { .. } => C::NotValidYet,
        webpki::Error::UnknownIssuer => C::UnknownIssuer,
        webpki::Error::InvalidSignatureForPublicKey => C::BadSignature,
        other => C::Other(rustls::OtherError(Arc::new(other))),
    })
}

/// The leaf's one URI SAN must be `expected`.
fn authorize_spiffe_id(
    end_entity: &CertificateDer<'_>,
    expected: &spiffe::SpiffeId,
) -> Result<(), rustls::Error> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let expected_text = expected.to_string();
    let mismatch = |presented: String| {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
            Arc::new(SpiffeIdMismatch {
                expected: expected_text.clone(),
                presented,
            }),
        )))
    };
    let (_, cert) = X509Certificate::from_der(end_entity.as_ref())
        .map_err(|_| rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
    let uris: Vec<&str> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::URI(uri) => Some(*uri),
                _ => None,
            })
            .collect(),
        Ok(None) => Vec::new(),
        Err(_) => return Err(mismatch("an unparseable subjectAltName".to_owned())),
    };
    match uris.as_slice() {
        [one] if spiffe::SpiffeId::new(*one).is_ok_and(|id| id == *expected) => Ok(()),
        [] => Err(mismatch("no URI SAN".to_owned())),
        several => Err(mismatch(several.join(", "))),
    }
}

/// Why a trust verifier could not be built (start-up).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The CA Secret's cache could not be started.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The source holds no usable root set now: the CA Secret does not exist or holds
    /// no usable root (naming the Secret and the data key), or there is no usable
    /// SPIFFE bundle; the same reasons a handshake-time reload fails for.
    #[error(transparent)]
    Unusable(#[from] TrustReloadError),
    /// webpki's verifier could not be built for the roots.
    #[error("building the server-certificate verifier for {origin} failed: {source}")]
    Verifier {
        /// Where the roots came from.
        origin: TrustOrigin,
        /// rustls's reason.
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
}

/// Why one handshake-time reload of the trust failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustFailure {
    /// The source had no usable roots.
    #[error(transparent)]
    Reload(#[from] TrustReloadError),
    /// webpki's verifier could not be built for the new roots.
    #[error("building the server-certificate verifier for {origin} failed: {source}")]
    Verifier {
        /// Where the roots came from.
        origin: TrustOrigin,
        /// rustls's reason.
        #[source]
        source: rustls::client::VerifierBuilderError,
    },
}

/// The verifier's visible state, as returned by [`TrustVerifier::state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustState {
    /// Where the roots are read from.
    pub source: TrustOrigin,
    /// How many roots are used (the last good set).
    pub roots: usize,
    /// The earliest `notAfter` among the roots used, when known.
    pub not_after: Option<SystemTime>,
    /// Wall-clock time the roots used were loaded.
    pub last_good_reload: SystemTime,
    /// Failed reloads since the verifier was built.
    pub failures: u64,
    /// Whether the most recent reload failed (the roots used are stale).
    pub stale: bool,
    /// The last error of the watch behind the source, if it is failing now.
    pub watch_error: Option<String>,
}

/// What a rate-limited stale-trust warning says.
#[derive(Debug)]
pub struct TrustStaleWarning<'a> {
    /// Where the roots are read from.
    pub source: &'a TrustOrigin,
    /// Why the latest reload failed.
    pub error: &'a (dyn std::error::Error + 'static),
    /// How many roots the last good set holds (still used).
    pub roots: usize,
    /// How long the last good roots have been used since they were loaded.
    pub stale_for: Duration,
    /// Failures not warned about since the previous warning.
    pub suppressed: u64,
}

/// Receives the trust verifier's state changes; implement it to export metrics.
///
/// Called on the handshake path: implementations must be cheap and must not block.
/// Every method has a no-op default. The identity resolver's recorder is
/// [`StateRecorder`](crate::report::StateRecorder); one type may implement both.
pub trait TrustRecorder: Send + Sync + fmt::Debug + 'static {
    /// A new root set is used (at start-up, and each time the roots change; an
    /// unchanged Secret is not reported again).
    fn trust_loaded(&self, source: &TrustOrigin, anchors: &TrustAnchors, at: SystemTime) {
        let _ = (source, anchors, at);
    }

    /// A reload failed; `failures` is the total number of failed reloads so far.
    fn trust_reload_failed(
        &self,
        source: &TrustOrigin,
        error: &(dyn std::error::Error + 'static),
        failures: u64,
    ) {
        let _ = (source, error, failures);
    }

    /// A rate-limited stale-trust warning was logged (at `WARN` through `tracing`).
    fn trust_stale_warning(&self, warning: &TrustStaleWarning<'_>) {
        let _ = warning;
    }
}

impl TrustRecorder for NoopRecorder {}

/// The roots being used and webpki's verifier for them.
struct Served {
    anchors: Arc<TrustAnchors>,
    verifier: Arc<WebPkiServerVerifier>,
    loaded_at: SystemTime,
    loaded_mono: Duration,
}

struct Inner {
    source: Arc<dyn TrustSource>,
    provider: Arc<CryptoProvider>,
    authorization: ServerAuthorization,
    current: ArcSwap<Served>,
    failures: AtomicU64,
    stale: AtomicBool,
    warnings: WarningLimiter,
    recorder: Arc<dyn TrustRecorder>,
    clock: Arc<dyn MonotonicClock>,
}

/// A rustls server-certificate verifier whose roots follow a watched source (the
/// peer's CA Secret). Cheap to clone and share (an `Arc`): build it once at start-up
/// and hand clones to every client configuration.
#[derive(Clone)]
pub struct TrustVerifier {
    inner: Arc<Inner>,
}

impl fmt::Debug for TrustVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let served = self.inner.current.load();
        f.debug_struct("TrustVerifier")
            .field("source", self.inner.source.origin())
            .field("roots", &served.anchors.len())
            .field("failures", &self.inner.failures.load(Ordering::Relaxed))
            .finish()
    }
}

impl crate::builder::sealed::Sealed for TrustVerifier {}
impl crate::builder::Watched for TrustVerifier {
    type Recorder = dyn TrustRecorder;
    fn no_recorder() -> Arc<Self::Recorder> {
        Arc::new(NoopRecorder)
    }
}

/// Builds a [`TrustVerifier`]; see [`TrustVerifier::builder`]. The settings are
/// shared with the identity resolver's builder ([`WatchedSecretBuilder`]).
pub type TrustVerifierBuilder = WatchedSecretBuilder<TrustVerifier>;

impl WatchedSecretBuilder<TrustVerifier> {
    /// Starts the CA Secret's watch and waits, at most the sync timeout, for it to
    /// sync and for the Secret to hold at least one usable root.
    ///
    /// Fails with an error naming the Secret when it is missing or malformed, when
    /// the watch is refused, or on timeout. Cancel-safe: dropping the future stops
    /// the watch.
    pub async fn build(self) -> Result<TrustVerifier, TrustError> {
        let provider = self.provider_or_default();
        let source = SecretSource::watch(self.client, self.secret, self.timeout).await?;
        TrustVerifier::from_trust_source(
            Arc::new(SecretTrustSource::new(source)),
            provider,
            self.recorder,
            self.clock,
            self.warning_period,
        )
    }
}

fn build_verifier(
    anchors: &TrustAnchors,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, rustls::client::VerifierBuilderError> {
    WebPkiServerVerifier::builder_with_provider(anchors.roots().clone(), provider.clone()).build()
}

impl TrustVerifier {
    /// A builder for a verifier trusting the roots in the CA Secret `secret`,
    /// watched through `client`.
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::options::SecretRef;
    /// use svc_tls::verifier::TrustVerifier;
    ///
    /// let ca = SecretRef::new("unikorn", "unikorn-identity-ca");
    /// let trust = TrustVerifier::builder(client, ca).build().await?;
    /// println!("trusting {} root(s)", trust.state().roots);
    /// # Ok(()) }
    /// ```
    pub fn builder(client: kube::Client, secret: SecretRef) -> TrustVerifierBuilder {
        WatchedSecretBuilder::new(client, secret)
    }

    /// A verifier over any [`TrustSource`]: it must hold a usable root set now.
    /// Servers are authorized by host name ([`ServerAuthorization::HostName`]).
    pub fn from_trust_source(
        source: Arc<dyn TrustSource>,
        provider: Arc<CryptoProvider>,
        recorder: Arc<dyn TrustRecorder>,
        clock: Arc<dyn MonotonicClock>,
        warning_period: Duration,
    ) -> Result<Self, TrustError> {
        Self::from_trust_source_authorizing(
            source,
            provider,
            recorder,
            clock,
            warning_period,
            ServerAuthorization::HostName,
        )
    }

    /// [`TrustVerifier::from_trust_source`], authorizing servers as `authorization` says.
    pub fn from_trust_source_authorizing(
        source: Arc<dyn TrustSource>,
        provider: Arc<CryptoProvider>,
        recorder: Arc<dyn TrustRecorder>,
        clock: Arc<dyn MonotonicClock>,
        warning_period: Duration,
        authorization: ServerAuthorization,
    ) -> Result<Self, TrustError> {
        let anchors = source.current()?;
        let verifier =
            build_verifier(&anchors, &provider).map_err(|source_error| TrustError::Verifier {
                origin: source.origin().clone(),
                source: source_error,
            })?;
        let loaded_at = SystemTime::now();
        recorder.trust_loaded(source.origin(), &anchors, loaded_at);
        let served = Served {
            anchors,
            verifier,
            loaded_at,
            loaded_mono: clock.elapsed(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                source,
                provider,
                authorization,
                current: ArcSwap::from_pointee(served),
                failures: AtomicU64::new(0),
                stale: AtomicBool::new(false),
                warnings: WarningLimiter::new(warning_period, clock.clone()),
                recorder,
                clock,
            }),
        })
    }

    /// Reads the roots from the source now, as a handshake does, and returns webpki's
    /// verifier to use: the one for the current roots (built only when they
    /// changed), or on failure the last good one.
    fn reload(&self) -> Arc<Served> {
        let inner = &*self.inner;
        let origin = inner.source.origin();
        let served = inner.current.load();
        let failure = match inner.source.current() {
            Ok(anchors) if Arc::ptr_eq(&anchors, &served.anchors) => {
                self.recovered(&anchors);
                return arc_swap::Guard::into_inner(served);
            }
            Ok(anchors) => match build_verifier(&anchors, &inner.provider) {
                Ok(verifier) => {
                    let loaded_at = SystemTime::now();
                    let fresh = Arc::new(Served {
                        anchors: anchors.clone(),
                        verifier,
                        loaded_at,
                        loaded_mono: inner.clock.elapsed(),
                    });
                    inner.current.store(fresh.clone());
                    self.recovered(&anchors);
                    inner.recorder.trust_loaded(origin, &anchors, loaded_at);
                    return fresh;
                }
                Err(source) => TrustFailure::Verifier {
                    origin: origin.clone(),
                    source,
                },
            },
            Err(error) => TrustFailure::Reload(error),
        };
        let failures = inner.failures.fetch_add(1, Ordering::AcqRel) + 1;
        inner.stale.store(true, Ordering::Release);
        inner
            .recorder
            .trust_reload_failed(origin, &failure, failures);
        if let Some(suppressed) = inner.warnings.admit() {
            let stale_for = inner.clock.elapsed().saturating_sub(served.loaded_mono);
            let warning = TrustStaleWarning {
                source: origin,
                error: &failure,
                roots: served.anchors.len(),
                stale_for,
                suppressed,
            };
            tracing::warn!(
                source = %origin,
                error = %failure,
                roots = warning.roots,
                stale_for_secs = stale_for.as_secs(),
                suppressed,
                "CA trust reload failed; verifying servers against the last good roots \
                 (stale for {}s, {} more failures suppressed since the last warning)",
                stale_for.as_secs(),
                suppressed,
            );
            inner.recorder.trust_stale_warning(&warning);
        }
        arc_swap::Guard::into_inner(served)
    }

    fn recovered(&self, anchors: &TrustAnchors) {
        if self.inner.stale.swap(false, Ordering::AcqRel) {
            tracing::info!(
                source = %self.inner.source.origin(),
                roots = anchors.len(),
                "CA trust reloaded again after failures"
            );
        }
    }

    /// A snapshot of the visible state: roots used, failures, staleness, watch health.
    pub fn state(&self) -> TrustState {
        let served = self.inner.current.load();
        TrustState {
            source: self.inner.source.origin().clone(),
            roots: served.anchors.len(),
            not_after: served.anchors.not_after(),
            last_good_reload: served.loaded_at,
            failures: self.inner.failures.load(Ordering::Acquire),
            stale: self.inner.stale.load(Ordering::Acquire),
            watch_error: self.inner.source.watch_error(),
        }
    }

    /// The root set currently used (the last good one), without reloading.
    pub fn current(&self) -> Arc<TrustAnchors> {
        self.inner.current.load().anchors.clone()
    }

    /// The source the roots are read from.
    pub fn trust_source(&self) -> &dyn TrustSource {
        &*self.inner.source
    }

    /// The watched CA Secret's cache, when the roots come from a Secret.
    pub fn secret_source(&self) -> Option<&SecretSource> {
        let source: &dyn std::any::Any = &*self.inner.source;
        source
            .downcast_ref::<SecretTrustSource>()
            .map(SecretTrustSource::secret_source)
    }
}

impl ServerCertVerifier for TrustVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // One snapshot: the whole chain is verified against one root set.
        let served = self.reload();
        match &self.inner.authorization {
            ServerAuthorization::HostName => served.verifier.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            ServerAuthorization::SpiffeId(expected) => {
                verify_chain(
                    &served.anchors,
                    &self.inner.provider,
                    end_entity,
                    intermediates,
                    now,
                )?;
                authorize_spiffe_id(end_entity, expected)?;
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    // Signatures depend on the provider only, not on the roots: checked directly with
    // its algorithms, as webpki's verifier does.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.inner.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.inner.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner
            .provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
