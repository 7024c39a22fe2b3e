//! [`ClusterId`]: what tells one API server apart from another.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// Longest label a cluster gets (metric labels and log fields stay short).
const MAX_LABEL: usize = 64;

/// The identity of the cluster a client reads from. Cheap to clone; compares and
/// hashes by the full identity (URL, CA, server name, verification), never by
/// [`label`](Self::label) alone.
#[derive(Clone)]
pub struct ClusterId {
    inner: Arc<Inner>,
}

struct Inner {
    /// SHA-256 over every part of the identity, length-prefixed.
    fingerprint: [u8; 32],
    /// A short, printable name for logs and metric labels.
    label: String,
}

impl ClusterId {
    /// The cluster `config` points at: its server URL, its CA certificates (or their
    /// file), its TLS server name, whether it verifies the server at all and the proxy
    /// it goes through.
    pub fn of_config(config: &kube::Config) -> Self {
        let mut hash = Sha256::new();
        let mut part = |tag: &str, bytes: &[u8]| {
            hash.update(tag.as_bytes());
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        part("url", config.cluster_url.to_string().as_bytes());
        for cert in config.root_cert.iter().flatten() {
            part("ca", cert);
        }
        if let Some(file) = &config.root_cert_file {
            part("ca-file", file.to_string_lossy().as_bytes());
        }
        if let Some(name) = &config.tls_server_name {
            part("server-name", name.as_bytes());
        }
        part("insecure", &[u8::from(config.accept_invalid_certs)]);
        // Two clients reaching one private URL through different proxies may reach
        // different API servers.
        if let Some(proxy) = &config.proxy_url {
            part("proxy", proxy.to_string().as_bytes());
        }
        let label = match (config.cluster_url.host(), config.cluster_url.port_u16()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => config.cluster_url.to_string(),
        };
        Self::from_parts(hash.finalize().into(), &label)
    }

    /// A cluster the caller names: for a client whose configuration is not at hand.
    /// Two ids made with the same `name` are the same cluster, so the name must be
    /// unique among the clusters of the process (the local cluster as `"local"`, a
    /// remote one by its platform identifier).
    ///
    /// ```
    /// use cluster_id::ClusterId;
    /// assert_eq!(ClusterId::named("local"), ClusterId::named("local"));
    /// assert_ne!(ClusterId::named("local"), ClusterId::named("tenant-a"));
    /// ```
    pub fn named(name: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(b"named");
        hash.update(name.as_bytes());
        Self::from_parts(hash.finalize().into(), name)
    }

    /// The same identity shown as `label` in logs and metrics (a remote cluster by
    /// its platform identifier rather than its API server address).
    pub fn with_label(&self, label: &str) -> Self {
        Self::from_parts(self.inner.fingerprint, label)
    }

    fn from_parts(fingerprint: [u8; 32], label: &str) -> Self {
        crate::label::acquired(fingerprint);
        Self {
            inner: Arc::new(Inner {
                fingerprint,
                label: short_label(label),
            }),
        }
    }

    /// A short, printable name for logs and metric labels: the API server's
    /// `host:port` by default; at most 64 characters of `[A-Za-z0-9._:/-]`, others
    /// replaced by `_`. Not unique: two clusters can share one.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The value of this cluster's `cluster` label in metrics: distinct among the
    /// clusters the process names now, stable while any `ClusterId` of the cluster
    /// lives.
    ///
    /// It is [`label`](Self::label) for the first cluster of the process with that
    /// label, and `label@` followed by the [`short_fingerprint`](Self::short_fingerprint)
    /// for a later cluster with the same label (two API servers behind one
    /// `host:port`, two kubeconfigs of one URL with different CAs), so the values of
    /// two clusters never merge into one series. `@` never appears in a
    /// [`label`](Self::label), so a suffixed value cannot be another cluster's plain
    /// one. The table holds one short entry per cluster that a live `ClusterId`
    /// names (a clone, or another id of the same cluster, [`ClusterId::with_label`]
    /// included): once the last of them is dropped (the provisioner let go of the
    /// cluster, and svc-tls's registry evicted its entries, whose series went with
    /// them), the entry goes, and the value may be handed to another cluster. So the
    /// table is bounded by the clusters the process holds now, not by every cluster
    /// it ever reached; a cluster named again later may get another value (counters
    /// restart, as after a restart of the process). See
    /// [`ClusterId::labelled_clusters`].
    ///
    /// ```
    /// use cluster_id::ClusterId;
    /// let a = ClusterId::named("doc-tenant-a");
    /// let b = ClusterId::named("doc-tenant-b").with_label("doc-tenant-a");
    /// assert_eq!(a.metric_label(), "doc-tenant-a");
    /// assert_eq!(b.metric_label(), format!("doc-tenant-a@{}", b.short_fingerprint()));
    /// assert_eq!(a.metric_label(), "doc-tenant-a"); // stable
    /// ```
    pub fn metric_label(&self) -> String {
        crate::label::metric_label(self)
    }

    /// How many clusters hold a value in the table of [`ClusterId::metric_label`]
    /// now: those a live `ClusterId` names that asked for their value.
    ///
    /// ```
    /// use cluster_id::ClusterId;
    /// let id = ClusterId::named("doc-labelled-clusters");
    /// let _ = id.metric_label();
    /// assert!(ClusterId::labelled_clusters() >= 1);
    /// ```
    pub fn labelled_clusters() -> usize {
        crate::label::labelled()
    }

    /// The whole fingerprint (what the identity compares by).
    pub(crate) fn fingerprint(&self) -> [u8; 32] {
        self.inner.fingerprint
    }

    /// The first 8 bytes of the identity's fingerprint as hex: tells two clusters with
    /// one label apart in logs.
    pub fn short_fingerprint(&self) -> String {
        self.inner.fingerprint[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The last handle of this value: the label table forgets the cluster once no
/// `ClusterId` names it ([`ClusterId::metric_label`]).
impl Drop for Inner {
    fn drop(&mut self) {
        crate::label::released(self.fingerprint);
    }
}

fn short_label(label: &str) -> String {
    label
        .chars()
        .take(MAX_LABEL)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:/-[]".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl PartialEq for ClusterId {
    fn eq(&self, other: &Self) -> bool {
        self.inner.fingerprint == other.inner.fingerprint
    }
}

impl Eq for ClusterId {}

impl std::hash::Hash for ClusterId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.fingerprint.hash(state);
    }
}

impl PartialOrd for ClusterId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ClusterId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.inner.fingerprint.cmp(&other.inner.fingerprint)
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.label)
    }
}

impl fmt::Debug for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ClusterId({} {})",
            self.inner.label,
            self.short_fingerprint()
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(url: &str) -> kube::Config {
        kube::Config::new(url.parse().unwrap())
    }

    #[test]
    fn every_part_of_the_identity_tells_clusters_apart() {
        let base = config("https://api.example.com:6443");
        let id = ClusterId::of_config(&base);
        let mut other_url = base.clone();
        other_url.cluster_url = "https://api.example.com:7443".parse().unwrap();
        let mut other_ca = base.clone();
        other_ca.root_cert = Some(vec![b"x".to_vec()]);
        let mut other_name = base.clone();
        other_name.tls_server_name = Some("kubernetes".into());
        let mut insecure = base.clone();
        insecure.accept_invalid_certs = true;
        let mut proxied = base.clone();
        proxied.proxy_url = Some("http://proxy.example.com:3128".parse().unwrap());
        for other in [other_url, other_ca, other_name, insecure, proxied] {
            assert_ne!(id, ClusterId::of_config(&other));
        }
        let mut other_credentials = base.clone();
        other_credentials.auth_info.token = Some("t".to_owned().into());
        assert_eq!(id, ClusterId::of_config(&other_credentials));
    }

    #[test]
    fn ca_boundaries_are_part_of_the_identity() {
        let mut a = config("https://h");
        a.root_cert = Some(vec![b"ab".to_vec(), b"c".to_vec()]);
        let mut b = config("https://h");
        b.root_cert = Some(vec![b"a".to_vec(), b"bc".to_vec()]);
        assert_ne!(ClusterId::of_config(&a), ClusterId::of_config(&b));
    }

    #[test]
    fn labels_are_short_and_printable_and_not_the_identity() {
        let id = ClusterId::named(&format!("evil\"}} 1\n{}", "x".repeat(100)));
        assert_eq!(id.label().len(), 64);
        assert!(!id.label().contains(['"', '\n', '}', ' ']));
        let a = ClusterId::of_config(&config("https://h:1"));
        assert_eq!(a.with_label("tenant"), a);
        assert_eq!(a.with_label("tenant").label(), "tenant");
        assert_ne!(ClusterId::named("h:1"), a);
    }
}
