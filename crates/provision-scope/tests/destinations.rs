//! Remote clusters from untrusted kubeconfigs are vetted by type and by destination:
//! `with_remote_cluster` takes a `RemoteConfig`, and an untrusted one pointing at a
//! loopback or link-local address, or at the management cluster's own API server, is
//! refused (typed, naming the kubeconfig, the cluster and why) unless allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use provision_scope::{
    self as scope, DestinationProblem, Destinations, RemoteConfig, RemoteError, ResourceIdentifier,
    config_from_untrusted_kubeconfig,
};

fn kubeconfig(server: &str, context: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: tenant-c\n  cluster:\n    server: '{server}'\n\
         users:\n- name: u\n  user:\n    token: secret-token-4f2a\ncontexts:\n- name: '{context}'\n  context:\n    cluster: tenant-c\n    user: u\n\
         current-context: '{context}'\n"
    )
}

async fn untrusted(server: &str) -> RemoteConfig {
    config_from_untrusted_kubeconfig(kubeconfig(server, "ctx").as_bytes(), None)
        .await
        .unwrap()
}

async fn enter(config: RemoteConfig) -> Result<bool, RemoteError> {
    let mut ran = false;
    scope::with_remote_cluster(config, ResourceIdentifier::new("tenant"), async {
        ran = true;
    })
    .await?;
    Ok(ran)
}

#[tokio::test]
async fn untrusted_kubeconfigs_cannot_point_at_this_host_or_its_metadata_service() {
    for (server, problem) in [
        ("https://127.0.0.1:6443", DestinationProblem::Loopback),
        ("https://127.1", DestinationProblem::Loopback),
        ("https://[::1]:6443", DestinationProblem::Loopback),
        ("https://[::ffff:127.0.0.1]", DestinationProblem::Loopback),
        ("https://localhost:6443", DestinationProblem::Loopback),
        ("https://169.254.169.254", DestinationProblem::LinkLocal),
        ("https://[fe80::1]", DestinationProblem::LinkLocal),
        ("https://0.0.0.0:6443", DestinationProblem::Unspecified),
        (
            "https://kubernetes.default.svc",
            DestinationProblem::ManagementApiServer,
        ),
    ] {
        let err = enter(untrusted(server).await).await.unwrap_err();
        match &err {
            RemoteError::Destination {
                cluster,
                kubeconfig,
                problem: got,
                ..
            } => {
                assert_eq!(*got, problem, "{server}");
                assert_eq!(cluster, "tenant");
                assert!(kubeconfig.contains("\"ctx\"") && kubeconfig.contains("tenant-c"));
            }
            other => panic!("{server}: {other:?}"),
        }
        let shown = err.to_string();
        assert!(shown.contains(problem.reason()), "{shown}");
        assert!(!shown.contains("secret-token"), "{shown}");
    }
    // Allowed, each by its own switch or an entry naming the host.
    let allowed = [
        (
            Destinations::new().allow_loopback(),
            "https://127.0.0.1:6443",
        ),
        (Destinations::new().allow_link_local(), "https://[fe80::1]"),
        (
            Destinations::new().allow("169.254.1.1"),
            "https://169.254.1.1",
        ),
        (
            Destinations::new().allow_management_api_server(),
            "https://kubernetes.default.svc",
        ),
    ];
    for (destinations, server) in allowed {
        let config = untrusted(server).await;
        assert!(
            scope::with_destinations(destinations, enter(config))
                .await
                .unwrap(),
            "{server}"
        );
    }
    // A trusted configuration (the operator's own) is not checked.
    let trusted = RemoteConfig::trusted(kube::Config::new("https://127.0.0.1:1".parse().unwrap()));
    assert!(enter(trusted).await.unwrap());
}

#[tokio::test]
async fn the_management_clusters_own_api_server_is_refused_and_lists_apply() {
    let root = kube_testbed::Testbed::start().await;
    let own = root.base_url();
    let config = untrusted(&own).await;
    // Loopback allowed (the emulator's address), but it is the root's API server.
    let err = scope::with_root(
        root.cluster_client(),
        scope::with_destinations(Destinations::new().allow_loopback(), enter(config)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            RemoteError::Destination {
                problem: DestinationProblem::ManagementApiServer,
                ..
            }
        ),
        "{err:?}"
    );

    let listed = || {
        Destinations::new()
            .allow("*.clusters.example.com")
            .deny("evil.clusters.example.com")
    };
    for (server, problem) in [
        (
            "https://evil.clusters.example.com",
            Some(DestinationProblem::Denied),
        ),
        (
            "https://api.example.com",
            Some(DestinationProblem::NotAllowed),
        ),
        ("https://a.clusters.example.com:6443", None),
    ] {
        let outcome = scope::with_destinations(listed(), enter(untrusted(server).await)).await;
        match (outcome, problem) {
            (Ok(ran), None) => assert!(ran),
            (Err(RemoteError::Destination { problem: got, .. }), Some(want)) => {
                assert_eq!(got, want, "{server}")
            }
            (other, _) => panic!("{server}: {other:?}"),
        }
    }
}
