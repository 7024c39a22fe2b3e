//! rustls configurations and `reqwest` clients from trust and an identity.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};

use crate::identity::IdentityResolver;
use crate::material::{self};
use crate::options::HttpProtocol;
use crate::origin::SecretRef;
use crate::trust::TrustVerifier;

use super::PeerClientError;
use super::redirect::same_origin_policy;

/// Which server certificates to trust.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TrustMode {
    /// Exactly these roots, fixed for the life of the configuration.
    Roots(RootCertStore),
    /// The roots in the peer's CA Secret as they are at each handshake (watched;
    /// see [`TrustVerifier`]). What [`PeerTls::from_options`](crate::PeerTls::from_options) uses when the CA flags
    /// are set.
    Watched(TrustVerifier),
    /// The platform's trust store (when no CA Secret is configured).
    Platform,
}

/// Reads a CA Secret once and returns its roots, which are then fixed: a later change
/// of the Secret is not seen. Every certificate in `tls.crt`, and in `ca.crt` when
/// present, becomes a root. To follow the Secret (a CA rotation without restart), use
/// [`TrustVerifier`] and [`TrustMode::Watched`].
pub async fn trust_from_secret(
    client: &kube::Client,
    secret: &SecretRef,
) -> Result<RootCertStore, PeerClientError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let object = api
        .get_opt(&secret.name)
        .await
        .map_err(|error| PeerClientError::CaSecretRead {
            secret: secret.clone(),
            source: watch_ready::KubeError::of(&error),
        })?
        .ok_or_else(|| PeerClientError::CaSecretNotFound {
            secret: secret.clone(),
        })?;
    material::load_trust(&object).map_err(PeerClientError::Trust)
}

/// Builds a TLS 1.3 client configuration with session resumption disabled, trusting
/// `trust` and presenting the identity from `identity` (reloaded on every handshake),
/// or no client certificate when `identity` is `None`. ALPN offers `http/1.1` only
/// (as the Go client spoke); see [`client_config_for`] to offer `h2`.
pub fn client_config(
    provider: Arc<CryptoProvider>,
    trust: TrustMode,
    identity: Option<&IdentityResolver>,
) -> Result<ClientConfig, PeerClientError> {
    client_config_for(provider, trust, identity, HttpProtocol::Http1Only)
}

/// [`client_config`] offering the ALPN protocols of `protocol`.
pub fn client_config_for(
    provider: Arc<CryptoProvider>,
    trust: TrustMode,
    identity: Option<&IdentityResolver>,
    protocol: HttpProtocol,
) -> Result<ClientConfig, PeerClientError> {
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let builder = match trust {
        TrustMode::Roots(roots) => builder.with_root_certificates(roots),
        TrustMode::Watched(verifier) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier)),
        TrustMode::Platform => builder
            .dangerous()
            .with_custom_certificate_verifier(platform_verifier(provider)?),
    };
    let mut config = match identity {
        Some(resolver) => builder.with_client_cert_resolver(Arc::new(resolver.clone())),
        None => builder.with_no_client_auth(),
    };
    // A resumed handshake skips the resolver: every connection must run it.
    config.resumption = Resumption::disabled();
    config.alpn_protocols = protocol.alpn();
    Ok(config)
}

/// The platform's trust store as a verifier, made once per process: the operating
/// system's CA bundle is read at the first verification, so a verifier per client
/// would read it again for every client built (per reconcile). The first provider
/// given is the one it verifies with (this crate's configurations all use
/// [`crypto_provider`](crate::material::crypto_provider)'s algorithms).
fn platform_verifier(
    provider: Arc<CryptoProvider>,
) -> Result<Arc<rustls_platform_verifier::Verifier>, rustls::Error> {
    static PLATFORM: std::sync::OnceLock<Arc<rustls_platform_verifier::Verifier>> =
        std::sync::OnceLock::new();
    if let Some(verifier) = PLATFORM.get() {
        return Ok(verifier.clone());
    }
    let verifier = Arc::new(rustls_platform_verifier::Verifier::new(provider)?);
    Ok(PLATFORM.get_or_init(|| verifier).clone())
}

/// A `reqwest` client builder on `config`; add timeouts and the like, then `build()`.
///
/// The builder speaks HTTP/1.1 only unless `config` offers `h2` through ALPN, so the
/// TLS configuration alone decides the protocol.
///
/// Redirects are followed within the request's origin only
/// ([`same_origin_policy`]): reqwest's default follows a peer's redirect to any
/// host, and from `https` to `http`, with the `X-Principal` header. When `config`
/// presents a client certificate, the client is `https_only`: a request (or a
/// redirect) to `http://` fails instead of leaving without TLS, so without the
/// identity the configuration was built for. Replacing either on the returned
/// builder (`.redirect(..)`, `.https_only(false)`) gives both protections up.
pub fn reqwest_builder(config: ClientConfig) -> reqwest::ClientBuilder {
    let offers_h2 = config.alpn_protocols.iter().any(|p| p.as_slice() == b"h2");
    let presents_identity = config.client_auth_cert_resolver.has_certs();
    let builder = reqwest::Client::builder()
        .redirect(same_origin_policy())
        .https_only(presents_identity)
        .use_preconfigured_tls(config);
    if offers_h2 {
        builder
    } else {
        builder.http1_only()
    }
}

/// A `reqwest` client on `config`.
pub fn reqwest_client(config: ClientConfig) -> Result<reqwest::Client, PeerClientError> {
    reqwest_builder(config)
        .build()
        .map_err(PeerClientError::Http)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::aws_lc_rs::default_provider())
    }

    #[test]
    fn configs_offer_http1_by_default_and_h2_on_request_and_build_a_reqwest_client() {
        for trust in [
            TrustMode::Roots(RootCertStore::empty()),
            TrustMode::Platform,
        ] {
            let config = client_config(provider(), trust.clone(), None).unwrap();
            assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
            reqwest_client(config).unwrap();
            let config =
                client_config_for(provider(), trust, None, HttpProtocol::Http2Preferred).unwrap();
            assert_eq!(
                config.alpn_protocols,
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            );
            reqwest_client(config).unwrap();
        }
    }
}
