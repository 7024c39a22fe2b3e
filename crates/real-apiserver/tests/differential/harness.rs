//! Two servers, one request: raw HTTP (reqwest, the server's CA, a bearer token) so
//! that status codes and bodies are compared as the servers sent them.

use std::time::Duration;

use kube_testbed::Testbed;
use real_apiserver::RealServer;
use serde_json::{Value, json};

/// One server's address, CA and admin token.
pub(crate) struct Target {
    pub name: &'static str,
    base: String,
    admin: String,
    http: reqwest::Client,
}

impl Target {
    pub(crate) fn new(name: &'static str, base: String, ca_pem: &str, admin: String) -> Self {
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap()])
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Self {
            name,
            base,
            admin,
            http,
        }
    }

    /// `method path` with `body` as `token` (the admin's when `None`): status and
    /// JSON body (`null` when empty).
    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(token.unwrap_or(&self.admin));
        if let Some(body) = body {
            let content_type = if method == "PATCH" {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            request = request
                .header("content-type", content_type)
                .body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!("{}: {method} {path}: not JSON ({e}): {text}", self.name)
            })
        };
        (status, body)
    }

    /// A WATCH (`path` with its query): the first `count` events, or those that came
    /// within `limit`.
    pub(crate) async fn watch(&self, path: &str, count: usize, limit: Duration) -> Vec<Value> {
        let mut response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.admin)
            .timeout(limit + Duration::from_secs(5))
            .send()
            .await
            .unwrap();
        let mut events = Vec::new();
        let mut buffer = Vec::new();
        let deadline = tokio::time::Instant::now() + limit;
        while events.len() < count {
            let chunk = match tokio::time::timeout_at(deadline, response.chunk()).await {
                Ok(Ok(Some(chunk))) => chunk,
                _ => break,
            };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                    events.push(event);
                }
            }
        }
        events
    }
}

/// The emulator and the real server, with a namespace of this test's on both.
pub(crate) struct Pair {
    pub testbed: Testbed,
    pub real: &'static RealServer,
    pub emulated: Target,
    pub actual: Target,
    pub namespace: String,
}

impl Pair {
    pub(crate) async fn new() -> Pair {
        Pair::with(kube_testbed::TestbedOptions::default()).await
    }

    /// [`Pair::new`] with the emulator started with `options`.
    pub(crate) async fn with(options: kube_testbed::TestbedOptions) -> Pair {
        let testbed = Testbed::start_with(options).await;
        let real = real_apiserver::shared();
        let emulated = Target::new(
            "kube-testbed",
            testbed.base_url(),
            &testbed.ca_pem(),
            testbed.token(),
        );
        let actual = Target::new(
            "kube-apiserver",
            real.base_url(),
            &real.ca_pem(),
            real.token(),
        );
        let namespace = format!("diff-{}", fastrand::u32(..));
        let pair = Pair {
            testbed,
            real,
            emulated,
            actual,
            namespace,
        };
        let ns =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pair.namespace}});
        let (a, b) = pair.send("POST", "/api/v1/namespaces", Some(&ns)).await;
        assert_eq!((a.0, b.0), (201, 201), "{a:?} {b:?}");
        pair
    }

    /// The same request to both, as the admin: (emulator, real), raw.
    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> ((u16, Value), (u16, Value)) {
        (
            self.emulated.send(method, path, body, None).await,
            self.actual.send(method, path, body, None).await,
        )
    }

    /// The same request to both; asserts the same status and the same normalised
    /// body, and returns the real server's raw answer.
    pub(crate) async fn same(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let (emulated, actual) = self.send(method, path, body).await;
        assert_same(
            &format!("{method} {path}"),
            &emulated,
            &actual,
            &[&self.namespace],
        );
        actual
    }
}

/// Asserts that two answers are the same once normalised.
pub(crate) fn assert_same(
    what: &str,
    emulated: &(u16, Value),
    actual: &(u16, Value),
    names: &[&str],
) {
    let a = normalise(&emulated.1, names);
    let b = normalise(&actual.1, names);
    let mut differences = Vec::new();
    if emulated.0 != actual.0 {
        differences.push(format!(
            "status: kube-testbed {} kube-apiserver {}",
            emulated.0, actual.0
        ));
    }
    diff("", &a, &b, &mut differences);
    assert!(
        differences.is_empty(),
        "{what}: kube-testbed and kube-apiserver differ:\n{}\nkube-testbed: {a:#}\nkube-apiserver: {b:#}",
        differences.join("\n")
    );
}

/// The paths where `a` and `b` differ.
pub(crate) fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let p = format!("{path}.{key}");
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => diff(&p, u, v, out),
                    (Some(u), None) => out.push(format!("{p}: only kube-testbed has {u}")),
                    (None, Some(v)) => out.push(format!("{p}: only kube-apiserver has {v}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), u, v, out);
            }
        }
        _ if a == b => {}
        _ => out.push(format!("{path}: kube-testbed {a} kube-apiserver {b}")),
    }
}

/// The answer without what differs between any two servers (or two runs): uids,
/// timestamps, resourceVersion values (kept as present or absent), `names` (the
/// random namespace) and user names in messages; and the differences
/// docs/testing.md lists as not mattering.
pub(crate) fn normalise(value: &Value, names: &[&str]) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, v) in map {
                let v = match key.as_str() {
                    "uid" => json!("<uid>"),
                    "creationTimestamp" | "deletionTimestamp" => json!("<time>"),
                    "resourceVersion" => json!("<rv>"),
                    // Server-side apply bookkeeping: the emulator has none (listed).
                    "managedFields" => continue,
                    // An empty continue token (the last page): the real server sends
                    // one for custom resources, the emulator never (listed).
                    "continue" if v == "" => continue,
                    // A list's items: the real server leaves out their kind and
                    // apiVersion for built-in kinds, the emulator sends them (listed).
                    "items" => Value::Array(
                        v.as_array()
                            .into_iter()
                            .flatten()
                            .map(|item| {
                                let mut item = normalise(item, names);
                                if let Some(o) = item.as_object_mut() {
                                    o.remove("kind");
                                    o.remove("apiVersion");
                                }
                                item
                            })
                            .collect(),
                    ),
                    _ => normalise(v, names),
                };
                out.insert(key.clone(), v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| normalise(v, names)).collect()),
        Value::String(s) => {
            let mut s = s.clone();
            for name in names {
                s = s.replace(name, "<name>");
            }
            Value::String(mask_user(&s))
        }
        other => other.clone(),
    }
}

/// A ConfigMap in `namespace`.
pub(crate) fn config_map(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"key": name},
    })
}

/// `User "x"` in a message as `User "<user>"` (each server names a token's user its
/// own way).
fn mask_user(text: &str) -> String {
    let Some(start) = text.find("User \"") else {
        return text.to_owned();
    };
    let from = start + "User \"".len();
    match text[from..].find('"') {
        Some(len) => format!("{}<user>{}", &text[..from], &text[from + len..]),
        None => text.to_owned(),
    }
}

/// Each run of digits replaced by one `N` (resourceVersions inside messages).
pub(crate) fn mask_digits(value: &Value) -> Value {
    match value {
        Value::String(s) => {
            let mut out = String::new();
            for c in s.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !out.ends_with('N') {
                    out.push('N');
                }
            }
            Value::String(out)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), mask_digits(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(mask_digits).collect()),
        other => other.clone(),
    }
}
