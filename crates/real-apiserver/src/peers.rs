//! Where `cargo xtask real-peers` left the binaries: under the cache root, by component
//! and version, the version read from the same go.mod files xtask builds from.

use std::path::PathBuf;

use crate::StartError;

/// The Go module xtask builds kube-apiserver from.
const KUBE_APISERVER_GO_MOD: &str = include_str!("../../../xtask/real-peers/kube-apiserver/go.mod");
/// The Go module xtask builds etcd from.
const ETCD_GO_MOD: &str = include_str!("../../../xtask/real-peers/etcd/go.mod");

/// The Kubernetes release of the real API server (`v1.37.2`).
pub fn kube_version() -> &'static str {
    required_version(KUBE_APISERVER_GO_MOD, "k8s.io/kubernetes").unwrap_or("unknown")
}

/// The etcd release of the real storage (`v3.7.0`).
pub fn etcd_version() -> &'static str {
    required_version(ETCD_GO_MOD, "go.etcd.io/etcd/server/v3").unwrap_or("unknown")
}

fn required_version(go_mod: &'static str, module: &str) -> Option<&'static str> {
    go_mod.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("require").trim();
        let mut words = line.split_whitespace();
        (words.next()? == module).then(|| words.next()).flatten()
    })
}

/// The cache root xtask builds into: `$PLATFORM_CLIENT_REAL_PEERS`, else
/// `$HOME/.cache/platform-client/real-peers`.
fn cache_root() -> PathBuf {
    if let Some(root) = std::env::var_os("PLATFORM_CLIENT_REAL_PEERS") {
        return PathBuf::from(root);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/platform-client/real-peers")
}

/// The two binaries, or the error that names `cargo xtask real-peers`.
pub(crate) struct Binaries {
    pub(crate) etcd: PathBuf,
    pub(crate) kube_apiserver: PathBuf,
}

pub(crate) fn locate() -> Result<Binaries, StartError> {
    let root = cache_root();
    let find = |name: &str, version: &str| {
        let path = root.join(format!("{name}-{version}/bin/{name}"));
        if path.is_file() {
            Ok(path)
        } else {
            Err(StartError::NotBuilt {
                what: format!("{name} {version}"),
                path,
            })
        }
    };
    Ok(Binaries {
        etcd: find("etcd", etcd_version())?,
        kube_apiserver: find("kube-apiserver", kube_version())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_go_modules() {
        assert!(kube_version().starts_with("v1."), "{}", kube_version());
        assert!(etcd_version().starts_with("v3."), "{}", etcd_version());
    }
}
