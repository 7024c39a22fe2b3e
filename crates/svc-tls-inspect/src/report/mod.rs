//! What the command found, as plain data: serialized for `--output json`, rendered
//! for people by [`human`], and judged into one exit code ([`Category`]).
//!
//! Nothing here holds key material: certificates are described (subject, names,
//! times, key type), keys only by their type and size, principals by their
//! algorithm and audience (the token itself is a bearer credential and is never
//! kept).

pub mod human;
mod parts;

pub use parts::{
    BundleReport, CertificateInfo, ChainReport, ConfigMapReport, DataKey, FileEntry,
    FileSourceReport, PeerReport, PrincipalReport, SecretReport, SpiffeReport, SvidReport,
};

use serde::Serialize;

/// The version of the JSON output's shape, its `schema_version` field.
///
/// The policy: adding a field (or a new value of a `kind`) leaves it unchanged;
/// removing or renaming a field, or changing what a field's value means, raises it.
/// Scripts check it and refuse a version they do not know.
pub const SCHEMA_VERSION: u32 = 1;

/// [`SCHEMA_VERSION`], as the report's first field (its default is the current
/// version, so every report carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SchemaVersion(pub u32);

impl Default for SchemaVersion {
    fn default() -> Self {
        Self(SCHEMA_VERSION)
    }
}

/// A failed check's category, and the exit code that says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The flags are wrong (clap's parse, svc-tls's `OptionsError`, a file named by a
    /// flag that cannot be read): exit 2.
    Flags,
    /// A Secret, a peer's CA ConfigMap or the SPIFFE SVID does not exist, cannot be
    /// read, or the service's loader refuses it: exit 3.
    Secret,
    /// The identity does not chain to the CA named by `--chain-ca-secret` /
    /// `--chain-ca-file`: exit 4.
    Chain,
    /// A peer's handshake failed, or the peer refused the client certificate: exit 5.
    Peer,
    /// A principal could not be signed, or its signature did not verify: exit 6.
    Principal,
    /// No Kubernetes configuration, or the SPIFFE Workload API unreachable: exit 7.
    Environment,
}

impl Category {
    /// The process exit code of this category.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Flags => 2,
            Self::Secret => 3,
            Self::Chain => 4,
            Self::Peer => 5,
            Self::Principal => 6,
            Self::Environment => 7,
        }
    }
}

/// Everything the command found.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// The version of this shape ([`SCHEMA_VERSION`]).
    pub schema_version: SchemaVersion,
    /// True when no check failed.
    pub ok: bool,
    /// The exit code: 0, or the smallest code among `failed`.
    pub exit_code: u8,
    /// The categories of the failed checks, each once, smallest code first.
    pub failed: Vec<Category>,
    /// Flags of the service that this command does not use, by name (values are not
    /// repeated: they may be credentials).
    pub ignored_flags: Vec<String>,
    /// A problem that stopped the command before its checks (bad flags, no
    /// configuration).
    pub error: Option<Problem>,
    /// Each Secret the flags name: client identities, peers' CA Secrets, the chain
    /// check's CA Secret.
    pub secrets: Vec<SecretReport>,
    /// Each peer's CA ConfigMap (`--S-ca-configmap-*`).
    pub configmaps: Vec<ConfigMapReport>,
    /// Each identity read from mounted files (`--[P-]client-certificate-source=file`):
    /// per file what was found, the leaf, whether the key matches it.
    pub files: Vec<FileSourceReport>,
    /// The SPIFFE Workload API, in SPIFFE mode.
    pub spiffe: Option<SpiffeReport>,
    /// Each identity checked against the chain CA (empty without a chain flag).
    pub chains: Vec<ChainReport>,
    /// Each configured peer's handshake.
    pub peers: Vec<PeerReport>,
    /// A principal signed with the default identity and verified against its
    /// certificate.
    pub principal: Option<PrincipalReport>,
}

impl Report {
    /// Records that a check of `category` failed.
    pub fn fail(&mut self, category: Category) {
        if !self.failed.contains(&category) {
            self.failed.push(category);
            self.failed.sort();
        }
    }

    /// Sets `ok` and `exit_code` from `failed`.
    pub fn settle(&mut self) {
        self.ok = self.failed.is_empty();
        self.exit_code = self.failed.first().map_or(0, |c| c.exit_code());
    }
}

/// Why something failed: a bounded name of the error's kind (a svc-tls error enum's
/// variant, e.g. `KeyMismatch`) and its message.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The error's kind, e.g. `WrongType`, `NotFound`, `UnknownIssuer`.
    pub kind: String,
    /// The error as the service would log it.
    pub message: String,
}
