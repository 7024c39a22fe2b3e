//! kube-apiserver on loopback, as envtest runs it: serving certificates from a test CA,
//! static bearer tokens (`--token-auth-file`), RBAC authorization, service-account
//! signing keys, and the etcd started beside it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use test_support::pki::TestCa;

use crate::StartError;
use test_support::supervised::Supervised;

/// What every API server of one [`crate::RealServer`] is started with.
pub(crate) struct Flags {
    pub(crate) binary: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) etcd_url: String,
    pub(crate) extra: Vec<String>,
}

impl Flags {
    fn args(&self, index: usize, port: u16) -> Vec<String> {
        let file = |name: &str| self.dir.join(name).display().to_string();
        let cert_dir = self.dir.join(format!("apiserver-{index}"));
        let mut args = vec![
            format!("--etcd-servers={}", self.etcd_url),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            // The `kubernetes` Service's endpoints may not be a loopback address, and
            // nothing here reaches the API server through that Service.
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--cert-dir={}", cert_dir.display()),
            format!("--tls-cert-file={}", file("serving.crt")),
            format!("--tls-private-key-file={}", file("serving.key")),
            format!("--token-auth-file={}", file("tokens.csv")),
            "--authorization-mode=RBAC".to_owned(),
            format!("--service-account-issuer=https://127.0.0.1:{port}"),
            format!(
                "--service-account-key-file={}",
                file("service-accounts.pub")
            ),
            format!(
                "--service-account-signing-key-file={}",
                file("service-accounts.key")
            ),
            // No addresses are used: only allocated to Services, and none is created.
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            "--allow-privileged=true".to_owned(),
        ];
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// One running API server.
pub(crate) struct ApiServer {
    pub(crate) process: Supervised,
}

impl ApiServer {
    /// Starts API server `index` on `port` and waits for `/readyz` with `ready`.
    pub(crate) async fn start(
        flags: &Flags,
        index: usize,
        port: u16,
        ready: &kube::Client,
    ) -> Result<ApiServer, StartError> {
        let log = flags.dir.join(format!("kube-apiserver-{index}.log"));
        let process = Supervised::start(
            "kube-apiserver",
            &flags.binary,
            &flags.args(index, port),
            &log,
            None,
        )
        .map_err(|e| StartError::Spawn("kube-apiserver", e))?;
        let mut server = ApiServer { process };
        server.wait_ready(ready, Duration::from_secs(90)).await?;
        Ok(server)
    }

    async fn wait_ready(
        &mut self,
        client: &kube::Client,
        limit: Duration,
    ) -> Result<(), StartError> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.process.exited() {
                // Its last words may still be on their way to the log.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Err(StartError::Exited {
                    what: "kube-apiserver",
                    status,
                    log: self.process.log_tail(40),
                });
            }
            if readyz(client).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(StartError::NotReady {
                    what: "kube-apiserver",
                    log: self.process.log_tail(40),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `GET /readyz` answered `ok`.
async fn readyz(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await,
        Ok(Ok(text)) if text.trim() == "ok"
    )
}

/// One static bearer token of the token file.
pub(crate) struct TokenLine {
    pub(crate) token: String,
    pub(crate) user: String,
    pub(crate) groups: &'static str,
}

/// Writes the serving certificate (a test CA's leaf for 127.0.0.1 and localhost), the
/// service-account signing key and the token file into `dir`; returns the CA.
pub(crate) fn write_credentials(dir: &Path, tokens: &[TokenLine]) -> Result<TestCa, StartError> {
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| StartError::Io(dir.join(name), e))
    };
    let ca = TestCa::new("real kube-apiserver serving CA");
    let leaf = ca.server_leaf();
    write("serving.crt", &format!("{}{}", leaf.cert_pem, ca.pem()))?;
    write("serving.key", &leaf.key_pem)?;
    write("ca.crt", &ca.pem())?;
    let signing = rcgen::KeyPair::generate().map_err(|e| StartError::Credentials(e.to_string()))?;
    write("service-accounts.key", &signing.serialize_pem())?;
    write("service-accounts.pub", &signing.public_key_pem())?;
    let mut csv = String::new();
    for line in tokens {
        csv.push_str(&format!("{},{},{}", line.token, line.user, line.user));
        if !line.groups.is_empty() {
            csv.push_str(&format!(",\"{}\"", line.groups));
        }
        csv.push('\n');
    }
    write("tokens.csv", &csv)?;
    Ok(ca)
}
