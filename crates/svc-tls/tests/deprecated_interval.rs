//! The deprecated `--client-certificate-reload-interval` as deployments pass it (issue
//! 34): the unprefixed flag parses and is reported as deprecated, as Go's
//! per-handshake generation (`MarkDeprecated`) does; the prefixed form, which no Go
//! generation registers, is refused as an unknown argument, as pflag refuses it.
//!
//! One test in its own process: the deprecation warning is logged once per process,
//! so another test parsing the flag first would take it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use clap::Command;
use svc_tls::duration::GoDuration;
use svc_tls::options::ClientIdentityOptions;
use svc_tls::origin::SecretRef;
use test_support::logs::CapturedLogs;

const WARNING: &str = "--client-certificate-reload-interval is deprecated and ignored";

/// The charts' command: the default identity (the mTLS helper's flags) and the audit
/// sink's prefixed identity (Go: `NewHTTPClientOptions("audit")`).
fn command() -> Command {
    let cmd = ClientIdentityOptions::augment(Command::new("svc"), None);
    ClientIdentityOptions::augment(cmd, Some("audit"))
}

fn args(extra: &[&str]) -> Vec<String> {
    [
        "svc",
        "--client-certificate-namespace=<ns>",
        "--client-certificate-name=<release>-client-certificate",
        "--audit-client-certificate-namespace=<ns>",
        "--audit-client-certificate-name=audit-client",
    ]
    .iter()
    .chain(extra)
    .map(|s| (*s).to_owned())
    .collect()
}

#[test]
fn unprefixed_parses_with_a_warning_and_prefixed_is_refused() {
    // Installed before anything can log.
    let captured = CapturedLogs::global();

    // The charts' render without the flag: nothing to report.
    let m = command().try_get_matches_from(args(&[])).unwrap();
    let opts = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(opts.deprecated_reload_interval(), None);
    assert_eq!(captured.text().matches(WARNING).count(), 0);

    // The prefixed form, which Go never registers: refused before any option is
    // read, and not reported as deprecated (it is not a flag here at all).
    for value in ["24h", "0", "-1s"] {
        let err = command()
            .try_get_matches_from(args(&[&format!(
                "--audit-client-certificate-reload-interval={value}"
            )]))
            .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::UnknownArgument,
            "{value}"
        );
        assert!(
            err.to_string()
                .contains("'--audit-client-certificate-reload-interval"),
            "{err}"
        );
    }
    assert_eq!(captured.text().matches(WARNING).count(), 0);

    // The unprefixed flag as deployments pass it: parsed, kept (with its value, for
    // nothing), ignored, and reported once at WARN.
    let m = command()
        .try_get_matches_from(args(&["--client-certificate-reload-interval=24h"]))
        .unwrap();
    let default = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(
        default.deprecated_reload_interval(),
        Some(GoDuration::from_secs(86_400))
    );
    assert_eq!(
        default.secret().unwrap(),
        Some(SecretRef::new("<ns>", "<release>-client-certificate"))
    );
    let audit = ClientIdentityOptions::from_matches(&m, Some("audit")).unwrap();
    assert_eq!(audit.deprecated_reload_interval(), None);
    assert_eq!(
        audit.secret().unwrap(),
        Some(SecretRef::new("<ns>", "audit-client"))
    );
    let logs = captured.text();
    let warnings: Vec<&str> = logs.lines().filter(|l| l.contains(WARNING)).collect();
    assert_eq!(warnings.len(), 1, "{logs}");
    assert!(warnings[0].contains("WARN"), "{logs}");
    assert!(
        warnings[0].contains("re-read on every TLS handshake"),
        "{logs}"
    );

    // Read again, and parsed again: still the one warning for the process (Go's pflag
    // prints its deprecation line each time the flag is parsed; docs/migration.md).
    ClientIdentityOptions::from_matches(&m, None).unwrap();
    let m = command()
        .try_get_matches_from(args(&["--client-certificate-reload-interval=-1s"]))
        .unwrap();
    assert_eq!(
        ClientIdentityOptions::from_matches(&m, None)
            .unwrap()
            .deprecated_reload_interval(),
        Some(GoDuration::from_secs(-1))
    );
    assert_eq!(captured.text().matches(WARNING).count(), 1);
}
