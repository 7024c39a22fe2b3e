//! Remote-cluster configurations by where they came from ([`RemoteConfig`]), and the
//! destinations an untrusted one may point at ([`Destinations`]).
//!
//! A remote cluster's configuration read from a Secret is written by whoever can
//! write that Secret. [`remote_cluster`](crate::remote_cluster) and
//! [`with_remote_cluster`](crate::with_remote_cluster) take a [`RemoteConfig`], which
//! only [`config_from_untrusted_kubeconfig`](crate::config_from_untrusted_kubeconfig)
//! makes from such input, so that skipping the vetting is a type error rather than a
//! habit to keep. A configuration the operator chose (a file of the process's own
//! disk, a test's API emulator) is made with the separate, named
//! [`RemoteConfig::trusted`].

use std::fmt;
use std::net::IpAddr;

use crate::remote::Endpoint;

/// A remote cluster's `kube::Config` and where it came from: vetted from an
/// untrusted kubeconfig ([`config_from_untrusted_kubeconfig`](crate::config_from_untrusted_kubeconfig),
/// the only maker of that kind), or named trusted by the caller
/// ([`RemoteConfig::trusted`]).
///
/// An untrusted one is checked against the scope's [`Destinations`] when the
/// remote cluster is entered; a trusted one is not (its destination is the
/// operator's choice).
///
/// ```
/// use provision_scope::RemoteConfig;
///
/// let config = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
/// let trusted = RemoteConfig::trusted(config);
/// assert!(!trusted.is_untrusted());
/// assert_eq!(trusted.config().cluster_url.to_string(), "https://10.0.0.1:6443/");
/// ```
#[derive(Clone)]
pub struct RemoteConfig {
    config: kube::Config,
    origin: Origin,
}

#[derive(Clone, Debug)]
enum Origin {
    /// From an untrusted kubeconfig: its selected context and cluster entry,
    /// escaped and cut.
    Untrusted {
        context: String,
        cluster: String,
    },
    Trusted,
}

impl RemoteConfig {
    /// Only the untrusted-kubeconfig parser makes these.
    pub(crate) fn untrusted(config: kube::Config, context: String, cluster: String) -> Self {
        Self {
            config,
            origin: Origin::Untrusted { context, cluster },
        }
    }

    /// A configuration the caller vouches for: read from the operator's own disk or
    /// environment, or built by a test. Never use it for a kubeconfig read from a
    /// cluster: that is what
    /// [`config_from_untrusted_kubeconfig`](crate::config_from_untrusted_kubeconfig)
    /// is for.
    pub fn trusted(config: kube::Config) -> Self {
        Self {
            config,
            origin: Origin::Trusted,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// The configuration, for building a client another way.
    pub fn into_config(self) -> kube::Config {
        self.config
    }

    /// Whether it came from an untrusted kubeconfig.
    pub fn is_untrusted(&self) -> bool {
        matches!(self.origin, Origin::Untrusted { .. })
    }

    /// What an error names: the kubeconfig's context and cluster entry, or
    /// `trusted configuration`.
    pub(crate) fn described(&self) -> String {
        match &self.origin {
            Origin::Untrusted { context, cluster } => {
                format!("kubeconfig context \"{context}\" (cluster \"{cluster}\")")
            }
            Origin::Trusted => "trusted configuration".to_owned(),
        }
    }
}

/// Shows the origin and the server's host and port; never the credentials.
impl fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.config.cluster_url;
        f.debug_struct("RemoteConfig")
            .field("origin", &self.origin)
            .field("host", &url.host())
            .field("port", &url.port_u16())
            .finish_non_exhaustive()
    }
}

/// Why a destination is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DestinationProblem {
    /// It matches an entry of the deny list.
    Denied,
    /// There is an allow list and it matches none of its entries.
    NotAllowed,
    /// A loopback address (`127.0.0.0/8`, `::1`, `localhost`): this process's own
    /// host, its sidecars and local admin ports.
    Loopback,
    /// A link-local address (`169.254.0.0/16`, `fe80::/10`): cloud metadata
    /// services, which hand out the node's credentials.
    LinkLocal,
    /// An unspecified address (`0.0.0.0`, `::`), which reaches this host.
    Unspecified,
    /// The management cluster's own API server: the credential of the kubeconfig
    /// would be used against the cluster that runs this process.
    ManagementApiServer,
}

impl DestinationProblem {
    /// Why it is refused, in a few words.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Denied => "the destination is on the deny list",
            Self::NotAllowed => "the destination is not on the allow list",
            Self::Loopback => "a loopback address reaches this process's own host",
            Self::LinkLocal => {
                "a link-local address reaches the node's metadata service and neighbours"
            }
            Self::Unspecified => "an unspecified address reaches this process's own host",
            Self::ManagementApiServer => {
                "the management cluster's own API server is not a remote cluster"
            }
        }
    }
}

impl fmt::Display for DestinationProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// Where a remote cluster from an untrusted kubeconfig may point: an optional allow
/// list and deny list of hosts, and the destinations refused unless allowed
/// (loopback, link-local, unspecified addresses, and the management cluster's own
/// API server).
///
/// Entries are a host (`api.example.com`, `10.0.0.1`, `::1`), a host and port
/// (`api.example.com:6443`, `[::1]:6443`), or a domain suffix (`*.example.com`,
/// which matches names under it, not the domain itself). Hosts compare without
/// case. The deny list wins over everything; with an allow list, only what it
/// matches is reached. Loopback, link-local and unspecified addresses (and
/// `localhost`) are refused unless [`Destinations::allow_loopback`] /
/// [`Destinations::allow_link_local`] or an allow entry naming that host (not a
/// suffix) says otherwise; the management cluster's API server (the address of
/// the root cluster's configuration, when the scope's root was built from one; the
/// in-cluster `KUBERNETES_SERVICE_HOST` and port; `kubernetes.default` and its
/// longer forms; any given with [`Destinations::management_api_server`]) likewise
/// unless [`Destinations::allow_management_api_server`].
///
/// Hosts are checked as written in the kubeconfig (IPv4 in its normal form: `127.1`
/// is `127.0.0.1`): a name that resolves to a refused address is not caught here.
/// Use network policy for that.
///
/// Set it for the children of a scope with [`with_destinations`](crate::with_destinations);
/// without one, the default ([`Destinations::new`]: no lists, everything above
/// refused) applies.
///
/// ```
/// use provision_scope::{DestinationProblem, Destinations, endpoint};
///
/// let strict = Destinations::new();
/// let check = |d: &Destinations, url: &str| d.check(&endpoint(url).unwrap());
/// assert_eq!(check(&strict, "https://127.0.0.1:6443"), Err(DestinationProblem::Loopback));
/// assert_eq!(check(&strict, "https://169.254.169.254"), Err(DestinationProblem::LinkLocal));
/// assert_eq!(check(&strict, "https://api.example.com"), Ok(()));
///
/// let listed = Destinations::new().allow("*.clusters.example.com").deny("bad.clusters.example.com");
/// assert_eq!(check(&listed, "https://a.clusters.example.com:6443"), Ok(()));
/// assert_eq!(check(&listed, "https://bad.clusters.example.com"), Err(DestinationProblem::Denied));
/// assert_eq!(check(&listed, "https://api.example.com"), Err(DestinationProblem::NotAllowed));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    loopback: bool,
    link_local: bool,
    management: bool,
    management_servers: Vec<(String, u16)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// A host, any port.
    Host(String),
    /// A host and a port.
    HostPort(String, u16),
    /// A domain suffix, with its leading dot.
    Suffix(String),
}

impl Pattern {
    fn parse(entry: &str) -> Self {
        let entry = entry.trim().to_ascii_lowercase();
        if let Some(suffix) = entry.strip_prefix("*.") {
            return Self::Suffix(format!(".{suffix}"));
        }
        if let Some(rest) = entry.strip_prefix('[')
            && let Some((host, port)) = rest.split_once("]:")
            && let Ok(port) = port.parse()
        {
            return Self::HostPort(host.to_owned(), port);
        }
        if let Some(rest) = entry.strip_prefix('[')
            && let Some(host) = rest.strip_suffix(']')
        {
            return Self::Host(host.to_owned());
        }
        match entry.rsplit_once(':') {
            // One colon: host and port (an IPv6 address has several).
            Some((host, port)) if !host.contains(':') => match port.parse() {
                Ok(port) => Self::HostPort(host.to_owned(), port),
                Err(_) => Self::Host(entry),
            },
            _ => Self::Host(entry),
        }
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        match self {
            Self::Host(h) => h == host,
            Self::HostPort(h, p) => h == host && *p == port,
            Self::Suffix(s) => host.ends_with(s.as_str()),
        }
    }

    /// Whether it names this host itself (not by a suffix).
    fn names(&self, host: &str, port: u16) -> bool {
        !matches!(self, Self::Suffix(_)) && self.matches(host, port)
    }
}

impl Destinations {
    /// No lists; loopback, link-local, unspecified addresses and the management
    /// cluster's API server refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reach only what an allow entry matches (see the type's documentation for the
    /// entries' forms); an entry naming a host also allows it when it is a loopback
    /// or link-local address.
    pub fn allow(mut self, entry: &str) -> Self {
        self.allow.push(Pattern::parse(entry));
        self
    }

    /// Never reach what this entry matches.
    pub fn deny(mut self, entry: &str) -> Self {
        self.deny.push(Pattern::parse(entry));
        self
    }

    /// Allow loopback and unspecified addresses (`localhost` included): for tests
    /// whose API emulators listen on `127.0.0.1`.
    pub fn allow_loopback(mut self) -> Self {
        self.loopback = true;
        self
    }

    /// Allow link-local addresses.
    pub fn allow_link_local(mut self) -> Self {
        self.link_local = true;
        self
    }

    /// Another address of the management cluster's API server, refused unless
    /// [`Destinations::allow_management_api_server`].
    pub fn management_api_server(mut self, host: &str, port: u16) -> Self {
        self.management_servers
            .push((host.trim_matches(['[', ']']).to_ascii_lowercase(), port));
        self
    }

    /// Allow the management cluster's own API server as a remote cluster.
    pub fn allow_management_api_server(mut self) -> Self {
        self.management = true;
        self
    }

    /// Whether `endpoint` may be reached (with no root cluster known: see
    /// [`Destinations::check_with_root`]).
    ///
    /// # Errors
    /// The [`DestinationProblem`] that refuses it.
    pub fn check(&self, endpoint: &Endpoint) -> Result<(), DestinationProblem> {
        self.check_with_root(endpoint, None)
    }

    /// Whether `endpoint` may be reached, `root` being the management cluster's API
    /// server as the scope's root client reaches it, when known.
    ///
    /// # Errors
    /// The [`DestinationProblem`] that refuses it.
    pub fn check_with_root(
        &self,
        endpoint: &Endpoint,
        root: Option<&Endpoint>,
    ) -> Result<(), DestinationProblem> {
        let host = endpoint.host.to_ascii_lowercase();
        let port = endpoint.port;
        if self.deny.iter().any(|p| p.matches(&host, port)) {
            return Err(DestinationProblem::Denied);
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| p.matches(&host, port)) {
            return Err(DestinationProblem::NotAllowed);
        }
        let named = self.allow.iter().any(|p| p.names(&host, port));
        if let Some(problem) = special(&host)
            && !named
        {
            let allowed = match problem {
                DestinationProblem::LinkLocal => self.link_local,
                _ => self.loopback,
            };
            if !allowed {
                return Err(problem);
            }
        }
        if !self.management && !named && self.is_management(&host, port, root) {
            return Err(DestinationProblem::ManagementApiServer);
        }
        Ok(())
    }

    fn is_management(&self, host: &str, port: u16, root: Option<&Endpoint>) -> bool {
        const NAMES: [&str; 4] = [
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "kubernetes.default.svc.cluster.local.",
        ];
        if NAMES.contains(&host) {
            return true;
        }
        if root.is_some_and(|r| r.host.eq_ignore_ascii_case(host) && r.port == port) {
            return true;
        }
        if self
            .management_servers
            .iter()
            .any(|(h, p)| h == host && *p == port)
        {
            return true;
        }
        let env_host = std::env::var("KUBERNETES_SERVICE_HOST").ok();
        let env_port = std::env::var("KUBERNETES_SERVICE_PORT")
            .ok()
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(443);
        env_host.is_some_and(|h| {
            h.trim_matches(['[', ']']).eq_ignore_ascii_case(host) && env_port == port
        })
    }
}

/// The problem of a loopback, link-local or unspecified host, if it is one.
fn special(host: &str) -> Option<DestinationProblem> {
    if host == "localhost" || host.ends_with(".localhost") {
        return Some(DestinationProblem::Loopback);
    }
    let ip: IpAddr = host.parse().ok()?;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => Some(DestinationProblem::Loopback),
        IpAddr::V4(v4) if v4.is_link_local() => Some(DestinationProblem::LinkLocal),
        IpAddr::V4(v4) if v4.is_unspecified() => Some(DestinationProblem::Unspecified),
        IpAddr::V6(v6) if v6.is_loopback() => Some(DestinationProblem::Loopback),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(DestinationProblem::LinkLocal),
        IpAddr::V6(v6) if v6.is_unspecified() => Some(DestinationProblem::Unspecified),
        _ => None,
    }
}
