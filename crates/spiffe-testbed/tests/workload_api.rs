//! The emulator checked with the `spiffe` crate's own Workload API client and
//! `X509Source`, so that a protocol mistake in the emulator fails here; the header
//! check is probed with a raw tonic client, since the `spiffe` client always sends it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt as _;
use hyper_util::rt::TokioIo;
use spiffe::transport::GrpcStatusCode;
use spiffe::transport::TransportError;
use spiffe::{TrustDomain, WorkloadApiClient, WorkloadApiError, X509Source, X509SourceBuilder};
use spiffe_testbed::proto::{
    X509BundlesRequest, X509BundlesResponse, X509SvidRequest, X509SvidResponse,
};
use spiffe_testbed::{FETCH_X509_BUNDLES, FETCH_X509_SVID, SvidInfo, WorkloadApi};
use test_support::poll_until;
use tonic::codegen::http::uri::PathAndQuery;
use tonic_prost::ProstCodec;

const TD: &str = "example.org";
/// A bound for waits on the emulator and the client, so a broken test fails instead
/// of hanging. Not a timing assertion: every wait normally ends in milliseconds.
const BOUND: Duration = test_support::POLL_LIMIT;

async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

async fn client(api: &WorkloadApi) -> WorkloadApiClient {
    WorkloadApiClient::connect_to(api.endpoint()).await.unwrap()
}

async fn source(api: &WorkloadApi) -> X509Source {
    X509SourceBuilder::new()
        .endpoint(api.endpoint())
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .build()
        .await
        .unwrap()
}

fn leaf_of(source: &X509Source) -> Vec<u8> {
    source.svid().unwrap().leaf().as_bytes().to_vec()
}

fn assert_same_svid(got: &spiffe::X509Svid, want: &SvidInfo) {
    assert_eq!(got.spiffe_id().to_string(), want.spiffe_id);
    let chain: Vec<&[u8]> = got.cert_chain().iter().map(|c| c.as_bytes()).collect();
    let want_chain: Vec<&[u8]> = want.chain.iter().map(|c| c.as_ref()).collect();
    assert_eq!(chain, want_chain);
    assert_eq!(got.private_key().as_bytes(), &want.key_pkcs8_der[..]);
}

/// The leaf verifies (as a TLS client and server certificate) against the CA alone.
fn chains_to(leaf: &[u8], ca: &[u8]) {
    verify(leaf, &[], ca).unwrap();
}

/// Verifies `leaf` with `intermediates` against the root `ca`, for client and server auth.
fn verify(leaf: &[u8], intermediates: &[&[u8]], ca: &[u8]) -> Result<(), webpki::Error> {
    let ca = rustls_pki_types::CertificateDer::from(ca.to_vec());
    let anchors = [webpki::anchor_from_trusted_cert(&ca).unwrap()];
    let leaf = rustls_pki_types::CertificateDer::from(leaf.to_vec());
    let intermediates: Vec<_> = intermediates
        .iter()
        .map(|c| rustls_pki_types::CertificateDer::from(c.to_vec()))
        .collect();
    let ee = webpki::EndEntityCert::try_from(&leaf).unwrap();
    for usage in [
        webpki::KeyUsage::client_auth(),
        webpki::KeyUsage::server_auth(),
    ] {
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &intermediates,
            rustls_pki_types::UnixTime::now(),
            usage,
            None,
            None,
        )?;
    }
    Ok(())
}

fn status_code(error: &WorkloadApiError) -> Option<GrpcStatusCode> {
    match error {
        WorkloadApiError::Transport(TransportError::Status(status)) => Some(status.code()),
        _ => None,
    }
}

/// A raw gRPC channel to the emulator's socket.
async fn raw_channel(path: PathBuf) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::codegen::http::Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await
        .unwrap()
}

async fn raw_fetch_svid(
    api: &WorkloadApi,
    header: bool,
) -> Result<tonic::Streaming<X509SvidResponse>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(raw_channel(api.socket_path().to_owned()).await);
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(X509SvidRequest {});
    if header {
        request
            .metadata_mut()
            .insert("workload.spiffe.io", "true".parse().unwrap());
    }
    grpc.server_streaming(
        request,
        PathAndQuery::from_static(FETCH_X509_SVID),
        ProstCodec::<X509SvidRequest, X509SvidResponse>::default(),
    )
    .await
    .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_fetches_the_current_svid_and_bundle() {
    let api = WorkloadApi::start(TD).await;
    let current = api.set_workload_id("spiffe://example.org/svc/a");
    assert_eq!(api.current_svid().serial, current.serial);
    let client = client(&api).await;

    let svid = bounded("fetch", client.fetch_x509_svid()).await.unwrap();
    assert_same_svid(&svid, &current);

    let context = client.fetch_x509_context().await.unwrap();
    let td = TrustDomain::new(TD).unwrap();
    let bundle = context
        .bundle_set()
        .get(&td)
        .expect("own trust domain bundle");
    let authorities: Vec<&[u8]> = bundle.authorities().iter().map(|c| c.as_bytes()).collect();
    assert_eq!(authorities, vec![api.ca_der().as_ref()]);

    let bundles = client.fetch_x509_bundles().await.unwrap();
    assert_eq!(bundles.len(), 1);
    assert!(bundles.get(&td).is_some());

    // The certificate is what SPIRE issues: P-256, URI SAN, not a CA, from the CA.
    let (_, leaf) = x509_parser::parse_x509_certificate(current.leaf()).unwrap();
    let ca_der = api.ca_der();
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    assert_eq!(leaf.issuer(), ca.subject());
    assert!(!leaf.is_ca());
    assert!(ca.is_ca());
    let curve = leaf
        .public_key()
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|oid| oid.to_id_string());
    assert_eq!(curve.as_deref(), Some("1.2.840.10045.3.1.7"), "P-256");
    let sans = leaf.subject_alternative_name().unwrap().unwrap();
    let uris: Vec<String> = sans
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::URI(uri) => Some((*uri).to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(uris, vec!["spiffe://example.org/svc/a".to_owned()]);
    chains_to(current.leaf(), &api.ca_der());

    // The PEM forms hold the same bytes.
    use rustls_pki_types::pem::PemObject as _;
    let chain: Vec<_> =
        rustls_pki_types::CertificateDer::pem_slice_iter(current.chain_pem().as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(chain, current.chain);
    let key =
        rustls_pki_types::PrivatePkcs8KeyDer::from_pem_slice(current.key_pem().as_bytes()).unwrap();
    assert_eq!(key.secret_pkcs8_der(), &current.key_pkcs8_der[..]);
    let ca = rustls_pki_types::CertificateDer::from_pem_slice(api.ca_pem().as_bytes()).unwrap();
    assert_eq!(ca, api.ca_der());
    assert!(
        !format!("{current:?}").contains("key"),
        "Debug leaves the key out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_server_certificates_chain_to_the_bundle_and_are_not_pushed() {
    let api = WorkloadApi::start(TD).await;
    let workload = api.current_svid();
    let server = api.issue("spiffe://example.org/server");
    assert!(server.serial > workload.serial);
    assert_eq!(server.spiffe_id, "spiffe://example.org/server");
    chains_to(server.leaf(), &api.ca_der());
    let leaf = webpki::EndEntityCert::try_from(server.leaf()).unwrap();
    let localhost = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    leaf.verify_is_valid_for_subject_name(&localhost).unwrap();
    // An untrusted one has the same names but does not chain to the bundle.
    let impostor = api.issue_untrusted("spiffe://example.org/server");
    assert_eq!(impostor.spiffe_id, server.spiffe_id);
    assert!(impostor.serial > server.serial);
    let ee = webpki::EndEntityCert::try_from(impostor.leaf()).unwrap();
    ee.verify_is_valid_for_subject_name(&localhost).unwrap();
    for ca in api.bundle() {
        let anchors = [webpki::anchor_from_trusted_cert(&ca).unwrap()];
        let verified = ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &[],
            rustls_pki_types::UnixTime::now(),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        );
        assert!(
            matches!(verified, Err(webpki::Error::UnknownIssuer)),
            "{:?}",
            verified.err()
        );
    }
    // The workload still gets its own SVID.
    let svid = client(&api).await.fetch_x509_svid().await.unwrap();
    assert_same_svid(&svid, &api.current_svid());
    assert_eq!(api.current_svid().serial, workload.serial);

    // Validity: an hour by default, as set afterwards, written to the second.
    let not_after = |der: &[u8]| {
        let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
        cert.validity().not_after.timestamp()
    };
    let unix = |t: std::time::SystemTime| {
        i64::try_from(t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()).unwrap()
    };
    assert_eq!(not_after(server.leaf()), unix(server.not_after));
    assert!(server.not_after > std::time::SystemTime::now() + Duration::from_secs(3000));
    api.set_svid_ttl(Duration::from_secs(120));
    let short = api.rotate_svid();
    assert_eq!(not_after(short.leaf()), unix(short.not_after));
    assert!(short.not_after < std::time::SystemTime::now() + Duration::from_secs(121));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sees_svid_rotations_with_increasing_serials() {
    let api = WorkloadApi::start(TD).await;
    let first = api.current_svid();
    let client = client(&api).await;
    let mut stream = client.stream_x509_svids().await.unwrap();
    let got = bounded("first SVID", stream.next()).await.unwrap().unwrap();
    assert_same_svid(&got, &first);

    let rotated = api.rotate_svid();
    assert!(rotated.serial > first.serial);
    assert_ne!(rotated.key_pkcs8_der, first.key_pkcs8_der);
    let got = bounded("rotated SVID", stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_same_svid(&got, &rotated);
    assert_same_svid(&got, &api.current_svid());

    let moved = api.set_workload_id("spiffe://example.org/svc/b");
    let got = bounded("new identity", stream.next())
        .await
        .unwrap()
        .unwrap();
    assert_same_svid(&got, &moved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundle_streams_follow_ca_rotation() {
    let api = WorkloadApi::start(TD).await;
    let td = TrustDomain::new(TD).unwrap();
    let client = client(&api).await;
    let mut bundles = client.stream_x509_bundles().await.unwrap();
    let mut contexts = client.stream_x509_contexts().await.unwrap();
    let authorities = |set: &spiffe::X509BundleSet| -> Vec<Vec<u8>> {
        set.get(&td)
            .unwrap()
            .authorities()
            .iter()
            .map(|c| c.as_bytes().to_vec())
            .collect()
    };
    let ca1 = api.ca_der().to_vec();
    let got = bounded("bundles", bundles.next()).await.unwrap().unwrap();
    assert_eq!(authorities(&got), vec![ca1.clone()]);
    bounded("context", contexts.next()).await.unwrap().unwrap();

    let ca2 = api.rotate_ca(true).to_vec();
    assert_ne!(ca1, ca2);
    let got = bounded("bundles after rotation", bundles.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(authorities(&got), vec![ca2.clone(), ca1.clone()]);
    let context = bounded("context after rotation", contexts.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        authorities(context.bundle_set()),
        vec![ca2.clone(), ca1.clone()]
    );
    // The SVID was re-issued by the new CA.
    let svid = context.default_svid().unwrap();
    assert_same_svid(svid, &api.current_svid());
    chains_to(svid.leaf().as_bytes(), &ca2);

    let ca3 = api.rotate_ca(false).to_vec();
    let got = bounded("bundles after 2nd rotation", bundles.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(authorities(&got), vec![ca3]);

    // A federated bundle shows up in both streams, keyed by its trust domain.
    let other = TrustDomain::new("other.org").unwrap();
    let foreign = api.issue("spiffe://example.org/not-a-ca").chain[0].clone();
    api.set_federated_bundle("other.org", vec![foreign.clone()]);
    let got = bounded("federated bundle", bundles.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got.get(&other).unwrap().authorities()[0].as_bytes(),
        foreign.as_ref()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_the_security_header_are_rejected() {
    let api = WorkloadApi::start(TD).await;
    let status = raw_fetch_svid(&api, false).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "security header missing from request");
    assert_eq!(api.requests_without_header(), 1);

    // The bundles RPC checks it too.
    let mut grpc = tonic::client::Grpc::new(raw_channel(api.socket_path().to_owned()).await);
    grpc.ready().await.unwrap();
    let status = grpc
        .server_streaming(
            tonic::Request::new(X509BundlesRequest {}),
            PathAndQuery::from_static(FETCH_X509_BUNDLES),
            ProstCodec::<X509BundlesRequest, X509BundlesResponse>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(api.requests_without_header(), 2);

    // The same raw call with the header is served: the rejection was the header's.
    let mut stream = raw_fetch_svid(&api, true).await.unwrap();
    let response = bounded("raw response", stream.message())
        .await
        .unwrap()
        .unwrap();
    let current = api.current_svid();
    assert_eq!(response.svids.len(), 1);
    assert_eq!(response.svids[0].spiffe_id, current.spiffe_id);
    assert_eq!(response.svids[0].x509_svid, current.chain_der_concat());
    assert_eq!(api.requests_without_header(), 2);

    // The JWT profile is not emulated: Unimplemented, once the header is there.
    let mut grpc = tonic::client::Grpc::new(raw_channel(api.socket_path().to_owned()).await);
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(X509BundlesRequest {});
    request
        .metadata_mut()
        .insert("workload.spiffe.io", "true".parse().unwrap());
    let status = grpc
        .server_streaming(
            request,
            PathAndQuery::from_static("/SpiffeWorkloadAPI/FetchJWTBundles"),
            ProstCodec::<X509BundlesRequest, X509BundlesResponse>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);

    // And the spiffe client, which always sends it, is never counted.
    client(&api).await.fetch_x509_svid().await.unwrap();
    assert_eq!(api.requests_without_header(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_workloads_get_permission_denied_no_identity_issued() {
    let api = WorkloadApi::start(TD).await;
    let client = client(&api).await;
    let mut stream = client.stream_x509_svids().await.unwrap();
    bounded("first SVID", stream.next()).await.unwrap().unwrap();

    api.deny(true);
    // The open stream ends with it...
    let error = bounded("denial on the open stream", stream.next())
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(error, WorkloadApiError::NoIdentityIssued),
        "{error:?}"
    );
    assert!(bounded("stream end", stream.next()).await.is_none());
    // ...and new calls fail with it.
    let error = client.fetch_x509_svid().await.unwrap_err();
    assert!(
        matches!(error, WorkloadApiError::NoIdentityIssued),
        "{error:?}"
    );
    let error = client.fetch_x509_bundles().await.unwrap_err();
    assert!(
        matches!(error, WorkloadApiError::NoIdentityIssued),
        "{error:?}"
    );

    api.deny(false);
    let svid = client.fetch_x509_svid().await.unwrap();
    assert_same_svid(&svid, &api.current_svid());

    // No identity at all is the same answer.
    api.clear_workload_id();
    let error = client.fetch_x509_svid().await.unwrap_err();
    assert!(
        matches!(error, WorkloadApiError::NoIdentityIssued),
        "{error:?}"
    );
    assert!(api.try_current_svid().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_first_svid_arrives_only_after_the_delay() {
    let api = WorkloadApi::start(TD).await;
    let client = client(&api).await;
    // A delay no test outlives: the stream is open but nothing has been sent.
    api.delay_first_svid(Duration::from_secs(3600));
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { client.fetch_x509_svid().await }
    });
    poll_until("the delayed stream to open", || api.open_streams() == 1).await;
    // Ending the delayed stream proves no SVID went out before it.
    api.drop_streams();
    let error = bounded("the delayed call", waiting)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        status_code(&error),
        Some(GrpcStatusCode::Unavailable),
        "{error:?}"
    );

    // A short delay: the SVID computed after it (here, after a rotation made during
    // the delay) is the one sent.
    api.delay_first_svid(Duration::from_millis(300));
    let before = api.streams_opened();
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { client.fetch_x509_svid().await }
    });
    poll_until("the delayed stream to open", || {
        api.streams_opened() > before
    })
    .await;
    let rotated = api.rotate_svid();
    let svid = bounded("the delayed SVID", waiting).await.unwrap().unwrap();
    assert_same_svid(&svid, &rotated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_streams_end_unavailable_and_the_source_reconnects() {
    let api = WorkloadApi::start(TD).await;
    let client = client(&api).await;
    let mut stream = client.stream_x509_svids().await.unwrap();
    bounded("first SVID", stream.next()).await.unwrap().unwrap();
    let source = source(&api).await;
    assert_eq!(leaf_of(&source), api.current_svid().leaf().to_vec());
    poll_until("both streams open", || api.open_streams() == 2).await;
    let opened = api.streams_opened();

    api.drop_streams();
    let error = bounded("dropped stream", stream.next())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        status_code(&error),
        Some(GrpcStatusCode::Unavailable),
        "{error:?}"
    );
    // The source opens a new stream by itself and gets the next rotation on it.
    poll_until("the source to reconnect", || api.streams_opened() > opened).await;
    let rotated = api.rotate_svid();
    poll_until("the source to see the rotation", || {
        leaf_of(&source) == rotated.leaf().to_vec()
    })
    .await;
    source.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_source_reconnects_and_sees_rotations() {
    let api = WorkloadApi::start(TD).await;
    let source = source(&api).await;
    let first = api.current_svid();
    assert_eq!(leaf_of(&source), first.leaf().to_vec());

    api.stop().await;
    assert!(
        !api.socket_path().exists(),
        "the socket goes with the agent"
    );
    assert_eq!(api.open_streams(), 0);
    // Agent down: a new client cannot fetch; the source keeps its last SVID.
    let down = async {
        WorkloadApiClient::connect_to(api.endpoint())
            .await?
            .fetch_x509_svid()
            .await
    };
    let error = down.await.unwrap_err();
    assert!(
        status_code(&error).is_none_or(|code| code == GrpcStatusCode::Unavailable),
        "{error:?}"
    );
    assert_eq!(leaf_of(&source), first.leaf().to_vec());
    // Rotated while down: the reconnected stream's first message carries it.
    let rotated = api.rotate_svid();
    let opened = api.streams_opened();
    api.resume().await;
    assert!(api.socket_path().exists());
    poll_until("the source to see the rotation", || {
        leaf_of(&source) == rotated.leaf().to_vec()
    })
    .await;
    assert!(api.streams_opened() > opened);

    // restart() in one go, then a rotation pushed on the new stream.
    let opened = api.streams_opened();
    api.restart().await;
    poll_until("the source to reconnect", || api.streams_opened() > opened).await;
    let rotated = api.rotate_svid();
    poll_until("the source to see the next rotation", || {
        leaf_of(&source) == rotated.leaf().to_vec()
    })
    .await;
    source.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_return_to_zero_when_clients_go() {
    let api = WorkloadApi::start(TD).await;
    let client = client(&api).await;
    let mut svids = client.stream_x509_svids().await.unwrap();
    let mut bundles = client.stream_x509_bundles().await.unwrap();
    bounded("SVID", svids.next()).await.unwrap().unwrap();
    bounded("bundles", bundles.next()).await.unwrap().unwrap();
    assert_eq!(api.open_streams(), 2);
    drop(svids);
    poll_until("one stream left", || api.open_streams() == 1).await;
    drop(bundles);
    drop(client);
    poll_until("no stream left", || api.open_streams() == 0).await;

    // Dropping the emulator ends a source's stream and removes the socket.
    let source = source(&api).await;
    poll_until("the source's stream", || api.open_streams() == 1).await;
    let path = api.socket_path().to_owned();
    drop(api);
    assert!(!path.exists());
    source.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_intermediate_chains_carry_it_and_the_bundle_keeps_the_root() {
    let api = WorkloadApi::start(TD).await;
    let td = TrustDomain::new(TD).unwrap();
    let client = client(&api).await;
    let mut contexts = client.stream_x509_contexts().await.unwrap();
    let first = bounded("context", contexts.next()).await.unwrap().unwrap();
    assert_eq!(first.default_svid().unwrap().cert_chain().len(), 1);

    api.set_intermediate(true);
    let context = bounded("context with intermediate", contexts.next())
        .await
        .unwrap()
        .unwrap();
    let svid = context.default_svid().unwrap();
    assert_same_svid(svid, &api.current_svid());
    let chain: Vec<&[u8]> = svid.cert_chain().iter().map(|c| c.as_bytes()).collect();
    assert_eq!(chain.len(), 2);
    let root = api.ca_der();
    assert_ne!(chain[1], root.as_ref());
    let bundle = context.bundle_set().get(&td).unwrap();
    let authorities: Vec<&[u8]> = bundle.authorities().iter().map(|c| c.as_bytes()).collect();
    assert_eq!(authorities, vec![root.as_ref()]);
    verify(chain[0], &chain[1..], &root).unwrap();
    assert!(matches!(
        verify(chain[0], &[], &root),
        Err(webpki::Error::UnknownIssuer)
    ));
    // issue() signs with the intermediate too.
    let server = api.issue("spiffe://example.org/server");
    assert_eq!(server.chain.len(), 2);
    let server_chain: Vec<&[u8]> = server.chain.iter().map(|c| c.as_ref()).collect();
    verify(server_chain[0], &server_chain[1..], &root).unwrap();

    // A CA rotation makes a new intermediate under the new root.
    let new_root = api.rotate_ca(false);
    let context = bounded("context after CA rotation", contexts.next())
        .await
        .unwrap()
        .unwrap();
    let chain: Vec<&[u8]> = context
        .default_svid()
        .unwrap()
        .cert_chain()
        .iter()
        .map(|c| c.as_bytes())
        .collect();
    assert_eq!(chain.len(), 2);
    verify(chain[0], &chain[1..], &new_root).unwrap();
    assert!(verify(chain[0], &chain[1..], &root).is_err());

    api.set_intermediate(false);
    let context = bounded("context without intermediate", contexts.next())
        .await
        .unwrap()
        .unwrap();
    let svid = context.default_svid().unwrap();
    assert_eq!(svid.cert_chain().len(), 1);
    chains_to(svid.leaf().as_bytes(), &new_root);
}

#[test]
fn the_emulator_can_be_shared_across_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<WorkloadApi>();
    send_sync::<SvidInfo>();
}
