//! Whether a certificate is inside its validity period, and times as certificates
//! write them: the one rule that the Secret loader, the SVID loader, the resolver's
//! state and its logs share.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Identity;

/// Whether the served certificate is inside its validity period, computed from the
/// served identity and the clock each time the state is read (so it clears by itself
/// when a renewed certificate is served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateValidity {
    /// `notBefore <= now <= notAfter`.
    Valid,
    /// `notAfter` has passed: peers refuse the certificate.
    Expired {
        /// When it expired.
        not_after: SystemTime,
    },
    /// `notBefore` is in the future (issuer clock skew, or a clock behind).
    NotYetValid {
        /// When it becomes valid.
        not_before: SystemTime,
    },
}

/// A time for logs and errors, as certificates write it (UTC), e.g.
/// `Jan  1 00:00:00 2030 +00:00`.
pub(crate) fn time_text(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    };
    x509_parser::time::ASN1Time::from_timestamp(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{secs} (unix seconds)"))
}

impl CertificateValidity {
    /// The validity of `identity` at `now`.
    pub fn of(identity: &Identity, now: SystemTime) -> Self {
        if now < identity.not_before() {
            Self::NotYetValid {
                not_before: identity.not_before(),
            }
        } else if now > identity.not_after() {
            Self::Expired {
                not_after: identity.not_after(),
            }
        } else {
            Self::Valid
        }
    }

    /// Whether the certificate is valid.
    pub fn is_valid(&self) -> bool {
        matches!(self, Self::Valid)
    }
}

impl fmt::Display for CertificateValidity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Valid => f.write_str("valid"),
            Self::Expired { .. } => f.write_str("expired"),
            Self::NotYetValid { .. } => f.write_str("not yet valid"),
        }
    }
}
