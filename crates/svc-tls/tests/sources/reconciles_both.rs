//! Reconciles building their peer client from the options, against kube-testbed and
//! the real kube-apiserver alike (`real_apiserver::both!`): what `shared_sources.rs`
//! proves with the emulator's counters (one watch per Secret, no LIST after the first
//! sync), asserted here by what any server shows: every reconcile served through the
//! process's one registry entry per Secret, and a rotation reaching the next
//! reconcile from the same entries.

use crate::support;

use std::time::Duration;

use real_apiserver::{ApiServerUnderTest, both};
use support::*;
use svc_tls::ClusterClient;
use svc_tls::client::PeerTls;
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::spiffe::WorkloadApiStreams;
use svc_tls::watch::WatchedObjects;

const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const TIMEOUT: Duration = Duration::from_secs(10);

both!(reconciles_share_the_registry_and_see_a_rotation);

/// The deployed flags of a service calling `identity` at `url`, its Secrets in `ns`.
fn options(url: &str, ns: &str) -> (PeerOptions, ClientIdentityOptions) {
    let peer = PeerOptions::new("identity")
        .with_host_value(url)
        .with_ca_secret(ns, CA)
        .with_pool_idle_timeout(Duration::ZERO);
    let me = ClientIdentityOptions::new(None).with_secret(ns, IDENTITY);
    (peer, me)
}

/// One reconcile: the peer's TLS and an HTTP client from the options, one request,
/// both dropped. The client serial the server saw.
async fn reconcile(
    client: &ClusterClient,
    watches: &WatchedObjects,
    (peer, me): &(PeerOptions, ClientIdentityOptions),
) -> String {
    let tls = PeerTls::from_options_in(
        watches,
        &WorkloadApiStreams::new(),
        client,
        peer,
        me,
        TIMEOUT,
    )
    .await
    .unwrap();
    let http = tls.reqwest_client().unwrap();
    let response = http.get(tls.host().unwrap().clone()).send().await.unwrap();
    response.text().await.unwrap().trim().to_owned()
}

async fn reconciles_share_the_registry_and_see_a_rotation(api: &impl ApiServerUnderTest, ns: &str) {
    let (server_ca, client_ca) = (TestCa::new("server"), TestCa::new("clients"));
    let leaf = client_ca.client_leaf("region", 1);
    // Opaque: the real API server refuses a `kubernetes.io/tls` Secret without a key.
    api.apply(test_support::secret::secret_with(
        ns,
        CA,
        "Opaque",
        &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
    ))
    .await;
    let identity =
        |leaf: &Leaf| test_support::secret::tls_secret(ns, IDENTITY, &leaf.cert_pem, &leaf.key_pem);
    api.apply(identity(&leaf)).await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    let options = options(&server.url(), ns);
    let client = api.cluster_client_for(&api.admin_token());
    let watches = WatchedObjects::new();

    for i in 0..20 {
        assert_eq!(
            reconcile(&client, &watches, &options).await,
            "1",
            "{}: reconcile {i}",
            api.name()
        );
        assert_eq!(watches.watched().len(), 2, "one entry per Secret");
    }
    let renewed = client_ca.client_leaf("region", 2);
    api.apply(identity(&renewed)).await;
    let source = watches
        .watch(&client, &svc_tls::SecretRef::new(ns, IDENTITY), TIMEOUT)
        .await
        .unwrap();
    poll_until("the registry's watch holds the renewed Secret", || {
        cached_cert_is(source.source(), &renewed.cert_pem)
    })
    .await;
    assert_eq!(
        reconcile(&client, &watches, &options).await,
        "2",
        "{}: the next reconcile presents the renewed certificate",
        api.name()
    );
    assert_eq!(watches.watched().len(), 2, "the same entries");
    assert_eq!(server.rejected(), 0);
}
