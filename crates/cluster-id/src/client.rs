//! [`ClusterClient`]: a `kube::Client` that says which cluster it reads.

use std::fmt;
use std::sync::Arc;

use crate::ClusterId;

/// A `kube::Client` with the identity of its cluster and, when it was built from
/// one, its configuration (so that process-wide watches can build a client of their
/// own on their own runtime, outliving the caller's). Cheap to clone.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use cluster_id::ClusterClient;
///
/// let client = ClusterClient::try_from_config(kube::Config::infer().await?)?;
/// println!("reading cluster {}", client.cluster());
/// let plain: kube::Client = client.kube().clone(); // for kube::Api and the like
/// # let _ = plain; Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClusterClient {
    client: kube::Client,
    cluster: ClusterId,
    config: Option<Arc<kube::Config>>,
}

/// Shows the cluster; never the configuration (it holds credentials).
impl fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterClient")
            .field("cluster", &self.cluster)
            .field("has_config", &self.config.is_some())
            .finish_non_exhaustive()
    }
}

impl ClusterClient {
    /// A client built from `config` with kube's standard stack
    /// (`kube::Client::try_from`), identified by [`ClusterId::of_config`]. Needs a
    /// Tokio runtime (kube's client spawns its request buffer on it).
    ///
    /// # Errors
    /// kube's error when the client cannot be built from `config`.
    pub fn try_from_config(config: kube::Config) -> Result<Self, kube::Error> {
        let cluster = ClusterId::of_config(&config);
        let client = kube::Client::try_from(config.clone())?;
        Ok(Self {
            client,
            cluster,
            config: Some(Arc::new(config)),
        })
    }

    /// `client`, built from `config` by the caller (a custom stack), identified by
    /// [`ClusterId::of_config`].
    pub fn from_parts(client: kube::Client, config: kube::Config) -> Self {
        Self {
            cluster: ClusterId::of_config(&config),
            client,
            config: Some(Arc::new(config)),
        }
    }

    /// `client` with the identity the caller says it has. The caller vouches that
    /// `client` reads `cluster`; with no configuration, shared watches use `client`
    /// itself and stop working when the runtime it was built on ends.
    pub fn new(client: kube::Client, cluster: ClusterId) -> Self {
        Self {
            client,
            cluster,
            config: None,
        }
    }

    /// The same client shown as `label` in logs and metrics
    /// ([`ClusterId::with_label`]); the identity is unchanged.
    pub fn with_label(mut self, label: &str) -> Self {
        self.cluster = self.cluster.with_label(label);
        self
    }

    /// The client.
    pub fn kube(&self) -> &kube::Client {
        &self.client
    }

    /// Which cluster it reads.
    pub fn cluster(&self) -> &ClusterId {
        &self.cluster
    }

    /// The configuration it was built from, when known.
    pub fn config(&self) -> Option<&kube::Config> {
        self.config.as_deref()
    }
}

impl AsRef<kube::Client> for ClusterClient {
    fn as_ref(&self) -> &kube::Client {
        &self.client
    }
}

impl From<ClusterClient> for kube::Client {
    fn from(client: ClusterClient) -> Self {
        client.client
    }
}

/// A client whose cluster cannot be told was used where the cluster decides what is
/// shared (a bare `kube::Client` adopted without naming its cluster).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the cluster of the {what} is unknown (it was adopted from a bare kube::Client): \
     per-cluster state cannot be keyed by it; build it from a kube::Config, or name its \
     cluster with ClusterClient::new(client, ClusterId::named(..))"
)]
pub struct UnidentifiedCluster {
    /// What had no cluster identity (for example "adopted client").
    pub what: &'static str,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_built_client_carries_its_configs_identity_and_hides_it_in_debug() {
        let mut config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        config.auth_info.token = Some("sekret-token".to_owned().into());
        let client = ClusterClient::try_from_config(config.clone()).unwrap();
        assert_eq!(client.cluster(), &ClusterId::of_config(&config));
        assert!(client.config().is_some());
        let shown = format!("{client:?}");
        assert!(shown.contains("127.0.0.1:1"), "{shown}");
        assert!(!shown.contains("sekret"), "{shown}");
    }
}
