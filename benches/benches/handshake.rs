//! Loopback mTLS handshakes (TLS 1.3, ECDSA P-256 client identity) against an
//! in-process tokio-rustls server that requires and verifies client certificates:
//! - `handshake/static/N`: the identity is fixed in the `ClientConfig`;
//! - `handshake/reload/N`: svc-tls's resolver re-reads the Secret from its watched cache
//!   and re-parses it on every handshake (the Secret lives in the API emulator).
//!
//! `N` is the number of concurrent clients; one iteration is one handshake per client
//! (TCP connect, full handshake, one byte from the server, close).
//!
//! `handshake/resolve` is the resolver's own work per handshake, without the network.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use svc_tls::client::{TrustMode, client_config};
use svc_tls::options::SecretRef;
use svc_tls::resolver::IdentityResolver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NS: &str = "bench";
const NAME: &str = "bench-client-certificate";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

struct Pair {
    cert: CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
}

fn issue(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    sans: Vec<String>,
    eku: ExtendedKeyUsagePurpose,
) -> Pair {
    let mut params = CertificateParams::new(sans).unwrap();
    params.extended_key_usages = vec![eku];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    Pair {
        cert: cert.der().clone(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

fn ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn roots(ca: &CertifiedIssuer<'static, KeyPair>) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    roots
}

async fn serve(config: Arc<ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"k").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    addr
}

async fn handshake(config: Arc<ClientConfig>, addr: SocketAddr) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    // The server's byte arrives only after it has verified our certificate.
    tls.read_exact(&mut byte).await.unwrap();
    assert_eq!(&byte, b"k");
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let server_ca = ca();
    let client_ca = ca();
    let server_leaf = issue(
        &server_ca,
        vec!["127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let client_leaf = issue(&client_ca, Vec::new(), ExtendedKeyUsagePurpose::ClientAuth);

    let server_config = {
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots(&client_ca)), provider())
                .build()
                .unwrap();
        ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![server_leaf.cert.clone()],
                PrivateKeyDer::from_pem_slice(server_leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap()
    };

    let (addr, testbed, resolver) = rt.block_on(async {
        let addr = serve(Arc::new(server_config)).await;
        let testbed = kube_testbed::Testbed::start().await;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                (
                    "tls.crt".to_string(),
                    ByteString(client_leaf.cert_pem.clone().into_bytes()),
                ),
                (
                    "tls.key".to_string(),
                    ByteString(client_leaf.key_pem.clone().into_bytes()),
                ),
            ])),
            ..Default::default()
        };
        let mut value = serde_json::to_value(&secret).unwrap();
        value["apiVersion"] = "v1".into();
        value["kind"] = "Secret".into();
        testbed.upsert(value);
        let resolver = IdentityResolver::builder(testbed.client(), SecretRef::new(NS, NAME))
            .provider(provider())
            .sync_timeout(Duration::from_secs(30))
            .build()
            .await
            .unwrap();
        (addr, testbed, resolver)
    });

    let static_config = {
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots(&server_ca))
            .with_client_auth_cert(
                vec![client_leaf.cert.clone()],
                PrivateKeyDer::from_pem_slice(client_leaf.key_pem.as_bytes()).unwrap(),
            )
            .unwrap();
        config.resumption = Resumption::disabled();
        Arc::new(config)
    };
    let reload_config = Arc::new(
        client_config(
            provider(),
            TrustMode::Roots(roots(&server_ca)),
            Some(&resolver),
        )
        .unwrap(),
    );

    let mut group = c.benchmark_group("handshake");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for (mode, config) in [("static", &static_config), ("reload", &reload_config)] {
        for clients in [1usize, 2] {
            group.bench_function(BenchmarkId::new(mode, clients), |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let handshakes = (0..clients).map(|_| {
                            let config = config.clone();
                            tokio::spawn(handshake(config, addr))
                        });
                        for h in futures_join(handshakes.collect()).await {
                            h.unwrap();
                        }
                    })
                })
            });
        }
    }
    // The resolver's part of a handshake alone (cache read, byte comparison with the
    // last load, validity check, pointer swap): the difference the loopback figures
    // above cannot resolve on a busy machine.
    group.bench_function("resolve", |b| {
        b.iter(|| std::hint::black_box(resolver.reload()))
    });
    group.finish();
    assert_eq!(resolver.state().failures, 0);
    let _guard = rt.enter();
    drop(testbed);
}

async fn futures_join(
    handles: Vec<tokio::task::JoinHandle<()>>,
) -> Vec<Result<(), tokio::task::JoinError>> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await);
    }
    out
}

criterion_group!(handshakes, benches);
criterion_main!(handshakes);
