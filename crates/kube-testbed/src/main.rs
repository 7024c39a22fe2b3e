//! `kube-testbed`: run the API emulator for manual use.
//!
//! `cargo run -p kube-testbed -- --port 0` prints the base URL, the CA path, the
//! token and a kubeconfig path, then serves until interrupted.

use std::path::PathBuf;

use clap::Parser;
use kube_testbed::{KindSpec, Testbed, TestbedOptions};

/// A Kubernetes API server emulator for tests.
#[derive(Debug, Parser)]
#[command(name = "kube-testbed", version)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
    /// Admin token (random when absent).
    #[arg(long, env = "KUBE_TESTBED_TOKEN")]
    token: Option<String>,
    /// Directory for ca.crt and kubeconfig (a temporary one when absent).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Extra kinds, `group/version/Kind/plural[/cluster]`, e.g.
    /// `unikorn-cloud.org/v1alpha1/HelmApplication/helmapplications`.
    #[arg(long = "kind")]
    kinds: Vec<String>,
}

fn kubeconfig(server: &str, ca_path: Option<&std::path::Path>, token: &str) -> String {
    let ca = ca_path
        .map(|p| format!("    certificate-authority: {}\n", p.display()))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n    server: {server}\n{ca}users:\n- name: testbed\n  user:\n    token: {token}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: testbed\n    namespace: default\ncurrent-context: testbed\n"
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let tb = Testbed::try_start_with(TestbedOptions {
        tls: !args.http,
        port: args.port,
        token: args.token.clone(),
        ..Default::default()
    })
    .await?;
    for k in &args.kinds {
        let parts: Vec<&str> = k.split('/').collect();
        let spec = match parts.as_slice() {
            [g, v, kind, plural] => KindSpec::namespaced(g, v, kind, plural),
            [g, v, kind, plural, "cluster"] => KindSpec::cluster(g, v, kind, plural),
            _ => {
                return Err(
                    format!("--kind {k:?}: expected group/version/Kind/plural[/cluster]").into(),
                );
            }
        };
        tb.register_kind(spec);
    }
    let (dir, _tmp) = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let ca_path = if args.http {
        None
    } else {
        let p = dir.join("ca.crt");
        std::fs::write(&p, tb.ca_pem())?;
        Some(p)
    };
    let kc_path = dir.join("kubeconfig");
    std::fs::write(
        &kc_path,
        kubeconfig(&tb.base_url(), ca_path.as_deref(), &tb.token()),
    )?;
    println!("base URL:   {}", tb.base_url());
    if let Some(p) = &ca_path {
        println!("CA:         {}", p.display());
    }
    // Printing the token is the point of this command (a throwaway test credential).
    println!("token:      {}", tb.token());
    println!("kubeconfig: {}", kc_path.display());
    println!(
        "try: KUBECONFIG={} kubectl get secrets -A",
        kc_path.display()
    );
    std::future::pending::<()>().await;
    Ok(())
}
