//! Who may read what: the process's shared watches serve a caller only what its own
//! credentials may read. One cluster, two tokens: the admin's, and a restricted one
//! allowed the other kind only (ConfigMaps for the Secret cases, Secrets for the
//! ConfigMap case). Constructions go through the process's registry
//! (`PeerTls::from_options`), as a service's would, in both orders, for a cache hit
//! and for an object nobody had watched yet.
//!
//! The refusal bodies run against kube-testbed and the real kube-apiserver alike
//! (`real_apiserver::both!`: RBAC Roles on the real server, the emulator's rules on
//! the other); the two that count requests or revoke a token mid-watch are the
//! emulator's alone (see docs/testing.md, "One suite, two servers").
//!
//! Before the registry keyed its entries by credential, the restricted caller was
//! served the admin's cached Secrets (private key included), its new watches ran
//! under the admin's token, and a refused first caller locked the admin out of the
//! cluster for the life of the process.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use kube_testbed::{Rule, Testbed};
use real_apiserver::{ApiServerUnderTest, both};
use support::*;
use svc_tls::ClusterClient;
use svc_tls::client::{PeerClientError, PeerTls};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};
use svc_tls::watch::SecretWatches;

const CA: &str = "identity-ca";
const IDENTITY: &str = "region-client-certificate";
const OTHER_CA: &str = "other-ca";
const OTHER_IDENTITY: &str = "other-client-certificate";
const BUNDLE: &str = "platform-ca-bundle";
const TIMEOUT: Duration = Duration::from_secs(10);

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

fn client(tb: &Testbed, token: &str) -> ClusterClient {
    ClusterClient::try_from_config(tb.config_for_token(token)).unwrap()
}

fn admin(tb: &Testbed) -> ClusterClient {
    client(tb, &tb.token())
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
    let identity_only = SecretWatches::process()
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

/// Two callers with the same credentials share one watch per Secret (the registry's
/// reason to exist); two with different credentials each have their own, under their
/// own token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watch_per_secret_and_credential() {
    let tb = Testbed::start().await;
    let ca = TestCa::new("server CA");
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
    ));
    let watches = SecretWatches::new();
    let secret = svc_tls::SecretRef::new(NS, CA);
    let reader = "token-secrets-reader-2";
    tb.add_token(
        reader,
        vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
    );
    let lists = tb.requests("list");
    for _ in 0..3 {
        watches
            .watch_trust(&admin(&tb), &secret, TIMEOUT)
            .await
            .unwrap();
    }
    assert_eq!(
        tb.requests("list"),
        lists + 1,
        "one watch for one credential"
    );
    poll_until("the admin's watch is open", || tb.open_watches() == 1).await;
    for _ in 0..3 {
        watches
            .watch_trust(&client(&tb, reader), &secret, TIMEOUT)
            .await
            .unwrap();
    }
    assert_eq!(
        tb.requests("list"),
        lists + 2,
        "a second credential, a second watch"
    );
    poll_until("both watches are open", || tb.open_watches() == 2).await;
}

/// The server certificate `ca` issued, checked by `trust` as a handshake would.
fn verify(trust: &svc_tls::trust::TrustVerifier, server: &Leaf) -> Result<(), String> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls_pki_types::pem::PemObject as _;
    let leaf =
        rustls_pki_types::CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    trust
        .verify_server_cert(&leaf, &[], &name, &[], rustls_pki_types::UnixTime::now())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A credential revoked while its watch runs: its callers keep the last good roots
/// for the bound a deleted CA Secret gets, then fail closed (typed, counted); a
/// permitted caller of the same cluster and Secret keeps following CA rotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_credential_fails_trust_closed_after_the_bound_and_nobody_else() {
    use svc_tls::last_good::ManualClock;
    use svc_tls::trust::TrustVerifier;

    let tb = Testbed::start().await;
    let (ca_a, ca_b) = (TestCa::new("server CA A"), TestCa::new("server CA B"));
    let ca_secret = |ca: &TestCa| {
        secret_with(
            CA,
            "kubernetes.io/tls",
            &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
        )
    };
    tb.upsert(ca_secret(&ca_a));
    let doomed = "token-to-be-revoked-5d1e";
    tb.add_token(
        doomed,
        vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
    );
    let watches = SecretWatches::new();
    let limit = Duration::from_secs(600);
    let build = |caller: ClusterClient, clock: ManualClock| {
        let watches = watches.clone();
        async move {
            TrustVerifier::builder(caller.kube().clone(), svc_tls::SecretRef::new(NS, CA))
                .watches(&watches, &caller)
                .clock(std::sync::Arc::new(clock))
                .settings(svc_tls::trust::TrustSettings::default().max_roots_without_source(limit))
                .build()
                .await
                .unwrap()
        }
    };
    let (revoked_clock, admin_clock) = (ManualClock::new(), ManualClock::new());
    let revoked = build(client(&tb, doomed), revoked_clock.clone()).await;
    let permitted = build(admin(&tb), admin_clock.clone()).await;
    let (server_a, server_b) = (ca_a.server_leaf(), ca_b.server_leaf());
    verify(&revoked, &server_a).unwrap();
    verify(&permitted, &server_a).unwrap();

    tb.revoke_token(doomed);
    poll_until("the revoked caller's watch is refused", || {
        revoked.secret_source().and_then(|s| s.refused_now()) == Some(401)
    })
    .await;
    assert_eq!(
        permitted.secret_source().and_then(|s| s.refused_now()),
        None,
        "the permitted caller's watch runs under its own token"
    );
    // Within the bound: the last good roots, counted as a failure.
    verify(&revoked, &server_a).expect("the last good roots within the bound");
    assert!(
        revoked.state().failures >= 1,
        "the refusal is a failed reload"
    );
    assert!(revoked.state().stale);
    // Past the bound: every server refused, saying why.
    revoked_clock.advance(limit + Duration::from_secs(1));
    let refused = verify(&revoked, &server_a).expect_err("trust must fail closed past the bound");
    assert!(refused.contains("AccessRefused"), "{refused}");
    assert!(refused.contains("401"), "{refused}");

    // The permitted caller follows a rotation to CA B all along.
    tb.upsert(ca_secret(&ca_b));
    poll_until("the permitted caller's cache sees CA B", || {
        verify(&permitted, &server_b).is_ok()
    })
    .await;
    assert!(
        verify(&permitted, &server_a).is_err(),
        "CA A is no longer trusted"
    );
    assert!(!permitted.state().stale);
}

/// A refused watch has a bound of its own when one is set
/// ([`TrustSettings::max_roots_while_refused`](svc_tls::trust::TrustSettings::max_roots_while_refused)):
/// past it every server is refused, though a deleted Secret would still be within
/// [`max_roots_without_source`](svc_tls::trust::TrustSettings::max_roots_without_source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_watch_fails_closed_past_its_own_bound() {
    use svc_tls::last_good::ManualClock;
    use svc_tls::trust::{TrustSettings, TrustVerifier};

    let tb = Testbed::start().await;
    let ca = TestCa::new("server CA");
    tb.upsert(secret_with(
        CA,
        "kubernetes.io/tls",
        &[("tls.crt", &ca.pem()), ("ca.crt", &ca.pem())],
    ));
    let doomed = "token-to-be-revoked-77a0";
    tb.add_token(
        doomed,
        vec![Rule::new(&["get", "list", "watch"], "", "secrets").namespace(NS)],
    );
    let watches = SecretWatches::new();
    let caller = client(&tb, doomed);
    let clock = ManualClock::new();
    let refused_bound = Duration::from_secs(300);
    let trust = TrustVerifier::builder(caller.kube().clone(), svc_tls::SecretRef::new(NS, CA))
        .watches(&watches, &caller)
        .clock(std::sync::Arc::new(clock.clone()))
        .settings(
            TrustSettings::default()
                .max_roots_without_source(Duration::from_secs(24 * 60 * 60))
                .max_roots_while_refused(refused_bound),
        )
        .build()
        .await
        .unwrap();
    let server = ca.server_leaf();
    verify(&trust, &server).unwrap();

    tb.revoke_token(doomed);
    poll_until("the caller's watch is refused", || {
        trust.secret_source().and_then(|s| s.refused_now()) == Some(401)
    })
    .await;
    verify(&trust, &server).expect("the last good roots within the refusal bound");
    clock.advance(refused_bound + Duration::from_secs(1));
    let refused = verify(&trust, &server).expect_err("past the refusal bound");
    assert!(refused.contains("AccessRefused"), "{refused}");
    assert!(refused.contains("300s"), "{refused}");
}
