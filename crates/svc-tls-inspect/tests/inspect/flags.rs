//! The command's own flags: a typo of one of them is an error naming it (not a
//! skipped check), every ignored flag is listed in the human report, `--version`
//! prints the crate's version, and the JSON carries its schema version. None of
//! these runs needs a cluster.

use crate::common::*;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

#[test]
fn a_typo_of_its_own_flag_exits_2_naming_it_and_the_right_one() {
    let typo = strings(&[
        "--client-certificate-namespace=unikorn",
        "--client-certificate-name=svc-cert",
        "--chain-ca-secrte",
        "unikorn/ca",
        "--leader-elect",
    ]);
    let run = run(&typo, &[], &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "error: [MistypedFlag] unknown flag --chain-ca-secrte: did you mean --chain-ca-secret? \
         (if --chain-ca-secrte is the service's own flag, add --service-flags=chain-ca-secrte)",
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with("result: FAILED flags (exit 2)\n"),
        "{}",
        run.stdout
    );

    // The same as JSON, and for a typo of a svc-tls flag in the `=` form.
    let json_args = strings(&[
        "--client-certificate-namespace=unikorn",
        "--client-certificate-nmae=svc-cert",
        "--output=json",
    ]);
    let run = crate::common::run(&json_args, &[], &[]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    let json = run.json();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["failed"], serde_json::json!(["flags"]));
    assert_eq!(json["error"]["kind"], "MistypedFlag");
    let message = json["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "unknown flag --client-certificate-nmae: did you mean --client-certificate-name?"
        ),
        "{message}"
    );

    // A flag of the service's own that happens to be close is declared as such.
    let declared = strings(&[
        "--chain-ca-secrte=x",
        "--service-flags=chain-ca-secrte",
        "--output=json",
    ]);
    let run = crate::common::run(&declared, &[], &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        run.json()["ignored_flags"],
        serde_json::json!(["--chain-ca-secrte"])
    );
}

#[test]
fn every_ignored_flag_is_listed_in_the_human_report() {
    let args = strings(&[
        "--leader-elect",
        "--metrics-bind-address=:8080",
        "--zap-log-level",
        "debug",
        "--weird\u{1b}[31m-flag",
    ]);
    let run = run(&args, &[], &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_no_control_characters(&run.stdout);
    assert!(
        run.stdout.lines().any(|l| l
            == r"ignored flags (the service's own, not read here): --leader-elect --metrics-bind-address --zap-log-level --weird\u{1b}[31m-flag"),
        "{}",
        run.stdout
    );
    // The values are not repeated: they may be credentials.
    assert!(!run.stdout.contains("debug"), "{}", run.stdout);
}

#[test]
fn version_prints_the_crate_version() {
    for flag in ["--version", "-V"] {
        let run = run(&strings(&[flag, "--leader-elect"]), &[], &[]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert_eq!(
            run.stdout,
            format!("svc-tls-inspect {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn the_json_carries_its_schema_version() {
    let run = run(&strings(&["--output", "json"]), &[], &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let json = run.json();
    assert_eq!(
        json["schema_version"],
        svc_tls_inspect::report::SCHEMA_VERSION
    );
    assert_eq!(json["schema_version"], 1);
    // First, so a script reads it before anything else.
    assert!(
        run.stdout
            .trim_start()
            .starts_with("{\n  \"schema_version\": 1,"),
        "{}",
        run.stdout
    );
}
