//! Why a TLS handshake failed, as a fixed reason read from a rustls error.

use rustls::{CertificateError, Error as TlsError};

use crate::trust::SpiffeIdMismatch;

/// Why a handshake failed: a fixed set chosen by this crate (a metric label), read
/// from the rustls error, never from its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandshakeFailure {
    /// The certificate presented does not chain to a trusted root
    /// (`UnknownIssuer`).
    UnknownCa,
    /// The certificate presented is past its `notAfter`.
    Expired,
    /// The server's certificate does not name the host connected to.
    NameMismatch,
    /// The server's certificate carries another SPIFFE ID than the one authorized
    /// (SPIFFE mode).
    SpiffeIdMismatch,
    /// The caller presented no certificate where one is required (serving side).
    NoCertificate,
    /// The other side refused the handshake with an alert: for a client, the peer
    /// refused its client certificate (or anything else of the handshake); for a
    /// server, the caller refused the server's certificate.
    RefusedByPeer,
    /// Any other TLS failure (a certificate not yet valid or malformed, a protocol
    /// or cipher mismatch, the connection cut mid-handshake, a handshake timeout).
    Other,
}

/// Every reason's label, in [`HandshakeFailure::index`] order.
pub const HANDSHAKE_FAILURES: [&str; 7] = [
    "unknown_ca",
    "expired",
    "name_mismatch",
    "spiffe_id_mismatch",
    "no_certificate",
    "refused_by_peer",
    "other",
];

impl HandshakeFailure {
    /// The label of this reason, one of [`HANDSHAKE_FAILURES`].
    pub fn label(self) -> &'static str {
        HANDSHAKE_FAILURES[self.index()]
    }

    /// This reason's position in [`HANDSHAKE_FAILURES`].
    pub fn index(self) -> usize {
        match self {
            Self::UnknownCa => 0,
            Self::Expired => 1,
            Self::NameMismatch => 2,
            Self::SpiffeIdMismatch => 3,
            Self::NoCertificate => 4,
            Self::RefusedByPeer => 5,
            Self::Other => 6,
        }
    }

    /// The reason of a rustls error.
    pub fn of_tls_error(error: &TlsError) -> Self {
        match error {
            TlsError::InvalidCertificate(certificate) => match certificate {
                CertificateError::UnknownIssuer => Self::UnknownCa,
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    Self::Expired
                }
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => Self::NameMismatch,
                CertificateError::Other(other)
                    if other.0.downcast_ref::<SpiffeIdMismatch>().is_some() =>
                {
                    Self::SpiffeIdMismatch
                }
                _ => Self::Other,
            },
            TlsError::NoCertificatesPresented => Self::NoCertificate,
            TlsError::AlertReceived(_) => Self::RefusedByPeer,
            _ => Self::Other,
        }
    }
}

/// The reason a request or an accept failed in its TLS handshake, when a rustls
/// error is in `error`'s chain (hyper and tokio-rustls carry it inside
/// `io::Error`s, whose `source()` skips it: their payload is searched too);
/// `None` when none is (refused connection, DNS, timeout before TLS).
pub fn handshake_failure(error: &(dyn std::error::Error + 'static)) -> Option<HandshakeFailure> {
    tls_error(error).map(HandshakeFailure::of_tls_error)
}

fn tls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a TlsError> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(tls) = error.downcast_ref::<TlsError>() {
            return Some(tls);
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(tls) = tls_error(inner)
        {
            return Some(tls);
        }
        next = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;

    use rustls::{AlertDescription, OtherError};

    use super::*;

    fn in_io(error: TlsError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, error)
    }

    #[test]
    fn each_rustls_error_has_its_reason_even_inside_an_io_error() {
        let cases = [
            (
                TlsError::InvalidCertificate(CertificateError::UnknownIssuer),
                HandshakeFailure::UnknownCa,
            ),
            (
                TlsError::InvalidCertificate(CertificateError::Expired),
                HandshakeFailure::Expired,
            ),
            (
                TlsError::InvalidCertificate(CertificateError::NotValidForName),
                HandshakeFailure::NameMismatch,
            ),
            (
                TlsError::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    SpiffeIdMismatch {
                        expected: "spiffe://a/b".into(),
                        presented: "spiffe://a/c".into(),
                    },
                )))),
                HandshakeFailure::SpiffeIdMismatch,
            ),
            (
                TlsError::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    std::io::Error::other("not a SPIFFE mismatch"),
                )))),
                HandshakeFailure::Other,
            ),
            (
                TlsError::NoCertificatesPresented,
                HandshakeFailure::NoCertificate,
            ),
            (
                TlsError::AlertReceived(AlertDescription::UnknownCA),
                HandshakeFailure::RefusedByPeer,
            ),
            (
                TlsError::InvalidCertificate(CertificateError::NotValidYet),
                HandshakeFailure::Other,
            ),
            (TlsError::HandshakeNotComplete, HandshakeFailure::Other),
        ];
        for (error, reason) in cases {
            assert_eq!(HandshakeFailure::of_tls_error(&error), reason, "{error:?}");
            let wrapped = std::io::Error::other(in_io(error.clone()));
            assert_eq!(handshake_failure(&wrapped), Some(reason), "{error:?}");
            assert_eq!(HANDSHAKE_FAILURES[reason.index()], reason.label());
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(handshake_failure(&refused), None);
    }
}
