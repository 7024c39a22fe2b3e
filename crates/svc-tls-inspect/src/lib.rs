//! # svc-tls-inspect
//!
//! The operator's command: given the flags a deployed service takes (paste the
//! Helm-rendered arguments) and a kubeconfig (or in-cluster configuration), it
//! answers "will this service be accepted after the rotation?":
//!
//! - each Secret the flags name: its shape (type, data keys and sizes), its
//!   certificates (subject, SANs, SPIFFE ID, validity, key type and size), whether
//!   the key matches the certificate, and what svc-tls's own loader says about it
//!   (the same typed errors, by kind); a private key its role does not need (a CA
//!   Secret holding `tls.key` or `ca.key`) is named as a warning;
//! - each peer's CA ConfigMap (`--S-ca-configmap-*`): its bundle's certificates
//!   and svc-tls's loader's verdict;
//! - in SPIFFE mode, the SVIDs and bundles the agent hands out, the default SVID
//!   through the service's own start-up;
//! - whether each identity chains to a given CA (`--chain-ca-secret`,
//!   `--chain-ca-file`: the ingress's);
//! - a real handshake to each configured peer with the client the service builds:
//!   TLS version, key exchange group, the server's chain, and whether the peer
//!   accepted the client certificate;
//! - a principal (`X-Principal`) signed and verified with svc-tls's signer and
//!   verifier.
//!
//! Human output by default, every value someone else wrote escaped and cut
//! ([`text`]); `--output json` for scripts, versioned by its
//! `schema_version` ([`report::SCHEMA_VERSION`]); `--version`. Exit codes
//! ([`report::Category`]): 0 all passed, 2 bad flags (a typo of one of its own
//! included), 3 a Secret, CA ConfigMap or SVID unloadable, 4 chain check failed, 5 a peer handshake failed or the peer refused
//! the certificate, 6 principal, 7 no Kubernetes configuration or Workload API
//! unreachable; when several fail, the smallest. Nothing printed contains key
//! material: keys are described by type and size, and tokens are not printed; a
//! peer host's userinfo (`user:password@`) is printed as `REDACTED@`.
#![deny(missing_docs)]

pub mod checks;
pub mod cli;
mod peers;
pub mod report;
mod run;
pub mod text;

pub use run::inspect;

use report::{Category, Report};

/// What the command prints, and its exit code.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The text for standard output (help, the human report or JSON).
    pub stdout: String,
    /// The process exit code.
    pub exit_code: u8,
}

/// Runs the command on `args` (without the program name).
pub async fn run(args: &[String]) -> Outcome {
    let json = cli::wants_json(args);
    let report = match cli::parse(args) {
        Ok(plan) => inspect(&plan).await,
        Err(cli::FlagsError::Parse {
            message,
            help: true,
        }) => {
            return Outcome {
                stdout: message,
                exit_code: 0,
            };
        }
        Err(error) => {
            let mut report = Report {
                error: Some(checks::problem(&error, &error)),
                ..Report::default()
            };
            if let cli::FlagsError::Options(options) = &error {
                report.error = Some(checks::problem(options, &error));
            }
            report.fail(Category::Flags);
            report.settle();
            report
        }
    };
    let stdout = if json {
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| {
            serde_json::json!({
                "schema_version": report::SCHEMA_VERSION,
                "ok": false,
                "exit_code": 1,
                "error": e.to_string(),
            })
            .to_string()
        })
    } else {
        report::human::render(&report)
    };
    Outcome {
        stdout: without_key_labels(&stdout),
        exit_code: report.exit_code,
    }
}

/// `text` with the PEM label words `PRIVATE KEY` in lower case: svc-tls's loader
/// names the sections it looked for (`holds no PEM PRIVATE KEY ... section`), and
/// with this the output never holds the text at all, so `grep 'PRIVATE KEY'` over
/// it is a clean check that no key was printed.
fn without_key_labels(text: &str) -> String {
    text.replace("PRIVATE KEY", "private key")
}
