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
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let client = self.client();
        let (resource, capabilities) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .expect("the API server serves the kind");
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(ns) if capabilities.scope == kube::discovery::Scope::Namespaced => {
                self.ensure_namespace(ns).await.expect("the namespace");
                Api::namespaced_with(client, ns, &resource)
            }
            _ => Api::all_with(client, &resource),
        };
        api.patch(
            name,
            &PatchParams::apply("real-apiserver-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect("the API server takes the object");
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
