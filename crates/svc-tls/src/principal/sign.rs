//! Signing: the identity in force now signs the principal, through the rustls
//! crypto provider (never the `rsa` crate with a private key).

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::HeaderValue;
use rustls::sign::SigningKey;
use rustls::{SignatureAlgorithm, SignatureScheme};
use serde::Serialize;
use url::Url;

use super::PRINCIPAL_HEADER;
use super::current_identity::CurrentIdentity;
use super::jws::{
    Algorithm, AlgorithmPolicy, DEFAULT_PRINCIPAL_LIFETIME, PrincipalToken, ecdsa_der_to_raw,
};
use super::recorder::TokenRecorder;
use crate::material::Identity;

/// Why a principal could not be signed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    /// The current identity could not be obtained.
    #[error("principal signing: the current client identity is unavailable")]
    Identity(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The identity's key cannot sign a principal under the policy.
    #[error(
        "private key type is unsupported: {key} key (principal signing needs RSA{})",
        if *.ecdsa_allowed { ", ECDSA P-256 or P-384" } else { "; ECDSA is not enabled" }
    )]
    UnsupportedKeyType {
        /// The key type found.
        key: &'static str,
        /// Whether the policy allowed ECDSA.
        ecdsa_allowed: bool,
    },
    /// The identity's key is ECDSA on a curve principal signing does not use (P-521):
    /// Go's signer refuses these with the same words. The TLS handshake itself
    /// accepts P-521; only the `X-Principal` JWS is limited to ES256 and ES384.
    #[error(
        "unsupported elliptic curve: {curve} (principal signing supports ECDSA P-256 and P-384)"
    )]
    UnsupportedCurve {
        /// The curve found, e.g. `P-521`.
        curve: &'static str,
    },
    /// The value could not be encoded as JSON.
    #[error("principal payload could not be encoded as JSON")]
    Encode(#[source] serde_json::Error),
    /// The crypto provider refused to sign.
    #[error("the TLS crypto provider failed to sign the principal")]
    Provider(#[source] rustls::Error),
    /// The provider's ECDSA signature was not the expected DER structure.
    #[error("the TLS crypto provider returned a malformed ECDSA signature")]
    MalformedProviderSignature,
    /// The request goes over plain `http://` to a host other than a loopback
    /// address: the principal would travel in clear text (and without mTLS).
    #[error(
        "refusing to send the X-Principal in clear text to http://{host}: use https:// (plain http is allowed to loopback addresses only)"
    )]
    PlaintextUrl {
        /// The request's host.
        host: String,
    },
    /// The URL a principal is signed for is not `https://` (or `http://` to a
    /// loopback address), or has no host: it names no receiver to bind the token to.
    #[error(
        "refusing to sign an X-Principal for a {scheme:?} URL without a host or not http(s): a principal is bound to the origin of an https:// URL"
    )]
    UnsupportedUrl {
        /// The URL's scheme.
        scheme: String,
    },
    /// The token was signed for another receiver than the request goes to
    /// ([`attach_principal`]): its audience is not the request's origin.
    #[error(
        "the X-Principal was signed for {token_audience}, not for the request's origin {request_origin}"
    )]
    AudienceMismatch {
        /// The origin the token is bound to.
        token_audience: String,
        /// The origin of the request.
        request_origin: String,
    },
    /// The request could not be built (its URL or a header is invalid).
    #[error("the request the principal is for is invalid")]
    InvalidRequest(#[source] reqwest::Error),
}

/// Signs principals with the identity current at each call.
#[derive(Clone)]
pub struct PrincipalSigner<S> {
    source: S,
    policy: AlgorithmPolicy,
    lifetime: std::time::Duration,
    recorder: Arc<dyn TokenRecorder>,
}

impl<S: fmt::Debug> fmt::Debug for PrincipalSigner<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrincipalSigner")
            .field("source", &self.source)
            .field("policy", &self.policy)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl<S: CurrentIdentity> PrincipalSigner<S> {
    /// A signer over `source` with the default policy (the key decides: PS512 for
    /// RSA, ES256 for P-256, ES384 for P-384; see [`PrincipalSigner::with_policy`]).
    pub fn new(source: S) -> Self {
        Self {
            source,
            policy: AlgorithmPolicy::default(),
            lifetime: DEFAULT_PRINCIPAL_LIFETIME,
            recorder: super::recorder::noop(),
        }
    }

    /// The same signer reporting every principal it signs, or fails to sign, to
    /// `recorder` (e.g. `svc_tls::metrics::Metrics::principal_recorder`, feature
    /// `metrics`). A signer from [`PeerTls::principal_signer`](crate::PeerTls::principal_signer)
    /// already reports to the metrics of the registry it was built over.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<dyn TokenRecorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// How long the tokens it signs are valid (`exp - iat`, default
    /// [`DEFAULT_PRINCIPAL_LIFETIME`]); whole seconds, at least one, at most
    /// [`DEFAULT_MAX_PRINCIPAL_LIFETIME`](super::DEFAULT_MAX_PRINCIPAL_LIFETIME) (the receivers' cap: a longer token would
    /// be refused by ours, and accepted for that long by a Go receiver, which has no
    /// cap). A longer lifetime is clamped to the cap, with a WARN.
    ///
    /// ```
    /// # fn f<S: svc_tls::principal::CurrentIdentity>(signer: svc_tls::principal::PrincipalSigner<S>) {
    /// use std::time::Duration;
    /// let signer = signer.with_lifetime(Duration::from_secs(86_400));
    /// assert_eq!(signer.lifetime(), svc_tls::principal::DEFAULT_MAX_PRINCIPAL_LIFETIME);
    /// # }
    /// ```
    #[must_use]
    pub fn with_lifetime(mut self, lifetime: std::time::Duration) -> Self {
        let cap = super::jws::DEFAULT_MAX_PRINCIPAL_LIFETIME;
        if lifetime > cap {
            tracing::warn!(
                requested_secs = lifetime.as_secs(),
                cap_secs = cap.as_secs(),
                "principal token lifetime longer than the receivers' cap: clamped to the cap"
            );
        }
        self.lifetime = lifetime.min(cap);
        self
    }

    /// How long the tokens it signs are valid.
    pub fn lifetime(&self) -> std::time::Duration {
        self.lifetime
    }

    /// The same signer with another algorithm policy.
    #[must_use]
    pub fn with_policy(mut self, policy: AlgorithmPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The identity source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// JSON-encodes `value` and signs it with the current identity, for a request
    /// to `to`: the token's audience is `to`'s origin (`https://host[:port]`), so
    /// the receiver there accepts it and no other receiver that checks its audience
    /// does. Prefer [`PrincipalSigner::attach`], which takes the URL from the
    /// request itself.
    ///
    /// # Errors
    /// [`SignError::Identity`] when the source fails, otherwise as [`sign_with`].
    pub fn sign<T: Serialize + ?Sized>(
        &self,
        to: &Url,
        value: &T,
    ) -> Result<PrincipalToken, SignError> {
        // Names the audience's host and the result, never the key or the token.
        let span = tracing::info_span!(
            "svc_tls.principal.sign",
            audience = to.host_str().unwrap_or_default(),
            result = tracing::field::Empty,
        );
        let _entered = span.enter();
        let result = self.record(self.sign_unrecorded(to, value));
        span.record(
            "result",
            result.as_ref().map_or_else(|e| e.reason(), |_| "ok"),
        );
        result
    }

    fn sign_unrecorded<T: Serialize + ?Sized>(
        &self,
        to: &Url,
        value: &T,
    ) -> Result<PrincipalToken, SignError> {
        let audience = audience_of(to)?;
        let identity = self
            .source
            .current()
            .map_err(|e| SignError::Identity(Box::new(e)))?;
        let payload = serde_json::to_vec(value).map_err(SignError::Encode)?;
        sign_payload(
            identity.certified_key().key.as_ref(),
            &payload,
            self.policy,
            self.lifetime,
            audience,
        )
    }

    fn record(
        &self,
        result: Result<PrincipalToken, SignError>,
    ) -> Result<PrincipalToken, SignError> {
        match result {
            Ok(token) => {
                self.recorder.signed(Some(token.algorithm), "ok");
                Ok(token)
            }
            Err(e) => Err(self.refused(e)),
        }
    }

    fn refused(&self, error: SignError) -> SignError {
        self.recorder.signed(None, error.reason());
        error
    }

    /// Signs `value` for the request's URL (see [`PrincipalSigner::sign`]) and
    /// attaches it to `request` as the `X-Principal` header.
    ///
    /// Only the request's own URL is checked here; where a redirect may take the
    /// request is the client's redirect policy: the clients this crate builds
    /// follow redirects within the origin only
    /// ([`same_origin_policy`](crate::client::same_origin_policy)), and reqwest's
    /// default client follows any redirect with this header, so use one of ours or
    /// install that policy.
    ///
    /// # Errors
    /// [`SignError::PlaintextUrl`] when the request goes to `http://` on a host
    /// other than a loopback address, [`SignError::UnsupportedUrl`] for other
    /// schemes, [`SignError::InvalidRequest`] when the request cannot be built,
    /// otherwise as [`PrincipalSigner::sign`].
    pub fn attach<T: Serialize + ?Sized>(
        &self,
        request: reqwest::RequestBuilder,
        value: &T,
    ) -> Result<reqwest::RequestBuilder, SignError> {
        let (client, request) = request.build_split();
        let mut request = match request {
            Ok(request) => request,
            Err(e) => return Err(self.refused(SignError::InvalidRequest(e))),
        };
        let token = self.sign(request.url(), value)?;
        request
            .headers_mut()
            .insert(PRINCIPAL_HEADER, token.header_value());
        Ok(reqwest::RequestBuilder::from_parts(client, request))
    }
}

/// The audience a principal for a request to `url` is bound to: the URL's origin
/// (`https://host[:port]`, the port only when not 443), after the checks every
/// signing entry point makes: `https://`, or `http://` to a loopback address only
/// (elsewhere the token would travel in clear text), and a host.
fn audience_of(url: &Url) -> Result<String, SignError> {
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(url) => {}
        "http" => {
            return Err(SignError::PlaintextUrl {
                host: url.host_str().unwrap_or_default().to_owned(),
            });
        }
        scheme => {
            return Err(SignError::UnsupportedUrl {
                scheme: super::jws::sender_text(scheme),
            });
        }
    }
    if url.host().is_none() {
        return Err(SignError::UnsupportedUrl {
            scheme: url.scheme().to_owned(),
        });
    }
    Ok(url.origin().ascii_serialization())
}

/// Whether `url`'s host is a loopback address (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Sets the `X-Principal` header of `request` to `token` (replacing any previous
/// one), after checking that the request goes where the token was signed for: its
/// URL passes the signing checks (`https://`, or `http://` to a loopback address)
/// and its origin is the token's audience.
///
/// # Errors
/// [`SignError::AudienceMismatch`] when the token was signed for another origin,
/// [`SignError::PlaintextUrl`] / [`SignError::UnsupportedUrl`] for a URL no token
/// may go to, [`SignError::InvalidRequest`] when the request cannot be built.
pub fn attach_principal(
    request: reqwest::RequestBuilder,
    token: &PrincipalToken,
) -> Result<reqwest::RequestBuilder, SignError> {
    let (client, request) = request.build_split();
    let mut request = request.map_err(SignError::InvalidRequest)?;
    let origin = audience_of(request.url())?;
    if origin != token.audience {
        return Err(SignError::AudienceMismatch {
            token_audience: token.audience.clone(),
            request_origin: origin,
        });
    }
    request
        .headers_mut()
        .insert(PRINCIPAL_HEADER, token.header_value());
    Ok(reqwest::RequestBuilder::from_parts(client, request))
}

/// JSON-encodes `value` and signs it with `identity`'s private key, for a request
/// to `to`. The protected header carries `iat` (now), `exp` (now plus
/// [`DEFAULT_PRINCIPAL_LIFETIME`]) and `aud`, `to`'s origin.
///
/// # Errors
/// [`SignError::PlaintextUrl`] / [`SignError::UnsupportedUrl`] when `to` is not an
/// `https://` URL (or `http://` to a loopback address),
/// [`SignError::UnsupportedKeyType`] for keys the policy does not allow,
/// [`SignError::Encode`] when `value` does not serialize, [`SignError::Provider`] when
/// the crypto provider fails.
pub fn sign_with<T: Serialize + ?Sized>(
    identity: &Identity,
    to: &Url,
    value: &T,
    policy: AlgorithmPolicy,
) -> Result<PrincipalToken, SignError> {
    sign_with_key(identity.certified_key().key.as_ref(), to, value, policy)
}

/// As [`sign_with`], for a rustls signing key held directly.
///
/// # Errors
/// As [`sign_with`].
pub fn sign_with_key<T: Serialize + ?Sized>(
    key: &dyn SigningKey,
    to: &Url,
    value: &T,
    policy: AlgorithmPolicy,
) -> Result<PrincipalToken, SignError> {
    let audience = audience_of(to)?;
    let payload = serde_json::to_vec(value).map_err(SignError::Encode)?;
    sign_payload(key, &payload, policy, DEFAULT_PRINCIPAL_LIFETIME, audience)
}

fn sign_payload(
    key: &dyn SigningKey,
    payload: &[u8],
    policy: AlgorithmPolicy,
    lifetime: std::time::Duration,
    audience: String,
) -> Result<PrincipalToken, SignError> {
    let unsupported = |key: &'static str| SignError::UnsupportedKeyType {
        key,
        ecdsa_allowed: policy.ecdsa(),
    };
    let (algorithm, signer) = match key.algorithm() {
        SignatureAlgorithm::RSA => {
            let signer = key
                .choose_scheme(&[SignatureScheme::RSA_PSS_SHA512])
                .ok_or(unsupported("RSA"))?;
            (Algorithm::Ps512, signer)
        }
        SignatureAlgorithm::ECDSA if policy.ecdsa() => {
            let signer = key
                .choose_scheme(&[
                    SignatureScheme::ECDSA_NISTP256_SHA256,
                    SignatureScheme::ECDSA_NISTP384_SHA384,
                ])
                .ok_or_else(|| {
                    if key
                        .choose_scheme(&[SignatureScheme::ECDSA_NISTP521_SHA512])
                        .is_some()
                    {
                        SignError::UnsupportedCurve { curve: "P-521" }
                    } else {
                        unsupported("ECDSA (curve other than P-256/P-384)")
                    }
                })?;
            let algorithm = match signer.scheme() {
                SignatureScheme::ECDSA_NISTP256_SHA256 => Algorithm::Es256,
                SignatureScheme::ECDSA_NISTP384_SHA384 => Algorithm::Es384,
                _ => return Err(unsupported("ECDSA")),
            };
            (algorithm, signer)
        }
        SignatureAlgorithm::ECDSA => return Err(unsupported("ECDSA")),
        SignatureAlgorithm::ED25519 => return Err(unsupported("Ed25519")),
        SignatureAlgorithm::ED448 => return Err(unsupported("Ed448")),
        _ => return Err(unsupported("unknown")),
    };

    let iat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let exp = iat.saturating_add(lifetime.as_secs().max(1));
    // A unique id per token (128 random bits), for the receivers' replay caches.
    let mut id = [0u8; 16];
    aws_lc_rs::rand::fill(&mut id)
        .map_err(|_| SignError::Provider(rustls::Error::FailedToGetRandomBytes))?;
    let jti = URL_SAFE_NO_PAD.encode(id);
    let mut token = algorithm.encoded_header_with_times(iat, exp, &audience, &jti);
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(payload, &mut token);
    let signature = signer.sign(token.as_bytes()).map_err(SignError::Provider)?;
    let signature = match algorithm.ecdsa_field_len() {
        None => signature,
        Some(len) => {
            ecdsa_der_to_raw(&signature, len).ok_or(SignError::MalformedProviderSignature)?
        }
    };
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(&signature, &mut token);

    let mut header =
        HeaderValue::from_str(&token).map_err(|_| SignError::MalformedProviderSignature)?;
    header.set_sensitive(true);
    Ok(PrincipalToken {
        token,
        header,
        algorithm,
        audience,
    })
}

impl SignError {
    /// Why, as one of [`SIGN_RESULTS`](super::SIGN_RESULTS): a bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Identity(_) => "identity_unavailable",
            Self::UnsupportedKeyType { .. } | Self::UnsupportedCurve { .. } => "unsupported_key",
            Self::Encode(_) => "encode",
            Self::Provider(_) | Self::MalformedProviderSignature => "provider",
            Self::PlaintextUrl { .. } => "plaintext_url",
            Self::UnsupportedUrl { .. } | Self::InvalidRequest(_) => "invalid_request",
            Self::AudienceMismatch { .. } => "audience_mismatch",
        }
    }
}
