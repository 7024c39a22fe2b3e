//! Out-of-cluster construction from `--kubeconfig` / `--master` / `--context`,
//! against the kube-testbed emulator, with no silent fallback (issue 8).
//! Sources are injected ([`Environment`]); the process environment is never mutated.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use clap::{CommandFactory, Parser};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_construct::{
    cache::{CacheError, Selection},
    client::{CachedClient, ConstructError},
    config::{ConfigError, ConfigSource, Environment, InClusterSource, KubeOptions},
};
use kube_testbed::Testbed;
use serde_json::json;

/// A kubeconfig with two contexts: `broken` (current; a token the server rejects)
/// and `good` (the admin token). `server` is the cluster's server URL.
fn write_kubeconfig(dir: &Path, tb: &Testbed, server: &str) -> PathBuf {
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, tb.ca_pem()).unwrap();
    let text = format!(
        r#"apiVersion: v1
kind: Config
current-context: broken
clusters:
- name: testbed
  cluster:
    server: {server}
    certificate-authority: {ca}
contexts:
- name: broken
  context:
    cluster: testbed
    user: nobody
    namespace: broken-ns
- name: good
  context:
    cluster: testbed
    user: admin
    namespace: apps
users:
- name: nobody
  user:
    token: not-a-valid-token
- name: admin
  user:
    token: {token}
"#,
        ca = ca.display(),
        token = tb.token(),
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// An environment where in-cluster configuration is absent and HOME is empty.
fn empty_env(dir: &Path) -> Environment {
    Environment {
        home: Some(dir.join("home")),
        in_cluster: InClusterSource {
            dir: dir.join("no-service-account"),
            host: None,
            port: None,
        },
    }
}

/// An environment where in-cluster configuration works (pointing at the testbed).
fn in_cluster_env(dir: &Path, tb: &Testbed) -> Environment {
    let sa = dir.join("serviceaccount");
    let values = tb.write_in_cluster_dir(&sa);
    Environment {
        home: Some(dir.join("home")),
        in_cluster: InClusterSource::new(sa, values.host, values.port),
    }
}

fn opts(kubeconfig: Option<&Path>, master: Option<&str>, context: Option<&str>) -> KubeOptions {
    KubeOptions {
        kubeconfig: kubeconfig.map(Path::to_owned),
        master: master.map(str::to_owned),
        context: context.map(str::to_owned),
    }
}

fn builder() -> kube_construct::client::ClientBuilder {
    CachedClient::builder().cache::<ConfigMap>(Selection::in_namespace("apps"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_selects_a_non_current_context() {
    let tb = Testbed::start().await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "apps", "name": "x"}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb, &tb.base_url());
    let env = empty_env(dir.path());

    let client = builder()
        .from_options_in(&opts(Some(&kubeconfig), None, Some("good")), &env)
        .await
        .unwrap();
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "x")
            .unwrap()
            .is_some()
    );
    assert_eq!(client.kube_client().default_namespace(), "apps");
    assert_eq!(
        client.source(),
        Some(&ConfigSource::Kubeconfig {
            paths: vec![kubeconfig.clone()],
            context: "good".into(),
            master: None,
        })
    );

    // The current context's credentials are rejected: a permanent, immediate failure.
    let err = builder()
        .sync_timeout(Duration::from_secs(600))
        .from_options_in(&opts(Some(&kubeconfig), None, None), &env)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ConstructError::Cache(CacheError::Unauthorized { .. })),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_overrides_the_kubeconfig_server() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1: only the override can make this work.
    let kubeconfig = write_kubeconfig(dir.path(), &tb, "https://127.0.0.1:1");
    let env = empty_env(dir.path());
    let options = opts(Some(&kubeconfig), Some(&tb.base_url()), Some("good"));

    let resolved = options.resolve_in(&env).await.unwrap();
    assert_eq!(
        resolved.config.cluster_url.to_string(),
        format!("{}/", tb.base_url())
    );

    let client = builder().from_options_in(&options, &env).await.unwrap();
    assert!(client.health().is_ready());

    // Without the override the kubeconfig's server is used (and is unreachable).
    let err = builder()
        .sync_timeout(Duration::from_millis(500))
        .from_options_in(&opts(Some(&kubeconfig), None, Some("good")), &env)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ConstructError::Cache(CacheError::Timeout { .. })),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_alone_reads_the_default_kubeconfig() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = in_cluster_env(dir.path(), &tb);
    let home_kube = env.home.clone().unwrap().join(".kube");
    std::fs::create_dir_all(&home_kube).unwrap();
    let written = write_kubeconfig(dir.path(), &tb, &tb.base_url());
    std::fs::rename(&written, home_kube.join("config")).unwrap();

    // --context alone reads ~/.kube/config, not in-cluster.
    let resolved = opts(None, None, Some("good"))
        .resolve_in(&env)
        .await
        .unwrap();
    assert!(
        matches!(&resolved.source, ConfigSource::Kubeconfig { paths, context, .. }
            if paths == &vec![home_kube.join("config")] && context == "good"),
        "{:?}",
        resolved.source
    );
    let client = builder()
        .from_options_in(&opts(None, None, Some("good")), &env)
        .await
        .unwrap();
    assert!(client.health().is_ready());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_only_without_out_of_cluster_flags() {
    let tb = Testbed::start().await;
    tb.upsert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "apps", "name": "x"}}));
    let dir = tempfile::tempdir().unwrap();
    let env = in_cluster_env(dir.path(), &tb);
    // A default kubeconfig exists too, pointing nowhere: it must not be consulted.
    let home_kube = env.home.clone().unwrap().join(".kube");
    std::fs::create_dir_all(&home_kube).unwrap();
    let written = write_kubeconfig(dir.path(), &tb, "https://127.0.0.1:1");
    std::fs::rename(&written, home_kube.join("config")).unwrap();

    let client = builder()
        .from_options_in(&KubeOptions::default(), &env)
        .await
        .unwrap();
    assert!(matches!(
        client.source(),
        Some(ConfigSource::InCluster { .. })
    ));
    assert!(
        client
            .get::<ConfigMap>(Some("apps"), "x")
            .unwrap()
            .is_some()
    );

    // Any out-of-cluster flag takes over, and its failure is returned as such.
    let err = opts(None, None, Some("missing"))
        .resolve_in(&env)
        .await
        .unwrap_err();
    assert!(matches!(err, ConfigError::ContextNotFound { .. }), "{err}");
}

#[tokio::test]
async fn missing_kubeconfig_is_reported_never_replaced_by_in_cluster() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    // In-cluster would work here; an explicit flag must still win and fail.
    let env = in_cluster_env(dir.path(), &tb);
    let missing = dir.path().join("does-not-exist.yaml");
    let err = opts(Some(&missing), None, None)
        .resolve_in(&env)
        .await
        .unwrap_err();
    match &err {
        ConfigError::KubeconfigNotFound { path } => assert_eq!(path, &missing),
        other => panic!("expected KubeconfigNotFound, got {other}"),
    }
    assert!(err.to_string().contains("does-not-exist.yaml"), "{err}");

    // --context with no kubeconfig anywhere: its own error, not in-cluster either.
    let err = opts(None, None, Some("good"))
        .resolve_in(&env)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::NoKubeconfigForContext { context, .. } if context == "good"),
        "{err}"
    );
}

#[tokio::test]
async fn unknown_context_lists_the_available_ones() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb, &tb.base_url());
    let err = opts(Some(&kubeconfig), None, Some("staging"))
        .resolve_in(&empty_env(dir.path()))
        .await
        .unwrap_err();
    match &err {
        ConfigError::ContextNotFound {
            context, available, ..
        } => {
            assert_eq!(context, "staging");
            assert_eq!(available, &vec!["broken".to_owned(), "good".to_owned()]);
        }
        other => panic!("expected ContextNotFound, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("\"staging\"") && text.contains("\"good\""),
        "{text}"
    );
}

#[tokio::test]
async fn no_source_at_all_lists_every_source_tried() {
    let dir = tempfile::tempdir().unwrap();
    let err = KubeOptions::default()
        .resolve_in(&empty_env(dir.path()))
        .await
        .unwrap_err();
    let ConfigError::NoSource { in_cluster } = &err else {
        panic!("expected NoSource, got {err}");
    };
    assert_eq!(in_cluster.problems.len(), 5, "{in_cluster}");
    // The in-cluster reasons are the cause, in the chain (docs/decisions/errors-cause-in-source.md).
    test_support::error_rule::assert_follows_rule("ConfigError::NoSource", &err);
    let text = test_support::error_rule::full_chain(&err);
    for needle in [
        "--kubeconfig",
        "KUBECONFIG",
        "--master",
        "--context",
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT",
        "token",
        "ca.crt",
        "namespace",
    ] {
        assert!(text.contains(needle), "{needle} missing from: {text}");
    }
    assert!(!text.contains("localhost"), "{text}");

    // The same through the constructor: the configuration error, unchanged.
    let err = builder()
        .from_options_in(&KubeOptions::default(), &empty_env(dir.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ConstructError::Config(ConfigError::NoSource { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn master_alone_without_any_kubeconfig_uses_that_url() {
    let dir = tempfile::tempdir().unwrap();
    let resolved = opts(None, Some("http://127.0.0.1:8001"), None)
        .resolve_in(&empty_env(dir.path()))
        .await
        .unwrap();
    assert_eq!(
        resolved.config.cluster_url.to_string(),
        "http://127.0.0.1:8001/"
    );
    assert!(matches!(resolved.source, ConfigSource::Master { .. }));

    let err = opts(None, Some("127.0.0.1:8001"), None)
        .resolve_in(&empty_env(dir.path()))
        .await
        .unwrap_err();
    assert!(matches!(err, ConfigError::InvalidMaster { .. }), "{err}");
}

/// Stand-in for another crate's option group sharing the command.
#[derive(clap::Args, Debug)]
struct PeerOptions {
    #[arg(long = "identity-host")]
    identity_host: Option<String>,
    #[arg(long = "client-certificate-namespace")]
    client_certificate_namespace: Option<String>,
    #[arg(long = "client-certificate-name")]
    client_certificate_name: Option<String>,
}

#[derive(Parser, Debug)]
struct Command {
    #[command(flatten)]
    kube: KubeOptions,
    #[command(flatten)]
    peer: PeerOptions,
    #[arg(long)]
    namespace: Option<String>,
}

#[test]
fn options_combine_with_other_option_groups() {
    Command::command().debug_assert();
    let parsed = Command::try_parse_from([
        "svc",
        "--identity-host=https://identity.example",
        "--kubeconfig",
        "/etc/kube/config",
        "--master=https://api.example:6443",
        "--context",
        "admin@prod",
        "--client-certificate-namespace=unikorn",
        "--client-certificate-name=svc-client-certificate",
        "--namespace=unikorn",
    ])
    .unwrap();
    assert_eq!(
        parsed.kube,
        KubeOptions {
            kubeconfig: Some(PathBuf::from("/etc/kube/config")),
            master: Some("https://api.example:6443".into()),
            context: Some("admin@prod".into()),
        }
    );
    assert_eq!(
        parsed.peer.identity_host.as_deref(),
        Some("https://identity.example")
    );
    assert_eq!(parsed.namespace.as_deref(), Some("unikorn"));

    // Long options only; --kubeconfig reads KUBECONFIG.
    let command = Command::command();
    for arg in command.get_arguments() {
        assert!(
            arg.get_short().is_none(),
            "{:?} has a short flag",
            arg.get_id()
        );
        assert!(!arg.is_global_set(), "{:?} is global", arg.get_id());
    }
    let kubeconfig = command
        .get_arguments()
        .find(|arg| arg.get_long() == Some("kubeconfig"))
        .unwrap();
    assert_eq!(
        kubeconfig.get_env(),
        Some(std::ffi::OsStr::new("KUBECONFIG"))
    );
}

#[tokio::test]
async fn a_kubeconfig_list_is_merged() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let first = write_kubeconfig(dir.path(), &tb, &tb.base_url());
    let second = dir.path().join("extra");
    std::fs::write(
        &second,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: http://127.0.0.1:8001\n\
             contexts:\n- name: proxy\n  context:\n    cluster: other\n    user: admin\nusers: []\n",
    )
    .unwrap();
    let list = std::env::join_paths([&first, &second]).unwrap();
    let options = KubeOptions {
        kubeconfig: Some(PathBuf::from(list)),
        master: None,
        context: Some("proxy".into()),
    };
    let resolved = options.resolve_in(&empty_env(dir.path())).await.unwrap();
    assert_eq!(
        resolved.config.cluster_url.to_string(),
        "http://127.0.0.1:8001/"
    );
    assert!(
        matches!(&resolved.source, ConfigSource::Kubeconfig { paths, .. } if paths == &vec![first.clone(), second.clone()])
    );

    // One missing entry in the list is reported, by name.
    let missing = dir.path().join("gone");
    let options = KubeOptions {
        kubeconfig: Some(PathBuf::from(
            std::env::join_paths([&first, &missing]).unwrap(),
        )),
        ..KubeOptions::default()
    };
    let err = options
        .resolve_in(&empty_env(dir.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::KubeconfigNotFound { path } if path == &missing),
        "{err}"
    );
}

/// A kubeconfig with one context whose user has `user` (YAML) and whose server is
/// `server`.
fn kubeconfig_with_user(dir: &Path, server: &str, user: &str) -> PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: {server}\n\
         contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n{user}\n"
    );
    let path = dir.join("kubeconfig-user");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn credentials_over_plain_http_to_a_remote_host_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let env = empty_env(dir.path());
    let token = "    token: s3cr3t-token";
    let basic = "    username: admin\n    password: s3cr3t-password";

    for (user, credential) in [(token, "bearer token"), (basic, "basic auth")] {
        let remote = kubeconfig_with_user(dir.path(), "http://api.example:8080", user);
        let err = opts(Some(&remote), None, None)
            .resolve_in(&env)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::CredentialsOverPlainHttp { credential: c, url } if *c == credential && url == "http://api.example:8080/"),
            "{err:?}"
        );
        assert!(!format!("{err} {err:?}").contains("s3cr3t"), "{err:?}");

        // The same credentials over https, or over http to loopback, are fine.
        let tls = kubeconfig_with_user(dir.path(), "https://api.example:6443", user);
        opts(Some(&tls), None, None).resolve_in(&env).await.unwrap();
        let local = kubeconfig_with_user(dir.path(), "http://127.0.0.1:8001", user);
        opts(Some(&local), None, None)
            .resolve_in(&env)
            .await
            .unwrap();
        // --master pointing the kubeconfig's credentials at a remote http host.
        let err = opts(Some(&local), Some("http://api.example:8080"), None)
            .resolve_in(&env)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::CredentialsOverPlainHttp { .. }),
            "{err:?}"
        );
    }
    // No credentials over http to a remote host: allowed.
    let anonymous = kubeconfig_with_user(dir.path(), "http://api.example:8080", "    {}");
    opts(Some(&anonymous), None, None)
        .resolve_in(&env)
        .await
        .unwrap();
}

#[tokio::test]
async fn master_credentials_are_redacted_and_refused_over_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let env = empty_env(dir.path());
    let err = opts(None, Some("http://admin:hunter2@api.example:8080"), None)
        .resolve_in(&env)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::CredentialsOverPlainHttp {
                credential: "basic auth",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");

    let err = opts(None, Some("ftp://admin:hunter2@api.example"), None)
        .resolve_in(&env)
        .await
        .unwrap_err();
    assert!(matches!(err, ConfigError::InvalidMaster { .. }), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("hunter2"), "{err:?}");

    let resolved = opts(None, Some("https://admin:hunter2@api.example:6443"), None)
        .resolve_in(&env)
        .await
        .unwrap();
    let shown = format!("{} {:?}", resolved.source, resolved.source);
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("https://REDACTED@api.example:6443"),
        "{shown}"
    );
}
