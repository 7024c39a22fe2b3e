//! Certificate text chosen by whoever can write the Secret, printed for the
//! operator: a common name holding ESC sequences and a newline followed by a fake
//! verdict, and an issuer 3000 characters long. The human report escapes them and
//! cuts the long one (the fake line never starts a line); the JSON keeps the exact
//! values.

use crate::common::*;
use kube_testbed::Testbed;
use test_support::pki::TestCa;
use test_support::secret::{secret_with, tls_secret};

/// A title escape, a bell, a clear screen, and a newline starting a fake verdict.
const HOSTILE_CN: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\nresult: ok (exit 0)";
/// How the human report shows it.
const SHOWN_CN: &str = r"evil\u{1b}]0;pwned\u{7}\u{1b}[2J\nresult: ok (exit 0)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_common_name_with_escapes_and_a_newline_prints_escaped() {
    let tb = Testbed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let long_name = format!("elsewhere{}", "A".repeat(3000));
    let stranger_ca = TestCa::new(&long_name);
    let leaf = stranger_ca.client_leaf(HOSTILE_CN, 31);
    tb.upsert(tls_secret(NS, "svc-cert", &leaf.cert_pem, &leaf.key_pem));
    let clients = TestCa::new("clients");
    tb.upsert(secret_with(
        NS,
        "ingress-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    let mut args = identity_args(&kubeconfig, "svc-cert");
    args.push(format!("--chain-ca-secret={NS}/ingress-ca"));

    // The leaf does not chain to the ingress's CA: the verdict is FAILED, and the
    // certificate's fake "result: ok" must not read as one.
    let run = run_async(human(&args), vec![leaf.key_pem.clone()]).await;
    assert_eq!(run.code, 4, "{}\n{}", run.stdout, run.stderr);
    assert_no_control_characters(&run.stdout);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start() == format!("subject: CN={SHOWN_CN}")),
        "the escaped subject is missing:\n{}",
        run.stdout
    );
    let verdicts: Vec<&&str> = lines.iter().filter(|l| l.starts_with("result:")).collect();
    assert_eq!(
        verdicts,
        [&"result: FAILED chain (exit 4)"],
        "{}",
        run.stdout
    );
    // The 3000-character issuer is cut to 256 characters and marked.
    let issuer = format!("issuer: {}…", &format!("CN={long_name}")[..256]);
    assert!(
        lines.iter().any(|l| l.trim_start() == issuer),
        "the cut issuer is missing:\n{}",
        run.stdout
    );
    assert!(run.stdout.len() < 8 * 1024, "{}", run.stdout.len());

    // The JSON keeps the exact values (serde_json escapes them itself).
    let run = run_async(args, vec![leaf.key_pem.clone()]).await;
    assert_eq!(run.code, 4, "{}", run.stdout);
    assert_no_control_characters(&run.stdout);
    let cert = &run.json()["secrets"][0]["certificates"][0];
    assert_eq!(cert["subject"], format!("CN={HOSTILE_CN}"));
    assert_eq!(cert["issuer"], format!("CN={long_name}"));
}
