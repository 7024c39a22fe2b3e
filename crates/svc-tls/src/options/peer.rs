//! One peer service's options: `--S-host`, its CA (a Secret, or a ConfigMap's PEM
//! bundle), and the HTTP settings.

use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};
use url::Url;

use super::{
    ConfigMapRef, HostError, OptionsError, SecretRef, flags::get, flags::non_empty,
    flags::reference, flags::value_arg, host::parse_host,
};
use crate::duration::parse_go_duration;

/// The data key of a CA ConfigMap read when `--S-ca-configmap-key` is not given.
pub const DEFAULT_CA_CONFIGMAP_KEY: &str = "ca.crt";

/// Where a peer's CA comes from ([`PeerOptions::ca`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerCa {
    /// Neither a CA Secret nor a CA ConfigMap: the platform's trust store.
    Platform,
    /// A CA Secret (`--S-ca-secret-namespace`, `--S-ca-secret-name`).
    Secret(SecretRef),
    /// The PEM bundle under `key` of a ConfigMap (`--S-ca-configmap-namespace`,
    /// `--S-ca-configmap-name`, `--S-ca-configmap-key`).
    ConfigMap {
        /// The ConfigMap.
        configmap: ConfigMapRef,
        /// Its data key (default [`DEFAULT_CA_CONFIGMAP_KEY`]).
        key: String,
    },
    /// A PEM bundle file (`--S-ca-file`), in a mounted directory followed for changes
    /// (see [`crate::files`]): no API access.
    File(std::path::PathBuf),
    /// The ClusterTrustBundles of a signer (`--S-ca-cluster-trust-bundle-signer`),
    /// optionally narrowed by labels (`--S-ca-cluster-trust-bundle-selector`): their
    /// bundles trusted together, watched through the API server.
    ClusterTrustBundles(crate::origin::ClusterTrustBundlesRef),
}

/// Which HTTP versions a peer client may speak.
///
/// Go's transport with a custom `tls.Config` speaks HTTP/1.1 only, so that is the
/// default: a migrated service talks to its peers as the Go one did. HTTP/2 is an
/// opt-in (`--S-http2`, or [`PeerOptions::with_http_protocol`]): it multiplexes
/// every request to a peer over one long-lived connection, which then keeps the
/// identity it was opened with for its whole life (see `docs/operations.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HttpProtocol {
    /// HTTP/1.1 only: ALPN offers `http/1.1`, reqwest speaks HTTP/1.1 only.
    #[default]
    Http1Only,
    /// HTTP/2 when the peer agrees: ALPN offers `h2` then `http/1.1`.
    Http2Preferred,
}

impl HttpProtocol {
    /// The ALPN protocol identifiers offered, in order of preference.
    pub fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Self::Http1Only => vec![b"http/1.1".to_vec()],
            Self::Http2Preferred => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }
}

/// Options for one peer service `S`: `--S-host`, `--S-ca-secret-namespace`,
/// `--S-ca-secret-name` or `--S-ca-configmap-namespace`, `--S-ca-configmap-name`,
/// `--S-ca-configmap-key` (one CA source or the other), and the HTTP settings
/// `--S-http2` and `--S-pool-idle-timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerOptions {
    service: String,
    /// The host value as given, when non-empty (checked when used).
    host: Option<String>,
    ca_secret_namespace: Option<String>,
    ca_secret_name: Option<String>,
    ca_configmap_namespace: Option<String>,
    ca_configmap_name: Option<String>,
    /// `--S-ca-configmap-key` when given non-empty.
    ca_configmap_key: Option<String>,
    /// `--S-ca-file` when given non-empty.
    ca_file: Option<std::path::PathBuf>,
    /// `--S-ca-cluster-trust-bundle-signer` when given non-empty.
    ca_bundle_signer: Option<String>,
    /// `--S-ca-cluster-trust-bundle-selector` when given non-empty.
    ca_bundle_selector: Option<String>,
    protocol: HttpProtocol,
    pool_idle_timeout: Option<Duration>,
}

impl PeerOptions {
    /// Options for `service` with nothing set (for building options in code).
    pub fn new(service: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            host: None,
            ca_secret_namespace: None,
            ca_secret_name: None,
            ca_configmap_namespace: None,
            ca_configmap_name: None,
            ca_configmap_key: None,
            ca_file: None,
            ca_bundle_signer: None,
            ca_bundle_selector: None,
            protocol: HttpProtocol::default(),
            pool_idle_timeout: None,
        }
    }

    /// Sets the host URL.
    #[must_use]
    pub fn with_host(mut self, host: Url) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Sets the host as text, exactly as the flag would (an empty value means not
    /// configured; the value is checked when used).
    #[must_use]
    pub fn with_host_value(mut self, host: impl Into<String>) -> Self {
        self.host = non_empty(host.into());
        self
    }

    /// Sets the CA Secret reference (empty strings count as unset).
    #[must_use]
    pub fn with_ca_secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.ca_secret_namespace = non_empty(namespace.into());
        self.ca_secret_name = non_empty(name.into());
        self
    }

    /// Sets the CA bundle file (`--S-ca-file`): its directory is followed, the file
    /// re-read when it changes. Setting it with a CA Secret or ConfigMap is a conflict,
    /// reported by [`PeerOptions::ca`].
    #[must_use]
    pub fn with_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        let path = path.into();
        self.ca_file = (!path.as_os_str().is_empty()).then_some(path);
        self
    }

    /// `--S-ca-file`.
    pub fn ca_file_flag(service: &str) -> String {
        format!("{service}-ca-file")
    }

    /// Sets the ClusterTrustBundles' signer name and label selector
    /// (`--S-ca-cluster-trust-bundle-signer`, `--S-ca-cluster-trust-bundle-selector`;
    /// empty strings count as unset). Checked by [`PeerOptions::ca`]: a malformed
    /// signer or selector, or another CA flag set too, is an error naming the flag.
    #[must_use]
    pub fn with_ca_cluster_trust_bundles(
        mut self,
        signer: impl Into<String>,
        selector: impl Into<String>,
    ) -> Self {
        self.ca_bundle_signer = non_empty(signer.into());
        self.ca_bundle_selector = non_empty(selector.into());
        self
    }

    /// `--S-ca-cluster-trust-bundle-signer`.
    pub fn ca_bundle_signer_flag(service: &str) -> String {
        format!("{service}-ca-cluster-trust-bundle-signer")
    }

    /// `--S-ca-cluster-trust-bundle-selector`.
    pub fn ca_bundle_selector_flag(service: &str) -> String {
        format!("{service}-ca-cluster-trust-bundle-selector")
    }

    /// Sets the CA ConfigMap reference and its data key (empty strings count as
    /// unset; an empty key is [`DEFAULT_CA_CONFIGMAP_KEY`]). Setting it with a CA
    /// Secret too is a conflict, reported by [`PeerOptions::ca`].
    #[must_use]
    pub fn with_ca_configmap(
        mut self,
        namespace: impl Into<String>,
        name: impl Into<String>,
        key: impl Into<String>,
    ) -> Self {
        self.ca_configmap_namespace = non_empty(namespace.into());
        self.ca_configmap_name = non_empty(name.into());
        self.ca_configmap_key = non_empty(key.into());
        self
    }

    /// Sets the HTTP versions the peer client may speak (default HTTP/1.1 only).
    #[must_use]
    pub fn with_http_protocol(mut self, protocol: HttpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Sets how long an idle pooled connection is kept (reqwest's
    /// `pool_idle_timeout`; zero keeps no idle connection at all). Unset keeps
    /// reqwest's default of 90 seconds.
    #[must_use]
    pub fn with_pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = Some(timeout);
        self
    }

    /// `--S-host`.
    pub fn host_flag(service: &str) -> String {
        format!("{service}-host")
    }

    /// `--S-ca-secret-namespace`.
    pub fn ca_secret_namespace_flag(service: &str) -> String {
        format!("{service}-ca-secret-namespace")
    }

    /// `--S-ca-secret-name`.
    pub fn ca_secret_name_flag(service: &str) -> String {
        format!("{service}-ca-secret-name")
    }

    /// `--S-ca-configmap-namespace`.
    pub fn ca_configmap_namespace_flag(service: &str) -> String {
        format!("{service}-ca-configmap-namespace")
    }

    /// `--S-ca-configmap-name`.
    pub fn ca_configmap_name_flag(service: &str) -> String {
        format!("{service}-ca-configmap-name")
    }

    /// `--S-ca-configmap-key`.
    pub fn ca_configmap_key_flag(service: &str) -> String {
        format!("{service}-ca-configmap-key")
    }

    /// `--S-http2`.
    pub fn http2_flag(service: &str) -> String {
        format!("{service}-http2")
    }

    /// `--S-pool-idle-timeout`.
    pub fn pool_idle_timeout_flag(service: &str) -> String {
        format!("{service}-pool-idle-timeout")
    }

    /// Adds `--S-host`, `--S-ca-secret-namespace`, `--S-ca-secret-name`,
    /// `--S-ca-configmap-namespace`, `--S-ca-configmap-name`, `--S-ca-configmap-key`,
    /// `--S-http2` and `--S-pool-idle-timeout` to `cmd`, with help texts naming the
    /// service. `service` is used verbatim (lowercase, e.g. `identity`, `region`).
    pub fn augment(cmd: Command, service: &str) -> Command {
        let heading = format!("Peer service: {service}");
        let host = Self::host_flag(service);
        let ns = Self::ca_secret_namespace_flag(service);
        let name = Self::ca_secret_name_flag(service);
        let cm_ns = Self::ca_configmap_namespace_flag(service);
        let cm_name = Self::ca_configmap_name_flag(service);
        let cm_key = Self::ca_configmap_key_flag(service);
        let ca_file = Self::ca_file_flag(service);
        let signer = Self::ca_bundle_signer_flag(service);
        let selector = Self::ca_bundle_selector_flag(service);
        let http2 = Self::http2_flag(service);
        let idle = Self::pool_idle_timeout_flag(service);
        cmd.arg(
            value_arg(&host, "URL", &heading).help(format!(
                "Base URL of the {service} service (empty: not configured)"
            )),
        )
        .arg(value_arg(&ns, "NAMESPACE", &heading).help(format!(
            "Namespace of the kubernetes.io/tls Secret holding the CA that issued the {service} service's certificate (set with --{name})"
        )))
        .arg(value_arg(&name, "NAME", &heading).help(format!(
            "Name of the kubernetes.io/tls Secret holding the CA that issued the {service} service's certificate (set with --{ns})"
        )))
        .arg(value_arg(&cm_ns, "NAMESPACE", &heading).help(format!(
            "Namespace of a ConfigMap holding the PEM bundle of the CA that issued the {service} service's certificate, e.g. a trust-manager Bundle target (set with --{cm_name}; not with --{ns}/--{name}); needs no Secret access"
        )))
        .arg(value_arg(&cm_name, "NAME", &heading).help(format!(
            "Name of the ConfigMap holding the {service} service's CA bundle (set with --{cm_ns})"
        )))
        .arg(value_arg(&cm_key, "KEY", &heading).help(format!(
            "Data key of the PEM bundle in --{cm_name} (default {DEFAULT_CA_CONFIGMAP_KEY}; trust-manager's target key, e.g. trust-bundle.pem)"
        )))
        .arg(value_arg(&ca_file, "PATH", &heading).help(format!(
            "A PEM file holding the CA bundle of the {service} service (a mounted Secret's ca.crt, a projected clusterTrustBundle); re-read when it changes; not with the CA Secret or ConfigMap flags; needs no API access"
        )))
        .arg(value_arg(&signer, "SIGNER", &heading).help(format!(
            "Trust the CAs of the ClusterTrustBundles of this signer (spec.signerName, e.g. example.com/platform) for the {service} service, all of them together, followed as they change; not with the other CA flags; needs list and watch on clustertrustbundles"
        )))
        .arg(value_arg(&selector, "SELECTOR", &heading).help(format!(
            "Only the ClusterTrustBundles of --{signer} this label selector matches (k=v, k!=v, k, !k, k in (a,b), comma-separated)"
        )))
        .arg(
            Arg::new(http2.clone())
                .long(http2.clone())
                .action(ArgAction::SetTrue)
                .overrides_with(http2)
                .help_heading(heading.clone())
                .help(format!(
                    "Offer HTTP/2 to the {service} service (default: HTTP/1.1 only, as the Go client)"
                )),
        )
        .arg(
            value_arg(&idle, "DURATION", &heading)
                .value_parser(parse_pool_idle_timeout)
                .help(format!(
                    "How long an idle connection to the {service} service is kept for reuse, a Go duration (0: none; default 90s); bounds how long a rotated identity waits for idle connections to go"
                )),
        )
    }

    /// Reads the options added by [`PeerOptions::augment`] for `service`.
    pub fn from_matches(matches: &ArgMatches, service: &str) -> Result<Self, OptionsError> {
        Ok(Self {
            service: service.to_owned(),
            host: get::<String>(matches, &Self::host_flag(service))?.and_then(non_empty),
            ca_secret_namespace: get::<String>(matches, &Self::ca_secret_namespace_flag(service))?
                .and_then(non_empty),
            ca_secret_name: get::<String>(matches, &Self::ca_secret_name_flag(service))?
                .and_then(non_empty),
            ca_configmap_namespace: get::<String>(
                matches,
                &Self::ca_configmap_namespace_flag(service),
            )?
            .and_then(non_empty),
            ca_configmap_name: get::<String>(matches, &Self::ca_configmap_name_flag(service))?
                .and_then(non_empty),
            ca_configmap_key: get::<String>(matches, &Self::ca_configmap_key_flag(service))?
                .and_then(non_empty),
            ca_file: get::<String>(matches, &Self::ca_file_flag(service))?
                .and_then(non_empty)
                .map(std::path::PathBuf::from),
            ca_bundle_signer: get::<String>(matches, &Self::ca_bundle_signer_flag(service))?
                .and_then(non_empty),
            ca_bundle_selector: get::<String>(matches, &Self::ca_bundle_selector_flag(service))?
                .and_then(non_empty),
            protocol: if get::<bool>(matches, &Self::http2_flag(service))?.unwrap_or(false) {
                HttpProtocol::Http2Preferred
            } else {
                HttpProtocol::Http1Only
            },
            pool_idle_timeout: get::<Duration>(matches, &Self::pool_idle_timeout_flag(service))?,
        })
    }

    /// The service name these options are for.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Whether `--S-host` has a value (Go: `Host() != ""`). A configured value may
    /// still be invalid; see [`PeerOptions::host`].
    pub fn is_configured(&self) -> bool {
        self.host.is_some()
    }

    /// `--S-host` as given, `None` when not given or empty (Go's `Host()`, with
    /// `None` for `""`). Unchecked.
    pub fn host_value(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// `--S-host` checked: `Ok(None)` when the peer is not configured (not given or
    /// empty), the URL when it is a usable `http`/`https` URL, and a
    /// [`HostError::Invalid`] naming the flag and quoting the value otherwise.
    pub fn host(&self) -> Result<Option<Url>, HostError> {
        self.host
            .as_deref()
            .map(|value| parse_host(&Self::host_flag(&self.service), value))
            .transpose()
    }

    /// `--S-host` checked, and required: [`HostError::NotConfigured`] naming the
    /// flag when not given or empty.
    pub fn require_host(&self) -> Result<Url, HostError> {
        self.host()?.ok_or_else(|| HostError::NotConfigured {
            flag: Self::host_flag(&self.service),
        })
    }

    /// `--S-host` as a peer client keeps it: the URL, or why there is none. This
    /// never stops the client from being built, as Go's `NewHTTPOptions` took any
    /// string and failed only when a request was made:
    /// - not given or empty: [`HostError::NotConfigured`] naming the flag;
    /// - set but unusable (`https://`, `collector:443`, no scheme, not a URL):
    ///   [`HostError::Invalid`] naming the flag and quoting the value, and one WARN
    ///   per process, flag and value, saying that the client is built and every use of
    ///   its URL fails until the value is fixed.
    ///
    /// [`PeerTls::from_options`](crate::client::PeerTls::from_options) calls this; the
    /// error comes back from [`PeerTls::host`](crate::client::PeerTls::host) when the
    /// service asks for the URL.
    pub fn client_host(&self) -> Result<Url, HostError> {
        let flag = Self::host_flag(&self.service);
        let Some(value) = self.host.as_deref() else {
            return Err(HostError::NotConfigured { flag });
        };
        parse_host(&flag, value).inspect_err(|err| {
            super::flags::warn_once(
                &format!("unusable host {flag} {value:?}"),
                &format!(
                    "{err}; the {} client is built anyway (as the Go client was), and every use of its URL fails until --{flag} is fixed",
                    self.service
                ),
            );
        })
    }

    /// [`PeerOptions::client_host`] for a client that presents an identity (and so
    /// may sign principals): an `http://` host other than a loopback address is
    /// refused too ([`HostProblem::PlaintextWithCredentials`](super::HostProblem),
    /// naming `--S-host`), with one WARN per process, flag and value.
    pub fn client_host_with_credentials(&self, credentials: bool) -> Result<Url, HostError> {
        let url = self.client_host()?;
        if !credentials {
            return Ok(url);
        }
        let flag = Self::host_flag(&self.service);
        super::host::refuse_plaintext_with_credentials(&flag, url).inspect_err(|err| {
            super::flags::warn_once(
                &format!(
                    "plaintext host {flag} {:?}",
                    self.host.as_deref().unwrap_or("")
                ),
                &format!(
                    "{err}; every use of the {} client's URL fails until --{flag} is fixed",
                    self.service
                ),
            );
        })
    }

    /// The HTTP versions the peer client may speak (`--S-http2`).
    pub fn http_protocol(&self) -> HttpProtocol {
        self.protocol
    }

    /// How long idle pooled connections are kept (`--S-pool-idle-timeout`); `None`
    /// keeps reqwest's default (90 s).
    pub fn pool_idle_timeout(&self) -> Option<Duration> {
        self.pool_idle_timeout
    }

    /// The CA Secret: `Some` when both flags are set, `None` when neither is,
    /// [`OptionsError::HalfSetReference`] naming the missing flag otherwise, and
    /// [`OptionsError::CaSourceConflict`] when a CA ConfigMap flag is set too.
    pub fn ca_secret(&self) -> Result<Option<SecretRef>, OptionsError> {
        self.check_ca_conflict()?;
        reference(
            self.ca_secret_namespace.as_deref(),
            self.ca_secret_name.as_deref(),
            || Self::ca_secret_namespace_flag(&self.service),
            || Self::ca_secret_name_flag(&self.service),
        )
    }

    /// The CA ConfigMap and its data key: `Some` when namespace and name are set
    /// (the key defaults to [`DEFAULT_CA_CONFIGMAP_KEY`]), `None` when neither is,
    /// [`OptionsError::HalfSetReference`] naming the missing flag otherwise, and
    /// [`OptionsError::CaSourceConflict`] when a CA Secret flag is set too.
    pub fn ca_configmap(&self) -> Result<Option<(ConfigMapRef, String)>, OptionsError> {
        self.check_ca_conflict()?;
        let reference = reference(
            self.ca_configmap_namespace.as_deref(),
            self.ca_configmap_name.as_deref(),
            || Self::ca_configmap_namespace_flag(&self.service),
            || Self::ca_configmap_name_flag(&self.service),
        )?;
        let key = self
            .ca_configmap_key
            .clone()
            .unwrap_or_else(|| DEFAULT_CA_CONFIGMAP_KEY.to_owned());
        if reference.is_none() && self.ca_configmap_key.is_some() {
            super::flags::warn_ignored_once(
                &Self::ca_configmap_key_flag(&self.service),
                &format!(
                    "no CA ConfigMap is set (--{} and --{})",
                    Self::ca_configmap_namespace_flag(&self.service),
                    Self::ca_configmap_name_flag(&self.service)
                ),
            );
        }
        Ok(reference.map(|r| (ConfigMapRef::new(r.namespace, r.name), key)))
    }

    /// Where the peer's CA comes from: a Secret, a ConfigMap, or the platform's trust
    /// store; the errors of [`PeerOptions::ca_secret`] and
    /// [`PeerOptions::ca_configmap`].
    pub fn ca(&self) -> Result<PeerCa, OptionsError> {
        if let Some(bundles) = self.ca_cluster_trust_bundles()? {
            return Ok(PeerCa::ClusterTrustBundles(bundles));
        }
        if let Some(path) = &self.ca_file {
            let other = [
                (
                    &self.ca_secret_namespace,
                    Self::ca_secret_namespace_flag(&self.service),
                ),
                (
                    &self.ca_secret_name,
                    Self::ca_secret_name_flag(&self.service),
                ),
                (
                    &self.ca_configmap_namespace,
                    Self::ca_configmap_namespace_flag(&self.service),
                ),
                (
                    &self.ca_configmap_name,
                    Self::ca_configmap_name_flag(&self.service),
                ),
            ]
            .into_iter()
            .find_map(|(value, flag)| value.is_some().then_some(flag));
            if let Some(other_flag) = other {
                return Err(OptionsError::CaFileConflict {
                    file_flag: Self::ca_file_flag(&self.service),
                    other_flag,
                });
            }
            return Ok(PeerCa::File(path.clone()));
        }
        if let Some(secret) = self.ca_secret()? {
            return Ok(PeerCa::Secret(secret));
        }
        Ok(match self.ca_configmap()? {
            Some((configmap, key)) => PeerCa::ConfigMap { configmap, key },
            None => PeerCa::Platform,
        })
    }

    /// The ClusterTrustBundles set by `--S-ca-cluster-trust-bundle-signer` (and
    /// `-selector`): `None` when the signer is not set (a selector alone is warned
    /// about once and ignored), [`OptionsError::CaFileConflict`] naming another CA
    /// flag set too, [`OptionsError::InvalidValue`] naming the flag whose value is
    /// malformed.
    pub fn ca_cluster_trust_bundles(
        &self,
    ) -> Result<Option<crate::origin::ClusterTrustBundlesRef>, OptionsError> {
        let signer_flag = Self::ca_bundle_signer_flag(&self.service);
        let Some(signer) = &self.ca_bundle_signer else {
            if self.ca_bundle_selector.is_some() {
                super::flags::warn_ignored_once(
                    &Self::ca_bundle_selector_flag(&self.service),
                    &format!("--{signer_flag} is not set"),
                );
            }
            return Ok(None);
        };
        let other = [
            (
                &self.ca_secret_namespace,
                Self::ca_secret_namespace_flag(&self.service),
            ),
            (
                &self.ca_secret_name,
                Self::ca_secret_name_flag(&self.service),
            ),
            (
                &self.ca_configmap_namespace,
                Self::ca_configmap_namespace_flag(&self.service),
            ),
            (
                &self.ca_configmap_name,
                Self::ca_configmap_name_flag(&self.service),
            ),
        ]
        .into_iter()
        .find_map(|(value, flag)| value.is_some().then_some(flag))
        .or_else(|| {
            self.ca_file
                .is_some()
                .then(|| Self::ca_file_flag(&self.service))
        });
        if let Some(other_flag) = other {
            return Err(OptionsError::CaFileConflict {
                file_flag: signer_flag,
                other_flag,
            });
        }
        let invalid = |flag: String, source: crate::origin::BundleSelectionError| {
            OptionsError::InvalidClusterTrustBundles { flag, source }
        };
        let bundles = crate::origin::ClusterTrustBundlesRef::new(signer.clone())
            .map_err(|e| invalid(signer_flag.clone(), e))?;
        let bundles = match &self.ca_bundle_selector {
            Some(selector) => bundles
                .with_label_selector(selector)
                .map_err(|e| invalid(Self::ca_bundle_selector_flag(&self.service), e))?,
            None => bundles,
        };
        Ok(Some(bundles))
    }

    /// [`OptionsError::CaSourceConflict`] when a CA Secret flag and a CA ConfigMap
    /// flag are both set (non-empty), naming one of each.
    fn check_ca_conflict(&self) -> Result<(), OptionsError> {
        let secret_flag = if self.ca_secret_namespace.is_some() {
            Some(Self::ca_secret_namespace_flag(&self.service))
        } else if self.ca_secret_name.is_some() {
            Some(Self::ca_secret_name_flag(&self.service))
        } else {
            None
        };
        let configmap_flag = if self.ca_configmap_namespace.is_some() {
            Some(Self::ca_configmap_namespace_flag(&self.service))
        } else if self.ca_configmap_name.is_some() {
            Some(Self::ca_configmap_name_flag(&self.service))
        } else {
            None
        };
        match (secret_flag, configmap_flag) {
            (Some(secret_flag), Some(configmap_flag)) => Err(OptionsError::CaSourceConflict {
                secret_flag,
                configmap_flag,
            }),
            _ => Ok(()),
        }
    }
}

/// `--S-pool-idle-timeout`: a Go duration, zero or positive.
fn parse_pool_idle_timeout(text: &str) -> Result<Duration, String> {
    parse_go_duration(text)?
        .to_std()
        .ok_or_else(|| format!("{text:?} is negative: give 0 (keep no idle connection) or more"))
}
