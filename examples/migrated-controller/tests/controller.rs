//! The migrated controller against two API servers (the local cluster holding the
//! resources: kube-testbed, which counts requests per resource; the remote cluster
//! holding the identity and CA Secrets the peer call uses: kube-testbed, and a real
//! kube-apiserver) and test-support's TLS 1.3 server, which requires and verifies
//! client certificates and records each presented leaf's serial.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use base64::Engine as _;
use kube_construct::{
    ClusterId,
    client::CachedClient,
    types::{
        Condition, ConditionReason, ConditionStatus, ConditionType, StatusConditionReader as _,
        fake::ManagedResource,
    },
};
use kube_testbed::{KindSpec, Testbed};
use migrated_controller::{
    CLUSTER_LABEL, KUBECONFIG_LABEL, RunError, Settings, client_builder, run,
};
use real_apiserver::ApiServerUnderTest;
use serde_json::json;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use test_support::{
    pki::TestCa,
    poll_until,
    secret::{secret_with, tls_secret},
    tls_server::VerifyingServer,
};

const NS: &str = "platform";
const IDENTITY: &str = "controller-client-certificate";
const PEER_CA: &str = "region-ca";
const LOCAL_SERIAL: u64 = 1001;
const REMOTE_SERIAL: u64 = 2002;
const MANAGED: &str = "managedresources.unikorn.unikorn-cloud.org";

/// A kubeconfig for `server` (its admin token, its CA inline: what the untrusted
/// kubeconfig check accepts), as a provisioner finds one in a Secret.
fn kubeconfig(server: &impl ApiServerUnderTest) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let config = server.config_for(&server.admin_token());
    let ca: String = config
        .root_cert
        .iter()
        .flatten()
        .map(|der| {
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                b64.encode(der)
            )
        })
        .collect();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n\
         users:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
        config.cluster_url,
        b64.encode(ca),
        server.admin_token()
    )
}

fn namespace(tb: &Testbed) {
    tb.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
}

/// The local cluster: an emulator serving `ManagedResource` (with its status
/// subresource) and counting requests per resource.
async fn local_cluster() -> Testbed {
    let local = Testbed::start().await;
    local.register_kind(KindSpec::namespaced(
        "unikorn.unikorn-cloud.org",
        "v1alpha1",
        "ManagedResource",
        "managedresources",
    ));
    // The binary elects its leader through a Lease (the Go manager's default).
    local.register_kind(
        KindSpec::namespaced("coordination.k8s.io", "v1", "Lease", "leases")
            .status_subresource(false),
    );
    namespace(&local);
    local
}

/// The `Available` condition of `name` as the local API server stores it.
fn available(local: &Testbed, name: &str) -> Option<Condition> {
    let stored = local.get(
        "unikorn.unikorn-cloud.org/v1alpha1",
        "ManagedResource",
        NS,
        name,
    )?;
    let object: ManagedResource = serde_json::from_value(stored).ok()?;
    object
        .status_condition_read(&ConditionType::Available)
        .ok()
        .cloned()
}

/// A controller that reconciled one resource provisioned in the remote cluster.
struct Provisioned {
    local: Testbed,
    client: CachedClient,
    server: VerifyingServer,
    stop: tokio::sync::oneshot::Sender<()>,
    controller: tokio::task::JoinHandle<Result<(), RunError>>,
}

impl Provisioned {
    /// Stops the controller, which must end within 10 s.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.controller)
            .await
            .expect("the controller stops on shutdown")
            .unwrap()
            .unwrap();
    }
}

/// Runs the controller over a local emulator with `remote` as the cluster its
/// resource names (its Secrets in `remote_ns`), until the resource is `Available`.
async fn provisioned(remote: &impl ApiServerUnderTest, remote_ns: &str) -> Provisioned {
    let (local, server) = clusters(remote, remote_ns).await;
    let settings = Settings {
        namespace: NS.to_owned(),
        peer: PeerOptions::new("region")
            .with_host(server.url().parse().unwrap())
            .with_ca_secret(remote_ns, PEER_CA),
        identity: ClientIdentityOptions::new(None).with_secret(remote_ns, IDENTITY),
        path: "api/v1/regions".to_owned(),
        sync_timeout: Duration::from_secs(30),
        // The emulators listen on 127.0.0.1.
        destinations: provision_scope::Destinations::new().allow_loopback(),
    };
    // A client adopted from elsewhere, identified in one step.
    let client = client_builder(&settings)
        .from_client_identified(local.client(), ClusterId::named("local"))
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(client.clone(), settings, async {
        let _ = stopped.await;
    }));

    let mut resource = ManagedResource::new("widget");
    resource.metadata.namespace = Some(NS.to_owned());
    resource.metadata.labels = Some([(CLUSTER_LABEL.to_owned(), "remote-a".to_owned())].into());
    client.create(&resource).await.unwrap();

    // The status, written through /status and read back from the API server.
    poll_until("the Available condition written", || {
        available(&local, "widget").is_some_and(|c| c.status == ConditionStatus::True)
    })
    .await;
    Provisioned {
        local,
        client,
        server,
        stop,
        controller,
    }
}

/// The local cluster (with `remote`'s kubeconfig), the remote one's Secrets in
/// `remote_ns`, and the peer.
async fn clusters(remote: &impl ApiServerUnderTest, remote_ns: &str) -> (Testbed, VerifyingServer) {
    let local = local_cluster().await;
    // The peer, and one client CA; a leaf of it in *each* cluster under the same
    // Secret name: only the serial the server records tells which cluster's was used.
    let (server_ca, client_ca) = (TestCa::new("region"), TestCa::new("platform clients"));
    let local_leaf = client_ca.client_leaf("controller", LOCAL_SERIAL);
    local.upsert(tls_secret(
        NS,
        IDENTITY,
        &local_leaf.cert_pem,
        &local_leaf.key_pem,
    ));
    local.upsert(secret_with(
        NS,
        PEER_CA,
        "Opaque",
        &[("ca.crt", &server_ca.pem())],
    ));
    let remote_leaf = client_ca.client_leaf("controller", REMOTE_SERIAL);
    remote
        .apply(tls_secret(
            remote_ns,
            IDENTITY,
            &remote_leaf.cert_pem,
            &remote_leaf.key_pem,
        ))
        .await;
    remote
        .apply(secret_with(
            remote_ns,
            PEER_CA,
            "Opaque",
            &[("ca.crt", &server_ca.pem())],
        ))
        .await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;

    // The remote cluster's kubeconfig, in the local cluster.
    let mut stored = secret_with(
        NS,
        "remote-a-kubeconfig",
        "Opaque",
        &[("value", &kubeconfig(remote))],
    );
    stored["metadata"]["labels"] = json!({ KUBECONFIG_LABEL: "true" });
    local.upsert(stored);
    (local, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_in_the_remote_cluster_with_its_identity_and_one_watch_per_kind() {
    let remote = Testbed::start().await;
    namespace(&remote);
    let run = provisioned(&remote, NS).await;
    let (local, client) = (&run.local, &run.client);

    let condition = available(local, "widget").unwrap();
    assert_eq!(condition.reason, ConditionReason::Provisioned);
    assert!(
        condition
            .message
            .contains("in cluster remote-a answered 200"),
        "{}",
        condition.message
    );
    assert!(local.requests_on("patch", &format!("{MANAGED}/status")) >= 1);
    // And through the cache, which the watch brings it to.
    poll_until("the cache holds the status", || {
        client
            .get::<ManagedResource>(Some(NS), "widget")
            .unwrap()
            .is_some_and(|o| o.status_condition_read(&ConditionType::Available).is_ok())
    })
    .await;

    // The peer saw the remote cluster's leaf, never the local one's.
    let serials: Vec<_> = run.server.seen().iter().filter_map(|s| s.serial).collect();
    assert!(serials.contains(&REMOTE_SERIAL), "{serials:?}");
    assert!(!serials.contains(&LOCAL_SERIAL), "{serials:?}");
    // The identity and CA Secrets were watched in the remote cluster, not the local one.
    assert_eq!(remote.requests_on("watch", "secrets"), 2);
    assert_eq!(
        local.requests_on("watch", "secrets"),
        1,
        "the kubeconfig cache only"
    );

    // One watch (and one list) of the resources: the controller shares the cache's.
    assert_eq!(local.requests_on("watch", MANAGED), 1);
    assert_eq!(local.requests_on("list", MANAGED), 1);
    // Every read was declared.
    assert_eq!(client.undeclared_reads(), []);
    run.stop().await;
}

/// The remote cluster a real kube-apiserver: its kubeconfig vetted and used, its
/// Secrets watched by svc-tls there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_with_a_real_api_server_as_the_remote_cluster() {
    let remote = real_apiserver::shared();
    let run = provisioned(remote, "controller-remote").await;
    let condition = available(&run.local, "widget").unwrap();
    assert_eq!(condition.reason, ConditionReason::Provisioned);
    let serials: Vec<_> = run.server.seen().iter().filter_map(|s| s.serial).collect();
    assert!(serials.contains(&REMOTE_SERIAL), "{serials:?}");
    assert!(!serials.contains(&LOCAL_SERIAL), "{serials:?}");
    assert_eq!(run.local.requests_on("watch", MANAGED), 1);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubeconfig_is_reported_in_the_condition() {
    let local = local_cluster().await;
    let settings = Settings {
        namespace: NS.to_owned(),
        peer: PeerOptions::new("region").with_host("https://127.0.0.1:9".parse().unwrap()),
        identity: ClientIdentityOptions::new(None).with_secret(NS, IDENTITY),
        path: "api/v1/regions".to_owned(),
        sync_timeout: Duration::from_secs(5),
        destinations: provision_scope::Destinations::new().allow_loopback(),
    };
    let client = client_builder(&settings)
        .from_client_identified(local.client(), ClusterId::named("local"))
        .await
        .unwrap();
    let controller = tokio::spawn(run(client.clone(), settings, std::future::pending()));
    let mut resource = ManagedResource::new("orphan");
    resource.metadata.namespace = Some(NS.to_owned());
    resource.metadata.labels = Some([(CLUSTER_LABEL.to_owned(), "nowhere".to_owned())].into());
    client.create(&resource).await.unwrap();

    let condition = || {
        let stored = local.get(
            "unikorn.unikorn-cloud.org/v1alpha1",
            "ManagedResource",
            NS,
            "orphan",
        )?;
        let object: ManagedResource = serde_json::from_value(stored).ok()?;
        object
            .status_condition_read(&ConditionType::Available)
            .ok()
            .cloned()
    };
    poll_until("the failure written", || condition().is_some()).await;
    let condition = condition().unwrap();
    assert_eq!(condition.status, ConditionStatus::False);
    assert_eq!(condition.reason, ConditionReason::Errored);
    assert!(
        condition
            .message
            .contains("no kubeconfig for cluster nowhere: Secret platform/nowhere-kubeconfig"),
        "{}",
        condition.message
    );
    controller.abort();
}

/// The binary, with the flags a deployment renders (the Go manager's included: its
/// options, its OTLP flag, controller-runtime's zap flags, the leader-election and
/// endpoint flags of kubebuilder-style charts), does the same, as the leader, and
/// serves `/metrics`, `/healthz` and `/readyz` where the endpoint flags say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_takes_the_deployed_flags() {
    let remote = Testbed::start().await;
    namespace(&remote);
    let (local, server) = clusters(&remote, NS).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubeconfig");
    std::fs::write(&config, kubeconfig(&local)).unwrap();
    let log = dir.path().join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_migrated-controller"))
        .args([
            format!("--kubeconfig={}", config.display()),
            format!("--namespace={NS}"),
            format!("--region-host={}", server.url()),
            // The remote emulator listens on 127.0.0.1: refused unless named.
            "--remote-allow=127.0.0.1".to_owned(),
            format!("--region-ca-secret-namespace={NS}"),
            format!("--region-ca-secret-name={PEER_CA}"),
            format!("--client-certificate-namespace={NS}"),
            format!("--client-certificate-name={IDENTITY}"),
            // The Go timer's "disable" value, still rendered by charts: accepted, ignored.
            "--client-certificate-reload-interval=-1s".to_owned(),
            // The Go manager's flags, as its chart renders them.
            "--max-concurrency=16".to_owned(),
            "--cd-driver=argocd".to_owned(),
            "--otlp-endpoint=otel-collector.observability:4318".to_owned(),
            "--zap-log-level=info".to_owned(),
            "--zap-devel=false".to_owned(),
            "--zap-encoder=json".to_owned(),
            "--zap-stacktrace-level=error".to_owned(),
            "--zap-time-encoding=iso8601".to_owned(),
            "--leader-elect".to_owned(),
            "--leader-election-id=migrated-controller".to_owned(),
            // Free ports: the binary logs the addresses it bound.
            "--metrics-bind-address=127.0.0.1:0".to_owned(),
            "--health-probe-bind-address".to_owned(),
            "127.0.0.1:0".to_owned(),
        ])
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _running = Killed(child);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    poll_until("the endpoints' addresses logged", || {
        let text = log_text();
        logged_address(&text, "metrics: serving http://").is_some()
            && logged_address(&text, "probes: serving http://").is_some()
    })
    .await;
    let text = log_text();
    let metrics = logged_address(&text, "metrics: serving http://").unwrap();
    let probes = logged_address(&text, "probes: serving http://").unwrap();
    // Ready once the caches synced; healthy while running.
    poll_until("/readyz answers 200", || {
        http_get(&probes, "/readyz").is_some_and(|(status, _)| status == 200)
    })
    .await;
    assert_eq!(http_get(&probes, "/healthz").unwrap().0, 200);
    assert_eq!(http_get(&probes, "/nothing").unwrap().0, 404);
    // No object yet: nothing reconciled.
    let (status, scraped) = http_get(&metrics, "/metrics").unwrap();
    assert_eq!(status, 200, "{scraped}");
    assert_eq!(reconciles(&scraped), Some(0), "{scraped}");
    assert!(
        sample(
            &scraped,
            "leader_election_master_status{name=\"migrated-controller\"}"
        )
        .is_some(),
        "{scraped}"
    );
    // svc-tls's and kube-construct's metrics are served with the controller's, and
    // what became of the spans --otlp-endpoint exports.
    assert!(scraped.contains("kube_construct_"), "{scraped}");
    assert!(
        scraped.contains("svc_tls_trace_spans_total{result=\"dropped\"}"),
        "{scraped}"
    );
    local.upsert(json!({
        "apiVersion": "unikorn.unikorn-cloud.org/v1alpha1", "kind": "ManagedResource",
        "metadata": {"namespace": NS, "name": "widget", "labels": {CLUSTER_LABEL: "remote-a"}},
    }));
    let waited = tokio::time::timeout(
        test_support::POLL_LIMIT * 3,
        poll_until_quiet(|| {
            available(&local, "widget").is_some_and(|c| c.status == ConditionStatus::True)
        }),
    )
    .await;
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        waited.is_ok(),
        "no Available condition; the controller's log:\n{stderr}"
    );
    let serials: Vec<_> = server.seen().iter().filter_map(|s| s.serial).collect();
    assert_eq!(serials.first(), Some(&REMOTE_SERIAL), "{serials:?}");
    assert_eq!(local.requests_on("watch", MANAGED), 1, "{stderr}");
    // It leads through the Lease, and said once which flags mean nothing here.
    let lease = local
        .get("coordination.k8s.io/v1", "Lease", NS, "migrated-controller")
        .expect("the Lease");
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{lease}"
    );
    for flag in [
        "--cd-driver=",
        "--zap-stacktrace-level=",
        "--zap-time-encoding=",
    ] {
        assert_eq!(stderr.matches(flag).count(), 1, "{flag}:\n{stderr}");
    }
    // --zap-encoder=json is taken: every line is a JSON object with its level and
    // message (a log pipeline fed the Go manager's JSON keeps parsing lines).
    assert!(!stderr.contains("--zap-encoder"), "{stderr}");
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(
        lines.iter().all(|l| l["level"].is_string()
            && l["timestamp"].is_string()
            && l["fields"]["message"].is_string()),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l["level"] == "WARN"
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("--cd-driver=argocd"))),
        "{stderr}"
    );
    // --otlp-endpoint is taken: spans go there (a collector that does not resolve
    // fails exports, counted and warned about, never the reconcile above).
    assert!(
        stderr.contains("spans are exported over OTLP/HTTP")
            && stderr.contains("http://otel-collector.observability:4318/v1/traces"),
        "{stderr}"
    );
    // The endpoint flags are taken, not warned about.
    for flag in [
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--otlp-endpoint",
    ] {
        assert!(!stderr.contains(flag), "{flag}:\n{stderr}");
    }
    // The reconcile counted, and this replica the leader.
    poll_until("the reconcile and the leadership scraped", || {
        http_get(&metrics, "/metrics").is_some_and(|(_, scraped)| {
            reconciles(&scraped).is_some_and(|n| n >= 1)
                && sample(
                    &scraped,
                    "leader_election_master_status{name=\"migrated-controller\"}",
                ) == Some(1.0)
        })
    })
    .await;
    let (_, scraped) = http_get(&metrics, "/metrics").unwrap();
    assert_eq!(
        sample(
            &scraped,
            "controller_runtime_reconcile_panics_total{controller=\"managedresource\"}"
        ),
        Some(0.0),
        "{scraped}"
    );
    // --max-concurrency as the bound the saturation alert compares with.
    assert_eq!(
        sample(
            &scraped,
            "controller_runtime_max_concurrent_reconciles{controller=\"managedresource\"}"
        ),
        Some(16.0),
        "{scraped}"
    );
    assert_eq!(http_get(&probes, "/readyz").unwrap().0, 200);
}

/// The address logged after `prefix` (`http://<address>/...`).
fn logged_address(log: &str, prefix: &str) -> Option<String> {
    let (_, rest) = log.split_once(prefix)?;
    let (address, _) = rest.split_once('/')?;
    Some(address.to_owned())
}

/// `GET path` from `address` (HTTP/1.1, the connection closed after): the status and
/// body, `None` when nothing answers.
fn http_get(address: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The value of the series `series` (name and labels as written) in `scraped`.
fn sample(scraped: &str, series: &str) -> Option<f64> {
    scraped.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .split(' ')
            .next()?
            .parse()
            .ok()
    })
}

/// `controller_runtime_reconcile_total` summed over its results.
fn reconciles(scraped: &str) -> Option<u64> {
    let results = ["success", "error"].map(|result| {
        sample(
            scraped,
            &format!(
                "controller_runtime_reconcile_total{{controller=\"managedresource\",result=\"{result}\"}}"
            ),
        )
    });
    let [Some(success), Some(error)] = results else {
        return None;
    };
    // Counts: small whole numbers.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Some((success + error) as u64)
}

/// Polls `check` every 20 ms, forever (the caller bounds it).
async fn poll_until_quiet(mut check: impl FnMut() -> bool) {
    while !check() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A child process killed (by its own id) when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
