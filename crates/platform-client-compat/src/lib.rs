//! # platform-client-compat
//!
//! A thin facade over the crates that replace the legacy Go `pkg/client`, in the
//! manner of the `kube` facade over `kube-client`, `kube-runtime` and `kube-core`:
//! a service depends on this one crate while it migrates, then on the focused
//! crates it actually uses (see `docs/migration.md`).
//!
//! It owns nothing of its own: every item is a re-export, so a type reached through
//! the facade is the same type as through its own crate, and code can move from
//! one path to the other a module at a time.
//!
//! Every exported identifier of the Go package, in the three generations services run
//! (the 24 h-timer release, the per-handshake one with prefixed client options, and the
//! newest, with SPIFFE), and every `pkg/errors` value its functions return, has a row;
//! `docs/go-pkg-client-surface.tsv` lists them with the repository, path and commit
//! (or code-index copy) they were read at, and this crate's test checks the
//! table against that file. "Differs" says what a migrating service will notice, and
//! why; `docs/migration.md` has the same table with more prose, and
//! `examples/migrated-service` is a service migrated through this crate.
//!
//! | Go `pkg/client` | here | differs, and why |
//! |---|---|---|
//! | `SchemeAdder` | [`construct::registry::Addition`] | a boxed `FnOnce(&mut Registry)`; same contract (first error stops) |
//! | `NewScheme(adders...)` | [`construct::registry::platform_registry`] | same order (built-ins, Unikorn, fake, Argo shim, yours); nothing returned on error |
//! | `New(ctx, adders...)` | [`construct::client::CachedClient`]`::builder()` … `.in_cluster()` / `.from_options()` / `.from_client_identified()` (`.from_client()` when the client is never handed to svc-tls) | returns only when every declared cache has synced; permanent errors fail at once (Go discarded the cache's start error); caches watch only what is declared (Go's cached `Get` of one Secret watched every Secret) |
//! | `ClusterContext` | [`scope::Cluster`] | immutable value carried by a task-local, not a `context.Context` pointer |
//! | `ClusterContext.Client` | [`scope::Cluster::client`] | a `kube::Client` |
//! | `ClusterContext.ID` | [`scope::Cluster::id`] | `Option<ResourceIdentifier>` (`None` at the root, as Go's nil) |
//! | `ClusterContext.Host` | [`scope::Cluster::host`] | `Option<String>`: `None` at the root where Go had `""` |
//! | `ClusterContext.Port` | [`scope::Cluster::port`] | `Option<u16>`, a number, not a string; 443/80 derived from the scheme when the server URL has none, as Go |
//! | `NewContext` / `FromContext` | [`scope::with_provisioner`] / [`scope::provisioner`] | Go's generic names carry the provisioner client; "context invalid" is [`scope::ScopeError`] naming the missing value |
//! | `NewContextWithCluster` / `ClusterFromContext` | [`scope::with_cluster`] / [`scope::cluster`] | as above; task-locals do not cross `tokio::spawn`: use [`scope::spawn`] |
//! | `NewContextWithNamespace` / `NamespaceFromContext` | [`scope::with_namespace`] / [`scope::namespace`] | as above |
//! | `HTTPOptions` | [`tls::options::PeerOptions`] | also `--S-http2` and `--S-pool-idle-timeout` (new, optional) |
//! | `NewHTTPOptions(service)` | [`tls::options::PeerOptions::new`] | none |
//! | `HTTPOptions.AddFlags` | [`tls::options::PeerOptions::augment`] + [`tls::options::PeerOptions::from_matches`] | clap instead of pflag; same names; values as pflag took them (any host string, empty = unset, last repeat wins) |
//! | `HTTPOptions.Host()` | [`tls::options::PeerOptions::host_value`] (as given) / [`tls::options::PeerOptions::is_configured`] (`Host() != ""`) / [`tls::options::PeerOptions::host`] (checked URL) | `None` for `""`; the checked forms ([`tls::options::PeerOptions::host`], and [`tls::client::PeerTls::host`] on a built client) return [`tls::options::HostError`] naming the flag and quoting the value when it is not an `http`/`https` URL with a host; building the client never fails on it (one WARN at start-up), as Go failed only at the first request |
//! | `HTTPOptions.ApplyTLSConfig` | [`tls::trust::TrustVerifier`] → [`tls::client::TrustMode::Watched`] (done by [`tls::client::PeerTls::from_options`]) | a half-set reference is an error (Go checked only the name); `ca.crt` is read too; the CA Secret is watched and every handshake verifies against its current roots (Go read it once); unset trust uses the platform's roots, as Go's nil `RootCAs` |
//! | `HTTPClientOptions` | [`tls::options::ClientIdentityOptions`] | the zero value is the unprefixed identity (`ClientIdentityOptions::new(None)`), as Go's; a prefix (`ClientIdentityOptions::new(Some("P"))`) gives a per-peer identity (`--P-client-certificate-*`), as the per-handshake generation's `NewHTTPClientOptions` (the other two have no way to ask for one) |
//! | `NewHTTPClientOptions(service)` | [`tls::options::ClientIdentityOptions::new`] with `Some(service)`, then [`tls::options::ClientIdentityOptions::augment`] / [`tls::options::ClientIdentityOptions::from_matches`] under the same prefix | the per-handshake generation's prefixed identity: `--S-client-certificate-namespace`, `--S-client-certificate-name` as Go; also `--S-client-certificate-source` and `--S-spiffe-server-id` (ours: the SPIFFE generation has no prefix); no `--S-client-certificate-reload-interval`, which Go never registers for a prefix (pflag would panic on the redefinition): it is an unknown argument, as in Go (docs/decisions/prefixed-identity-has-no-reload-interval.md) |
//! | `HTTPClientOptions.AddFlags` | [`tls::options::ClientIdentityOptions::augment`] + [`tls::options::ClientIdentityOptions::from_matches`] | the same flags (the newest generation's `--client-certificate-source` and `--spiffe-server-id` included); `--client-certificate-reload-interval` is accepted (any Go duration) and ignored, with one deprecation warning, for the unprefixed identity only, as the per-handshake generation registers it |
//! | `HTTPClientOptions.SetNow` | [`tls::identity::IdentityResolverBuilder::clock`] with `svc_tls::testing::ManualClock` (test-only names are in `svc_tls::testing`, out of the docs) | there is no reload timer to drive: the identity is reloaded on every handshake; the injectable clock drives the warning limiter and staleness instead |
//! | `HTTPClientOptions.ApplyTLSClientConfig` | [`tls::identity::IdentityResolver`] in [`tls::client::client_config`] (done by [`tls::client::PeerTls::from_options`]) | the Secret is watched and the identity re-read on every handshake, as the per-handshake generation (the others: a timer, 24 h), from the watch's cache, so no API round trip and no 5 s load cap to hit; construction waits for the watch to sync; a failed reload serves the last good identity and warns at most once a minute ("client certificate reload failed; …", where Go logs "client certificate reload failed, serving the last loaded certificate") |
//! | `HTTPClientOptions.EncodeAndSign` | [`tls::client::PeerTls::principal_signer`], then [`tls::principal::PrincipalSigner::sign`] / [`tls::principal::PrincipalSigner::attach`] | signs with the watched identity (no API read per call), counted in `svc_tls_principal_signed_total` when metrics are on; the key decides the algorithm (RSA PS512, P-256 ES256, P-384 ES384), as the newest Go client (the 24 h-timer one signs RSA/PS512 only); [`tls::principal::AlgorithmPolicy::Ps512Only`] for peers on that older verifier |
//! | `VerifyAndDecode` | [`tls::principal::PeerCertificate::verify`] / [`tls::principal::verify`]; behind the ingress [`tls::receiving::IngressBuilder`] (the ingress's CA Secret, watched; the receiver's audiences; the strict or the Go-compatible mode) then [`tls::receiving::IngressVerifier::verify_request`], counted in `svc_tls_principal_verified_total` when metrics are on | the accepted algorithms are a parameter ([`tls::principal::AlgorithmPolicy`]): by default PS512, ES256 and ES384, each only with a certificate of its key type, as the newest Go verifier (the 24 h-timer one accepts PS512 with an RSA certificate only: `AlgorithmPolicy::Ps512Only`); the unsigned principals most Go senders send are accepted in `ReceivingMode::GoCompatible` only, and only within its `CompatibilityWindow` (an end date after which it acts as strict, and the senders allowed; both required; counted and exported as `svc_tls_principal_receiving_mode`), see "Principal verification" in `docs/migration.md` |
//! | `TLSClientConfig` | [`tls::client::client_config`] / [`tls::client::PeerTls::config`] | TLS 1.3 as Go; session resumption off (a resumed handshake would skip the reload); ALPN `http/1.1` unless h2 is opted in |
//! | `CertificateSourceSecret`, `CertificateSourceSPIFFE` | [`tls::options::ClientCertificateSource`] (`Secret`, `Spiffe`) | `--[P-]client-certificate-source` (`secret` or `spiffe`) as Go (empty = `secret`); any other value is `OptionsError::InvalidValue` naming the flag and the value |
//! | `HTTPClientOptions.InitSPIFFE` | [`tls::spiffe::WorkloadApiStreams::connect`] (one stream per address per process; called by [`tls::client::PeerTls::from_options`] in `spiffe` mode, as Go's `InitSPIFFE` once at start-up) | waits up to the sync timeout for the first X509-SVID; later constructions share the stream; an unset or invalid `SPIFFE_ENDPOINT_SOCKET`, an unreachable agent, no identity issued and no SVID in time are each their own [`tls::spiffe::SpiffeStartError`] variant |
//! | `NewSPIFFESources`, `Sources` | [`tls::spiffe::WorkloadApiSource`] feeding [`tls::identity::SpiffeIdentitySource`] and [`tls::trust::SpiffeTrustSource`] | one Workload API stream (the `spiffe` crate's client) serves both seams; the stream reconnects with backoff; dropping the last handle ends it |
//! | `SPIFFECredential` | [`tls::client::PeerTls::from_spiffe`]: [`tls::identity::IdentityResolver`] over the SVID, [`tls::trust::TrustVerifier`] with [`tls::trust::ServerAuthorization`] `SpiffeId` | the SVID is read on every handshake like a Secret's identity (last good SVID served, with the rate-limited warning, while the stream is down); the server is verified against its trust domain's current bundle and authorized by its exact SPIFFE ID, with no host-name check |
//! | `ErrClientCredential` | [`tls::identity::IdentityError`], [`tls::client::PeerClientError`], [`tls::principal::SignError`], [`tls::spiffe::SpiffeStartError`] | typed errors naming the Secret, key, flag or Workload API address instead of one sentinel |
//! | `errors.ErrInvalidContext` | [`scope::ScopeError`] (`ScopeError::Missing(ScopeValue::…)`) | returned where Go's `FromContext`, `ClusterFromContext` and `NamespaceFromContext` returned it; the message still starts "context invalid", and names the missing value |
//! | `errors.ErrSecretFormatError` | [`tls::material::MaterialError`] (its [`tls::material::MaterialErrorKind`]), inside [`tls::identity::IdentityError`] and [`tls::trust::TrustError`] | one typed error per problem (wrong type, missing or empty key, not PEM, no certificate, no key, key mismatch, …) naming the Secret and the data key, where Go wrapped this sentinel with a sentence |
//! | `errors.ErrUnsupportedKeyType` | [`tls::principal::SignError::UnsupportedKeyType`] / [`tls::principal::SignError::UnsupportedCurve`] (signing), [`tls::principal::VerifyError::UnsupportedKeyType`] (verifying) | the signing message keeps Go's words ("private key type is unsupported", "unsupported elliptic curve") and names the key type or curve |
//!
//! Names a reader may meet that no Go generation exports (the test checks that they
//! stay out of the surface file):
//!
//! | named, not exported by Go | here | what to use |
//! |---|---|---|
//! | `GetClientCertificate` | [`tls::identity::IdentityResolver`] (rustls's client-certificate resolver) | the design notes' name for the per-handshake load: a method of an unexported type that `ApplyTLSClientConfig` installs as `tls.Config.GetClientCertificate`; ours is installed by [`tls::client::client_config`] |
//!
//! A remote cluster's kubeconfig, as a provisioner reads it:
//! [`scope::config_from_untrusted_kubeconfig`] → [`scope::RemoteConfig`] → [`scope::with_remote_cluster`]; vetted by type: only the untrusted parser makes an untrusted `RemoteConfig` ([`scope::RemoteConfig::trusted`] for the operator's own); its destination checked against [`scope::with_destinations`]' [`scope::Destinations`] (loopback, link-local and the management API server refused unless allowed)
//!
//! ```
//! // The facade and the focused crates name the same items.
//! fn same_type(_: Option<platform_client_compat::tls::options::SecretRef>) {}
//! same_type(None::<svc_tls::origin::SecretRef>);
//! assert_eq!(platform_client_compat::tls::principal::PRINCIPAL_HEADER, "X-Principal");
//! ```
#![deny(missing_docs)]

/// Building the process's Kubernetes client with proven caches; the type registry
/// and platform types (the `kube-construct` crate).
pub use kube_construct as construct;
/// The provisioning scope carried through the call graph (the `provision-scope` crate).
pub use provision_scope as scope;
/// mTLS identity and trust from Secrets, signed principals (the `svc-tls` crate).
pub use svc_tls as tls;
/// Which cluster a client reads: the one type the three crates pass between them
/// (`construct`'s `CachedClient::cluster_client`, `scope`'s
/// `cluster_client_identified`, `tls`'s `PeerTls::from_options`).
pub use svc_tls::{ClusterClient, ClusterId, UnidentifiedCluster};

/// Every crate's Prometheus metrics at once (feature `metrics`).
#[cfg(feature = "metrics")]
pub mod metrics {
    use prometheus_client::registry::Registry;

    /// Why the metrics could not be registered.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum MetricsError {
        /// svc-tls's metrics are already installed into the process's watched Secrets.
        #[error("registering svc-tls's metrics failed")]
        Tls(#[from] svc_tls::metrics::InstallError),
        /// kube-construct's metrics are already the process's.
        #[error("registering kube-construct's metrics failed")]
        Construct(#[from] kube_construct::metrics::RegisterError),
    }

    /// Registers svc-tls's metrics ([`svc_tls::metrics::register`]: identity, trust,
    /// watched Secrets, principals) and kube-construct's
    /// ([`kube_construct::metrics::register`]: caches and constructions) into
    /// `registry`, for the whole process: every client built afterwards through the
    /// options-based constructors records into them. Call it once at start-up,
    /// before the first client is built.
    ///
    /// ```no_run
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// platform_client_compat::metrics::register(&mut registry)?;
    /// // ... build the clients, serve `registry` on /metrics ...
    /// # Ok::<(), platform_client_compat::metrics::MetricsError>(())
    /// ```
    pub fn register(registry: &mut Registry) -> Result<(), MetricsError> {
        if kube_construct::metrics::CacheMetrics::process().is_some() {
            return Err(kube_construct::metrics::RegisterError::AlreadyRegistered.into());
        }
        svc_tls::metrics::register(registry)?;
        kube_construct::metrics::register(registry)?;
        Ok(())
    }
}
