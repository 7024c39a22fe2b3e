//! The counted targets (no timing, no Go needed): key parses after a rotation (from
//! a Secret, of the server identity, from files), full loads per version with
//! handshakes racing the loader.

use super::results::Results;
use super::results::TargetRow;
use crate::stats::Verdict;

/// Counted, not timed (no Go needed): the key parses each first handshake after a
/// rotation paid, and the full loads each new version cost with handshakes racing
/// the loader.
pub(super) fn counted_rows(results: &Results) -> Vec<TargetRow> {
    let mut rows = Vec::new();
    for case in results.cases("identity-rotation") {
        let Some(parses) = results
            .counts
            .get(&format!("identity-rotation-parses/{case}"))
        else {
            continue;
        };
        let paid = parses.iter().filter(|n| **n > 0.0).count();
        rows.push(TargetRow {
            target: format!("{case}: no handshake pays a key parse after a rotation"),
            measured: None,
            verdict: Some(if paid == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(format!("{paid} of {} handshakes", parses.len())),
        });
    }
    for (id, parses) in &results.counts {
        let Some(key) = id.strip_prefix("server-rotation-parses/") else {
            continue;
        };
        let paid = parses.iter().filter(|n| **n > 0.0).count();
        rows.push(TargetRow {
            target: format!(
                "{key} server identity: no server handshake pays a key parse after a rotation"
            ),
            measured: None,
            verdict: Some(if paid == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(format!("{paid} of {} handshakes", parses.len())),
        });
    }
    for (id, parses) in &results.counts {
        let Some(case) = id.strip_prefix("files-rotation-parses/") else {
            continue;
        };
        let paid = parses.iter().filter(|n| **n > 0.0).count();
        rows.push(TargetRow {
            target: format!(
                "{case} from files: no handshake pays a key parse after a file rotation"
            ),
            measured: None,
            verdict: Some(if paid == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(format!("{paid} of {} handshakes", parses.len())),
        });
    }
    for (id, loads) in &results.counts {
        let Some(case) = id.strip_prefix("identity-racing-loads/") else {
            continue;
        };
        let extra = loads.iter().filter(|n| **n > 1.0).count();
        let most = loads.iter().copied().fold(0.0, f64::max);
        rows.push(TargetRow {
            target: format!(
                "{case}: handshakes racing the loader: one full load per new version \
                 (single flight)"
            ),
            measured: None,
            verdict: Some(if extra == 0 {
                Verdict::Met
            } else {
                Verdict::NotMet
            }),
            shown: Some(format!(
                "{extra} of {} versions loaded more than once (most: {most:.0})",
                loads.len()
            )),
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use crate::report::fixtures::{sample_results, verdict_of};
    use crate::report::{any_not_met, render, targets};
    use crate::stats::Verdict;

    #[test]
    fn key_parses_after_rotations_are_counted_not_timed() {
        let mut results = sample_results(false);
        results.counts.clear();
        let rows = targets(&results);
        assert!(
            !rows
                .iter()
                .any(|row| row.target.contains("no handshake pays")),
            "no count, no row"
        );
        results.counts.insert(
            "identity-rotation-parses/rsa2048-pkcs8".to_owned(),
            vec![0.0; 40],
        );
        let rows = targets(&results);
        assert_eq!(
            verdict_of(&rows, "rsa2048-pkcs8: no handshake pays"),
            Some(Verdict::Met)
        );
        assert!(render(&results).contains(
            "| rsa2048-pkcs8: no handshake pays a key parse after a rotation | 0 of 40 handshakes | met |"
        ));
        let mut one = vec![0.0; 40];
        one[7] = 1.0;
        results
            .counts
            .insert("identity-rotation-parses/rsa2048-pkcs8".to_owned(), one);
        let rows = targets(&results);
        let row = rows
            .iter()
            .find(|row| row.target.starts_with("rsa2048-pkcs8: no handshake pays"))
            .unwrap();
        assert_eq!(row.verdict, Some(Verdict::NotMet));
        assert_eq!(row.shown.as_deref(), Some("1 of 40 handshakes"));
        assert!(any_not_met(&rows));
    }
}
