//! An identity from mounted files (`--client-certificate-source=file`): reported per
//! file (path, size, PEM sections by label, never contents), with the `..data`
//! version, the leaf and whether the key matches it; a key of another certificate is
//! `KeyMismatch` and exit 3. No cluster.

use crate::common::*;
use test_support::pki::TestCa;

/// The pair in `dir` as the kubelet publishes a mounted Secret (`..data` swapped to
/// a versioned directory, the names linked through it).
fn publish(dir: &std::path::Path, cert: &str, key: &str) {
    let version = dir.join("..2026_12_06_00_00_00.1");
    std::fs::create_dir(&version).unwrap();
    std::fs::write(version.join("tls.crt"), cert).unwrap();
    std::fs::write(version.join("tls.key"), key).unwrap();
    std::os::unix::fs::symlink("..2026_12_06_00_00_00.1", dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
}

fn files_args(dir: &std::path::Path, output: &str) -> Vec<String> {
    args(&[
        ("client-certificate-source", "file"),
        ("client-certificate-dir", &dir.display().to_string()),
        ("client-certificate-layout", "kubernetes-tls"),
        ("output", output),
    ])
}

#[test]
fn a_file_identity_is_reported_per_file_with_its_leaf_and_key_match() {
    let ca = TestCa::new("issuer");
    let leaf = ca.client_leaf("svc", 0x5a);
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), &leaf.cert_pem, &leaf.key_pem);

    let run = run(&files_args(dir.path(), "json"), &[], &[&leaf.key_pem]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let files = &run.json()["files"][0];
    assert_eq!(files["role"], "identity");
    assert_eq!(files["layout"], "kubernetes-tls");
    assert_eq!(files["dir"], dir.path().display().to_string());
    assert_eq!(files["version"], "..2026_12_06_00_00_00.1");
    assert_eq!(files["key_matches_certificate"], true);
    assert!(files["loader_error"].is_null());
    let entries = files["files"].as_array().unwrap();
    // The layout's three files: the CA file is optional, and absent here.
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[2]["role"], "ca");
    assert_eq!(entries[2]["found"], false);
    assert_eq!(entries[0]["role"], "certificate");
    assert_eq!(
        entries[0]["path"],
        dir.path().join("tls.crt").display().to_string()
    );
    assert_eq!(entries[0]["found"], true);
    assert_eq!(entries[0]["bytes"], leaf.cert_pem.len());
    assert_eq!(
        entries[0]["pem_sections"],
        serde_json::json!(["CERTIFICATE"])
    );
    assert_eq!(entries[1]["role"], "key");
    assert_eq!(
        entries[1]["pem_sections"],
        serde_json::json!(["key (PKCS#8)"])
    );
    assert_eq!(files["certificates"][0]["serial"], "5a");
    assert!(files["certificates"][0]["not_after_unix"].as_i64().unwrap() > 0);

    // The same for people.
    let text = run_text(dir.path(), &leaf.key_pem);
    assert!(text.contains("files in "), "{text}");
    assert!(text.contains("..data -> ..2026_12_06_00_00_00.1"), "{text}");
    assert!(text.contains("key matches the certificate"), "{text}");
}

#[test]
fn a_key_of_another_certificate_is_a_mismatch_naming_the_files() {
    let ca = TestCa::new("issuer");
    let (leaf, other) = (ca.client_leaf("svc", 1), ca.client_leaf("other", 2));
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), &leaf.cert_pem, &other.key_pem);
    let run = run(
        &files_args(dir.path(), "json"),
        &[],
        &[&leaf.key_pem, &other.key_pem],
    );
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    let files = &run.json()["files"][0];
    assert_eq!(files["key_matches_certificate"], false);
    assert_eq!(files["loader_error"]["kind"], "KeyMismatch");
    let message = files["loader_error"]["message"].as_str().unwrap();
    assert!(message.contains("tls.crt"), "{message}");
    // A missing file is found: false, no size.
    std::fs::remove_file(dir.path().join("tls.key")).unwrap();
    let run = crate::common::run(&files_args(dir.path(), "json"), &[], &[]);
    let entries = &run.json()["files"][0]["files"];
    assert_eq!(entries[1]["found"], false);
    assert!(entries[1]["bytes"].is_null());
}

fn run_text(dir: &std::path::Path, key: &str) -> String {
    let run = run(&files_args(dir, "human"), &[], &[key]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    run.stdout
}
