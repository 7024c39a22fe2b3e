//! `KubeOptions` follows pflag on repeated flags: the last value wins (a Go
//! service's manifest may repeat a flag, and the migrated binary must start).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use clap::Parser;
use kube_construct::config::KubeOptions;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    kube: KubeOptions,
}

#[test]
fn a_repeated_flag_keeps_its_last_value() {
    let cli = Cli::try_parse_from([
        "svc",
        "--kubeconfig=/first",
        "--master=https://first.example",
        "--context=first",
        "--kubeconfig",
        "/second",
        "--master=https://second.example",
        "--context=second",
    ])
    .unwrap();
    assert_eq!(
        cli.kube,
        KubeOptions {
            kubeconfig: Some(PathBuf::from("/second")),
            master: Some("https://second.example".into()),
            context: Some("second".into()),
        }
    );
}

#[test]
fn a_single_flag_is_read_as_given() {
    let cli = Cli::try_parse_from(["svc", "--context=only"]).unwrap();
    assert_eq!(cli.kube.context.as_deref(), Some("only"));
    assert_eq!(cli.kube.master, None);
}
