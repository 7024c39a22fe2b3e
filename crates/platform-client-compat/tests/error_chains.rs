//! One test walking every public error chain of every published crate (issue 40):
//! each public error type's variants that carry a cause, built from outside as a
//! caller meets them, follow the rule written in
//! docs/decisions/errors-cause-in-source.md, and every link shows outside text
//! only as a short escaped excerpt ([`test_support::error_rule`]). Text a hostile API
//! server sends goes in through the public paths that carry it (a kube error's
//! excerpt, a watch refusal). `test_support::error_rule`'s own tests show the checker
//! catches a variant that prints its source and returns it; `every_error_attribute_*`
//! below checks the same rule over every `#[error(...)]` in the crates' sources,
//! which also covers variants only the crates themselves can build.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kube_construct::cache::{CacheError, CacheName, NotReady, Selection};
use kube_construct::client::{ClientError, ConstructError};
use kube_construct::config::{ConfigError, InClusterError, InClusterProblem};
use kube_construct::registry::{DecodeError, EncodeError, RegistryError};
use svc_tls::material::{
    ConfigMapTrustError, ConfigMapTrustProblem, MaterialError, MaterialErrorKind,
};
use svc_tls::options::{HostError, HostProblem, OptionsError};
use svc_tls::origin::{ConfigMapRef, SecretRef};
use test_support::error_rule::{assert_follows_rule, violations};

fn hostile_kube() -> kube::Error {
    kube::Error::Api(Box::new(
        kube::core::Status::failure(&test_support::hostile::status_message(), "Forbidden")
            .with_code(403),
    ))
}

fn hostile_refusal() -> watch_ready::Refusal {
    watch_ready::Refusal::of(&kube_runtime::watcher::Error::InitialListFailed(
        hostile_kube(),
    ))
    .unwrap()
}

fn json_error() -> serde_json::Error {
    serde_json::from_str::<serde_json::Value>("{\"a\":").unwrap_err()
}

fn reqwest_error() -> reqwest::Error {
    reqwest::Client::new()
        .get("http://[::1")
        .build()
        .unwrap_err()
}

fn material() -> MaterialError {
    MaterialError::new(
        SecretRef::new("unikorn", "ca"),
        Some("ca.crt"),
        MaterialErrorKind::NoCertificate,
    )
}

fn boxed(text: &str) -> Box<dyn Error + Send + Sync + 'static> {
    text.to_owned().into()
}

fn cache_name() -> CacheName {
    CacheName {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        plural: "secrets".into(),
        selection: Selection::default(),
    }
}

/// Every error built below, named.
fn svc_tls_errors() -> Vec<(&'static str, Box<dyn Error>)> {
    use svc_tls::identity::IdentityReloadError as IdentityReload;
    use svc_tls::trust::TrustReloadError as TrustReload;
    let secret = SecretRef::new("unikorn", "client-cert");
    let trust_origin = svc_tls::TrustOrigin::Secret(SecretRef::new("unikorn", "ca"));
    let configmap = ConfigMapTrustError {
        configmap: ConfigMapRef::new("unikorn", "bundle"),
        key: "ca.crt".into(),
        problem: ConfigMapTrustProblem::NoCertificate,
    };
    let source_refused = svc_tls::watch::WatchError::<svc_tls::watch::Secret>::Refused {
        object: secret.clone(),
        cluster: None,
        code: 403,
        message: hostile_refusal().message,
    };
    let verifier_builder = || rustls::client::VerifierBuilderError::NoRootAnchors;
    vec![
        (
            "identity::IdentityReloadError::NotFound",
            Box::new(IdentityReload::NotFound {
                secret: secret.clone(),
            }),
        ),
        (
            "identity::IdentityReloadError::Material",
            Box::new(IdentityReload::Material(material())),
        ),
        (
            "identity::IdentityReloadError::Unavailable",
            Box::new(IdentityReload::Unavailable(boxed("stream down"))),
        ),
        (
            "identity::IdentityReloadError::OutsideValidity",
            Box::new(IdentityReload::OutsideValidity {
                validity: svc_tls::material::CertificateValidity::Expired {
                    not_after: SystemTime::UNIX_EPOCH,
                },
                source: boxed("notAfter Jan  1 00:00:00 2020 +00:00 has passed"),
            }),
        ),
        (
            "identity::IdentityReloadError::InProgress",
            Box::new(IdentityReload::InProgress),
        ),
        (
            "IdentityError::Source",
            Box::new(svc_tls::IdentityError::Source(source_refused)),
        ),
        (
            "IdentityError::Unusable",
            Box::new(svc_tls::IdentityError::Unusable(IdentityReload::Material(
                material(),
            ))),
        ),
        (
            "trust::TrustReloadError::NotFound",
            Box::new(TrustReload::NotFound {
                secret: secret.clone(),
            }),
        ),
        (
            "trust::TrustReloadError::Material",
            Box::new(TrustReload::Material(material())),
        ),
        (
            "trust::TrustReloadError::ConfigMap",
            Box::new(TrustReload::ConfigMap(Box::new(configmap.clone()))),
        ),
        (
            "trust::TrustReloadError::Unavailable",
            Box::new(TrustReload::Unavailable(boxed("stream down"))),
        ),
        (
            "trust::TrustReloadError::Refused",
            Box::new(TrustReload::Refused {
                object: "Secret unikorn/ca".into(),
                code: 403,
            }),
        ),
        (
            "trust::TrustReloadError::Withdrawn",
            Box::new(TrustReload::Withdrawn(boxed("de-federated"))),
        ),
        (
            "TrustError::Verifier",
            Box::new(svc_tls::TrustError::Verifier {
                origin: trust_origin.clone(),
                source: verifier_builder(),
            }),
        ),
        (
            "TrustError::Unusable",
            Box::new(svc_tls::TrustError::Unusable(TrustReload::ConfigMap(
                Box::new(configmap.clone()),
            ))),
        ),
        (
            "WatchError::<ConfigMap>::Refused",
            Box::new(
                svc_tls::watch::WatchError::<svc_tls::watch::ConfigMap>::Refused {
                    object: ConfigMapRef::new("unikorn", "bundle"),
                    cluster: None,
                    code: 403,
                    message: hostile_refusal().message,
                },
            ),
        ),
        ("ConfigMapTrustError", Box::new(configmap)),
        (
            "PeerClientError::CaSecretRead",
            Box::new(svc_tls::PeerClientError::CaSecretRead {
                secret: secret.clone(),
                source: svc_tls::KubeError::of(&hostile_kube()),
            }),
        ),
        (
            "PeerClientError::Trust",
            Box::new(svc_tls::PeerClientError::Trust(material())),
        ),
        (
            "PeerClientError::Tls",
            Box::new(svc_tls::PeerClientError::Tls(
                rustls::Error::NoCertificatesPresented,
            )),
        ),
        (
            "PeerClientError::Http",
            Box::new(svc_tls::PeerClientError::Http(reqwest_error())),
        ),
        (
            "PeerClientError::Config",
            Box::new(svc_tls::PeerClientError::Config(
                OptionsError::MissingFlag { flag: "x".into() },
            )),
        ),
        (
            "PeerClientError::Host",
            Box::new(svc_tls::PeerClientError::Host(HostError::Invalid {
                flag: "region-host".into(),
                value: "ftp://x".into(),
                problem: HostProblem::UnsupportedScheme {
                    scheme: "ftp".into(),
                },
            })),
        ),
        (
            "PeerRequestError::TrustChanged",
            Box::new(svc_tls::PeerRequestError::TrustChanged {
                trust: svc_tls::TrustOrigin::Secret(SecretRef::new("unikorn", "ca")),
                changed_at: SystemTime::UNIX_EPOCH,
                withdrawn: false,
                source: reqwest_error(),
            }),
        ),
        (
            "PeerRequestError::Http",
            Box::new(svc_tls::PeerRequestError::Http(reqwest_error())),
        ),
        (
            "SignError::Identity",
            Box::new(svc_tls::principal::SignError::Identity(boxed(
                "no identity",
            ))),
        ),
        (
            "SignError::Encode",
            Box::new(svc_tls::principal::SignError::Encode(json_error())),
        ),
        (
            "SignError::Provider",
            Box::new(svc_tls::principal::SignError::Provider(
                rustls::Error::General("sign".into()),
            )),
        ),
        (
            "SignError::InvalidRequest",
            Box::new(svc_tls::principal::SignError::InvalidRequest(
                reqwest_error(),
            )),
        ),
        (
            "VerifyError::MalformedHeader",
            Box::new(svc_tls::VerifyError::MalformedHeader(json_error())),
        ),
        (
            "VerifyError::PayloadNotJson",
            Box::new(svc_tls::VerifyError::PayloadNotJson(json_error())),
        ),
        (
            "VerifyError::PayloadType",
            Box::new(svc_tls::VerifyError::PayloadType(json_error())),
        ),
        (
            "IngressError::Untrusted",
            Box::new(svc_tls::receiving::IngressError::Untrusted(
                webpki::Error::UnknownIssuer,
            )),
        ),
        (
            "IngressError::TrustAnchor",
            Box::new(svc_tls::receiving::IngressError::TrustAnchor(
                webpki::Error::BadDer,
            )),
        ),
        (
            "IngressError::AnchorsUnavailable",
            Box::new(svc_tls::receiving::IngressError::AnchorsUnavailable(
                rustls::Error::General("none".into()),
            )),
        ),
        (
            "IngressError::Certificate",
            Box::new(svc_tls::receiving::IngressError::Certificate(
                svc_tls::principal::CertificateError::NoCertificate,
            )),
        ),
        (
            "RequestPrincipalError::Verify",
            Box::new(svc_tls::receiving::RequestPrincipalError::Verify(
                svc_tls::VerifyError::PayloadType(json_error()),
            )),
        ),
        (
            "SpiffeStartError::Unreachable",
            Box::new(svc_tls::spiffe::SpiffeStartError::Unreachable {
                endpoint: "unix:/x".into(),
                timeout: Duration::from_secs(1),
                error: "refused".into(),
            }),
        ),
    ]
}

fn kube_construct_errors() -> Vec<(&'static str, Box<dyn Error>)> {
    let in_cluster = || InClusterError {
        problems: vec![
            InClusterProblem::HostNotSet,
            InClusterProblem::Unreadable {
                what: "token",
                path: PathBuf::from("/var/run/token"),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
        ],
    };
    let kubeconfig = || kube::config::KubeconfigError::CurrentContextNotSet;
    let gvk = || kube::api::GroupVersionKind::gvk("", "v1", "Secret");
    vec![
        (
            "ConfigError::NoSource",
            Box::new(ConfigError::NoSource {
                in_cluster: in_cluster(),
            }),
        ),
        (
            "ConfigError::KubeconfigUnreadable",
            Box::new(ConfigError::KubeconfigUnreadable {
                path: PathBuf::from("/k"),
                source: kubeconfig(),
            }),
        ),
        (
            "ConfigError::InvalidKubeconfig",
            Box::new(ConfigError::InvalidKubeconfig {
                paths: vec![PathBuf::from("/k")],
                context: "c".into(),
                source: kubeconfig(),
            }),
        ),
        (
            "InClusterProblem::Unreadable",
            Box::new(InClusterProblem::Unreadable {
                what: "token",
                path: PathBuf::from("/t"),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            }),
        ),
        (
            "RegistryError::Addition",
            Box::new(RegistryError::Addition {
                index: 0,
                source: Box::new(RegistryError::NotRegistered(gvk())),
            }),
        ),
        (
            "DecodeError::Deserialize",
            Box::new(DecodeError::Deserialize {
                gvk: gvk(),
                type_name: "Secret",
                source: json_error(),
            }),
        ),
        (
            "EncodeError::Serialize",
            Box::new(EncodeError::Serialize {
                gvk: gvk(),
                source: json_error(),
            }),
        ),
        (
            "ConstructError::Client",
            Box::new(ConstructError::Client(watch_ready::KubeError::of(
                &hostile_kube(),
            ))),
        ),
        (
            "ConstructError::InCluster",
            Box::new(ConstructError::InCluster(in_cluster())),
        ),
        (
            "ClientError::Decode",
            Box::new(ClientError::Decode {
                resource: "secrets.v1".into(),
                source: json_error(),
            }),
        ),
        (
            "ClientError::Api",
            Box::new(ClientError::Api(
                watch_ready::KubeError::of(&hostile_kube()),
            )),
        ),
        (
            "CacheError::Forbidden",
            Box::new(CacheError::Forbidden {
                cache: cache_name(),
                message: hostile_refusal().message,
            }),
        ),
        (
            "CacheError::Unauthorized",
            Box::new(CacheError::Unauthorized {
                cache: cache_name(),
                message: hostile_refusal().message,
            }),
        ),
        (
            "CacheError::UnknownResource",
            Box::new(CacheError::UnknownResource {
                cache: cache_name(),
                message: hostile_refusal().message,
            }),
        ),
        (
            "CacheError::Timeout",
            Box::new(CacheError::Timeout {
                timeout: Duration::from_secs(1),
                not_ready: vec![NotReady {
                    cache: cache_name(),
                    last_error: Some(hostile_refusal().message),
                }],
            }),
        ),
    ]
}

fn provision_scope_errors() -> Vec<(&'static str, Box<dyn Error>)> {
    use provision_scope::{RemoteError, ScopeError, ScopeValue};
    vec![
        (
            "RemoteError::InvalidUrl",
            Box::new(RemoteError::InvalidUrl(url::Url::parse("::").unwrap_err())),
        ),
        (
            "RemoteError::Client",
            Box::new(RemoteError::Client {
                cluster: "c".into(),
                source: kube::Error::LinesCodecMaxLineLengthExceeded,
            }),
        ),
        (
            "ScopeError::Missing",
            Box::new(ScopeError::Missing(ScopeValue::Cluster)),
        ),
        (
            "UnidentifiedCluster",
            Box::new(svc_tls::UnidentifiedCluster {
                what: "adopted client",
            }),
        ),
    ]
}

#[cfg(feature = "metrics")]
fn compat_errors() -> Vec<(&'static str, Box<dyn Error>)> {
    use platform_client_compat::metrics::MetricsError;
    vec![
        (
            "MetricsError::Tls",
            Box::new(MetricsError::Tls(
                svc_tls::metrics::InstallError::AlreadyInstalled,
            )),
        ),
        (
            "MetricsError::Construct",
            Box::new(MetricsError::Construct(
                kube_construct::metrics::RegisterError::AlreadyRegistered,
            )),
        ),
    ]
}

#[cfg(not(feature = "metrics"))]
fn compat_errors() -> Vec<(&'static str, Box<dyn Error>)> {
    Vec::new()
}

#[test]
fn every_public_error_chain_shows_each_cause_once_and_outside_text_escaped() {
    let all: Vec<_> = svc_tls_errors()
        .into_iter()
        .chain(kube_construct_errors())
        .chain(provision_scope_errors())
        .chain(compat_errors())
        .collect();
    let broken: Vec<String> = all
        .iter()
        .filter_map(|(name, error)| {
            let found = violations(error.as_ref());
            (!found.is_empty()).then(|| format!("{name}: {found:?}"))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "{} of {} break the rule:\n{}",
        broken.len(),
        all.len(),
        broken.join("\n")
    );
    // The hostile server's text reached the chains that carry it, escaped.
    for (name, error) in &all {
        if name.contains("CaSecretRead")
            || name.contains("ClientError::Api")
            || name.contains("Forbidden")
        {
            let chain = svc_tls::excerpt::chain(error.as_ref());
            assert!(
                chain.contains("denied\\nERROR forged line"),
                "{name}: {chain:.200}"
            );
        }
    }
    assert_follows_rule(
        "IdentityError::Unusable",
        &svc_tls::IdentityError::Unusable(svc_tls::identity::IdentityReloadError::Material(
            material(),
        )),
    );
}

/// Every `#[error("...")]` of the published crates whose format names a field that is
/// the variant's `#[source]`/`#[from]` (or named `source`): the rule broken in a form
/// the construction above might not reach (a variant only the crate can build).
#[test]
fn every_error_attribute_of_the_published_crates_leaves_its_source_out_of_display() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut broken = Vec::new();
    let mut checked = 0usize;
    for name in [
        "svc-tls",
        "kube-construct",
        "provision-scope",
        "cluster-id",
        "watch-ready",
        "platform-client-compat",
    ] {
        for file in rust_files(&crates.join(name).join("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, variant, fmt, sources) in error_attributes(&text) {
                checked += 1;
                for field in &sources {
                    if names_field(&fmt, field) {
                        broken.push(format!(
                            "{}:{line}: {variant} shows its source `{field}`",
                            file.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} #[error] attributes found: the scan is broken"
    );
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_attribute_scan_catches_a_variant_printing_its_source() {
    let text = r#"
    enum E {
        #[error("reading failed: {0}")]
        Read(#[source] std::io::Error),
        #[error("cannot decode {kind}: {source}")]
        Decode {
            /// The kind, as sent (a comma, and a bracket: [).
            kind: String,
            /// What went wrong, in serde's words.
            source: serde_json::Error,
        },
        #[error("fine")]
        Fine(#[source] std::io::Error),
    }"#;
    let found: Vec<_> = error_attributes(text)
        .into_iter()
        .filter(|(_, _, fmt, sources)| sources.iter().any(|s| names_field(fmt, s)))
        .map(|(_, variant, _, _)| variant)
        .collect();
    assert_eq!(found, ["Read", "Decode"]);
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `(line, variant, format text, source fields)` of each non-transparent
/// `#[error(...)]` in `text`.
fn error_attributes(text: &str) -> Vec<(usize, String, String, Vec<String>)> {
    // Comments may hold quotes and brackets: blank them, keeping the line numbers.
    let text: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = text.as_str();
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0usize;
    while let Some(at) = rest.find("#[error(") {
        let start = offset + at;
        let (fmt, after) = balanced(&text[start + "#[error".len()..]);
        let after_attr = start + "#[error".len() + after;
        offset = after_attr;
        rest = &text[after_attr..];
        if fmt.trim() == "(transparent)" {
            continue;
        }
        // Skip further attributes, visibility and `struct`, to the item's name.
        let mut item = text[after_attr..].trim_start();
        item = item.strip_prefix(']').unwrap_or(item).trim_start();
        while item.starts_with("#[") {
            let (_, used) = balanced(&item[1..]);
            item = item[1 + used..].trim_start();
        }
        for prefix in ["pub(crate) ", "pub(super) ", "pub ", "struct "] {
            item = item.strip_prefix(prefix).unwrap_or(item).trim_start();
        }
        let name: String = item
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let body_start = &item[name.len()..].trim_start();
        let sources = if body_start.starts_with('(') || body_start.starts_with('{') {
            let (body, _) = balanced(body_start);
            source_fields(&body[1..body.len() - 1], body_start.starts_with('('))
        } else {
            Vec::new()
        };
        let line = text[..start].matches('\n').count() + 1;
        out.push((line, name, fmt, sources));
    }
    out
}

/// The bracketed text at the start of `text` (which starts with `(`, `[` or `{`),
/// brackets included, and its length; strings are skipped.
fn balanced(text: &str) -> (String, usize) {
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return (text[..=i].to_owned(), i + 1);
                }
            }
            _ => {}
        }
    }
    (text.to_owned(), text.len())
}

fn source_fields(body: &str, tuple: bool) -> Vec<String> {
    // Comments may hold commas and brackets: drop them first.
    let body: String = body
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut fields = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    let mut parts = Vec::new();
    for c in body.chars() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    let parts: Vec<_> = parts.into_iter().filter(|p| !p.trim().is_empty()).collect();
    for (index, part) in parts.iter().enumerate() {
        let marked = part.contains("#[source]") || part.contains("#[from]");
        if tuple {
            if marked {
                fields.push(index.to_string());
            }
        } else {
            let code: String = part
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("#["))
                .collect::<Vec<_>>()
                .join(" ");
            let name = code
                .trim_start_matches("pub ")
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .to_owned();
            if marked || name == "source" {
                fields.push(name);
            }
        }
    }
    fields
}

/// Whether the format `fmt` shows `field` (`{field}`, `{field:?}`, or an argument
/// naming it after the format string).
fn names_field(fmt: &str, field: &str) -> bool {
    if fmt.contains(&format!("{{{field}}}")) || fmt.contains(&format!("{{{field}:")) {
        return true;
    }
    // Arguments after the string literal: `, source` / `.0` / `*source`.
    let args = match fmt.rfind('"') {
        Some(end) => &fmt[end + 1..],
        None => return false,
    };
    let dotted = format!(".{field}");
    args.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .any(|word| word == field || word == dotted)
}
