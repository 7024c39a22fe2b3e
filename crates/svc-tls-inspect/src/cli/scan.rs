//! Reading the arguments before clap does: which peers and prefixed identities they
//! declare, whether they ask for JSON, and which flags are the service's own (kept
//! out of the parse, reported by name).

use std::collections::BTreeSet;

use clap::Command;

pub(super) const PEER_SUFFIXES: [&str; 5] = [
    "-host",
    "-ca-secret-namespace",
    "-ca-secret-name",
    "-http2",
    "-pool-idle-timeout",
];
pub(super) const IDENTITY_SUFFIXES: [&str; 4] = [
    "client-certificate-source",
    "client-certificate-namespace",
    "client-certificate-name",
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
    Some(
        value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// The arguments `cmd` knows, and the names of the flags it does not.
pub(super) fn keep_known(cmd: &Command, args: &[String]) -> (Vec<String>, Vec<String>) {
    let takes_value = |name: &str| -> Option<bool> {
        if name == "help" {
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
