//! kube-client logs a response body it cannot decode raw (`Client::request`'s
//! `warn!("{}, {:?}", text, e)`): with `RawBodyFilter` on the log's layer, none of a
//! hostile API server's body (bidi controls, ANSI escapes, newlines forging records,
//! a long body) reaches the log, while the watch still says, escaped, that it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube_testbed::Testbed;
use test_support::logs::CapturedLogs;
use test_support::poll_until;
use tracing_subscriber::prelude::*;
use watch_ready::{Health, RawBodyFilter, WatchLimits, Watched, observe_bounded};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_list_body_never_reaches_the_log() {
    let logs = CapturedLogs::new();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
            .with_filter(RawBodyFilter),
    );
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let tb = Testbed::start().await;
    let mut body = String::from(
        "{\"kind\":\"SecretList\",\"items\":[\u{202e}EVIL-BIDI \u{1b}[31mEVIL-ANSI\n2026-01-01T00:00:00Z ERROR EVIL-FORGED ",
    );
    body.push_str(&"EVIL-PAD ".repeat(4096));
    tb.reply_next_with(3, 200, body);
    let health = Health::new("Secret ns/s");
    let limits = WatchLimits::default();
    let api: Api<Secret> = Api::namespaced(observe_bounded(&tb.client(), &health, &limits), "ns");
    let watched = Watched::spawn_one(api, "ns", "s", (), health, limits, |_: &mut Secret| {});
    poll_until("the hostile lists failed and the watch synced", || {
        watched.health().status().errors >= 3 && watched.is_synced()
    })
    .await;
    let text = logs.text();
    assert!(text.contains("watch not synced yet"), "{text:.2000}");
    for raw in ["EVIL", "\u{202e}", "\u{1b}"] {
        assert!(!text.contains(raw), "{raw:?} reached the log: {text:.2000}");
    }
}
