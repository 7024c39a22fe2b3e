//! The Go manager's flags (unikorn-cloud/core `pkg/manager`: its options, its OTLP
//! option and controller-runtime's zap flags, plus the leader-election and endpoint
//! flags kubebuilder-style charts render), so a chart rendered for the Go manager
//! starts this binary. Each is taken with its meaning where it has one here, else
//! accepted, ignored and warned about once (docs/operations.md, "The controller
//! example as a manager").

use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};
use svc_tls::duration::parse_go_duration;
use thiserror::Error;

use crate::{
    Manager,
    endpoints::bind_address,
    leader::{
        DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElection,
        LeaderElectionError,
    },
};

/// The Lease's default name: the Go manager's `LeaderElectionID` is its application's
/// name.
pub const DEFAULT_LEASE_NAME: &str = "migrated-controller";

/// A flag whose value cannot be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FlagError {
    /// The value does not parse.
    #[error("--{flag}={value:?}: {why}")]
    Invalid {
        /// The flag, without `--`.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        why: String,
    },
    /// The leader-election timings do not make a safe election.
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
}

/// The level zap's flags ask for, as a `tracing` filter directive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// zap `error`, `dpanic`, `panic`, `fatal`.
    Error,
    /// zap `warn`.
    Warn,
    /// zap `info` (the default).
    Info,
    /// zap `debug`, or verbosity 1 (`--zap-log-level=1`); `--zap-devel`'s default.
    Debug,
    /// Verbosity 2 or more.
    Trace,
}

impl LogLevel {
    /// The `tracing` level's name, for an `EnvFilter`.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// How log lines are written (`--zap-encoder`; zap's default follows `--zap-devel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEncoder {
    /// One JSON object per line (tracing-subscriber's fields: `timestamp`, `level`,
    /// `fields.message`, `target`; not zap's `ts`, `msg`, `logger`): zap's
    /// production default, and `--zap-encoder=json`.
    Json,
    /// Text lines: `--zap-devel`'s default, and `--zap-encoder=console`.
    Console,
}

/// What the manager's flags asked for.
#[derive(Clone, Debug)]
pub struct ManagerFlags {
    /// Concurrency and leader election.
    pub manager: Manager,
    /// The log level (`--zap-log-level`, `--zap-devel`).
    pub log_level: LogLevel,
    /// How log lines are written (`--zap-encoder`, `--zap-devel`).
    pub log_encoder: LogEncoder,
    /// Where `/metrics` is served (`--metrics-bind-address`); `None`: nowhere (`0`,
    /// empty or not given). An address for [`crate::endpoints::serve_metrics`].
    pub metrics_address: Option<String>,
    /// Where `/healthz` and `/readyz` are served (`--health-probe-bind-address`);
    /// `None`: nowhere. An address for [`crate::endpoints::serve_probes`].
    pub probe_address: Option<String>,
    /// Where spans are exported (`--otlp-endpoint`, checked with
    /// [`svc_tls::telemetry::traces_url`]); `None`: no export (empty or not given).
    pub otlp_endpoint: Option<String>,
    /// One warning per flag given that means nothing here: log each once at start-up.
    pub ignored: Vec<String>,
}

/// Go's `strconv.ParseBool` values, as pflag's bool flags take them.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

fn bool_flag(name: &'static str, default: &'static str, help: &'static str) -> Arg {
    // pflag: `--flag` alone is true; a value only as `--flag=value`.
    Arg::new(name)
        .long(name)
        .num_args(0..=1)
        .require_equals(true)
        .default_value(default)
        .default_missing_value("true")
        .action(ArgAction::Set)
        .help(help)
}

fn text_flag(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .action(ArgAction::Set)
        .allow_hyphen_values(true)
        .help(help)
}

/// Adds the Go manager's flags to `cmd`.
pub fn augment(cmd: Command) -> Command {
    cmd.arg(
        text_flag(
            "max-concurrency",
            "Maximum number of reconciles to run at the same time (the Go manager's default 16; 0 as controller-runtime: 1)",
        )
        .default_value("16"),
    )
    .arg(bool_flag(
        "leader-elect",
        "true",
        "Only the holder of a coordination.k8s.io Lease reconciles (on by default, as the Go manager)",
    ))
    .arg(
        text_flag("leader-election-id", "The Lease's name")
            .default_value(DEFAULT_LEASE_NAME),
    )
    .arg(text_flag(
        "leader-election-namespace",
        "The Lease's namespace (default: --namespace)",
    ))
    .arg(
        text_flag(
            "leader-elect-lease-duration",
            "How long a Lease not renewed stays its holder's (Go duration)",
        )
        .default_value("15s"),
    )
    .arg(
        text_flag(
            "leader-elect-renew-deadline",
            "How long the leader leads without renewing before it stops (Go duration)",
        )
        .default_value("10s"),
    )
    .arg(
        text_flag(
            "leader-elect-retry-period",
            "How often the Lease is tried and renewed (Go duration)",
        )
        .default_value("2s"),
    )
    .arg(text_flag(
        "otlp-endpoint",
        "Where spans are exported over OTLP/HTTP: host:port (plain HTTP, /v1/traces) as the Go manager's, or an http(s) URL; empty or unset: no export",
    ))
    .arg(text_flag(
        "cd-driver",
        "Accepted for the Go manager's charts; this controller drives no CD backend (warned)",
    ))
    .arg(text_flag(
        "metrics-bind-address",
        "Where /metrics is served (host:port, :port for every address; 0 disables it, the default)",
    ))
    .arg(text_flag(
        "health-probe-bind-address",
        "Where /healthz and /readyz are served (host:port, :port for every address; 0 disables them, the default)",
    ))
    .arg(bool_flag(
        "zap-devel",
        "false",
        "zap's development mode: debug logs unless --zap-log-level says otherwise",
    ))
    .arg(text_flag(
        "zap-log-level",
        "debug, info, warn, error, dpanic, panic, fatal, or a verbosity > 0",
    ))
    .arg(text_flag(
        "zap-encoder",
        "json or console (json unless --zap-devel, as zap's production config)",
    ))
    .arg(text_flag(
        "zap-stacktrace-level",
        "info, error or panic; accepted and ignored (warned)",
    ))
    .arg(text_flag(
        "zap-time-encoding",
        "epoch, millis, nano, iso8601, rfc3339 or rfc3339nano; accepted and ignored (warned)",
    ))
}

/// Reads the flags [`augment`] added; `namespace` is `--namespace` (the Lease's
/// namespace unless `--leader-election-namespace` names one).
///
/// # Errors
/// [`FlagError`] naming the flag.
pub fn from_matches(matches: &ArgMatches, namespace: &str) -> Result<ManagerFlags, FlagError> {
    let text = |id: &str| matches.get_one::<String>(id).cloned();
    let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let mut ignored = Vec::new();

    let max_concurrency = match text("max-concurrency") {
        None => crate::DEFAULT_MAX_CONCURRENCY,
        Some(value) => match value.parse::<i64>() {
            // controller-runtime takes 0 (and less) as 1.
            Ok(n) if n <= 0 => 1,
            Ok(n) => {
                u16::try_from(n).map_err(|_| invalid("max-concurrency", &value, "at most 65535"))?
            }
            Err(_) => return Err(invalid("max-concurrency", &value, "an integer")),
        },
    };

    let boolean = |id: &'static str| -> Result<bool, FlagError> {
        let value = text(id).unwrap_or_default();
        go_bool(&value).ok_or_else(|| invalid(id, &value, "true or false"))
    };
    let duration = |id: &'static str, default: Duration| -> Result<Duration, FlagError> {
        let Some(value) = text(id) else {
            return Ok(default);
        };
        parse_go_duration(&value)
            .map_err(|why| invalid(id, &value, &why))?
            .to_std()
            .ok_or_else(|| invalid(id, &value, "a positive duration"))
    };
    let leader_election = if boolean("leader-elect")? {
        let lease_namespace = text("leader-election-namespace")
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| namespace.to_owned());
        let lease_name = text("leader-election-id")
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_LEASE_NAME.to_owned());
        let election = LeaderElection::new(lease_namespace, lease_name).with_timings(
            duration("leader-elect-lease-duration", DEFAULT_LEASE_DURATION)?,
            duration("leader-elect-renew-deadline", DEFAULT_RENEW_DEADLINE)?,
            duration("leader-elect-retry-period", DEFAULT_RETRY_PERIOD)?,
        );
        election.validate()?;
        Some(election)
    } else {
        None
    };

    let devel = boolean("zap-devel")?;
    let log_level = match text("zap-log-level") {
        None => {
            if devel {
                LogLevel::Debug
            } else {
                LogLevel::Info
            }
        }
        Some(value) => zap_level(&value)?,
    };
    // controller-runtime's zap options: the development config writes console
    // lines, the production config JSON; --zap-encoder overrides either.
    let log_encoder = match text("zap-encoder").as_deref() {
        None if devel => LogEncoder::Console,
        None => LogEncoder::Json,
        Some("json") => LogEncoder::Json,
        Some("console") => LogEncoder::Console,
        Some(value) => return Err(invalid("zap-encoder", value, "json or console")),
    };
    if let Some(value) = text("zap-stacktrace-level") {
        if !matches!(value.as_str(), "info" | "error" | "panic") {
            return Err(invalid(
                "zap-stacktrace-level",
                &value,
                "info, error or panic",
            ));
        }
        ignored.push(format!(
            "--zap-stacktrace-level={value}: no stack traces are logged by this binary"
        ));
    }
    if let Some(value) = text("zap-time-encoding") {
        if !matches!(
            value.as_str(),
            "epoch" | "millis" | "nano" | "iso8601" | "rfc3339" | "rfc3339nano"
        ) {
            return Err(invalid(
                "zap-time-encoding",
                &value,
                "epoch, millis, nano, iso8601, rfc3339 or rfc3339nano",
            ));
        }
        ignored.push(format!(
            "--zap-time-encoding={value}: log times are RFC 3339 here, whatever the flag"
        ));
    }
    let otlp_endpoint = match text("otlp-endpoint").filter(|v| !v.trim().is_empty()) {
        None => None,
        Some(value) => match svc_tls::telemetry::traces_url(&value) {
            Ok(_) => Some(value),
            Err(svc_tls::telemetry::TelemetryError::Endpoint { why, .. }) => {
                return Err(invalid("otlp-endpoint", &value, &why));
            }
            Err(other) => return Err(invalid("otlp-endpoint", &value, &other.to_string())),
        },
    };
    if given("cd-driver") {
        ignored.push(format!(
            "--cd-driver={}: this controller drives no CD backend; the flag is ignored",
            text("cd-driver").unwrap_or_default()
        ));
    }
    let address = |id: &'static str| -> Result<Option<String>, FlagError> {
        match text(id) {
            None => Ok(None),
            Some(value) => bind_address(&value).map_err(|why| invalid(id, &value, &why)),
        }
    };
    let metrics_address = address("metrics-bind-address")?;
    let probe_address = address("health-probe-bind-address")?;
    Ok(ManagerFlags {
        manager: Manager {
            max_concurrency,
            leader_election,
        },
        log_level,
        log_encoder,
        metrics_address,
        probe_address,
        otlp_endpoint,
        ignored,
    })
}

/// zap's level flag: a level name or a verbosity (`1` is debug).
fn zap_level(value: &str) -> Result<LogLevel, FlagError> {
    Ok(match value {
        "debug" => LogLevel::Debug,
        "info" => LogLevel::Info,
        "warn" => LogLevel::Warn,
        "error" | "dpanic" | "panic" | "fatal" => LogLevel::Error,
        _ => match value.parse::<u32>() {
            Ok(1) => LogLevel::Debug,
            Ok(n) if n > 1 => LogLevel::Trace,
            _ => {
                return Err(invalid(
                    "zap-log-level",
                    value,
                    "debug, info, warn, error, dpanic, panic, fatal, or an integer > 0",
                ));
            }
        },
    })
}

fn invalid(flag: &'static str, value: &str, why: &str) -> FlagError {
    FlagError::Invalid {
        flag,
        value: value.to_owned(),
        why: why.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse(args: &[&str]) -> Result<ManagerFlags, FlagError> {
        let matches = augment(Command::new("t"))
            .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap();
        from_matches(&matches, "ns")
    }

    #[test]
    fn defaults_are_the_go_managers() {
        let flags = parse(&[]).unwrap();
        assert_eq!(flags.manager.max_concurrency, 16);
        let election = flags.manager.leader_election.unwrap();
        assert_eq!(election.lease_namespace, "ns");
        assert_eq!(election.lease_name, DEFAULT_LEASE_NAME);
        assert_eq!(election.lease_duration, Duration::from_secs(15));
        assert_eq!(election.renew_deadline, Duration::from_secs(10));
        assert_eq!(election.retry_period, Duration::from_secs(2));
        assert_eq!(flags.log_level, LogLevel::Info);
        // zap's production config: JSON lines.
        assert_eq!(flags.log_encoder, LogEncoder::Json);
        assert_eq!(flags.metrics_address, None);
        assert_eq!(flags.probe_address, None);
        assert_eq!(flags.otlp_endpoint, None);
        assert!(flags.ignored.is_empty());
    }

    #[test]
    fn a_malformed_otlp_endpoint_is_an_error_naming_the_flag() {
        for bad in [
            "collector:port",
            "ftp://collector:4318",
            "collector:4318/v1/traces",
        ] {
            let error = parse(&[&format!("--otlp-endpoint={bad}")]).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("--otlp-endpoint={bad:?}")),
                "{error}"
            );
        }
        assert_eq!(parse(&["--otlp-endpoint="]).unwrap().otlp_endpoint, None);
        assert_eq!(
            parse(&["--otlp-endpoint=https://collector.example:4318"])
                .unwrap()
                .otlp_endpoint
                .as_deref(),
            Some("https://collector.example:4318")
        );
    }

    #[test]
    fn go_values_are_taken_or_warned_about() {
        let flags = parse(&[
            "--max-concurrency=4",
            "--leader-elect=false",
            "--zap-devel",
            "--zap-encoder=json",
            "--zap-stacktrace-level=panic",
            "--zap-time-encoding=iso8601",
            "--otlp-endpoint=collector:4318",
            "--cd-driver=argocd",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address=0",
        ])
        .unwrap();
        assert_eq!(flags.manager.max_concurrency, 4);
        assert!(flags.manager.leader_election.is_none());
        assert_eq!(flags.log_level, LogLevel::Debug);
        // --zap-encoder=json is taken (over --zap-devel's console), not warned about.
        assert_eq!(flags.log_encoder, LogEncoder::Json);
        assert_eq!(flags.ignored.len(), 3, "{:?}", flags.ignored);
        assert_eq!(
            parse(&["--zap-devel"]).unwrap().log_encoder,
            LogEncoder::Console
        );
        assert_eq!(
            parse(&["--zap-encoder=console"]).unwrap().log_encoder,
            LogEncoder::Console
        );
        assert_eq!(flags.otlp_endpoint.as_deref(), Some("collector:4318"));
        assert_eq!(flags.metrics_address.as_deref(), Some("0.0.0.0:8080"));
        assert_eq!(flags.probe_address, None);
        assert_eq!(
            parse(&["--zap-log-level=2"]).unwrap().log_level,
            LogLevel::Trace
        );
        assert_eq!(
            parse(&["--max-concurrency=0"])
                .unwrap()
                .manager
                .max_concurrency,
            1
        );
    }

    #[test]
    fn bad_values_name_their_flag() {
        for (arg, flag) in [
            ("--max-concurrency=many", "--max-concurrency="),
            ("--zap-log-level=loud", "--zap-log-level="),
            ("--zap-encoder=xml", "--zap-encoder="),
            ("--leader-elect=maybe", "--leader-elect="),
            (
                "--leader-elect-retry-period=2",
                "--leader-elect-retry-period=",
            ),
            ("--metrics-bind-address=8080", "--metrics-bind-address="),
            (
                "--health-probe-bind-address=:probes",
                "--health-probe-bind-address=",
            ),
        ] {
            let error = parse(&[arg]).unwrap_err().to_string();
            assert!(error.starts_with(flag), "{arg}: {error}");
        }
        let error = parse(&["--leader-elect-renew-deadline=20s"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--leader-elect-lease-duration must be longer"),
            "{error}"
        );
    }
}
