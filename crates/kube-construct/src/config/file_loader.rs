//! Out-of-cluster configuration from kubeconfig files: which files (`--kubeconfig`,
//! `KUBECONFIG`, or `~/.kube/config`), merging them, and choosing the context.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{ConfigError, ConfigSource, Environment, KubeOptions, Resolved};

/// Resolve the out-of-cluster `options` (at least one is set); `master` is the
/// validated `--master`, if given.
pub(super) async fn load(
    options: &KubeOptions,
    env: &Environment,
    master: Option<(String, http::Uri)>,
) -> Result<Resolved, ConfigError> {
    let paths = match &options.kubeconfig {
        Some(list) => {
            let paths: Vec<PathBuf> = std::env::split_paths(list)
                .filter(|path| !path.as_os_str().is_empty())
                .collect();
            if let Some(missing) = paths.iter().find(|path| !path.exists()) {
                return Err(ConfigError::KubeconfigNotFound {
                    path: missing.clone(),
                });
            }
            if paths.is_empty() {
                return Err(ConfigError::KubeconfigNotFound { path: list.clone() });
            }
            paths
        }
        None => match env.default_kubeconfig() {
            Some(path) if path.exists() => vec![path],
            unavailable => {
                let reason = match unavailable {
                    Some(path) => format!(
                        "--kubeconfig not given, KUBECONFIG not set, and {} does not exist",
                        path.display()
                    ),
                    None => "--kubeconfig not given, KUBECONFIG not set, and the home directory is unknown"
                        .to_owned(),
                };
                // `--context` needs a kubeconfig; `--master` alone does not.
                let (None, Some((url, uri))) = (&options.context, master) else {
                    return Err(ConfigError::NoKubeconfigForContext {
                        context: options.context.clone().unwrap_or_default(),
                        reason,
                    });
                };
                tracing::warn!(%url, %reason, "using --master without a kubeconfig: no credentials, no CA");
                return Ok(Resolved {
                    config: kube::Config::new(uri),
                    source: ConfigSource::Master { url },
                });
            }
        },
    };

    let mut merged: Option<Kubeconfig> = None;
    for path in &paths {
        let next =
            Kubeconfig::read_from(path).map_err(|source| ConfigError::KubeconfigUnreadable {
                path: path.clone(),
                source,
            })?;
        merged = Some(match merged {
            None => next,
            Some(previous) => {
                previous
                    .merge(next)
                    .map_err(|source| ConfigError::KubeconfigUnreadable {
                        path: path.clone(),
                        source,
                    })?
            }
        });
    }
    let kubeconfig = merged.unwrap_or_default();
    let available: Vec<String> = kubeconfig.contexts.iter().map(|c| c.name.clone()).collect();

    let context = match (&options.context, &kubeconfig.current_context) {
        (Some(context), _) => context.clone(),
        (None, Some(current)) if !current.is_empty() => current.clone(),
        (None, _) => {
            return Err(ConfigError::NoCurrentContext { paths, available });
        }
    };
    if !available.contains(&context) {
        return Err(ConfigError::ContextNotFound {
            context,
            paths,
            available,
        });
    }

    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..Default::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| ConfigError::InvalidKubeconfig {
            paths: paths.clone(),
            context: context.clone(),
            source,
        })?;
    let master = master.map(|(url, uri)| {
        config.cluster_url = uri;
        url
    });
    Ok(Resolved {
        config,
        source: ConfigSource::Kubeconfig {
            paths,
            context,
            master,
        },
    })
}
