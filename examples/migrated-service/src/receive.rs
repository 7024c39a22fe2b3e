//! The receiving side: `GET /api/v1/whoami` on `--receive-bind-address`, behind the
//! platform's ingress (ingress-nginx), which terminates mTLS and forwards the
//! verified client certificate in `ssl-client-cert` (`ssl-client-verify: SUCCESS`).
//!
//! The service does not take the ingress's word for it: the forwarded certificate is
//! verified against the CA Secret the ingress's `auth-tls-secret` annotation names
//! (`--ingress-ca-secret-namespace`/`-name`, watched once per process), then the
//! `X-Principal` against that certificate, as svc-tls's `IngressBuilder` sets up:
//! - `--principal-audience` (repeatable): the URLs senders call this service at; a
//!   principal signed for another origin is refused. Required: svc-tls refuses to
//!   build a receiver without audiences.
//! - `--principal-receiving-mode`: `strict` (the default: signed principals bound to
//!   this service only) or, as an explicit choice while Go senders still call the
//!   service, `go-compatible` (their unsigned and unbound principals are accepted,
//!   counted in `svc_tls_principal_accepted_unsigned_total` and logged at most once a
//!   minute), bounded by two flags it requires:
//! - `--principal-compat-until`: the end of the compatibility mode (an RFC 3339 time
//!   or a `YYYY-MM-DD` date, midnight UTC); from then on the service acts as strict
//!   and says so.
//! - `--principal-compat-sender` (repeatable): a sender allowed to send the Go forms
//!   (`spiffe://…`, `uri:…`, `dns:…` or `cn:…`); other callers are judged strictly.
//!
//! The answer is `200 principal actor=... organization=... project=...`, or `401`
//! with the refusal's bounded reason (never the sender's text).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use clap::{Arg, ArgAction, ArgMatches, Command};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use platform_client_compat::tls::ClusterClient;
use platform_client_compat::tls::SecretRef;
use platform_client_compat::tls::principal::{Principal, Url};
use platform_client_compat::tls::receiving::IngressBuilder;
use platform_client_compat::tls::receiving::{
    AllowedPeer, CompatibilityWindow, IngressVerifier, ReceivingMode,
};
use tokio::net::TcpListener;

use crate::Error;

/// The receiving side's flags.
pub(crate) fn augment(cmd: Command) -> Command {
    cmd.arg(
        Arg::new("receive-bind-address")
            .long("receive-bind-address")
            .default_value("0")
            .overrides_with("receive-bind-address")
            .help("The address GET /api/v1/whoami is served on, behind the ingress (e.g. :8080); \"0\" disables it"),
    )
    .arg(
        Arg::new("ingress-ca-secret-namespace")
            .long("ingress-ca-secret-namespace")
            .default_value("")
            .overrides_with("ingress-ca-secret-namespace")
            .help("Namespace of the client CA Secret the ingress's auth-tls-secret annotation names"),
    )
    .arg(
        Arg::new("ingress-ca-secret-name")
            .long("ingress-ca-secret-name")
            .default_value("")
            .overrides_with("ingress-ca-secret-name")
            .help("Name of the client CA Secret the ingress's auth-tls-secret annotation names"),
    )
    .arg(
        Arg::new("principal-audience")
            .long("principal-audience")
            .action(ArgAction::Append)
            .value_parser(|v: &str| Url::parse(v).map_err(|e| format!("{v:?}: {e}")))
            .help("A URL senders call this service at (repeatable): principals signed for another origin are refused"),
    )
    .arg(
        Arg::new("principal-receiving-mode")
            .long("principal-receiving-mode")
            .default_value("strict")
            .overrides_with("principal-receiving-mode")
            .value_parser(|v: &str| v.parse::<ReceivingMode>().map_err(|e| e.to_string()))
            .help("strict (the default): signed principals bound to this service only; go-compatible: also the Go senders' unsigned and unbound principals, counted (an explicit, temporary choice: needs --principal-compat-until and --principal-compat-sender)"),
    )
    .arg(
        Arg::new("principal-compat-until")
            .long("principal-compat-until")
            .overrides_with("principal-compat-until")
            .value_parser(|v: &str| CompatibilityWindow::parse_until(v).map_err(|e| e.to_string()))
            .help("The end of the go-compatible mode, an RFC 3339 time or a date (2027-03-01, midnight UTC): from then on the service acts as strict (required in that mode)"),
    )
    .arg(
        Arg::new("principal-compat-sender")
            .long("principal-compat-sender")
            .action(ArgAction::Append)
            .value_parser(|v: &str| v.parse::<AllowedPeer>().map_err(|e| e.to_string()))
            .help("A sender allowed to send the Go forms in the go-compatible mode (repeatable): spiffe://..., uri:URI, dns:NAME or cn:NAME (at least one required in that mode)"),
    )
}

/// Builds the verifier and serves the endpoint when `--receive-bind-address` is set;
/// returns the address bound.
pub(crate) async fn start(
    matches: &ArgMatches,
    cluster: &ClusterClient,
    sync_timeout: std::time::Duration,
) -> Result<Option<SocketAddr>, Error> {
    let address = matches
        .get_one::<String>("receive-bind-address")
        .map(String::as_str)
        .unwrap_or("0");
    if address == "0" {
        return Ok(None);
    }
    let address: SocketAddr = address
        .parse()
        .map_err(|e| format!("--receive-bind-address={address:?}: {e}"))?;
    let text = |name: &str| matches.get_one::<String>(name).cloned().unwrap_or_default();
    let (namespace, name) = (
        text("ingress-ca-secret-namespace"),
        text("ingress-ca-secret-name"),
    );
    if namespace.is_empty() || name.is_empty() {
        return Err("--receive-bind-address needs --ingress-ca-secret-namespace and --ingress-ca-secret-name".into());
    }
    let mode = matches
        .get_one::<ReceivingMode>("principal-receiving-mode")
        .copied()
        .unwrap_or(ReceivingMode::Strict);
    let audiences: Vec<Url> = matches
        .get_many::<Url>("principal-audience")
        .map(|values| values.cloned().collect())
        .unwrap_or_default();
    let senders: Vec<AllowedPeer> = matches
        .get_many::<AllowedPeer>("principal-compat-sender")
        .map(|values| values.cloned().collect())
        .unwrap_or_default();
    let mut builder = IngressBuilder::new(SecretRef::new(namespace, name), mode)
        .audiences(audiences)
        .compatible_senders(senders)
        .sync_timeout(sync_timeout);
    if let Some(until) = matches.get_one::<std::time::SystemTime>("principal-compat-until") {
        builder = builder.compatible_until(*until);
    }
    // Refused without audiences (and, in the go-compatible mode, without its end and
    // its senders), before anything is watched.
    let ingress = builder.build(cluster).await?;
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let ingress = Arc::new(ingress);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let ingress = ingress.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let ingress = ingress.clone();
                    async move { Ok::<_, Infallible>(answer(&request, &ingress)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    println!("receive: serving http://{bound}/api/v1/whoami in the {mode} mode");
    Ok(Some(bound))
}

fn answer<B>(request: &Request<B>, ingress: &IngressVerifier) -> Response<Full<Bytes>> {
    let (status, body) = if request.uri().path() != "/api/v1/whoami" {
        (StatusCode::NOT_FOUND, "not found\n".to_owned())
    } else {
        match ingress.verify_request::<Principal>(request.headers()) {
            Ok(who) => (
                StatusCode::OK,
                format!(
                    "principal actor={} organization={} project={}\n",
                    who.actor.unwrap_or_default(),
                    who.organization_id.unwrap_or_default(),
                    who.project_id.unwrap_or_default()
                ),
            ),
            Err(refused) => {
                tracing::info!(reason = refused.reason(), "principal refused");
                (
                    StatusCode::UNAUTHORIZED,
                    format!("refused {}\n", refused.reason()),
                )
            }
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
