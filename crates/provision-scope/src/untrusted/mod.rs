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
//!
//! The files: this one holds the entry point and the check of what kube built;
//! `error.rs` the error and what it names; `vet.rs` the vetting of the parsed
//! kubeconfig; `text.rs` how outside text is shown in errors.

mod error;
mod text;
mod vet;

use text::chain;
pub(crate) use text::excerpt;
use vet::vet;

pub use error::{EntryKind, KubeconfigEntry, RefusedField, UntrustedKubeconfigError};

use kube::config::KubeConfigOptions;

use crate::vetted::RemoteConfig;

/// The largest kubeconfig read, in bytes: a Secret holds at most 1 MiB.
pub const MAX_KUBECONFIG_BYTES: usize = 1024 * 1024;

/// How many characters of a name the kubeconfig's writer chose (a context, cluster
/// or user name, an unknown field) an error keeps.
pub const NAME_CHARS: usize = 64;

/// How many characters of a parse error's message (which may quote the kubeconfig)
/// an error keeps.
pub const MESSAGE_CHARS: usize = 200;

/// A [`RemoteConfig`] (a `kube::Config` marked untrusted) for a kubeconfig read from
/// a cluster (a Secret's value), after refusing everything that is not inline data.
/// It is the only maker of an untrusted [`RemoteConfig`], which
/// [`remote_cluster`](crate::remote_cluster) checks against the scope's
/// [`Destinations`](crate::Destinations) (loopback, link-local and the management
/// cluster's own API server refused unless allowed).
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
) -> Result<RemoteConfig, UntrustedKubeconfigError> {
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
            let context = excerpt(&context, NAME_CHARS);
            check_built(&config, &context, &cluster)?;
            Ok(RemoteConfig::untrusted(config, context, cluster.name))
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

#[cfg(test)]
mod tests;
