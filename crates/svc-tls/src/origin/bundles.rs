//! The `ClusterTrustBundle`s of one signer (`certificates.k8s.io`, cluster-scoped),
//! optionally narrowed by a label selector: the set whose `spec.trustBundle`s a
//! verifier trusts together ([`ClusterTrustBundlesRef`]).

use std::collections::BTreeMap;
use std::fmt;

/// Why a signer name or a label selector of [`ClusterTrustBundlesRef`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleSelectionError {
    /// The signer name is not `<domain>/<path>` (as Kubernetes requires of a
    /// `spec.signerName`).
    #[error(
        "{signer:?} is not a signer name: give <domain>/<path> as the ClusterTrustBundles' \
         spec.signerName says it (e.g. example.com/platform)"
    )]
    SignerName {
        /// The name given.
        signer: String,
    },
    /// A requirement of the label selector is not one of `key=value`, `key==value`,
    /// `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`.
    #[error(
        "label selector {selector:?}: cannot read {requirement:?} (give key=value, \
         key!=value, key, !key, key in (a,b) or key notin (a,b), separated by commas)"
    )]
    LabelSelector {
        /// The whole selector given.
        selector: String,
        /// The requirement that could not be read.
        requirement: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Equals(key, value) => labels.get(key) == Some(value),
            Self::NotEquals(key, value) => labels.get(key) != Some(value),
            Self::Exists(key) => labels.contains_key(key),
            Self::NotExists(key) => !labels.contains_key(key),
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Equals(key, value) => write!(f, "{key}={value}"),
            Self::NotEquals(key, value) => write!(f, "{key}!={value}"),
            Self::Exists(key) => write!(f, "{key}"),
            Self::NotExists(key) => write!(f, "!{key}"),
            Self::In(key, values) => write!(f, "{key} in ({})", values.join(",")),
            Self::NotIn(key, values) => write!(f, "{key} notin ({})", values.join(",")),
        }
    }
}

/// A label key or value as Kubernetes accepts them (the characters; the API server
/// checks the rest and refuses the watch naming it).
fn label_word(word: &str, key: bool) -> bool {
    !word.is_empty()
        && word.len() <= if key { 317 } else { 63 }
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || (key && c == '/'))
}

/// The requirements of `selector` (commas outside parentheses separate them).
fn parse_selector(selector: &str) -> Result<Vec<Requirement>, BundleSelectionError> {
    let refuse = |requirement: &str| BundleSelectionError::LabelSelector {
        selector: selector.to_owned(),
        requirement: requirement.trim().to_owned(),
    };
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| refuse(&selector[start..]))?
            }
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    let mut requirements = Vec::new();
    for part in parts {
        let text = part.trim();
        let requirement = if let Some((key, value)) = text.split_once("!=") {
            Requirement::NotEquals(key.trim().to_owned(), value.trim().to_owned())
        } else if let Some((key, value)) = text.split_once("==").or_else(|| text.split_once('=')) {
            Requirement::Equals(key.trim().to_owned(), value.trim().to_owned())
        } else if let Some((key, values)) = set_requirement(text, " notin ") {
            Requirement::NotIn(key, values)
        } else if let Some((key, values)) = set_requirement(text, " in ") {
            Requirement::In(key, values)
        } else if let Some(key) = text.strip_prefix('!') {
            Requirement::NotExists(key.trim().to_owned())
        } else {
            Requirement::Exists(text.to_owned())
        };
        let valid = match &requirement {
            Requirement::Equals(key, value) | Requirement::NotEquals(key, value) => {
                label_word(key, true) && (value.is_empty() || label_word(value, false))
            }
            Requirement::Exists(key) | Requirement::NotExists(key) => label_word(key, true),
            Requirement::In(key, values) | Requirement::NotIn(key, values) => {
                label_word(key, true)
                    && !values.is_empty()
                    && values.iter().all(|v| label_word(v, false))
            }
        };
        if !valid {
            return Err(refuse(part));
        }
        requirements.push(requirement);
    }
    Ok(requirements)
}

/// `key in (a,b)` split at `op`: the key and the values.
fn set_requirement(text: &str, op: &str) -> Option<(String, Vec<String>)> {
    let (key, rest) = text.split_once(op)?;
    let values = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some((
        key.trim().to_owned(),
        values.split(',').map(|v| v.trim().to_owned()).collect(),
    ))
}

/// The `ClusterTrustBundle`s of one signer (`spec.signerName`), optionally only those
/// a label selector matches: the roots a verifier built over it trusts are the
/// `spec.trustBundle`s of every such object, concatenated. `Display` is
/// `signer=<signer>` (and `,labels=<selector>`).
///
/// ```
/// use svc_tls::origin::ClusterTrustBundlesRef;
///
/// let bundles = ClusterTrustBundlesRef::new("example.com/platform")?
///     .with_label_selector("trust.example.com/tier=prod")?;
/// assert_eq!(bundles.signer_name(), "example.com/platform");
/// assert_eq!(bundles.to_string(), "signer=example.com/platform,labels=trust.example.com/tier=prod");
/// assert!(ClusterTrustBundlesRef::new("no-slash").is_err());
/// # Ok::<(), svc_tls::origin::BundleSelectionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterTrustBundlesRef {
    signer: String,
    labels: Vec<Requirement>,
}

impl ClusterTrustBundlesRef {
    /// The bundles of `signer` (`<domain>/<path>`), whatever their labels.
    ///
    /// # Errors
    /// [`BundleSelectionError::SignerName`] when `signer` is not `<domain>/<path>`.
    pub fn new(signer: impl Into<String>) -> Result<Self, BundleSelectionError> {
        let signer = signer.into();
        let valid = signer.split_once('/').is_some_and(|(domain, path)| {
            !domain.is_empty()
                && !path.is_empty()
                && signer
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        });
        if !valid {
            return Err(BundleSelectionError::SignerName { signer });
        }
        Ok(Self {
            signer,
            labels: Vec::new(),
        })
    }

    /// Only the bundles `selector` matches (Kubernetes' label selector syntax: `k=v`,
    /// `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, separated by commas). An
    /// empty selector matches every bundle of the signer.
    ///
    /// # Errors
    /// [`BundleSelectionError::LabelSelector`] naming the requirement it cannot read.
    pub fn with_label_selector(mut self, selector: &str) -> Result<Self, BundleSelectionError> {
        self.labels = if selector.trim().is_empty() {
            Vec::new()
        } else {
            parse_selector(selector)?
        };
        Ok(self)
    }

    /// The signer name.
    pub fn signer_name(&self) -> &str {
        &self.signer
    }

    /// The label selector as sent to the API server (`None` when there is none).
    pub fn label_selector(&self) -> Option<String> {
        (!self.labels.is_empty()).then(|| {
            self.labels
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// The field selector the API server is asked with: `spec.signerName=<signer>`.
    pub fn field_selector(&self) -> String {
        format!("spec.signerName={}", self.signer)
    }

    /// Whether a bundle of signer `signer` with `labels` is one of the set (checked
    /// again on what the API server sends: a server may ignore a selector).
    pub fn selects(&self, signer: Option<&str>, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        signer == Some(self.signer.as_str()) && self.labels.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for ClusterTrustBundlesRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "signer={}", self.signer)?;
        if let Some(labels) = self.label_selector() {
            write!(f, ",labels={labels}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_selector_is_read_matched_and_rendered() {
        let r = ClusterTrustBundlesRef::new("example.com/x")
            .unwrap()
            .with_label_selector("tier=prod, zone in (a,b),!legacy,team")
            .unwrap();
        assert_eq!(
            r.label_selector().as_deref(),
            Some("tier=prod,zone in (a,b),!legacy,team")
        );
        let good = labels(&[("tier", "prod"), ("zone", "b"), ("team", "t")]);
        assert!(r.selects(Some("example.com/x"), Some(&good)));
        assert!(!r.selects(Some("example.com/y"), Some(&good)));
        assert!(!r.selects(None, Some(&good)));
        let legacy = labels(&[
            ("tier", "prod"),
            ("zone", "a"),
            ("team", "t"),
            ("legacy", ""),
        ]);
        assert!(!r.selects(Some("example.com/x"), Some(&legacy)));
        assert!(!r.selects(Some("example.com/x"), None));
        let any = ClusterTrustBundlesRef::new("example.com/x").unwrap();
        assert!(any.selects(Some("example.com/x"), None));
        assert_eq!(any.field_selector(), "spec.signerName=example.com/x");
    }

    #[test]
    fn bad_signers_and_selectors_are_refused_naming_them() {
        for signer in ["", "x", "/x", "x/", "a b/c"] {
            assert!(matches!(
                ClusterTrustBundlesRef::new(signer),
                Err(BundleSelectionError::SignerName { .. })
            ));
        }
        let r = ClusterTrustBundlesRef::new("example.com/x").unwrap();
        for (selector, bad) in [
            ("tier=prod,=x", "=x"),
            ("a b=c", "a b=c"),
            ("k in ()", "k in ()"),
            ("k in (a", "k in (a"),
            ("k=v)", "k=v)"),
        ] {
            match r.clone().with_label_selector(selector) {
                Err(BundleSelectionError::LabelSelector { requirement, .. }) => {
                    assert_eq!(requirement, bad, "{selector}");
                }
                other => panic!("{selector}: {other:?}"),
            }
        }
    }
}
