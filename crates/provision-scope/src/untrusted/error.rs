//! The refusal of an untrusted kubeconfig: which field, which entry, and why.

use std::fmt;

use super::{NAME_CHARS, excerpt};

/// A field of a kubeconfig read from a cluster that is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusedField {
    /// `exec` (user): a credential plugin, a command this process would run.
    Exec,
    /// `auth-provider` (user): provider code run in this process, configured by the
    /// kubeconfig (its configuration can name commands and files).
    AuthProvider,
    /// `tokenFile` (user): a path on this process's disk.
    TokenFile,
    /// `client-certificate` (user): a path on this process's disk.
    ClientCertificate,
    /// `client-key` (user): a path on this process's disk.
    ClientKey,
    /// `username` (user): basic authentication.
    Username,
    /// `password` (user): basic authentication.
    Password,
    /// `as` (user): impersonation.
    Impersonate,
    /// `as-uid` (user): impersonation.
    ImpersonateUid,
    /// `as-groups` (user): impersonation.
    ImpersonateGroups,
    /// `as-user-extra` (user): impersonation.
    ImpersonateUserExtra,
    /// `certificate-authority` (cluster): a path on this process's disk.
    CertificateAuthority,
    /// `insecure-skip-tls-verify: true` (cluster): no server certificate check.
    InsecureSkipTlsVerify,
    /// `proxy-url` (cluster): a proxy the kubeconfig's writer chooses.
    ProxyUrl,
    /// `server` (cluster) with a scheme other than `https` (`http://` included).
    ServerNotHttps,
    /// `server` (cluster) with user information (`https://user:password@host`).
    ServerUserInfo,
}

impl RefusedField {
    /// The field's key in the kubeconfig.
    pub fn key(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            Self::AuthProvider => "auth-provider",
            Self::TokenFile => "tokenFile",
            Self::ClientCertificate => "client-certificate",
            Self::ClientKey => "client-key",
            Self::Username => "username",
            Self::Password => "password",
            Self::Impersonate => "as",
            Self::ImpersonateUid => "as-uid",
            Self::ImpersonateGroups => "as-groups",
            Self::ImpersonateUserExtra => "as-user-extra",
            Self::CertificateAuthority => "certificate-authority",
            Self::InsecureSkipTlsVerify => "insecure-skip-tls-verify",
            Self::ProxyUrl => "proxy-url",
            Self::ServerNotHttps | Self::ServerUserInfo => "server",
        }
    }

    /// Why it is refused, in a few words.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Exec => "an exec credential plugin is a command this process would run",
            Self::AuthProvider => {
                "an auth provider runs code in this process as the kubeconfig configures it"
            }
            Self::TokenFile => {
                "a path on this process's disk (it could name this pod's service-account token); use token"
            }
            Self::ClientCertificate => "a path on this process's disk; use client-certificate-data",
            Self::ClientKey => "a path on this process's disk; use client-key-data",
            Self::Username | Self::Password => {
                "basic authentication (removed from Kubernetes in 1.19); use token or client-certificate-data"
            }
            Self::Impersonate
            | Self::ImpersonateUid
            | Self::ImpersonateGroups
            | Self::ImpersonateUserExtra => {
                "impersonation: the credential in the kubeconfig is what this process acts as"
            }
            Self::CertificateAuthority => {
                "a path on this process's disk; use certificate-authority-data"
            }
            Self::InsecureSkipTlsVerify => {
                "the server certificate would not be checked, so the credential goes to whoever answers"
            }
            Self::ProxyUrl => {
                "connections would go through a proxy the kubeconfig's writer chooses, from this process's network"
            }
            Self::ServerNotHttps => {
                "the server URL must be https:// (anything else sends the credential unprotected)"
            }
            Self::ServerUserInfo => {
                "the server URL carries user information (a credential in the URL)"
            }
        }
    }
}

impl fmt::Display for RefusedField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Which kind of kubeconfig entry an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// An entry of `contexts`.
    Context,
    /// An entry of `clusters`.
    Cluster,
    /// An entry of `users`.
    User,
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Context => "context",
            Self::Cluster => "cluster",
            Self::User => "user",
        })
    }
}

/// One kubeconfig entry: its kind and its name, escaped and cut to [`NAME_CHARS`]
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KubeconfigEntry {
    /// Context, cluster or user.
    pub kind: EntryKind,
    /// The entry's name, escaped and cut.
    pub name: String,
}

impl KubeconfigEntry {
    pub(super) fn new(kind: EntryKind, name: &str) -> Self {
        Self {
            kind,
            name: excerpt(name, NAME_CHARS),
        }
    }
}

impl fmt::Display for KubeconfigEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} \"{}\"", self.kind, self.name)
    }
}

/// A kubeconfig read from a cluster was refused, or could not be used.
///
/// Messages name the field and the entry; they never show a credential nor a
/// field's value, and the names they show are escaped and cut (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UntrustedKubeconfigError {
    /// Larger than [`MAX_KUBECONFIG_BYTES`](super::MAX_KUBECONFIG_BYTES).
    #[error("kubeconfig read from a cluster is {size} bytes; at most {max} are read")]
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// [`MAX_KUBECONFIG_BYTES`](super::MAX_KUBECONFIG_BYTES).
        max: usize,
    },
    /// Not UTF-8 text.
    #[error("kubeconfig read from a cluster is not UTF-8 text")]
    NotUtf8,
    /// kube's kubeconfig parser refused it.
    #[error("kubeconfig read from a cluster does not parse: {message}")]
    Parse {
        /// kube's message, escaped and cut to [`MESSAGE_CHARS`](super::MESSAGE_CHARS) characters.
        message: String,
    },
    /// No context was asked for and `current-context` is absent or empty.
    #[error("kubeconfig read from a cluster has no current-context, and no context was named")]
    NoCurrentContext,
    /// The selected context, or the cluster or user it names, is not in the kubeconfig
    /// (or has no body).
    #[error(
        "kubeconfig read from a cluster: {entry} is not in it (selected through context \"{context}\")"
    )]
    Missing {
        /// The selected context's name, escaped and cut.
        context: String,
        /// The entry not found.
        entry: KubeconfigEntry,
    },
    /// Two or more entries carry the selected name.
    #[error(
        "kubeconfig read from a cluster: {entry} is defined more than once (selected through context \"{context}\")"
    )]
    Duplicate {
        /// The selected context's name, escaped and cut.
        context: String,
        /// The entry defined twice.
        entry: KubeconfigEntry,
    },
    /// A field that could run a command, read this process's files, or send the
    /// credential somewhere unprotected.
    #[error("kubeconfig read from a cluster refused: {entry} (context \"{context}\") sets `{field}`: {}", .field.reason())]
    Refused {
        /// The selected context's name, escaped and cut.
        context: String,
        /// The cluster or user entry that sets it.
        entry: KubeconfigEntry,
        /// The field.
        field: RefusedField,
    },
    /// A field kube does not model, in the selected cluster or user entry.
    #[error("kubeconfig read from a cluster refused: {entry} (context \"{context}\") sets `{field}`, a field not accepted from a cluster (accepted: {})", accepted(.entry.kind))]
    UnknownField {
        /// The selected context's name, escaped and cut.
        context: String,
        /// The cluster or user entry that sets it.
        entry: KubeconfigEntry,
        /// The field's key, escaped and cut to [`NAME_CHARS`] characters.
        field: String,
    },
    /// The selected cluster has no server URL, or one that does not parse or names
    /// no host.
    #[error("kubeconfig read from a cluster: {entry} (context \"{context}\") has {problem}")]
    Server {
        /// The selected context's name, escaped and cut.
        context: String,
        /// The cluster entry.
        entry: KubeconfigEntry,
        /// What is wrong, in fixed words (the URL is not shown).
        problem: &'static str,
    },
    /// kube could not make a configuration of the vetted kubeconfig (for example,
    /// `certificate-authority-data` that is not base64 PEM).
    #[error("kubeconfig read from a cluster: kube cannot use it: {message}")]
    Kube {
        /// kube's message, escaped and cut to [`MESSAGE_CHARS`](super::MESSAGE_CHARS) characters.
        message: String,
    },
}

impl UntrustedKubeconfigError {
    /// The refused field, for [`Refused`](Self::Refused).
    pub fn refused_field(&self) -> Option<RefusedField> {
        match self {
            Self::Refused { field, .. } => Some(*field),
            _ => None,
        }
    }
}

fn accepted(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Cluster => {
            "server, certificate-authority-data, tls-server-name, disable-compression, extensions"
        }
        EntryKind::User => "token, client-certificate-data, client-key-data, extensions",
        EntryKind::Context => "cluster, user, namespace, extensions",
    }
}
