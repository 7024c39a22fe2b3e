//! The followers of mounted directories ([`FileWatches`]): one [`MountedFiles`] (one
//! watcher thread, one snapshot) per directory, layout and watch options while one
//! lives, as the registry of watched objects keeps one watch per object.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::mounted::{FileWatchOptions, MountedFiles, Shared};
use super::{FileError, FileLayout};

/// What tells two users of a directory apart: the same directory read with another
/// layout, polled instead of watched, at another interval, or with keys loaded by
/// another provider is another follower.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    dir: PathBuf,
    layout: FileLayout,
    force_poll: bool,
    poll_interval: Duration,
    /// The provider's address (`None`: the default one).
    provider: Option<usize>,
}

impl Key {
    fn new(dir: PathBuf, layout: FileLayout, options: &FileWatchOptions) -> Self {
        Self {
            dir,
            layout,
            force_poll: options.forced_poll(),
            poll_interval: options.interval(),
            provider: options
                .provider_ref()
                .map(|provider| Arc::as_ptr(provider) as *const () as usize),
        }
    }
}

/// The followers of mounted directories of a process ([`FileWatches::process`],
/// what the options-based constructors use) or of a caller's own scope
/// ([`FileWatches::new`], one per test): every [`FileWatches::open`] of the same
/// directory, layout and options while a follower of them lives returns that
/// follower (one watcher thread, one snapshot, no second read), so a client built per
/// reconcile starts no thread per build. Entries are weak: the follower stops when
/// its last user drops it, and the next open starts a new one. Cheap to clone
/// (clones share it).
///
/// ```no_run
/// use svc_tls::files::{FileLayout, FileWatchOptions, FileWatches};
///
/// let watches = FileWatches::new();
/// let a = watches.open("/var/run/secrets/tls", FileLayout::KubernetesTls, FileWatchOptions::default())?;
/// let b = watches.open("/var/run/secrets/tls", FileLayout::KubernetesTls, FileWatchOptions::default())?;
/// assert!(a.ptr_eq(&b));
/// assert_eq!(watches.live(), 1);
/// # Ok::<_, svc_tls::files::FileError>(())
/// ```
#[derive(Clone, Default)]
pub struct FileWatches {
    entries: Arc<Mutex<Vec<Entry>>>,
}

/// A follower by what it was opened with; weak, so that it stops with its users.
type Entry = (Key, Weak<Shared>);

impl std::fmt::Debug for FileWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatches")
            .field("live", &self.live())
            .finish()
    }
}

impl FileWatches {
    /// An empty registry of its own (a test's scope).
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's registry.
    pub fn process() -> &'static FileWatches {
        static PROCESS: LazyLock<FileWatches> = LazyLock::new(FileWatches::new);
        &PROCESS
    }

    /// The follower of `dir` read with `layout` and followed as `options` say: the
    /// live one of this registry for the same directory, layout and options, or a
    /// new one ([`MountedFiles::open_with`]).
    ///
    /// # Errors
    /// As [`MountedFiles::open_with`].
    pub fn open(
        &self,
        dir: impl Into<PathBuf>,
        layout: FileLayout,
        options: FileWatchOptions,
    ) -> Result<MountedFiles, FileError> {
        let key = Key::new(dir.into(), layout, &options);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|(_, shared)| shared.strong_count() > 0);
        let live = entries
            .iter()
            .filter(|(k, _)| *k == key)
            .find_map(|(_, shared)| shared.upgrade());
        if let Some(shared) = live {
            return Ok(MountedFiles::from_shared(shared));
        }
        // Opened under the lock: two first callers start one follower.
        let files = MountedFiles::open_with(key.dir.clone(), key.layout.clone(), options)?;
        entries.push((key, files.downgrade()));
        Ok(files)
    }

    /// How many followers of this registry are alive now.
    pub fn live(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, shared)| shared.strong_count() > 0)
            .count()
    }
}
