//! What both test binaries of the migrated service need: a kubeconfig for the API
//! emulator, as a service's deployment would mount one.

use std::path::{Path, PathBuf};

use kube_testbed::Testbed;

/// Writes a kubeconfig for `tb` (its CA and admin token) into `dir`.
pub fn write_kubeconfig(dir: &Path, tb: &Testbed) -> PathBuf {
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, tb.ca_pem()).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: testbed\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: admin\nusers:\n- name: admin\n  user:\n    token: {token}\n",
        server = tb.base_url(),
        ca = ca.display(),
        token = tb.token(),
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}
