//! `--otlp-endpoint`: a malformed endpoint is a start-up error naming the flag (exit 2,
//! as the other flag errors), before anything else is started.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

#[test]
fn a_malformed_otlp_endpoint_exits_2_naming_the_flag() {
    for bad in [
        "collector:port",
        "ftp://collector:4318",
        "collector:4318/v1/traces",
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_migrated-service"))
            .arg(format!("--otlp-endpoint={bad}"))
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("--otlp-endpoint") && stderr.contains(bad),
            "{bad}: {stderr}"
        );
    }
}
