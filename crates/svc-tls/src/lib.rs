//! # svc-tls
//!
//! Who this service is to its peers: CA trust and client identity from
//! `kubernetes.io/tls` Secrets or from the SPIFFE Workload API, a rustls
//! client-certificate resolver that re-reads the identity on every handshake, and JWS
//! signing of the `X-Principal` payload with that identity's key (PS512 for RSA,
//! ES256/ES384 for ECDSA).
//!
//! The crate is its two halves over one core:
//!
//! | module | what it is |
//! |---|---|
//! | [`identity`] | the identity seam, the handshake-time resolver, its Secret and SPIFFE sources |
//! | [`trust`] | the trust seam, the handshake-time verifier, its Secret and SPIFFE-bundle sources |
//! | [`last_good`] | the one last-good core both use: last good value, failure episodes, rate-limited warnings, watch health |
//! | [`watch`] | the watched Secret (one reflector per Secret) and the builder of both halves over it |
//! | [`spiffe`] | the SPIFFE Workload API stream |
//! | [`files`] | mounted files (a Secret or projected volume, csi-driver, spiffe-helper, a pod certificate), followed by inotify and polling |
//! | [`material`] | bytes to identities and root sets (no I/O) |
//! | [`origin`] | where a credential comes from |
//! | [`readiness`], [`duration`] | `/readyz` checks, Go's `time.Duration` as the flags spell it |
//! | [`options`], [`client`], [`principal`] | flags, peer clients, signed principals |
//! | [`serving`] | the serving half: a rustls server over the same identity and a watched client CA, the caller from the connection |
//! | [`receiving`] | the ingress verifier over the process's watched CA Secret |
//! | [`recording`] | what peer clients and listeners report (requests, handshake failures, pool retirements) |
//! | `metrics` (feature `metrics`) | Prometheus metrics of identity, trust, watches, principals and peer requests |
//! | `telemetry` (feature `otel`) | W3C trace context on peer requests and served requests, spans where work happens, OTLP/HTTP export |
//!
//! The public tree is written out below, in this file, as rustls writes its own: the
//! files are private modules with one job each, and each public module is declared
//! here naming exactly what it exports, so that moving a file never moves a public
//! path. What a service names is re-exported here, as `kube` does for `Client` and
//! `Config`:
//!
//! ```no_run
//! # async fn f(client: svc_tls::ClusterClient) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use svc_tls::{ClientIdentityOptions, PeerOptions, PeerTls};
//!
//! let peer = PeerOptions::new("region").with_host_value("https://region.example");
//! let identity = ClientIdentityOptions::new(None).with_secret("unikorn", "region-client-cert");
//! let tls = PeerTls::from_options(&client, &peer, &identity, Duration::from_secs(30)).await?;
//! let peer = tls.client()?; // the process's pooled client for this peer
//! let response = peer.send(peer.get(tls.host()?.join("api/v1/regions")?)?).await?;
//! # let _ = response; Ok(()) }
//! ```
//!
//! The client passed in is a [`ClusterClient`]: a `kube::Client` that says which
//! cluster it reads (`kube_construct::CachedClient::cluster_client`,
//! `provision_scope::cluster_client_identified`, or
//! [`ClusterClient::try_from_config`]). The process's shared Secret watches are keyed
//! by it, so a client of a remote cluster never receives this cluster's Secrets, nor
//! this cluster's clients a remote one's.
//!
//! It deliberately does not own building the service's general Kubernetes client
//! (`kube-construct`).
#![deny(missing_docs)]

// Private file modules that no public path leads into.
mod follow;
mod wiring;

pub mod origin {
    //! Where a credential comes from: the names states, errors, logs and recorders use.

    mod bundles;
    mod refs;

    pub use bundles::{BundleSelectionError, ClusterTrustBundlesRef};
    pub use refs::{
        ConfigMapRef, IdentityOrigin, MaterialOrigin, SecretRef, SourceHealth, TrustOrigin,
    };
}

pub mod duration {
    //! Go's `time.Duration` as the deployed flags spell it (negative and zero included).
    //!
    #![doc = include_str!("duration/overview.md")]

    mod go;

    pub use go::{GoDuration, parse_go_duration};
}

pub mod material {
    //! Bytes to identities and root sets: pure functions of a Secret's data, no I/O.
    //!
    #![doc = include_str!("material/overview.md")]

    pub(crate) mod anchors;
    mod cache;
    pub(crate) mod der;
    mod error;
    pub(crate) mod identity;
    mod key;
    mod limits;
    mod pem;
    mod provider;
    mod secret;
    mod trust;
    pub(crate) mod validity;
    mod verify_memo;

    pub use anchors::{TrustAnchors, TrustCache};
    pub use cache::{HandshakeLoad, IdentityCache};
    pub use error::{MaterialError, MaterialErrorKind};
    pub use identity::{
        Identity, load_identity, load_identity_at, load_identity_from_pem,
        load_identity_from_pem_at,
    };
    pub use key::KeyKind;
    pub use limits::{
        CA_CRT, MAX_CERTIFICATE_VALUE_BYTES, MAX_KEY_VALUE_BYTES, SECRET_TYPE_TLS, TLS_CRT, TLS_KEY,
    };
    pub use provider::crypto_provider;
    pub use trust::{
        ConfigMapTrustError, ConfigMapTrustProblem, configmap_value, load_configmap_trust,
        load_trust, load_trust_detailed,
    };
    pub use validity::CertificateValidity;
}

pub mod last_good {
    //! The one last-good core of both halves: the value served, failure episodes,
    //! rate-limited warnings, watch health, and the recorder seam.
    //!
    #![doc = include_str!("last_good/overview.md")]

    mod clock;
    mod events;
    mod limiter;
    pub(crate) mod report;
    pub(crate) mod slot;
    pub(crate) mod watch_health;

    pub use clock::{MonotonicClock, SystemClock};
    pub use events::{OutsideValidity, Recovery, ReloadOrigin, ReloadRecorder, StaleWarning};
    pub use limiter::{DEFAULT_WARNING_PERIOD, MAX_WARNING_PERIOD, WarningLimiter};
    pub use slot::NoopRecorder;
    pub use watch_health::{DEFAULT_WATCH_FAILURE_THRESHOLD, WatchHealthState};

    /// Where it was before `svc_tls::testing` held the test-only names (issue 53):
    /// kept so that old imports compile, out of the docs. Name
    /// `svc_tls::testing::ManualClock`.
    #[doc(hidden)]
    pub use clock::ManualClock;
}

pub mod watch {
    //! Objects watched through the API server, one cache per object generic over its
    //! kind ([`WatchedObject<K>`]), the process's registry of those watches
    //! ([`WatchedObjects`]), and the one builder of what follows a watched object.
    //!
    #![doc = include_str!("watch/overview.md")]

    pub(crate) mod builder;
    mod bundles;
    mod configmap;
    mod held;
    pub(crate) mod kind;
    mod object;
    pub(crate) mod observer;
    pub(crate) mod registry;
    mod runtime;
    mod secret;
    pub(crate) mod shareable;
    mod shared;

    pub use builder::{BuiltFromWatch, WatchedBuilder};
    pub use bundles::{ClusterTrustBundle, ClusterTrustBundleSpec, MEMBERS_ANNOTATION};
    #[allow(deprecated)]
    pub use configmap::{ConfigMapSource, ConfigMapSourceError, SharedConfigMap};
    /// The Kubernetes kinds watched here (k8s-openapi's types), re-exported so that
    /// a caller can name `WatchedObject<Secret>` without a dependency of its own.
    pub use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    pub use kind::{WatchedKind, WatchedRef};
    pub use object::{
        DEFAULT_COALESCE_INTERVAL, DEFAULT_SINGLE_LIST_BYTES, DEFAULT_SYNC_TIMEOUT, WatchError,
        WatchedObject, default_limits,
    };
    #[allow(deprecated)]
    pub use registry::SecretWatches;
    pub use registry::{DEFAULT_EVICTION_GRACE, RegistryCounts, WatchedObjects};
    #[allow(deprecated)]
    pub use secret::{SecretSource, SharedSecret, SourceError};
    pub use shared::SharedObject;
    pub use watch_ready::{LimitError, WatchLimits, WatchStatus};
}

pub mod spiffe {
    //! The SPIFFE Workload API stream: the X509-SVID and the trust bundles, rotated by the
    //! node agent.
    //!
    #![doc = include_str!("spiffe/overview.md")]

    pub(crate) mod error;
    mod stream;
    mod streams;
    pub(crate) mod svid;

    pub use ::spiffe::{SpiffeId, TrustDomain};
    pub use error::{SpiffeError, SpiffeStartError, SvidError};
    pub use stream::{SPIFFE_ENDPOINT_SOCKET, SpiffeEndpoint, WorkloadApiSource};
    pub use streams::WorkloadApiStreams;
}

pub mod files {
    //! Mounted files: a directory of key, certificate and CA files (a mounted Secret
    //! or projected volume, cert-manager's csi-driver, spiffe-helper, a pod
    //! certificate) followed by inotify and polling, read into memory when it changes.
    //!
    #![doc = include_str!("files/overview.md")]

    mod error;
    mod layout;
    pub(crate) mod mounted;
    mod read;
    mod registry;

    pub use error::FileError;
    pub use layout::{DEFAULT_CREDENTIAL_BUNDLE, FileLayout, UnknownLayout};
    pub use mounted::{DEFAULT_POLL_INTERVAL, FileWatchOptions, MountedFiles, WatchMode};
    pub use registry::FileWatches;
}

pub mod identity {
    //! The client identity: its seam, the handshake-time resolver, and its Secret and
    //! SPIFFE sources.
    //!
    #![doc = include_str!("identity/overview.md")]

    mod from_file;
    mod from_secret;
    mod from_spiffe;
    pub(crate) mod resolver;
    mod server_cert;
    mod settings;
    mod source;
    mod state;

    pub use from_file::FileIdentitySource;
    pub use from_secret::{IdentityObject, IdentityResolverBuilder, SecretIdentitySource};
    pub use from_spiffe::SpiffeIdentitySource;
    pub use resolver::{IdentityError, IdentityResolver};
    pub use settings::IdentitySettings;
    pub use source::{IdentityReloadError, IdentitySource};
    pub use state::IdentityState;
}

pub mod trust {
    //! Peer trust: its seam, the handshake-time verifier, server authorization, and its
    //! Secret, ConfigMap and SPIFFE-bundle sources.
    //!
    #![doc = include_str!("trust/overview.md")]

    mod authorization;
    mod builder;
    mod error;
    mod from_bundles;
    mod from_configmap;
    mod from_file;
    mod from_object;
    mod from_secret;
    mod from_spiffe;
    mod settings;
    mod source;
    mod state;
    pub(crate) mod verifier;

    pub use authorization::{ServerAuthorization, SpiffeIdMismatch};
    pub use builder::{TrustObject, TrustVerifierBuilder};
    pub use error::TrustError;
    pub use from_bundles::{ClusterTrustBundleError, ClusterTrustBundleProblem};
    #[allow(deprecated)]
    pub use from_configmap::ConfigMapTrustSource;
    pub use from_file::FileTrustSource;
    pub use from_object::{TrustFromObject, WatchedTrustSource};
    #[allow(deprecated)]
    pub use from_secret::SecretTrustSource;
    pub use from_spiffe::SpiffeTrustSource;
    pub use settings::{DEFAULT_MAX_ROOTS_WITHOUT_SOURCE, TrustSettings};
    pub use source::{TrustReloadError, TrustSource};
    pub use state::TrustState;
    pub use verifier::TrustVerifier;
}

pub mod options {
    //! Command-line options: peer services and client identities (clap builder and
    //! derive), and the one rule for Secret references.
    //!
    #![doc = include_str!("options/overview.md")]

    mod derive;
    mod error;
    pub(crate) mod flags;
    pub(crate) mod host;
    mod identity;
    mod peer;

    /// Where these were before `origin` was their one path (issue 53): kept so that old
    /// imports compile, out of the docs. Name [`crate::origin::SecretRef`] and
    /// [`crate::origin::ConfigMapRef`].
    #[doc(hidden)]
    pub use crate::origin::{ConfigMapRef, SecretRef};
    pub use derive::{IdentityArgs, PeerArgs, PeerName, peers};
    pub use error::OptionsError;
    pub use host::{HostError, HostProblem};
    pub use identity::{ClientCertificateSource, ClientIdentityOptions, IdentityConfig};
    pub use peer::{DEFAULT_CA_CONFIGMAP_KEY, HttpProtocol, PeerCa, PeerOptions};
}

pub mod principal {
    //! Signed principals: the `X-Principal` header, signed and verified wire-compatibly
    //! with the Go services.
    //!
    #![doc = include_str!("principal/overview.md")]

    mod current_identity;
    pub(crate) mod ingress;
    mod jws;
    mod payload;
    pub(crate) mod recorder;
    mod replay;
    mod sign;
    mod verify;

    pub use current_identity::CurrentIdentity;
    #[allow(deprecated)]
    pub use deprecated_ingress::*;
    pub use jws::{
        Algorithm, AlgorithmPolicy, DEFAULT_CLOCK_SKEW, DEFAULT_MAX_PRINCIPAL_LIFETIME,
        DEFAULT_PRINCIPAL_LIFETIME, Part, PrincipalToken, TokenTimes,
    };
    pub use payload::{PRINCIPAL_HEADER, Principal};
    pub use recorder::{SIGN_RESULTS, TokenRecorder, VERIFY_RESULTS};
    pub use replay::{DEFAULT_REPLAY_CAPACITY, ReplayCache};
    pub use sign::{PrincipalSigner, SignError, attach_principal, sign_with, sign_with_key};
    /// The URL a principal is signed for (the `url` crate's type, which is also
    /// `reqwest::Url`): re-exported so that callers of [`sign_with`] and
    /// [`PrincipalSigner::sign`] need no dependency of their own.
    pub use url::Url;
    pub use verify::{
        CertificateError, DEFAULT_MAX_TOKEN_BYTES, PeerCertificate, VerifyError, VerifyOptions,
        verify,
    };

    /// The receiving names' paths before [`receiving`](crate::receiving) was their one
    /// home (issue 53), kept one release.
    mod deprecated_ingress {
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::AllowedPeer`")]
        pub type AllowedPeer = super::ingress::AllowedPeer;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::AllowedPeerError`")]
        pub type AllowedPeerError = super::ingress::AllowedPeerError;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::CompatibilityWindow`")]
        pub type CompatibilityWindow = super::ingress::CompatibilityWindow;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::IngressError`")]
        pub type IngressError = super::ingress::IngressError;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::IngressVerifier`")]
        pub type IngressVerifier = super::ingress::IngressVerifier;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::ReceiverConfigError`")]
        pub type ReceiverConfigError = super::ingress::ReceiverConfigError;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::ReceivingMode`")]
        pub type ReceivingMode = super::ingress::ReceivingMode;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::RequestPrincipalError`")]
        pub type RequestPrincipalError = super::ingress::RequestPrincipalError;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(
            since = "0.2.0",
            note = "use `receiving::DEFAULT_MAX_CERT_HEADER_BYTES`"
        )]
        pub const DEFAULT_MAX_CERT_HEADER_BYTES: usize =
            super::ingress::DEFAULT_MAX_CERT_HEADER_BYTES;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::INGRESS_CLIENT_CERT_HEADER`")]
        pub const INGRESS_CLIENT_CERT_HEADER: &str = super::ingress::INGRESS_CLIENT_CERT_HEADER;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(
            since = "0.2.0",
            note = "use `receiving::INGRESS_CLIENT_VERIFY_HEADER`"
        )]
        pub const INGRESS_CLIENT_VERIFY_HEADER: &str = super::ingress::INGRESS_CLIENT_VERIFY_HEADER;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::INGRESS_VERIFY_SUCCESS`")]
        pub const INGRESS_VERIFY_SUCCESS: &str = super::ingress::INGRESS_VERIFY_SUCCESS;
        /// Moved to [`receiving`](crate::receiving).
        #[deprecated(since = "0.2.0", note = "use `receiving::UNVERIFIED_WARNING_TEXT`")]
        pub const UNVERIFIED_WARNING_TEXT: &str = super::ingress::UNVERIFIED_WARNING_TEXT;
    }
}

pub mod recording {
    //! What peer clients and the serving half report: requests by status class and
    //! duration, handshake failures by reason, pool retirements (the seam the
    //! metrics implement).
    //!
    #![doc = include_str!("recording/overview.md")]

    mod handshake;
    pub(crate) mod peer;

    pub use handshake::{HANDSHAKE_FAILURES, HandshakeFailure, handshake_failure};
    pub use peer::{ListenerSeries, PeerRecorder, PeerSeries, STATUS_CLASSES, StatusClass};
}

pub mod client {
    //! Peer clients: rustls client configurations and `reqwest` clients whose pooled
    //! connections follow identity and trust rotations.
    //!
    #![doc = include_str!("client/overview.md")]

    mod config;
    mod error;
    mod from_options;
    mod limits;
    mod peer;
    mod pooled;
    mod recorded;
    mod redirect;
    mod request;
    #[cfg(test)]
    mod spiffe_sharing;

    pub use config::{
        TrustMode, client_config, client_config_for, reqwest_builder, reqwest_client,
        trust_from_secret,
    };
    pub use error::{PeerClientError, PeerRequestError};
    pub use from_options::PeerTlsSettings;
    pub use limits::{DEFAULT_MAX_RESPONSE_BODY, DEFAULT_REQUEST_TIMEOUT, ResponseBodyTooLarge};
    pub use peer::PeerTls;
    pub use pooled::PeerClient;
    pub use redirect::{RedirectRefused, same_origin_policy};
    pub use request::PeerRequest;
}

pub mod serving {
    //! The serving half: a rustls server presenting the watched identity and verifying
    //! callers against the watched client CA, and the caller taken from the connection.
    //!
    #![doc = include_str!("serving/overview.md")]

    mod caller;
    mod caller_verifier;
    mod config;
    mod gateway;
    mod layer;
    mod names;
    mod serve;

    pub use caller::{Caller, CallerError, CallerPrincipalError, request_principal};
    pub use caller_verifier::CallerVerifier;
    pub use config::{ClientAuth, ServerTls, ServerTlsBuilder, ServerTlsError};
    pub use gateway::{ForwardedFormat, Gateways, XFCC_HEADER};
    pub use layer::{CallerLayer, CallerService, FORWARDED_CERTIFICATE_HEADERS};
    pub use names::ServerNameError;
    pub use serve::{CLOSE_GRACE, HANDSHAKE_TIMEOUT, TRUST_CHECK_INTERVAL, serve};
}

pub mod receiving {
    //! The receiving side: an ingress verifier over the process's watched client CA
    //! Secret, built by [`IngressBuilder`].
    //!
    #![doc = include_str!("receiving/overview.md")]

    mod builder;

    pub use crate::principal::ingress::{
        AllowedPeer, AllowedPeerError, CompatibilityWindow, DEFAULT_MAX_CERT_HEADER_BYTES,
        INGRESS_CLIENT_CERT_HEADER, INGRESS_CLIENT_VERIFY_HEADER, INGRESS_VERIFY_SUCCESS,
        IngressError, IngressVerifier, ReceiverConfigError, ReceivingMode, RequestPrincipalError,
        UNVERIFIED_WARNING_TEXT,
    };
    pub use builder::{IngressBuilder, ReceivingError};
}

pub mod readiness {
    //! Readiness checks of identity, trust and declared dependencies, for `/readyz`.
    //!
    #![doc = include_str!("readiness/overview.md")]

    mod report;
    mod verdict;

    pub use report::{Check, Readiness, Report, Summary, Verdict};
}

/// Names only tests use, fenced here out of the docs (issue 53): a service's tests
/// import them from `svc_tls::testing`; nothing a service runs needs them.
#[doc(hidden)]
pub mod testing {
    /// A monotonic clock that moves only when told to: give it to a builder's
    /// `clock(..)` ([`MonotonicClock`](crate::last_good::MonotonicClock)) to drive
    /// warning periods and stale ages (what Go's `SetNow` was for).
    pub use crate::last_good::ManualClock;
}

#[cfg(feature = "otel")]
pub mod telemetry {
    //! Traces (feature `otel`): W3C trace context on every hop and OTLP/HTTP export,
    //! through OpenTelemetry's Rust crates and `tracing-opentelemetry`, as the platform's
    //! Go processes do with `otel.GetTextMapPropagator()` and `otelhttp`.
    //!
    //! - **Sending**: [`PeerClient::send`](crate::client::PeerClient::send) and
    //!   [`PeerClient::execute`](crate::client::PeerClient::execute) (so generated clients
    //!   over it) send each request in a client span (`svc_tls.peer.request`) and write
    //!   its context as `traceparent`/`tracestate` through the global propagator
    //!   ([`inject`]), when the current span has an OpenTelemetry context. Without one
    //!   (no OpenTelemetry layer in the subscriber, or the span disabled) a request pays a
    //!   thread-local look-up and one branch; with the feature off, nothing.
    //! - **Receiving**: [`serve`](crate::serving::serve) and
    //!   [`CallerLayer`](crate::serving::CallerLayer) run each request's service in a
    //!   server span (`svc_tls.serve`) whose parent is the caller's span when the request
    //!   carries one ([`continue_trace`]); the ingress verifier's span
    //!   (`svc_tls.principal.verify`) continues the trace of the headers it verifies when
    //!   nothing else did.
    //! - **Export**: [`install`] (one call at start-up, `--otlp-endpoint` in the examples)
    //!   sends the spans to an OTLP collector through a bounded, counted queue that never
    //!   holds a request up.
    //!
    //! Spans where work happens (all plain `tracing` spans, OpenTelemetry spans through
    //! the layer): pool retirements (`svc_tls.pool.retire`), identity and trust reloads
    //! that load something, principal signing and verification, cache syncs. Their
    //! attributes name Secrets, serials and peers, never key material; a handshake on the
    //! no-change path makes none.

    mod export;
    pub(crate) mod propagate;

    pub use export::{
        DEFAULT_EXPORT_TIMEOUT, DEFAULT_MAX_QUEUED_SPANS, ExportStats, SHUTDOWN_TIMEOUT,
        TRACES_PATH, Telemetry, TelemetryBuilder, TelemetryError, install, traces_url,
    };
    pub use propagate::{continue_trace, extract, inject};
}

#[cfg(feature = "metrics")]
pub mod metrics {
    //! Prometheus metrics of identity, trust, watches, principals and peer requests
    //! (feature `metrics`).
    //!
    #![doc = include_str!("metrics/overview.md")]

    mod collector;
    mod counters;
    mod identity;
    pub(crate) mod install;
    mod peer;
    mod principal;
    mod source;
    #[cfg(test)]
    mod tests;
    mod trust;

    pub use collector::IDENTITY_STATES;
    pub use identity::REFRESH_RESULTS;
    pub use install::{InstallError, Metrics, SourceLabels, register};
    pub use peer::REQUEST_DURATION_BUCKETS;
    pub use source::{CountedSource, SourceRecorder};
    pub use trust::RELOAD_RESULTS;
}

#[cfg(feature = "generated-clients")]
pub mod generated {
    //! Generated API clients over [`PeerClient`](crate::client::PeerClient) (feature
    //! `generated-clients`): a progenitor client generated with this module's
    //! [`PeerApi`] as its inner type is made to run over the pooled peer client by one
    //! line, [`generated_client!`](crate::generated_client):
    //!
    //! - every request runs on the peer client's *current* generation
    //!   ([`PeerClient::current`](crate::client::PeerClient::current)), so its
    //!   connections are retired when the identity or the CA trust changes;
    //! - when the peer has a client identity, a principal signed for the request's URL
    //!   is attached as `X-Principal` before it is sent;
    //! - each request has the peer's request timeout and each response body its cap
    //!   ([`PeerClient::execute`](crate::client::PeerClient::execute)), applied under
    //!   the generated code, which reads bodies whole;
    //! - progenitor's errors become an [`ApiError`] that names the peer and quotes at
    //!   most a short escaped excerpt, never headers.
    //!
    //! In the crate that holds the generated code (progenitor's builder interface,
    //! `with_inner_type(quote!(crate::PeerApi))`):
    //!
    //! ```ignore
    //! pub use svc_tls::generated::PeerApi;
    //! mod generated; // progenitor's output
    //! pub use generated::Client;
    //! svc_tls::generated_client!(Client);
    //! ```
    //!
    //! and a service calls `Client::connect(&tls, || Principal { .. })?` once at
    //! start-up (`crates/region-api` is the example). What is lost against
    //! [`PeerClient::send`](crate::client::PeerClient::send): a request refused because
    //! the CA trust changed is reported as progenitor's `Error::CommunicationError`
    //! carrying the reqwest error, not as `PeerRequestError::TrustChanged`.

    mod hooks;

    pub use hooks::{ApiError, BODY_EXCERPT_CHARS, ConnectError, Parts, PeerApi};

    /// What [`generated_client!`](crate::generated_client) expands to names; not API.
    #[doc(hidden)]
    pub mod __private {
        pub use progenitor_client::{ClientHooks, ClientInfo, Error, OperationInfo};
        pub use reqwest;
    }
}

/// A kube client error as this crate's errors return it as their `source()`: an
/// escaped excerpt with the status code kept for matching.
pub use watch_ready::KubeError;
/// Outside text cut and escaped for logs: log an error that may quote a Secret, a
/// header or a plugin's output with `%svc_tls::excerpt::chain(&error)`.
pub use watch_ready::excerpt;

pub use client::{PeerClient, PeerClientError, PeerRequestError, PeerTls, TrustMode};
/// Which cluster a client reads: the shared watches are keyed by it.
pub use cluster_id::{ClusterClient, ClusterId, UnidentifiedCluster};
pub use identity::{IdentityError, IdentityResolver, IdentitySource, IdentityState};
pub use options::{ClientIdentityOptions, OptionsError, PeerOptions};
pub use origin::{IdentityOrigin, SecretRef, TrustOrigin};
pub use principal::{Principal, PrincipalSigner, VerifyError};
pub use trust::{TrustError, TrustSource, TrustState, TrustVerifier};
