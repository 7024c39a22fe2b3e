//! RBAC for the token file's restricted users: a Role and a RoleBinding created by the
//! admin, then awaited until the authorizer applies them (its informers lag the write).

use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::{RealServer, User};

/// A rule allowing `verbs` on `resource` of API `group` (`""` for the core group).
pub fn rule(verbs: &[&str], group: &str, resource: &str) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

impl RealServer {
    /// Creates namespace `namespace` unless it exists (as the admin).
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::Namespace;
        let api: Api<Namespace> = Api::all(self.client());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Grants `user` the `rules` in `namespace` (a Role and a RoleBinding named after
    /// the user, created by the admin) and waits until the API server authorizes the
    /// first verb of each rule for it.
    pub async fn grant(
        &self,
        user: &User,
        namespace: &str,
        rules: Vec<PolicyRule>,
    ) -> Result<(), String> {
        let client = self.client();
        let name = format!("{}-grant", user.name);
        let meta = ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        };
        let role = Role {
            metadata: meta.clone(),
            rules: Some(rules.clone()),
        };
        let binding = RoleBinding {
            metadata: meta,
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "Role".to_owned(),
                name: name.clone(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "User".to_owned(),
                name: user.name.clone(),
                namespace: None,
            }]),
        };
        let pp = PostParams::default();
        Api::<Role>::namespaced(client.clone(), namespace)
            .create(&pp, &role)
            .await
            .map_err(|e| format!("creating Role {namespace}/{name}: {e}"))?;
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .create(&pp, &binding)
            .await
            .map_err(|e| format!("creating RoleBinding {namespace}/{name}: {e}"))?;
        for rule in &rules {
            let verb = rule.verbs.first().cloned().unwrap_or_default();
            let group = rule
                .api_groups
                .as_ref()
                .and_then(|g| g.first().cloned())
                .unwrap_or_default();
            let resource = rule
                .resources
                .as_ref()
                .and_then(|r| r.first().cloned())
                .unwrap_or_default();
            // A rule naming its objects allows nothing unnamed: ask about the first.
            let name = rule
                .resource_names
                .as_ref()
                .and_then(|n| n.first().cloned());
            let access = Access {
                namespace,
                verb: &verb,
                group: &group,
                resource: &resource,
                name: name.as_deref(),
            };
            self.await_allowed(&client, user, &access).await?;
        }
        Ok(())
    }

    /// Withdraws what [`RealServer::grant`] gave `user` in `namespace` (deletes the
    /// RoleBinding) and waits until the API server no longer authorizes the first verb
    /// of the first rule for it. Requests already running (an open watch) go on: the
    /// API server authorizes a request when it starts.
    pub async fn withdraw(&self, user: &User, namespace: &str) -> Result<(), String> {
        use kube::api::DeleteParams;
        let client = self.client();
        let name = format!("{}-grant", user.name);
        let role = Api::<Role>::namespaced(client.clone(), namespace)
            .get(&name)
            .await
            .map_err(|e| format!("reading Role {namespace}/{name}: {e}"))?;
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| format!("deleting RoleBinding {namespace}/{name}: {e}"))?;
        let first = role.rules.unwrap_or_default().into_iter().next();
        let Some(rule) = first else { return Ok(()) };
        let verb = rule.verbs.first().cloned().unwrap_or_default();
        let group = rule
            .api_groups
            .and_then(|g| g.into_iter().next())
            .unwrap_or_default();
        let resource = rule
            .resources
            .and_then(|r| r.into_iter().next())
            .unwrap_or_default();
        let name = rule.resource_names.and_then(|n| n.into_iter().next());
        let access = Access {
            namespace,
            verb: &verb,
            group: &group,
            resource: &resource,
            name: name.as_deref(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while review(&client, user, &access).await? {
            if Instant::now() > deadline {
                return Err(format!(
                    "{} was still allowed to {verb} {resource} in {namespace} 10 s after its RoleBinding went",
                    user.name
                ));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(())
    }

    /// Whether `user` may `verb` `resource` of `group` in `namespace`, by a
    /// SubjectAccessReview the admin creates.
    pub async fn allowed(
        &self,
        user: &User,
        namespace: &str,
        verb: &str,
        group: &str,
        resource: &str,
    ) -> Result<bool, String> {
        let access = Access {
            namespace,
            verb,
            group,
            resource,
            name: None,
        };
        review(&self.client(), user, &access).await
    }

    async fn await_allowed(
        &self,
        client: &kube::Client,
        user: &User,
        access: &Access<'_>,
    ) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !review(client, user, access).await? {
            if Instant::now() > deadline {
                let Access {
                    verb,
                    resource,
                    namespace,
                    ..
                } = access;
                return Err(format!(
                    "{} was not allowed to {verb} {resource} in {namespace} within 10 s of its RoleBinding",
                    user.name
                ));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(())
    }
}

/// One access a SubjectAccessReview asks about.
struct Access<'a> {
    namespace: &'a str,
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    /// The object's name, for a rule that names its objects.
    name: Option<&'a str>,
}

async fn review(client: &kube::Client, user: &User, access: &Access<'_>) -> Result<bool, String> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            groups: Some(vec!["system:authenticated".to_owned()]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(access.namespace.to_owned()),
                verb: Some(access.verb.to_owned()),
                group: Some(access.group.to_owned()),
                resource: Some(access.resource.to_owned()),
                name: access.name.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let created = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| format!("SubjectAccessReview for {}: {e}", user.name))?;
    Ok(created.status.is_some_and(|s| s.allowed))
}
