//! A mounted directory followed: its files read into memory when they change (on a
//! watcher thread, never on a handshake), published as one snapshot through an
//! `ArcSwap` that handshakes load without I/O or lock.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use arc_swap::{ArcSwap, Guard};
use rustls::crypto::CryptoProvider;
use sha2::{Digest, Sha256};

use super::read::{Fingerprint, fingerprint, read_version};
use super::{FileError, FileLayout};
use crate::follow::{Follower, Followers};
use crate::material::anchors::anchors_from_pem;
use crate::material::identity::load_identity_from_files;
use crate::material::{
    Identity, MAX_CERTIFICATE_VALUE_BYTES, MAX_KEY_VALUE_BYTES, TrustAnchors, crypto_provider,
};
use crate::origin::SourceHealth;

/// The default interval of the poll path: how often the files' metadata is compared
/// (both modes: under inotify it is the safety net for a missed event).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How changes to the directory are noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchMode {
    /// inotify (through the `notify` crate) on the directory, with the poll comparison
    /// every interval as a safety net.
    Inotify,
    /// The poll comparison alone: the `..data` target and each file's inode, size and
    /// modification time, every interval (filesystems without inotify, or forced).
    Poll,
}

impl WatchMode {
    /// `inotify` or `poll`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inotify => "inotify",
            Self::Poll => "poll",
        }
    }
}

/// How a [`MountedFiles`] follows its directory.
#[derive(Debug, Clone)]
pub struct FileWatchOptions {
    force_poll: bool,
    poll_interval: Duration,
    provider: Option<Arc<CryptoProvider>>,
}

impl Default for FileWatchOptions {
    fn default() -> Self {
        Self {
            force_poll: false,
            poll_interval: DEFAULT_POLL_INTERVAL,
            provider: None,
        }
    }
}

impl FileWatchOptions {
    /// Polls only, never inotify (for filesystems whose inotify delivers nothing,
    /// e.g. some network and FUSE filesystems; inotify failing to start falls back to
    /// polling by itself).
    #[must_use]
    pub fn force_poll(mut self, force: bool) -> Self {
        self.force_poll = force;
        self
    }

    /// The poll interval (default [`DEFAULT_POLL_INTERVAL`]; at least 10 ms).
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// The crypto provider keys are loaded with (default
    /// [`crypto_provider`](crate::material::crypto_provider)).
    #[must_use]
    pub fn provider(mut self, provider: Arc<CryptoProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    pub(super) fn forced_poll(&self) -> bool {
        self.force_poll
    }

    pub(super) fn interval(&self) -> Duration {
        self.poll_interval
    }

    pub(super) fn provider_ref(&self) -> Option<&Arc<CryptoProvider>> {
        self.provider.as_ref()
    }
}

/// What the directory held at its last read: the identity and the roots, each whole
/// or why not. Published at once; a handshake reads one snapshot.
pub(crate) struct Snapshot {
    /// Incremented whenever what is published changes.
    pub(crate) generation: u64,
    /// The identity (key matched to certificate), or why none.
    pub(crate) identity: Result<Identity, FileError>,
    /// The root set, or why none.
    pub(crate) trust: Result<Arc<TrustAnchors>, FileError>,
}

/// The loader's memory (watcher thread and explicit refreshes only).
#[derive(Default)]
struct Loader {
    fingerprint: Fingerprint,
    identity_digest: Option<[u8; 32]>,
    trust_digest: Option<[u8; 32]>,
}

#[derive(Debug, Clone)]
struct Health {
    connected: bool,
    last_error: Option<String>,
    errors: u64,
}

enum Wake {
    Changed,
    Stop,
}

pub(crate) struct Shared {
    dir: PathBuf,
    layout: FileLayout,
    provider: Arc<CryptoProvider>,
    snapshot: ArcSwap<Snapshot>,
    loader: Mutex<Loader>,
    health: Mutex<Health>,
    mode: Mutex<WatchMode>,
    followers: Followers,
    wake: Mutex<Option<Sender<Wake>>>,
    /// Certificate-and-key pairs parsed so far (new bytes only).
    identity_loads: std::sync::atomic::AtomicU64,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let wake = self.wake.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(wake) = wake.take() {
            let _ = wake.send(Wake::Stop);
        }
    }
}

/// A mounted directory of key, certificate and CA files (a Secret or projected
/// volume, cert-manager's csi-driver, spiffe-helper, a pod certificate), followed:
/// the files are read into memory when they change, on a thread of their own, and
/// handshakes read the last snapshot (a pointer load: no I/O, no lock).
///
/// The kubelet's atomic update is followed exactly: the `..data` link is resolved
/// once per read and every file read through the version it names, so a key and a
/// certificate always come from one version; a pair is published only when the key
/// matches the certificate, so a file a writer is still writing in place is never
/// served (the last good pair stays, and the next change or poll reads again).
///
/// Cheap to clone (an `Arc`); the watcher thread stops when the last clone (and the
/// last source over it) is dropped.
///
/// ```no_run
/// use svc_tls::files::{FileLayout, MountedFiles};
///
/// let files = MountedFiles::open("/var/run/secrets/tls", FileLayout::KubernetesTls)?;
/// println!("following {} by {}", files.dir().display(), files.mode().as_str());
/// # Ok::<_, svc_tls::files::FileError>(())
/// ```
#[derive(Clone)]
pub struct MountedFiles {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MountedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountedFiles")
            .field("dir", &self.shared.dir)
            .field("layout", &self.shared.layout)
            .field("mode", &self.mode())
            .field("generation", &self.generation())
            .finish()
    }
}

impl MountedFiles {
    /// Follows `dir` with `layout` (inotify, polling every second as well).
    ///
    /// # Errors
    /// [`FileError::NotFound`] when the directory does not exist,
    /// [`FileError::Thread`] when the watcher thread cannot start. The files' content
    /// is not judged here: a source built over it is.
    pub fn open(dir: impl Into<PathBuf>, layout: FileLayout) -> Result<Self, FileError> {
        Self::open_with(dir, layout, FileWatchOptions::default())
    }

    /// [`MountedFiles::open`] with `options`.
    ///
    /// # Errors
    /// As [`MountedFiles::open`].
    pub fn open_with(
        dir: impl Into<PathBuf>,
        layout: FileLayout,
        options: FileWatchOptions,
    ) -> Result<Self, FileError> {
        let dir = dir.into();
        if !dir.is_dir() {
            return Err(FileError::NotFound { path: dir });
        }
        let provider = options
            .provider
            .clone()
            .unwrap_or_else(|| Arc::new(crypto_provider()));
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(Snapshot {
                generation: 0,
                identity: Err(FileError::NotFound { path: dir.clone() }),
                trust: Err(FileError::NotFound { path: dir.clone() }),
            }),
            dir,
            layout,
            provider,
            loader: Mutex::new(Loader::default()),
            health: Mutex::new(Health {
                connected: true,
                last_error: None,
                errors: 0,
            }),
            mode: Mutex::new(WatchMode::Poll),
            followers: Followers::default(),
            wake: Mutex::new(None),
            identity_loads: std::sync::atomic::AtomicU64::new(0),
        });
        shared.refresh(true);
        spawn(&shared, &options)?;
        Ok(Self { shared })
    }

    /// The process's one follower of `dir` with `layout` and the default options:
    /// [`FileWatches::process`](super::FileWatches::process)`.open(..)`. What the
    /// options-based constructors use, so that a client built per reconcile starts no
    /// thread per build; a test scopes its own with
    /// [`FileWatches::new`](super::FileWatches::new).
    ///
    /// # Errors
    /// As [`MountedFiles::open`].
    pub fn process(dir: impl Into<PathBuf>, layout: FileLayout) -> Result<Self, FileError> {
        super::FileWatches::process().open(dir, layout, FileWatchOptions::default())
    }

    /// Whether `self` and `other` follow as one (clones of one follower).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    pub(super) fn from_shared(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    pub(super) fn downgrade(&self) -> Weak<Shared> {
        Arc::downgrade(&self.shared)
    }

    /// The directory followed.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The layout its files are read with.
    pub fn layout(&self) -> &FileLayout {
        &self.shared.layout
    }

    /// How changes are noticed (inotify, or polling when forced or when inotify could
    /// not be started).
    pub fn mode(&self) -> WatchMode {
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many distinct states the directory has been read in (starts at 1).
    pub fn generation(&self) -> u64 {
        self.shared.snapshot.load().generation
    }

    /// How many certificate-and-key pairs have been parsed (on the watcher thread or
    /// an explicit refresh, when the bytes changed; never by a handshake): a
    /// rotation costs one.
    pub fn identity_loads(&self) -> u64 {
        self.shared
            .identity_loads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The health of the change feed: connected while the directory exists and is
    /// followed; the last error and the count of errors since start.
    pub fn health(&self) -> SourceHealth {
        let health = self
            .shared
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        SourceHealth {
            connected: health.connected,
            last_error: health.last_error,
            errors: health.errors,
        }
    }

    /// Reads the files again now, whether or not a change was noticed (a `SIGHUP`
    /// handler, say). Not for the handshake path: it does I/O.
    pub fn refresh_now(&self) {
        self.shared.refresh(true);
    }

    /// The snapshot handshakes read.
    pub(crate) fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.shared.snapshot.load()
    }

    /// The crypto provider keys are loaded with.
    pub(crate) fn provider(&self) -> &Arc<CryptoProvider> {
        &self.shared.provider
    }

    /// Tells `follower` of every change published from now on.
    pub(crate) fn follow(&self, follower: Box<dyn Follower>) {
        self.shared.followers.add(follower);
    }
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

impl Shared {
    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::with_capacity(3);
        for name in [
            self.layout.certificate_file(),
            self.layout.key_file(),
            self.layout.ca_file(),
        ]
        .into_iter()
        .flatten()
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// Reads the directory again when `changed` or when its fingerprint moved, and
    /// publishes (then tells the followers) when what it holds changed.
    fn refresh(&self, changed: bool) {
        let names = self.names();
        let mut loader = self.loader.lock().unwrap_or_else(PoisonError::into_inner);
        let now = fingerprint(&self.dir, &names);
        if !changed && now == loader.fingerprint {
            return;
        }
        let missing = now.is_dir_missing();
        loader.fingerprint = now;
        self.note_directory(missing);
        let published = self.load(&mut loader, &names);
        drop(loader);
        if published {
            self.followers.notify();
        }
    }

    fn note_directory(&self, missing: bool) {
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        if missing && health.connected {
            health.connected = false;
            health.errors = health.errors.saturating_add(1);
            health.last_error = Some(format!("{}: directory not found", self.dir.display()));
        } else if !missing && !health.connected {
            health.connected = true;
        }
    }

    /// Reads one version and publishes it when it differs from the last; `true` when
    /// it published.
    fn load(&self, loader: &mut Loader, names: &[&str]) -> bool {
        let caps: Vec<(&str, usize)> = names
            .iter()
            .map(|name| {
                let key_only = Some(*name) == self.layout.key_file()
                    && Some(*name) != self.layout.certificate_file();
                let cap = if key_only {
                    MAX_KEY_VALUE_BYTES
                } else {
                    MAX_CERTIFICATE_VALUE_BYTES
                };
                (*name, cap)
            })
            .collect();
        let previous = self.snapshot.load_full();
        let (identity, trust) = match read_version(&self.dir, &caps) {
            Ok(version) => {
                let file = |name: Option<&str>| {
                    let index = names.iter().position(|n| Some(*n) == name)?;
                    version.files.get(index)
                };
                let identity = self.identity_of(
                    loader,
                    &previous,
                    &version.resolved,
                    file(self.layout.certificate_file()),
                    file(self.layout.key_file()),
                );
                let trust = self.trust_of(loader, &previous, file(self.layout.ca_file()));
                (identity, trust)
            }
            Err(error) => {
                loader.identity_digest = None;
                loader.trust_digest = None;
                (Err(error.clone()), Err(error))
            }
        };
        let same_identity = match (&identity, &previous.identity) {
            (Ok(a), Ok(b)) => Arc::ptr_eq(a.certified_key(), b.certified_key()),
            (Err(a), Err(b)) => a == b,
            _ => false,
        };
        let same_trust = match (&trust, &previous.trust) {
            (Ok(a), Ok(b)) => Arc::ptr_eq(a, b),
            (Err(a), Err(b)) => a == b,
            _ => false,
        };
        if same_identity && same_trust && previous.generation > 0 {
            return false;
        }
        self.snapshot.store(Arc::new(Snapshot {
            generation: previous.generation.saturating_add(1),
            identity,
            trust,
        }));
        true
    }

    fn identity_of(
        &self,
        loader: &mut Loader,
        previous: &Snapshot,
        resolved: &Path,
        cert: Option<&Result<Vec<u8>, FileError>>,
        key: Option<&Result<Vec<u8>, FileError>>,
    ) -> Result<Identity, FileError> {
        let (Some(cert), Some(key)) = (cert, key) else {
            return Err(FileError::NotInLayout {
                dir: self.dir.clone(),
                layout: self.layout.name(),
                what: "certificate",
            });
        };
        let (cert, key) = match (cert, key) {
            (Ok(cert), Ok(key)) => (cert, key),
            (Err(e), _) | (_, Err(e)) => {
                loader.identity_digest = None;
                return Err(e.clone());
            }
        };
        let digest = digest(&[cert.as_slice(), key.as_slice()]);
        if loader.identity_digest == Some(digest) {
            // The same bytes as the last read: the same result, not parsed again.
            return previous.identity.clone();
        }
        loader.identity_digest = Some(digest);
        self.identity_loads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (cert_file, key_file) = (
            self.layout.certificate_file().unwrap_or_default(),
            self.layout.key_file().unwrap_or_default(),
        );
        load_identity_from_files(
            &resolved.display().to_string(),
            cert,
            key,
            &self.provider,
            None,
        )
        .map_err(|source| FileError::Identity {
            certificate: self.dir.join(cert_file),
            key: self.dir.join(key_file),
            source: Box::new(source),
        })
    }

    fn trust_of(
        &self,
        loader: &mut Loader,
        previous: &Snapshot,
        ca: Option<&Result<Vec<u8>, FileError>>,
    ) -> Result<Arc<TrustAnchors>, FileError> {
        let Some(ca) = ca else {
            return Err(FileError::NotInLayout {
                dir: self.dir.clone(),
                layout: self.layout.name(),
                what: "CA bundle",
            });
        };
        let ca = match ca {
            Ok(ca) => ca,
            Err(e) => {
                loader.trust_digest = None;
                return Err(e.clone());
            }
        };
        let digest = digest(&[ca.as_slice()]);
        if loader.trust_digest == Some(digest) {
            return previous.trust.clone();
        }
        loader.trust_digest = Some(digest);
        let path = self.dir.join(self.layout.ca_file().unwrap_or_default());
        anchors_from_pem(ca)
            .map(Arc::new)
            .map_err(|problem| FileError::Trust { path, problem })
    }
}

/// Starts the watcher thread: inotify on the directory unless polling is forced or
/// inotify cannot start, the poll comparison every interval in both modes.
fn spawn(shared: &Arc<Shared>, options: &FileWatchOptions) -> Result<(), FileError> {
    let (tx, rx) = mpsc::channel();
    let watcher = if options.force_poll {
        None
    } else {
        match start_notify(&shared.dir, tx.clone()) {
            Ok(watcher) => Some(watcher),
            Err(reason) => {
                tracing::warn!(
                    dir = %shared.dir.display(),
                    reason = %reason,
                    "cannot watch the directory with inotify; polling it every {:?} instead",
                    options.poll_interval,
                );
                None
            }
        }
    };
    *shared.mode.lock().unwrap_or_else(PoisonError::into_inner) = if watcher.is_some() {
        WatchMode::Inotify
    } else {
        WatchMode::Poll
    };
    let inotify = watcher.map(|watcher| Inotify {
        armed: dir_id(&shared.dir),
        _watcher: watcher,
        tx: tx.clone(),
        dir: shared.dir.clone(),
    });
    *shared.wake.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
    let weak = Arc::downgrade(shared);
    let interval = options.poll_interval;
    std::thread::Builder::new()
        .name("svc-tls-files".to_owned())
        .spawn(move || run(&weak, &rx, interval, inotify))
        .map(drop)
        .map_err(|e| FileError::Thread {
            dir: shared.dir.clone(),
            reason: e.to_string(),
        })
}

fn start_notify(dir: &Path, tx: Sender<Wake>) -> Result<notify::RecommendedWatcher, String> {
    use notify::Watcher as _;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // An open is no change, and our own reads of files written directly in the
        // directory open them: reading again on it would never end.
        if let Ok(event) = &event
            && matches!(
                event.kind,
                notify::EventKind::Access(notify::event::AccessKind::Open(_))
            )
        {
            return;
        }
        // Any other event (or a watcher error): the thread reads again.
        let _ = tx.send(Wake::Changed);
    })
    .map_err(|e| e.to_string())?;
    // The directory, not the files: the kubelet publishes by swapping `..data`.
    watcher
        .watch(dir, notify::RecursiveMode::NonRecursive)
        .map_err(|e| e.to_string())?;
    Ok(watcher)
}

/// How often a directory that is gone is looked for while inotify follows it: its
/// watch went with it (inotify watches an inode), so the poll finds it back, soon.
const MISSING_DIRECTORY_POLL: Duration = Duration::from_millis(100);

/// The inode (and device) of `dir`, while it exists: what an inotify watch is on.
fn dir_id(dir: &Path) -> Option<(u64, u64)> {
    let metadata = std::fs::metadata(dir).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        Some((metadata.dev(), metadata.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        Some((0, 0))
    }
}

/// The inotify side of the watcher thread: the watch, and the directory it is on.
struct Inotify {
    /// Held: the watch stops when it is dropped.
    _watcher: notify::RecommendedWatcher,
    /// The directory's identity when the watch was made (`None` while it is gone).
    armed: Option<(u64, u64)>,
    tx: Sender<Wake>,
    dir: PathBuf,
}

impl Inotify {
    /// Makes the watch again when the directory is back as another inode (deleted
    /// and recreated: the old watch went with the old inode). Returns whether the
    /// directory is gone now.
    fn rearm(&mut self) -> bool {
        let now = dir_id(&self.dir);
        if now.is_none() {
            self.armed = None;
            return true;
        }
        if now != self.armed {
            match start_notify(&self.dir, self.tx.clone()) {
                Ok(watcher) => {
                    self._watcher = watcher;
                    self.armed = now;
                    tracing::info!(
                        dir = %self.dir.display(),
                        "the directory was recreated: inotify follows the new one"
                    );
                    // Whatever changed between its creation and the new watch.
                    let _ = self.tx.send(Wake::Changed);
                }
                Err(reason) => tracing::warn!(
                    dir = %self.dir.display(),
                    reason = %reason,
                    "the directory was recreated and cannot be watched with inotify again; \
                     it is polled",
                ),
            }
        }
        false
    }
}

fn run(weak: &Weak<Shared>, rx: &Receiver<Wake>, interval: Duration, mut inotify: Option<Inotify>) {
    let mut missing = false;
    loop {
        let wait = if missing {
            interval.min(MISSING_DIRECTORY_POLL)
        } else {
            interval
        };
        let changed = match rx.recv_timeout(wait) {
            Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Wake::Changed) => {
                // A burst (the kubelet's swap is several events): read once for all.
                while let Ok(wake) = rx.try_recv() {
                    if matches!(wake, Wake::Stop) {
                        return;
                    }
                }
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
        };
        let Some(shared) = weak.upgrade() else {
            return;
        };
        shared.refresh(changed);
        drop(shared);
        if let Some(inotify) = &mut inotify {
            missing = inotify.rearm();
        }
    }
}

/// Whether `identity` is within its validity period at `now`.
pub(crate) fn valid_at(identity: &Identity, now: SystemTime) -> bool {
    identity.not_before() <= now && now <= identity.not_after()
}
