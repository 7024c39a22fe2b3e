//! Signed principals: the `X-Principal` header, wire-compatible with the Go services.
//!
//! A service says on whose behalf it calls a peer by sending a JWS in **compact**
//! serialization, signed with the private key of its mTLS client identity: for an RSA
//! key, algorithm **PS512** (RSA-PSS, SHA-512, MGF1-SHA-512, salt length 64), protected
//! header exactly `{"alg":"PS512"}`; for ECDSA keys ES256 / ES384 (below). The receiver verifies it against the certificate the peer
//! presented in the TLS handshake (behind the ingress: the `ssl-client-cert` header).
//!
//! # Signing
//! [`PrincipalSigner`] signs with the identity its [`CurrentIdentity`] source returns
//! *at the time of the call* — the same Secret the handshake presents, never a copy
//! kept from before a rotation. [`sign_with`] signs with one given [`Identity`](crate::material::Identity).
//!
//! Every token is bound to its receiver and its time: the protected header carries
//! `iat`, `exp` (60 s later) and `aud`, the origin (`https://host[:port]`) of the URL
//! it is signed for. Every signing entry point takes that URL and checks it
//! (`https://`, or `http://` to a loopback address only): [`PrincipalSigner::attach`]
//! the request's, [`PrincipalSigner::sign`], [`sign_with`] and [`sign_with_key`] one
//! given, and [`attach_principal`] refuses a request whose origin is not the
//! token's audience. Where a redirect takes the request is the client's policy: the
//! clients this crate builds follow redirects within the origin only
//! ([`same_origin_policy`](crate::client::same_origin_policy)).
//!
//! Private-key operations go through the rustls crypto provider (aws-lc-rs, the one
//! that performs the handshake): the `rsa` crate is used for public-key verification
//! only, never with a private key (RUSTSEC-2023-0071 concerns its private-key
//! operations).
//!
//! The key decides the algorithm, as in the newest Go client: RSA signs PS512, ECDSA
//! P-256 signs ES256 and P-384 signs ES384 (JWS raw `r||s` signatures), with the header
//! `{"alg":"ES256"}` or `{"alg":"ES384"}`. [`AlgorithmPolicy::Ps512Only`] keeps the
//! older behaviour for peers that still run the PS512-only verifier: an ECDSA identity
//! is then refused ([`SignError::UnsupportedKeyType`], Go's "private key type is
//! unsupported").
//!
//! # Verifying
//! [`verify`] (or [`PeerCertificate::verify`]) checks a token against a peer
//! certificate and decodes the payload into any [`DeserializeOwned`](serde::de::DeserializeOwned) type. By default
//! PS512, ES256 and ES384 are accepted, each only when it matches the certificate's
//! key type (an RSA certificate never verifies an ES token, nor a P-256 certificate an
//! ES384 or PS512 one); [`AlgorithmPolicy::Ps512Only`] accepts PS512 alone. Every rejection is a
//! [`VerifyError`] variant naming what is wrong. RSA-PSS salt length is auto-detected,
//! as the Go verifier does, so tokens signed with another salt length still verify.
//!
//! Present times are checked against the clock and a lifetime cap
//! ([`DEFAULT_MAX_PRINCIPAL_LIFETIME`]); a present `aud` against the receiver's
//! audiences when it names them ([`VerifyOptions::with_audiences`],
//! [`IngressVerifier::with_audiences`]). [`PeerCertificate::verify`] accepts tokens
//! without times or audience (Go senders'); [`VerifyOptions::with_times`]
//! ([`TokenTimes::Required`]) refuses them.
//!
//! Behind the ingress a receiver names its audiences (or opts out explicitly) and
//! says what it accepts ([`ReceivingMode`]): the strict mode, the default, accepts
//! only signed tokens bound to it; the compatibility mode also what the deployed Go
//! senders send (the unsigned base64url JSON form, and signed tokens without times
//! or audience), each counted ([`TokenRecorder`]).
//!
//! Behind the nginx ingress, [`IngressVerifier`] turns the forwarded
//! `ssl-client-cert` / `ssl-client-verify` headers into a [`PeerCertificate`],
//! verified against the client CA the ingress uses (a watched Secret, read through
//! the trust seam on every request), and verifies the `X-Principal` against it.
//!
//! ```no_run
//! # async fn demo(tls: svc_tls::PeerTls, client: svc_tls::ClusterClient,
//! #               headers: reqwest::header::HeaderMap)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use svc_tls::principal::Principal;
//! use svc_tls::principal::ReceivingMode;
//! use svc_tls::receiving::IngressBuilder;
//! use svc_tls::SecretRef;
//!
//! // Sending side: the signer over the client's resolver (rotations followed, tokens
//! // counted in the metrics), on the pooled peer client, whose redirect policy never
//! // carries the header to another origin (a plain `reqwest::Client::new()` does).
//! let signer = tls.principal_signer().ok_or("no client identity configured")?;
//! let peer = tls.client()?;
//! let url = tls.host()?.join("api/v1/regions")?;
//! let who = Principal { organization_id: Some("org-1".into()), ..Default::default() };
//! let request = signer.attach(peer.get(url)?, &who)?;
//! let response = peer.send(request).await?;
//!
//! // Receiving side, behind the ingress: the client CA Secret its auth-tls-secret
//! // annotation names, watched once per process; build this once at start-up.
//! let ca = SecretRef::new("unikorn", "client-ca");
//! let ingress = IngressBuilder::new(ca, ReceivingMode::Strict)
//!     .audiences(["https://region.example.com".parse()?])
//!     .build(&client)
//!     .await?;
//! let who: Principal = ingress.verify_request(&headers)?;
//! # let _ = (response, who); Ok(()) }
//! ```

// Private modules, one job each, re-exported flat: the public paths are
// `svc_tls::principal::*`, as before the split.
mod ingress;
mod jws;
mod recorder;
mod sign;
mod verify;

use serde::{Deserialize, Deserializer, Serialize};

pub use ingress::{
    AllowedPeer, AllowedPeerError, DEFAULT_MAX_CERT_HEADER_BYTES, INGRESS_CLIENT_CERT_HEADER,
    INGRESS_CLIENT_VERIFY_HEADER, INGRESS_VERIFY_SUCCESS, IngressError, IngressVerifier,
    ReceiverConfigError, ReceivingMode, RequestPrincipalError, UNVERIFIED_WARNING_TEXT,
};
pub use jws::{
    Algorithm, AlgorithmPolicy, DEFAULT_CLOCK_SKEW, DEFAULT_MAX_PRINCIPAL_LIFETIME,
    DEFAULT_PRINCIPAL_LIFETIME, Part, PrincipalToken, TokenTimes,
};
pub use recorder::{ALGORITHMS, SIGN_RESULTS, TokenRecorder, VERIFY_RESULTS, algorithm_label};
pub use sign::{
    CurrentIdentity, PrincipalSigner, SignError, attach_principal, sign_with, sign_with_key,
};
/// The URL a principal is signed for (the `url` crate's type, which is also
/// `reqwest::Url`): re-exported so that callers of [`sign_with`] and
/// [`PrincipalSigner::sign`] need no dependency of their own.
pub use url::Url;
pub use verify::{
    CertificateError, DEFAULT_MAX_TOKEN_BYTES, MIN_RSA_BITS, PeerCertificate, VerifyError,
    VerifyOptions, verify,
};

/// The HTTP header that carries the signed principal.
pub const PRINCIPAL_HEADER: &str = "X-Principal";

/// The principal the identity service understands: on whose behalf a call is made.
///
/// JSON names are `organizationId`, `projectId` and `actor`; each is omitted when empty
/// (Go's `omitempty`), and an empty string received is read as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// The organization the call is for.
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub organization_id: Option<String>,
    /// The project the call is for.
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub project_id: Option<String>,
    /// Who is acting (the end user or service the call originates from).
    #[serde(
        default,
        skip_serializing_if = "is_empty",
        deserialize_with = "empty_as_none"
    )]
    pub actor: Option<String>,
}

fn is_empty(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

fn empty_as_none<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Option::<String>::deserialize(deserializer)?;
    Ok(value.filter(|s| !s.is_empty()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn principal_json_names_and_omission() {
        let p = Principal {
            organization_id: Some("o".into()),
            project_id: Some(String::new()),
            actor: None,
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"organizationId":"o"}"#
        );
        let back: Principal =
            serde_json::from_str(r#"{"organizationId":"o","projectId":"","actor":"a"}"#).unwrap();
        assert_eq!(back.organization_id.as_deref(), Some("o"));
        assert_eq!(back.project_id, None);
        assert_eq!(back.actor.as_deref(), Some("a"));
        assert_eq!(serde_json::to_string(&Principal::default()).unwrap(), "{}");
    }
}
