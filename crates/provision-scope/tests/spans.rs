//! Tracing follows the scope: events inside a scope (also in spawned children) are
//! recorded inside the `cluster` span naming the cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::sync::{Arc, Mutex};

use provision_scope::{self as scope, Cluster, ResourceIdentifier};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn client(tag: &str) -> kube::Client {
    let mut config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    config.default_namespace = tag.to_owned();
    kube::Client::try_from(config).unwrap()
}

/// The root of a tree: a client with the identity of its (local) cluster.
fn root(tag: &str) -> scope::ClusterClient {
    scope::ClusterClient::new(client(tag), scope::ClusterId::named("local"))
}

/// The log line whose message is `message`.
fn line(log: &str, message: &str) -> String {
    log.lines()
        .find(|l| l.ends_with(message))
        .unwrap_or_else(|| panic!("no line ending {message:?} in\n{log}"))
        .to_owned()
}

// Current-thread runtime: the subscriber is set for this thread only, and spawned
// tasks run on it too.
// The join handle deliberately escapes the scope it was spawned in.
#[allow(clippy::async_yields_async)]
#[tokio::test]
async fn events_are_recorded_in_the_scoped_cluster_span() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let wl_id = ResourceIdentifier::new("kubernetes")
        .with_label("k", "wl")
        .with_label("o", "org");
    let wl = Cluster::remote(client("wl"), wl_id, "10.0.0.7", 6443);

    scope::with_root(root("cp"), async {
        tracing::info!("at-root");
        scope::with_namespace(
            "ns-a",
            scope::with_cluster(wl, async {
                tracing::info!("in-workload");
                let spawned = scope::spawn(async { tracing::info!("in-spawned") });
                // Leave the scope before the child runs: it keeps the span of its spawn site.
                spawned
            }),
        )
        .await
        .await
        .unwrap();
        tokio::spawn(async { tracing::info!("in-plain-spawn") })
            .await
            .unwrap();
        scope::sync_with_namespace("ns-b", || tracing::info!("in-sync"));
    })
    .await;

    let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let root = line(&log, "at-root");
    assert!(root.contains("cluster{cluster.id=\"local\"}"), "{root}");

    for message in ["in-workload", "in-spawned"] {
        let l = line(&log, message);
        assert!(l.contains("cluster.id=\"kubernetes-wl:org\""), "{l}");
        assert!(l.contains("cluster.host=\"10.0.0.7\""), "{l}");
        assert!(l.contains("cluster.port=6443"), "{l}");
        assert!(l.contains("namespace{namespace=\"ns-a\"}"), "{l}");
    }

    let plain = line(&log, "in-plain-spawn");
    assert!(!plain.contains("cluster{"), "{plain}");

    let sync = line(&log, "in-sync");
    assert!(
        sync.contains("cluster{cluster.id=\"local\"}")
            && sync.contains("namespace{namespace=\"ns-b\"}"),
        "{sync}"
    );
}
