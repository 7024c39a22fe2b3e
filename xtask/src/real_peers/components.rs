//! The real peers: each one's Go module (under `xtask/real-peers/`), the package built
//! from it, and the version that names its cache directory (read from the module's
//! `go.mod`, so the pinned release is written in one place).

/// One Go program built from one of our Go modules.
pub(crate) struct Component {
    /// The binary's name (and its cache directory's, with the version).
    pub(crate) name: &'static str,
    /// The module's directory under `xtask/real-peers/` (one module may build several
    /// programs: SPIRE's server and agent).
    pub(crate) module: &'static str,
    /// The package `go build` builds, from the module's directory.
    pub(crate) package: &'static str,
    /// The module whose required version names the cache directory.
    pub(crate) versioned_by: &'static str,
    /// `-ldflags` for the version the binary reports, given that version.
    pub(crate) ldflags: fn(&str) -> String,
    /// Built with cgo (`CGO_ENABLED=1`): SPIRE's server keeps its datastore in SQLite
    /// through `github.com/mattn/go-sqlite3`, which is cgo (without it the server
    /// refuses `database_type = "sqlite3"`); the others are pure Go.
    pub(crate) cgo: bool,
}

pub(crate) const COMPONENTS: &[Component] = &[
    Component {
        name: "etcd",
        module: "etcd",
        package: ".",
        versioned_by: "go.etcd.io/etcd/server/v3",
        ldflags: |_| String::new(),
        cgo: false,
    },
    Component {
        name: "kube-apiserver",
        module: "kube-apiserver",
        package: "k8s.io/kubernetes/cmd/kube-apiserver",
        versioned_by: "k8s.io/kubernetes",
        // What the release build stamps (hack/lib/version.sh): /version reports it.
        ldflags: kube_version_ldflags,
        cgo: false,
    },
    Component {
        name: "spire-server",
        module: "spire",
        package: "github.com/spiffe/spire/cmd/spire-server",
        versioned_by: "github.com/spiffe/spire",
        ldflags: spire_version_ldflags,
        cgo: true,
    },
    Component {
        name: "spire-agent",
        module: "spire",
        package: "github.com/spiffe/spire/cmd/spire-agent",
        versioned_by: "github.com/spiffe/spire",
        ldflags: spire_version_ldflags,
        // Same flags as the server, so that the two builds share the Go build cache.
        cgo: true,
    },
    Component {
        name: "caddy",
        module: "caddy",
        package: ".",
        versioned_by: "github.com/caddyserver/caddy/v2",
        // caddy reports the main module's version itself (debug.ReadBuildInfo).
        ldflags: |_| String::new(),
        cgo: false,
    },
    Component {
        // The OpenTelemetry Collector (OTLP receiver, debug and file exporters) the
        // trace tests export to; its main.go is what the collector builder generates.
        name: "otelcol",
        module: "otelcol",
        package: ".",
        versioned_by: "go.opentelemetry.io/collector/otelcol",
        // The version is in main.go's BuildInfo (`otelcol --version`).
        ldflags: |_| String::new(),
        cgo: false,
    },
];

fn kube_version_ldflags(version: &str) -> String {
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or_default();
    let minor = parts.next().unwrap_or_default();
    let pkg = "k8s.io/component-base/version";
    format!("-X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}")
}

/// What SPIRE's Makefile passes: symbols stripped (`-s -w`) and the tag without its `v`
/// (`--version` prints `1.13.3`).
fn spire_version_ldflags(version: &str) -> String {
    format!(
        "-s -w -X github.com/spiffe/spire/pkg/common/version.gittag={}",
        version.trim_start_matches('v')
    )
}

/// The version `go_mod` requires of `module` (`require module vX.Y.Z`, in a block or
/// on one line).
pub(crate) fn required_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("require").trim();
        let mut words = line.split_whitespace();
        (words.next()? == module)
            .then(|| words.next().map(str::to_owned))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn versions_from_go_mod() {
        let one_line = "module x\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v3.7.0\n";
        assert_eq!(
            required_version(one_line, "go.etcd.io/etcd/server/v3").as_deref(),
            Some("v3.7.0")
        );
        let block = "require (\n\tk8s.io/kubernetes v1.37.2\n\tk8s.io/api v0.37.2 // indirect\n)\nreplace k8s.io/api => k8s.io/api v0.37.2\n";
        assert_eq!(
            required_version(block, "k8s.io/kubernetes").as_deref(),
            Some("v1.37.2")
        );
        assert_eq!(required_version(block, "k8s.io/apiserver"), None);
    }

    #[test]
    fn kube_apiserver_reports_its_release() {
        assert_eq!(
            kube_version_ldflags("v1.37.2"),
            "-X k8s.io/component-base/version.gitVersion=v1.37.2 \
             -X k8s.io/component-base/version.gitMajor=1 \
             -X k8s.io/component-base/version.gitMinor=37"
        );
    }

    #[test]
    fn spire_reports_its_release_without_the_v() {
        assert_eq!(
            spire_version_ldflags("v1.13.3"),
            "-s -w -X github.com/spiffe/spire/pkg/common/version.gittag=1.13.3"
        );
    }
}
