//! The options layer's error: flags that cannot describe a usable setup.

/// A start-up configuration error: flags that cannot describe a usable setup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// One flag of a Secret reference is set and the other is not.
    ///
    /// One rule applies to CA and client-certificate references alike: both
    /// flags set, or neither (an empty value counts as unset).
    #[error("--{set} is set but --{missing} is not: set both flags or neither")]
    HalfSetReference {
        /// The flag that is set (without the leading `--`).
        set: String,
        /// The flag that is missing (without the leading `--`).
        missing: String,
    },
    /// A flag was given a value outside its fixed set.
    #[error("--{flag}={value:?} is not a valid value: expected one of {expected}")]
    InvalidValue {
        /// The flag (without the leading `--`).
        flag: String,
        /// The value given (as given).
        value: String,
        /// The values accepted, e.g. `secret, spiffe`.
        expected: &'static str,
    },
    /// `--client-certificate-source=spiffe` with a client-certificate Secret flag:
    /// the identity comes from one source or the other.
    #[error(
        "--{source_flag}=spiffe and --{secret_flag} are both set: the client certificate comes from the SPIFFE Workload API or from a Secret, set one or the other"
    )]
    SourceConflict {
        /// The source flag (without the leading `--`).
        source_flag: String,
        /// The Secret flag that is set.
        secret_flag: String,
    },
    /// A CA Secret flag and a CA ConfigMap flag of one peer are both set: the CA
    /// comes from one or the other.
    #[error(
        "--{secret_flag} and --{configmap_flag} are both set: the peer's CA comes from a Secret or from a ConfigMap, set one or the other"
    )]
    CaSourceConflict {
        /// The CA Secret flag that is set (without the leading `--`).
        secret_flag: String,
        /// The CA ConfigMap flag that is set (without the leading `--`).
        configmap_flag: String,
    },
    /// `--S-ca-cluster-trust-bundle-signer` or `-selector` is malformed.
    #[error("--{flag} is malformed")]
    InvalidClusterTrustBundles {
        /// The flag (without the leading `--`).
        flag: String,
        /// What is wrong with its value.
        source: crate::origin::BundleSelectionError,
    },
    /// `--S-ca-file` (or `--S-ca-cluster-trust-bundle-signer`) is set with another CA
    /// flag.
    #[error(
        "--{file_flag} and --{other_flag} are both set: the peer's CA comes from one source, set one or the other"
    )]
    CaFileConflict {
        /// The CA file (or ClusterTrustBundle signer) flag (without the leading `--`).
        file_flag: String,
        /// The CA Secret or ConfigMap flag that is set too.
        other_flag: String,
    },
    /// `--spiffe-server-id` is not set in SPIFFE mode.
    #[error(
        "--{flag} is required with --{source_flag}=spiffe: give the SPIFFE ID the server must present (spiffe://<trust-domain>/<path>)"
    )]
    MissingSpiffeServerId {
        /// The server-ID flag (without the leading `--`).
        flag: String,
        /// The source flag (without the leading `--`).
        source_flag: String,
    },
    /// `--spiffe-server-id` does not parse as a SPIFFE ID.
    #[error("--{flag}={value:?} is not a SPIFFE ID: {reason}")]
    InvalidSpiffeId {
        /// The flag (without the leading `--`).
        flag: String,
        /// The value given.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A flag the caller requires was not given.
    #[error("--{flag} is required")]
    MissingFlag {
        /// The missing flag (without the leading `--`).
        flag: String,
    },
    /// The matches were not produced by a command augmented with these options
    /// (a programming error: `augment` and `from_matches` disagree on a name).
    #[error("flag --{flag} is not defined on this command: {reason}")]
    NotDefined {
        /// The flag that could not be read.
        flag: String,
        /// clap's explanation.
        reason: String,
    },
}
