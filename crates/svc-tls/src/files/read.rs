//! Reading one version of a mounted directory: the `..data` link resolved once, every
//! file of the version read through the resolved directory, sizes capped before
//! reading, and a fingerprint (link target, inode, size, mtime) for the poll path.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::FileError;

/// The link the kubelet's atomic writer swaps to publish a new version of a mounted
/// Secret or projected volume.
pub(crate) const DATA_LINK: &str = "..data";

/// How many times a read is retried when `..data` moved under it.
const ATTEMPTS: usize = 3;

/// One version of the directory: where its files were read from, and their bytes.
pub(crate) struct Version {
    /// The directory the files were read through (`dir/..2026_…` or `dir`).
    pub(crate) resolved: PathBuf,
    /// The files' bytes (or why not), in the order asked.
    pub(crate) files: Vec<Result<Vec<u8>, FileError>>,
}

/// One file's device, inode, size and modification time (seconds, nanoseconds).
type Stamp = (u64, u64, u64, i64, i64);

/// What the poll path compares: the `..data` target and, per file, its identity,
/// size and modification time (following the per-file links).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Fingerprint {
    target: Option<PathBuf>,
    files: Vec<Option<Stamp>>,
    dir_missing: bool,
}

impl Fingerprint {
    /// Whether the directory itself was missing.
    pub(crate) fn is_dir_missing(&self) -> bool {
        self.dir_missing
    }
}

/// The `..data` target of `dir` (`None` when it has none: files written directly).
fn data_target(dir: &Path) -> Result<Option<PathBuf>, FileError> {
    match std::fs::read_link(dir.join(DATA_LINK)) {
        Ok(target) => Ok(Some(target)),
        // No link, or not a link: the files are read directly.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
            ) =>
        {
            if dir.is_dir() {
                Ok(None)
            } else {
                Err(FileError::NotFound {
                    path: dir.to_path_buf(),
                })
            }
        }
        Err(e) => Err(unreadable(&dir.join(DATA_LINK), &e)),
    }
}

fn unreadable(path: &Path, e: &io::Error) -> FileError {
    if e.kind() == io::ErrorKind::NotFound {
        FileError::NotFound {
            path: path.to_path_buf(),
        }
    } else {
        FileError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
    }
}

/// `path`'s bytes, refused when larger than `max` (checked before reading, and
/// again while reading: a writer may grow the file in between).
fn read_capped(path: &Path, max: usize) -> Result<Vec<u8>, FileError> {
    let file = File::open(path).map_err(|e| unreadable(path, &e))?;
    let len = file.metadata().map_err(|e| unreadable(path, &e))?.len();
    let too_large = |len: u64| FileError::TooLarge {
        path: path.to_path_buf(),
        len,
        max,
    };
    let max_u64 = u64::try_from(max).unwrap_or(u64::MAX);
    if len > max_u64 {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max_u64.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(path, &e))?;
    if bytes.len() > max {
        return Err(too_large(u64::try_from(bytes.len()).unwrap_or(u64::MAX)));
    }
    Ok(bytes)
}

/// Reads `names` (each with its cap) from one version of `dir`: `..data` resolved
/// once, every file read through the resolved directory, so that a key and a
/// certificate always come from the same version. When `..data` moved while they
/// were read (the kubelet removes the old version after the swap), read again.
pub(crate) fn read_version(dir: &Path, names: &[(&str, usize)]) -> Result<Version, FileError> {
    for _ in 0..ATTEMPTS {
        let target = data_target(dir)?;
        let resolved = match &target {
            Some(target) => dir.join(target),
            None => dir.to_path_buf(),
        };
        let files: Vec<_> = names
            .iter()
            .map(|(name, max)| read_capped(&resolved.join(name), *max))
            .collect();
        // Unchanged link: the bytes are one version's (the kubelet never writes into
        // a published version). Without a link there is nothing to compare.
        if target.is_none() || data_target(dir)? == target {
            return Ok(Version { resolved, files });
        }
    }
    Err(FileError::Swapped {
        dir: dir.to_path_buf(),
    })
}

/// The fingerprint of `names` in `dir` now: metadata only, no contents.
pub(crate) fn fingerprint(dir: &Path, names: &[&str]) -> Fingerprint {
    let target = match data_target(dir) {
        Ok(target) => target,
        Err(_) => {
            return Fingerprint {
                dir_missing: true,
                ..Fingerprint::default()
            };
        }
    };
    let resolved = match &target {
        Some(target) => dir.join(target),
        None => dir.to_path_buf(),
    };
    let files = names
        .iter()
        .map(|name| {
            std::fs::metadata(resolved.join(name))
                .ok()
                .map(|m| stamp(&m))
        })
        .collect();
    Fingerprint {
        target,
        files,
        dir_missing: false,
    }
}

#[cfg(unix)]
fn stamp(m: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec())
}

#[cfg(not(unix))]
fn stamp(m: &std::fs::Metadata) -> Stamp {
    let nanos = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    (0, 0, m.len(), nanos, 0)
}
