//! Waiting until the agent serves something, asked through the Workload API with the
//! `spiffe` crate's client (what the code under test uses too).

use std::time::{Duration, Instant};

use spiffe::X509Context;
use spiffe::workload_api::WorkloadApiClient;

use crate::SpireError;

/// How often the Workload API is asked while waiting.
const POLL: Duration = Duration::from_millis(200);

/// Asks the Workload API at `endpoint` for an X.509 context until `done` holds for
/// it, for at most `timeout`.
pub(crate) async fn until(
    endpoint: &str,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(&X509Context) -> bool,
) -> Result<(), SpireError> {
    let deadline = Instant::now() + timeout;
    let mut last = "nothing yet".to_owned();
    while Instant::now() < deadline {
        match fetch(endpoint).await {
            Ok(context) if done(&context) => return Ok(()),
            Ok(context) => last = describe(&context),
            Err(error) => last = error,
        }
        tokio::time::sleep(POLL).await;
    }
    Err(SpireError::NotServed {
        what: what.to_owned(),
        timeout,
        last,
    })
}

/// One X.509 context, or why there is none (bounded: a call to a socket that hangs
/// counts as a failure).
pub(crate) async fn fetch(endpoint: &str) -> Result<X509Context, String> {
    let call = async {
        let client = WorkloadApiClient::connect_to(endpoint)
            .await
            .map_err(|e| e.to_string())?;
        client.fetch_x509_context().await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| Err("no answer within 5 s".to_owned()))
}

/// The SPIFFE ID of the default SVID and the trust domains of the bundles.
fn describe(context: &X509Context) -> String {
    let id = context
        .default_svid()
        .map_or_else(|| "no SVID".to_owned(), |svid| svid.spiffe_id().to_string());
    let domains: Vec<String> = context
        .bundle_set()
        .iter()
        .map(|(td, _)| td.to_string())
        .collect();
    format!("{id}, bundles {domains:?}")
}

/// The trust domain's name without `spiffe://`.
pub(crate) fn bare(trust_domain: &str) -> &str {
    trust_domain
        .strip_prefix("spiffe://")
        .unwrap_or(trust_domain)
}

/// The certificates (DER) of `trust_domain`'s bundle in `context`, if it has one.
pub(crate) fn bundle_of(context: &X509Context, trust_domain: &str) -> Option<Vec<Vec<u8>>> {
    context
        .bundle_set()
        .iter()
        .find(|(td, _)| bare(td.as_ref()) == bare(trust_domain))
        .map(|(_, bundle)| {
            bundle
                .authorities()
                .iter()
                .map(|c| c.as_bytes().to_vec())
                .collect()
        })
}
