//! A clap-derive service flattens the option sets (`#[command(flatten)]`) and parses
//! the argument lists the platform's Helm charts render exactly as a builder-API
//! service does: the same flags, the same values, the same errors (issue 42).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use svc_tls::duration::GoDuration;
use svc_tls::options::{
    ClientIdentityOptions, HttpProtocol, IdentityArgs, PeerArgs, PeerOptions, peers,
};
use svc_tls::origin::SecretRef;

/// Two prefixed peers, the unprefixed identity, and a prefixed identity towards one
/// of the peers, as a clap-derive service declares them.
#[derive(Parser, Debug)]
#[command(name = "svc")]
struct Cli {
    #[command(flatten)]
    identity: PeerArgs<peers::Identity>,
    #[command(flatten)]
    region: PeerArgs<peers::Region>,
    #[command(flatten)]
    me: ClientIdentityOptions,
    #[command(flatten)]
    me_towards_region: IdentityArgs<peers::Region>,
    /// A flag of the service's own, beside ours.
    #[arg(long, default_value = "migrated-service")]
    actor: String,
}

/// The same service with the builder API, as services are written today.
fn builder_command() -> clap::Command {
    let cmd = clap::Command::new("svc").arg(
        clap::Arg::new("actor")
            .long("actor")
            .default_value("migrated-service"),
    );
    let cmd = PeerOptions::augment(cmd, "identity");
    let cmd = PeerOptions::augment(cmd, "region");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    ClientIdentityOptions::augment(cmd, Some("region"))
}

/// What the builder service reads from `args`, or the kind of its parse error.
#[derive(Debug, PartialEq)]
struct Read {
    identity: PeerOptions,
    region: PeerOptions,
    me: ClientIdentityOptions,
    me_towards_region: ClientIdentityOptions,
}

fn argv(args: &[&str]) -> Vec<String> {
    std::iter::once("svc")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect()
}

fn by_builder(args: &[&str]) -> Result<Read, ErrorKind> {
    let m = builder_command()
        .try_get_matches_from(argv(args))
        .map_err(|e| e.kind())?;
    let to_kind = |_| ErrorKind::ValueValidation;
    Ok(Read {
        identity: PeerOptions::from_matches(&m, "identity").map_err(to_kind)?,
        region: PeerOptions::from_matches(&m, "region").map_err(to_kind)?,
        me: ClientIdentityOptions::from_matches(&m, None).map_err(to_kind)?,
        me_towards_region: ClientIdentityOptions::from_matches(&m, Some("region"))
            .map_err(to_kind)?,
    })
}

fn by_derive(args: &[&str]) -> Result<Read, ErrorKind> {
    let cli = Cli::try_parse_from(argv(args)).map_err(|e| e.kind())?;
    assert_eq!(cli.actor, "migrated-service");
    Ok(Read {
        identity: cli.identity.into_inner(),
        region: cli.region.into_inner(),
        me: cli.me,
        me_towards_region: cli.me_towards_region.into_inner(),
    })
}

/// The renders of the platform's charts (the cases of `deployed_renders.rs`), each
/// read alike by both services.
#[test]
fn a_derive_service_parses_the_deployed_renders_as_the_builder_service() {
    let renders: &[&[&str]] = &[
        // The mTLS helper alone.
        &[
            "--client-certificate-namespace=<ns>",
            "--client-certificate-name=<release>-client-certificate",
        ],
        // Peers with and without their CA flags.
        &[
            "--client-certificate-namespace=<ns>",
            "--client-certificate-name=<release>-client-certificate",
            "--identity-host=https://identity.example",
            "--region-host=https://region.example",
            "--region-ca-secret-namespace=<ns>",
            "--region-ca-secret-name=<name>",
        ],
        // A prefixed identity beside the default one.
        &[
            "--client-certificate-namespace=<ns>",
            "--client-certificate-name=<release>-client-certificate",
            "--region-host=https://region.example",
            "--region-client-certificate-namespace=<ns>",
            "--region-client-certificate-name=<release>-region-client-certificate",
        ],
        // Empty and problem hosts: parse, fail when used.
        &["--identity-host=", "--region-host", ""],
        &["--identity-host=https://", "--region-host=collector:443"],
        // The deprecated interval with Go's disabling values.
        &["--client-certificate-reload-interval=-1s"],
        &["--client-certificate-reload-interval", "0"],
        // A ConfigMap CA, HTTP/2, an idle timeout.
        &[
            "--region-host=https://region.example",
            "--region-ca-configmap-namespace=<ns>",
            "--region-ca-configmap-name=trust",
            "--region-ca-configmap-key=trust-bundle.pem",
            "--region-http2",
            "--region-pool-idle-timeout=5s",
        ],
        // SPIFFE mode.
        &[
            "--client-certificate-source=spiffe",
            "--spiffe-server-id=spiffe://example.org/ns/unikorn/sa/identity",
        ],
        // Repeated flags keep their last value.
        &[
            "--identity-host=https://old.example",
            "--identity-host=https://identity.example",
            "--client-certificate-name=old",
            "--client-certificate-name=<release>-client-certificate",
            "--client-certificate-namespace=<ns>",
        ],
        // Nothing at all.
        &[],
    ];
    for args in renders {
        let builder = by_builder(args).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
        let derive = by_derive(args).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
        assert_eq!(derive, builder, "{args:?}");
    }

    // What those reads say, for two of them.
    let read = by_derive(renders[1]).unwrap();
    assert_eq!(
        read.me.secret().unwrap(),
        Some(SecretRef::new("<ns>", "<release>-client-certificate"))
    );
    assert_eq!(
        read.region.ca_secret().unwrap(),
        Some(SecretRef::new("<ns>", "<name>"))
    );
    assert_eq!(read.identity.ca_secret().unwrap(), None);
    assert_eq!(
        read.identity.host().unwrap().unwrap().as_str(),
        "https://identity.example/"
    );
    let read = by_derive(renders[7]).unwrap();
    assert_eq!(read.region.http_protocol(), HttpProtocol::Http2Preferred);
    assert_eq!(
        by_derive(renders[5])
            .unwrap()
            .me
            .deprecated_reload_interval(),
        Some(GoDuration::from_secs(-1))
    );
}

/// The derived command has exactly the builder command's flags, with the same
/// value names, help headings and help texts.
#[test]
fn the_derived_command_registers_the_same_flags() {
    let describe = |cmd: &clap::Command| {
        let mut flags: Vec<_> = cmd
            .get_arguments()
            .filter(|a| a.get_long() != Some("actor"))
            .map(|a| {
                (
                    a.get_long().map(str::to_owned),
                    format!("{:?}", a.get_value_names()),
                    a.get_help_heading().map(str::to_owned),
                    a.get_help().map(ToString::to_string),
                    format!("{:?}", a.get_action()),
                )
            })
            .collect();
        flags.sort();
        flags
    };
    let derived = Cli::command();
    derived.clone().debug_assert();
    let flags = describe(&derived);
    // 11 per peer (with the ClusterTrustBundle signer and selector), 6 per identity,
    // and the unprefixed deprecated interval.
    assert_eq!(flags.len(), 11 * 2 + 6 * 2 + 1);
    assert_eq!(flags, describe(&builder_command()));
}

/// The refusals are the same: an unknown argument (the prefixed reload interval Go
/// never had) and a bad value are parse errors of the same kind, exit code 2.
#[test]
fn the_derived_command_refuses_what_the_builder_refuses() {
    let unknown: &[&str] = &["--region-client-certificate-reload-interval=24h"];
    assert_eq!(by_derive(unknown).unwrap_err(), ErrorKind::UnknownArgument);
    assert_eq!(by_builder(unknown).unwrap_err(), ErrorKind::UnknownArgument);
    let bad_duration: &[&str] = &["--client-certificate-reload-interval=soon"];
    assert_eq!(
        by_derive(bad_duration).unwrap_err(),
        ErrorKind::ValueValidation
    );
    assert_eq!(
        by_builder(bad_duration).unwrap_err(),
        ErrorKind::ValueValidation
    );

    // A value the builder reports from `from_matches` is a clap error naming the flag.
    let err = Cli::try_parse_from(argv(&["--client-certificate-source=vault"])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ValueValidation);
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string().contains("--client-certificate-source"),
        "{err}"
    );
    let err =
        Cli::try_parse_from(argv(&["--region-client-certificate-source=spiffe"])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
    assert!(
        err.to_string().contains("--region-spiffe-server-id"),
        "{err}"
    );
}

/// `Default` is Go's zero value: a peer that is not configured, an identity that
/// presents nothing, each under its name.
#[test]
fn defaults_are_the_zero_values() {
    let peer = PeerArgs::<peers::Identity>::default();
    assert_eq!(peer.service(), "identity");
    assert!(!peer.is_configured());
    assert_eq!(*peer, PeerOptions::new("identity"));
    let me = ClientIdentityOptions::default();
    assert_eq!(me.prefix(), None);
    assert_eq!(me.config().unwrap(), svc_tls::options::IdentityConfig::None);
    let towards = IdentityArgs::<peers::Audit>::default();
    assert_eq!(towards.prefix(), Some("audit"));
    assert_eq!(
        by_derive(&[]).unwrap().identity,
        PeerOptions::new("identity")
    );
}
