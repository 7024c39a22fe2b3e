//! A platform service migrated off the Go `pkg/client`, through
//! `platform-client-compat` only: what migrating looks like.
//!
//! The Go service it stands for did, at start-up:
//!
//! ```text
//! identity := client.NewHTTPOptions("identity"); identity.AddFlags(flags)
//! audit    := client.NewHTTPOptions("audit");    audit.AddFlags(flags)
//! clientOptions.AddFlags(flags)                        // --client-certificate-*
//! cli, _   := client.New(ctx)                          // in-cluster client and cache
//! tlsConfig, _ := client.TLSClientConfig(ctx, cli, identity, clientOptions)
//! principal, _ := clientOptions.EncodeAndSign(ctx, cli, p)  // X-Principal
//! ```
//!
//! This binary takes the same flags (Helm charts need no change), builds its
//! Kubernetes client with caches proven synced, calls the identity service over mTLS
//! presenting the identity re-read from its Secret on every handshake, sends a signed
//! `X-Principal`, and prints its identity state. The audit peer is enabled only when
//! `--audit-host` is non-empty, as the Go services decided, presenting its own
//! prefixed identity (`--audit-client-certificate-*`), or none when that is unset, as
//! Go: never the platform identity.
//!
//! With `--region-host` it also lists the region service's regions each round through
//! a generated client built once at start-up (`region.rs`, crate `region-api`).
//!
//! With `--receive-bind-address` it receives too: `GET /api/v1/whoami` behind the
//! ingress, the forwarded client certificate and the `X-Principal` verified
//! (`receive.rs`).
//!
//! With `--metrics-bind-address` it serves its Prometheus metrics on `/metrics` (svc-tls's
//! identity, trust, watched Secrets and principals, and kube-construct's caches,
//! registered once with `platform_client_compat::metrics::register`);
//! `--watch-configmaps-namespace` declares a cache for it to export. With
//! `--health-probe-bind-address` it serves `/readyz` (503 with the reason until its
//! caches and Secrets are loaded, and while its identity or CA Secret is unusable;
//! svc-tls's `readiness` module) and `/livez` (200 while it runs: a restart fixes no
//! Secret), see `probes.rs`. A real service would keep running and serve; this one
//! does one round and exits, so that its test can run it to the end (`tests/run.rs`),
//! unless `--serve-for` keeps it making a request every `--request-interval` (a new
//! handshake each, so a rotated identity is picked up) and serving `/metrics` for that
//! long.

mod metrics;
mod probes;
mod receive;
mod region;
mod serve_mtls;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant, UNIX_EPOCH};

use platform_client_compat::tls::duration::parse_go_duration;
use prometheus_client::registry::Registry;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use k8s_openapi::api::core::v1::ConfigMap;
use platform_client_compat::construct::cache::Selection;
use platform_client_compat::construct::client::CachedClient;
use platform_client_compat::construct::config::KubeOptions;
use platform_client_compat::tls::client::PeerTls;
use platform_client_compat::tls::identity::IdentityState;
use platform_client_compat::tls::options::{ClientIdentityOptions, PeerOptions};
use platform_client_compat::tls::principal::Principal;
use platform_client_compat::tls::readiness::Readiness;
use platform_client_compat::tls::watch::WatchedObjects;
use tracing::Instrument as _;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The peers a typical platform service declares (flags `--S-host`,
/// `--S-ca-secret-namespace`, `--S-ca-secret-name`).
const PEERS: [&str; 5] = ["identity", "region", "kubernetes", "compute", "audit"];

/// How long start-up may wait for caches and identities.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The command: the deployed flags of every crate, then the service's own.
fn command() -> Command {
    let mut cmd = Command::new("migrated-service")
        .about("A platform service migrated off pkg/client")
        .arg(
            Arg::new("actor")
                .long("actor")
                .default_value("migrated-service")
                .overrides_with("actor")
                .help("The actor named in the signed X-Principal"),
        )
        .arg(
            Arg::new("requests")
                .long("requests")
                .value_parser(clap::value_parser!(u32))
                .default_value("1")
                .help("How many requests to make, each with a peer client built for it"),
        )
        .arg(
            Arg::new("metrics-bind-address")
                .long("metrics-bind-address")
                .default_value("0")
                .help("The address /metrics is served on (e.g. 127.0.0.1:8080); \"0\" disables it"),
        )
        .arg(
            Arg::new("health-probe-bind-address")
                .long("health-probe-bind-address")
                .default_value("0")
                .overrides_with("health-probe-bind-address")
                .help("The address /readyz and /livez are served on (e.g. :8081 as controller-runtime's); \"0\" disables them"),
        )
        .arg(
            Arg::new("health-probe-verbose")
                .long("health-probe-verbose")
                .action(clap::ArgAction::SetTrue)
                .help("Answer /readyz with each check's reason (Secret names, loader errors); by default the body names the checks only and the reasons are logged"),
        )
        .arg(
            Arg::new("serve-for")
                .long("serve-for")
                .default_value("0s")
                .value_parser(|v: &str| {
                    parse_go_duration(v)?
                        .to_std()
                        .ok_or_else(|| format!("{v:?} is negative"))
                })
                .help("After the requests, keep calling the identity service and serving /metrics for this long (a Go duration)"),
        )
        .arg(
            Arg::new("request-interval")
                .long("request-interval")
                .default_value("1s")
                .value_parser(|v: &str| {
                    parse_go_duration(v)?
                        .to_std()
                        .ok_or_else(|| format!("{v:?} is negative"))
                })
                .help("With --serve-for: the time between two requests"),
        )
        .arg(
            Arg::new("watch-configmaps-namespace")
                .long("watch-configmaps-namespace")
                .default_value("")
                .overrides_with("watch-configmaps-namespace")
                .help("Declare a cache of the ConfigMaps in this namespace (proven synced at start-up; exported with the metrics); empty: no cache"),
        )
        .arg(
            Arg::new("otlp-endpoint")
                .long("otlp-endpoint")
                .default_value("")
                .overrides_with("otlp-endpoint")
                .help("Where spans are exported over OTLP/HTTP: host:port (plain HTTP, /v1/traces) as the Go manager's, or an http(s) URL; empty: no export"),
        )
        .arg(
            Arg::new("path")
                .long("path")
                .default_value("api/v1/whoami")
                .overrides_with("path")
                .help("The path called on the identity service"),
        );
    // --receive-bind-address and the receiving side's (receive.rs).
    cmd = receive::augment(cmd);
    cmd = serve_mtls::augment(cmd);
    // --organization-id, for the region service's generated client (region.rs).
    cmd = region::augment(cmd);
    // --kubeconfig / --master / --context (in-cluster when none is given).
    cmd = KubeOptions::augment_args(cmd);
    for peer in PEERS {
        cmd = PeerOptions::augment(cmd, peer);
    }
    // --client-certificate-* (the default identity), and audit's own.
    cmd = ClientIdentityOptions::augment(cmd, None);
    ClientIdentityOptions::augment(cmd, Some("audit"))
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    // Spans to the collector --otlp-endpoint names (none when empty); held to the end
    // of main, when what is queued is sent. Requests carry trace context either way
    // once a caller's trace reaches them (svc-tls's `otel` feature).
    let endpoint = matches
        .get_one::<String>("otlp-endpoint")
        .map(String::as_str);
    let telemetry =
        match platform_client_compat::tls::telemetry::install(endpoint, "migrated-service") {
            Ok(telemetry) => telemetry,
            Err(e) => {
                eprintln!(
                    "migrated-service: --otlp-endpoint: {}",
                    platform_client_compat::tls::excerpt::chain(&e)
                );
                return ExitCode::from(2);
            }
        };
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false),
            )
            .with(telemetry.layer())
            .init();
    }
    if let Some(endpoint) = telemetry.endpoint() {
        tracing::info!(%endpoint, "telemetry: spans are exported over OTLP/HTTP");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("migrated-service: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&matches, &telemetry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain (each layer names what it was doing), escaped and cut:
            // an API server's or a credential plugin's text is not ours to print raw.
            eprintln!(
                "migrated-service: {}",
                platform_client_compat::tls::excerpt::chain(&*e)
            );
            ExitCode::FAILURE
        }
    }
}

async fn run(
    matches: &ArgMatches,
    telemetry: &platform_client_compat::tls::telemetry::Telemetry,
) -> Result<(), Error> {
    // Flags, as pflag read them. Reading them reports the deprecated
    // --client-certificate-reload-interval once, whatever value it has.
    let kube_options = KubeOptions::from_arg_matches(matches)?;
    let identity_peer = PeerOptions::from_matches(matches, "identity")?;
    let audit_peer = PeerOptions::from_matches(matches, "audit")?;
    let me = ClientIdentityOptions::from_matches(matches, None)?;
    let me_towards_audit = ClientIdentityOptions::from_matches(matches, Some("audit"))?;
    let requests = matches.get_one::<u32>("requests").copied().unwrap_or(1);
    let actor = matches
        .get_one::<String>("actor")
        .cloned()
        .unwrap_or_default();
    let path = matches
        .get_one::<String>("path")
        .cloned()
        .unwrap_or_default();
    let configmaps_namespace = matches
        .get_one::<String>("watch-configmaps-namespace")
        .cloned()
        .unwrap_or_default();
    let serve_for = matches
        .get_one::<Duration>("serve-for")
        .copied()
        .unwrap_or_default();
    let interval = matches
        .get_one::<Duration>("request-interval")
        .copied()
        .unwrap_or(Duration::from_secs(1));

    // Metrics first: every peer client built from now on records into them.
    let metrics_address = matches
        .get_one::<String>("metrics-bind-address")
        .map(String::as_str)
        .unwrap_or("0");
    if metrics_address != "0" {
        let address: SocketAddr = metrics_address
            .parse()
            .map_err(|e| format!("--metrics-bind-address={metrics_address:?}: {e}"))?;
        let mut registry = Registry::default();
        // svc-tls's and kube-construct's, for the whole process.
        platform_client_compat::metrics::register(&mut registry)?;
        // What became of the spans (--otlp-endpoint): exported, dropped, failed.
        telemetry.register_metrics(&mut registry);
        let bound = metrics::serve(address, registry).await?;
        println!("metrics: serving http://{bound}/metrics");
    }

    // Readiness, served from now on: not ready until what is declared here has
    // loaded, then judged on every probe (see probes.rs).
    let readiness = Readiness::new();
    if !configmaps_namespace.is_empty() {
        readiness.expect("caches", "the Kubernetes caches");
    }
    if let Some(secret) = me.secret()? {
        readiness.expect(
            "identity",
            &format!("the client certificate Secret {secret}"),
        );
        // (In SPIFFE mode the CA Secret flags are ignored: the bundle is the agent's.)
        if let Some(ca) = identity_peer.ca_secret()? {
            readiness.expect("identity-ca", &format!("the CA Secret {ca}"));
        }
    }
    let probe_address = matches
        .get_one::<String>("health-probe-bind-address")
        .map(String::as_str)
        .unwrap_or("0");
    if probe_address != "0" {
        let address: SocketAddr = probe_address
            .parse()
            .map_err(|e| format!("--health-probe-bind-address={probe_address:?}: {e}"))?;
        let verbose = matches.get_flag("health-probe-verbose");
        let bound = probes::serve(address, readiness.clone(), verbose).await?;
        println!("probes: serving http://{bound}/readyz and /livez");
    }

    // Go: client.New(ctx). Here the constructor returns only once every declared
    // cache has synced. The Secrets its peer clients need are not declared here:
    // svc-tls watches them, once each per process (a second watch of the identity
    // Secret here would double the API load for nothing).
    let mut builder = CachedClient::builder().sync_timeout(SYNC_TIMEOUT);
    if !configmaps_namespace.is_empty() {
        builder = builder.cache::<ConfigMap>(Selection::in_namespace(&configmaps_namespace));
    }
    let client = builder.from_options(&kube_options).await?;
    println!("kubernetes: caches synced");
    if !configmaps_namespace.is_empty() {
        let caches = client.clone();
        readiness.check("caches", move || probes::caches_verdict(&caches.health()));
    }
    if !configmaps_namespace.is_empty() {
        let configmaps =
            client.list::<ConfigMap>(Some(&configmaps_namespace), &Default::default())?;
        println!(
            "kubernetes: {} ConfigMaps cached in {configmaps_namespace}",
            configmaps.len()
        );
    }

    // The client with its cluster's identity: the shared Secret watches are keyed by
    // it (a provisioner would take `provision_scope::cluster_client_identified()`).
    let cluster = client.cluster_client()?;
    // The receiving side, behind the ingress (with --receive-bind-address).
    receive::start(matches, &cluster, SYNC_TIMEOUT).await?;
    // Go: client.TLSClientConfig(ctx, cli, identity, clientOptions). As in Go, the
    // --identity-host value does not stop this (an unusable one is logged once);
    // `identity.host()` below says what is wrong with it. The identity is watched
    // and re-read on every handshake.
    let identity = PeerTls::from_options(&cluster, &identity_peer, &me, SYNC_TIMEOUT).await?;
    let Some(resolver) = identity.identity().cloned() else {
        return Err(
            "--client-certificate-namespace and --client-certificate-name are required".into(),
        );
    };
    readiness.identity("identity", &resolver);
    // Serving mTLS itself (with --serve-bind-address), with the identity it calls with.
    serve_mtls::start(matches, &cluster, &resolver, SYNC_TIMEOUT).await?;
    if let Some(trust) = identity.trust_verifier() {
        readiness.trust("identity-ca", trust);
    }

    // Audit is enabled only when its host is set (Go: `audit.Host() != ""`). It
    // presents its own identity (--audit-client-certificate-*) and, when that is
    // unset, none, as Go: never the platform identity, which is not the external
    // collector's to see.
    if audit_peer.is_configured() {
        let audit =
            PeerTls::from_options(&cluster, &audit_peer, &me_towards_audit, SYNC_TIMEOUT).await?;
        let presented = audit
            .identity()
            .map(|r| r.state().origin.to_string())
            .unwrap_or_else(|| "none".to_owned());
        // An unusable --audit-host (a bare `collector:443`, a rendered `https://`) does
        // not stop the service, as it did not stop the Go binary: audit calls fail,
        // naming the flag and the value, until it is fixed.
        match audit.host() {
            Ok(url) => println!("audit: enabled at {url} presenting {presented}"),
            Err(e) => println!("audit: enabled, unusable: {e}"),
        }
    } else {
        println!("audit: not configured");
    }

    // Go: clientOptions.EncodeAndSign(ctx, cli, principal), set as X-Principal.
    let principal = Principal {
        actor: Some(actor),
        ..Principal::default()
    };
    // The region service's generated client, built once (with --region-host).
    let region_peer = PeerOptions::from_matches(matches, "region")?;
    let region =
        region::connect(&cluster, &region_peer, &me, principal.clone(), SYNC_TIMEOUT).await?;
    let organization = region::organization(matches);
    // As a controller does per reconcile: a new peer construction for every request.
    // The first construction above watched the Secrets; these return at once from the
    // process's shared watches (no API request, no parse) and share its pooled client.
    let mut refused = None;
    let call = async || -> Result<Option<String>, Error> {
        let identity = PeerTls::from_options(&cluster, &identity_peer, &me, SYNC_TIMEOUT).await?;
        // The identity the handshake presents signs, counted in the metrics.
        let signer = identity
            .principal_signer()
            .ok_or("the identity peer has no client identity")?;
        // The process's pooled client for this peer: a kept-alive connection is
        // reused across calls, and retired when the identity or the CA rotates.
        let http = identity.client()?;
        let url = identity.host()?.join(&path)?;
        let response = http
            .get(url.clone())?
            .try_map(|request| signer.attach(request, &principal))?
            .send()
            .await?;
        let status = response.status();
        let version = response.version();
        let body = response.text().await?;
        println!(
            "identity: GET {url} -> {status} over {version:?}: {}",
            body.trim()
        );
        if let Some(region) = &region {
            region::list(region, &organization).await;
        }
        Ok((!status.is_success()).then(|| status.to_string()))
    };
    for _ in 0..requests {
        // Each call in a span: its requests carry that trace to the peers.
        if let Some(status) = call()
            .instrument(tracing::info_span!("migrated_service.call"))
            .await?
        {
            refused = Some(status);
        }
    }
    // Serving: a request per interval (on a kept-alive connection when the server
    // keeps it; the identity and its metrics follow the Secret without one); a failed one is
    // reported and the service goes on, as a controller's next reconcile would.
    let deadline = Instant::now() + serve_for;
    while Instant::now() < deadline {
        tokio::time::sleep(interval.min(deadline.saturating_duration_since(Instant::now()))).await;
        if let Err(e) = call()
            .instrument(tracing::info_span!("migrated_service.call"))
            .await
        {
            println!(
                "identity: request failed: {}",
                platform_client_compat::tls::excerpt::chain(&*e)
            );
        }
    }
    let watched = WatchedObjects::process().watched();
    println!(
        "svc-tls: {} Secret watches for {requests} requests: {}",
        watched.len(),
        watched
            .iter()
            .map(|(_cluster, secret)| secret.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );

    print_state(&resolver.state());
    match refused {
        None => Ok(()),
        Some(status) => Err(format!("the identity service answered {status}").into()),
    }
}

fn print_state(state: &IdentityState) {
    let not_after = state
        .not_after
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let spiffe_id = state
        .spiffe_id
        .as_deref()
        .map(|id| format!(" spiffe_id={id}"))
        .unwrap_or_default();
    println!(
        "identity state: source={}{spiffe_id} serial={} not_after_unix={not_after} failures={} stale={}",
        state.origin, state.serial_hex, state.failures, state.stale
    );
}
