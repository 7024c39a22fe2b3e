//! The flags: the deployed service's own (svc-tls's `PeerOptions` and
//! `ClientIdentityOptions`, kube-construct's `KubeOptions`), so Helm-rendered
//! arguments can be pasted, plus this command's few.
//!
//! Which peers and prefixed identities a service declares is fixed in its code; this
//! command reads them from the arguments instead: every `--S-host`,
//! `--S-ca-secret-namespace`, `--S-ca-secret-name`, `--S-http2` or
//! `--S-pool-idle-timeout` declares peer `S` (or only those `--peers` lists), every
//! `--P-client-certificate-{source,namespace,name}` or `--P-spiffe-server-id` a
//! prefixed identity `P`. The service's other flags are ignored and reported by name
//! (a flag without `=` followed by a word not starting with `-` takes that word as
//! its value), except one close to a flag this command reads (a typo such as
//! `--chain-ca-secrte`: [`FlagsError::MistypedFlag`], exit 2) unless
//! `--service-flags` names it as the service's own.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use kube_construct::config::KubeOptions;
use svc_tls::duration::parse_go_duration;
use svc_tls::options::{ClientIdentityOptions, OptionsError, PeerOptions};
use svc_tls::origin::SecretRef;
use svc_tls::principal::AlgorithmPolicy;

mod scan;
pub use scan::wants_json;
use scan::{
    IDENTITY_SUFFIXES, PEER_SUFFIXES, declared, explicit_peers, keep_known, mistyped, service_flags,
};

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// For people (the default).
    Human,
    /// One JSON object, for scripts (`--output json`).
    Json,
}

/// The CA the chain check verifies the identity against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainCaFlag {
    /// `--chain-ca-secret NAMESPACE/NAME` (read as svc-tls reads a CA Secret).
    Secret(SecretRef),
    /// `--chain-ca-file PATH` (PEM certificates).
    File(PathBuf),
}

/// What the flags ask for.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where the Kubernetes configuration comes from.
    pub kube: KubeOptions,
    /// The peers, in the order first named.
    pub peers: Vec<PeerOptions>,
    /// The identities: the unprefixed one first, then each prefix.
    pub identities: Vec<ClientIdentityOptions>,
    /// How to print.
    pub output: Output,
    /// The chain check's CA.
    pub chain_ca: Option<ChainCaFlag>,
    /// The bound on each wait (Secret reads, handshakes, the Workload API).
    pub timeout: Duration,
    /// The principal algorithm policy.
    pub principal_policy: AlgorithmPolicy,
    /// The service flags not used here, by name.
    pub ignored_flags: Vec<String>,
}

/// Why the flags cannot be used (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    /// clap refused the arguments (or `--help`, which is not an error: `help` is set).
    #[error("{message}")]
    Parse {
        /// clap's message.
        message: String,
        /// True for `--help` / `--version` (printed, exit 0).
        help: bool,
    },
    /// svc-tls refused the flags' values, as the service would at start-up.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// `--chain-ca-secret` is not `NAMESPACE/NAME`.
    #[error("--chain-ca-secret={value:?} is not NAMESPACE/NAME")]
    ChainCaSecret {
        /// The value given.
        value: String,
    },
    /// Both chain CA flags are set.
    #[error("--chain-ca-secret and --chain-ca-file are both set: give one CA")]
    TwoChainCas,
    /// A flag this command does not know, close to one it does: a typo, which
    /// would otherwise skip that flag's check without a word.
    #[error(
        "unknown flag --{flag}: did you mean --{suggestion}? (if --{flag} is the service's own flag, add --service-flags={flag})"
    )]
    MistypedFlag {
        /// The flag given, without dashes (escaped and cut: it may be anything).
        flag: String,
        /// The known flag it is close to, without dashes.
        suggestion: String,
    },
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Plan, FlagsError> {
    let names: Vec<&str> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split_once('=').map_or(a, |(name, _)| name))
        .collect();
    let explicit_peers = explicit_peers(args);
    let peers = match &explicit_peers {
        Some(list) => list.clone(),
        None => declared(&names, &PEER_SUFFIXES),
    };
    let prefixes: Vec<String> = declared(&names, &IDENTITY_SUFFIXES)
        .into_iter()
        .filter_map(|p| p.strip_suffix('-').map(str::to_owned))
        .collect();
    let cmd = command(&peers, &prefixes);
    let (kept, ignored_flags) = keep_known(&cmd, args);
    let allowed = service_flags(args);
    for name in ignored_flags.iter().map(|f| f.trim_start_matches('-')) {
        if let Some(suggestion) = mistyped(&cmd, name, &allowed) {
            return Err(FlagsError::MistypedFlag {
                flag: crate::text::value(name),
                suggestion,
            });
        }
    }
    let matches = cmd
        .try_get_matches_from(std::iter::once("svc-tls-inspect".to_owned()).chain(kept))
        .map_err(|e| FlagsError::Parse {
            help: matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ),
            message: {
                let text = e.render().to_string();
                text.strip_prefix("error: ")
                    .unwrap_or(&text)
                    .trim_end()
                    .to_owned()
            },
        })?;
    plan(&matches, &peers, &prefixes, ignored_flags)
}

fn plan(
    matches: &ArgMatches,
    peers: &[String],
    prefixes: &[String],
    ignored_flags: Vec<String>,
) -> Result<Plan, FlagsError> {
    let kube = KubeOptions::from_arg_matches(matches).map_err(|e| FlagsError::Parse {
        message: e.to_string(),
        help: false,
    })?;
    let peers = peers
        .iter()
        .map(|p| PeerOptions::from_matches(matches, p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut identities = vec![ClientIdentityOptions::from_matches(matches, None)?];
    for prefix in prefixes {
        identities.push(ClientIdentityOptions::from_matches(matches, Some(prefix))?);
    }
    for identity in &identities {
        identity.config()?;
    }
    let text = |id: &str| matches.get_one::<String>(id).cloned().unwrap_or_default();
    let chain_ca = match (text("chain-ca-secret"), text("chain-ca-file")) {
        (s, f) if !s.is_empty() && !f.is_empty() => return Err(FlagsError::TwoChainCas),
        (s, _) if !s.is_empty() => match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Some(ChainCaFlag::Secret(SecretRef::new(ns, name)))
            }
            _ => return Err(FlagsError::ChainCaSecret { value: s }),
        },
        (_, f) if !f.is_empty() => Some(ChainCaFlag::File(PathBuf::from(f))),
        _ => None,
    };
    Ok(Plan {
        kube,
        peers,
        identities,
        output: if text("output") == "json" {
            Output::Json
        } else {
            Output::Human
        },
        chain_ca,
        timeout: matches
            .get_one::<Duration>("timeout")
            .copied()
            .unwrap_or(Duration::from_secs(10)),
        principal_policy: if matches.get_flag("principal-ps512-only") {
            AlgorithmPolicy::Ps512Only
        } else {
            AlgorithmPolicy::Ps512OrEcdsa
        },
        ignored_flags,
    })
}

/// The command for these peers and identity prefixes.
fn command(peers: &[String], prefixes: &[String]) -> Command {
    let own = |name: &'static str, help: &'static str| {
        Arg::new(name)
            .long(name)
            .overrides_with(name)
            .help(help)
            .help_heading("Inspection")
    };
    let mut cmd = Command::new("svc-tls-inspect")
        .arg(own("output", "human (default) or json").value_parser(["human", "json"]).default_value("human"))
        .arg(own("chain-ca-secret", "NAMESPACE/NAME of the CA Secret the identity must chain to (the ingress's auth-tls-secret)"))
        .arg(own("chain-ca-file", "A PEM file of the CA certificates the identity must chain to"))
        .arg(own("peers", "Only these peers (comma-separated service names); default: every peer the flags name"))
        .arg(own("service-flags", "Flags of the service's own (comma-separated names) that are close to one of this command's and would be taken for a typo of it"))
        .arg(
            own("timeout", "The bound on each wait: Secret reads, handshakes, the Workload API (a Go duration)")
                .default_value("10s")
                .value_parser(|v: &str| {
                    parse_go_duration(v)?.to_std().ok_or_else(|| format!("{v:?} is negative"))
                }),
        )
        .arg(
            Arg::new("principal-ps512-only")
                .long("principal-ps512-only")
                .action(ArgAction::SetTrue)
                .help("Sign and verify the principal as the older PS512-only services do")
                .help_heading("Inspection"),
        );
    cmd = KubeOptions::augment_args(cmd);
    for peer in peers {
        cmd = PeerOptions::augment(cmd, peer);
    }
    cmd = ClientIdentityOptions::augment(cmd, None);
    for prefix in prefixes {
        cmd = ClientIdentityOptions::augment(cmd, Some(prefix));
    }
    // After KubeOptions, whose derive sets its own text (and no version) as the
    // about.
    cmd.about(ABOUT)
        .long_about(ABOUT)
        .version(env!("CARGO_PKG_VERSION"))
}

const ABOUT: &str = "Will this service's Secrets load, chain to the ingress's CA, and be accepted by its peers? Give it the service's own flags (the Helm-rendered arguments) and a kubeconfig. Exit codes: 0 ok, 2 bad flags (a typo of one of its flags included), 3 a Secret, CA ConfigMap or SVID unloadable, 4 chain check failed, 5 peer handshake failed or certificate refused, 6 principal, 7 no Kubernetes configuration or Workload API unreachable (the smallest when several fail). See docs/operations.md.";
