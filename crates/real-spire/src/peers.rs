//! Where `cargo xtask real-peers` left SPIRE's binaries: under the cache root, by
//! component and version, the version read from the go.mod xtask builds them from.

use std::path::PathBuf;

use crate::SpireError;

/// The Go module xtask builds spire-server and spire-agent from.
const SPIRE_GO_MOD: &str = include_str!("../../../xtask/real-peers/spire/go.mod");

/// The SPIRE release the tier runs (`v1.13.3`).
pub fn spire_version() -> &'static str {
    SPIRE_GO_MOD
        .lines()
        .find_map(|line| {
            let line = line.trim().trim_start_matches("require").trim();
            let mut words = line.split_whitespace();
            (words.next()? == "github.com/spiffe/spire")
                .then(|| words.next())
                .flatten()
        })
        .unwrap_or("unknown")
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

/// The two binaries.
#[derive(Clone, Debug)]
pub(crate) struct Binaries {
    pub(crate) server: PathBuf,
    pub(crate) agent: PathBuf,
}

/// The binaries, or the error that names `cargo xtask real-peers`.
pub(crate) fn locate() -> Result<Binaries, SpireError> {
    let root = cache_root();
    let version = spire_version();
    let find = |name: &str| {
        let path = root.join(format!("{name}-{version}/bin/{name}"));
        if path.is_file() {
            Ok(path)
        } else {
            Err(SpireError::NotBuilt {
                what: format!("{name} {version}"),
                path,
            })
        }
    };
    Ok(Binaries {
        server: find("spire-server")?,
        agent: find("spire-agent")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_go_module() {
        assert!(spire_version().starts_with("v1."), "{}", spire_version());
    }
}
