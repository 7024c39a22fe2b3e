//! Which peers may send principals: the allow-list entries and the names read from a
//! forwarded certificate that they are matched against.

use super::*;

/// One name a peer may be allowed under ([`IngressVerifier::with_allowed_peers`]).
///
/// Each kind is compared with that kind of name in the certificate only, never with
/// a rendered subject DN: a certificate whose common name is the text
/// `svc, O=Acme` is not the peer `CN=svc, O=Acme`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AllowedPeer {
    /// A URI SAN, compared exactly: a SPIFFE ID such as
    /// `spiffe://example.org/ns/unikorn/sa/identity`.
    Uri(String),
    /// A DNS SAN, compared ASCII case-insensitively.
    Dns(String),
    /// The subject common name, compared exactly, and only when the subject has
    /// exactly one common name.
    CommonName(String),
}

impl AllowedPeer {
    /// A URI SAN (a SPIFFE ID).
    pub fn uri(uri: impl Into<String>) -> Self {
        Self::Uri(uri.into())
    }

    /// A DNS SAN.
    pub fn dns(name: impl Into<String>) -> Self {
        Self::Dns(name.into())
    }

    /// The subject common name.
    pub fn common_name(name: impl Into<String>) -> Self {
        Self::CommonName(name.into())
    }
}

/// Why a text is not an [`AllowedPeer`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "allowed peer {value:?} names no kind of name: write spiffe://..., uri:URI, dns:NAME or cn:NAME"
)]
pub struct AllowedPeerError {
    /// The value given (at most 64 characters, shown Debug-escaped).
    pub value: String,
}

/// `spiffe://...` (a URI SAN), `uri:URI`, `dns:NAME` or `cn:NAME`; anything else,
/// such as a DN text `CN=svc, O=Acme`, is refused.
impl FromStr for AllowedPeer {
    type Err = AllowedPeerError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let typed = if text.starts_with("spiffe://") {
            Some(Self::Uri(text.to_owned()))
        } else if let Some(uri) = text.strip_prefix("uri:") {
            Some(Self::Uri(uri.to_owned()))
        } else if let Some(name) = text.strip_prefix("dns:") {
            Some(Self::Dns(name.to_owned()))
        } else {
            text.strip_prefix("cn:")
                .map(|name| Self::CommonName(name.to_owned()))
        };
        match typed {
            Some(peer) if !peer.value().is_empty() => Ok(peer),
            _ => Err(AllowedPeerError {
                value: sender_text(text),
            }),
        }
    }
}

impl AllowedPeer {
    fn value(&self) -> &str {
        match self {
            Self::Uri(v) | Self::Dns(v) | Self::CommonName(v) => v,
        }
    }
}

/// The typed names of a certificate an allow-list entry may match.
pub(super) struct PeerNames {
    /// The rendered subject DN: for error messages only, never matched.
    pub(super) subject: String,
    uris: Vec<String>,
    dns: Vec<String>,
    /// The subject common name, when there is exactly one.
    common_name: Option<String>,
}

impl PeerNames {
    pub(super) fn of(der: &CertificateDer<'_>) -> Result<Self, IngressError> {
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref())
            .map_err(|e| IngressError::Certificate(CertificateError::X509(e.to_string())))?;
        let mut common_names = cert.subject().iter_common_name();
        let common_name = match (common_names.next(), common_names.next()) {
            (Some(cn), None) => cn.as_str().ok().map(str::to_owned),
            _ => None,
        };
        let (mut uris, mut dns) = (Vec::new(), Vec::new());
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::URI(uri) => uris.push((*uri).to_owned()),
                    GeneralName::DNSName(name) => dns.push((*name).to_owned()),
                    _ => {}
                }
            }
        }
        Ok(Self {
            subject: cert.subject().to_string(),
            uris,
            dns,
            common_name,
        })
    }

    pub(super) fn matches(&self, peer: &AllowedPeer) -> bool {
        match peer {
            AllowedPeer::Uri(uri) => self.uris.iter().any(|u| u == uri),
            AllowedPeer::Dns(name) => self.dns.iter().any(|d| d.eq_ignore_ascii_case(name)),
            AllowedPeer::CommonName(name) => self.common_name.as_deref() == Some(name.as_str()),
        }
    }
}
