//! [`CredentialId`]: who a client is to its API server, as a value that holds no
//! secret.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// Who a client authenticates as, without the secret: a SHA-256 digest over
/// everything in a `kube::Config` that decides what the API server lets it read.
///
/// Process-wide state shared per object (one watch per Secret) must be shared only
/// among callers the API server would serve alike: two clients of one cluster with
/// different tokens read different sets of objects. So shared state is keyed by the
/// cluster ([`ClusterId`](crate::ClusterId)) **and** the credential, and every watch
/// runs under the credential of the callers it serves.
///
/// What goes into the digest ([`CredentialId::of_config`]): the whole `auth_info`
/// (token, token file path, username and password, client certificate and key data
/// or paths, `exec` command, arguments and environment, `auth-provider` and its
/// configuration, impersonated user, uid, groups and extra) and the extra HTTP
/// headers. Values are hashed, never kept: the id holds 32 bytes and the kind of
/// credential, and shows only the kind (`Debug`, `Display`).
///
/// Two configurations with the same secret reached through different means (a token
/// inline and the same token in a file) are two credentials: duplicate state, never
/// mixed state. A token file or an exec plugin is the same credential across the
/// rotations it performs (the path and command, not what they return, are hashed), as
/// kube re-reads them.
///
/// ```
/// use cluster_id::CredentialId;
///
/// let mut admin = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
/// admin.auth_info.token = Some("admin-token".to_owned().into());
/// let mut reader = admin.clone();
/// reader.auth_info.token = Some("reader-token".to_owned().into());
/// assert_ne!(CredentialId::of_config(&admin), CredentialId::of_config(&reader));
/// assert_eq!(CredentialId::of_config(&admin), CredentialId::of_config(&admin.clone()));
/// assert_eq!(CredentialId::of_config(&admin).to_string(), "token");
/// assert!(!format!("{:?}", CredentialId::of_config(&admin)).contains("admin-token"));
/// ```
#[derive(Clone)]
pub struct CredentialId {
    inner: Arc<Inner>,
}

struct Inner {
    /// SHA-256 over the canonical form of the credential (or a unique value).
    fingerprint: [u8; 32],
    /// What kind of credential it is, for logs: never a value.
    kind: &'static str,
}

impl CredentialId {
    /// The credential of `config`: its `auth_info` and extra headers (see the type's
    /// docs for what is included).
    pub fn of_config(config: &kube::Config) -> Self {
        let mut hash = Sha256::new();
        hash.update(b"credential/v1");
        match serde_json::to_value(&config.auth_info) {
            Ok(value) => canonical(&value, &mut hash),
            // Serializing a kube AuthInfo does not fail; if it ever did, the caller
            // shares nothing rather than something.
            Err(_) => return Self::unique(),
        }
        for (name, value) in &config.headers {
            part(&mut hash, "header", name.as_str().as_bytes());
            part(&mut hash, "value", value.as_bytes());
        }
        Self::from_parts(hash.finalize().into(), kind_of(&config.auth_info))
    }

    /// A credential nobody else has: for a client whose configuration is not at hand
    /// (a bare `kube::Client` adopted from elsewhere), so that what it reads is never
    /// served to another caller, nor another's to it. Clones are the same credential.
    pub fn unique() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut hash = Sha256::new();
        hash.update(b"unique");
        hash.update(std::process::id().to_be_bytes());
        hash.update(NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        Self::from_parts(hash.finalize().into(), "unknown")
    }

    /// A credential the caller names: for adopted clients the caller vouches
    /// authenticate alike (the same service account's client adopted per
    /// reconcile). Two ids named alike are one credential, so the name must tell
    /// apart every credential of the process that reads one cluster, and must be
    /// named from what the client **really** authenticates as (its service account,
    /// the kubeconfig user it was built from), never from the caller's intent: a
    /// name shared by two clients with different credentials serves one's watched
    /// Secrets to the other. Named so, a client adopted again per reconcile reuses
    /// the watches of the first adoption (svc-tls's registry keys by cluster and
    /// credential) instead of starting new ones.
    ///
    /// ```
    /// use cluster_id::CredentialId;
    /// assert_eq!(CredentialId::named("controller"), CredentialId::named("controller"));
    /// assert_ne!(CredentialId::named("controller"), CredentialId::unique());
    /// ```
    pub fn named(name: &str) -> Self {
        let mut hash = Sha256::new();
        part(&mut hash, "named", name.as_bytes());
        Self::from_parts(hash.finalize().into(), "named")
    }

    fn from_parts(fingerprint: [u8; 32], kind: &'static str) -> Self {
        Self {
            inner: Arc::new(Inner { fingerprint, kind }),
        }
    }

    /// The kind of credential, for logs: `token`, `token-file`, `client-certificate`,
    /// `exec`, `auth-provider`, `basic`, `anonymous`, `named` or `unknown`.
    pub fn kind(&self) -> &'static str {
        self.inner.kind
    }
}

/// The kind of credential `auth` presents (the first that kube would use).
fn kind_of(auth: &kube::config::AuthInfo) -> &'static str {
    if auth.exec.is_some() {
        "exec"
    } else if auth.auth_provider.is_some() {
        "auth-provider"
    } else if auth.token.is_some() {
        "token"
    } else if auth.token_file.is_some() {
        "token-file"
    } else if auth.client_certificate.is_some() || auth.client_certificate_data.is_some() {
        "client-certificate"
    } else if auth.username.is_some() || auth.password.is_some() {
        "basic"
    } else {
        "anonymous"
    }
}

fn part(hash: &mut Sha256, tag: &str, bytes: &[u8]) {
    hash.update(tag.as_bytes());
    hash.update((bytes.len() as u64).to_be_bytes());
    hash.update(bytes);
}

/// Hashes `value` in a form that does not depend on map order (objects by sorted
/// key), every part length-prefixed and tagged so that no two values collide.
fn canonical(value: &serde_json::Value, hash: &mut Sha256) {
    use serde_json::Value;
    match value {
        Value::Null => hash.update(b"n"),
        Value::Bool(b) => part(hash, "b", &[u8::from(*b)]),
        Value::Number(n) => part(hash, "#", n.to_string().as_bytes()),
        Value::String(s) => part(hash, "s", s.as_bytes()),
        Value::Array(items) => {
            part(hash, "[", &(items.len() as u64).to_be_bytes());
            for item in items {
                canonical(item, hash);
            }
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            part(hash, "{", &(keys.len() as u64).to_be_bytes());
            for key in keys {
                part(hash, "k", key.as_bytes());
                if let Some(value) = map.get(key) {
                    canonical(value, hash);
                }
            }
        }
    }
}

impl PartialEq for CredentialId {
    fn eq(&self, other: &Self) -> bool {
        self.inner.fingerprint == other.inner.fingerprint
    }
}

impl Eq for CredentialId {}

impl std::hash::Hash for CredentialId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.fingerprint.hash(state);
    }
}

impl PartialOrd for CredentialId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CredentialId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.inner.fingerprint.cmp(&other.inner.fingerprint)
    }
}

/// The kind only: a digest of a short token could be searched for offline.
impl fmt::Display for CredentialId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.inner.kind)
    }
}

/// The kind only, as `Display`.
impl fmt::Debug for CredentialId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CredentialId({})", self.inner.kind)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    fn config() -> kube::Config {
        kube::Config::new("https://api.example.com:6443".parse().unwrap())
    }

    /// Every field of kube's `AuthInfo` that authenticates, changed one at a time,
    /// makes another credential.
    #[test]
    fn every_part_of_the_credential_tells_callers_apart() {
        let base = config();
        let id = CredentialId::of_config(&base);
        type Change = Box<dyn Fn(&mut kube::Config)>;
        let variants: Vec<(&str, Change)> = vec![
            (
                "token",
                Box::new(|c| c.auth_info.token = Some("t".to_owned().into())),
            ),
            (
                "token file",
                Box::new(|c| c.auth_info.token_file = Some("/t".into())),
            ),
            (
                "username",
                Box::new(|c| c.auth_info.username = Some("u".into())),
            ),
            (
                "password",
                Box::new(|c| c.auth_info.password = Some("p".to_owned().into())),
            ),
            (
                "cert path",
                Box::new(|c| c.auth_info.client_certificate = Some("/c".into())),
            ),
            (
                "cert data",
                Box::new(|c| c.auth_info.client_certificate_data = Some("c".into())),
            ),
            (
                "key path",
                Box::new(|c| c.auth_info.client_key = Some("/k".into())),
            ),
            (
                "key data",
                Box::new(|c| c.auth_info.client_key_data = Some("k".to_owned().into())),
            ),
            (
                "impersonate",
                Box::new(|c| c.auth_info.impersonate = Some("admin".into())),
            ),
            (
                "impersonate uid",
                Box::new(|c| c.auth_info.impersonate_uid = Some("1".into())),
            ),
            (
                "impersonate groups",
                Box::new(|c| c.auth_info.impersonate_groups = Some(vec!["system:masters".into()])),
            ),
            (
                "impersonate extra",
                Box::new(|c| {
                    c.auth_info.impersonate_user_extra =
                        Some(HashMap::from([("scopes".into(), vec!["x".into()])]))
                }),
            ),
            (
                "exec",
                Box::new(|c| {
                    c.auth_info.exec = Some(kube::config::ExecConfig {
                        command: Some("aws".into()),
                        ..Default::default()
                    })
                }),
            ),
            (
                "auth provider",
                Box::new(|c| {
                    c.auth_info.auth_provider = Some(kube::config::AuthProviderConfig {
                        name: "oidc".into(),
                        ..Default::default()
                    })
                }),
            ),
            (
                "header",
                Box::new(|c| {
                    c.headers.push((
                        "x-remote-user".parse().unwrap(),
                        http::HeaderValue::from_static("admin"),
                    ))
                }),
            ),
        ];
        for (what, change) in variants {
            let mut other = base.clone();
            change(&mut other);
            assert_ne!(id, CredentialId::of_config(&other), "{what} left out");
        }
        // The cluster's own parts are not the credential.
        let mut other_ca = base.clone();
        other_ca.root_cert = Some(vec![b"x".to_vec()]);
        assert_eq!(id, CredentialId::of_config(&other_ca));
    }

    #[test]
    fn exec_arguments_and_environment_are_part_of_it_whatever_their_map_order() {
        let exec = |args: &[&str], env: &[(&str, &str)]| {
            let mut c = config();
            c.auth_info.exec = Some(kube::config::ExecConfig {
                command: Some("plugin".into()),
                args: Some(args.iter().map(|a| (*a).to_owned()).collect()),
                env: Some(vec![
                    env.iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ]),
                ..Default::default()
            });
            CredentialId::of_config(&c)
        };
        let a = exec(&["--role", "a"], &[("A", "1"), ("B", "2")]);
        assert_eq!(a, exec(&["--role", "a"], &[("B", "2"), ("A", "1")]));
        assert_ne!(a, exec(&["--role", "b"], &[("A", "1"), ("B", "2")]));
        assert_ne!(a, exec(&["--role", "a"], &[("A", "1"), ("B", "3")]));
        assert_eq!(a.kind(), "exec");
    }

    /// Fails when kube's `AuthInfo` gains a field: decide whether it authenticates
    /// (it is hashed anyway, as part of the serialized whole) and add it above.
    #[test]
    fn kubes_auth_info_has_the_fields_this_was_written_for() {
        let auth = kube::config::AuthInfo {
            token: Some("t".to_owned().into()),
            ..Default::default()
        };
        let value = serde_json::to_value(&auth).unwrap();
        let known = [
            "username",
            "password",
            "token",
            "tokenFile",
            "client-certificate",
            "client-certificate-data",
            "client-key",
            "client-key-data",
            "as",
            "as-uid",
            "as-groups",
            "as-user-extra",
            "extensions",
            "auth-provider",
            "exec",
        ];
        for key in value.as_object().unwrap().keys() {
            assert!(known.contains(&key.as_str()), "new AuthInfo field {key}");
        }
    }

    #[test]
    fn shows_the_kind_never_the_secret() {
        let mut c = config();
        c.auth_info.token = Some("sekret-token".to_owned().into());
        let id = CredentialId::of_config(&c);
        for shown in [format!("{id}"), format!("{id:?}")] {
            assert!(!shown.contains("sekret"), "{shown}");
            assert!(shown.contains("token"), "{shown}");
        }
        assert_ne!(CredentialId::unique(), CredentialId::unique());
        let unique = CredentialId::unique();
        assert_eq!(unique.clone(), unique);
    }
}
