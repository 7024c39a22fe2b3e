//! What per-peer metrics and OpenTelemetry tracing cost a request and a handshake
//! (issue 52), every arm in interleaved rounds in this one process (the order
//! reversed every other round), so each ratio is paired round by round.
//!
//! Requests, `telemetry/get/<arm>`: one `GET` through a `PeerClient` on its
//! kept-alive HTTP/1.1 connection to a local HTTPS server (test-support's
//! `VerifyingServer`, requiring and verifying the client certificate, on a runtime
//! of its own), the body read; each request inside an application span
//! (`bench.call`, info), as a handler's call to a peer runs. The client is a
//! current-thread runtime on this thread, under the arm's `tracing` subscriber
//! (`tracing::dispatcher::with_default`, so the server's threads see none). Each
//! arm has its own `PeerClient` and connection; the code is the same, only what is
//! installed differs:
//! - `plain`: no recorder, no subscriber (the span is disabled);
//! - `metrics`: the client's `PeerTls` with svc-tls's Prometheus peer recorder
//!   (`Metrics::peer_recorder`, what `PeerTls::from_options` attaches once
//!   `svc_tls::metrics` is installed): `svc_tls_peer_*` per request, no subscriber;
//! - `otel-off`: the `otel` feature compiled in (it is in every arm: one process
//!   builds svc-tls once) and a subscriber as a service has one (tracing-subscriber's
//!   registry at INFO), but no OpenTelemetry layer: the application span is a real
//!   span, and `PeerClient::send` finds no OpenTelemetry context in it;
//! - `otel-paid`: the same subscriber with `tracing-opentelemetry`'s layer over an
//!   SDK tracer (batch processor, as `telemetry::install` builds it) whose exporter
//!   drops every span, and the W3C propagator: two OpenTelemetry spans per request
//!   (the application's and `svc_tls.peer.request`) and `traceparent` on the wire
//!   (checked at the server).
//!
//! Handshakes, `telemetry/handshake/<arm>`: the handshake rows' client
//! (`handshake.rs`: TCP connect, full TLS 1.3 handshake with svc-tls's
//! `client_config` over a watched identity Secret and a watched CA Secret, one byte
//! from the server, close) against an in-process rustls server, under the
//! `otel-off` subscriber (`off`) and the `otel-paid` one (`otel`), with no span
//! around the handshake: the handshake path makes no span, so the layer should cost
//! nothing there.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

use common::tls::{certs, provider, serve, server_config};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use svc_tls::client::{PeerClient, PeerTls, TrustMode, client_config};
use svc_tls::identity::{IdentityResolver, IdentitySettings};
use svc_tls::options::SecretRef;
use svc_tls::trust::{TrustSettings, TrustVerifier};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tracing::{Dispatch, Instrument as _};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;

use common::go::{Arm, interleave, size, time};

const NS: &str = "bench";
const CASE: &str = "p256-pkcs8";
/// The name the server is reached by (its certificate's IP SAN).
const IP_NAME: &str = "127.0.0.1";

/// An exporter that drops every batch, counting the spans it was handed.
#[derive(Debug, Default)]
struct DropExporter(Arc<AtomicU64>);

impl SpanExporter for DropExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn upsert(testbed: &kube_testbed::Testbed, secret: k8s_openapi::api::core::v1::Secret) {
    let mut value = serde_json::to_value(secret).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    testbed.upsert(value);
}

/// One GET in the application span: the body (`traced` when the request carried a
/// `traceparent`, else `plain`).
async fn get(peer: &PeerClient, url: &str) -> String {
    async {
        // `PeerClient::send`: where the recorder and the client span are.
        let response = peer.send(peer.get(url).unwrap()).await.unwrap();
        assert!(response.status().is_success());
        String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap()
    }
    .instrument(tracing::info_span!("bench.call"))
    .await
}

/// Runs `f` under `dispatch` (on this thread), or under no subscriber.
fn under<T>(dispatch: Option<&Dispatch>, f: impl FnOnce() -> T) -> T {
    match dispatch {
        Some(dispatch) => tracing::dispatcher::with_default(dispatch, f),
        None => f(),
    }
}

async fn handshake(config: &Arc<ClientConfig>, addr: SocketAddr) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from(IP_NAME).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    // The server's byte arrives only after it has verified our certificate.
    tls.read_exact(&mut byte).await.unwrap();
    assert_eq!(&byte, b"k");
}

fn main() {
    let material = common::material();
    let quick = common::quick();
    let (rounds, target) = if quick {
        (4, Duration::from_millis(5))
    } else {
        (30, Duration::from_millis(40))
    };
    // The server, the API emulator and the watches: a runtime of their own, off this
    // thread (no subscriber there).
    let bg = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // The client: this thread.
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let testbed = bg.block_on(kube_testbed::Testbed::start());
    let case = material.case(CASE);
    upsert(
        &testbed,
        common::secret(NS, "telemetry-client", &case.cert_pem, &case.key_pem),
    );
    let mut ca = common::secret(NS, "telemetry-server-ca", &material.server_ca_pem, "");
    ca.data.get_or_insert_default().insert(
        "ca.crt".into(),
        k8s_openapi::ByteString(material.server_ca_pem.clone().into()),
    );
    ca.data.get_or_insert_default().remove("tls.key");
    upsert(&testbed, ca);
    let (resolver, trust) = bg.block_on(async {
        let resolver =
            IdentityResolver::builder(testbed.client(), SecretRef::new(NS, "telemetry-client"))
                .provider(provider())
                .settings(IdentitySettings::default().sync_timeout(Duration::from_secs(30)))
                .build()
                .await
                .unwrap();
        let trust =
            TrustVerifier::builder(testbed.client(), SecretRef::new(NS, "telemetry-server-ca"))
                .provider(provider())
                .settings(TrustSettings::default().sync_timeout(Duration::from_secs(30)))
                .build()
                .await
                .unwrap();
        (resolver, trust)
    });

    // The HTTPS server: the bench's server certificate, callers verified against the
    // client CA, kept-alive HTTP/1.1; it answers whether the request carried a
    // `traceparent`.
    let server = bg.block_on(
        test_support::tls_server::VerifyingServer::builder(&common::ca(), &common::ca())
            .server_chain(certs(&material.server_cert_pem), &material.server_key_pem)
            .client_roots(certs(&material.client_ca_pem))
            .alpn(&[b"http/1.1"])
            .keep_alive(true)
            .keep_seen(false)
            .handler(Arc::new(|_, parts| test_support::tls_server::Reply {
                status: 200,
                body: if parts.headers.contains_key("traceparent") {
                    "traced"
                } else {
                    "plain"
                }
                .to_owned(),
            }))
            .start(),
    );
    let url = server.url();

    // The subscribers: as a service has one (INFO), with and without the layer.
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let exported = Arc::new(AtomicU64::new(0));
    let tracer_provider = SdkTracerProvider::builder()
        .with_batch_exporter(DropExporter(exported.clone()))
        .build();
    let off = Dispatch::new(tracing_subscriber::registry().with(LevelFilter::INFO));
    let paid = Dispatch::new(
        tracing_subscriber::registry()
            .with(LevelFilter::INFO)
            .with(tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("bench"))),
    );

    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = svc_tls::metrics::Metrics::new(&mut registry);
    let tls = PeerTls::new(
        provider(),
        TrustMode::Watched(trust.clone()),
        Some(resolver.clone()),
    )
    .with_host(url.parse().unwrap());
    let arms: [(&str, PeerClient, Option<&Dispatch>, &str); 4] = [
        ("plain", tls.private_client().unwrap(), None, "plain"),
        (
            "metrics",
            tls.clone()
                .with_request_recorder(metrics.peer_recorder())
                .private_client()
                .unwrap(),
            None,
            "plain",
        ),
        (
            "otel-off",
            tls.private_client().unwrap(),
            Some(&off),
            "plain",
        ),
        (
            "otel-paid",
            tls.private_client().unwrap(),
            Some(&paid),
            "traced",
        ),
    ];
    // Each arm's connection opened, and what reached the server checked.
    for (arm, peer, dispatch, want) in &arms {
        let got = under(*dispatch, || client_rt.block_on(get(peer, &url)));
        assert_eq!(&got, want, "{arm}: traceparent at the server");
    }
    let per_batch = size(
        || {
            client_rt.block_on(get(&arms[0].1, &url));
        },
        target,
    );
    let timed: Vec<Arm<'_>> = arms
        .iter()
        .map(|(_, peer, dispatch, _)| {
            let (client_rt, url) = (&client_rt, &url);
            Box::new(move || {
                under(*dispatch, || {
                    time(per_batch, || {
                        client_rt.block_on(get(peer, url));
                    })
                })
            }) as Arm<'_>
        })
        .collect();
    let handshakes_before = server.handshakes();
    let samples = interleave(rounds, timed);
    assert_eq!(
        server.handshakes(),
        handshakes_before,
        "every request rode its kept-alive connection"
    );
    common::emit_paired(
        "telemetry",
        "get",
        &arms
            .iter()
            .zip(samples)
            .map(|((arm, ..), samples)| (format!("telemetry/get/{arm}"), samples))
            .collect::<Vec<_>>(),
    );

    // Handshakes, with and without the layer.
    let server_config = server_config(&material);
    let addr = bg.block_on(serve(Arc::new(server_config)));
    let config = Arc::new(
        client_config(
            provider(),
            TrustMode::Watched(trust.clone()),
            Some(&resolver),
        )
        .unwrap(),
    );
    let handshake_arms = [("off", &off), ("otel", &paid)];
    let n = size(|| client_rt.block_on(handshake(&config, addr)), target);
    let spans_before = {
        let _ = tracer_provider.force_flush();
        exported.load(Ordering::Relaxed)
    };
    let timed: Vec<Arm<'_>> = handshake_arms
        .iter()
        .map(|(_, dispatch)| {
            let (client_rt, config) = (&client_rt, &config);
            Box::new(move || {
                tracing::dispatcher::with_default(dispatch, || {
                    time(n, || client_rt.block_on(handshake(config, addr)))
                })
            }) as Arm<'_>
        })
        .collect();
    let samples = interleave(rounds, timed);
    let _ = tracer_provider.force_flush();
    assert_eq!(
        exported.load(Ordering::Relaxed),
        spans_before,
        "a handshake made a span"
    );
    assert!(spans_before > 0, "the paid arm exported no span");
    common::emit_paired(
        "telemetry",
        "handshake",
        &handshake_arms
            .iter()
            .zip(samples)
            .map(|((arm, _), samples)| (format!("telemetry/handshake/{arm}"), samples))
            .collect::<Vec<_>>(),
    );

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    // Every request of the metrics arm counted (its series were created at zero).
    let counted: f64 = text
        .lines()
        .filter(|line| line.starts_with("svc_tls_peer_requests_total{") && line.contains("2xx"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        counted > (rounds * per_batch) as f64,
        "the metrics arm recorded {counted} requests: {text}"
    );
    assert_eq!(resolver.state().failures, 0);
    assert_eq!(trust.state().failures, 0);
    drop(arms);
    drop(server);
    drop(testbed);
}
