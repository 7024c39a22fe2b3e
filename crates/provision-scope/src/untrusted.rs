//! A kubeconfig read from a cluster (a Secret), not from the operator's disk: untrusted
//! input, vetted before kube sees it.
//!
//! Whoever can write the Secret a remote cluster's kubeconfig is read from writes
//! this process's client configuration. kube honours everything a kubeconfig can
//! say, so without a check that writer could run a command in the provisioner
//! (`exec`, `auth-provider`), have it read a file of its disk and send it as a
//! credential (`tokenFile` naming this pod's service-account token, `client-key`),
//! or send a credential where anyone can read it (`insecure-skip-tls-verify`,
//! `http://`). [`config_from_untrusted_kubeconfig`] accepts only what a generated
//! remote-cluster kubeconfig needs (an `https://` server, inline CA data, a token,
//! inline client certificate and key) and refuses the rest with an
//! [`UntrustedKubeconfigError`] naming the field and the entry.
//!
//! The rules are on [`config_from_untrusted_kubeconfig`] (this module is private;
//! its items are re-exported at the crate root).

use std::fmt;

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use url::Url;

/// The largest kubeconfig read, in bytes: a Secret holds at most 1 MiB.
pub const MAX_KUBECONFIG_BYTES: usize = 1024 * 1024;

/// How many characters of a name the kubeconfig's writer chose (a context, cluster
/// or user name, an unknown field) an error keeps.
pub const NAME_CHARS: usize = 64;

/// How many characters of a parse error's message (which may quote the kubeconfig)
/// an error keeps.
pub const MESSAGE_CHARS: usize = 200;

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
    fn new(kind: EntryKind, name: &str) -> Self {
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
    /// Larger than [`MAX_KUBECONFIG_BYTES`].
    #[error("kubeconfig read from a cluster is {size} bytes; at most {max} are read")]
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// [`MAX_KUBECONFIG_BYTES`].
        max: usize,
    },
    /// Not UTF-8 text.
    #[error("kubeconfig read from a cluster is not UTF-8 text")]
    NotUtf8,
    /// kube's kubeconfig parser refused it.
    #[error("kubeconfig read from a cluster does not parse: {message}")]
    Parse {
        /// kube's message, escaped and cut to [`MESSAGE_CHARS`] characters.
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
        /// kube's message, escaped and cut to [`MESSAGE_CHARS`] characters.
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

/// A `kube::Config` for a kubeconfig read from a cluster (a Secret's value), after
/// refusing everything that is not inline data.
///
/// Whoever can write that Secret writes this process's client configuration, and
/// kube honours everything a kubeconfig can say: `exec` and `auth-provider` run
/// code in this process, `tokenFile`, `client-key` and the other paths read its
/// disk (a `tokenFile` naming this pod's service-account token sends that token to
/// the kubeconfig's server), `insecure-skip-tls-verify` and `http://` send the
/// credential where anyone can read it.
///
/// Accepted: in the cluster, `server` (`https://` only, no user information),
/// `certificate-authority-data`, `tls-server-name`, `disable-compression`; in the
/// user, `token`, `client-certificate-data`, `client-key-data`; in the context,
/// `cluster`, `user`, `namespace`. Refused ([`UntrustedKubeconfigError::Refused`],
/// naming the field, the entry and the context; the first found, commands first,
/// then paths): `exec`, `auth-provider`, `tokenFile`, `client-certificate`,
/// `client-key`, `username`, `password`, `as`, `as-uid`, `as-groups`,
/// `as-user-extra`, `certificate-authority`, `insecure-skip-tls-verify: true`,
/// `proxy-url`, and a `server` that is not `https://` or carries user information
/// (see [`RefusedField`] for each reason).
///
/// What is vetted and what kube is given:
/// - Only the selected context (`context`, else the kubeconfig's `current-context`;
///   an empty name counts as none), the cluster it names and the user it names are
///   vetted; kube is then given a new kubeconfig holding those three entries and, of
///   them, only the accepted fields. Other contexts, clusters and users are neither
///   checked nor passed on, so they can have no effect; refusing them would refuse
///   working kubeconfigs for text nothing reads.
/// - Two entries with the selected name (context, cluster or user) are refused
///   ([`UntrustedKubeconfigError::Duplicate`]): kube takes the first, client-go the
///   last, and which one is vetted must not be a guess.
/// - A context naming a user the kubeconfig does not hold is refused
///   ([`UntrustedKubeconfigError::Missing`]; kube would go on with no credentials);
///   a context naming no user is accepted (anonymous requests).
/// - A refused field is refused when present, whatever its value (an empty
///   `tokenFile` too), except `insecure-skip-tls-verify: false`, which asks for
///   nothing.
/// - Fields kube does not model, in the cluster or user entry (`token-file`, a
///   misspelling, a field of a later client-go), are refused by name
///   ([`UntrustedKubeconfigError::UnknownField`]): dropping them silently could
///   change what the client authenticates as.
/// - `extensions` (of the cluster, user, context and top level), `preferences` and
///   unknown top-level or context fields are accepted and dropped: kube gives them
///   no meaning outside `exec`.
/// - Input over [`MAX_KUBECONFIG_BYTES`] (a Secret's limit) or not UTF-8 is refused
///   before parsing.
///
/// Errors never show a credential (token, key) nor any field's value; names of
/// entries and unknown fields, which the kubeconfig's writer chose, appear escaped
/// and cut to [`NAME_CHARS`] characters, and a parse error's or kube's message to
/// [`MESSAGE_CHARS`].
///
/// Pass the result to [`with_remote_cluster`](crate::with_remote_cluster) or
/// [`remote_cluster`](crate::remote_cluster), which give the client its
/// [`ClusterId`](crate::ClusterId).
///
/// The kubeconfig is parsed by kube (`Kubeconfig::from_yaml`) and turned into a
/// configuration by kube (`Config::from_custom_kubeconfig`), from a copy holding only
/// the selected, accepted entries and fields. Nothing is run and no file is read.
/// Like any kube configuration built from a kubeconfig, the proxy comes from the
/// process's own `HTTPS_PROXY` environment, never from the kubeconfig.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use provision_scope::{RefusedField, UntrustedKubeconfigError, config_from_untrusted_kubeconfig};
///
/// let yaml = "\
/// apiVersion: v1
/// kind: Config
/// clusters:
/// - name: c
///   cluster: {server: 'https://10.0.0.1:6443'}
/// users:
/// - name: u
///   user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, 'id']}}
/// contexts:
/// - name: x
///   context: {cluster: c, user: u}
/// current-context: x
/// ";
/// let err = config_from_untrusted_kubeconfig(yaml.as_bytes(), None).await.unwrap_err();
/// assert_eq!(err.refused_field(), Some(RefusedField::Exec));
/// assert!(err.to_string().contains("user \"u\" (context \"x\") sets `exec`"));
/// # }
/// ```
pub async fn config_from_untrusted_kubeconfig(
    kubeconfig: &[u8],
    context: Option<&str>,
) -> Result<kube::Config, UntrustedKubeconfigError> {
    let vetted = vet(kubeconfig, context)?;
    let context = vetted.current_context.clone();
    let cluster = vetted
        .clusters
        .first()
        .map(|c| KubeconfigEntry::new(EntryKind::Cluster, &c.name));
    let options = KubeConfigOptions {
        context: context.clone(),
        cluster: None,
        user: None,
    };
    let config = kube::Config::from_custom_kubeconfig(vetted, &options)
        .await
        .map_err(|e| UntrustedKubeconfigError::Kube {
            message: excerpt(&chain(&e), MESSAGE_CHARS),
        })?;
    match (context, cluster) {
        (Some(context), Some(cluster)) => {
            check_built(&config, &excerpt(&context, NAME_CHARS), &cluster)?;
            Ok(config)
        }
        // `vet` always returns one context and one cluster.
        _ => Err(UntrustedKubeconfigError::NoCurrentContext),
    }
}

/// Checks the server URL as kube parsed it (`http::Uri`), not only as `url` did: the
/// two parsers differ on some input (tabs, backslashes, surrounding spaces), and
/// what counts is what the client connects to.
fn check_built(
    config: &kube::Config,
    context: &str,
    entry: &KubeconfigEntry,
) -> Result<(), UntrustedKubeconfigError> {
    let refuse = |field| UntrustedKubeconfigError::Refused {
        context: context.to_owned(),
        entry: entry.clone(),
        field,
    };
    if config.cluster_url.scheme_str() != Some("https") {
        return Err(refuse(RefusedField::ServerNotHttps));
    }
    if config
        .cluster_url
        .authority()
        .is_some_and(|a| a.as_str().contains('@'))
    {
        return Err(refuse(RefusedField::ServerUserInfo));
    }
    if config.accept_invalid_certs {
        return Err(refuse(RefusedField::InsecureSkipTlsVerify));
    }
    Ok(())
}

/// Parses and vets `kubeconfig`; returns a kubeconfig holding only the selected
/// context, its cluster and its user, with only the accepted fields.
fn vet(kubeconfig: &[u8], context: Option<&str>) -> Result<Kubeconfig, UntrustedKubeconfigError> {
    if kubeconfig.len() > MAX_KUBECONFIG_BYTES {
        return Err(UntrustedKubeconfigError::TooLarge {
            size: kubeconfig.len(),
            max: MAX_KUBECONFIG_BYTES,
        });
    }
    let text = std::str::from_utf8(kubeconfig).map_err(|_| UntrustedKubeconfigError::NotUtf8)?;
    let mut parsed = Kubeconfig::from_yaml(text).map_err(|e| UntrustedKubeconfigError::Parse {
        message: excerpt(&chain(&e), MESSAGE_CHARS),
    })?;

    let context_name = match context {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => match parsed.current_context.take() {
            Some(name) if !name.is_empty() => name,
            _ => return Err(UntrustedKubeconfigError::NoCurrentContext),
        },
    };
    let shown_context = excerpt(&context_name, NAME_CHARS);

    // The context.
    let selected = take_one(
        &mut parsed.contexts,
        |c| c.name == context_name,
        &shown_context,
        KubeconfigEntry::new(EntryKind::Context, &context_name),
    )?;
    let ctx = selected
        .context
        .ok_or_else(|| UntrustedKubeconfigError::Missing {
            context: shown_context.clone(),
            entry: KubeconfigEntry::new(EntryKind::Context, &context_name),
        })?;

    // Its cluster.
    let cluster_entry = KubeconfigEntry::new(EntryKind::Cluster, &ctx.cluster);
    let named_cluster = take_one(
        &mut parsed.clusters,
        |c| c.name == ctx.cluster,
        &shown_context,
        cluster_entry.clone(),
    )?;
    let cluster = named_cluster
        .cluster
        .ok_or_else(|| UntrustedKubeconfigError::Missing {
            context: shown_context.clone(),
            entry: cluster_entry.clone(),
        })?;
    let cluster = vet_cluster(cluster, &shown_context, &cluster_entry)?;

    // Its user, if it names one.
    let user = match &ctx.user {
        None => None,
        Some(user_name) => {
            let user_entry = KubeconfigEntry::new(EntryKind::User, user_name);
            let named_user = take_one(
                &mut parsed.auth_infos,
                |u| &u.name == user_name,
                &shown_context,
                user_entry.clone(),
            )?;
            let auth_info =
                named_user
                    .auth_info
                    .ok_or_else(|| UntrustedKubeconfigError::Missing {
                        context: shown_context.clone(),
                        entry: user_entry.clone(),
                    })?;
            Some(NamedAuthInfo {
                name: user_name.clone(),
                auth_info: Some(vet_user(auth_info, &shown_context, &user_entry)?),
                ..NamedAuthInfo::default()
            })
        }
    };

    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: ctx.cluster.clone(),
            cluster: Some(cluster),
            ..NamedCluster::default()
        }],
        auth_infos: user.into_iter().collect(),
        contexts: vec![NamedContext {
            name: context_name.clone(),
            context: Some(Context {
                cluster: ctx.cluster,
                user: ctx.user,
                namespace: ctx.namespace,
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(context_name),
        ..Kubeconfig::default()
    })
}

/// Removes and returns the one entry `matches` selects: none is
/// [`Missing`](UntrustedKubeconfigError::Missing), two or more
/// [`Duplicate`](UntrustedKubeconfigError::Duplicate).
fn take_one<T>(
    entries: &mut Vec<T>,
    matches: impl Fn(&T) -> bool,
    context: &str,
    entry: KubeconfigEntry,
) -> Result<T, UntrustedKubeconfigError> {
    let mut found = entries.iter().enumerate().filter(|(_, e)| matches(e));
    match (found.next(), found.next()) {
        (Some((at, _)), None) => Ok(entries.swap_remove(at)),
        (None, _) => Err(UntrustedKubeconfigError::Missing {
            context: context.to_owned(),
            entry,
        }),
        (Some(_), Some(_)) => Err(UntrustedKubeconfigError::Duplicate {
            context: context.to_owned(),
            entry,
        }),
    }
}

/// The accepted fields of a cluster entry, or the first refusal.
fn vet_cluster(
    cluster: Cluster,
    context: &str,
    entry: &KubeconfigEntry,
) -> Result<Cluster, UntrustedKubeconfigError> {
    let refuse = |field| UntrustedKubeconfigError::Refused {
        context: context.to_owned(),
        entry: entry.clone(),
        field,
    };
    if cluster.certificate_authority.is_some() {
        return Err(refuse(RefusedField::CertificateAuthority));
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(refuse(RefusedField::InsecureSkipTlsVerify));
    }
    if cluster.proxy_url.is_some() {
        return Err(refuse(RefusedField::ProxyUrl));
    }
    if let Some(key) = cluster.other.keys().next() {
        return Err(UntrustedKubeconfigError::UnknownField {
            context: context.to_owned(),
            entry: entry.clone(),
            field: excerpt(key, NAME_CHARS),
        });
    }
    let server_problem = |problem| UntrustedKubeconfigError::Server {
        context: context.to_owned(),
        entry: entry.clone(),
        problem,
    };
    let server = cluster
        .server
        .ok_or_else(|| server_problem("no server URL"))?;
    let url =
        Url::parse(&server).map_err(|_| server_problem("a server URL that does not parse"))?;
    if url.scheme() != "https" {
        return Err(refuse(RefusedField::ServerNotHttps));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(RefusedField::ServerUserInfo));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(server_problem("a server URL with no host"));
    }
    Ok(Cluster {
        server: Some(server),
        certificate_authority_data: cluster.certificate_authority_data,
        tls_server_name: cluster.tls_server_name,
        disable_compression: cluster.disable_compression,
        ..Cluster::default()
    })
}

/// The accepted fields of a user entry, or the first refusal (the ones that run
/// something first, then file paths, then the rest).
fn vet_user(
    user: AuthInfo,
    context: &str,
    entry: &KubeconfigEntry,
) -> Result<AuthInfo, UntrustedKubeconfigError> {
    let refused = [
        (user.exec.is_some(), RefusedField::Exec),
        (user.auth_provider.is_some(), RefusedField::AuthProvider),
        (user.token_file.is_some(), RefusedField::TokenFile),
        (
            user.client_certificate.is_some(),
            RefusedField::ClientCertificate,
        ),
        (user.client_key.is_some(), RefusedField::ClientKey),
        (user.username.is_some(), RefusedField::Username),
        (user.password.is_some(), RefusedField::Password),
        (user.impersonate.is_some(), RefusedField::Impersonate),
        (user.impersonate_uid.is_some(), RefusedField::ImpersonateUid),
        (
            user.impersonate_groups.is_some(),
            RefusedField::ImpersonateGroups,
        ),
        (
            user.impersonate_user_extra.is_some(),
            RefusedField::ImpersonateUserExtra,
        ),
    ];
    if let Some((_, field)) = refused.into_iter().find(|(set, _)| *set) {
        return Err(UntrustedKubeconfigError::Refused {
            context: context.to_owned(),
            entry: entry.clone(),
            field,
        });
    }
    if let Some(key) = user.other.keys().next() {
        return Err(UntrustedKubeconfigError::UnknownField {
            context: context.to_owned(),
            entry: entry.clone(),
            field: excerpt(key, NAME_CHARS),
        });
    }
    Ok(AuthInfo {
        token: user.token,
        client_certificate_data: user.client_certificate_data,
        client_key_data: user.client_key_data,
        ..AuthInfo::default()
    })
}

/// `error` and its sources joined with `: ` (thiserror's `{0}` layers that repeat
/// their source are skipped). Stops reading once it is long enough to be cut.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut current = Some(error);
    while let Some(e) = current {
        let message = e.to_string();
        if !text.ends_with(&message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
        }
        if text.len() > MESSAGE_CHARS * 4 {
            break;
        }
        current = e.source();
    }
    text
}

/// `text` with control characters escaped (`\n`, `\u{1b}`), cut to at most
/// `max_chars` characters of output, then `…`.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars) + 3);
    let mut used = 0usize;
    for c in text.chars() {
        let escaped = c.is_control();
        let len = if escaped { c.escape_debug().len() } else { 1 };
        if used + len > max_chars {
            out.push('…');
            return out;
        }
        used += len;
        if escaped {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_configuration_is_checked_as_kube_parsed_it() {
        let entry = KubeconfigEntry::new(EntryKind::Cluster, "c");
        let check = |url: &str| {
            let config = kube::Config::new(url.parse().unwrap_or_default());
            check_built(&config, "x", &entry).map_err(|e| e.refused_field())
        };
        assert_eq!(check("https://h:6443"), Ok(()));
        assert_eq!(check("http://h"), Err(Some(RefusedField::ServerNotHttps)));
        assert_eq!(
            check("https://u:p@h"),
            Err(Some(RefusedField::ServerUserInfo))
        );
        let mut config = kube::Config::new("https://h".parse().unwrap_or_default());
        config.accept_invalid_certs = true;
        assert_eq!(
            check_built(&config, "x", &entry).map_err(|e| e.refused_field()),
            Err(Some(RefusedField::InsecureSkipTlsVerify))
        );
    }

    #[test]
    fn excerpts_escape_and_cut() {
        assert_eq!(excerpt("a\nb\u{1b}c", 64), "a\\nb\\u{1b}c");
        assert_eq!(excerpt("abcdef", 3), "abc…");
        assert_eq!(excerpt("ab\n", 3), "ab…");
        assert_eq!(excerpt("", 3), "");
    }
}
