//! The service serving mTLS itself: `GET /api/v1/whoami` on `--serve-bind-address`,
//! with no ingress in front (or behind a gateway that calls pods over TLS, as Gateway
//! API's `BackendTLSPolicy` has it). The server presents the identity the service
//! calls with (`--client-certificate-*`, watched, re-read on every handshake) and
//! verifies each caller's certificate against the client CA Secret
//! `--client-ca-secret-namespace`/`-name` (watched; a removed CA's connections are
//! closed). The caller is the connection's verified certificate, never a header, and
//! `X-Principal` is verified against that certificate for one of
//! `--principal-audience`: signed principals only, each accepted once.
//!
//! The answer is `200 principal actor=... caller=<CN>`, or `401` with the refusal's
//! reason.
//!
//! With `--metrics-bind-address`, callers' failed handshakes on this listener are
//! counted in `svc_tls_listener_handshake_failures_total{listener="https",reason}`.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use clap::{Arg, ArgMatches, Command};
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use platform_client_compat::tls::metrics::Metrics;
use platform_client_compat::tls::principal::{
    AlgorithmPolicy, Principal, ReplayCache, Url, VerifyOptions,
};
use platform_client_compat::tls::serving::{Caller, ServerTls, request_principal};
use platform_client_compat::tls::trust::TrustVerifier;
use platform_client_compat::tls::watch::WatchedObjects;
use platform_client_compat::tls::{ClusterClient, IdentityResolver, SecretRef};
use tokio::net::TcpListener;

use crate::Error;

/// The mTLS listener's flags (`--principal-audience` is the receiving side's).
pub(crate) fn augment(cmd: Command) -> Command {
    cmd.arg(
        Arg::new("serve-bind-address")
            .long("serve-bind-address")
            .default_value("0")
            .overrides_with("serve-bind-address")
            .help("The address GET /api/v1/whoami is served on over mTLS, by the service itself (e.g. :8443); \"0\" disables it"),
    )
    .arg(
        Arg::new("client-ca-secret-namespace")
            .long("client-ca-secret-namespace")
            .default_value("")
            .overrides_with("client-ca-secret-namespace")
            .help("Namespace of the Secret holding the CA (ca.crt) callers' certificates are verified against"),
    )
    .arg(
        Arg::new("client-ca-secret-name")
            .long("client-ca-secret-name")
            .default_value("")
            .overrides_with("client-ca-secret-name")
            .help("Name of the Secret holding the CA (ca.crt) callers' certificates are verified against"),
    )
}

/// Serves the endpoint over mTLS when `--serve-bind-address` is set; returns the
/// address bound.
pub(crate) async fn start(
    matches: &ArgMatches,
    cluster: &ClusterClient,
    identity: &IdentityResolver,
    sync_timeout: std::time::Duration,
) -> Result<Option<SocketAddr>, Error> {
    let address = matches
        .get_one::<String>("serve-bind-address")
        .map(String::as_str)
        .unwrap_or("0");
    if address == "0" {
        return Ok(None);
    }
    let address: SocketAddr = address
        .parse()
        .map_err(|e| format!("--serve-bind-address={address:?}: {e}"))?;
    let text = |name: &str| matches.get_one::<String>(name).cloned().unwrap_or_default();
    let (namespace, name) = (
        text("client-ca-secret-namespace"),
        text("client-ca-secret-name"),
    );
    if namespace.is_empty() || name.is_empty() {
        return Err(
            "--serve-bind-address needs --client-ca-secret-namespace and --client-ca-secret-name"
                .into(),
        );
    }
    let audiences: Vec<Url> = matches
        .get_many::<Url>("principal-audience")
        .map(|values| values.cloned().collect())
        .unwrap_or_default();
    if audiences.is_empty() {
        return Err("--serve-bind-address needs --principal-audience: the URLs callers call this service at".into());
    }
    let callers = TrustVerifier::builder(cluster.kube().clone(), SecretRef::new(namespace, name))
        .watches(WatchedObjects::process(), cluster)
        .settings(
            platform_client_compat::tls::trust::TrustSettings::default().sync_timeout(sync_timeout),
        )
        .build()
        .await?;
    let mut tls = ServerTls::builder(identity.clone()).callers(callers);
    // With --metrics-bind-address, callers' failed handshakes are counted by reason
    // (svc_tls_listener_handshake_failures_total{listener="https"}).
    if let Some(metrics) = Metrics::installed_in(WatchedObjects::process()) {
        tls = tls.handshake_recorder(metrics.listener_recorder("https"));
    }
    let tls = tls.build()?;
    // Each signed principal is accepted once (a captured token is refused).
    let options = VerifyOptions::new(AlgorithmPolicy::default())
        .with_audiences(audiences)
        .with_replay_cache(std::sync::Arc::new(ReplayCache::default()));
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let service = tower::service_fn(move |request: Request<hyper::body::Incoming>| {
        let options = options.clone();
        async move { Ok::<_, Infallible>(answer(&request, &options)) }
    });
    tokio::spawn(async move {
        if let Err(error) =
            platform_client_compat::tls::serving::serve(listener, tls, service).await
        {
            tracing::error!(error = %error, "serve: the mTLS listener stopped accepting");
        }
    });
    println!("serve: serving https://{bound}/api/v1/whoami over mTLS");
    Ok(Some(bound))
}

fn answer<B>(request: &Request<B>, options: &VerifyOptions) -> Response<Full<Bytes>> {
    let (status, body) = if request.uri().path() != "/api/v1/whoami" {
        (StatusCode::NOT_FOUND, "not found\n".to_owned())
    } else {
        let caller = request
            .extensions()
            .get::<Caller>()
            .and_then(|c| c.common_name().map(str::to_owned))
            .unwrap_or_default();
        match request_principal::<Principal, _>(request, options) {
            Ok(who) => (
                StatusCode::OK,
                format!(
                    "principal actor={} caller={caller}\n",
                    who.actor.unwrap_or_default()
                ),
            ),
            Err(refused) => {
                tracing::info!(error = %refused, "principal refused");
                (StatusCode::UNAUTHORIZED, format!("refused {refused}\n"))
            }
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
