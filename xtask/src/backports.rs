//! Debian's backports suite, for the one Go toolchain the tests need that Go 1.26
//! cannot stand in for: svc-tls's key exchange test runs a Go 1.23 TLS server (Go
//! 1.23 offers only the `X25519Kyber768Draft00` draft hybrid; Go 1.24 removed it).
//! `cargo xtask test` installs Debian's `golang-1.23-go` from
//! `<codename>-backports` as root when no Go 1.23 is found. Nothing else comes from
//! backports: the benchmarks and the other Go programs build with Go 1.26 and modules
//! from the Go module proxy (`golang.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn version_of(go: &Path) -> Option<(String, (u32, u32))> {
    let output = Command::new(go)
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let version = super::golang::parse_version(&text)?;
    Some((text, version))
}

/// Candidate `go` binaries: `$GO`, `go` on PATH, then Debian's versioned installs
/// (`/usr/lib/go-1.x`, newest first).
fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(go) = std::env::var_os("GO") {
        out.push(PathBuf::from(go));
    }
    out.push(PathBuf::from("go"));
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("go-1."))
            })
            .collect();
        dirs.sort();
        dirs.reverse();
        out.extend(dirs.into_iter().map(|d| d.join("bin/go")));
    }
    out
}

/// The Debian archive source of this machine, from its apt configuration: the first
/// stanza (deb822) or line (one-line format) whose suite is `codename` itself.
/// Returns `(uri, signed_by)`.
pub fn debian_source(
    files: &[(String, String)],
    codename: &str,
) -> Option<(String, Option<String>)> {
    for (name, text) in files {
        if name.ends_with(".sources") {
            for stanza in text.split("\n\n") {
                let field = |key: &str| {
                    stanza.lines().find_map(|line| {
                        let (k, v) = line.split_once(':')?;
                        (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().to_owned())
                    })
                };
                let enabled = field("Enabled").is_none_or(|v| v != "no");
                let types = field("Types").unwrap_or_default();
                let suites = field("Suites").unwrap_or_default();
                if enabled
                    && types.split_whitespace().any(|t| t == "deb")
                    && suites.split_whitespace().any(|s| s == codename)
                    && let Some(uris) = field("URIs")
                    && let Some(uri) = uris.split_whitespace().next()
                {
                    return Some((uri.to_owned(), field("Signed-By")));
                }
            }
        } else {
            for line in text.lines() {
                let line = line.trim();
                let Some(rest) = line.strip_prefix("deb ") else {
                    continue;
                };
                let mut words = rest.split_whitespace().peekable();
                let mut signed_by = None;
                if words.peek().is_some_and(|w| w.starts_with('[')) {
                    let mut options = String::new();
                    for w in words.by_ref() {
                        options.push_str(w);
                        options.push(' ');
                        if w.ends_with(']') {
                            break;
                        }
                    }
                    signed_by = options
                        .trim_matches(['[', ']', ' '])
                        .split_whitespace()
                        .find_map(|o| o.strip_prefix("signed-by=").map(str::to_owned));
                }
                let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
                    continue;
                };
                if suite == codename {
                    return Some((uri.to_owned(), signed_by));
                }
            }
        }
    }
    None
}

/// The deb822 stanza for `<codename>-backports` on the same archive.
pub fn backports_stanza(uri: &str, signed_by: Option<&str>, codename: &str) -> String {
    let mut out = format!(
        "# Written by `cargo xtask test`: Go 1.23 for svc-tls's key exchange test.\n\
         Types: deb\nURIs: {uri}\nSuites: {codename}-backports\nComponents: main\n"
    );
    if let Some(key) = signed_by {
        out.push_str(&format!("Signed-By: {key}\n"));
    }
    out
}

fn os_release_codename() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines().find_map(|line| {
        line.strip_prefix("VERSION_CODENAME=")
            .map(|v| v.trim_matches('"').to_owned())
    })
}

fn apt_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        files.push(("sources.list".to_owned(), text));
    }
    if let Ok(entries) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if (name.ends_with(".list") || name.ends_with(".sources"))
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                files.push((name, text));
            }
        }
    }
    files
}

fn apt(args: &[&str]) -> Result<(), String> {
    crate::process::run_checked(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(args),
    )
}

/// Installs `packages` from `<codename>-backports` (added next to the machine's own
/// Debian source when missing).
pub fn install_from_backports(packages: &[&str]) -> Result<(), String> {
    let codename =
        os_release_codename().ok_or("cannot tell the Debian release from /etc/os-release")?;
    let list = PathBuf::from(format!(
        "/etc/apt/sources.list.d/xtask-{codename}-backports.sources"
    ));
    let files = apt_files();
    let has_backports = files
        .iter()
        .any(|(_, text)| text.contains(&format!("{codename}-backports")));
    if !has_backports {
        let (uri, signed_by) = debian_source(&files, &codename).ok_or_else(|| {
            format!(
                "no Debian source for {codename} in /etc/apt: cannot derive {codename}-backports"
            )
        })?;
        let stanza = backports_stanza(&uri, signed_by.as_deref(), &codename);
        std::fs::write(&list, stanza)
            .map_err(|e| format!("cannot write {}: {e}", list.display()))?;
        eprintln!(
            "xtask: added {codename}-backports ({uri}) in {}",
            list.display()
        );
    }
    apt(&["update", "-q"])?;
    let backports = format!("{codename}-backports");
    let mut args = vec!["install", "-y", "-q", "-t", backports.as_str()];
    args.extend_from_slice(packages);
    apt(&args)
}

/// A Go 1.`minor` toolchain among the candidates (`$GO`, `go` on PATH, Debian's
/// `/usr/lib/go-1.x`): its path and `go version`.
pub fn find_go_minor(minor: u32) -> Option<(PathBuf, String)> {
    candidates().into_iter().find_map(|go| {
        let (text, version) = version_of(&go)?;
        (version == (1, minor)).then_some((go, text))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backports_from_a_deb822_source() {
        let files = vec![
            (
                "debian.sources".to_owned(),
                "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\
                 Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
                 Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n"
                    .to_owned(),
            ),
        ];
        let (uri, key) = debian_source(&files, "bookworm").unwrap();
        assert_eq!(uri, "http://mirror.example/debian");
        assert_eq!(
            key.as_deref(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg")
        );
        let stanza = backports_stanza(&uri, key.as_deref(), "bookworm");
        assert!(stanza.contains("URIs: http://mirror.example/debian\n"));
        assert!(stanza.contains("Suites: bookworm-backports\n"));
        assert!(stanza.contains("Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"));
    }

    #[test]
    fn backports_from_a_one_line_source() {
        let files = vec![(
            "sources.list".to_owned(),
            "# deb http://old.example/debian bookworm main\n\
             deb http://mirror.example/debian-security bookworm-security main\n\
             deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n"
                .to_owned(),
        )];
        let (uri, key) = debian_source(&files, "bookworm").unwrap();
        assert_eq!(uri, "http://mirror.example/debian");
        assert_eq!(key.as_deref(), Some("/k.gpg"));
        assert_eq!(debian_source(&files, "trixie"), None);
    }
}
