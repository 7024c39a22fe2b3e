//! kube-construct's metrics over the API emulator: every declared cache's readiness,
//! objects, watch errors and time to sync, and how constructions ended, in the text
//! exposition a Prometheus scrapes.
#![cfg(feature = "metrics")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cluster_id::{ClusterClient, ClusterId};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_construct::cache::Selection;
use kube_construct::client::CachedClient;
use kube_construct::metrics::{CONSTRUCTION_RESULTS, CacheMetrics, RegisterError, register};
use kube_testbed::{Rule, Testbed};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use serde_json::json;
use test_support::poll_until;

fn text(registry: &Registry) -> String {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    text
}

/// The value of the one sample of `series` (name and labels, exactly).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

// Built `from_client`: the cluster cannot be told, and its label is empty.
const CONFIGMAPS: &str = r#"{cluster="",resource="configmaps.v1",cache_namespace="apps",label_selector="app=demo",field_selector=""}"#;
const SECRET: &str = r#"{cluster="",resource="secrets.v1",cache_namespace="apps",label_selector="",field_selector="metadata.name=wanted"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_export_readiness_objects_errors_and_time_to_sync() {
    let tb = Testbed::start().await;
    for i in 0..3 {
        tb.upsert(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "apps", "name": format!("cm-{i}"), "labels": {"app": "demo"}},
        }));
    }
    tb.upsert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "apps", "name": "wanted"}}));
    let mut registry = Registry::default();
    let metrics = CacheMetrics::new(&mut registry);
    tb.set_delay(Duration::from_millis(60));
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps").labels("app=demo"))
        .cache::<Secret>(Selection::object(Some("apps"), "wanted"))
        .metrics(&metrics)
        .from_client(tb.client())
        .await
        .unwrap();
    tb.set_delay(Duration::ZERO);

    let exposed = text(&registry);
    for (family, kind) in [
        ("kube_construct_cache_ready", "gauge"),
        ("kube_construct_cache_objects", "gauge"),
        ("kube_construct_cache_watch_errors", "counter"),
        ("kube_construct_cache_sync_duration_seconds", "histogram"),
        ("kube_construct_client_constructions", "counter"),
    ] {
        assert!(
            exposed.contains(&format!("# TYPE {family} {kind}\n")),
            "{family}:\n{exposed}"
        );
    }
    assert!(exposed.contains("# UNIT kube_construct_cache_sync_duration_seconds seconds\n"));
    for cache in [CONFIGMAPS, SECRET] {
        assert_eq!(
            value(&exposed, &format!("kube_construct_cache_ready{cache}")),
            Some(1.0),
            "{exposed}"
        );
        assert_eq!(
            value(
                &exposed,
                &format!("kube_construct_cache_sync_duration_seconds_count{cache}")
            ),
            Some(1.0),
            "{exposed}"
        );
        // The emulator delayed every response by 60 ms: the list took at least that.
        let took = value(
            &exposed,
            &format!("kube_construct_cache_sync_duration_seconds_sum{cache}"),
        )
        .unwrap();
        assert!((0.06..30.0).contains(&took), "{took} s:\n{exposed}");
    }
    assert_eq!(
        value(
            &exposed,
            &format!("kube_construct_cache_objects{CONFIGMAPS}")
        ),
        Some(3.0)
    );
    assert_eq!(
        value(&exposed, &format!("kube_construct_cache_objects{SECRET}")),
        Some(1.0)
    );
    assert_eq!(
        value(
            &exposed,
            r#"kube_construct_client_constructions_total{cluster="",result="ok"}"#
        ),
        Some(1.0)
    );
    assert_eq!(client.sync_times().count(), 2);

    // A client no longer alive is no longer exported.
    drop(client);
    let exposed = text(&registry);
    assert_eq!(
        value(&exposed, &format!("kube_construct_cache_ready{CONFIGMAPS}")),
        None,
        "{exposed}"
    );

    // A watch that fails: the cache reads not ready with its errors counted, then
    // ready again, with no event needed to export it. (On an emulator of its own, so
    // that the open watches counted are this client's.)
    let tb = Testbed::start().await;
    let client = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps").labels("app=demo"))
        .metrics(&metrics)
        .from_client(tb.client())
        .await
        .unwrap();
    let ready = format!("kube_construct_cache_ready{CONFIGMAPS}");
    assert_eq!(value(&text(&registry), &ready), Some(1.0));
    // Synced means listed; the WATCH that follows must be open before it is dropped.
    poll_until("the cache's watch open", || tb.open_watches() == 1).await;
    tb.fail_next(2, 500);
    tb.drop_watches();
    poll_until("the cache exported not ready", || {
        value(&text(&registry), &ready) == Some(0.0)
    })
    .await;
    let exposed = text(&registry);
    let errors = value(
        &exposed,
        &format!("kube_construct_cache_watch_errors_total{CONFIGMAPS}"),
    );
    assert!(errors.is_some_and(|n| n >= 1.0), "{errors:?}:\n{exposed}");
    poll_until("the cache exported ready again", || {
        value(&text(&registry), &ready) == Some(1.0)
    })
    .await;
    assert_eq!(
        value(
            &text(&registry),
            r#"kube_construct_client_constructions_total{cluster="",result="ok"}"#
        ),
        Some(2.0)
    );
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_construction_is_counted_by_reason_without_the_servers_text() {
    let tb = Testbed::start().await;
    tb.add_token(
        "limited",
        vec![Rule::new(&["get", "list", "watch"], "", "configmaps").namespace("apps")],
    );
    let limited = kube::Client::try_from(tb.config_for_token("limited")).unwrap();
    let mut registry = Registry::default();
    let metrics = CacheMetrics::new(&mut registry);
    let refused = CachedClient::builder()
        .cache::<Secret>(Selection::in_namespace("apps"))
        .metrics(&metrics)
        .from_client(limited)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("403"), "{refused}");
    let too_slow = CachedClient::builder()
        .cache::<ConfigMap>(Selection::in_namespace("apps"))
        .sync_timeout(Duration::from_millis(50))
        .metrics(&metrics);
    tb.set_delay(Duration::from_millis(500));
    too_slow.from_client(tb.client()).await.unwrap_err();
    tb.set_delay(Duration::ZERO);

    let exposed = text(&registry);
    assert_eq!(
        value(
            &exposed,
            r#"kube_construct_client_constructions_total{cluster="",result="forbidden"}"#
        ),
        Some(1.0),
        "{exposed}"
    );
    assert_eq!(
        value(
            &exposed,
            r#"kube_construct_client_constructions_total{cluster="",result="timeout"}"#
        ),
        Some(1.0),
        "{exposed}"
    );
    for line in exposed
        .lines()
        .filter(|l| l.starts_with("kube_construct_client_constructions_total"))
    {
        let result = line
            .split("result=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap();
        assert!(CONSTRUCTION_RESULTS.contains(&result), "{line}");
    }
    assert!(
        !exposed.contains("forbidden:"),
        "no server message in a label:\n{exposed}"
    );
    // Nothing synced, so no sync time and no cache state was exported.
    assert!(
        !exposed.contains("kube_construct_cache_ready{"),
        "{exposed}"
    );
}

/// A client's caches carry its cluster, as svc-tls's Secrets do: two clusters
/// declaring the same cache are two series, each with its own cluster's count, and
/// two clusters sharing a display label are told apart by the fingerprint appended to
/// the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_carry_their_cluster() {
    let mut registry = Registry::default();
    let metrics = CacheMetrics::new(&mut registry);
    let (first, second) = (Testbed::start().await, Testbed::start().await);
    for (tb, count) in [(&first, 3), (&second, 1)] {
        for i in 0..count {
            tb.upsert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "apps", "name": format!("cm-{i}"), "labels": {"app": "demo"}},
            }));
        }
    }
    // A client of the local cluster, and a remote one shown with the same label.
    let local = ClusterId::named("kube-construct-metrics-local");
    let remote = ClusterId::named("kube-construct-metrics-remote")
        .with_label("kube-construct-metrics-local");
    let mut clients = Vec::new();
    for (tb, cluster) in [(&first, &local), (&second, &remote)] {
        clients.push(
            CachedClient::builder()
                .cache::<ConfigMap>(Selection::in_namespace("apps").labels("app=demo"))
                .metrics(&metrics)
                .from_cluster_client(ClusterClient::new(tb.client(), cluster.clone()))
                .await
                .unwrap(),
        );
    }
    let remote_label = format!(
        "kube-construct-metrics-local@{}",
        remote.short_fingerprint()
    );
    let exposed = text(&registry);
    for (cluster, objects) in [
        ("kube-construct-metrics-local", 3.0),
        (remote_label.as_str(), 1.0),
    ] {
        let labels = format!(
            r#"{{cluster="{cluster}",resource="configmaps.v1",cache_namespace="apps",label_selector="app=demo",field_selector=""}}"#
        );
        for (family, expected) in [
            ("kube_construct_cache_objects", objects),
            ("kube_construct_cache_ready", 1.0),
            ("kube_construct_cache_watch_errors_total", 0.0),
            ("kube_construct_cache_sync_duration_seconds_count", 1.0),
        ] {
            assert_eq!(
                value(&exposed, &format!("{family}{labels}")),
                Some(expected),
                "{family} of {cluster}:\n{exposed}"
            );
        }
        assert_eq!(
            value(
                &exposed,
                &format!(
                    r#"kube_construct_client_constructions_total{{cluster="{cluster}",result="ok"}}"#
                )
            ),
            Some(1.0),
            "{exposed}"
        );
    }
    assert_eq!(
        exposed
            .lines()
            .filter(|l| l.starts_with("kube_construct_cache_objects{"))
            .count(),
        2,
        "one series per cluster:\n{exposed}"
    );
    drop(clients);
}

#[test]
fn the_process_metrics_are_registered_once() {
    let mut registry = Registry::default();
    let first = register(&mut registry).unwrap();
    assert!(CacheMetrics::process().is_some());
    let mut other = Registry::default();
    assert_eq!(
        register(&mut other).unwrap_err(),
        RegisterError::AlreadyRegistered
    );
    assert!(
        text(&other).trim() == "# EOF",
        "nothing registered:\n{}",
        text(&other)
    );
    drop(first);
}
