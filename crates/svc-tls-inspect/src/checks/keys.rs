//! Private key material where the object's role needs none: a CA Secret holding
//! the CA's `tls.key` (or `ca.key`) hands the power to issue identities to whoever
//! may read it, and the service that trusts the CA never reads the key. The
//! entries are named (never their values) in the report's `private_key_entries`
//! and as a warning line.
//!
//! An entry holds a key when its name is `tls.key`, `ca.key` or any `*.key`, or
//! when its value holds a PEM private key section. `kubectl apply` (and
//! client-side apply by Argo CD) copies the whole object into the annotation
//! `kubectl.kubernetes.io/last-applied-configuration`; the `data` and `stringData`
//! keys of that copy are read by the same rule.

use std::collections::BTreeMap;

/// The annotation `kubectl apply` keeps the applied object in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The end of a PEM private key's `BEGIN` line (`PRIVATE KEY`, `RSA PRIVATE KEY`,
/// `EC PRIVATE KEY`, `ENCRYPTED PRIVATE KEY`).
const PEM_KEY_MARK: &[u8] = b"PRIVATE KEY-----";

/// Whether an entry named `name` with `value` holds a private key.
pub fn holds_key(name: &str, value: &[u8]) -> bool {
    name.ends_with(".key") || contains(value, PEM_KEY_MARK)
}

/// The entries of `data` (and of the last-applied copy in `annotations`) holding a
/// private key, except `needed` (the identity's own `tls.key`), as
/// `data[NAME]` / `annotation ...: data[NAME]`.
pub fn entries<'a>(
    data: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    annotations: Option<&BTreeMap<String, String>>,
    needed: Option<&str>,
) -> Vec<String> {
    let unneeded = |name: &str| Some(name) != needed;
    let mut found: Vec<String> = data
        .into_iter()
        .filter(|(name, value)| unneeded(name) && holds_key(name, value))
        .map(|(name, _)| format!("data[{name}]"))
        .collect();
    let applied = annotations
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok());
    if let Some(applied) = applied {
        for field in ["data", "stringData"] {
            let Some(object) = applied.get(field).and_then(|v| v.as_object()) else {
                continue;
            };
            for (name, value) in object {
                let text = value.as_str().unwrap_or_default();
                if unneeded(name) && holds_key(name, text.as_bytes()) {
                    found.push(format!("annotation {LAST_APPLIED}: {field}[{name}]"));
                }
            }
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_entries_are_named_by_name_or_content() {
        let pem = b"-----BEGIN EC PRIVATE KEY-----\nMHc=\n-----END EC PRIVATE KEY-----\n";
        let data: Vec<(&str, &[u8])> = vec![
            ("ca.crt", b"-----BEGIN CERTIFICATE-----"),
            ("ca.key", b"x"),
            ("bundle.pem", pem),
            ("tls.key", pem),
        ];
        let mut annotations = BTreeMap::new();
        annotations.insert(
            LAST_APPLIED.to_owned(),
            r#"{"data":{"ca.crt":"LS0t","tls.key":"LS0t"},"stringData":{"x":"-----BEGIN PRIVATE KEY-----"}}"#
                .to_owned(),
        );
        assert_eq!(
            entries(data.clone(), Some(&annotations), None),
            [
                "data[ca.key]",
                "data[bundle.pem]",
                "data[tls.key]",
                "annotation kubectl.kubernetes.io/last-applied-configuration: data[tls.key]",
                "annotation kubectl.kubernetes.io/last-applied-configuration: stringData[x]",
            ]
        );
        // An identity needs its tls.key: only the others are named.
        assert_eq!(
            entries(data, None, Some("tls.key")),
            ["data[ca.key]", "data[bundle.pem]"]
        );
    }
}
