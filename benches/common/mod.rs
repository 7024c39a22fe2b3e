//! Key material and result output shared by the benchmarks (included with `#[path]`).
//!
//! Every benchmark, and the Go program in `benches/go/`, works on the same PEM bytes:
//! the first benchmark binary that runs generates them into `BENCH_MATERIAL_DIR` (set
//! by `cargo xtask bench`; a per-process temporary directory otherwise), the others
//! and the Go program read them from there.
//!
//! Layout of the directory:
//! - `cases.txt`: the case names, one per line (`rsa2048-pkcs8`, `p256-sec1`, ...);
//! - `<case>.crt` / `<case>.key`: `tls.crt` (leaf, then the client CA) and `tls.key`;
//! - `<case>.b.crt` / `<case>.b.key`: a second identity of the same kind (a rotation);
//! - `client-ca.crt`, `server.crt`, `server.key`, `server-ca.crt`: for the handshakes.
#![allow(dead_code)]

pub(crate) mod go;
pub(crate) mod tls;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use test_support::keys::{KeyAlg, KeyFormat};
use test_support::pki::TestCa;

/// One client identity case: key type and key format.
pub(crate) struct Case {
    /// `<key>-<format>`, e.g. `rsa2048-pkcs1`.
    pub name: String,
    /// `tls.crt` / `tls.key` of the identity served first.
    pub cert_pem: String,
    pub key_pem: String,
    /// `tls.crt` / `tls.key` of the identity it rotates to.
    pub rotated_cert_pem: String,
    pub rotated_key_pem: String,
}

impl Case {
    /// The key type part of the name (`rsa2048`, `p256`, ...).
    pub(crate) fn key(&self) -> &str {
        self.name.split('-').next().unwrap_or(&self.name)
    }
}

pub(crate) struct Material {
    pub dir: PathBuf,
    pub cases: Vec<Case>,
    pub client_ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub server_ca_pem: String,
}

impl Material {
    pub(crate) fn case(&self, name: &str) -> &Case {
        self.cases
            .iter()
            .find(|case| case.name == name)
            .unwrap_or_else(|| panic!("no material case {name}"))
    }
}

/// Whether `cargo xtask bench --quick` asked for a smoke run.
pub(crate) fn quick() -> bool {
    std::env::var_os("BENCH_QUICK").is_some_and(|v| v == "1")
}

/// Loads the material, generating it first if the directory has none.
pub(crate) fn material() -> Material {
    let dir = std::env::var_os("BENCH_MATERIAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("platform-bench-material-{}", std::process::id()))
        });
    // Material from an earlier set of key types is made again.
    let complete = std::fs::read_to_string(dir.join("cases.txt")).is_ok_and(|cases| {
        KEYS.iter().all(|(key, formats)| {
            formats
                .iter()
                .all(|f| cases.contains(&format!("{key}-{f}\n")))
        })
    });
    if !complete {
        generate(&dir);
    }
    load(&dir)
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.join(name).display()))
}

fn load(dir: &Path) -> Material {
    let cases = read(dir, "cases.txt")
        .split_whitespace()
        .map(|name| Case {
            name: name.to_owned(),
            cert_pem: read(dir, &format!("{name}.crt")),
            key_pem: read(dir, &format!("{name}.key")),
            rotated_cert_pem: read(dir, &format!("{name}.b.crt")),
            rotated_key_pem: read(dir, &format!("{name}.b.key")),
        })
        .collect();
    Material {
        dir: dir.to_path_buf(),
        cases,
        client_ca_pem: read(dir, "client-ca.crt"),
        server_cert_pem: read(dir, "server.crt"),
        server_key_pem: read(dir, "server.key"),
        server_ca_pem: read(dir, "server-ca.crt"),
    }
}

/// A P-256 CA with rcgen's default subject and no key usages (the shape the Go
/// program and the committed benchmark runs were measured with).
pub(crate) fn ca() -> TestCa {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    TestCa::from_params(params)
}

pub(crate) fn generate_key(key: &str) -> KeyPair {
    KeyAlg::from_name(key)
        .unwrap_or_else(|| panic!("unknown key type {key}"))
        .generate()
}

/// The key types and formats measured (the formats cert-manager and Go write).
pub(crate) const KEYS: &[(&str, &[&str])] = &[
    ("rsa2048", &["pkcs8", "pkcs1"]),
    ("rsa3072", &["pkcs8"]),
    ("rsa4096", &["pkcs8", "pkcs1"]),
    ("rsa8192", &["pkcs8"]),
    ("p256", &["pkcs8", "sec1"]),
    ("p384", &["pkcs8", "sec1"]),
    ("ed25519", &["pkcs8"]),
];

fn write(dir: &Path, name: &str, contents: &str) {
    let mut file = std::fs::File::create(dir.join(name)).unwrap();
    file.write_all(contents.as_bytes()).unwrap();
}

/// Generates all the material into `dir` (through a sibling temporary directory, so
/// that a reader never sees half of it).
pub(crate) fn generate(dir: &Path) {
    eprintln!("bench: generating key material in {}", dir.display());
    let staging = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).unwrap();
    let client_ca = ca();
    let identity = |key: &KeyPair| {
        let mut params = CertificateParams::new(vec!["client.bench.test".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2090, 1, 1);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let leaf = params.signed_by(key, client_ca.issuer()).unwrap();
        // tls.crt as cert-manager writes it: leaf, then the issuer.
        format!("{}{}", leaf.pem(), client_ca.pem())
    };
    let key_pem = |key: &KeyPair, format: &str| {
        let format = match format {
            "pkcs8" => KeyFormat::Pkcs8,
            "pkcs1" => KeyFormat::Pkcs1,
            "sec1" => KeyFormat::Sec1,
            other => panic!("unknown key format {other}"),
        };
        test_support::keys::key_pem(key, format)
    };
    let mut names = Vec::new();
    for &(key_type, formats) in KEYS {
        let first = generate_key(key_type);
        let second = generate_key(key_type);
        let (first_crt, second_crt) = (identity(&first), identity(&second));
        for &format in formats {
            let name = format!("{key_type}-{format}");
            write(&staging, &format!("{name}.crt"), &first_crt);
            write(&staging, &format!("{name}.key"), &key_pem(&first, format));
            write(&staging, &format!("{name}.b.crt"), &second_crt);
            write(
                &staging,
                &format!("{name}.b.key"),
                &key_pem(&second, format),
            );
            names.push(name);
        }
    }
    write(&staging, "client-ca.crt", &client_ca.pem());

    let server_ca = ca();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let server = params.signed_by(&server_key, server_ca.issuer()).unwrap();
    write(&staging, "server.crt", &server.pem());
    write(&staging, "server.key", &server_key.serialize_pem());
    write(&staging, "server-ca.crt", &server_ca.pem());
    // Last, so that its presence means the rest is complete.
    write(&staging, "cases.txt", &(names.join("\n") + "\n"));
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).unwrap();
}

/// A `kubernetes.io/tls` Secret with the given `tls.crt` and `tls.key`.
pub(crate) fn secret(namespace: &str, name: &str, cert_pem: &str, key_pem: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            (
                "tls.crt".to_owned(),
                ByteString(cert_pem.as_bytes().to_vec()),
            ),
            (
                "tls.key".to_owned(),
                ByteString(key_pem.as_bytes().to_vec()),
            ),
        ])),
        ..Default::default()
    }
}

/// Like [`emit`], for counts (unit `count`): one value per event.
pub(crate) fn emit_counts(file: &str, id: &str, counts: &[f64]) {
    eprintln!(
        "bench: counted {id}: {} over {} events",
        counts.iter().sum::<f64>(),
        counts.len()
    );
    write_line(
        file,
        serde_json::json!({ "id": id, "unit": "count", "samples": counts }),
    );
}

/// Appends sampled results (mean nanoseconds per operation, one per batch) as one JSON
/// line to `BENCH_RESULTS_DIR/<file>.jsonl`, the format of the Go program's output,
/// for the benchmarks criterion cannot express (interleaved batches, one-shot loads).
pub(crate) fn emit(file: &str, id: &str, samples: &[f64]) {
    eprintln!("bench: measured {id} ({} samples)", samples.len());
    if std::env::var_os("BENCH_RESULTS_DIR").is_none() {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        eprintln!(
            "bench: {id}: median {:.0} ns (set BENCH_RESULTS_DIR to keep the samples)",
            sorted[sorted.len() / 2]
        );
        return;
    }
    write_line(
        file,
        serde_json::json!({ "id": id, "unit": "ns", "samples": samples }),
    );
}

/// Like [`emit`] for samples measured in interleaved rounds: every id's sample `i`
/// comes from round `i` of the same measurement, named `group` (unique in the run),
/// which the report requires before it pairs two ids round by round (a ratio
/// between the languages is taken only between ids of one group).
pub(crate) fn emit_paired(file: &str, group: &str, series: &[(String, Vec<f64>)]) {
    let rounds = series.first().map_or(0, |(_, s)| s.len());
    for (id, samples) in series {
        assert_eq!(samples.len(), rounds, "{id}: not one sample per round");
        eprintln!("bench: measured {id} ({rounds} rounds, paired in {file}/{group})");
        if std::env::var_os("BENCH_RESULTS_DIR").is_none() {
            continue;
        }
        write_line(
            file,
            serde_json::json!({
                "id": id,
                "unit": "ns",
                "samples": samples,
                "paired": format!("{file}/{group}"),
            }),
        );
    }
}

/// Appends `line` to `BENCH_RESULTS_DIR/<file>.jsonl` (nothing without the variable).
fn write_line(file: &str, line: serde_json::Value) {
    let Some(dir) = std::env::var_os("BENCH_RESULTS_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{file}.jsonl")))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}
