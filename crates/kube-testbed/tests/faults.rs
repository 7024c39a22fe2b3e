//! Watch semantics and fault injection, driven through kube-rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube_testbed::{Fault, Testbed, TestbedOptions};
use test_support::poll_until;

mod support;
use serde_json::json;
use support::api_status;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_string());
    c
}

async fn next<S: futures::Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("no watch event in time")
        .expect("watch stream ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_list_rv_delivers_exactly_later_events_and_bookmarks() {
    let tb = Testbed::start_with(TestbedOptions {
        bookmark_interval: Duration::from_millis(50),
        ..Default::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &cm("after-1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("after-2"))
        .await
        .unwrap();

    let mut w = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let mut names = Vec::new();
    while names.len() < 2 {
        match next(&mut w).await.unwrap() {
            WatchEvent::Added(c) => names.push(c.metadata.name.unwrap()),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["after-1", "after-2"]);
    // then periodic bookmarks carrying the current resourceVersion
    loop {
        if let WatchEvent::Bookmark(b) = next(&mut w).await.unwrap() {
            assert_eq!(
                b.metadata.resource_version,
                tb.resource_version().to_string()
            );
            break;
        }
    }

    // label-filtered watch: a label change in and out of the selector is ADDED / DELETED
    let mut sel = api
        .watch(
            &WatchParams::default().labels("team=a"),
            &tb.resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before", "namespace": "default", "labels": {"team": "a"}}}));
    assert!(matches!(
        next(&mut sel).await.unwrap(),
        WatchEvent::Added(_)
    ));
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before", "namespace": "default", "labels": {"team": "b"}}}));
    assert!(matches!(
        next(&mut sel).await.unwrap(),
        WatchEvent::Deleted(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_history_gives_410_and_the_watcher_relists() {
    let tb = Testbed::start().await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let old_rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();

    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    // initial list
    loop {
        if let watcher::Event::InitDone = next(&mut events).await.unwrap() {
            break;
        }
    }
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    assert!(
        matches!(next(&mut events).await.unwrap(), watcher::Event::Apply(c) if c.metadata.name.as_deref() == Some("b"))
    );

    tb.expire_history();
    // the open watch is told 410 ...
    match next(&mut events).await {
        Err(watcher::Error::WatchError(s)) => assert_eq!(s.code, 410),
        other => panic!("expected a 410 watch error, got {other:?}"),
    }
    // ... and the watcher relists, seeing both objects again
    assert!(matches!(
        next(&mut events).await.unwrap(),
        watcher::Event::Init
    ));
    let mut relisted = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::InitApply(c) => relisted.push(c.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    relisted.sort();
    assert_eq!(relisted, ["a", "b"]);
    api.create(&PostParams::default(), &cm("c")).await.unwrap();
    assert!(
        matches!(next(&mut events).await.unwrap(), watcher::Event::Apply(c) if c.metadata.name.as_deref() == Some("c"))
    );

    // a fresh WATCH from the old resourceVersion is 410 Gone (as an ERROR event)
    let mut w = api
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut w).await.unwrap() {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_history_window_gives_410() {
    let tb = Testbed::start_with(TestbedOptions {
        history_limit: 3,
        ..Default::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    let rv = tb.resource_version().to_string();
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    let mut w = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next(&mut w).await.unwrap(), WatchEvent::Error(e) if e.code == 410));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_and_timeouts_end_streams() {
    let tb = Testbed::start().await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    let rv = tb.resource_version().to_string();
    let mut w = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("x")).await.unwrap();
    assert!(matches!(next(&mut w).await.unwrap(), WatchEvent::Added(_)));
    tb.inject(Fault::DropWatches);
    let end = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .expect("stream did not end");
    assert!(end.is_none(), "expected the stream to end, got {end:?}");

    let mut w = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next(&mut w).await.unwrap(), WatchEvent::Added(_)));
    let end = tokio::time::timeout(Duration::from_secs(10), w.try_next())
        .await
        .expect("timeoutSeconds not honoured");
    assert!(matches!(end, Ok(None)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_next_and_delay() {
    let tb = Testbed::start().await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    tb.fail_next(2, 500);
    assert_eq!(api_status(api.get_opt("x").await.unwrap_err()).code, 500);
    assert_eq!(api_status(api.get_opt("x").await.unwrap_err()).code, 500);
    assert!(api.get_opt("x").await.unwrap().is_none());

    tb.set_delay(Duration::from_secs(30));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), api.get_opt("x"))
            .await
            .is_err()
    );
    tb.set_delay(Duration::ZERO);
    assert!(api.get_opt("x").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_next_with_sends_the_message_as_given() {
    let tb = Testbed::start().await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    let message = format!("bad\nERROR forged line \u{1b}[31m{}", "x".repeat(20 * 1024));
    tb.inject(Fault::FailNextWith {
        count: 2,
        status: 422,
        message: message.clone(),
    });
    for _ in 0..2 {
        let status = api_status(api.get_opt("x").await.unwrap_err());
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert_eq!(status.message, message);
    }
    assert!(api.get_opt("x").await.unwrap().is_none());

    // A plain fail_next afterwards uses the emulator's own words again.
    tb.fail_next_with(1, 500, "theirs");
    tb.fail_next(1, 500);
    let status = api_status(api.get_opt("x").await.unwrap_err());
    assert_eq!(status.message, "injected failure (500 InternalError)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_restart_keep_or_reset_state() {
    let tb = Testbed::start().await;
    let url = tb.base_url();
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    api.create(&PostParams::default(), &cm("kept"))
        .await
        .unwrap();

    tb.stop().await;
    assert!(
        api.get("kept").await.is_err(),
        "a stopped testbed must not answer"
    );

    tb.restart(true).await;
    assert_eq!(tb.base_url(), url);
    let fresh: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    assert!(fresh.get("kept").await.is_ok());

    tb.restart(false).await;
    let fresh: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    assert!(fresh.get_opt("kept").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_directory_works_with_kube() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = tb.write_in_cluster_dir(dir.path());
    assert_eq!(env.host, "127.0.0.1");
    assert_eq!(env.port, tb.port());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("namespace")).unwrap(),
        "default"
    );
    // the files make a working config (what kube's in-cluster loader reads)
    let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "c", "cluster": {
                "server": format!("https://{}:{}", env.host, env.port),
                "certificate-authority": dir.path().join("ca.crt"),
            }}],
            "users": [{"name": "u", "user": {"tokenFile": dir.path().join("token")}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
    }))
    .unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    assert!(api.get_opt("nothing").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_follows_a_restart_that_resets_state() {
    use kube::runtime::{WatchStreamExt, reflector};
    let tb = Testbed::start().await;
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    api.create(&PostParams::default(), &cm("old"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(api.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    assert_eq!(reader.state().len(), 1);

    // a server that lost its state: the watch resumes from a resourceVersion that
    // no longer exists, gets 410, relists and sees the new state only
    tb.restart(false).await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new", "namespace": "default"}}));
    let names = || -> Vec<String> {
        reader
            .state()
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect()
    };
    poll_until("the relist to hold only the new state", || {
        names() == ["new"]
    })
    .await;
    assert_eq!(names(), ["new"]);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_then_watch_under_concurrent_writes_has_no_gaps_or_replays() {
    use std::collections::BTreeMap;
    let tb = std::sync::Arc::new(Testbed::start().await);
    let api: Api<ConfigMap> = Api::namespaced(tb.client(), "default");
    // The writer runs before, during and after the LIST: it writes until the list
    // has been taken and then 100 more times, so the watch must deliver events
    // after the list's resourceVersion (asserted below, not left to timing).
    let writes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = tokio::spawn({
        let tb = tb.clone();
        let writes = writes.clone();
        let listed = listed.clone();
        async move {
            let mut after_list = 0;
            for i in 0.. {
                let name = format!("c{}", i % 17);
                if i % 5 == 4 {
                    tb.delete("v1", "ConfigMap", "default", &name);
                } else {
                    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": "default"}, "data": {"i": i.to_string()}}));
                }
                writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if listed.load(std::sync::atomic::Ordering::SeqCst) {
                    after_list += 1;
                    if after_list >= 100 && i >= 300 {
                        break;
                    }
                }
                if i % 10 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }
    });
    // snapshot mid-way, then follow the watch from the snapshot's resourceVersion
    test_support::poll_until("the writer has started", || {
        writes.load(std::sync::atomic::Ordering::SeqCst) >= 50
    })
    .await;
    let list = api.list(&ListParams::default()).await.unwrap();
    listed.store(true, std::sync::atomic::Ordering::SeqCst);
    let list_rv: u64 = list
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    let mut state: BTreeMap<String, String> = list
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.unwrap(),
                c.metadata.resource_version.unwrap(),
            )
        })
        .collect();
    let mut w = api
        .watch(&WatchParams::default(), &list_rv.to_string())
        .await
        .unwrap()
        .boxed();
    writer.await.unwrap();
    let final_rv = tb.resource_version();
    assert!(
        list_rv < final_rv,
        "the list saw resourceVersion {list_rv}, the last write {final_rv}: no write came after the list"
    );
    let mut last = list_rv;
    while last < final_rv {
        let (name, rv, deleted) = match next(&mut w).await.unwrap() {
            WatchEvent::Added(c) | WatchEvent::Modified(c) => (
                c.metadata.name.unwrap(),
                c.metadata.resource_version.unwrap(),
                false,
            ),
            WatchEvent::Deleted(c) => (
                c.metadata.name.unwrap(),
                c.metadata.resource_version.unwrap(),
                true,
            ),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("{e:?}"),
        };
        let n: u64 = rv.parse().unwrap();
        assert!(
            n > last,
            "event rv {n} not after {last}: replayed or out of order"
        );
        last = n;
        if deleted {
            state.remove(&name);
        } else {
            state.insert(name, rv);
        }
    }
    let truth: BTreeMap<String, String> = tb
        .list("v1", "ConfigMap")
        .into_iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_string(),
                c["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        state, truth,
        "list + watch must reproduce the final state exactly"
    );
}
