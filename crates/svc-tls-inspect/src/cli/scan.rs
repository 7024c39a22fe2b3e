//! Reading the arguments before clap does: which peers and prefixed identities they
//! declare, whether they ask for JSON, and which flags are the service's own (kept
//! out of the parse, reported by name).

use std::collections::BTreeSet;

use clap::Command;

pub(super) const PEER_SUFFIXES: [&str; 8] = [
    "-host",
    "-ca-secret-namespace",
    "-ca-secret-name",
    "-ca-configmap-namespace",
    "-ca-configmap-name",
    "-ca-configmap-key",
    "-http2",
    "-pool-idle-timeout",
];
pub(super) const IDENTITY_SUFFIXES: [&str; 6] = [
    "client-certificate-source",
    "client-certificate-namespace",
    "client-certificate-name",
    "client-certificate-dir",
    "client-certificate-layout",
    "spiffe-server-id",
];

/// Whether `args` (without the program name) ask for JSON, read before parsing so
/// that even a flags error is printed as JSON.
pub fn wants_json(args: &[String]) -> bool {
    args.iter().enumerate().any(|(i, a)| {
        a == "--output=json" || (a == "--output" && args.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// The names `S` of flags `--S<suffix>` (for a suffix with a leading `-`), or the
/// prefixes `P-` / `` of flags `--P-<suffix>`, in the order first seen.
pub(super) fn declared(names: &[&str], suffixes: &[&str]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for name in names {
        for suffix in suffixes {
            if let Some(head) = name.strip_suffix(suffix) {
                let fits = if suffix.starts_with('-') {
                    !head.is_empty()
                } else {
                    head.is_empty() || head.ends_with('-')
                };
                if fits && !head.is_empty() && seen.insert(head.to_owned()) {
                    out.push(head.to_owned());
                }
            }
        }
    }
    out
}

pub(super) fn explicit_peers(args: &[String]) -> Option<Vec<String>> {
    let value = args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix("--peers=")
            .map(str::to_owned)
            .or_else(|| (a == "--peers").then(|| args.get(i + 1).cloned().unwrap_or_default()))
    })?;
    Some(list(&value))
}

/// The names every `--service-flags=a,b` (or `--service-flags a,b`) lists, without
/// dashes: flags of the service's own that are close to one of this command's and
/// so would be taken for a typo.
pub(super) fn service_flags(args: &[String]) -> Vec<String> {
    args.iter()
        .enumerate()
        .filter_map(|(i, a)| {
            a.strip_prefix("--service-flags=")
                .map(str::to_owned)
                .or_else(|| {
                    (a == "--service-flags")
                        .then(|| args.get(i + 1).cloned())
                        .flatten()
                })
        })
        .flat_map(|value| list(&value))
        .map(|name| name.trim_start_matches('-').to_owned())
        .collect()
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The flag of `cmd` that the unknown `--name` is most likely a typo of: one whose
/// name is within [`typo_distance`] edits of it (an insertion, deletion,
/// substitution, or swap of two neighbouring characters each count one). A name
/// shaped as another peer's or prefixed identity's flag (`--S-host`,
/// `--P-client-certificate-name`, ...) is that peer's, not a typo; so is one listed
/// in `allowed` (`--service-flags`).
pub(super) fn mistyped(cmd: &Command, name: &str, allowed: &[String]) -> Option<String> {
    let bound = typo_distance(name);
    if bound == 0
        || allowed.iter().any(|a| a == name)
        || !declared(&[name], &PEER_SUFFIXES).is_empty()
        || !declared(&[name], &IDENTITY_SUFFIXES).is_empty()
    {
        return None;
    }
    cmd.get_arguments()
        .filter_map(|a| a.get_long())
        .chain(["help", "version"])
        .map(|known| (edit_distance(name, known), known))
        .filter(|(distance, _)| *distance <= bound)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known.to_owned())
}

/// How many edits still make a typo: none for a name shorter than 5 characters
/// (too many short flags are one edit apart), 1 up to 11 characters (`--ouptut`,
/// `--timout`), 2 from 12 (`--chain-ca-secrte`, `--client-certificate-nmae`).
pub(super) fn typo_distance(name: &str) -> usize {
    match name.chars().count() {
        0..=4 => 0,
        5..=11 => 1,
        _ => 2,
    }
}

/// The optimal string alignment distance of `a` and `b`: Levenshtein's, with a swap
/// of two neighbouring characters counted as one edit.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for (i, row) in d.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// The arguments `cmd` knows, and the names of the flags it does not.
pub(super) fn keep_known(cmd: &Command, args: &[String]) -> (Vec<String>, Vec<String>) {
    let takes_value = |name: &str| -> Option<bool> {
        if name == "help" || name == "version" {
            return Some(false);
        }
        cmd.get_arguments()
            .find(|a| a.get_long() == Some(name))
            .map(|a| a.get_action().takes_values())
    };
    let (mut kept, mut ignored) = (Vec::new(), Vec::new());
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let Some(flag) = arg.strip_prefix("--").filter(|f| !f.is_empty()) else {
            kept.push(arg.clone());
            continue;
        };
        let (name, inline) = flag
            .split_once('=')
            .map_or((flag, false), |(n, _)| (n, true));
        let next_is_value = !inline && args.get(i).is_some_and(|n| !n.starts_with('-'));
        match takes_value(name) {
            Some(true) => {
                kept.push(arg.clone());
                if !inline && let Some(value) = args.get(i) {
                    kept.push(value.clone());
                    i += 1;
                }
            }
            Some(false) => kept.push(arg.clone()),
            None => {
                ignored.push(format!("--{name}"));
                if next_is_value {
                    i += 1;
                }
            }
        }
    }
    (kept, ignored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn peers_and_prefixes_are_read_from_the_flags() {
        let names = [
            "identity-host",
            "region-ca-secret-name",
            "identity-ca-secret-namespace",
            "client-certificate-name",
            "audit-client-certificate-namespace",
            "spiffe-server-id",
        ];
        assert_eq!(declared(&names, &PEER_SUFFIXES), ["identity", "region"]);
        assert_eq!(declared(&names, &IDENTITY_SUFFIXES), ["audit-"]);
    }

    #[test]
    fn the_services_own_flags_are_set_aside_with_their_values() {
        let cmd = Command::new("t").arg(
            clap::Arg::new("known")
                .long("known")
                .action(clap::ArgAction::Set),
        );
        let args = strings(&[
            "--known",
            "v",
            "--own=1",
            "--flag",
            "value",
            "--switch",
            "--known=w",
        ]);
        let (kept, ignored) = keep_known(&cmd, &args);
        assert_eq!(kept, ["--known", "v", "--known=w"]);
        assert_eq!(ignored, ["--own", "--flag", "--switch"]);
    }

    #[test]
    fn a_typo_of_a_known_flag_is_found_and_other_flags_are_left_alone() {
        let cmd = Command::new("t")
            .arg(clap::Arg::new("chain-ca-secret").long("chain-ca-secret"))
            .arg(clap::Arg::new("output").long("output"))
            .arg(clap::Arg::new("region-ca-secret-name").long("region-ca-secret-name"));
        let typo = |name: &str| mistyped(&cmd, name, &[]);
        assert_eq!(typo("chain-ca-secrte").as_deref(), Some("chain-ca-secret"));
        assert_eq!(typo("chain-ca-secrt").as_deref(), Some("chain-ca-secret"));
        assert_eq!(typo("ouptut").as_deref(), Some("output"));
        assert_eq!(typo("verison").as_deref(), Some("version"));
        assert_eq!(
            typo("region-ca-secret-nmae").as_deref(),
            Some("region-ca-secret-name")
        );
        // Far from every known flag, too short to judge, another peer's flag, or
        // declared the service's own.
        assert_eq!(typo("metrics-bind-address"), None);
        assert_eq!(typo("chain-ca-sec"), None);
        assert_eq!(typo("outp"), None);
        assert_eq!(typo("regoin-ca-secret-name"), None);
        assert_eq!(
            mistyped(&cmd, "chain-ca-secrte", &["chain-ca-secrte".to_owned()]),
            None
        );
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("abcd", "abdc"), 1);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(
            service_flags(&strings(&[
                "--service-flags=--a, b",
                "--service-flags",
                "c"
            ])),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn json_is_seen_before_parsing() {
        assert!(wants_json(&strings(&["--output", "json"])));
        assert!(wants_json(&strings(&["--output=json"])));
        assert!(!wants_json(&strings(&["--output=human"])));
        assert_eq!(
            explicit_peers(&strings(&["--peers=a, b,"])),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
    }
}
