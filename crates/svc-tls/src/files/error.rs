//! Why a mounted directory's files give no identity or roots now.

use std::path::PathBuf;

use crate::material::{ConfigMapTrustProblem, MaterialError};

/// Why the files give no usable identity or root set now: which file, and what is
/// wrong. Never carries file contents (key material least of all): the reasons are
/// fixed texts, an I/O error's kind, or the material layer's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file (or the directory) does not exist.
    #[error("{}: not found", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// The file exists but cannot be read.
    #[error("{}: cannot be read: {reason}", path.display())]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// The operating system's reason (an I/O error's text; never contents).
        reason: String,
    },
    /// The file is larger than its cap (refused before reading it all).
    #[error("{}: {len} bytes, more than the {max} bytes accepted", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The cap.
        max: usize,
    },
    /// The kubelet swapped the directory's `..data` link while the files were read,
    /// three times in a row: read again on the next change.
    #[error("{}: ..data was swapped while its files were read", dir.display())]
    Swapped {
        /// The directory.
        dir: PathBuf,
    },
    /// The certificate and key files do not hold a usable identity (unparseable,
    /// half written, or a key that does not belong to the certificate).
    #[error("certificate {} and key {}", certificate.display(), key.display())]
    Identity {
        /// The certificate file read.
        certificate: PathBuf,
        /// The key file read.
        key: PathBuf,
        /// What is wrong (the data key it names is the role: `tls.crt`, `tls.key`).
        #[source]
        source: Box<MaterialError>,
    },
    /// The certificate is outside its validity period now.
    #[error(
        "certificate {}: not valid now (valid from {not_before} until {not_after})",
        certificate.display()
    )]
    OutsideValidity {
        /// The certificate file.
        certificate: PathBuf,
        /// Its `notBefore`.
        not_before: String,
        /// Its `notAfter`.
        not_after: String,
    },
    /// The CA bundle file holds no usable root.
    #[error("CA bundle {}: {problem}", path.display())]
    Trust {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong.
        problem: ConfigMapTrustProblem,
    },
    /// The layout names no file for what was asked (a CA-bundle layout read for an
    /// identity, a pod-certificate layout for trust).
    #[error("{}: the {layout} layout has no {what} file", dir.display())]
    NotInLayout {
        /// The directory.
        dir: PathBuf,
        /// The layout's name.
        layout: &'static str,
        /// `certificate` or `CA bundle`.
        what: &'static str,
    },
    /// The directory's watcher thread could not be started.
    #[error("{}: cannot start the watcher thread: {reason}", dir.display())]
    Thread {
        /// The directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
}
