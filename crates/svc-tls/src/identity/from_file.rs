//! The identity in a mounted directory's files: the file adapter of the identity
//! seam, over a [`MountedFiles`] snapshot.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;

use super::resolver::{IdentityError, IdentityResolver};
use super::settings::IdentitySettings;
use super::source::{IdentityReloadError, IdentitySource};
use crate::files::{FileError, MountedFiles, mounted::valid_at};
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::{CertificateValidity, Identity, validity::time_text};
use crate::origin::{IdentityOrigin, SourceHealth};

/// The key and certificate in a mounted directory ([`MountedFiles`]), as the
/// resolver's identity source.
///
/// [`IdentitySource::current`] is a pointer load of the directory's last snapshot
/// plus a validity check: no I/O, no lock. The files are read by the directory's
/// watcher when they change; a pair whose key does not match its certificate (a
/// file still being written), a deleted or unreadable file, is never published as an
/// identity: the source answers why, and the resolver serves the last good identity
/// with its rate-limited warning until the files are whole again.
///
/// ```no_run
/// use std::sync::Arc;
/// use svc_tls::files::{FileLayout, MountedFiles};
/// use svc_tls::identity::{FileIdentitySource, IdentitySource};
///
/// let files = MountedFiles::open("/var/run/secrets/svid", FileLayout::SpiffeHelper)?;
/// let source = FileIdentitySource::new(files);
/// println!("{}", source.origin());
/// # Ok::<_, svc_tls::files::FileError>(())
/// ```
pub struct FileIdentitySource {
    origin: IdentityOrigin,
    files: MountedFiles,
}

impl FileIdentitySource {
    /// The identity in `files`.
    pub fn new(files: MountedFiles) -> Self {
        Self {
            origin: IdentityOrigin::Files {
                dir: files.dir().display().to_string(),
                layout: files.layout().name(),
            },
            files,
        }
    }

    /// The directory followed.
    pub fn files(&self) -> &MountedFiles {
        &self.files
    }

    fn read(&self, check_time: bool) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        let snapshot = self.files.snapshot();
        let identity = snapshot
            .identity
            .as_ref()
            .map_err(|e| IdentityReloadError::Unavailable(Box::new(e.clone())))?;
        let now = SystemTime::now();
        if check_time && !valid_at(identity, now) {
            let certificate = self
                .files
                .dir()
                .join(self.files.layout().certificate_file().unwrap_or_default());
            return Err(IdentityReloadError::OutsideValidity {
                validity: CertificateValidity::of(identity, now),
                source: Box::new(FileError::OutsideValidity {
                    certificate,
                    not_before: time_text(identity.not_before()),
                    not_after: time_text(identity.not_after()),
                }),
            });
        }
        Ok((identity.clone(), Some(snapshot.generation)))
    }
}

impl fmt::Debug for FileIdentitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileIdentitySource")
            .field("origin", &self.origin)
            .field("files", &self.files)
            .finish()
    }
}

impl IdentitySource for FileIdentitySource {
    fn origin(&self) -> &IdentityOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Identity, IdentityReloadError> {
        self.read(true).map(|(identity, _)| identity)
    }

    fn current_versioned(&self) -> Result<(Identity, Option<u64>), IdentityReloadError> {
        self.read(true)
    }

    fn current_ignoring_validity(&self) -> Result<Identity, IdentityReloadError> {
        self.read(false).map(|(identity, _)| identity)
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.files.health())
    }

    fn provider(&self) -> Option<&Arc<CryptoProvider>> {
        Some(self.files.provider())
    }
}

impl IdentityResolver {
    /// A resolver over the identity in `files`, with the default settings and no
    /// recorder, reloaded whenever the directory's watcher publishes a change (so its
    /// state, metrics and the pooled connections that follow it move without waiting
    /// for a handshake). The files must hold a usable identity now (one outside its
    /// validity period is served and reported).
    ///
    /// ```no_run
    /// use svc_tls::files::{FileLayout, MountedFiles};
    /// use svc_tls::identity::IdentityResolver;
    /// use svc_tls::serving::ServerTls;
    /// # fn callers() -> svc_tls::trust::TrustVerifier { unimplemented!() }
    ///
    /// // A server certificate from cert-manager's csi-driver volume.
    /// let files = MountedFiles::open("/tls", FileLayout::CsiDriver)?;
    /// let identity = IdentityResolver::from_files(&files)?;
    /// let tls = ServerTls::builder(identity).callers(callers()).build()?;
    /// # let _ = tls; Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`IdentityError::Unusable`] when the files hold no usable identity now.
    pub fn from_files(files: &MountedFiles) -> Result<Self, IdentityError> {
        Self::from_files_with(files, &IdentitySettings::default(), Arc::new(NoopRecorder))
    }

    /// [`IdentityResolver::from_files`] with `settings` and `recorder`.
    ///
    /// # Errors
    /// As [`IdentityResolver::from_files`].
    pub fn from_files_with(
        files: &MountedFiles,
        settings: &IdentitySettings,
        recorder: Arc<dyn ReloadRecorder<IdentityOrigin, Identity>>,
    ) -> Result<Self, IdentityError> {
        let source = Arc::new(FileIdentitySource::new(files.clone()));
        let resolver = Self::build_over_source(source, |builder| {
            builder.settings(settings.clone()).recorder(recorder)
        })?;
        files.follow(resolver.follower());
        Ok(resolver)
    }
}
