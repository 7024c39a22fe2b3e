//! The argument lists the platform's Helm charts render parse into the expected
//! configuration, and so do the problem values they are known to render (issue 17).
//! `<ns>`, `<release>` and `<name>` are literal test values, as in the issue.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use clap::{ArgAction, ArgMatches, Command};
use kube_testbed::Testbed;
use svc_tls::client::{PeerClientError, PeerTls};
use svc_tls::duration::GoDuration;
use svc_tls::options::{ClientIdentityOptions, HostError, HostProblem, HttpProtocol, PeerOptions};
use svc_tls::origin::SecretRef;
use test_support::logs::CapturedLogs;
use url::Url;

const PEERS: [&str; 5] = ["identity", "region", "kubernetes", "compute", "audit"];

/// A service command as the charts expect it: the five peers, the default identity
/// (the mTLS helper's flags) and a distinct identity towards `audit`.
fn command() -> Command {
    let mut cmd = Command::new("svc");
    for peer in PEERS {
        cmd = PeerOptions::augment(cmd, peer);
    }
    cmd = ClientIdentityOptions::augment(cmd, None);
    ClientIdentityOptions::augment(cmd, Some("audit"))
}

fn parse(args: &[String]) -> ArgMatches {
    command()
        .try_get_matches_from(std::iter::once("svc".to_owned()).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("{args:?} does not parse: {e}"))
}

/// What a service reads from its flags.
#[derive(Debug, PartialEq)]
struct Peer {
    host: Option<Url>,
    ca: Option<SecretRef>,
    protocol: HttpProtocol,
}

#[derive(Debug, PartialEq)]
struct Configuration {
    identity: Option<SecretRef>,
    audit_identity: Option<SecretRef>,
    peers: Vec<(&'static str, Peer)>,
}

fn configuration(m: &ArgMatches) -> Configuration {
    Configuration {
        identity: ClientIdentityOptions::from_matches(m, None)
            .unwrap()
            .secret()
            .unwrap(),
        audit_identity: ClientIdentityOptions::from_matches(m, Some("audit"))
            .unwrap()
            .secret()
            .unwrap(),
        peers: PEERS
            .iter()
            .map(|&service| {
                let peer = PeerOptions::from_matches(m, service).unwrap();
                (
                    service,
                    Peer {
                        host: peer.host().unwrap(),
                        ca: peer.ca_secret().unwrap(),
                        protocol: peer.http_protocol(),
                    },
                )
            })
            .collect(),
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn mtls_helper() -> Vec<String> {
    strings(&[
        "--client-certificate-namespace=<ns>",
        "--client-certificate-name=<release>-client-certificate",
    ])
}

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

/// The mTLS helper, and each of identity, region, kubernetes and compute with and
/// without its optional CA flags.
#[test]
fn peers_with_and_without_ca_flags() {
    for with_ca in [false, true] {
        let mut args = mtls_helper();
        for peer in ["identity", "region", "kubernetes", "compute"] {
            args.push(format!("--{peer}-host=https://{peer}.example"));
            if with_ca {
                args.push(format!("--{peer}-ca-secret-namespace=<ns>"));
                args.push(format!("--{peer}-ca-secret-name=<name>"));
            }
        }
        let peer = |service: &str| Peer {
            host: Some(url(&format!("https://{service}.example"))),
            ca: with_ca.then(|| SecretRef::new("<ns>", "<name>")),
            protocol: HttpProtocol::Http1Only,
        };
        assert_eq!(
            configuration(&parse(&args)),
            Configuration {
                identity: Some(SecretRef::new("<ns>", "<release>-client-certificate")),
                audit_identity: None,
                peers: vec![
                    ("identity", peer("identity")),
                    ("region", peer("region")),
                    ("kubernetes", peer("kubernetes")),
                    ("compute", peer("compute")),
                    (
                        "audit",
                        Peer {
                            host: None,
                            ca: None,
                            protocol: HttpProtocol::Http1Only
                        }
                    ),
                ],
            },
            "with CA flags: {with_ca}"
        );
    }
}

/// Audit: its host, its CA, and a prefixed identity of its own beside the default one.
#[test]
fn audit_with_a_prefixed_identity() {
    let mut args = mtls_helper();
    args.extend(strings(&[
        "--identity-host=https://identity.example",
        "--audit-host=https://audit.example",
        "--audit-ca-secret-namespace=<ns>",
        "--audit-ca-secret-name=<name>",
        "--audit-client-certificate-namespace=<ns>",
        "--audit-client-certificate-name=<release>-audit-client-certificate",
    ]));
    let m = parse(&args);
    let config = configuration(&m);
    assert_eq!(
        config.identity,
        Some(SecretRef::new("<ns>", "<release>-client-certificate"))
    );
    assert_eq!(
        config.audit_identity,
        Some(SecretRef::new("<ns>", "<release>-audit-client-certificate"))
    );
    assert_eq!(
        config.peers[4],
        (
            "audit",
            Peer {
                host: Some(url("https://audit.example")),
                ca: Some(SecretRef::new("<ns>", "<name>")),
                protocol: HttpProtocol::Http1Only,
            }
        )
    );
    assert_eq!(
        config.peers[0].1.host,
        Some(url("https://identity.example"))
    );
    for (service, peer) in &config.peers[1..4] {
        assert_eq!(peer.host, None, "{service}");
    }
}

/// `--identity-host=`: parses; the peer is not configured (Go: `Host() == ""`).
#[test]
fn empty_host_means_not_configured() {
    for args in [
        strings(&["--identity-host="]),
        strings(&["--identity-host", ""]),
        strings(&["--audit-host="]),
    ] {
        let m = parse(&args);
        for service in ["identity", "audit"] {
            let peer = PeerOptions::from_matches(&m, service).unwrap();
            assert!(!peer.is_configured(), "{args:?}");
            assert_eq!(peer.host_value(), None);
            assert_eq!(peer.host(), Ok(None));
            let err = peer.require_host().unwrap_err();
            assert_eq!(
                err,
                HostError::NotConfigured {
                    flag: format!("{service}-host")
                }
            );
            assert_eq!(
                err.to_string(),
                format!("--{service}-host is not configured (not given, or given empty)")
            );
        }
    }
}

/// The problem host values parse, and are typed errors naming the flag and quoting
/// the value when used.
#[test]
fn problem_hosts_parse_and_fail_when_used() {
    let cases: [(&str, &str, HostProblem, &str); 5] = [
        (
            "identity",
            "https://",
            HostProblem::MissingHost,
            r#"--identity-host="https://" is not a usable URL: the host is missing"#,
        ),
        (
            "audit",
            "collector:443",
            HostProblem::MissingScheme {
                bare_host_port: true,
            },
            r#"--audit-host="collector:443" is not a usable URL: the scheme is missing (a bare host:port is not a URL, and no scheme is guessed"#,
        ),
        (
            "region",
            "region.example",
            HostProblem::MissingScheme {
                bare_host_port: false,
            },
            r#"--region-host="region.example" is not a usable URL: the scheme is missing"#,
        ),
        (
            "compute",
            "ftp://compute.example",
            HostProblem::UnsupportedScheme {
                scheme: "ftp".into(),
            },
            r#"--compute-host="ftp://compute.example" is not a usable URL: the scheme "ftp" is not supported"#,
        ),
        (
            "kubernetes",
            "https://[::1",
            HostProblem::NotAUrl {
                reason: "invalid IPv6 address".into(),
            },
            r#"--kubernetes-host="https://[::1" is not a usable URL: not a URL: invalid IPv6 address"#,
        ),
    ];
    for (service, value, problem, message) in cases {
        let m = parse(&[format!("--{service}-host={value}")]);
        let peer = PeerOptions::from_matches(&m, service).unwrap();
        assert!(peer.is_configured());
        assert_eq!(peer.host_value(), Some(value));
        let err = peer.host().unwrap_err();
        assert_eq!(
            err,
            HostError::Invalid {
                flag: format!("{service}-host"),
                value: value.to_owned(),
                problem,
            }
        );
        assert!(err.to_string().starts_with(message), "{err}");
    }
}

/// The WARN lines captured for one `--S-host` flag.
fn host_warnings(captured: &CapturedLogs, flag: &str) -> Vec<String> {
    captured
        .text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(&format!("--{flag}=")))
        .map(str::to_owned)
        .collect()
}

/// A service that builds all its peer clients at start-up, then runs (builds clients
/// per reconcile and asks each peer for its URL), with the values charts render:
/// `--identity-host=https://` (host value missing), a bare `--audit-host=collector:443`
/// and an empty `--region-host=`. Every client builds, as the Go binary starts; each
/// unusable value is one WARN at start-up naming the flag and quoting the value; the
/// URL is the typed error when asked for, as an empty value is "not configured".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_with_rendered_hosts_starts_and_runs() {
    let captured = CapturedLogs::global().clone();
    let tb = Testbed::start().await;
    let me = ClientIdentityOptions::new(None);
    let timeout = Duration::from_secs(10);

    let m = parse(&strings(&[
        "--identity-host=https://",
        "--audit-host=collector:443",
        "--region-host=",
        "--compute-host=https://compute.example/api/",
    ]));
    let peers: Vec<PeerOptions> = PEERS
        .iter()
        .map(|service| PeerOptions::from_matches(&m, service).unwrap())
        .collect();

    // Start-up: every peer client is built.
    let mut clients = Vec::new();
    for peer in &peers {
        let tls = PeerTls::from_options(&tb.cluster_client(), peer, &me, timeout)
            .await
            .unwrap_or_else(|e| panic!("--{}-host stopped start-up: {e}", peer.service()));
        clients.push(tls);
    }

    // Run: clients per "reconcile", URLs asked for.
    for _reconcile in 0..3 {
        for (peer, tls) in peers.iter().zip(&clients) {
            tls.reqwest_client().unwrap();
            let again = PeerTls::from_options(&tb.cluster_client(), peer, &me, timeout)
                .await
                .unwrap();
            assert_eq!(again.host(), tls.host(), "{}", peer.service());
        }
    }

    let client = |service: &str| &clients[PEERS.iter().position(|p| *p == service).unwrap()];
    for (service, value, problem) in [
        ("identity", "https://", HostProblem::MissingHost),
        (
            "audit",
            "collector:443",
            HostProblem::MissingScheme {
                bare_host_port: true,
            },
        ),
    ] {
        let tls = client(service);
        let err = tls.host().unwrap_err();
        assert_eq!(
            err,
            HostError::Invalid {
                flag: format!("{service}-host"),
                value: value.to_owned(),
                problem,
            }
        );
        // `?` into the client's error keeps the flag and the quoted value.
        let err = PeerClientError::from(err);
        assert!(
            err.to_string()
                .starts_with(&format!("--{service}-host={value:?} is not a usable URL")),
            "{err}"
        );
        let warnings = host_warnings(&captured, &format!("{service}-host"));
        assert_eq!(warnings.len(), 1, "one WARN at start-up: {warnings:#?}");
        assert!(
            warnings[0].contains(&format!("--{service}-host={value:?}")),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].contains("client is built anyway"),
            "{}",
            warnings[0]
        );
    }

    // Empty and absent: "not configured", and nothing logged.
    for service in ["region", "kubernetes"] {
        let tls = client(service);
        assert_eq!(
            tls.host().unwrap_err(),
            HostError::NotConfigured {
                flag: format!("{service}-host")
            }
        );
        assert_eq!(
            host_warnings(&captured, &format!("{service}-host")),
            Vec::<String>::new()
        );
    }

    // A usable value is the URL, and nothing logged.
    let compute = client("compute");
    assert_eq!(
        compute.host().unwrap().join("v1/regions").unwrap().as_str(),
        "https://compute.example/api/v1/regions"
    );
    assert_eq!(
        host_warnings(&captured, "compute-host"),
        Vec::<String>::new()
    );
}

/// `--client-certificate-reload-interval=-1s` and `=0`: the Go timer's "disable"
/// values start the service; the flag stays an ignored no-op.
#[test]
fn disabling_reload_intervals_are_accepted() {
    for value in ["-1s", "0"] {
        let mut args = mtls_helper();
        args.push(format!("--client-certificate-reload-interval={value}"));
        let m = parse(&args);
        let want = if value == "0" {
            GoDuration::ZERO
        } else {
            GoDuration::from_secs(-1)
        };
        let opts = ClientIdentityOptions::from_matches(&m, None).unwrap();
        assert_eq!(opts.deprecated_reload_interval(), Some(want), "{value}");
        assert_eq!(
            configuration(&m).identity,
            Some(SecretRef::new("<ns>", "<release>-client-certificate"))
        );
    }
}

/// The prefixed interval (`--audit-client-certificate-reload-interval`) is refused
/// as an unknown argument, as Go's pflag refuses it: the per-handshake generation
/// registers the deprecated interval for the unprefixed options only, so no chart
/// renders the prefixed form and no Go binary starts with it
/// (docs/decisions/prefixed-identity-has-no-reload-interval.md).
#[test]
fn the_prefixed_reload_interval_is_refused_as_go_refuses_it() {
    for value in ["24h", "-1s", "0"] {
        let mut args = mtls_helper();
        args.push(format!(
            "--audit-client-certificate-reload-interval={value}"
        ));
        let err = command()
            .try_get_matches_from(std::iter::once("svc".to_owned()).chain(args))
            .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::UnknownArgument,
            "{value}"
        );
    }
    // The audit identity itself, as the audit helper renders it, still parses.
    let mut args = mtls_helper();
    args.push("--audit-client-certificate-namespace=<ns>".to_owned());
    args.push("--audit-client-certificate-name=<name>".to_owned());
    assert_eq!(
        configuration(&parse(&args)).audit_identity,
        Some(SecretRef::new("<ns>", "<name>"))
    );
}

/// A flag given twice keeps its last value, for every flag these options define.
#[test]
fn every_repeated_flag_keeps_its_last_value() {
    let cmd = command();
    let mut checked = 0;
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if matches!(arg.get_action(), ArgAction::Help | ArgAction::Version) {
            continue;
        }
        let (args, want): (Vec<String>, &str) = match arg.get_action() {
            ArgAction::SetTrue => (vec![format!("--{long}"), format!("--{long}")], "true"),
            _ if long.ends_with("-interval") || long.ends_with("-timeout") => {
                (vec![format!("--{long}=1s"), format!("--{long}=2s")], "2s")
            }
            _ if long.ends_with("-host") => (
                vec![
                    format!("--{long}=https://first.example"),
                    format!("--{long}=https://second.example"),
                ],
                "https://second.example",
            ),
            _ => (
                vec![
                    format!("--{long}=first"),
                    format!("--{long}"),
                    "second".into(),
                ],
                "second",
            ),
        };
        let m = command()
            .try_get_matches_from(std::iter::once("svc".to_owned()).chain(args.clone()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let raw: Vec<_> = m
            .get_raw(arg.get_id().as_str())
            .unwrap()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        assert_eq!(raw, vec![want.to_owned()], "{args:?}");
        checked += 1;
    }
    // 11 flags per peer (host, CA Secret namespace and name, CA ConfigMap namespace,
    // name and key, CA file, ClusterTrustBundle signer and selector, http2, pool idle
    // timeout), 6 per identity (source, namespace, name, SPIFFE server ID, files'
    // directory and layout), and the unprefixed identity's deprecated reload interval.
    assert_eq!(checked, 11 * PEERS.len() + 6 * 2 + 1);

    // And through the typed accessors.
    let m = parse(&strings(&[
        "--identity-host=https://old.example",
        "--identity-host=https://identity.example",
        "--client-certificate-name=old",
        "--client-certificate-namespace=<ns>",
        "--client-certificate-name=<release>-client-certificate",
        "--client-certificate-reload-interval=24h",
        "--client-certificate-reload-interval=-1s",
    ]));
    let config = configuration(&m);
    assert_eq!(
        config.peers[0].1.host,
        Some(url("https://identity.example"))
    );
    assert_eq!(
        config.identity,
        Some(SecretRef::new("<ns>", "<release>-client-certificate"))
    );
    assert_eq!(
        ClientIdentityOptions::from_matches(&m, None)
            .unwrap()
            .deprecated_reload_interval(),
        Some(GoDuration::from_secs(-1))
    );
}
