#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::origin::SecretRef;
use test_support::pki::TestCa;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_of_one_cluster_share_one_api_client() {
    let (one, two) = (
        kube_testbed::Testbed::start().await,
        kube_testbed::Testbed::start().await,
    );
    let ca = TestCa::new("ca");
    for tb in [&one, &two] {
        for name in ["a", "b", "c"] {
            tb.upsert(test_support::secret::secret_with(
                "ns",
                name,
                "kubernetes.io/tls",
                &[("tls.crt", &ca.pem())],
            ));
        }
    }
    let watches = WatchedObjects::new();
    let timeout = Duration::from_secs(10);
    for tb in [&one, &two] {
        // A new ClusterClient (and config) for every Secret, as per-reconcile code
        // hands over.
        for name in ["a", "b", "c"] {
            let secret = SecretRef::new("ns", name);
            watches
                .watch_trust(&tb.cluster_client(), &secret, timeout)
                .await
                .unwrap();
        }
    }
    assert_eq!(watches.watched().len(), 6);
    assert_eq!(
        watches.counts().kube_clients,
        2,
        "one API client per cluster and credential"
    );
}
