//! The Go side of `cargo xtask bench` (and the Go programs the tests build): finds Go
//! 1.26 or newer, builds `benches/go/` as a plain Go module with its modules from the
//! Go module proxy (the environment's `GOPROXY`, checked against the committed go.sum
//! with `-mod=readonly`), and reads back which Go and which module versions the binary
//! was built with (`go version -m`).
//!
//! Go's caches (`GOMODCACHE`, `GOCACHE`) live outside the repository, in
//! [`cache_dir`], so that a module downloaded once serves every later run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The oldest Go the programs are built with: the Go the legacy package is measured
/// on (`go 1.26` in benches/go/go.mod).
const MIN: (u32, u32) = (1, 26);

/// `go version` output parsed to (major, minor), e.g. `go version go1.26.8 linux/amd64`.
pub fn parse_version(output: &str) -> Option<(u32, u32)> {
    let word = output.split_whitespace().find(|w| w.starts_with("go1"))?;
    let mut parts = word.trim_start_matches("go").split(['.', 'r', 'b']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// `go version` of one binary, with the local toolchain only (no switching to
/// another toolchain that go.mod might name).
fn version_of(go: &Path) -> Option<String> {
    let output = Command::new(go)
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Candidate `go` binaries: `$GO`, `go` on PATH, then the official install location.
fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(go) = std::env::var_os("GO") {
        out.push(PathBuf::from(go));
    }
    out.push(PathBuf::from("go"));
    out.push(PathBuf::from("/usr/local/go/bin/go"));
    out
}

/// The first candidate at `MIN` or newer, or why none is: every Go found, with its
/// version.
fn choose(found: &[(PathBuf, String)]) -> Result<(PathBuf, String), String> {
    if let Some((go, text)) = found
        .iter()
        .find(|(_, text)| parse_version(text).is_some_and(|v| v >= MIN))
    {
        return Ok((go.clone(), text.clone()));
    }
    let (major, minor) = MIN;
    if found.is_empty() {
        return Err(format!(
            "no Go found ($GO, go on PATH, /usr/local/go/bin/go): Go {major}.{minor} or newer \
             is needed"
        ));
    }
    let seen: Vec<String> = found
        .iter()
        .map(|(go, text)| format!("{} is {text}", go.display()))
        .collect();
    Err(format!(
        "Go {major}.{minor} or newer is needed, found only older: {} (point $GO at a Go \
         {major}.{minor}+)",
        seen.join("; ")
    ))
}

/// Go, ready to build the programs: its path and `go version`, or why not.
pub fn ensure() -> Result<(PathBuf, String), String> {
    let found: Vec<(PathBuf, String)> = candidates()
        .into_iter()
        .filter_map(|go| version_of(&go).map(|text| (go, text)))
        .collect();
    choose(&found)
}

/// Where Go's module and build caches live, outside the repository:
/// `$XDG_CACHE_HOME/platform-client/go` or `$HOME/.cache/platform-client/go`
/// (`<repo>/target/go-cache` when neither is set).
pub fn cache_dir() -> PathBuf {
    let base = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(xdg), _) if !xdg.is_empty() => PathBuf::from(xdg),
        (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".cache"),
        _ => return crate::process::workspace_root().join("target/go-cache"),
    };
    base.join("platform-client/go")
}

/// The environment every Go command of xtask runs with: the local toolchain only,
/// modules checked against go.sum and never rewritten, the caches in [`cache_dir`].
/// `GOPROXY` and `GOSUMDB` are the environment's own.
pub fn environment() -> Vec<(&'static str, PathBuf)> {
    let cache = cache_dir();
    vec![
        ("GOTOOLCHAIN", "local".into()),
        ("GOFLAGS", "-mod=readonly".into()),
        ("GO111MODULE", "on".into()),
        ("GOMODCACHE", cache.join("mod")),
        ("GOCACHE", cache.join("build")),
    ]
}

/// Builds `benches/go` into `out_dir/legacy`.
pub fn build(go: &Path, root: &Path, out_dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let binary = out_dir.join("legacy");
    let mut build = Command::new(go);
    build
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(root.join("benches/go"))
        .envs(environment());
    crate::process::run_checked(&mut build)?;
    Ok(binary)
}

/// What a Go binary was built with, from `go version -m`: the Go version (`go1.26.8`)
/// and each dependency module with its version.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildInfo {
    pub go: String,
    pub modules: Vec<(String, String)>,
}

impl BuildInfo {
    /// The version of `module`, if the binary depends on it.
    pub fn module(&self, module: &str) -> Option<&str> {
        self.modules
            .iter()
            .find(|(path, _)| path == module)
            .map(|(_, version)| version.as_str())
    }
}

/// Parses `go version -m` output: `<file>: go1.26.8`, then tab-separated lines, of
/// which `dep <path> <version> [<sum>]` (and a `=>` replacement line after it) name
/// the modules.
pub fn parse_build_info(text: &str) -> Option<BuildInfo> {
    let mut lines = text.lines();
    let go = lines
        .next()?
        .rsplit_once(": ")?
        .1
        .split_whitespace()
        .next()?
        .to_owned();
    let mut modules: Vec<(String, String)> = Vec::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["dep", path, version, ..] => modules.push(((*path).into(), (*version).into())),
            ["=>", path, version, ..] => {
                if let Some(last) = modules.last_mut() {
                    last.1 = format!("{} (replaced by {path} {version})", last.1);
                }
            }
            _ => {}
        }
    }
    go.starts_with("go").then_some(BuildInfo { go, modules })
}

/// `go version -m binary`.
pub fn build_info(go: &Path, binary: &Path) -> Result<BuildInfo, String> {
    let output = Command::new(go)
        .args(["version", "-m"])
        .arg(binary)
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| format!("cannot run {} version -m: {e}", go.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "go version -m {}: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse_build_info(&text)
        .ok_or_else(|| format!("go version -m {}: unreadable output", binary.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_versions() {
        assert_eq!(
            parse_version("go version go1.26.8 linux/amd64"),
            Some((1, 26))
        );
        assert_eq!(
            parse_version("go version go1.24rc1 linux/amd64"),
            Some((1, 24))
        );
        assert_eq!(
            parse_version("go version go1.19 linux/amd64"),
            Some((1, 19))
        );
        assert_eq!(parse_version("bash: go: not found"), None);
    }

    #[test]
    fn the_first_go_new_enough_is_chosen_and_an_old_one_is_named() {
        let old = (
            PathBuf::from("/usr/lib/go-1.23/bin/go"),
            "go version go1.23.5 linux/amd64".to_owned(),
        );
        let new = (
            PathBuf::from("/usr/local/go/bin/go"),
            "go version go1.26.8 linux/amd64".to_owned(),
        );
        assert_eq!(choose(&[old.clone(), new.clone()]), Ok(new.clone()));
        let why = choose(std::slice::from_ref(&old)).unwrap_err();
        assert!(why.contains("Go 1.26 or newer"), "{why}");
        assert!(
            why.contains("/usr/lib/go-1.23/bin/go is go version go1.23.5"),
            "{why}"
        );
        assert!(choose(&[]).unwrap_err().contains("no Go found"));
        let rc = (
            PathBuf::from("go"),
            "go version go1.27rc1 linux/amd64".into(),
        );
        assert_eq!(choose(std::slice::from_ref(&rc)), Ok(rc));
    }

    #[test]
    fn build_info_names_go_and_the_modules() {
        let text = "/tmp/legacy: go1.26.8\n\
                    \tpath\tplatformbench/legacy\n\
                    \tmod\tplatformbench/legacy\t(devel)\t\n\
                    \tdep\tgithub.com/go-jose/go-jose/v4\tv4.1.9\th1:pKfe=\n\
                    \tdep\tk8s.io/client-go\tv0.35.0\th1:x=\n\
                    \t=>\t../client-go\t(devel)\t\n\
                    \tbuild\t-buildmode=exe\n";
        let info = parse_build_info(text).unwrap();
        assert_eq!(info.go, "go1.26.8");
        assert_eq!(info.module("github.com/go-jose/go-jose/v4"), Some("v4.1.9"));
        assert_eq!(
            info.module("k8s.io/client-go"),
            Some("v0.35.0 (replaced by ../client-go (devel))")
        );
        assert_eq!(info.module("sigs.k8s.io/controller-runtime"), None);
        assert_eq!(parse_build_info("not a binary"), None);
    }

    #[test]
    fn the_environment_keeps_goproxy_and_pins_the_rest() {
        let env = environment();
        let names: Vec<&str> = env.iter().map(|(k, _)| *k).collect();
        assert!(!names.contains(&"GOPROXY"));
        assert!(!names.contains(&"GOSUMDB"));
        assert!(env.contains(&("GOTOOLCHAIN", PathBuf::from("local"))));
        assert!(env.contains(&("GOFLAGS", PathBuf::from("-mod=readonly"))));
        let cache = cache_dir();
        assert!(env.contains(&("GOMODCACHE", cache.join("mod"))));
        assert!(env.contains(&("GOCACHE", cache.join("build"))));
    }
}
