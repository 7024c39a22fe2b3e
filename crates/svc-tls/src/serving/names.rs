//! [`ServerNames`]: which identity a handshake presents, chosen by the name the caller
//! asked for (SNI), for a service reached by several names that need several
//! certificates.

use std::fmt;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::identity::IdentityResolver;

/// Why a name could not be given its own identity.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerNameError {
    /// Not a DNS name, nor `*.` and one: IP addresses and other forms are not sent as
    /// SNI, so a handshake could never choose it.
    #[error("server name {name:?} is not a DNS name (nor a `*.` wildcard of one)")]
    NotADnsName {
        /// The name, escaped.
        name: String,
    },
    /// The same name was given two identities.
    #[error("server name {name:?} was given an identity twice")]
    Duplicate {
        /// The name.
        name: String,
    },
}

/// The identities a server presents by the name the caller asked for: exact DNS
/// names first, then `*.`-wildcards (one label, as certificates match them), else
/// the default identity (also for a caller that sent no name). Built once; chosen on
/// every handshake from a short list in memory (no lock, no I/O), then asked of that
/// identity's [`IdentityResolver`] as a single identity is.
#[derive(Clone)]
pub(crate) struct ServerNames {
    default: IdentityResolver,
    /// Lower-case names; wildcards kept as the suffix after `*` (`.example.org`).
    exact: Arc<[(String, IdentityResolver)]>,
    wildcard: Arc<[(String, IdentityResolver)]>,
}

impl fmt::Debug for ServerNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .exact
            .iter()
            .chain(self.wildcard.iter())
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("ServerNames")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

impl ServerNames {
    /// `default` for every name not given its own identity.
    pub(crate) fn new(default: IdentityResolver) -> Self {
        Self {
            default,
            exact: Arc::from([]),
            wildcard: Arc::from([]),
        }
    }

    /// Presents `identity` to callers asking for `name`: a DNS name
    /// (`api.example.org`) or a wildcard of one label (`*.example.org`, matching
    /// `a.example.org`, not `a.b.example.org`), compared without case.
    ///
    /// # Errors
    /// [`ServerNameError`] for a name no SNI can carry, or one given twice.
    pub(crate) fn with(
        mut self,
        name: &str,
        identity: IdentityResolver,
    ) -> Result<Self, ServerNameError> {
        let lower = name.to_ascii_lowercase();
        let (dns, wildcard) = match lower.strip_prefix('*') {
            Some(suffix) => (suffix.strip_prefix('.').unwrap_or(""), true),
            None => (lower.as_str(), false),
        };
        let valid = rustls::pki_types::DnsName::try_from(dns).is_ok()
            && dns.parse::<std::net::IpAddr>().is_err();
        if !valid {
            return Err(ServerNameError::NotADnsName {
                name: watch_ready::excerpt::escaped(name, 80),
            });
        }
        let list = if wildcard {
            &mut self.wildcard
        } else {
            &mut self.exact
        };
        let key = if wildcard {
            format!(".{dns}")
        } else {
            lower.clone()
        };
        if list.iter().any(|(existing, _)| *existing == key) {
            return Err(ServerNameError::Duplicate { name: lower });
        }
        let mut entries = list.to_vec();
        entries.push((key, identity));
        *list = Arc::from(entries);
        Ok(self)
    }

    /// The identity a caller asking for `server_name` is presented.
    pub(crate) fn identity_for(&self, server_name: Option<&str>) -> &IdentityResolver {
        let Some(name) = server_name else {
            return &self.default;
        };
        // rustls passes SNI as a valid DNS name; compare without case.
        if let Some((_, identity)) = self
            .exact
            .iter()
            .find(|(exact, _)| exact.eq_ignore_ascii_case(name))
        {
            return identity;
        }
        if let Some(dot) = name.find('.') {
            let suffix = &name[dot..];
            if let Some((_, identity)) = self
                .wildcard
                .iter()
                .find(|(wildcard, _)| wildcard.eq_ignore_ascii_case(suffix))
            {
                return identity;
            }
        }
        &self.default
    }
}

impl ResolvesServerCert for ServerNames {
    /// Called by rustls once per full handshake: the identity for the caller's SNI,
    /// read as [`IdentityResolver`] reads it (one snapshot, no lock, no I/O).
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let identity = self.identity_for(client_hello.server_name());
        Some(identity.reload().certified_key().clone())
    }
}
