//! Gateways: the only connections whose forwarded client certificate is read. A
//! gateway (ingress-nginx with `backend-protocol: HTTPS` and `proxy-ssl-*`, a Gateway
//! API implementation with `BackendTLSPolicy`, HAProxy, Caddy) terminates its caller's
//! mTLS and calls this service over mTLS with a certificate of its own; when that
//! certificate is an allowed gateway identity, the certificate it forwards is
//! verified against the client CA served now and becomes the request's
//! [`Caller`](super::Caller), with the gateway as its [`via`](super::Caller::via).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::caller::Caller;
use crate::receiving::{AllowedPeer, DEFAULT_MAX_CERT_HEADER_BYTES, INGRESS_CLIENT_CERT_HEADER};
use crate::trust::TrustVerifier;

/// The Envoy header (Envoy Gateway, Istio).
pub const XFCC_HEADER: &str = "x-forwarded-client-cert";

/// How a gateway forwards its caller's certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardedFormat {
    /// nginx and ingress-nginx: `ssl-client-cert` holding the URL-escaped PEM
    /// (`proxy_set_header ssl-client-cert $ssl_client_escaped_cert;`). The gateway's
    /// `ssl-client-verify` is not needed: the certificate is verified here.
    NginxEscapedPem,
    /// Envoy (Envoy Gateway, Istio): the `Cert="<URL-escaped PEM>"` field of the
    /// last element of `x-forwarded-client-cert` (the element the nearest hop added).
    EnvoyXfcc,
    /// The certificate's DER, base64, in `header`: HAProxy
    /// (`http-request set-header X-SSL-Client-Cert %[ssl_c_der,base64]`) and Caddy
    /// (`header_up X-SSL-Client-Cert {http.request.tls.client.certificate_der_base64}`).
    Base64Der {
        /// The header's name, lower-case.
        header: String,
    },
}

impl ForwardedFormat {
    /// The header this format reads.
    pub fn header(&self) -> &str {
        match self {
            Self::NginxEscapedPem => INGRESS_CLIENT_CERT_HEADER,
            Self::EnvoyXfcc => XFCC_HEADER,
            Self::Base64Der { header } => header,
        }
    }
}

/// Which connections are gateways, and how they forward their callers' certificates.
#[derive(Clone, Debug)]
pub struct Gateways {
    allowed: Vec<AllowedPeer>,
    format: ForwardedFormat,
    max_header_bytes: usize,
}

impl Gateways {
    /// Connections whose verified certificate is one of `allowed` are gateways that
    /// forward their caller's certificate as `format` says.
    pub fn new<I: IntoIterator<Item = AllowedPeer>>(allowed: I, format: ForwardedFormat) -> Self {
        Self {
            allowed: allowed.into_iter().collect(),
            format,
            max_header_bytes: DEFAULT_MAX_CERT_HEADER_BYTES,
        }
    }

    /// The cap on the forwarded header, checked before it is decoded (default
    /// [`DEFAULT_MAX_CERT_HEADER_BYTES`]).
    #[must_use]
    pub fn with_max_header_bytes(mut self, max: usize) -> Self {
        self.max_header_bytes = max;
        self
    }

    /// The format the gateways forward in.
    pub fn format(&self) -> &ForwardedFormat {
        &self.format
    }

    /// Whether `caller` is one of the allowed gateways.
    pub fn admits(&self, caller: &Caller) -> bool {
        self.allowed.iter().any(|peer| caller.is(peer))
    }
}

/// Why a gateway's forwarded certificate was not taken (counted; the request then has
/// no caller).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ForwardedError {
    /// The header was repeated.
    #[error("the forwarded certificate header is repeated")]
    Repeated,
    /// Longer than the cap.
    #[error("the forwarded certificate header is {len} bytes, over the cap of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// Not the format's encoding of a certificate.
    #[error("the forwarded certificate header is not a certificate in the gateway's format")]
    Encoding,
    /// The certificate does not verify against the client CA served now.
    #[error("the forwarded certificate does not verify against the client CA")]
    Untrusted(#[source] rustls::Error),
    /// Verified, but unreadable.
    #[error("the forwarded certificate cannot be read")]
    Caller(#[source] super::caller::CallerError),
}

/// What a serving configuration counts of forwarded-certificate headers.
#[derive(Default)]
pub(crate) struct ForwardedCounts {
    /// Requests on a connection that is no gateway carrying such a header (removed).
    pub(crate) removed: AtomicU64,
    /// Gateways' forwarded certificates taken as the caller.
    pub(crate) accepted: AtomicU64,
    /// Gateways' forwarded certificates refused.
    pub(crate) refused: AtomicU64,
}

impl fmt::Debug for ForwardedCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForwardedCounts")
            .field("removed", &self.removed.load(Ordering::Relaxed))
            .field("accepted", &self.accepted.load(Ordering::Relaxed))
            .field("refused", &self.refused.load(Ordering::Relaxed))
            .finish()
    }
}

impl Gateways {
    /// The caller `gateway` forwarded in `headers` (`None`: it forwarded none, or an
    /// empty value: its caller presented no certificate), verified against `trust`
    /// now.
    pub(crate) fn forwarded(
        &self,
        headers: &http::HeaderMap,
        gateway: &Caller,
        trust: &TrustVerifier,
    ) -> Result<Option<Caller>, ForwardedError> {
        let mut values = headers.get_all(self.format.header()).iter();
        let value = match (values.next(), values.next()) {
            (None, _) => return Ok(None),
            (Some(value), None) => value,
            (Some(_), Some(_)) => return Err(ForwardedError::Repeated),
        };
        // Empty: the gateway's caller presented no certificate (Caddy's placeholder
        // and HAProxy's sample fetch are empty then).
        if value.as_bytes().iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        if value.len() > self.max_header_bytes {
            return Err(ForwardedError::TooLarge {
                len: value.len(),
                max: self.max_header_bytes,
            });
        }
        let der = decode(&self.format, value.as_bytes())?;
        trust
            .verify_caller_chain(&der, &[], UnixTime::now())
            .map_err(ForwardedError::Untrusted)?;
        Caller::from_chain_via(&[der], Some(gateway.clone())).map_err(ForwardedError::Caller)
    }
}

fn decode(
    format: &ForwardedFormat,
    value: &[u8],
) -> Result<CertificateDer<'static>, ForwardedError> {
    match format {
        ForwardedFormat::NginxEscapedPem => {
            pem_of(&percent_encoding::percent_decode(value).collect::<Vec<u8>>())
        }
        ForwardedFormat::EnvoyXfcc => {
            let text = std::str::from_utf8(value).map_err(|_| ForwardedError::Encoding)?;
            let element = split_unquoted(text, ',')
                .pop()
                .ok_or(ForwardedError::Encoding)?;
            let cert = split_unquoted(element, ';')
                .into_iter()
                .find_map(|pair| {
                    let (key, value) = pair.split_once('=')?;
                    key.trim()
                        .eq_ignore_ascii_case("cert")
                        .then_some(value.trim())
                })
                .ok_or(ForwardedError::Encoding)?;
            let cert = cert
                .strip_prefix('"')
                .and_then(|c| c.strip_suffix('"'))
                .unwrap_or(cert);
            pem_of(&percent_encoding::percent_decode(cert.as_bytes()).collect::<Vec<u8>>())
        }
        ForwardedFormat::Base64Der { .. } => {
            let text = value.strip_prefix(b":").unwrap_or(value);
            let text = text.strip_suffix(b":").unwrap_or(text);
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map(CertificateDer::from)
                .map_err(|_| ForwardedError::Encoding)
        }
    }
}

fn pem_of(pem: &[u8]) -> Result<CertificateDer<'static>, ForwardedError> {
    use rustls_pki_types::pem::PemObject as _;
    CertificateDer::from_pem_slice(pem).map_err(|_| ForwardedError::Encoding)
}

/// `text` split at each `separator` outside double quotes (a `\"` inside quotes
/// does not end them).
fn split_unquoted(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == separator && !quoted => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::split_unquoted;

    #[test]
    fn xfcc_elements_split_outside_quotes_only() {
        let value = r#"By=a;Cert="x,y;z";Subject="CN=a\",b",By=b;Cert="q""#;
        let elements = split_unquoted(value, ',');
        assert_eq!(elements.len(), 2, "{elements:?}");
        assert_eq!(elements[1], r#"By=b;Cert="q""#);
        assert_eq!(split_unquoted(elements[0], ';').len(), 3);
    }
}
