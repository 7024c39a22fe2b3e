//! The migrated controller's binary: the deployed flags in, the controller run until
//! SIGINT/SIGTERM (see the crate documentation of `migrated_controller`).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Arg, ArgMatches, Args as _, Command, FromArgMatches as _};
use kube_construct::config::KubeOptions;
use migrated_controller::{
    Counters, Settings, client_builder,
    endpoints::{self, ManagerMetrics, Probes},
    flags, reconcile, run_with,
};
use svc_tls::options::{ClientIdentityOptions, PeerOptions};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The peer called per reconcile (`--region-host`, `--region-ca-secret-*`).
const PEER: &str = "region";

fn command() -> Command {
    let cmd = Command::new("migrated-controller")
        .about("A platform controller migrated off pkg/client")
        .arg(
            Arg::new("namespace")
                .long("namespace")
                .default_value("unikorn")
                .help("The namespace whose ManagedResources are reconciled"),
        )
        .arg(
            Arg::new("remote-allow")
                .long("remote-allow")
                .action(clap::ArgAction::Append)
                .help("A destination remote clusters' kubeconfigs may point at (host, host:port or *.domain; repeatable); with none, any but loopback, link-local and this cluster's API server"),
        )
        .arg(
            Arg::new("remote-deny")
                .long("remote-deny")
                .action(clap::ArgAction::Append)
                .help("A destination remote clusters' kubeconfigs may not point at (repeatable)"),
        )
        .arg(
            Arg::new("path")
                .long("path")
                .default_value("api/v1/regions")
                .help("The path called on the peer per reconcile"),
        );
    let cmd = flags::augment(cmd);
    let cmd = KubeOptions::augment_args(cmd);
    let cmd = PeerOptions::augment(cmd, PEER);
    ClientIdentityOptions::augment(cmd, None)
}

/// `--remote-allow` and `--remote-deny`.
fn destinations(matches: &ArgMatches) -> provision_scope::Destinations {
    let values = |id: &str| {
        matches
            .get_many::<String>(id)
            .into_iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut destinations = provision_scope::Destinations::new();
    for entry in values("remote-allow") {
        destinations = destinations.allow(&entry);
    }
    for entry in values("remote-deny") {
        destinations = destinations.deny(&entry);
    }
    destinations
}

fn settings(matches: &ArgMatches) -> Result<Settings, Error> {
    let text = |id: &str| matches.get_one::<String>(id).cloned().unwrap_or_default();
    Ok(Settings {
        namespace: text("namespace"),
        peer: PeerOptions::from_matches(matches, PEER)?,
        identity: ClientIdentityOptions::from_matches(matches, None)?,
        path: text("path"),
        sync_timeout: Duration::from_secs(30),
        destinations: destinations(matches),
    })
}

async fn main_async(
    matches: &ArgMatches,
    manager: flags::ManagerFlags,
    telemetry: &svc_tls::telemetry::Telemetry,
) -> Result<(), Error> {
    let kube = KubeOptions::from_arg_matches(matches)?;
    let settings = settings(matches)?;
    let counters = std::sync::Arc::new(Counters::default());
    // Metrics first: every client built from now on records into them.
    if let Some(address) = &manager.metrics_address {
        let mut registry = prometheus_client::registry::Registry::default();
        // svc-tls's and kube-construct's, for the whole process.
        svc_tls::metrics::register(&mut registry)?;
        kube_construct::metrics::register(&mut registry)?;
        // What became of the spans (--otlp-endpoint): exported, dropped, failed.
        telemetry.register_metrics(&mut registry);
        let lease = manager
            .manager
            .leader_election
            .as_ref()
            .map(|election| election.lease_name.clone());
        registry.register_collector(Box::new(
            ManagerMetrics::new(std::sync::Arc::clone(&counters), lease)
                .max_concurrent_reconciles(manager.manager.max_concurrency),
        ));
        let bound = endpoints::serve_metrics(address, registry).await?;
        tracing::info!("metrics: serving http://{bound}/metrics");
    }
    // Probes next: /readyz answers 503 until the caches have synced.
    let probes = Probes::new();
    if let Some(address) = &manager.probe_address {
        let bound = endpoints::serve_probes(address, probes.clone()).await?;
        tracing::info!("probes: serving http://{bound}/healthz and http://{bound}/readyz");
    }
    // Built from flags or in-cluster, so the client knows its cluster: the root of
    // the provisioning scope is identified. Its caches have synced when it returns.
    let client = client_builder(&settings).from_options(&kube).await?;
    probes.synced(&client);
    // SIGINT or SIGTERM (what Kubernetes sends): running reconciles finish, then the
    // Lease is released.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (signalled, signal) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        let _ = signalled.send(());
    });
    let shutdown = async move {
        let _ = signal.await;
    };
    run_with(
        client,
        settings,
        manager.manager,
        counters,
        shutdown,
        reconcile,
    )
    .await?;
    Ok(())
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    let namespace = matches
        .get_one::<String>("namespace")
        .cloned()
        .unwrap_or_default();
    let manager = match flags::from_matches(&matches, &namespace) {
        Ok(manager) => manager,
        Err(e) => {
            eprintln!("migrated-controller: {e}");
            return ExitCode::from(2);
        }
    };
    // Spans to the collector --otlp-endpoint names (none when unset); held to the end
    // of main, when what is queued is sent.
    let telemetry = match svc_tls::telemetry::install(
        manager.otlp_endpoint.as_deref(),
        "migrated-controller",
    ) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!(
                "migrated-controller: --otlp-endpoint: {}",
                svc_tls::excerpt::chain(&e)
            );
            return ExitCode::from(2);
        }
    };
    // RUST_LOG, when set, wins over zap's flags.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(manager.log_level.directive()));
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        // One of the two (an `Option` of a layer is a layer).
        let json = manager.log_encoder == flags::LogEncoder::Json;
        let json_lines = json.then(|| {
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(std::io::stderr)
        });
        let text_lines = (!json).then(|| {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
        });
        tracing_subscriber::registry()
            .with(filter)
            .with(json_lines)
            .with(text_lines)
            .with(telemetry.layer())
            .init();
    }
    if let Some(endpoint) = telemetry.endpoint() {
        tracing::info!(%endpoint, "telemetry: spans are exported over OTLP/HTTP");
    }
    for warning in &manager.ignored {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("migrated-controller: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(&matches, manager, &telemetry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("migrated-controller: {}", svc_tls::excerpt::chain(&*e));
            ExitCode::FAILURE
        }
    }
}
