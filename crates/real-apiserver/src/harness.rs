//! One test body, two API servers: what a test needs of either the emulator
//! (`kube_testbed::Testbed`) or a [`RealServer`], so a suite runs the same assertions
//! against both.

use std::future::Future;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;

use crate::{RealServer, rule};

/// An API server a test runs against.
pub trait ApiServerUnderTest: Sync {
    /// "kube-testbed" or "kube-apiserver v1.37.2": for failure messages.
    fn name(&self) -> String;
    /// The admin's bearer token.
    fn admin_token(&self) -> String;
    /// A kube-rs config for `token`.
    fn config_for(&self, token: &str) -> kube::Config;
    /// Creates or replaces `object` (JSON with apiVersion, kind and metadata) as the
    /// admin, creating its namespace first where one is needed.
    fn apply(&self, object: serde_json::Value) -> impl Future<Output = ()> + Send;
    /// A token allowed exactly `get`, `list` and `watch` on `resource` of the core
    /// group in `namespace`.
    fn reader_of(&self, namespace: &str, resource: &str) -> impl Future<Output = String> + Send;
    /// A token allowed `get`, `list` and `watch` on the `names` objects of `resource`
    /// of the core group in `namespace`, and nothing else (a list or watch only with a
    /// `metadata.name` field selector naming one of them).
    fn reader_of_names(
        &self,
        namespace: &str,
        resource: &str,
        names: &[&str],
    ) -> impl Future<Output = String> + Send;
    /// A token the server knows that may do nothing.
    fn token_without_rights(&self) -> String;

    /// Deletes `namespace/name` of `kind` (`api_version` as in objects; `namespace`
    /// empty for a cluster-scoped kind) as the admin; an absent object is no error.
    fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = ()> + Send;

    /// Serves the platform's CRD kinds (HelmApplication, Argo CD's Application): the
    /// real server installs their CRDs when it starts; the emulator registers them
    /// (without a status subresource, as the CRDs have none) when asked.
    fn serve_platform_kinds(&self) {}

    /// The admin's kube-rs client.
    ///
    /// # Panics
    /// If kube-rs cannot build the client.
    #[allow(clippy::expect_used)] // test support
    fn admin_client(&self) -> kube::Client {
        kube::Client::try_from(self.config_for(&self.admin_token()))
            .expect("kube client for the server under test")
    }

    /// A client carrying the server's cluster identity for `token`.
    ///
    /// # Panics
    /// If kube-rs cannot build the client.
    #[allow(clippy::expect_used)] // test support
    fn cluster_client_for(&self, token: &str) -> cluster_id::ClusterClient {
        cluster_id::ClusterClient::try_from_config(self.config_for(token))
            .expect("kube client for the server under test")
    }
}

const READ: &[&str] = &["get", "list", "watch"];

/// A namespace name of its own for one test (`<prefix>-<random>`): tests share a
/// binary's real server, so each writes where no other test does.
pub fn namespace(prefix: &str) -> String {
    format!("{prefix}-{:08x}", fastrand::u32(..))
}

/// `body` against the emulator and the binary's shared real server, as two tests
/// (`<body>::kube_testbed` and `<body>::kube_apiserver`) of one body
/// `async fn body(api: &impl ApiServerUnderTest, ns: &str)`, each given a namespace of
/// its own ([`namespace`]). The calling crate needs `tokio` (with `macros`) and
/// `kube-testbed` as dev-dependencies.
#[macro_export]
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kube_testbed() {
                let tb = kube_testbed::Testbed::start().await;
                super::$body(&tb, &$crate::harness::namespace("emu")).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kube_apiserver() {
                let ns = $crate::harness::namespace("real");
                super::$body($crate::shared(), &ns).await;
            }
        }
    };
}

impl ApiServerUnderTest for kube_testbed::Testbed {
    fn name(&self) -> String {
        "kube-testbed".to_owned()
    }

    fn admin_token(&self) -> String {
        self.token()
    }

    fn config_for(&self, token: &str) -> kube::Config {
        self.config_for_token(token)
    }

    #[allow(clippy::expect_used)] // test support
    async fn apply(&self, object: serde_json::Value) {
        self.try_upsert(object)
            .expect("the emulator takes the object");
    }

    fn serve_platform_kinds(&self) {
        for (group, kind, plural) in [
            ("unikorn-cloud.org", "HelmApplication", "helmapplications"),
            ("argoproj.io", "Application", "applications"),
        ] {
            self.register_kind(
                kube_testbed::KindSpec::namespaced(group, "v1alpha1", kind, plural)
                    .status_subresource(false),
            );
        }
    }

    async fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let _ = kube_testbed::Testbed::delete(self, api_version, kind, namespace, name);
    }

    async fn reader_of_names(&self, namespace: &str, resource: &str, names: &[&str]) -> String {
        let token = format!("token-{resource}-named-reader-{}", fastrand::u64(..));
        self.add_token(
            &token,
            vec![
                kube_testbed::Rule::new(READ, "", resource)
                    .namespace(namespace)
                    .names(names),
            ],
        );
        token
    }

    fn token_without_rights(&self) -> String {
        let token = format!("token-without-rights-{}", fastrand::u64(..));
        self.add_token(&token, Vec::new());
        token
    }

    async fn reader_of(&self, namespace: &str, resource: &str) -> String {
        let token = format!("token-{resource}-reader-{}", fastrand::u64(..));
        self.add_token(
            &token,
            vec![kube_testbed::Rule::new(READ, "", resource).namespace(namespace)],
        );
        token
    }
}

impl ApiServerUnderTest for RealServer {
    #[allow(clippy::expect_used)] // test support
    async fn reader_of_names(&self, namespace: &str, resource: &str, names: &[&str]) -> String {
        let user = self.new_user();
        self.ensure_namespace(namespace)
            .await
            .expect("the namespace");
        let mut named = rule(READ, "", resource);
        named.resource_names = Some(names.iter().map(|n| (*n).to_owned()).collect());
        self.grant(&user, namespace, vec![named])
            .await
            .expect("the grant");
        user.token
    }

    fn token_without_rights(&self) -> String {
        self.new_user().token
    }

    fn name(&self) -> String {
        format!("kube-apiserver {}", crate::kube_version())
    }

    fn admin_token(&self) -> String {
        self.token()
    }

    fn config_for(&self, token: &str) -> kube::Config {
        self.config_for_token(token)
    }

    #[allow(clippy::expect_used)] // test support
    async fn apply(&self, object: serde_json::Value) {
        let text = |key: &str| object[key].as_str().unwrap_or_default().to_owned();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let api = self
            .dynamic_api(&text("apiVersion"), &text("kind"), namespace)
            .await;
        if !namespace.is_empty() {
            self.ensure_namespace(namespace)
                .await
                .expect("the namespace");
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        api.patch(
            name,
            &PatchParams::apply("real-apiserver-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect("the API server takes the object");
    }

    #[allow(clippy::expect_used)] // test support
    async fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let api = self.dynamic_api(api_version, kind, namespace).await;
        match api.delete(name, &kube::api::DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => panic!("the API server deletes {kind} {namespace}/{name}: {error}"),
        }
    }

    #[allow(clippy::expect_used)] // test support
    async fn reader_of(&self, namespace: &str, resource: &str) -> String {
        let user = self.new_user();
        self.ensure_namespace(namespace)
            .await
            .expect("the namespace");
        self.grant(&user, namespace, vec![rule(READ, "", resource)])
            .await
            .expect("the grant");
        user.token
    }
}

impl RealServer {
    /// The admin's dynamic API for `kind` in `namespace` (all namespaces for a
    /// cluster-scoped kind), found through discovery.
    #[allow(clippy::expect_used)] // test support
    async fn dynamic_api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let client = self.client();
        let (resource, capabilities) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .expect("the API server serves the kind");
        if capabilities.scope == kube::discovery::Scope::Namespaced && !namespace.is_empty() {
            Api::namespaced_with(client, namespace, &resource)
        } else {
            Api::all_with(client, &resource)
        }
    }
}
