//! The counted targets (no timing, no Go needed): key parses after a rotation (from
//! a Secret, of the server identity, from files), full loads per version with
//! handshakes racing the loader.

use super::results::{Results, TargetRow};

/// Counted, not timed (no Go needed): the key parses each first handshake after a
/// rotation paid, and the full loads each new version cost with handshakes racing
/// the loader.
pub(super) fn counted_rows(results: &Results) -> Vec<TargetRow> {
    let no_parse = |target: String, parses: &[f64]| {
        let paid = parses.iter().filter(|n| **n > 0.0).count();
        TargetRow::counted(
            target,
            paid,
            format!("{paid} of {} handshakes", parses.len()),
        )
    };
    let mut rows: Vec<TargetRow> = results
        .cases("identity-rotation")
        .into_iter()
        .filter_map(|case| {
            let parses = results
                .counts
                .get(&format!("identity-rotation-parses/{case}"))?;
            Some(no_parse(
                format!("{case}: no handshake pays a key parse after a rotation"),
                parses,
            ))
        })
        .collect();
    for (key, parses) in results.counted("server-rotation-parses/") {
        rows.push(no_parse(
            format!("{key} server identity: no server handshake pays a key parse after a rotation"),
            parses,
        ));
    }
    for (case, parses) in results.counted("files-rotation-parses/") {
        rows.push(no_parse(
            format!("{case} from files: no handshake pays a key parse after a file rotation"),
            parses,
        ));
    }
    for (case, loads) in results.counted("identity-racing-loads/") {
        let extra = loads.iter().filter(|n| **n > 1.0).count();
        let most = loads.iter().copied().fold(0.0, f64::max);
        rows.push(TargetRow::counted(
            format!(
                "{case}: handshakes racing the loader: one full load per new version \
                 (single flight)"
            ),
            extra,
            format!(
                "{extra} of {} versions loaded more than once (most: {most:.0})",
                loads.len()
            ),
        ));
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
