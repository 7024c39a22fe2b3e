//! A kubeconfig read from a cluster is untrusted input:
//! `config_from_untrusted_kubeconfig` accepts inline data only and refuses, by field
//! and entry, everything that could run a command, read this process's files or send
//! the credential where anyone can read it. The accepted ones work against the API
//! emulator; the refused ones never reach kube.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use kube_testbed::{Testbed, TestbedOptions};
use provision_scope::{
    self as scope, EntryKind, MAX_KUBECONFIG_BYTES, ORGANIZATION_LABEL, PROJECT_LABEL,
    RefusedField, ResourceIdentifier, UntrustedKubeconfigError, config_from_untrusted_kubeconfig,
};
use serde_json::{Value, json};

/// The token of the refusal tests' kubeconfigs: no error may show it.
const TOKEN: &str = "tok-s3cr3t-never-shown";
/// The client key data of the refusal tests' kubeconfigs: no error may show it.
const KEY_DATA: &str = "a2V5LXMzY3IzdC1uZXZlci1zaG93bg==";

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// One context `x` -> cluster `c` (`server`, `ca`) and user `u` (`token`), as a
/// remote cluster's kubeconfig Secret holds it. JSON is YAML: this is parsed by
/// kube's YAML parser like any kubeconfig.
fn kubeconfig(server: &str, ca: Option<&str>, token: &str) -> Value {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca {
        cluster["certificate-authority-data"] = json!(b64(ca));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    })
}

/// A kubeconfig for the emulator: its URL, its CA and its admin token.
fn for_testbed(tb: &Testbed) -> Value {
    kubeconfig(&tb.base_url(), Some(&tb.ca_pem()), &tb.token())
}

/// A kubeconfig whose server nobody listens on, with a token and client key data
/// the errors must not show.
fn offline() -> Value {
    let mut kc = kubeconfig("https://10.0.0.1:6443", None, TOKEN);
    kc["users"][0]["user"]["client-key-data"] = json!(KEY_DATA);
    kc
}

fn with_user(mut kc: Value, field: &str, value: Value) -> Value {
    kc["users"][0]["user"][field] = value;
    kc
}

fn with_cluster(mut kc: Value, field: &str, value: Value) -> Value {
    kc["clusters"][0]["cluster"][field] = value;
    kc
}

async fn construct(kc: &Value) -> Result<kube::Config, UntrustedKubeconfigError> {
    config_from_untrusted_kubeconfig(kc.to_string().as_bytes(), None)
        .await
        .map(scope::RemoteConfig::into_config)
}

async fn refusal(kc: &Value) -> UntrustedKubeconfigError {
    match construct(kc).await {
        Ok(_) => panic!("accepted: {kc}"),
        Err(e) => e,
    }
}

/// Asserts `err` is `Refused` for `field` in the `kind` entry named `name` of context
/// `x`, that its text names the field and the entry, and that neither its text nor
/// its Debug shows a credential.
fn assert_refused(
    err: &UntrustedKubeconfigError,
    field: RefusedField,
    kind: EntryKind,
    name: &str,
) {
    match err {
        UntrustedKubeconfigError::Refused {
            context,
            entry,
            field: got,
        } => {
            assert_eq!(*got, field, "{err}");
            assert_eq!(entry.kind, kind, "{err}");
            assert_eq!(entry.name, name, "{err}");
            assert_eq!(context, "x", "{err}");
        }
        other => panic!("not Refused({field:?}): {other:?}"),
    }
    assert_eq!(err.refused_field(), Some(field));
    let text = err.to_string();
    assert!(text.contains(&format!("`{}`", field.key())), "{text}");
    assert!(text.contains(&format!("{kind} \"{name}\"")), "{text}");
    assert!(text.contains("context \"x\""), "{text}");
    assert_no_secret(err);
}

fn assert_no_secret(err: &UntrustedKubeconfigError) {
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains(TOKEN), "{shown}");
        assert!(!shown.contains(KEY_DATA), "{shown}");
    }
}

fn unique_path(what: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::env::temp_dir().join(format!(
        "provision-scope-{what}-{}-{nanos}",
        std::process::id()
    ))
}

/// An exec credential plugin that, if run, creates `marker`.
fn exec_writing(marker: &std::path::Path) -> Value {
    json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "sh",
        "args": ["-c", format!("touch '{}'", marker.display())],
        "interactiveMode": "Never",
    })
}

/// Lists namespaces with a client built from `config` (kube's standard stack).
async fn list_namespaces(config: kube::Config) -> Result<usize, kube::Error> {
    let client = kube::Client::try_from(config)?;
    let api: Api<Namespace> = Api::all(client);
    let list = tokio::time::timeout(Duration::from_secs(20), api.list(&ListParams::default()))
        .await
        .expect("list within 20 s")?;
    Ok(list.items.len())
}

// --- exec: refused, and nothing runs --------------------------------------------

/// The kubeconfig's exec plugin would write a file; the constructor refuses it and
/// the file is never written. A control shows kube itself would have run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_is_refused_and_its_command_never_runs() {
    let tb = Testbed::start().await;
    let marker = unique_path("exec");
    let kc = with_user(for_testbed(&tb), "exec", exec_writing(&marker));
    let kc = with_user(kc, "token", Value::Null);

    let err = refusal(&kc).await;
    assert_refused(&err, RefusedField::Exec, EntryKind::User, "u");
    assert!(err.to_string().contains("command"), "says why: {err}");
    // Give a stray plugin time to have run, then look. A negative check: a plugin that
    // never runs leaves no event to wait for, so this one wait is fixed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !marker.exists(),
        "the exec plugin ran: {}",
        marker.display()
    );
    assert_eq!(tb.requests("list"), 0, "no request was made");

    // Control: the same kubeconfig through kube alone runs the command on the first
    // request (the request then fails: `touch` prints no ExecCredential).
    let parsed = kube::config::Kubeconfig::from_yaml(&kc.to_string()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
        .await
        .unwrap();
    let outcome = list_namespaces(config).await;
    assert!(outcome.is_err(), "{outcome:?}");
    assert!(
        marker.exists(),
        "control: kube alone runs the plugin ({})",
        marker.display()
    );
    let _ = std::fs::remove_file(&marker);
}

/// Only the selected context's entries are vetted and passed on: an exec user that
/// another context names is dropped, the client built from the result works, and
/// the plugin never runs. Selecting that context is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unselected_exec_user_is_dropped_and_never_runs() {
    let tb = Testbed::start().await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n1"}}));
    let marker = unique_path("exec-unselected");
    let mut kc = for_testbed(&tb);
    kc["users"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "evil", "user": {"exec": exec_writing(&marker)}}));
    kc["contexts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "y", "context": {"cluster": "c", "user": "evil"}}));

    let config = construct(&kc)
        .await
        .expect("current-context x is inline only");
    assert!(config.auth_info.exec.is_none());
    list_namespaces(config).await.unwrap();
    assert!(
        !marker.exists(),
        "the exec plugin ran: {}",
        marker.display()
    );

    let err = config_from_untrusted_kubeconfig(kc.to_string().as_bytes(), Some("y"))
        .await
        .unwrap_err();
    match &err {
        UntrustedKubeconfigError::Refused {
            context,
            entry,
            field,
        } => {
            assert_eq!(*field, RefusedField::Exec);
            assert_eq!((entry.kind, entry.name.as_str()), (EntryKind::User, "evil"));
            assert_eq!(context, "y");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !marker.exists(),
        "the exec plugin ran: {}",
        marker.display()
    );
}

// --- one test per refused field --------------------------------------------------

#[tokio::test]
async fn auth_provider_is_refused() {
    let kc = with_user(
        offline(),
        "auth-provider",
        json!({"name": "oidc", "config": {"client-id": "k", "idp-issuer-url": "https://idp"}}),
    );
    assert_refused(
        &refusal(&kc).await,
        RefusedField::AuthProvider,
        EntryKind::User,
        "u",
    );
}

#[tokio::test]
async fn token_file_is_refused() {
    let kc = with_user(
        offline(),
        "tokenFile",
        json!("/var/run/secrets/kubernetes.io/serviceaccount/token"),
    );
    assert_refused(
        &refusal(&kc).await,
        RefusedField::TokenFile,
        EntryKind::User,
        "u",
    );
}

#[tokio::test]
async fn an_empty_token_file_is_refused_too() {
    let kc = with_user(offline(), "tokenFile", json!(""));
    assert_refused(
        &refusal(&kc).await,
        RefusedField::TokenFile,
        EntryKind::User,
        "u",
    );
}

/// `token-file` is not a field kube knows (client-go's is `tokenFile`): it is refused
/// by name as an unknown field rather than dropped.
#[tokio::test]
async fn token_file_dashed_is_refused_as_unknown() {
    let kc = with_user(offline(), "token-file", json!("/etc/shadow"));
    let err = refusal(&kc).await;
    match &err {
        UntrustedKubeconfigError::UnknownField {
            context,
            entry,
            field,
        } => {
            assert_eq!(field, "token-file");
            assert_eq!((entry.kind, entry.name.as_str()), (EntryKind::User, "u"));
            assert_eq!(context, "x");
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("`token-file`"), "{text}");
    assert!(!text.contains("/etc/shadow"), "{text}");
    assert_no_secret(&err);
}

#[tokio::test]
async fn client_certificate_path_is_refused() {
    let kc = with_user(
        offline(),
        "client-certificate",
        json!("/etc/kubernetes/pki/admin.crt"),
    );
    assert_refused(
        &refusal(&kc).await,
        RefusedField::ClientCertificate,
        EntryKind::User,
        "u",
    );
}

#[tokio::test]
async fn client_key_path_is_refused() {
    let kc = with_user(
        offline(),
        "client-key",
        json!("/etc/kubernetes/pki/admin.key"),
    );
    assert_refused(
        &refusal(&kc).await,
        RefusedField::ClientKey,
        EntryKind::User,
        "u",
    );
}

#[tokio::test]
async fn certificate_authority_path_is_refused() {
    let kc = with_cluster(
        offline(),
        "certificate-authority",
        json!("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"),
    );
    assert_refused(
        &refusal(&kc).await,
        RefusedField::CertificateAuthority,
        EntryKind::Cluster,
        "c",
    );
}

#[tokio::test]
async fn insecure_skip_tls_verify_is_refused() {
    let kc = with_cluster(offline(), "insecure-skip-tls-verify", json!(true));
    assert_refused(
        &refusal(&kc).await,
        RefusedField::InsecureSkipTlsVerify,
        EntryKind::Cluster,
        "c",
    );
    // `false` asks for nothing, and is accepted.
    let kc = with_cluster(offline(), "insecure-skip-tls-verify", json!(false));
    let config = construct(&kc).await.unwrap();
    assert!(!config.accept_invalid_certs);
}

/// An `http://` server: refused, and the emulator serving plain HTTP there sees no
/// request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_is_refused() {
    let tb = Testbed::start_with(TestbedOptions {
        tls: false,
        ..TestbedOptions::default()
    })
    .await;
    assert!(tb.base_url().starts_with("http://"));
    let kc = kubeconfig(&tb.base_url(), None, TOKEN);
    let err = refusal(&kc).await;
    assert_refused(&err, RefusedField::ServerNotHttps, EntryKind::Cluster, "c");
    assert!(err.to_string().contains("https://"), "{err}");
    assert_eq!(tb.requests("list") + tb.requests("get"), 0);
}

#[tokio::test]
async fn other_server_schemes_are_refused() {
    for server in [
        "unix:///run/kube.sock",
        "ftp://h",
        "HTTP://h:80",
        "file:///etc/passwd",
    ] {
        let kc = with_cluster(offline(), "server", json!(server));
        assert_refused(
            &refusal(&kc).await,
            RefusedField::ServerNotHttps,
            EntryKind::Cluster,
            "c",
        );
    }
}

#[tokio::test]
async fn server_user_info_is_refused() {
    let kc = with_cluster(
        offline(),
        "server",
        json!("https://admin:hunter2@10.0.0.1:6443"),
    );
    let err = refusal(&kc).await;
    assert_refused(&err, RefusedField::ServerUserInfo, EntryKind::Cluster, "c");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn proxy_url_is_refused() {
    let kc = with_cluster(
        offline(),
        "proxy-url",
        json!("socks5://attacker.example:1080"),
    );
    let err = refusal(&kc).await;
    assert_refused(&err, RefusedField::ProxyUrl, EntryKind::Cluster, "c");
    assert!(!err.to_string().contains("attacker"), "{err}");
}

#[tokio::test]
async fn basic_auth_username_is_refused() {
    let kc = with_user(offline(), "username", json!("admin"));
    assert_refused(
        &refusal(&kc).await,
        RefusedField::Username,
        EntryKind::User,
        "u",
    );
}

#[tokio::test]
async fn basic_auth_password_is_refused() {
    let kc = with_user(offline(), "password", json!("hunter2"));
    let err = refusal(&kc).await;
    assert_refused(&err, RefusedField::Password, EntryKind::User, "u");
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err}");
}

#[tokio::test]
async fn impersonation_is_refused() {
    for (key, value, field) in [
        ("as", json!("system:admin"), RefusedField::Impersonate),
        ("as-uid", json!("0"), RefusedField::ImpersonateUid),
        (
            "as-groups",
            json!(["system:masters"]),
            RefusedField::ImpersonateGroups,
        ),
        (
            "as-user-extra",
            json!({"scopes": ["all"]}),
            RefusedField::ImpersonateUserExtra,
        ),
    ] {
        let kc = with_user(offline(), key, value);
        let err = refusal(&kc).await;
        assert_eq!(field.key(), key);
        assert_refused(&err, field, EntryKind::User, "u");
    }
}

#[tokio::test]
async fn an_unknown_cluster_field_is_refused() {
    let kc = with_cluster(
        offline(),
        "certificate-authority-file",
        json!("/etc/ca.pem"),
    );
    let err = refusal(&kc).await;
    match &err {
        UntrustedKubeconfigError::UnknownField { entry, field, .. } => {
            assert_eq!(field, "certificate-authority-file");
            assert_eq!((entry.kind, entry.name.as_str()), (EntryKind::Cluster, "c"));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("`certificate-authority-file`"),
        "{err}"
    );
}

/// The most dangerous field is the one reported when several are set.
#[tokio::test]
async fn exec_is_reported_before_paths() {
    let kc = with_user(offline(), "tokenFile", json!("/t"));
    let kc = with_user(kc, "exec", json!({"command": "true"}));
    assert_refused(
        &refusal(&kc).await,
        RefusedField::Exec,
        EntryKind::User,
        "u",
    );
}

// --- selection -------------------------------------------------------------------

#[tokio::test]
async fn selection_errors_are_typed() {
    // No current-context and none asked for.
    let mut kc = offline();
    kc.as_object_mut().unwrap().remove("current-context");
    assert_eq!(
        refusal(&kc).await,
        UntrustedKubeconfigError::NoCurrentContext
    );
    kc["current-context"] = json!("");
    assert_eq!(
        refusal(&kc).await,
        UntrustedKubeconfigError::NoCurrentContext
    );

    // The context, its cluster, its user: missing.
    let mut kc = offline();
    kc["current-context"] = json!("nope");
    assert!(matches!(
        refusal(&kc).await,
        UntrustedKubeconfigError::Missing { entry, .. } if entry.kind == EntryKind::Context && entry.name == "nope"
    ));
    let mut kc = offline();
    kc["contexts"][0]["context"]["cluster"] = json!("gone");
    assert!(matches!(
        refusal(&kc).await,
        UntrustedKubeconfigError::Missing { entry, .. } if entry.kind == EntryKind::Cluster && entry.name == "gone"
    ));
    let mut kc = offline();
    kc["contexts"][0]["context"]["user"] = json!("ghost");
    let err = refusal(&kc).await;
    assert!(
        matches!(&err, UntrustedKubeconfigError::Missing { entry, .. } if entry.kind == EntryKind::User && entry.name == "ghost"),
        "{err:?}"
    );
    assert!(err.to_string().contains("user \"ghost\""), "{err}");

    // Two users named `u`: which one would be used is not guessed.
    let mut kc = offline();
    kc["users"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "u", "user": {"exec": {"command": "true"}}}));
    let err = refusal(&kc).await;
    assert!(
        matches!(&err, UntrustedKubeconfigError::Duplicate { entry, .. } if entry.kind == EntryKind::User && entry.name == "u"),
        "{err:?}"
    );
    assert_no_secret(&err);

    // No server.
    let mut kc = offline();
    kc["clusters"][0]["cluster"]
        .as_object_mut()
        .unwrap()
        .remove("server");
    assert!(matches!(
        refusal(&kc).await,
        UntrustedKubeconfigError::Server {
            problem: "no server URL",
            ..
        }
    ));
}

/// A context naming no user is anonymous, and accepted.
#[tokio::test]
async fn a_context_without_a_user_is_anonymous() {
    let mut kc = offline();
    kc["contexts"][0]["context"]
        .as_object_mut()
        .unwrap()
        .remove("user");
    let config = construct(&kc).await.unwrap();
    assert!(config.auth_info.token.is_none());
    assert!(config.auth_info.client_key_data.is_none());
}

// --- accepted --------------------------------------------------------------------

/// An inline kubeconfig (server, CA data, token) read from a Secret is accepted and
/// works: the remote-cluster step lists and writes through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_kubeconfig_works_against_the_emulator() {
    let tb = Testbed::start().await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "org-proj"}}));
    // Written with YAML's own syntax this time, as a Secret's value would be.
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n\
         users:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: org-proj\n\
         current-context: x\n",
        tb.base_url(),
        b64(&tb.ca_pem()),
        tb.token()
    );
    let config = config_from_untrusted_kubeconfig(yaml.as_bytes(), None)
        .await
        .unwrap();
    assert!(config.is_untrusted());
    assert_eq!(config.config().default_namespace, "org-proj");
    assert_eq!(config.config().root_cert.as_ref().map(Vec::len), Some(1));

    let id = ResourceIdentifier::new("vcluster")
        .with_label(PROJECT_LABEL, "proj")
        .with_label(ORGANIZATION_LABEL, "org");
    let port = tb.port();
    // The emulator listens on 127.0.0.1: allowed here, refused by default.
    let listed = scope::with_destinations(
        scope::Destinations::new().allow_loopback(),
        scope::with_namespace(
            "org-proj",
            scope::with_remote_cluster(config, id, async move {
                let cluster = scope::cluster().unwrap();
                assert_eq!(cluster.port, Some(port));
                assert!(scope::cluster_client_identified().is_ok());
                let client = scope::cluster_client().unwrap();
                let namespaces: Api<Namespace> = Api::all(client.clone());
                let names: Vec<String> = namespaces
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .filter_map(|ns| ns.metadata.name)
                    .collect();
                let cms: Api<ConfigMap> = Api::default_namespaced(client);
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some("through-untrusted".into());
                cms.create(&PostParams::default(), &cm).await.unwrap();
                names
            }),
        ),
    )
    .await
    .unwrap();
    assert_eq!(listed, vec!["org-proj".to_owned()]);
    assert!(
        tb.get("v1", "ConfigMap", "org-proj", "through-untrusted")
            .is_some()
    );
}

/// Inline client certificate data (with a token) is accepted, carried to kube, and
/// a client built from it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_client_certificate_data_is_accepted() {
    let tb = Testbed::start().await;
    let ca = test_support::pki::TestCa::new("remote client CA");
    let leaf = ca.client_leaf("provisioner", 7);
    let kc = with_user(
        for_testbed(&tb),
        "client-certificate-data",
        json!(b64(&leaf.cert_pem)),
    );
    let kc = with_user(kc, "client-key-data", json!(b64(&leaf.key_pem)));
    let config = construct(&kc).await.unwrap();
    assert!(config.auth_info.client_certificate_data.is_some());
    assert!(config.auth_info.client_key_data.is_some());
    assert!(config.auth_info.client_certificate.is_none());
    list_namespaces(config).await.unwrap();
}

/// `tls-server-name`, `disable-compression`, a context namespace and `extensions`
/// are accepted; extensions are dropped.
#[tokio::test]
async fn harmless_fields_are_accepted() {
    let kc = with_cluster(
        offline(),
        "tls-server-name",
        json!("kubernetes.default.svc"),
    );
    let kc = with_cluster(kc, "disable-compression", json!(true));
    let ext =
        json!([{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "x"}}]);
    let mut kc = with_cluster(kc, "extensions", ext.clone());
    kc["users"][0]["user"]["extensions"] = ext.clone();
    kc["contexts"][0]["context"]["extensions"] = ext.clone();
    kc["contexts"][0]["context"]["namespace"] = json!("tenant");
    kc["extensions"] = ext;
    kc["preferences"] = json!({"colors": true});
    let config = construct(&kc).await.unwrap();
    assert_eq!(
        config.tls_server_name.as_deref(),
        Some("kubernetes.default.svc")
    );
    assert!(config.disable_compression);
    assert_eq!(config.default_namespace, "tenant");
    assert!(config.auth_info.extensions.is_none());
    assert!(config.auth_info.token.is_some());
    assert!(config.auth_info.exec.is_none());
}

// --- hostile text and garbage ---------------------------------------------------

/// Names the kubeconfig's writer chose (newlines, ESC, 20 KiB) appear escaped and
/// cut in the error's text.
#[tokio::test]
async fn hostile_names_are_escaped_and_cut() {
    let hostile = test_support::hostile::status_message();

    // A user name, refused for exec.
    let mut kc = with_user(offline(), "exec", json!({"command": "true"}));
    kc["users"][0]["name"] = json!(hostile);
    kc["contexts"][0]["context"]["user"] = json!(hostile);
    let err = refusal(&kc).await;
    assert_eq!(err.refused_field(), Some(RefusedField::Exec));
    let text = err.to_string();
    test_support::hostile::assert_escaped_excerpt(
        &text,
        "kubeconfig read from a cluster refused: user \"",
    );
    assert!(text.contains("`exec`"), "{text:.300}");
    assert!(format!("{err:?}").len() < 1000);
    assert_no_secret(&err);

    // A context name that is not there.
    let mut kc = offline();
    kc["current-context"] = json!(hostile);
    let text = refusal(&kc).await.to_string();
    test_support::hostile::assert_escaped_excerpt(
        &text,
        "kubeconfig read from a cluster: context \"",
    );

    // An unknown field's key (YAML caps an implicit key at 1024 characters: the
    // whole 20 KiB is a parse error, its first KiB a key).
    let kc = with_user(offline(), &hostile[..1000], json!(1));
    let err = refusal(&kc).await;
    assert!(
        matches!(err, UntrustedKubeconfigError::UnknownField { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    test_support::hostile::assert_escaped_excerpt(
        &text,
        "kubeconfig read from a cluster refused: user \"u\"",
    );

    // A parse error quoting the value it could not take.
    let kc = with_cluster(offline(), "insecure-skip-tls-verify", json!(hostile));
    let text = refusal(&kc).await.to_string();
    assert!(
        text.starts_with("kubeconfig read from a cluster does not parse: "),
        "{text:.300}"
    );
    assert!(
        !text.contains('\n') && !text.contains('\u{1b}'),
        "{text:.300}"
    );
    assert!(text.chars().count() <= 300, "{} characters", text.len());
}

/// Any input gives an error, never a panic.
#[tokio::test]
async fn garbage_is_an_error_not_a_panic() {
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let deep_map = format!("clusters: {}", "{a: ".repeat(2000) + &"}".repeat(2000));
    let aliases = "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n\
                   c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n\
                   e: &e [*d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e]\n";
    let inputs: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"42".to_vec(),
        b"clusters: 5".to_vec(),
        b"users: [{name: u, user: 5}]".to_vec(),
        b"contexts: [{name: x}]\ncurrent-context: x".to_vec(),
        b"contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x".to_vec(),
        b"\xff\xfe\x00garbage".to_vec(),
        b"--- \n--- \n...".to_vec(),
        b"kind: Config\n---\nkind: Other\n".to_vec(),
        deep.into_bytes(),
        deep_map.into_bytes(),
        aliases.as_bytes().to_vec(),
        vec![b'a'; MAX_KUBECONFIG_BYTES + 1],
    ];
    for input in inputs {
        let head = String::from_utf8_lossy(&input[..input.len().min(40)]).into_owned();
        let outcome = config_from_untrusted_kubeconfig(&input, None).await;
        let err = outcome.err().unwrap_or_else(|| panic!("accepted: {head}"));
        let text = err.to_string();
        assert!(
            text.chars().count() <= 600,
            "{head}: {} characters",
            text.len()
        );
        assert!(!text.contains('\n'), "{head}: {text}");
    }
    assert!(matches!(
        config_from_untrusted_kubeconfig(&vec![b' '; MAX_KUBECONFIG_BYTES + 1], None).await,
        Err(UntrustedKubeconfigError::TooLarge { .. })
    ));
    assert_eq!(
        config_from_untrusted_kubeconfig(b"\xff", None)
            .await
            .unwrap_err(),
        UntrustedKubeconfigError::NotUtf8
    );
}

/// CA data that is not base64 PEM is kube's error, cut and escaped.
#[tokio::test]
async fn bad_ca_data_is_kubes_error() {
    let kc = with_cluster(
        offline(),
        "certificate-authority-data",
        json!("not base64 !!"),
    );
    let err = refusal(&kc).await;
    assert!(
        matches!(err, UntrustedKubeconfigError::Kube { .. }),
        "{err:?}"
    );
    assert_no_secret(&err);
}
