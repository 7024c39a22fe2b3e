//! The remote-cluster step: enter a remote cluster and run the children there.
//!
//! The caller obtains the remote cluster's `kube::Config` *using the parent scope's
//! client* (for a virtual cluster inside a workload cluster, that is the workload
//! cluster's client, from [`cluster_client`](crate::cluster_client)), then calls
//! [`with_remote_cluster`]. Both take a [`RemoteConfig`]: a kubeconfig read from a
//! Secret is untrusted and becomes one only through
//! [`config_from_untrusted_kubeconfig`](crate::config_from_untrusted_kubeconfig); a
//! configuration the operator chose through [`RemoteConfig::trusted`].

use std::future::Future;

use cluster_id::ClusterClient;
use url::{Host, Url};

use crate::error::RemoteError;
use crate::identifier::ResourceIdentifier;
use crate::scope::{Cluster, with_cluster};
use crate::vetted::RemoteConfig;

/// Host and port of a cluster's API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP address; IPv6 addresses without brackets.
    pub host: String,
    /// Port: explicit in the URL, else 443 for `https` and 80 for `http`.
    pub port: u16,
}

/// Derives the API server endpoint from a server URL.
///
/// Only `https` and `http` are accepted; the port defaults to 443 and 80. A URL
/// without a host is an error.
///
/// ```
/// use provision_scope::endpoint;
///
/// let e = endpoint("https://api.example.com").unwrap();
/// assert_eq!((e.host.as_str(), e.port), ("api.example.com", 443));
/// assert_eq!(endpoint("http://10.0.0.1:8080/").unwrap().port, 8080);
/// assert!(endpoint("unix:///run/kube.sock").is_err());
/// ```
pub fn endpoint(server: &str) -> Result<Endpoint, RemoteError> {
    let url = Url::parse(server).map_err(RemoteError::InvalidUrl)?;
    let default_port = match url.scheme() {
        "https" => 443,
        "http" => 80,
        other => {
            return Err(RemoteError::UnsupportedScheme {
                scheme: other.to_owned(),
            });
        }
    };
    let host = match url.host() {
        Some(Host::Domain(domain)) if !domain.is_empty() => domain.to_owned(),
        Some(Host::Ipv4(addr)) => addr.to_string(),
        Some(Host::Ipv6(addr)) => addr.to_string(),
        _ => return Err(RemoteError::MissingHost),
    };
    Ok(Endpoint {
        host,
        port: url.port().unwrap_or(default_port),
    })
}

/// Builds the [`Cluster`] for a remote cluster: its endpoint from
/// `config.cluster_url` (for an untrusted `config`, checked against the scope's
/// [`Destinations`](crate::Destinations), set with
/// [`with_destinations`](crate::with_destinations), else the strict default), its
/// client from `config` with kube's standard client stack
/// (`kube::Client::try_from`; with this workspace's features, rustls with the
/// aws-lc-rs provider, which kube installs as the process default only if none is
/// set). To use another stack, build the client yourself and combine [`endpoint`],
/// [`Cluster::remote`] and [`with_cluster`].
///
/// Needs a Tokio runtime (kube's client spawns its request buffer).
///
/// # Errors
/// [`RemoteError::Destination`] when an untrusted `config` points where the scope's
/// destinations refuse (naming the kubeconfig's context and cluster, the host and
/// why); the other [`RemoteError`]s when the endpoint cannot be derived or the client
/// cannot be built.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use provision_scope::{DestinationProblem, RemoteConfig, RemoteError, ResourceIdentifier};
/// use provision_scope::config_from_untrusted_kubeconfig;
///
/// let yaml = "\
/// apiVersion: v1
/// kind: Config
/// clusters: [{name: c, cluster: {server: 'https://169.254.169.254'}}]
/// users: [{name: u, user: {token: t}}]
/// contexts: [{name: x, context: {cluster: c, user: u}}]
/// current-context: x
/// ";
/// let config = config_from_untrusted_kubeconfig(yaml.as_bytes(), None).await.unwrap();
/// let id = ResourceIdentifier::new("tenant");
/// match provision_scope::remote_cluster(config, id) {
///     Err(RemoteError::Destination { problem, .. }) => {
///         assert_eq!(problem, DestinationProblem::LinkLocal)
///     }
///     other => panic!("{other:?}"),
/// }
/// # }
/// ```
pub fn remote_cluster(
    config: RemoteConfig,
    id: ResourceIdentifier,
) -> Result<Cluster, RemoteError> {
    let found = endpoint(&config.config().cluster_url.to_string())?;
    if config.is_untrusted() {
        let (destinations, root) = crate::scope::destinations();
        destinations
            .check_with_root(&found, root.as_ref())
            .map_err(|problem| RemoteError::Destination {
                cluster: id.cluster_name(),
                kubeconfig: config.described(),
                host: crate::untrusted::excerpt(&found.host, crate::NAME_CHARS),
                port: found.port,
                problem,
            })?;
    }
    let Endpoint { host, port } = found;
    let config = config.into_config();
    let client = ClusterClient::try_from_config(config)
        .map_err(|source| RemoteError::Client {
            cluster: id.cluster_name(),
            source,
        })?
        .with_label(&id.cluster_name());
    Ok(Cluster::remote_identified(client, id, host, port))
}

/// The remote-cluster step: builds the remote cluster from `config` and `id` (see
/// [`remote_cluster`]) and runs `children` with it as the current cluster. The
/// provisioner client and namespace are inherited from the parent scope.
///
/// Fails, without running `children`, when the endpoint cannot be derived, is
/// refused ([`RemoteError::Destination`]), or the client cannot be built. A caller that builds its client another way can do the
/// same with [`endpoint`], [`Cluster::remote`] and [`with_cluster`].
pub async fn with_remote_cluster<F: Future>(
    config: RemoteConfig,
    id: ResourceIdentifier,
    children: F,
) -> Result<F::Output, RemoteError> {
    let cluster = remote_cluster(config, id)?;
    Ok(with_cluster(cluster, children).await)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ok(server: &str) -> (String, u16) {
        let e = endpoint(server).unwrap();
        (e.host, e.port)
    }

    #[test]
    fn default_ports_by_scheme() {
        assert_eq!(
            ok("https://api.example.com"),
            ("api.example.com".into(), 443)
        );
        assert_eq!(ok("http://api.example.com"), ("api.example.com".into(), 80));
        assert_eq!(
            ok("https://api.example.com/"),
            ("api.example.com".into(), 443)
        );
        assert_eq!(
            ok("HTTPS://API.Example.com"),
            ("api.example.com".into(), 443)
        );
    }

    #[test]
    fn explicit_ports_win_even_when_they_are_the_other_default() {
        assert_eq!(ok("https://10.1.2.3:6443"), ("10.1.2.3".into(), 6443));
        assert_eq!(
            ok("http://cp.local:8080/prefix/path"),
            ("cp.local".into(), 8080)
        );
        assert_eq!(ok("https://h:80"), ("h".into(), 80));
        assert_eq!(ok("http://h:443"), ("h".into(), 443));
        // The scheme's own default, written out.
        assert_eq!(ok("https://h:443"), ("h".into(), 443));
    }

    #[test]
    fn ipv6_hosts_lose_their_brackets() {
        assert_eq!(ok("https://[::1]:6443"), ("::1".into(), 6443));
        assert_eq!(ok("https://[fd00::10]"), ("fd00::10".into(), 443));
    }

    #[test]
    fn user_info_is_not_part_of_the_host() {
        assert_eq!(
            ok("https://user:secret@api.example.com:6443"),
            ("api.example.com".into(), 6443)
        );
    }

    #[test]
    fn other_schemes_are_rejected_by_name() {
        for (server, scheme) in [
            ("unix:///var/run/k.sock", "unix"),
            ("ftp://h", "ftp"),
            ("wss://h", "wss"),
        ] {
            match endpoint(server) {
                Err(RemoteError::UnsupportedScheme { scheme: got }) => assert_eq!(got, scheme),
                other => panic!("{server}: {other:?}"),
            }
        }
    }

    #[test]
    fn missing_host_and_garbage_are_errors() {
        assert!(matches!(
            endpoint("api.example.com:6443"),
            Err(RemoteError::UnsupportedScheme { .. })
        ));
        assert!(matches!(
            endpoint("not a url"),
            Err(RemoteError::InvalidUrl(_))
        ));
        assert!(matches!(
            endpoint("https://:6443"),
            Err(RemoteError::InvalidUrl(_))
        ));
        assert!(matches!(endpoint(""), Err(RemoteError::InvalidUrl(_))));
    }

    #[test]
    fn errors_do_not_echo_the_url() {
        let err = endpoint("ftp://user:hunter2@h").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
