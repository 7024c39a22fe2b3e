//! [`ClusterClient`]: a `kube::Client` that says which cluster it reads.

use std::fmt;
use std::sync::Arc;

use crate::{ClusterId, CredentialId};

/// A `kube::Client` with the identity of its cluster, the identity of its
/// credentials ([`CredentialId`]) and, when it was built from one, its configuration
/// (so that process-wide watches can build a client of their own, with the same
/// credentials, on their own runtime, outliving the caller's). Cheap to clone.
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
    credential: CredentialId,
    config: Option<Arc<kube::Config>>,
}

/// Shows the cluster; never the configuration (it holds credentials).
impl fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterClient")
            .field("cluster", &self.cluster)
            .field("credential", &self.credential)
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
        let client = kube::Client::try_from(config.clone())?;
        Ok(Self::from_parts(client, config))
    }

    /// `client`, built from `config` by the caller (a custom stack), identified by
    /// [`ClusterId::of_config`] and [`CredentialId::of_config`]. The caller vouches
    /// that `client` authenticates as `config` says.
    pub fn from_parts(client: kube::Client, config: kube::Config) -> Self {
        Self {
            cluster: ClusterId::of_config(&config),
            credential: CredentialId::of_config(&config),
            client,
            config: Some(Arc::new(config)),
        }
    }

    /// `client` with the cluster identity the caller says it has. The caller vouches
    /// that `client` reads `cluster`; with no configuration, shared watches use
    /// `client` itself and stop working when the runtime it was built on ends.
    ///
    /// Its credentials cannot be told, so they are [`CredentialId::unique`]: what
    /// this client (and its clones) watches is shared with no other client. A caller
    /// that adopts the same credentials again and again (per reconcile) names them
    /// with [`ClusterClient::with_credential`] so that its watches are shared.
    pub fn new(client: kube::Client, cluster: ClusterId) -> Self {
        Self {
            client,
            cluster,
            credential: CredentialId::unique(),
            config: None,
        }
    }

    /// The same client with the credential identity the caller vouches for (see
    /// [`CredentialId::named`]): for an adopted client ([`ClusterClient::new`]) whose
    /// shared watches should be shared with other clients adopted with the same
    /// credentials.
    ///
    /// ```
    /// # async fn f(adopted: kube::Client) {
    /// use cluster_id::{ClusterClient, ClusterId, CredentialId};
    /// let client = ClusterClient::new(adopted, ClusterId::named("local"))
    ///     .with_credential(CredentialId::named("controller-service-account"));
    /// assert_eq!(client.credential(), &CredentialId::named("controller-service-account"));
    /// # }
    /// ```
    pub fn with_credential(mut self, credential: CredentialId) -> Self {
        self.credential = credential;
        self
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

    /// Who it is to that cluster's API server (a digest, never the secret).
    pub fn credential(&self) -> &CredentialId {
        &self.credential
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
        assert_eq!(client.credential(), &CredentialId::of_config(&config));
        assert!(client.config().is_some());
        let shown = format!("{client:?}");
        assert!(shown.contains("127.0.0.1:1"), "{shown}");
        assert!(!shown.contains("sekret"), "{shown}");
    }
}
