//! etcd on loopback: a temporary data directory, free client and peer ports, no fsync
//! (as envtest runs it), and the two storage operations tests need through etcd's
//! JSON gateway (what `etcdctl endpoint status` and `etcdctl compact` do).

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::StartError;
use test_support::supervised::Supervised;

pub(crate) struct Etcd {
    pub(crate) process: Supervised,
    pub(crate) url: String,
}

impl Etcd {
    /// Starts etcd with its data under `dir`; `cleanup` is removed once it has stopped
    /// because the test process ended.
    pub(crate) async fn start(
        binary: &Path,
        dir: &Path,
        cleanup: Option<&Path>,
    ) -> Result<Etcd, StartError> {
        let (client, peer) = (crate::free_port()?, crate::free_port()?);
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let args = vec![
            "--name=real".to_owned(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=real={peer_url}"),
            "--unsafe-no-fsync=true".to_owned(),
            "--log-level=warn".to_owned(),
        ];
        let process = Supervised::start("etcd", binary, &args, &dir.join("etcd.log"), cleanup)
            .map_err(|e| StartError::Spawn("etcd", e))?;
        let mut etcd = Etcd { process, url };
        etcd.wait_healthy(Duration::from_secs(30)).await?;
        Ok(etcd)
    }

    async fn wait_healthy(&mut self, limit: Duration) -> Result<(), StartError> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.process.exited() {
                // Its last words may still be on their way to the log.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Err(StartError::Exited {
                    what: "etcd",
                    status,
                    log: self.process.log_tail(30),
                });
            }
            let healthy = match http.get(format!("{}/health", self.url)).send().await {
                Ok(response) => response.text().await.is_ok_and(|t| t.contains("true")),
                Err(_) => false,
            };
            if healthy {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(StartError::NotReady {
                    what: "etcd",
                    log: self.process.log_tail(30),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// etcd's JSON gateway at `url`: one POST.
async fn gateway(
    url: &str,
    path: &str,
    body: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let response = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("etcd {path}: {e}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| format!("etcd {path}: {e}"))?;
    if !status.is_success() {
        return Err(format!("etcd {path}: {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("etcd {path}: {e}: {text}"))
}

/// The store's current revision (`etcdctl endpoint status`'s revision).
pub(crate) async fn revision(url: &str) -> Result<i64, String> {
    let key = base64::engine::general_purpose::STANDARD.encode([0u8]);
    let reply = gateway(url, "/v3/kv/range", serde_json::json!({"key": key})).await?;
    let revision = &reply["header"]["revision"];
    revision
        .as_str()
        .and_then(|r| r.parse().ok())
        .or_else(|| revision.as_i64())
        .ok_or_else(|| format!("etcd range: no revision in {reply}"))
}

/// Compacts the store up to `revision` (`etcdctl compact --physical`): every
/// resourceVersion before it is gone.
pub(crate) async fn compact(url: &str, revision: i64) -> Result<(), String> {
    gateway(
        url,
        "/v3/kv/compaction",
        serde_json::json!({"revision": revision.to_string(), "physical": true}),
    )
    .await
    .map(|_| ())
}
