//! The alert rules of `docs/alerts.yaml`, loaded into a real Prometheus (Debian's
//! `prometheus`, installed by `cargo xtask prepare`) that scrapes the migrated service
//! while real faults are driven through the emulators: the identity Secret broken in
//! the API emulator, the API emulator stopped, the Workload API emulator (the SPIRE
//! agent) stopped while its SVID runs out. For each fault the test reads Prometheus's
//! own `ALERTS` series and finds the matching alert active (pending: its expression
//! is true and its `for:` is running; or firing, for a rule without `for:`), and none
//! active while the service is healthy. `docs/alerts.test.yaml` unit-tests the rules
//! on synthetic series; this shows the metrics the service really exports make them
//! true.
//!
//! Without `prometheus` on the PATH the tests are skipped with a message, except under
//! CI (`CI=true`), where a missing binary fails them.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{Running, free_port, have, workspace, write_kubeconfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube_testbed::Testbed;
use test_support::pki::TestCa;
use test_support::tls_server::VerifyingServer;

const NS: &str = "platform";
const SECRET: &str = "billing-client-certificate";

fn secret(name: &str, data: &[(&str, &str)]) -> serde_json::Value {
    test_support::secret::secret_with(NS, name, "kubernetes.io/tls", data)
}

/// The migrated service with `args`, serving `/metrics` on the returned port and
/// calling its identity peer every 200 ms for five minutes.
fn service(dir: &Path, args: &[String], spiffe: Option<String>) -> (Running, u16) {
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_migrated-service"));
    command
        .args(args)
        .args([
            format!("--metrics-bind-address=127.0.0.1:{port}"),
            "--requests=0".to_owned(),
            "--serve-for=5m".to_owned(),
            "--request-interval=200ms".to_owned(),
            "--audit-host=".to_owned(),
        ])
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .stdout(std::fs::File::create(dir.join("service.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("service.err")).unwrap());
    match spiffe {
        Some(endpoint) => command.env("SPIFFE_ENDPOINT_SOCKET", endpoint),
        None => command.env_remove("SPIFFE_ENDPOINT_SOCKET"),
    };
    (Running(command.spawn().unwrap()), port)
}

/// A real Prometheus scraping `target_port` every second and evaluating
/// `docs/alerts.yaml` every second.
struct Prometheus {
    _process: Running,
    url: String,
    /// The service's `/metrics`, quoted when a wait times out.
    target: String,
    /// Where [`service`] wrote the service's output, quoted likewise.
    dir: PathBuf,
    http: reqwest::Client,
}

impl Prometheus {
    fn start(dir: &Path, target_port: u16) -> Self {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        let rules = workspace().join("docs/alerts.yaml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n- {rules}\nscrape_configs:\n- job_name: migrated-service\n  static_configs:\n  - targets: ['127.0.0.1:{target_port}']\n",
                rules = rules.display()
            ),
        )
        .unwrap();
        let process = Running(
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("tsdb").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        Self {
            _process: process,
            url: format!("http://127.0.0.1:{port}"),
            target: format!("http://127.0.0.1:{target_port}/metrics"),
            dir: dir.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    /// The result vector of an instant query, each sample's labels; `None` when
    /// Prometheus did not answer.
    async fn query(&self, promql: &str) -> Option<Vec<BTreeMap<String, String>>> {
        let mut url = reqwest::Url::parse(&format!("{}/api/v1/query", self.url)).ok()?;
        url.query_pairs_mut().append_pair("query", promql);
        let body: serde_json::Value = self.http.get(url).send().await.ok()?.json().await.ok()?;
        let result = body["data"]["result"].as_array()?;
        Some(
            result
                .iter()
                .map(|sample| {
                    sample["metric"]
                        .as_object()
                        .map(|labels| {
                            labels
                                .iter()
                                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect(),
        )
    }

    /// Waits (60 s at most) until `promql` has at least one sample.
    async fn wait_for(&self, promql: &str, what: &str) -> Vec<BTreeMap<String, String>> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = None;
        while Instant::now() < deadline {
            last = self.query(promql).await;
            if let Some(samples) = last.as_ref().filter(|s| !s.is_empty()) {
                return samples.clone();
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "timed out waiting for {what}: `{promql}` last answered {last:?}; the service exports:\n{}",
            self.scrape().await
        );
    }

    /// The service's samples and the end of its output, for a failure's message.
    async fn scrape(&self) -> String {
        let text = match self.http.get(&self.target).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(e) => format!("(no answer: {e})"),
        };
        let mut report = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        for file in ["service.out", "service.err"] {
            let output = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
            let lines: Vec<&str> = output.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            report.push_str(&format!("\n--- the last lines of {file}:\n{tail}"));
        }
        report
    }

    /// Waits (60 s at most) until `promql` has no sample.
    async fn wait_gone(&self, promql: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = None;
        while Instant::now() < deadline {
            last = self.query(promql).await;
            if last.as_ref().is_some_and(Vec::is_empty) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "timed out waiting for {what} to end: `{promql}` last answered {last:?}; the service exports:\n{}",
            self.scrape().await
        );
    }

    /// The start of each rule group's last evaluation (seconds since the epoch), as
    /// Prometheus exports it on its own `/metrics`; empty when it did not answer.
    async fn last_evaluations(&self) -> Vec<f64> {
        let Ok(response) = self.http.get(format!("{}/metrics", self.url)).send().await else {
            return Vec::new();
        };
        let text = response.text().await.unwrap_or_default();
        text.lines()
            .filter(|line| {
                line.starts_with("prometheus_rule_group_last_evaluation_timestamp_seconds{")
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
            .collect()
    }

    /// Waits (60 s at most) until each of the `groups` rule groups has started an
    /// evaluation at `at` or later.
    async fn wait_evaluated_from(&self, groups: usize, at: SystemTime) {
        let at = at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = Vec::new();
        while Instant::now() < deadline {
            last = self.last_evaluations().await;
            if last.len() == groups && last.iter().all(|started| *started >= at) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "timed out waiting for {groups} rule groups to be evaluated from {at}: their last evaluations started at {last:?}"
        );
    }

    /// Waits until the rules of `docs/alerts.yaml` are loaded and have been
    /// evaluated on `ready` (a query that has a sample once the service has been
    /// scraped healthy), then a few rounds more; returns the active alerts then.
    async fn settled_alerts(&self, ready: &str) -> Vec<BTreeMap<String, String>> {
        self.wait_for(ready, "the service's first healthy scrape")
            .await;
        let healthy_seen = SystemTime::now();
        let rules = self
            .http
            .get(format!("{}/api/v1/rules", self.url))
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap();
        let groups = rules["data"]["groups"].as_array().unwrap();
        let loaded: usize = groups
            .iter()
            .map(|group| group["rules"].as_array().map_or(0, Vec::len))
            .sum();
        // Every rule of the file: as many as it names alerts.
        let written = std::fs::read_to_string(workspace().join("docs/alerts.yaml"))
            .unwrap()
            .lines()
            .filter(|line| line.trim_start().starts_with("- alert:"))
            .count();
        assert!(written >= 9, "docs/alerts.yaml names {written} alerts");
        assert_eq!(
            loaded, written,
            "docs/alerts.yaml's rules are loaded: {rules}"
        );
        // Three evaluations (one a second) on at least one healthy scrape, as
        // Prometheus reports them: every group has started one 3 s or more after the
        // healthy sample was seen (an evaluation's timestamp is at most one interval
        // before its start, so those three all read it or later samples).
        self.wait_evaluated_from(groups.len(), healthy_seen + Duration::from_secs(3))
            .await;
        self.query("ALERTS").await.unwrap()
    }
}

/// `ALERTS` for one alert name with extra label matchers.
fn alert(name: &str, matchers: &str) -> String {
    format!("ALERTS{{alertname=\"{name}\"{matchers}}}")
}

/// Secret mode: a healthy service raises no alert; a broken identity Secret makes
/// `SvcTlsIdentityStale` and `SvcTlsIdentityRefreshFailing` active (and its fix ends
/// them); a stopped API server makes `SvcTlsSecretWatchUnhealthy` and
/// `KubeConstructCacheNotReady` active (and its return ends them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_secret_and_a_stopped_api_server_raise_their_alerts() {
    if !have("prometheus") {
        return;
    }
    let tb = Testbed::start().await;
    let (server_ca, client_ca) = (
        TestCa::new("identity service"),
        TestCa::new("platform clients"),
    );
    // Three days left of three days and an hour: healthy by the lifetime rule (the
    // old "less than 7 days" would have fired on it).
    let leaf = client_ca.short_lived_client_leaf(1, Duration::from_secs(3 * 24 * 3600));
    let good = [
        ("tls.crt", leaf.cert_pem.as_str()),
        ("tls.key", &leaf.key_pem),
    ];
    tb.upsert(secret(SECRET, &good));
    tb.upsert(secret("identity-ca", &[("tls.crt", &server_ca.pem())]));
    tb.upsert(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": NS, "name": "settings"}, "data": {"k": "v"},
    }));
    let server = VerifyingServer::builder(&server_ca, &client_ca)
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (_service, port) = service(
        dir.path(),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={SECRET}"),
            format!("--identity-host={}", server.url()),
            format!("--identity-ca-secret-namespace={NS}"),
            "--identity-ca-secret-name=identity-ca".to_owned(),
            format!("--watch-configmaps-namespace={NS}"),
        ],
        None,
    );
    let prometheus = Prometheus::start(dir.path(), port);

    let healthy = prometheus
        .settled_alerts(&format!(
            "svc_tls_identity_state{{state=\"fresh\",name=\"{NS}/{SECRET}\"}} == 1 and on() kube_construct_cache_ready == 1"
        ))
        .await;
    assert!(healthy.is_empty(), "no alert while healthy: {healthy:?}");

    // The identity Secret broken: a key that does not match the certificate. Every
    // handshake's reload fails; the last good identity is served, stale.
    let other = client_ca.short_lived_client_leaf(2, Duration::from_secs(3600));
    tb.upsert(secret(
        SECRET,
        &[("tls.crt", &leaf.cert_pem), ("tls.key", &other.key_pem)],
    ));
    let name = format!(",name=\"{NS}/{SECRET}\"");
    for rule in ["SvcTlsIdentityStale", "SvcTlsIdentityRefreshFailing"] {
        let active = prometheus
            .wait_for(
                &alert(rule, &format!("{name},alertstate=\"pending\"")),
                rule,
            )
            .await;
        assert_eq!(active.len(), 1, "{active:?}");
    }
    // Fixed: the state is fresh again at once, so the stale alert ends (the failure
    // counter's increase ends five minutes later, past this test's time).
    tb.upsert(secret(SECRET, &good));
    prometheus
        .wait_gone(&alert("SvcTlsIdentityStale", ""), "SvcTlsIdentityStale")
        .await;

    // The API server stopped: the Secret watches and the ConfigMap cache fail.
    tb.stop().await;
    let watched = prometheus
        .wait_for(
            &alert(
                "SvcTlsSecretWatchUnhealthy",
                &format!(",secret=\"{NS}/{SECRET}\",alertstate=\"pending\""),
            ),
            "SvcTlsSecretWatchUnhealthy",
        )
        .await;
    assert_eq!(watched.len(), 1, "{watched:?}");
    let cache = prometheus
        .wait_for(
            &alert(
                "KubeConstructCacheNotReady",
                &format!(
                    ",resource=\"configmaps.v1\",cache_namespace=\"{NS}\",alertstate=\"pending\""
                ),
            ),
            "KubeConstructCacheNotReady",
        )
        .await;
    assert_eq!(cache.len(), 1, "{cache:?}");
    // Back: the watches reconnect (with backoff) and both alerts end.
    tb.restart(true).await;
    prometheus
        .wait_gone(
            &alert("SvcTlsSecretWatchUnhealthy", ""),
            "SvcTlsSecretWatchUnhealthy",
        )
        .await;
    prometheus
        .wait_gone(
            &alert("KubeConstructCacheNotReady", ""),
            "KubeConstructCacheNotReady",
        )
        .await;
    // The handshakes went on throughout with the last good identity.
    assert_eq!(server.rejected(), 0, "{:?}", server.rejection_reasons());
}

/// SPIFFE mode, an SVID of 50 s (valid from 10 s before its issue, as the emulator
/// issues them: a minute's lifetime): no alert while the agent runs and the SVID is
/// young. The agent stopped: the stream is down (`SvcTlsWorkloadApiUnreachable`),
/// less than a sixth of the SVID's minute is left 40 s after its issue
/// (`SvcTlsIdentityExpiresSoon`, judged against the SVID's own lifetime), and at its
/// end it is expired (`SvcTlsIdentityInvalid`, firing at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_agent_raises_unreachable_then_expires_soon_then_invalid() {
    const SERVER_ID: &str = "spiffe://example.org/ns/platform/sa/identity";
    const CLIENT_ID: &str = "spiffe://example.org/ns/platform/sa/billing";
    if !have("prometheus") {
        return;
    }
    let agent = spiffe_testbed::WorkloadApi::start("example.org").await;
    // The server's SVID keeps the default lifetime; the workload's is 50 s.
    let server_svid = agent.issue(SERVER_ID);
    agent.set_svid_ttl(Duration::from_secs(50));
    agent.set_workload_id(CLIENT_ID);
    let issued = Instant::now();
    let tb = Testbed::start().await;
    let unused = TestCa::new("unused");
    let server = VerifyingServer::builder(&unused, &unused)
        .server_chain(server_svid.chain.clone(), &server_svid.key_pem())
        .client_roots(vec![agent.ca_der()])
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let (_service, port) = service(
        dir.path(),
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--identity-host=https://localhost:{}/", server.addr.port()),
            "--client-certificate-source=spiffe".to_owned(),
            format!("--spiffe-server-id={SERVER_ID}"),
        ],
        Some(agent.endpoint()),
    );
    let prometheus = Prometheus::start(dir.path(), port);
    let name = format!(",name=\"{CLIENT_ID}\"");

    let healthy = prometheus
        .settled_alerts(&format!(
            "svc_tls_identity_state{{state=\"fresh\"{name}}} == 1"
        ))
        .await;
    assert!(
        issued.elapsed() < Duration::from_secs(35),
        "the healthy phase ran past the point the SVID is overdue; the machine is too slow for this test"
    );
    assert!(
        healthy.is_empty(),
        "no alert while the agent runs: {healthy:?}"
    );

    agent.stop().await;
    let down = prometheus
        .wait_for(
            &alert(
                "SvcTlsWorkloadApiUnreachable",
                ",name=\"spiffe://example.org\",alertstate=\"pending\"",
            ),
            "SvcTlsWorkloadApiUnreachable",
        )
        .await;
    assert_eq!(down.len(), 1, "{down:?}");
    let soon = prometheus
        .wait_for(
            &alert("SvcTlsIdentityExpiresSoon", &name),
            "SvcTlsIdentityExpiresSoon",
        )
        .await;
    // Not before a sixth of the minute was left: 40 s after issue (to the second
    // the certificate encodes; a scrape later at most).
    assert!(
        issued.elapsed() >= Duration::from_secs(39),
        "SvcTlsIdentityExpiresSoon active {:?} after issue, before 5/6 of the lifetime: {soon:?}",
        issued.elapsed()
    );
    let invalid = prometheus
        .wait_for(
            &alert(
                "SvcTlsIdentityInvalid",
                &format!("{name},state=\"expired\",alertstate=\"firing\""),
            ),
            "SvcTlsIdentityInvalid",
        )
        .await;
    assert_eq!(invalid.len(), 1, "{invalid:?}");
}
