//! What the trace tests share: one server CA and one client CA, a Rust mTLS service
//! served by `svc_tls::serving::serve`, and a `PeerClient` built from the deployed
//! flags (its identity and CA in Secrets of the API emulator).
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use kube_testbed::Testbed;
use svc_tls::client::{PeerClient, PeerTls};
use svc_tls::identity::IdentityResolver;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::origin::SecretRef;
use svc_tls::serving::ServerTls;
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::trust::TrustVerifier;
use svc_tls::watch::WatchedObjects;
use test_support::pki::TestCa;

pub(crate) const NS: &str = "unikorn";
const PEER_CA: &str = "peer-ca";
const SERVER_IDENTITY: &str = "server-certificate";
const CLIENT_CA: &str = "client-ca";

fn secret(name: &str, data: &[(&str, &str)]) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| {
            use base64::Engine as _;
            (
                (*k).to_owned(),
                base64::engine::general_purpose::STANDARD.encode(v).into(),
            )
        })
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"namespace": NS, "name": name},
        "type": "kubernetes.io/tls",
        "data": data,
    })
}

/// Two CAs (servers', clients') and their Secrets in one API emulator.
pub(crate) struct Mesh {
    pub tb: Testbed,
    pub server_ca: TestCa,
    pub client_ca: TestCa,
    /// The client identity's Secret: a name of its own per mesh, so that spans naming
    /// it tell the meshes of concurrent tests apart.
    pub identity: String,
    watches: WatchedObjects,
}

/// A name no other mesh of this process has.
fn unique(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{n}")
}

impl Mesh {
    pub(crate) async fn start() -> Self {
        let tb = Testbed::start().await;
        let (server_ca, client_ca) = (TestCa::new("servers"), TestCa::new("clients"));
        let client = client_ca.client_leaf("caller", 11);
        let server = server_ca.server_leaf();
        let identity = unique("client-certificate");
        tb.upsert(secret(
            PEER_CA,
            &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
        ));
        tb.upsert(secret(
            &identity,
            &[("tls.crt", &client.cert_pem), ("tls.key", &client.key_pem)],
        ));
        tb.upsert(secret(
            SERVER_IDENTITY,
            &[("tls.crt", &server.cert_pem), ("tls.key", &server.key_pem)],
        ));
        tb.upsert(secret(
            CLIENT_CA,
            &[("tls.crt", &client_ca.pem()), ("ca.crt", &client_ca.pem())],
        ));
        Self {
            tb,
            server_ca,
            client_ca,
            identity,
            watches: WatchedObjects::new(),
        }
    }

    /// The trust callers are verified against (the client CA's Secret).
    pub(crate) async fn callers_trust(&self) -> TrustVerifier {
        TrustVerifier::builder(self.tb.client(), SecretRef::new(NS, CLIENT_CA))
            .build()
            .await
            .unwrap()
    }

    /// Rotates the client identity: a new leaf with `serial` in its Secret.
    pub(crate) fn rotate_identity(&self, serial: u64) {
        let client = self.client_ca.client_leaf("caller", serial);
        self.tb.upsert(secret(
            &self.identity,
            &[("tls.crt", &client.cert_pem), ("tls.key", &client.key_pem)],
        ));
    }

    /// The pooled client of a service calling `url`, from its deployed flags.
    pub(crate) async fn peer_client(&self, url: &str) -> PeerClient {
        let cmd = PeerOptions::augment(clap::Command::new("svc"), "next");
        let cmd = ClientIdentityOptions::augment(cmd, None);
        let m = cmd
            .try_get_matches_from([
                "svc".to_owned(),
                format!("--next-host={url}"),
                format!("--client-certificate-namespace={NS}"),
                format!("--client-certificate-name={}", self.identity),
                format!("--next-ca-secret-namespace={NS}"),
                format!("--next-ca-secret-name={PEER_CA}"),
            ])
            .unwrap();
        let tls = PeerTls::from_options_in(
            &self.watches,
            &WorkloadApiStreams::new(),
            &self.tb.cluster_client(),
            &PeerOptions::from_matches(&m, "next").unwrap(),
            &ClientIdentityOptions::from_matches(&m, None).unwrap(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        tls.private_client().unwrap()
    }

    /// A Rust mTLS service on 127.0.0.1 running `handler` for each request (callers
    /// verified against the client CA); its port.
    pub(crate) async fn serve<F, Fut>(&self, handler: F) -> (u16, tokio::task::JoinHandle<()>)
    where
        F: Fn(http::Request<hyper::body::Incoming>) -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = String> + Send + 'static,
    {
        let identity =
            IdentityResolver::builder(self.tb.client(), SecretRef::new(NS, SERVER_IDENTITY))
                .build()
                .await
                .unwrap();
        let callers = TrustVerifier::builder(self.tb.client(), SecretRef::new(NS, CLIENT_CA))
            .build()
            .await
            .unwrap();
        let tls = ServerTls::builder(identity)
            .callers(callers)
            .build()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let service = tower::service_fn(move |request| {
                let handler = handler.clone();
                async move {
                    let body = handler(request).await;
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(
                        body,
                    ))))
                }
            });
            let _ = svc_tls::serving::serve(listener, tls, service).await;
        });
        (port, task)
    }
}
