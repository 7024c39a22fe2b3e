//! The controller as the Go manager ran it: leader election over a real
//! kube-apiserver (two, then three replicas in-process: only the leader reconciles; the
//! leader killed, another takes over within the lease duration; the leader stopped,
//! the Lease is released and another takes over at once), a bound on concurrent
//! reconciles, and a panicking reconcile recovered, counted and requeued.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams};
use kube_construct::{
    ClusterId,
    client::CachedClient,
    types::{ConditionType, StatusConditionReader as _, fake::ManagedResource},
};
use kube_runtime::controller::Action;
use kube_testbed::{KindSpec, Testbed};
use migrated_controller::{
    Context, Counters, Manager, ReconcileError, RunError, Settings, client_builder,
    leader::LeaderElection, reconcile, run_with,
};
use serde_json::json;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use test_support::{POLL_LIMIT, poll_until};

const LEASE: &str = "migrated-controller";
const LEASE_DURATION: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_secs(1);
const RETRY_PERIOD: Duration = Duration::from_millis(250);

fn settings(namespace: &str) -> Settings {
    Settings {
        namespace: namespace.to_owned(),
        peer: PeerOptions::new("region").with_host("https://127.0.0.1:9".parse().unwrap()),
        identity: ClientIdentityOptions::new(None).with_secret(namespace, "identity"),
        path: "api/v1/regions".to_owned(),
        sync_timeout: Duration::from_secs(30),
        destinations: provision_scope::Destinations::new().allow_loopback(),
    }
}

/// One replica of the controller, in-process.
struct Replica {
    name: &'static str,
    client: CachedClient,
    counters: Arc<Counters>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), RunError>>,
}

/// Starts a replica electing over `LEASE` in `namespace` of `kube`, reconciling with
/// the example's own reconcile (its resources name no cluster: each reconcile writes
/// the failure into the condition).
async fn replica(kube: kube::Client, namespace: &str, name: &'static str) -> Replica {
    let settings = settings(namespace);
    let client = client_builder(&settings)
        .from_client_identified(kube, ClusterId::named("local"))
        .await
        .unwrap();
    let manager = Manager {
        max_concurrency: 4,
        leader_election: Some(
            LeaderElection::new(namespace, LEASE)
                .with_identity(name)
                .with_timings(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
        ),
    };
    let counters = Arc::new(Counters::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run_with(
        client.clone(),
        settings,
        manager,
        Arc::clone(&counters),
        async {
            let _ = stopped.await;
        },
        reconcile,
    ));
    Replica {
        name,
        client,
        counters,
        stop,
        task,
    }
}

/// Waits (bounded) until `check` answers true; `check` may ask the API server.
async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let waited = tokio::time::timeout(POLL_LIMIT, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for: {what}");
}

/// The `ManagedResource` CRD (open schema, the status subresource), served.
async fn serve_managed_resources(server: &real_apiserver::RealServer, namespace: &str) {
    use real_apiserver::ApiServerUnderTest as _;
    server
        .apply(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "managedresources.unikorn.unikorn-cloud.org"},
            "spec": {
                "group": "unikorn.unikorn-cloud.org",
                "scope": "Namespaced",
                "names": {
                    "kind": "ManagedResource", "listKind": "ManagedResourceList",
                    "plural": "managedresources", "singular": "managedresource",
                },
                "versions": [{
                    "name": "v1alpha1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    }},
                }],
            },
        }))
        .await;
    let api: Api<ManagedResource> = Api::namespaced(server.client(), namespace);
    wait_for("the ManagedResource CRD served", || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.is_ok() }
    })
    .await;
}

fn resource(namespace: &str, name: &str) -> ManagedResource {
    let mut resource = ManagedResource::new(name);
    resource.metadata.namespace = Some(namespace.to_owned());
    resource
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_another_takes_over_on_a_real_api_server() {
    let server = real_apiserver::shared();
    let ns = "leader-election";
    server.ensure_namespace(ns).await.unwrap();
    serve_managed_resources(server, ns).await;
    let leases: Api<Lease> = Api::namespaced(server.client(), ns);
    let objects: Api<ManagedResource> = Api::namespaced(server.client(), ns);
    objects
        .create(&PostParams::default(), &resource(ns, "widget-1"))
        .await
        .unwrap();

    // A first: it leads, and reconciles (its status write is on the API server).
    let a = replica(server.client(), ns, "replica-a").await;
    poll_until("replica-a reconciles", || a.counters.reconciles() >= 1).await;
    assert!(a.counters.leading());
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-a"));
    wait_for("the status written by the leader", || {
        let objects = objects.clone();
        async move {
            objects
                .get("widget-1")
                .await
                .is_ok_and(|o| o.status_condition_read(&ConditionType::Available).is_ok())
        }
    })
    .await;

    // B joins: it has the objects in its cache but never reconciles them.
    let b = replica(server.client(), ns, "replica-b").await;
    objects
        .create(&PostParams::default(), &resource(ns, "widget-2"))
        .await
        .unwrap();
    let a_before = a.counters.reconciles();
    poll_until("the leader reconciles the new object", || {
        a.counters.reconciles() > a_before
    })
    .await;
    poll_until("the follower's cache holds the new object", || {
        b.client
            .get::<ManagedResource>(Some(ns), "widget-2")
            .unwrap()
            .is_some()
    })
    .await;
    assert_eq!(b.counters.reconciles(), 0, "the follower reconciled");
    assert!(!b.counters.leading(), "the follower counts itself leader");

    // Kill the leader (no release): B takes the Lease once it expires.
    let killed = Instant::now();
    a.task.abort();
    assert!(a.task.await.unwrap_err().is_cancelled());
    drop(a.stop);
    poll_until("replica-b takes over", || b.counters.reconciles() >= 1).await;
    let failover = killed.elapsed();
    println!(
        "failover after the leader was killed: {failover:?} (lease duration {LEASE_DURATION:?}, retry period {RETRY_PERIOD:?})"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"));
    assert!(b.counters.leading());
    // B saw A's last renewal (sent before the kill) within a retry period of it, and
    // takes the Lease once it has seen it unchanged for the lease duration, at its next
    // try: within the lease duration of A's last renewal, plus two jittered retry
    // periods and the start of B's controller.
    assert!(
        failover <= LEASE_DURATION + RETRY_PERIOD.mul_f64(2.4) + Duration::from_millis(500),
        "{failover:?}"
    );
    let a_reconciles = a.counters.reconciles();

    // C joins; B stops gracefully and releases the Lease: C takes it at its next try,
    // well within the lease duration.
    let c = replica(server.client(), ns, "replica-c").await;
    poll_until("the new replica's cache is synced", || {
        c.client
            .get::<ManagedResource>(Some(ns), "widget-2")
            .unwrap()
            .is_some()
    })
    .await;
    assert_eq!(c.counters.reconciles(), 0, "a follower reconciled");
    let stopped = Instant::now();
    b.stop.send(()).unwrap();
    tokio::time::timeout(POLL_LIMIT, b.task)
        .await
        .expect("the leader stops on shutdown")
        .unwrap()
        .unwrap();
    assert!(
        !b.counters.leading(),
        "a stopped leader counts itself leader"
    );
    poll_until("replica-c takes over", || c.counters.reconciles() >= 1).await;
    let handover = stopped.elapsed();
    println!("handover after the leader stopped and released the Lease: {handover:?}");
    assert!(
        handover < LEASE_DURATION,
        "{handover:?}: the Lease was not released"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-c"));

    println!(
        "reconciles per replica: replica-a={a_reconciles}, {}={}, {}={}",
        b.name,
        b.counters.reconciles(),
        c.name,
        c.counters.reconciles()
    );
    c.stop.send(()).unwrap();
    tokio::time::timeout(POLL_LIMIT, c.task)
        .await
        .expect("the leader stops on shutdown")
        .unwrap()
        .unwrap();
}

/// The local cluster: an emulator serving `ManagedResource`.
async fn local_cluster(ns: &str) -> Testbed {
    let local = Testbed::start().await;
    local.register_kind(KindSpec::namespaced(
        "unikorn.unikorn-cloud.org",
        "v1alpha1",
        "ManagedResource",
        "managedresources",
    ));
    local.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    local
}

async fn local_client(local: &Testbed, ns: &str) -> CachedClient {
    client_builder(&settings(ns))
        .from_client_identified(local.client(), ClusterId::named("local"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_reconcile_is_recovered_counted_and_requeued() {
    let ns = "platform";
    let local = local_cluster(ns).await;
    let client = local_client(&local, ns).await;
    let bombs = Arc::new(AtomicU64::new(0));
    let fine = Arc::new(AtomicU64::new(0));
    let reconciler = {
        let (bombs, fine) = (Arc::clone(&bombs), Arc::clone(&fine));
        move |object: Arc<ManagedResource>, _: Arc<Context>| {
            let (bombs, fine) = (Arc::clone(&bombs), Arc::clone(&fine));
            async move {
                if object.metadata.name.as_deref() == Some("bomb") {
                    // Only the first reconcile panics.
                    assert!(bombs.fetch_add(1, Ordering::SeqCst) > 0, "boom");
                } else {
                    fine.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, ReconcileError>(Action::await_change())
            }
        }
    };
    let counters = Arc::new(Counters::default());
    let task = tokio::spawn(run_with(
        client.clone(),
        settings(ns),
        Manager::default(),
        Arc::clone(&counters),
        std::future::pending(),
        reconciler,
    ));
    client.create(&resource(ns, "bomb")).await.unwrap();
    poll_until("the panic recovered and counted", || counters.panics() == 1).await;
    // Requeued: reconciled again, without panicking.
    poll_until("the object requeued", || bombs.load(Ordering::SeqCst) >= 2).await;
    // The controller goes on with other objects.
    client.create(&resource(ns, "fine")).await.unwrap();
    poll_until("another object reconciled", || {
        fine.load(Ordering::SeqCst) >= 1
    })
    .await;
    assert_eq!(counters.panics(), 1);
    // A panic is an error too, as controller-runtime counts it.
    assert!(counters.errors() >= 1);
    poll_until("the requeued reconcile counted as a success", || {
        counters.succeeded() >= 2
    })
    .await;
    assert!(!task.is_finished());
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_bounds_running_reconciles() {
    let ns = "platform";
    let local = local_cluster(ns).await;
    let client = local_client(&local, ns).await;
    let (open, gate) = tokio::sync::watch::channel(false);
    let reconciler = move |_: Arc<ManagedResource>, _: Arc<Context>| {
        let mut gate = gate.clone();
        async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok::<_, ReconcileError>(Action::await_change())
        }
    };
    let counters = Arc::new(Counters::default());
    let manager = Manager {
        max_concurrency: 2,
        leader_election: None,
    };
    let task = tokio::spawn(run_with(
        client.clone(),
        settings(ns),
        manager,
        Arc::clone(&counters),
        std::future::pending(),
        reconciler,
    ));
    for i in 0..5 {
        client
            .create(&resource(ns, &format!("r{i}")))
            .await
            .unwrap();
    }
    poll_until("all five objects cached, two reconciles running", || {
        counters.running() == 2
            && (0..5).all(|i| {
                client
                    .get::<ManagedResource>(Some(ns), &format!("r{i}"))
                    .unwrap()
                    .is_some()
            })
    })
    .await;
    open.send(true).unwrap();
    poll_until("all five reconciled", || {
        counters.reconciles() == 5 && counters.running() == 0
    })
    .await;
    assert_eq!(counters.most_running(), 2);
    task.abort();
}
