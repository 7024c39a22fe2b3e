//! Building one real peer with Go: a fresh copy of our module in its cache directory,
//! `go build` with the module proxy (`GOFLAGS=-mod=mod`), the local toolchain only
//! (`GOTOOLCHAIN=local`) and the module and build caches under the cache root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::components::{Component, required_version};
use crate::golang::parse_version;
use crate::process::{run_checked, workspace_root};

/// The oldest Go our modules build with (`go 1.26.0` in their go.mod: Kubernetes
/// v1.37 requires it).
const MIN_MINOR: u32 = 26;

/// A Go 1.26 or newer: `$GO`, `go` on PATH, or the machine's `/usr/local/go`.
pub(super) fn find_go() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(go) = std::env::var_os("GO") {
        candidates.push(PathBuf::from(go));
    }
    candidates.push(PathBuf::from("go"));
    candidates.push(PathBuf::from("/usr/local/go/bin/go"));
    for go in &candidates {
        let Ok(output) = Command::new(go).arg("version").output() else {
            continue;
        };
        let text = String::from_utf8_lossy(&output.stdout);
        if let Some((1, minor)) = parse_version(&text)
            && minor >= MIN_MINOR
        {
            eprintln!("xtask: real peers are built with {}", text.trim());
            return Ok(go.clone());
        }
    }
    Err(format!(
        "no Go 1.{MIN_MINOR} or newer (tried {candidates:?}): the real peers \
         (kube-apiserver, etcd, spire-server, spire-agent, caddy, otelcol) are built from source with it; set GO to one"
    ))
}

/// Builds `component` unless its binary is cached for exactly our module.
pub(super) fn ensure(go: &Path, root: &Path, component: &Component) -> Result<(), String> {
    let module = workspace_root()
        .join("xtask/real-peers")
        .join(component.module);
    let read = |name: &str| {
        std::fs::read_to_string(module.join(name))
            .map_err(|e| format!("{}: {e}", module.join(name).display()))
    };
    let (go_mod, go_sum) = (read("go.mod")?, read("go.sum")?);
    let version = required_version(&go_mod, component.versioned_by).ok_or_else(|| {
        format!(
            "{}/go.mod requires no version of {}",
            module.display(),
            component.versioned_by
        )
    })?;
    let dir = root.join(format!("{}-{version}", component.name));
    let binary = dir.join("bin").join(component.name);
    let ldflags = (component.ldflags)(&version);
    let cgo = if component.cgo { "1" } else { "0" };
    let mut stamp = format!("go.mod\n{go_mod}\ngo.sum\n{go_sum}\nldflags {ldflags}\n");
    if component.cgo {
        // Only then: the pure-Go components' stamps stay what they were.
        stamp.push_str("CGO_ENABLED=1\n");
    }
    let stamp_path = dir.join("stamp");
    if binary.exists() && std::fs::read_to_string(&stamp_path).ok().as_ref() == Some(&stamp) {
        eprintln!(
            "xtask: {} {version} is cached: {}",
            component.name,
            binary.display()
        );
        return Ok(());
    }
    // Each component builds in a copy of its own (two components may share a module).
    let src = dir.join("src");
    copy_module(&module, &src)?;
    eprintln!(
        "xtask: building {} {version} (once per machine; about 13 minutes for all six \
         on an idle 2-core machine, much longer while other builds run)",
        component.name
    );
    let started = Instant::now();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    let partial = bin.join(format!("{}.partial", component.name));
    let mut build = Command::new(go);
    build
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("GOMODCACHE", root.join("gomodcache"))
        .env("GOCACHE", root.join("gocache"))
        .env("CGO_ENABLED", cgo)
        // `-s -w`: no symbol table and no DWARF, which nothing here reads and whose
        // writing is much of a large binary's link; not in the stamp, so a binary
        // cached with them is not built again.
        .args([
            "build",
            "-trimpath",
            "-ldflags",
            &format!("-s -w {ldflags}"),
            "-o",
        ])
        .arg(&partial)
        .arg(component.package);
    run_checked(&mut build).map_err(|e| {
        format!(
            "{e}\n(building {} {version}; a module the proxy refused is named above)",
            component.name
        )
    })?;
    std::fs::rename(&partial, &binary).map_err(|e| format!("{}: {e}", binary.display()))?;
    std::fs::write(&stamp_path, stamp).map_err(|e| format!("{}: {e}", stamp_path.display()))?;
    eprintln!(
        "xtask: built {} {version} in {:.0?}: {}; the real-peers cache ({}) now uses {}",
        component.name,
        started.elapsed(),
        binary.display(),
        root.display(),
        disk_used(root)
    );
    Ok(())
}

/// Replaces `src` with the files of our module (go.mod, go.sum, Go sources).
fn copy_module(module: &Path, src: &Path) -> Result<(), String> {
    let error = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
    if src.exists() {
        std::fs::remove_dir_all(src).map_err(|e| error(src, e))?;
    }
    std::fs::create_dir_all(src).map_err(|e| error(src, e))?;
    for entry in std::fs::read_dir(module).map_err(|e| error(module, e))? {
        let path = entry.map_err(|e| error(module, e))?.path();
        if path.is_file() {
            let to = src.join(path.file_name().unwrap_or_default());
            std::fs::copy(&path, &to).map_err(|e| error(&to, e))?;
        }
    }
    Ok(())
}

/// `du -sh` of `path`, or "unknown".
fn disk_used(path: &Path) -> String {
    Command::new("du")
        .arg("-sh")
        .arg(path)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
