//! The migrated service receives too: `GET /api/v1/whoami` behind Debian's nginx as
//! the platform's ingress (mTLS terminated there, the verified client certificate
//! forwarded in `ssl-client-cert`, as ingress-nginx does). The service verifies that
//! certificate against the watched client CA Secret, then the `X-Principal`:
//! - in the `go-compatible` mode, a Go sender's unsigned principal is accepted and
//!   counted (`svc_tls_principal_accepted_unsigned_total`, read from its /metrics);
//! - in the `strict` mode it is refused;
//! - in both, a principal signed for this service verifies, and one signed for
//!   another service is refused.
//!
//! nginx must be installed (`apt-get install nginx`; `cargo xtask test` does it): a
//! missing nginx fails the test, it is never skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{Running, caller, free_port, signed, write_kubeconfig};
use kube_testbed::Testbed;
use platform_client_compat::tls::principal::{PRINCIPAL_HEADER, Principal};
use test_support::nginx::Nginx;
use test_support::pki::TestCa;

const NS: &str = "unikorn";

fn secret(name: &str, type_: &str, data: &[(&str, &str)]) -> serde_json::Value {
    test_support::secret::secret_with(NS, name, type_, data)
}

/// What a Go sender puts in `X-Principal`: the JSON, base64url, unsigned.
fn unsigned(actor: &str) -> String {
    let who = Principal {
        organization_id: Some("org-1".into()),
        actor: Some(actor.into()),
        ..Principal::default()
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&who).unwrap())
}

/// `GET /api/v1/whoami` through the ingress: the status and the body.
async fn whoami(http: &reqwest::Client, nginx: &Nginx, principal: &str) -> (u16, String) {
    let response = http
        .get(nginx.url("/api/v1/whoami"))
        .header(PRINCIPAL_HEADER, principal)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap().trim().to_owned())
}

async fn metrics(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_behind_nginx_in_the_go_compatible_and_the_strict_mode() {
    let tb = Testbed::start().await;
    let (ingress_ca, clients, others) = (
        TestCa::new("ingress"),
        TestCa::new("platform clients"),
        TestCa::new("other clients"),
    );
    // The service's own identity (it needs one to start), and the client CA Secret
    // the ingress's auth-tls-secret annotation names.
    let own = clients.client_leaf("migrated-service", 1);
    tb.upsert(secret(
        "svc-client-certificate",
        "kubernetes.io/tls",
        &[("tls.crt", &own.cert_pem), ("tls.key", &own.key_pem)],
    ));
    tb.upsert(secret(
        "ingress-client-ca",
        "Opaque",
        &[("ca.crt", &clients.pem())],
    ));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &tb);
    let go_sender = clients.client_leaf("go-sender", 2);
    let http = caller(&ingress_ca, Some(&go_sender));

    // The go-compatible mode without its end date or its senders does not start,
    // and says which flag is missing (issue 50).
    for (flags, missing) in [
        (vec!["--principal-compat-sender=cn:go-sender"], "end date"),
        (
            vec!["--principal-compat-until=2999-01-01"],
            "names no sender",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .args([
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--client-certificate-namespace={NS}"),
                "--client-certificate-name=svc-client-certificate".to_owned(),
                "--identity-host=https://identity.invalid".to_owned(),
                "--requests=0".to_owned(),
                format!("--receive-bind-address=127.0.0.1:{}", free_port()),
                format!("--ingress-ca-secret-namespace={NS}"),
                "--ingress-ca-secret-name=ingress-client-ca".to_owned(),
                "--principal-audience=https://region.example.com".to_owned(),
                "--principal-receiving-mode=go-compatible".to_owned(),
            ])
            .args(flags)
            .env_remove("KUBECONFIG")
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains(missing), "{missing}: {stderr}");
    }

    for mode in ["go-compatible", "strict"] {
        let (receive_port, metrics_port) = (free_port(), free_port());
        // The ingress: verifies client certificates of the platform's clients CA
        // (optional, as ingress-nginx's "optional" auth-tls-verify-client, so that
        // an anonymous caller reaches the service with ssl-client-verify NONE).
        let nginx = Nginx::start(
            &ingress_ca.server_leaf(),
            &clients.pem(),
            "optional",
            &format!(
                "proxy_pass http://127.0.0.1:{receive_port}; \
                 proxy_set_header ssl-client-cert $ssl_client_escaped_cert; \
                 proxy_set_header ssl-client-verify $ssl_client_verify;"
            ),
        );
        let audience = nginx.url("/");
        let _service = Running(
            Command::new(env!("CARGO_BIN_EXE_migrated-service"))
                .args([
                    format!("--kubeconfig={}", kubeconfig.display()),
                    format!("--client-certificate-namespace={NS}"),
                    "--client-certificate-name=svc-client-certificate".to_owned(),
                    "--identity-host=https://identity.invalid".to_owned(),
                    "--requests=0".to_owned(),
                    format!("--receive-bind-address=127.0.0.1:{receive_port}"),
                    format!("--ingress-ca-secret-namespace={NS}"),
                    "--ingress-ca-secret-name=ingress-client-ca".to_owned(),
                    format!("--principal-audience={audience}"),
                    format!("--principal-receiving-mode={mode}"),
                    "--principal-compat-until=2999-01-01".to_owned(),
                    "--principal-compat-sender=cn:go-sender".to_owned(),
                    format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
                    "--serve-for=5m".to_owned(),
                    "--request-interval=1h".to_owned(),
                ])
                .env_remove("KUBECONFIG")
                .env("HOME", dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Until the service listens, nginx answers 502.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut first = whoami(&http, &nginx, &unsigned("go-sender")).await;
        while first.0 == 502 {
            assert!(
                Instant::now() < deadline,
                "{mode}: the service never answered"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
            first = whoami(&http, &nginx, &unsigned("go-sender")).await;
        }

        // A Go sender's unsigned principal.
        match mode {
            "go-compatible" => {
                assert_eq!(
                    first,
                    (
                        200,
                        "principal actor=go-sender organization=org-1 project=".to_owned()
                    ),
                    "{mode}"
                );
                let text = metrics(metrics_port).await;
                assert!(
                    text.contains("svc_tls_principal_accepted_unsigned_total 1\n"),
                    "{text}"
                );
                assert!(
                    text.contains("svc_tls_principal_receiving_mode{mode=\"go-compatible\"} 1\n"),
                    "{text}"
                );
            }
            _ => {
                assert_eq!(first, (401, "refused unsigned".to_owned()), "{mode}");
                let text = metrics(metrics_port).await;
                assert!(
                    text.contains("svc_tls_principal_accepted_unsigned_total 0\n"),
                    "{text}"
                );
                assert!(
                    text.contains(
                        "svc_tls_principal_verified_total{algorithm=\"unknown\",result=\"unsigned\"} 1\n"
                    ),
                    "{text}"
                );
                assert!(
                    text.contains("svc_tls_principal_receiving_mode{mode=\"strict\"} 1\n"),
                    "{text}"
                );
            }
        }

        // Signed for this service (the ingress's origin): verified in both modes,
        // once: the same token again is a replay.
        let ours = signed(&go_sender, &audience, "rust-sender");
        let (status, body) = whoami(&http, &nginx, &ours).await;
        assert_eq!(
            (status, body.as_str()),
            (200, "principal actor=rust-sender organization= project="),
            "{mode}"
        );
        assert_eq!(
            whoami(&http, &nginx, &ours).await,
            (401, "refused replayed".to_owned()),
            "{mode}"
        );
        // Signed for another service: a captured principal replayed here.
        let replayed = signed(&go_sender, "https://identity.example.com/", "mallory");
        assert_eq!(
            whoami(&http, &nginx, &replayed).await,
            (401, "refused audience".to_owned()),
            "{mode}"
        );
        // Signed with a key whose certificate is not the caller's.
        let stranger = others.client_leaf("stranger", 3);
        assert_eq!(
            whoami(&http, &nginx, &signed(&stranger, &audience, "mallory")).await,
            (401, "refused bad_signature".to_owned()),
            "{mode}"
        );
        // No client certificate: the ingress says NONE, and the unsigned form is no
        // principal without one.
        let anonymous = caller(&ingress_ca, None);
        assert_eq!(
            whoami(&anonymous, &nginx, &unsigned("anyone")).await,
            (401, "refused certificate_not_verified".to_owned()),
            "{mode}"
        );
    }
}
