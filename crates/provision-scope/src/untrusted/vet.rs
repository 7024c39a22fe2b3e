//! Vetting a parsed kubeconfig: the selected context, its cluster and its user, only
//! the accepted fields kept.

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use url::Url;

use super::{
    EntryKind, KubeconfigEntry, MAX_KUBECONFIG_BYTES, MESSAGE_CHARS, NAME_CHARS, RefusedField,
    UntrustedKubeconfigError, chain, excerpt,
};

/// Parses and vets `kubeconfig`; returns a kubeconfig holding only the selected
/// context, its cluster and its user, with only the accepted fields.
pub(super) fn vet(
    kubeconfig: &[u8],
    context: Option<&str>,
) -> Result<Kubeconfig, UntrustedKubeconfigError> {
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
