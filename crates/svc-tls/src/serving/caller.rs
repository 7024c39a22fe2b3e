//! [`Caller`]: who called, as the connection proved it (the client certificate the
//! handshake verified), and the principal that caller signed.

use std::fmt;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;
use serde::de::DeserializeOwned;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

use crate::principal::{
    CertificateError, PRINCIPAL_HEADER, PeerCertificate, VerifyError, VerifyOptions,
};

/// The verified caller of a connection: the client certificate its handshake
/// presented and [`CallerVerifier`](super::CallerVerifier) verified. Requests served
/// by [`serve`](super::serve) (or through [`CallerLayer`](super::CallerLayer)) carry it in their
/// extensions; a request on a connection without a verified certificate carries
/// none, whatever its headers say. Cheap to clone.
#[derive(Clone)]
pub struct Caller {
    inner: Arc<Inner>,
}

struct Inner {
    chain: Vec<CertificateDer<'static>>,
    certificate: PeerCertificate,
    serial: String,
    common_name: Option<String>,
    dns_names: Vec<String>,
    uris: Vec<String>,
    spiffe_id: Option<spiffe::SpiffeId>,
    issuer: String,
    /// The gateway whose connection forwarded this caller's certificate.
    via: Option<Caller>,
}

impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller")
            .field("serial", &self.inner.serial)
            .field("common_name", &self.inner.common_name)
            .field(
                "spiffe_id",
                &self.inner.spiffe_id.as_ref().map(ToString::to_string),
            )
            .field("issuer", &self.inner.issuer)
            .field("via", &self.inner.via)
            .finish_non_exhaustive()
    }
}

/// Why a verified chain gave no [`Caller`] (rustls verified it, so this means a
/// certificate webpki accepts that x509-parser cannot read).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallerError {
    /// The leaf is not a certificate this crate can read.
    #[error("the caller's certificate cannot be read")]
    Unreadable,
    /// The leaf's public key cannot verify principals.
    #[error("the caller's certificate key")]
    Key(#[source] CertificateError),
}

impl Caller {
    /// The caller of a handshake's verified chain (leaf first); `None` for an
    /// empty chain (no certificate presented).
    ///
    /// # Errors
    /// [`CallerError`] when the leaf cannot be read.
    pub fn from_chain(chain: &[CertificateDer<'_>]) -> Result<Option<Self>, CallerError> {
        Self::from_chain_via(chain, None)
    }

    /// As [`Caller::from_chain`], forwarded by `via`'s connection when given.
    pub(super) fn from_chain_via(
        chain: &[CertificateDer<'_>],
        via: Option<Caller>,
    ) -> Result<Option<Self>, CallerError> {
        let Some(leaf) = chain.first() else {
            return Ok(None);
        };
        let (_, cert) =
            X509Certificate::from_der(leaf.as_ref()).map_err(|_| CallerError::Unreadable)?;
        let mut dns_names = Vec::new();
        let mut uris = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
                    GeneralName::URI(uri) => uris.push((*uri).to_owned()),
                    _ => {}
                }
            }
        }
        // SPIFFE: exactly one URI SAN, and it a SPIFFE ID.
        let spiffe_id = match uris.as_slice() {
            [one] => spiffe::SpiffeId::new(one).ok(),
            _ => None,
        };
        let mut names = cert.subject().iter_common_name();
        let common_name = match (names.next(), names.next()) {
            (Some(cn), None) => cn.as_str().ok().map(str::to_owned),
            _ => None,
        };
        let serial = serial_hex(cert.raw_serial());
        let issuer = cert.issuer().to_string();
        let certificate =
            PeerCertificate::from_der(leaf.clone().into_owned()).map_err(CallerError::Key)?;
        Ok(Some(Self {
            inner: Arc::new(Inner {
                chain: chain.iter().map(|c| c.clone().into_owned()).collect(),
                certificate,
                serial,
                common_name,
                dns_names,
                uris,
                spiffe_id,
                issuer,
                via,
            }),
        }))
    }

    /// The gateway that forwarded this caller's certificate over its own verified
    /// connection; `None` for a caller that connected directly.
    pub fn via(&self) -> Option<&Caller> {
        self.inner.via.as_ref()
    }

    /// Whether this caller's certificate names `peer` (a URI SAN exactly, a DNS SAN
    /// ASCII case-insensitively, or the one subject common name exactly).
    pub fn is(&self, peer: &crate::receiving::AllowedPeer) -> bool {
        use crate::receiving::AllowedPeer;
        match peer {
            AllowedPeer::Uri(uri) => self.inner.uris.iter().any(|u| u == uri),
            AllowedPeer::Dns(name) => self
                .inner
                .dns_names
                .iter()
                .any(|n| n.eq_ignore_ascii_case(name)),
            AllowedPeer::CommonName(name) => self.inner.common_name.as_deref() == Some(name),
        }
    }

    /// The caller of a server connection whose handshake is done.
    ///
    /// # Errors
    /// As [`Caller::from_chain`].
    pub fn of_connection(
        connection: &rustls::ServerConnection,
    ) -> Result<Option<Self>, CallerError> {
        Self::from_chain(connection.peer_certificates().unwrap_or_default())
    }

    /// The leaf certificate, DER.
    pub fn leaf(&self) -> &CertificateDer<'static> {
        self.inner.certificate.der()
    }

    /// The chain the caller presented, leaf first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.inner.chain
    }

    /// The leaf's serial number: its bytes in lower-case hex, big-endian, without
    /// separators or leading zero bytes (`07` for 7, `0100` for 256).
    pub fn serial(&self) -> &str {
        &self.inner.serial
    }

    /// The subject's common name, when it has exactly one.
    pub fn common_name(&self) -> Option<&str> {
        self.inner.common_name.as_deref()
    }

    /// The DNS names of the subjectAltName.
    pub fn dns_names(&self) -> &[String] {
        &self.inner.dns_names
    }

    /// The URIs of the subjectAltName.
    pub fn uris(&self) -> &[String] {
        &self.inner.uris
    }

    /// The SPIFFE ID: the one URI SAN, when it is a SPIFFE ID.
    pub fn spiffe_id(&self) -> Option<&spiffe::SpiffeId> {
        self.inner.spiffe_id.as_ref()
    }

    /// The issuer's distinguished name (RFC 4514 text): the CA that issued the leaf.
    pub fn issuer(&self) -> &str {
        &self.inner.issuer
    }

    /// The leaf with its key parsed, for verifying principals.
    pub fn certificate(&self) -> &PeerCertificate {
        &self.inner.certificate
    }

    /// The request's single `X-Principal` header, verified against this caller's
    /// leaf (the key the connection proved the caller holds) as `options` say, and
    /// decoded. Only signed principals: a token signed by another key, unsigned, or
    /// for another audience is refused.
    ///
    /// # Errors
    /// [`CallerPrincipalError::MissingPrincipal`] without exactly one visible-ASCII
    /// header; [`CallerPrincipalError::Verify`] naming why the token was refused.
    pub fn verify_principal<T: DeserializeOwned>(
        &self,
        headers: &http::HeaderMap,
        options: &VerifyOptions,
    ) -> Result<T, CallerPrincipalError> {
        let mut values = headers.get_all(PRINCIPAL_HEADER).iter();
        let (Some(token), None) = (values.next(), values.next()) else {
            return Err(CallerPrincipalError::MissingPrincipal);
        };
        if token.len() > options.max_len {
            return Err(VerifyError::TooLarge {
                len: token.len(),
                max: options.max_len,
            }
            .into());
        }
        let token = token
            .to_str()
            .map_err(|_| CallerPrincipalError::MissingPrincipal)?;
        Ok(self.inner.certificate.verify_with_options(token, options)?)
    }
}

/// A serial's DER bytes as lower-case hex, leading zero bytes dropped.
fn serial_hex(raw: &[u8]) -> String {
    use std::fmt::Write as _;
    let significant = match raw.iter().position(|b| *b != 0) {
        Some(first) => &raw[first..],
        None => &raw[raw.len().saturating_sub(1)..],
    };
    significant.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// Why a request's principal was refused on the serving half.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallerPrincipalError {
    /// The request's connection carried no verified client certificate: there is no
    /// caller, so no principal, whatever the request's headers say.
    #[error("the request's connection presented no verified client certificate")]
    NoCaller,
    /// No (or more than one) `X-Principal` header, or not visible ASCII.
    #[error("X-Principal header is missing, repeated or not ASCII")]
    MissingPrincipal,
    /// The token was refused.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// The principal of `request`: its single `X-Principal` header verified against the
/// [`Caller`] its connection proved.
///
/// # Errors
/// [`CallerPrincipalError::NoCaller`] on a connection without a verified client
/// certificate, otherwise as [`Caller::verify_principal`].
pub fn request_principal<T: DeserializeOwned, B>(
    request: &http::Request<B>,
    options: &VerifyOptions,
) -> Result<T, CallerPrincipalError> {
    request
        .extensions()
        .get::<Caller>()
        .ok_or(CallerPrincipalError::NoCaller)?
        .verify_principal(request.headers(), options)
}
