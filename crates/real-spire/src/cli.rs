//! `spire-server` subcommands against the running server's admin socket (what an
//! operator types): join tokens, registration entries, bundles, minted SVIDs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::SpireError;

/// How long one subcommand may take (they talk to a local socket).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The server's command line, bound to its admin socket.
#[derive(Clone, Debug)]
pub(crate) struct ServerCli {
    pub(crate) binary: PathBuf,
    pub(crate) socket: PathBuf,
}

impl ServerCli {
    /// Runs `spire-server <args> -socketPath <socket>`: its standard output, or the
    /// error with the end of its output.
    pub(crate) async fn run(&self, args: &[&str]) -> Result<String, SpireError> {
        let command = args.join(" ");
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.args(args)
            .arg("-socketPath")
            .arg(&self.socket)
            .kill_on_drop(true);
        let output = match tokio::time::timeout(COMMAND_TIMEOUT, cmd.output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(error)) => return Err(SpireError::Spawn("spire-server", error)),
            Err(_) => {
                return Err(SpireError::Command {
                    command,
                    status: format!("no answer within {COMMAND_TIMEOUT:?}"),
                    output: String::new(),
                });
            }
        };
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let all = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
        let lines: Vec<&str> = all.lines().collect();
        Err(SpireError::Command {
            command,
            status: output.status.to_string(),
            output: lines[lines.len().saturating_sub(10)..].join("\n"),
        })
    }

    /// Whether the server answers its health check.
    pub(crate) async fn healthy(&self) -> bool {
        self.run(&["healthcheck"]).await.is_ok()
    }

    /// A one-time join token for an agent (`token generate`).
    pub(crate) async fn join_token(&self) -> Result<String, SpireError> {
        let out = self.run(&["token", "generate", "-ttl", "600"]).await?;
        out.lines()
            .find_map(|line| line.strip_prefix("Token:").map(|t| t.trim().to_owned()))
            .filter(|token| !token.is_empty())
            .ok_or_else(|| SpireError::Command {
                command: "token generate".to_owned(),
                status: "no `Token:` line".to_owned(),
                output: out.clone(),
            })
    }

    /// The trust domain's own bundle (`bundle show`, PEM) written to `to`, and its
    /// certificates.
    pub(crate) async fn bundle(
        &self,
        to: &Path,
    ) -> Result<Vec<CertificateDer<'static>>, SpireError> {
        let pem = self.run(&["bundle", "show", "-format", "pem"]).await?;
        std::fs::write(to, &pem).map_err(|e| SpireError::Io(to.to_owned(), e))?;
        certificates(to)
    }
}

/// The certificates of a PEM file.
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, SpireError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|_| SpireError::Pem(path.to_owned()))?
        .collect::<Result<_, _>>()
        .map_err(|_| SpireError::Pem(path.to_owned()))?;
    if certs.is_empty() {
        return Err(SpireError::Pem(path.to_owned()));
    }
    Ok(certs)
}

/// PEM text of `certs`.
pub(crate) fn pem(certs: &[CertificateDer<'_>]) -> String {
    use base64::Engine as _;
    use std::fmt::Write as _;
    let mut out = String::new();
    for cert in certs {
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for chunk in b64.as_bytes().chunks(64) {
            let _ = writeln!(out, "{}", String::from_utf8_lossy(chunk));
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}
