//! The credential bodies that run against kube-testbed and the real kube-apiserver
//! alike: a caller without read rights is never served a permitted caller's Secrets
//! (a cache hit or a new watch), a refused caller locks nobody out, and a CA bundle
//! ConfigMap is served only to callers that may read it, in either order.

use real_apiserver::{ApiServerUnderTest, both};
use svc_tls::ClusterClient;
use svc_tls::client::{PeerClientError, PeerTls};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::watch::WatchedObjects;

use crate::support::*;
use crate::{BUNDLE, CA, IDENTITY, OTHER_CA, OTHER_IDENTITY, TIMEOUT};

both!(a_caller_without_read_rights_is_not_served_a_permitted_callers_secrets);
both!(a_refused_caller_locks_nobody_out_of_the_cluster);
both!(ca_configmaps_are_served_only_to_callers_that_may_read_them_in_either_order);

/// One cluster's namespace `ns` holding two CA and identity Secret pairs and a CA
/// bundle ConfigMap; two restricted tokens (ConfigMaps only, Secrets only); a TLS
/// server that verifies the client certificate against the client CA and records the
/// serial presented.
struct Cluster {
    ns: String,
    server: VerifyingServer,
    serial: u64,
    admin: ClusterClient,
    admin_token: String,
    /// Allowed ConfigMaps only: no Secret may be served to it.
    configmaps_only: String,
    /// Allowed Secrets only: no ConfigMap may be served to it.
    secrets_only: String,
}

async fn cluster(api: &impl ApiServerUnderTest, ns: &str, serial: u64) -> Cluster {
    let server_ca = TestCa::new("server CA");
    let client_ca = TestCa::new("client CA");
    let leaf = client_ca.client_leaf("region", serial);
    for (ca, identity) in [(CA, IDENTITY), (OTHER_CA, OTHER_IDENTITY)] {
        // Opaque: the real API server refuses a `kubernetes.io/tls` Secret without a
        // `tls.key` (422).
        api.apply(test_support::secret::secret_with(
            ns,
            ca,
            "Opaque",
            &[("tls.crt", &server_ca.pem()), ("ca.crt", &server_ca.pem())],
        ))
        .await;
        api.apply(test_support::secret::tls_secret(
            ns,
            identity,
            &leaf.cert_pem,
            &leaf.key_pem,
        ))
        .await;
    }
    api.apply(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": BUNDLE},
        "data": {"ca.crt": server_ca.pem()},
    }))
    .await;
    let server = VerifyingServer::start(&server_ca, &client_ca).await;
    Cluster {
        ns: ns.to_owned(),
        server,
        serial,
        admin: api.cluster_client_for(&api.admin_token()),
        admin_token: api.admin_token(),
        configmaps_only: api.reader_of(ns, "configmaps").await,
        secrets_only: api.reader_of(ns, "secrets").await,
    }
}

impl Cluster {
    fn restricted(&self, api: &impl ApiServerUnderTest, token: &str) -> ClusterClient {
        api.cluster_client_for(token)
    }
}

/// The options of a peer at `url` trusting the CA Secret `ca` (or, with `ca` None,
/// the bundle ConfigMap) and presenting the identity Secret `identity` (if any), all
/// in `ns`.
fn options(
    url: &str,
    ns: &str,
    ca: Option<&str>,
    identity: Option<&str>,
) -> (PeerOptions, ClientIdentityOptions) {
    let cmd = PeerOptions::augment(clap::Command::new("svc"), "identity");
    let cmd = ClientIdentityOptions::augment(cmd, None);
    let mut args = vec![
        "svc".to_owned(),
        format!("--identity-host={url}"),
        "--identity-pool-idle-timeout=0s".to_owned(),
    ];
    match ca {
        Some(ca) => args.extend([
            format!("--identity-ca-secret-namespace={ns}"),
            format!("--identity-ca-secret-name={ca}"),
        ]),
        None => args.extend([
            format!("--identity-ca-configmap-namespace={ns}"),
            format!("--identity-ca-configmap-name={BUNDLE}"),
        ]),
    }
    if let Some(identity) = identity {
        args.extend([
            format!("--client-certificate-namespace={ns}"),
            format!("--client-certificate-name={identity}"),
        ]);
    }
    let m = cmd.try_get_matches_from(args).unwrap();
    (
        PeerOptions::from_matches(&m, "identity").unwrap(),
        ClientIdentityOptions::from_matches(&m, None).unwrap(),
    )
}

/// `PeerTls::from_options` through the process's registry, as a service builds it.
async fn build(
    cluster: &Cluster,
    caller: &ClusterClient,
    ca: Option<&str>,
    identity: Option<&str>,
) -> Result<PeerTls, PeerClientError> {
    let (peer, me) = options(&cluster.server.url(), &cluster.ns, ca, identity);
    PeerTls::from_options(caller, &peer, &me, TIMEOUT).await
}

/// One mTLS request: the serial the server saw.
async fn serial_seen(tls: &PeerTls, url: &str) -> String {
    let http = tls.private_client().unwrap();
    let response = http.send(http.get(url).unwrap()).await.unwrap();
    response.text().await.unwrap().trim().to_owned()
}

/// `error` and every `source()` below it, one per line.
fn chain_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text.push('\n');
        text.push_str(&source.to_string());
        next = source.source();
    }
    text
}

/// The refusal a caller without read rights gets: the API server's 403, naming
/// `object` and the cluster, never a token.
fn assert_refused(
    api: &impl ApiServerUnderTest,
    result: Result<PeerTls, PeerClientError>,
    object: &str,
    cluster: &Cluster,
) {
    let name = api.name();
    let error = match result {
        Ok(_) => panic!("{name}: a caller without read rights on {object} was served it"),
        Err(error) => error,
    };
    let shown = chain_text(&error);
    assert!(
        shown.contains(object),
        "{name}: the error names {object}: {shown}"
    );
    assert!(
        shown.contains("403"),
        "{name}: the API server's refusal: {shown}"
    );
    let label = cluster.admin.cluster().label().to_owned();
    assert!(
        shown.contains(&label),
        "{name}: the error names the cluster {label}: {shown}"
    );
    for token in [
        &cluster.configmaps_only,
        &cluster.secrets_only,
        &cluster.admin_token,
    ] {
        assert!(
            !shown.contains(token.as_str()),
            "{name}: a token in the error: {shown}"
        );
    }
}

async fn a_caller_without_read_rights_is_not_served_a_permitted_callers_secrets(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    let cluster = cluster(api, ns, 11).await;
    let url = cluster.server.url();
    let permitted = build(&cluster, &cluster.admin, Some(CA), Some(IDENTITY))
        .await
        .unwrap();
    assert_eq!(
        serial_seen(&permitted, &url).await,
        cluster.serial.to_string()
    );
    let restricted = cluster.restricted(api, &cluster.configmaps_only);

    // A cache hit: the same Secrets, already watched under the admin's token.
    assert_refused(
        api,
        build(&cluster, &restricted, Some(CA), Some(IDENTITY)).await,
        CA,
        &cluster,
    );
    // The identity Secret alone, with its private key: refused too.
    let identity_only = WatchedObjects::process()
        .watch(&restricted, &svc_tls::SecretRef::new(ns, IDENTITY), TIMEOUT)
        .await;
    let refused =
        identity_only.expect_err("the identity Secret was served to a caller without rights");
    assert!(
        refused.to_string().contains("403"),
        "{}: {refused}",
        api.name()
    );

    // Secrets nobody had watched yet: a new watch runs under the caller's own token.
    assert_refused(
        api,
        build(&cluster, &restricted, Some(OTHER_CA), Some(OTHER_IDENTITY)).await,
        OTHER_CA,
        &cluster,
    );

    // The permitted caller is still served, from the same watches.
    let again = build(&cluster, &cluster.admin, Some(CA), Some(IDENTITY))
        .await
        .unwrap();
    assert_eq!(serial_seen(&again, &url).await, cluster.serial.to_string());
}

async fn a_refused_caller_locks_nobody_out_of_the_cluster(api: &impl ApiServerUnderTest, ns: &str) {
    let cluster = cluster(api, ns, 22).await;
    let url = cluster.server.url();
    let restricted = cluster.restricted(api, &cluster.configmaps_only);
    assert_refused(
        api,
        build(&cluster, &restricted, Some(CA), Some(IDENTITY)).await,
        CA,
        &cluster,
    );
    // Refused again: nothing was left behind that would serve it now.
    assert_refused(
        api,
        build(&cluster, &restricted, Some(CA), Some(IDENTITY)).await,
        CA,
        &cluster,
    );
    // The permitted caller is served, and completes an mTLS request.
    let permitted = build(&cluster, &cluster.admin, Some(CA), Some(IDENTITY))
        .await
        .unwrap();
    assert_eq!(
        serial_seen(&permitted, &url).await,
        cluster.serial.to_string()
    );
    // And the restricted one is still refused now that the Secrets are watched.
    assert_refused(
        api,
        build(&cluster, &restricted, Some(CA), Some(IDENTITY)).await,
        CA,
        &cluster,
    );
}

async fn ca_configmaps_are_served_only_to_callers_that_may_read_them_in_either_order(
    api: &impl ApiServerUnderTest,
    ns: &str,
) {
    // Permitted first, then a caller allowed Secrets only.
    let cluster = self::cluster(api, &format!("{ns}-a"), 33).await;
    build(&cluster, &cluster.admin, None, None).await.unwrap();
    let restricted = cluster.restricted(api, &cluster.secrets_only);
    assert_refused(
        api,
        build(&cluster, &restricted, None, None).await,
        BUNDLE,
        &cluster,
    );

    // Refused first (another namespace: a ConfigMap nobody watched yet), then the
    // permitted caller.
    let cluster = self::cluster(api, &format!("{ns}-b"), 34).await;
    let restricted = cluster.restricted(api, &cluster.secrets_only);
    assert_refused(
        api,
        build(&cluster, &restricted, None, None).await,
        BUNDLE,
        &cluster,
    );
    build(&cluster, &cluster.admin, None, None).await.unwrap();
}
