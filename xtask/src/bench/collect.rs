//! Collecting a run's figures into `Results`: criterion's estimates (the median and
//! its bootstrap interval under the criterion home) and the samplers' JSON lines (ours
//! and Go's, with their counts and interleaving groups). Only reading and parsing
//! files here: what the figures mean is `report/`'s job.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::report::Results;
use crate::stats::Estimate;

/// Reads criterion's `new/estimates.json` (median and its bootstrap interval) with
/// `new/benchmark.json` (the id) under the criterion home.
pub(super) fn collect_criterion(dir: &Path, into: &mut BTreeMap<String, Estimate>) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|name| name == "new") {
                if let Some((id, estimate)) = read_criterion(&path) {
                    into.insert(id, estimate);
                }
            } else if path.file_name().is_some_and(|name| name != "report") {
                pending.push(path);
            }
        }
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn read_criterion(new_dir: &Path) -> Option<(String, Estimate)> {
    let benchmark = read_json(&new_dir.join("benchmark.json"))?;
    let estimates = read_json(&new_dir.join("estimates.json"))?;
    let id = benchmark.get("full_id")?.as_str()?.to_string();
    criterion_estimate(&estimates).map(|e| (id, e))
}

/// The median's point estimate and confidence interval from criterion's estimates.
fn criterion_estimate(estimates: &Value) -> Option<Estimate> {
    let median = estimates.get("median")?;
    let interval = median.get("confidence_interval")?;
    Some(Estimate {
        median: median.get("point_estimate")?.as_f64()?,
        lower: interval.get("lower_bound")?.as_f64()?,
        upper: interval.get("upper_bound")?.as_f64()?,
    })
}

/// Reads the sampled results (`*.jsonl`: ours, and Go's), one JSON line per benchmark.
pub(super) fn collect_samples(dir: &Path, results: &mut Results) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        add_samples(&text, results).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// `{"id": ..., "unit": "ns" | "count", "samples": [...], "paired": "<group>"}` lines
/// (`paired` optional): nanoseconds per operation (with their estimate and their
/// interleaving group), or a count per event (e.g. key parses per handshake).
fn add_samples(text: &str, results: &mut Results) -> Result<(), String> {
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let fail = |what: &str| format!("line {}: {what}", n + 1);
        let value: Value = serde_json::from_str(line).map_err(|e| fail(&e.to_string()))?;
        let id = value["id"]
            .as_str()
            .ok_or_else(|| fail("no id"))?
            .to_owned();
        let samples = value["samples"]
            .as_array()
            .ok_or_else(|| fail("no samples"))?
            .iter()
            .map(|s| s.as_f64().ok_or_else(|| fail("a sample is not a number")))
            .collect::<Result<Vec<f64>, String>>()?;
        match value["unit"].as_str() {
            Some("count") => {
                results.counts.insert(id, samples);
            }
            Some("ns") => {
                if let Some(group) = value["paired"].as_str() {
                    results.pairs.insert(id.clone(), group.to_owned());
                }
                if let Some(estimate) = Estimate::from_samples(&samples) {
                    results.estimates.insert(id.clone(), estimate);
                }
                results.samples.insert(id, samples);
            }
            _ => return Err(fail("unit is neither ns nor count")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criterion_median_and_interval() {
        let json: Value = serde_json::from_str(
            r#"{"mean":{"point_estimate":5.0,"confidence_interval":{"lower_bound":1.0,"upper_bound":9.0}},
                "median":{"point_estimate":10.0,"standard_error":0.1,
                  "confidence_interval":{"confidence_level":0.95,"lower_bound":9.5,"upper_bound":10.5}}}"#,
        )
        .unwrap();
        assert_eq!(
            criterion_estimate(&json),
            Some(Estimate {
                median: 10.0,
                lower: 9.5,
                upper: 10.5
            })
        );
    }

    #[test]
    fn sampled_lines() {
        let mut results = Results::default();
        add_samples(
            "{\"id\":\"go/x509keypair/p256-pkcs8\",\"unit\":\"ns\",\"samples\":[1,2.5,3],\"paired\":\"reload/p256-pkcs8\"}\n\n\
             {\"id\":\"identity-rotation-parses/p256-pkcs8\",\"unit\":\"count\",\"samples\":[0,1]}\n",
            &mut results,
        )
        .unwrap();
        let ns = "go/x509keypair/p256-pkcs8";
        assert_eq!(results.samples[ns], [1.0, 2.5, 3.0]);
        assert_eq!(results.pairs[ns], "reload/p256-pkcs8");
        assert_eq!(results.estimates[ns].median, 2.5);
        let count = "identity-rotation-parses/p256-pkcs8";
        assert_eq!(results.counts[count], [0.0, 1.0]);
        assert!(!results.samples.contains_key(count) && !results.estimates.contains_key(count));
        let mut results = Results::default();
        assert!(
            add_samples(
                "{\"id\":\"x\",\"unit\":\"ms\",\"samples\":[1]}",
                &mut results
            )
            .is_err()
        );
        assert!(add_samples("not json", &mut results).is_err());
    }
}
