//! `svc_tls::options`: the deployed flag names, several option sets in one
//! command, the one rule for Secret references, the deprecated interval.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use clap::Command;
use svc_tls::duration::GoDuration;
use svc_tls::options::{ClientIdentityOptions, HostError, HostProblem, OptionsError, PeerOptions};
use svc_tls::origin::SecretRef;

/// A service command as a Unikorn service declares it: three peers, the default
/// identity, and a distinct identity towards `region`.
fn command() -> Command {
    let mut cmd = Command::new("svc").arg(
        clap::Arg::new("namespace")
            .long("namespace")
            .help("a flag of the service itself"),
    );
    for peer in ["identity", "region", "kubernetes"] {
        cmd = PeerOptions::augment(cmd, peer);
    }
    cmd = ClientIdentityOptions::augment(cmd, None);
    ClientIdentityOptions::augment(cmd, Some("region"))
}

fn parse(args: &[&str]) -> clap::ArgMatches {
    command()
        .try_get_matches_from(std::iter::once("svc").chain(args.iter().copied()))
        .unwrap()
}

#[test]
fn command_with_several_sets_is_consistent() {
    command().debug_assert();
}

#[test]
fn several_sets_parse_independently() {
    let m = parse(&[
        "--identity-host=https://identity.example.com",
        "--identity-ca-secret-namespace=unikorn",
        "--identity-ca-secret-name=unikorn-ca",
        "--region-host",
        "https://region.example.com:8443/api",
        "--client-certificate-namespace=unikorn-region",
        "--client-certificate-name=unikorn-region-client-certificate",
        "--region-client-certificate-namespace=other",
        "--region-client-certificate-name=other-cert",
        "--namespace=ns",
    ]);

    let identity = PeerOptions::from_matches(&m, "identity").unwrap();
    assert_eq!(identity.service(), "identity");
    assert_eq!(
        identity.host().unwrap().unwrap().as_str(),
        "https://identity.example.com/"
    );
    assert_eq!(
        identity.ca_secret().unwrap(),
        Some(SecretRef::new("unikorn", "unikorn-ca"))
    );

    let region = PeerOptions::from_matches(&m, "region").unwrap();
    assert_eq!(region.host().unwrap().unwrap().port(), Some(8443));
    assert_eq!(region.ca_secret().unwrap(), None);

    let kubernetes = PeerOptions::from_matches(&m, "kubernetes").unwrap();
    assert_eq!(kubernetes.host(), Ok(None));
    assert!(!kubernetes.is_configured());
    assert_eq!(
        kubernetes.require_host().unwrap_err(),
        HostError::NotConfigured {
            flag: "kubernetes-host".into()
        }
    );
    assert_eq!(kubernetes.ca_secret().unwrap(), None);

    let default = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(default.prefix(), None);
    let secret = default.secret().unwrap().unwrap();
    assert_eq!(
        secret,
        SecretRef::new("unikorn-region", "unikorn-region-client-certificate")
    );
    assert_eq!(
        secret.to_string(),
        "unikorn-region/unikorn-region-client-certificate"
    );

    let towards_region = ClientIdentityOptions::from_matches(&m, Some("region")).unwrap();
    assert_eq!(towards_region.prefix(), Some("region"));
    assert_eq!(
        towards_region.secret().unwrap(),
        Some(SecretRef::new("other", "other-cert"))
    );
    assert_eq!(m.get_one::<String>("namespace").unwrap(), "ns");
}

#[test]
fn nothing_set_means_no_references() {
    let m = parse(&[]);
    assert_eq!(
        ClientIdentityOptions::from_matches(&m, None)
            .unwrap()
            .secret()
            .unwrap(),
        None
    );
    assert_eq!(
        PeerOptions::from_matches(&m, "identity")
            .unwrap()
            .ca_secret()
            .unwrap(),
        None
    );
}

#[test]
fn half_set_references_name_the_missing_flag() {
    let cases: [(&[&str], &str, &str); 6] = [
        (
            &["--identity-ca-secret-name=unikorn-ca"],
            "identity-ca-secret-name",
            "identity-ca-secret-namespace",
        ),
        (
            &["--identity-ca-secret-namespace=unikorn"],
            "identity-ca-secret-namespace",
            "identity-ca-secret-name",
        ),
        (
            &["--client-certificate-namespace=unikorn"],
            "client-certificate-namespace",
            "client-certificate-name",
        ),
        (
            &["--client-certificate-name=cert"],
            "client-certificate-name",
            "client-certificate-namespace",
        ),
        (
            &["--region-client-certificate-name=cert"],
            "region-client-certificate-name",
            "region-client-certificate-namespace",
        ),
        // An empty value counts as unset (Helm renders unset values as `--flag=`).
        (
            &[
                "--client-certificate-namespace=",
                "--client-certificate-name=cert",
            ],
            "client-certificate-name",
            "client-certificate-namespace",
        ),
    ];
    for (args, set, missing) in cases {
        let m = parse(args);
        let err = if set.contains("ca-secret") {
            PeerOptions::from_matches(&m, "identity")
                .unwrap()
                .ca_secret()
                .unwrap_err()
        } else {
            let prefix = set
                .strip_suffix("client-certificate-name")
                .map_or_else(|| set.strip_suffix("client-certificate-namespace"), Some);
            let prefix = prefix.and_then(|p| p.strip_suffix('-'));
            ClientIdentityOptions::from_matches(&m, prefix)
                .unwrap()
                .secret()
                .unwrap_err()
        };
        assert_eq!(
            err,
            OptionsError::HalfSetReference {
                set: set.into(),
                missing: missing.into()
            },
            "{args:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&format!("--{missing} is not")), "{msg}");
    }
}

/// As pflag: any host value parses; the check comes when the value is used, and
/// names the flag and quotes the value.
#[test]
fn invalid_host_parses_and_fails_when_used_naming_the_flag() {
    let m = parse(&["--identity-host=identity.example.com"]);
    let identity = PeerOptions::from_matches(&m, "identity").unwrap();
    assert!(identity.is_configured());
    assert_eq!(identity.host_value(), Some("identity.example.com"));
    let err = identity.host().unwrap_err();
    assert_eq!(
        err,
        HostError::Invalid {
            flag: "identity-host".into(),
            value: "identity.example.com".into(),
            problem: HostProblem::MissingScheme {
                bare_host_port: false
            },
        }
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            r#"--identity-host="identity.example.com" is not a usable URL: the scheme is missing"#
        ),
        "{msg}"
    );
    assert_eq!(identity.require_host().unwrap_err(), err);
}

#[test]
fn help_names_the_service() {
    let help = command().render_long_help().to_string();
    for needle in [
        "--identity-host <URL>",
        "Base URL of the identity service",
        "the region service's certificate",
        "--client-certificate-namespace <NAMESPACE>",
        "--region-client-certificate-name <NAME>",
        "presented to the region service",
        "Deprecated and ignored",
    ] {
        assert!(help.contains(needle), "{needle:?} not in\n{help}");
    }
}

/// Go's per-handshake generation registers the deprecated interval for the unprefixed
/// options only (`NewHTTPClientOptions(service)` would redefine it, which pflag panics
/// on), so Go refuses `--P-client-certificate-reload-interval` as an unknown flag. We
/// refuse it too (docs/decisions/prefixed-identity-has-no-reload-interval.md); the
/// prefixed identity's other flags still parse.
/// The warning for the unprefixed flag is checked in `tests/deprecated_interval.rs`, a
/// process of its own (the warning is once per process).
#[test]
fn the_reload_interval_is_unprefixed_only() {
    assert_eq!(
        ClientIdentityOptions::reload_interval_flag(None).as_deref(),
        Some("client-certificate-reload-interval")
    );
    assert_eq!(
        ClientIdentityOptions::reload_interval_flag(Some("")).as_deref(),
        Some("client-certificate-reload-interval")
    );
    assert_eq!(
        ClientIdentityOptions::reload_interval_flag(Some("region")),
        None
    );

    for value in ["24h", "1h30m", "-1s", "0"] {
        let err = command()
            .try_get_matches_from([
                "svc".to_owned(),
                format!("--region-client-certificate-reload-interval={value}"),
            ])
            .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::UnknownArgument,
            "{value}"
        );
        assert!(
            err.to_string()
                .contains("--region-client-certificate-reload-interval"),
            "{err}"
        );
    }

    // Both sets in one command: the unprefixed interval parses, the prefixed identity
    // reads no interval.
    let m = parse(&[
        "--client-certificate-reload-interval=1h30m",
        "--region-client-certificate-namespace=ns",
        "--region-client-certificate-name=cert",
    ]);
    let default = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(
        default.deprecated_reload_interval(),
        Some(GoDuration::from_secs(5400))
    );
    let region = ClientIdentityOptions::from_matches(&m, Some("region")).unwrap();
    assert_eq!(region.deprecated_reload_interval(), None);
    assert_eq!(region.secret().unwrap(), Some(SecretRef::new("ns", "cert")));

    // The prefixed set alone has no interval flag at all.
    let prefixed_only = ClientIdentityOptions::augment(Command::new("svc"), Some("audit"));
    assert!(
        !prefixed_only
            .get_arguments()
            .any(|a| a.get_long().is_some_and(|l| l.ends_with("reload-interval"))),
        "a prefixed identity registers a reload interval"
    );
    let unprefixed = ClientIdentityOptions::augment(Command::new("svc"), None);
    assert!(
        unprefixed
            .get_arguments()
            .any(|a| a.get_long() == Some("client-certificate-reload-interval")),
        "the unprefixed identity lost its reload interval"
    );
}

#[test]
fn deprecated_reload_interval_takes_go_durations_and_rejects_garbage() {
    for (value, want) in [
        ("24h", 86_400),
        ("30m", 1_800),
        ("1.5h", 5_400),
        ("0", 0),
        ("-1s", -1),
        ("+5m", 300),
    ] {
        let m = parse(&[&format!("--client-certificate-reload-interval={value}")]);
        let opts = ClientIdentityOptions::from_matches(&m, None).unwrap();
        assert_eq!(
            opts.deprecated_reload_interval(),
            Some(GoDuration::from_secs(want))
        );
    }
    // The word after the flag is its value, even when it starts with `-` (pflag).
    let m = parse(&["--client-certificate-reload-interval", "-1s"]);
    let opts = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(
        opts.deprecated_reload_interval(),
        Some(GoDuration::from_secs(-1))
    );
    // Not given: nothing to report.
    let opts = ClientIdentityOptions::from_matches(&parse(&[]), None).unwrap();
    assert_eq!(opts.deprecated_reload_interval(), None);

    let err = command()
        .try_get_matches_from(["svc", "--client-certificate-reload-interval=daily"])
        .unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(
        err.to_string()
            .contains("--client-certificate-reload-interval"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(r#"time: invalid duration "daily""#),
        "{err}"
    );
}

/// clap validates argument ids only in debug builds.
#[cfg(debug_assertions)]
#[test]
fn reading_options_that_were_not_added_is_an_error_not_a_panic() {
    let m = Command::new("svc").try_get_matches_from(["svc"]).unwrap();
    let err = PeerOptions::from_matches(&m, "identity").unwrap_err();
    assert!(
        matches!(&err, OptionsError::NotDefined { flag, .. } if flag == "identity-host"),
        "{err:?}"
    );
}

#[test]
fn options_built_in_code_follow_the_same_rule() {
    let peer = PeerOptions::new("identity").with_ca_secret("", "ca");
    assert_eq!(
        peer.ca_secret().unwrap_err(),
        OptionsError::HalfSetReference {
            set: "identity-ca-secret-name".into(),
            missing: "identity-ca-secret-namespace".into()
        }
    );
    let id = ClientIdentityOptions::new(Some("")).with_secret("ns", "name");
    assert_eq!(id.prefix(), None);
    assert_eq!(id.secret().unwrap(), Some(SecretRef::new("ns", "name")));
}

// ---------------------------------------------------------------------------------
// The credential source: --[P-]client-certificate-source and --[P-]spiffe-server-id.

fn identity_of(args: &[&str], prefix: Option<&str>) -> Result<ClientIdentityOptions, OptionsError> {
    ClientIdentityOptions::from_matches(&parse(args), prefix)
}

#[test]
fn the_source_defaults_to_secret_and_empty_counts_as_unset() {
    use svc_tls::options::ClientCertificateSource;
    for args in [
        &[][..],
        &["--client-certificate-source="][..],
        &["--client-certificate-source=secret"][..],
    ] {
        let options = identity_of(args, None).unwrap();
        assert_eq!(
            options.source(),
            ClientCertificateSource::Secret,
            "{args:?}"
        );
        assert_eq!(options.spiffe_server_id(), None);
    }
}

#[test]
fn spiffe_mode_takes_the_server_id_with_and_without_a_prefix() {
    use svc_tls::options::ClientCertificateSource;
    let options = identity_of(
        &[
            "--client-certificate-source=spiffe",
            "--spiffe-server-id=spiffe://example.org/ns/unikorn/sa/identity",
        ],
        None,
    )
    .unwrap();
    assert_eq!(options.source(), ClientCertificateSource::Spiffe);
    assert_eq!(
        options.spiffe_server_id().unwrap().to_string(),
        "spiffe://example.org/ns/unikorn/sa/identity"
    );
    assert_eq!(options.secret().unwrap(), None);

    // The prefixed set is independent: the default identity stays on its Secret.
    let m = parse(&[
        "--region-client-certificate-source=spiffe",
        "--region-spiffe-server-id=spiffe://example.org/region",
        "--client-certificate-namespace=unikorn",
        "--client-certificate-name=cert",
    ]);
    let region = ClientIdentityOptions::from_matches(&m, Some("region")).unwrap();
    assert_eq!(region.source(), ClientCertificateSource::Spiffe);
    assert_eq!(
        region.spiffe_server_id().unwrap().to_string(),
        "spiffe://example.org/region"
    );
    let default = ClientIdentityOptions::from_matches(&m, None).unwrap();
    assert_eq!(default.source(), ClientCertificateSource::Secret);
    assert_eq!(
        default.secret().unwrap(),
        Some(SecretRef::new("unikorn", "cert"))
    );
}

#[test]
fn an_unknown_source_names_the_flag_and_the_value() {
    for (args, prefix, flag) in [
        (
            &["--client-certificate-source=vault"][..],
            None,
            "client-certificate-source",
        ),
        (
            &["--client-certificate-source=SPIFFE"][..],
            None,
            "client-certificate-source",
        ),
        (
            &["--region-client-certificate-source=files"][..],
            Some("region"),
            "region-client-certificate-source",
        ),
    ] {
        let err = identity_of(args, prefix).unwrap_err();
        let value = args[0].split_once('=').unwrap().1;
        assert_eq!(
            err,
            OptionsError::InvalidValue {
                flag: flag.to_owned(),
                value: value.to_owned(),
                expected: "secret, spiffe, file"
            }
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("--{flag}")) && text.contains(value),
            "{text}"
        );
    }
}

#[test]
fn spiffe_mode_needs_a_server_id_that_parses() {
    let err = identity_of(&["--client-certificate-source=spiffe"], None).unwrap_err();
    assert_eq!(
        err,
        OptionsError::MissingSpiffeServerId {
            flag: "spiffe-server-id".to_owned(),
            source_flag: "client-certificate-source".to_owned()
        }
    );
    assert!(
        err.to_string().contains("--spiffe-server-id is required"),
        "{err}"
    );
    // Rendered empty by a chart: still missing.
    let err = identity_of(
        &["--client-certificate-source=spiffe", "--spiffe-server-id="],
        None,
    )
    .unwrap_err();
    assert!(
        matches!(err, OptionsError::MissingSpiffeServerId { .. }),
        "{err:?}"
    );

    for bad in [
        "example.org/identity",
        "https://example.org/identity",
        "spiffe://",
        "spiffe://example.org/identity/",
        "spiffe://example.org/a//b",
    ] {
        let err = identity_of(
            &[
                "--client-certificate-source=spiffe",
                &format!("--spiffe-server-id={bad}"),
            ],
            None,
        )
        .unwrap_err();
        match &err {
            OptionsError::InvalidSpiffeId {
                flag,
                value,
                reason,
            } => {
                assert_eq!(flag, "spiffe-server-id");
                assert_eq!(value, bad);
                assert!(!reason.is_empty());
            }
            other => panic!("{bad}: {other:?}"),
        }
        assert!(err.to_string().contains("is not a SPIFFE ID"), "{err}");
    }
}

#[test]
fn spiffe_mode_with_a_secret_flag_says_set_one_or_the_other() {
    for (secret_flag, value) in [
        ("client-certificate-name", "cert"),
        ("client-certificate-namespace", "unikorn"),
    ] {
        let err = identity_of(
            &[
                "--client-certificate-source=spiffe",
                "--spiffe-server-id=spiffe://example.org/identity",
                &format!("--{secret_flag}={value}"),
            ],
            None,
        )
        .unwrap_err();
        assert_eq!(
            err,
            OptionsError::SourceConflict {
                source_flag: "client-certificate-source".to_owned(),
                secret_flag: secret_flag.to_owned()
            }
        );
        assert!(err.to_string().contains("set one or the other"), "{err}");
    }
    // Empty Secret flags (as charts render unset values) are no conflict.
    identity_of(
        &[
            "--client-certificate-source=spiffe",
            "--spiffe-server-id=spiffe://example.org/identity",
            "--client-certificate-name=",
            "--client-certificate-namespace=",
        ],
        None,
    )
    .unwrap();
}
