//! Progress of a bench run: the benchmarks run one binary at a time, each announced
//! with its place in the run and an estimate of the time left, taken from the
//! durations the last run of the same kind (full or `--quick`) recorded; the total
//! at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Builds the benchmarks (`cargo bench --no-run`): each bench target's executable.
///
/// A `--quick` run (CI's smoke run: the table and chart are produced, no timing is
/// judged) builds them with the `dev` profile for the whole workspace, the profile and
/// feature set of `cargo test --workspace`, so that after the tests it compiles the
/// bench targets and little else; the bench profile's optimised build of every
/// dependency was a quarter of an hour of a cold CI run.
pub(super) fn build_benches(root: &Path, quick: bool) -> Result<BTreeMap<String, PathBuf>, String> {
    let mut command = super::super::process::cargo();
    command.arg("bench");
    if quick {
        command.args([
            "--workspace",
            "--bench",
            "*",
            "--profile",
            "dev",
            "--no-run",
        ]);
    } else {
        command.args(["--package", "platform-benches", "--benches", "--no-run"]);
    }
    command
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(root)
        .stderr(std::process::Stdio::inherit());
    eprintln!("xtask: running {command:?}");
    let output = command
        .output()
        .map_err(|e| format!("could not start cargo bench --no-run: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo bench --no-run failed with {}",
            output.status
        ));
    }
    Ok(bench_executables(&String::from_utf8_lossy(&output.stdout)))
}

/// The bench executables named in cargo's JSON messages.
fn bench_executables(messages: &str) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_bench = message["target"]["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "bench"));
        if let (true, Some(name), Some(executable)) = (
            is_bench,
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) {
            found.insert(name.to_owned(), PathBuf::from(executable));
        }
    }
    found
}

/// The `[[bench]]` targets of `benches/Cargo.toml`, in the order written (the order
/// they run in).
pub(super) fn bench_targets(root: &Path) -> Result<Vec<String>, String> {
    let path = root.join("benches/Cargo.toml");
    std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| parse_bench_targets(&text))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn parse_bench_targets(manifest: &str) -> Result<Vec<String>, String> {
    let manifest: toml::Table = toml::from_str(manifest).map_err(|e| e.to_string())?;
    Ok(manifest
        .get("bench")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|bench| Some(bench.get("name")?.as_str()?.to_owned()))
        .collect())
}

/// The durations of the last run of one kind, per benchmark, kept across runs.
pub(super) struct Timings {
    path: PathBuf,
    last: BTreeMap<String, f64>,
    this: BTreeMap<String, f64>,
}

impl Timings {
    /// The last `quick` (or full) run's durations, kept under `target`.
    pub(super) fn load(target: &Path, quick: bool) -> Self {
        let path = target.join(if quick {
            "bench-timings-quick.json"
        } else {
            "bench-timings.json"
        });
        let last = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        Self {
            path,
            last,
            this: BTreeMap::new(),
        }
    }

    /// The line announcing benchmark `index` (from 0) of `names`.
    pub(super) fn announce(&self, names: &[String], index: usize) -> String {
        let left: Option<f64> = names[index..]
            .iter()
            .map(|name| self.last.get(name).copied())
            .sum();
        let estimate = match left {
            Some(seconds) => format!("about {} left", show(Duration::from_secs_f64(seconds))),
            None => "no estimate (no earlier run measured them all)".to_owned(),
        };
        format!(
            "xtask: bench [{}/{}] {}: {estimate}",
            index + 1,
            names.len(),
            names[index]
        )
    }

    /// Records how long `name` took in this run.
    pub(super) fn record(&mut self, name: &str, took: Duration) {
        self.this.insert(name.to_owned(), took.as_secs_f64());
    }

    /// The closing line: the total and each benchmark's share.
    pub(super) fn summary(&self) -> String {
        let total: f64 = self.this.values().sum();
        let each: Vec<String> = self
            .this
            .iter()
            .map(|(name, seconds)| format!("{name} {}", show(Duration::from_secs_f64(*seconds))))
            .collect();
        format!(
            "xtask: bench: measured in {} ({})",
            show(Duration::from_secs_f64(total)),
            each.join(", ")
        )
    }

    /// Keeps this run's durations for the next run's estimates.
    pub(super) fn save(&self) {
        if let Ok(text) = serde_json::to_string_pretty(&self.this) {
            let _ = std::fs::write(&self.path, text);
        }
    }
}

/// `1m05s`, `42s`.
fn show(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_targets_are_read_in_order_and_only_from_bench_tables() {
        let manifest = "[package]\nname = \"platform-benches\"\n\n[[bench]]\nname = \"handshake\"\nharness = false\n\n[dependencies]\nname = \"x\"\n\n[[bench]]\nharness = false\nname = \"serving\"\n";
        assert_eq!(
            parse_bench_targets(manifest).unwrap(),
            ["handshake", "serving"]
        );
    }

    #[test]
    fn bench_executables_are_read_from_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"svc_tls"},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["bench"],"name":"serving"},"executable":"/t/release/deps/serving-1"}
not json
{"reason":"build-finished","success":true}"#;
        let found = bench_executables(messages);
        assert_eq!(found.len(), 1);
        assert_eq!(found["serving"], PathBuf::from("/t/release/deps/serving-1"));
    }

    #[test]
    fn the_estimate_is_what_the_last_run_took_for_those_left() {
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect();
        let mut timings = Timings {
            path: PathBuf::new(),
            last: [("a", 10.0), ("b", 50.0), ("c", 20.0)]
                .into_iter()
                .map(|(n, s)| (n.to_owned(), s))
                .collect(),
            this: BTreeMap::new(),
        };
        assert_eq!(
            timings.announce(&names, 0),
            "xtask: bench [1/3] a: about 1m20s left"
        );
        assert_eq!(
            timings.announce(&names, 2),
            "xtask: bench [3/3] c: about 20s left"
        );
        timings.last.remove("b");
        assert!(timings.announce(&names, 0).contains("no estimate"));
        assert_eq!(
            timings.announce(&names, 2),
            "xtask: bench [3/3] c: about 20s left"
        );
        timings.record("a", Duration::from_secs(65));
        timings.record("c", Duration::from_secs(5));
        assert_eq!(
            timings.summary(),
            "xtask: bench: measured in 1m10s (a 1m05s, c 5s)"
        );
    }

    #[test]
    fn the_workspaces_benches_are_all_found() {
        let root = crate::process::workspace_root();
        let names = bench_targets(&root).unwrap();
        for name in ["handshake", "identity", "serving"] {
            assert!(names.iter().any(|n| n == name), "{names:?}");
        }
    }
}
