//! The receiving side built from the process's watched Secrets: an
//! [`IngressVerifier`] over the client CA Secret the ingress verifies against,
//! watched once per process and recording into the installed metrics.
//!
//! Free functions rather than constructors on [`IngressVerifier`]: they need the
//! registries' wiring, which the principal module may not name (`layers.toml`), and
//! every `impl IngressVerifier` stays in the principal module's own file.

use std::time::Duration;

use crate::origin::SecretRef;
use crate::principal::IngressVerifier;
use crate::trust::TrustError;
use crate::watch::SecretWatches;

/// The verified receiving side over the CA Secret the ingress's `auth-tls-secret`
/// annotation names: the Secret is watched once per process
/// ([`SecretWatches::process`], shared with peer clients that trust the same
/// Secret), its roots are read on every request, and, when metrics are installed
/// (`svc_tls::metrics::register`, feature `metrics`), the trust's state and every
/// request's principal are exported. Waits up to `sync_timeout` for the Secret's
/// first sync. Build it once at start-up (later calls share the watch and the
/// verifier).
///
/// ```no_run
/// # async fn f(client: cluster_id::ClusterClient, headers: reqwest::header::HeaderMap)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use svc_tls::principal::Principal;
/// use svc_tls::receiving::ingress_verifier;
/// use svc_tls::SecretRef;
///
/// let ca = SecretRef::new("unikorn", "client-ca");
/// let ingress = ingress_verifier(&client, &ca, Duration::from_secs(30)).await?;
/// let who: Principal = ingress.verify_request(&headers)?;
/// # let _ = who; Ok(()) }
/// ```
///
/// # Errors
/// A [`TrustError`] naming the Secret when it cannot be watched, does not sync in
/// time, or holds no usable CA.
pub async fn ingress_verifier(
    client: &cluster_id::ClusterClient,
    ca: &SecretRef,
    sync_timeout: Duration,
) -> Result<IngressVerifier, TrustError> {
    ingress_verifier_in(SecretWatches::process(), client, ca, sync_timeout).await
}

/// [`ingress_verifier`] over a registry of the caller's (one per test) instead of
/// the process's.
///
/// ```no_run
/// # async fn f(client: cluster_id::ClusterClient) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use svc_tls::receiving::ingress_verifier_in;
/// use svc_tls::watch::SecretWatches;
/// use svc_tls::SecretRef;
///
/// let watches = SecretWatches::new();
/// let ca = SecretRef::new("unikorn", "client-ca");
/// let ingress = ingress_verifier_in(&watches, &client, &ca, Duration::from_secs(30)).await?;
/// # let _ = ingress; Ok(()) }
/// ```
///
/// # Errors
/// As [`ingress_verifier`].
pub async fn ingress_verifier_in(
    watches: &SecretWatches,
    client: &cluster_id::ClusterClient,
    ca: &SecretRef,
    sync_timeout: Duration,
) -> Result<IngressVerifier, TrustError> {
    let trust = crate::wiring::watched_trust(watches, client, ca, sync_timeout).await?;
    let recorder = crate::wiring::principal_recorder(watches);
    Ok(IngressVerifier::verified(trust).with_recorder(recorder.0))
}
