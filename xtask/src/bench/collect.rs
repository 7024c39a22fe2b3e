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
pub(super) fn collect_criterion(
    dir: &Path,
    into: &mut BTreeMap<String, Estimate>,
) -> Result<(), String> {
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
    Ok(())
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
        for Line {
            id,
            unit,
            samples,
            paired,
        } in parse_samples(&text).map_err(|e| format!("{}: {e}", path.display()))?
        {
            if unit == Unit::Count {
                results.counts.insert(id, samples);
                continue;
            }
            if let Some(group) = paired {
                results.pairs.insert(id.clone(), group);
            }
            if let Some(estimate) = Estimate::from_samples(&samples) {
                results.estimates.insert(id.clone(), estimate);
            }
            results.samples.insert(id, samples);
        }
    }
    Ok(())
}

/// What a line's samples are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Nanoseconds per operation.
    Ns,
    /// A count per event (e.g. key parses per handshake).
    Count,
}

/// One line of sampled results.
#[derive(Debug, PartialEq)]
struct Line {
    id: String,
    unit: Unit,
    samples: Vec<f64>,
    /// The interleaved measurement the samples came from, one per round.
    paired: Option<String>,
}

/// `{"id": ..., "unit": "ns" | "count", "samples": [...], "paired": "<group>"}` lines
/// (`paired` optional).
fn parse_samples(text: &str) -> Result<Vec<Line>, String> {
    let mut out = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let id = value
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("line {}: no id", n + 1))?;
        let unit = match value.get("unit").and_then(Value::as_str) {
            Some("ns") => Unit::Ns,
            Some("count") => Unit::Count,
            _ => return Err(format!("line {}: unit is neither ns nor count", n + 1)),
        };
        let samples = value
            .get("samples")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("line {}: no samples", n + 1))?
            .iter()
            .map(|s| {
                s.as_f64()
                    .ok_or_else(|| format!("line {}: a sample is not a number", n + 1))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        out.push(Line {
            id: id.to_owned(),
            unit,
            samples,
            paired: value
                .get("paired")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    Ok(out)
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
        let parsed = parse_samples(
            "{\"id\":\"go/x509keypair/p256-pkcs8\",\"unit\":\"ns\",\"samples\":[1,2.5,3],\"paired\":\"reload/p256-pkcs8\"}\n\n\
             {\"id\":\"identity-rotation-parses/p256-pkcs8\",\"unit\":\"count\",\"samples\":[0,1]}\n",
        )
        .unwrap();
        assert_eq!(
            parsed,
            vec![
                Line {
                    id: "go/x509keypair/p256-pkcs8".to_owned(),
                    unit: Unit::Ns,
                    samples: vec![1.0, 2.5, 3.0],
                    paired: Some("reload/p256-pkcs8".to_owned()),
                },
                Line {
                    id: "identity-rotation-parses/p256-pkcs8".to_owned(),
                    unit: Unit::Count,
                    samples: vec![0.0, 1.0],
                    paired: None,
                },
            ]
        );
        assert!(parse_samples("{\"id\":\"x\",\"unit\":\"ms\",\"samples\":[1]}").is_err());
        assert!(parse_samples("not json").is_err());
    }
}
