//! Interoperability of principals with an independent JOSE implementation: PyJWT and
//! `cryptography` (from PyPI) verify our PS512 tokens and produce tokens we verify,
//! for RSA 2048, 3072 and 4096 (plus ES256/ES384, the default for ECDSA keys).
//!
//! The Python side is `tests/interop/jws_interop.py`; `cargo xtask test` installs its
//! packages. PSS is randomised, so tokens are round-tripped, never compared.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use support::keys;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use svc_tls::principal::{
    Algorithm, AlgorithmPolicy, PeerCertificate, Principal, VerifyError, sign_with_key, verify,
};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/jws_interop.py")
}

/// Fails (never skips) when the Python side cannot run, saying what to install.
fn require_python() {
    let probe = Command::new("python3")
        .args(["-c", "import jwt, cryptography"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "the principal interop test needs PyJWT and cryptography for python3: \
             run `pip install pyjwt cryptography` (`cargo xtask test` does this). \
             python3 said: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "the principal interop test needs python3 with PyJWT and cryptography \
             (`pip install pyjwt cryptography`; `cargo xtask test` does this): {e}"
        ),
    }
}

fn run_python(request: &Value) -> Value {
    let mut child = Command::new("python3")
        .arg(script())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "jws_interop.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn principal_for(name: &str) -> Principal {
    Principal {
        organization_id: Some(format!("org-{name}")),
        project_id: Some("proj-interop".into()),
        actor: Some("interop@example.com".into()),
    }
}

#[test]
fn pyjwt_verifies_ours_and_we_verify_pyjwt_for_every_rsa_size() {
    require_python();
    let fixtures = keys::rsa_all();
    let mut to_verify = Vec::new();
    let mut to_sign = Vec::new();
    for f in fixtures {
        let token = sign_with_key(
            f.signing_key.as_ref(),
            &peer_url(),
            &principal_for(f.name),
            AlgorithmPolicy::Ps512Only,
        )
        .unwrap();
        to_verify.push(json!({
            "name": f.name, "alg": "PS512", "cert_pem": f.cert_pem, "token": token.as_str()
        }));
        to_sign.push(json!({
            "name": f.name, "alg": "PS512", "key_pem": f.key_pem,
            "payload": serde_json::to_value(principal_for(f.name)).unwrap()
        }));
    }
    let answer = run_python(&json!({
        "verify": to_verify, "sign": to_sign, "sign_max_salt": to_sign,
    }));

    // Python verified ours (including salt 64 and the exact header) and read the payload.
    let verified = answer["verified"].as_array().unwrap();
    assert_eq!(verified.len(), fixtures.len());
    for (f, v) in fixtures.iter().zip(verified) {
        assert_eq!(v["name"], f.name);
        assert_header(&v["header"], "PS512");
        assert_eq!(
            v["payload"],
            serde_json::to_value(principal_for(f.name)).unwrap()
        );
    }

    // We verify Python's PS512 tokens (salt 64, header with "typ") ...
    let signed = answer["signed"].as_array().unwrap();
    let max_salt = answer["signed_max_salt"].as_array().unwrap();
    assert_eq!(signed.len(), fixtures.len());
    assert_eq!(max_salt.len(), fixtures.len());
    for (i, f) in fixtures.iter().enumerate() {
        let certificate = PeerCertificate::from_pem(f.cert_pem.as_bytes()).unwrap();
        for token in [&signed[i]["token"], &max_salt[i]["token"]] {
            let token = token.as_str().unwrap();
            let back: Principal = verify(token, &certificate, AlgorithmPolicy::Ps512Only)
                .unwrap_or_else(|e| panic!("{}: {e}", f.name));
            assert_eq!(back, principal_for(f.name));
        }
        // ... and only against the right certificate.
        let other = fixtures[(i + 1) % fixtures.len()];
        let other = PeerCertificate::from_pem(other.cert_pem.as_bytes()).unwrap();
        let err = verify::<Principal>(
            signed[i]["token"].as_str().unwrap(),
            &other,
            AlgorithmPolicy::Ps512Only,
        )
        .unwrap_err();
        assert!(matches!(err, VerifyError::BadSignature), "{err:?}");
    }
}

#[test]
fn pyjwt_interoperates_on_ecdsa() {
    require_python();
    let cases = [
        (keys::p256(), Algorithm::Es256),
        (keys::p384(), Algorithm::Es384),
    ];
    let mut to_verify = Vec::new();
    let mut to_sign = Vec::new();
    for (f, alg) in cases {
        let token = sign_with_key(
            f.signing_key.as_ref(),
            &peer_url(),
            &principal_for(f.name),
            AlgorithmPolicy::Ps512OrEcdsa,
        )
        .unwrap();
        assert_eq!(token.algorithm(), alg);
        to_verify.push(json!({
            "name": f.name, "alg": alg.name(), "cert_pem": f.cert_pem, "token": token.as_str()
        }));
        to_sign.push(json!({
            "name": f.name, "alg": alg.name(), "key_pem": f.key_pem,
            "payload": serde_json::to_value(principal_for(f.name)).unwrap()
        }));
    }
    let answer = run_python(&json!({"verify": to_verify, "sign": to_sign}));
    for (i, (f, alg)) in cases.iter().enumerate() {
        assert_header(&answer["verified"][i]["header"], alg.name());
        assert_eq!(
            answer["verified"][i]["payload"],
            serde_json::to_value(principal_for(f.name)).unwrap()
        );
        let certificate = PeerCertificate::from_pem(f.cert_pem.as_bytes()).unwrap();
        let token = answer["signed"][i]["token"].as_str().unwrap();
        let back: Principal = verify(token, &certificate, AlgorithmPolicy::Ps512OrEcdsa).unwrap();
        assert_eq!(back, principal_for(f.name));
        // The strict policy (older Go verifiers) refuses them.
        let err = verify::<Principal>(token, &certificate, AlgorithmPolicy::Ps512Only).unwrap_err();
        assert!(
            matches!(err, VerifyError::AlgorithmNotAllowed { .. }),
            "{err:?}"
        );
    }
}

/// A SPIRE-style P-256 X509-SVID, as the SPIFFE source delivers it: its key signs
/// ES256 by default, PyJWT verifies that token against the SVID and signs one we
/// verify; tokens across key types are refused both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn svid_keys_sign_es256_that_pyjwt_verifies_and_the_reverse() {
    use std::sync::Arc;
    use svc_tls::principal::sign_with;
    use svc_tls::spiffe::{SpiffeEndpoint, WorkloadApiSource};

    require_python();
    let agent = spiffe_testbed::WorkloadApi::start("example.org").await;
    let svid = agent.set_workload_id("spiffe://example.org/ns/unikorn/sa/billing");
    let workload = WorkloadApiSource::connect(
        SpiffeEndpoint::parse(&agent.endpoint()).unwrap(),
        Arc::new(svc_tls::material::crypto_provider()),
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    let identity = workload.svid().unwrap().unwrap();
    let who = principal_for("svid");
    let token = sign_with(&identity, &peer_url(), &who, AlgorithmPolicy::default()).unwrap();
    assert_eq!(token.algorithm(), Algorithm::Es256);

    let answer = run_python(&json!({
        "verify": [{"name": "svid", "alg": "ES256", "cert_pem": svid.chain_pem(), "token": token.as_str()}],
        "sign": [{"name": "svid", "alg": "ES256", "key_pem": svid.key_pem(),
                  "payload": serde_json::to_value(&who).unwrap()}],
    }));
    assert_header(&answer["verified"][0]["header"], "ES256");
    assert_eq!(
        answer["verified"][0]["payload"],
        serde_json::to_value(&who).unwrap()
    );
    let svid_cert = PeerCertificate::from_pem(svid.chain_pem().as_bytes()).unwrap();
    let theirs = answer["signed"][0]["token"].as_str().unwrap();
    let back: Principal = verify(theirs, &svid_cert, AlgorithmPolicy::default()).unwrap();
    assert_eq!(back, who);

    // Across key types: an SVID's ES256 token against an RSA certificate, an RSA
    // key's PS512 token against the SVID, and ES384 claimed for the P-256 SVID key.
    let rsa = keys::rsa2048();
    let rsa_cert = PeerCertificate::from_pem(rsa.cert_pem.as_bytes()).unwrap();
    let err =
        verify::<Principal>(token.as_str(), &rsa_cert, AlgorithmPolicy::default()).unwrap_err();
    assert!(
        matches!(err, VerifyError::AlgorithmKeyMismatch { .. }),
        "{err:?}"
    );
    let ps512 = sign_with_key(
        rsa.signing_key.as_ref(),
        &peer_url(),
        &who,
        AlgorithmPolicy::default(),
    )
    .unwrap();
    let err =
        verify::<Principal>(ps512.as_str(), &svid_cert, AlgorithmPolicy::default()).unwrap_err();
    assert!(
        matches!(err, VerifyError::AlgorithmKeyMismatch { .. }),
        "{err:?}"
    );
    let p384 = keys::p384();
    let es384 = sign_with_key(
        p384.signing_key.as_ref(),
        &peer_url(),
        &who,
        AlgorithmPolicy::default(),
    )
    .unwrap();
    assert_eq!(es384.algorithm(), Algorithm::Es384);
    let err =
        verify::<Principal>(es384.as_str(), &svid_cert, AlgorithmPolicy::default()).unwrap_err();
    assert!(
        matches!(err, VerifyError::AlgorithmKeyMismatch { .. }),
        "{err:?}"
    );
    // The strict policy refuses the SVID's token outright.
    let err = verify::<Principal>(theirs, &svid_cert, AlgorithmPolicy::Ps512Only).unwrap_err();
    assert!(
        matches!(err, VerifyError::AlgorithmNotAllowed { .. }),
        "{err:?}"
    );
}

/// The header PyJWT read: `alg`, the issue and expiry times, the audience and the
/// token id we sign (PyJWT accepts the extra members; the payload is unchanged).
fn assert_header(header: &Value, alg: &str) {
    assert_eq!(header["alg"], alg, "{header}");
    let (iat, exp) = (header["iat"].as_u64(), header["exp"].as_u64());
    assert!(
        matches!((iat, exp), (Some(i), Some(e)) if e > i),
        "{header}"
    );
    assert_eq!(header["aud"], "https://peer.svc.test", "{header}");
    assert!(
        header["jti"].as_str().is_some_and(|j| j.len() == 22),
        "{header}"
    );
    assert_eq!(header.as_object().map(|o| o.len()), Some(5), "{header}");
}

// ---------------------------------------------------------------------------------
// go-jose, as the Go services verify: the times in our protected header are members
// it does not know and, with no `crit`, ignores; the payload is unchanged.

/// `go`: `$GO`, `go` on PATH, or the official install's `/usr/local/go/bin/go`.
fn find_go() -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::env::var_os("GO")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(PathBuf::from("go"));
    candidates.push(PathBuf::from("/usr/local/go/bin/go"));
    candidates
        .into_iter()
        .find(|go| {
            Command::new(go)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| {
            panic!(
                "the Go interop test needs Go 1.26+ (`cargo xtask test` finds it and passes $GO)"
            )
        })
}

/// Builds `tests/interop/go_verify`, a plain Go module: go-jose from the Go module
/// proxy (the environment's GOPROXY, and its GOMODCACHE and GOCACHE, which `cargo
/// xtask test` points outside the repository), checked against the committed go.sum.
fn go_verifier() -> PathBuf {
    let go = find_go();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("go-verify");
    std::fs::create_dir_all(&out).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/go_verify");
    let binary = out.join("go-verify");
    let output = Command::new(&go)
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly")
        .env("GO111MODULE", "on")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "go build in {} (Go 1.26+ and the Go module proxy needed): {}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

#[test]
fn go_jose_verifies_our_tokens_with_times_and_the_payload_is_unchanged() {
    let binary = go_verifier();
    let fixtures = [keys::rsa2048(), keys::p256(), keys::p384()];
    let tokens: Vec<String> = fixtures
        .iter()
        .map(|f| {
            sign_with_key(
                f.signing_key.as_ref(),
                &peer_url(),
                &Principal {
                    organization_id: Some("org-1".into()),
                    project_id: None,
                    actor: Some("alice".into()),
                },
                AlgorithmPolicy::default(),
            )
            .unwrap()
            .into_string()
        })
        .collect();
    // Each token carries iat, exp and aud in its protected header.
    for token in &tokens {
        let header: Value = serde_json::from_slice(
            &base64::Engine::decode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                token.split('.').next().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(header["iat"].is_u64() && header["exp"].is_u64(), "{header}");
        assert_eq!(header["aud"], "https://peer.svc.test", "{header}");
        assert!(header.get("crit").is_none(), "{header}");
    }
    let mut requests: Vec<Value> = fixtures
        .iter()
        .zip(&tokens)
        .map(|(f, t)| json!({"cert": f.cert_pem, "token": t}))
        .collect();
    // Control: a token signed by another key is refused by go-jose.
    requests.push(json!({"cert": keys::rsa2048_other().cert_pem, "token": tokens[0]}));
    let mut child = Command::new(&binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(requests).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    for (fixture, answer) in fixtures.iter().zip(&answers) {
        assert_eq!(
            answer["payload"], r#"{"organizationId":"org-1","actor":"alice"}"#,
            "{}: {answer}",
            fixture.name
        );
    }
    assert!(answers[3]["error"].is_string(), "{}", answers[3]);
}

/// The URL the tokens here are signed for (their audience is its origin).
fn peer_url() -> reqwest::Url {
    reqwest::Url::parse("https://peer.svc.test/api").unwrap()
}
