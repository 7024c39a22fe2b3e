//! The roots in a mounted directory's CA bundle file: the file adapter of the trust
//! seam, over a [`MountedFiles`] snapshot. A service trusting a CA this way reads no
//! Secret and needs no RBAC.

use std::fmt;
use std::sync::Arc;

use super::authorization::ServerAuthorization;
use super::error::TrustError;
use super::settings::TrustSettings;
use super::source::{TrustReloadError, TrustSource};
use super::verifier::TrustVerifier;
use crate::files::MountedFiles;
use crate::last_good::{NoopRecorder, ReloadRecorder};
use crate::material::TrustAnchors;
use crate::origin::{SourceHealth, TrustOrigin};

/// The roots in a mounted directory's CA bundle ([`MountedFiles`], the layout's CA
/// file: `ca.crt`, `svid_bundle.pem`, a projected ClusterTrustBundle's file), as the
/// verifier's trust source. A pointer load per handshake; the same `Arc` while the
/// bundle's bytes are unchanged, so the verifier rebuilds nothing. A deleted or
/// unusable bundle leaves the last good roots in use (the verifier's bound for a
/// source gone applies).
///
/// ```no_run
/// use svc_tls::files::{FileLayout, MountedFiles};
/// use svc_tls::trust::{FileTrustSource, TrustSource};
///
/// let files = MountedFiles::open("/var/run/trust", FileLayout::ca_bundle("ca.crt"))?;
/// println!("{}", FileTrustSource::new(files).origin());
/// # Ok::<_, svc_tls::files::FileError>(())
/// ```
pub struct FileTrustSource {
    origin: TrustOrigin,
    files: MountedFiles,
}

impl FileTrustSource {
    /// The roots in `files`' CA bundle.
    pub fn new(files: MountedFiles) -> Self {
        let path = files
            .dir()
            .join(files.layout().ca_file().unwrap_or_default());
        Self {
            origin: TrustOrigin::File {
                path: path.display().to_string(),
            },
            files,
        }
    }

    /// The directory followed.
    pub fn files(&self) -> &MountedFiles {
        &self.files
    }
}

impl fmt::Debug for FileTrustSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileTrustSource")
            .field("origin", &self.origin)
            .field("files", &self.files)
            .finish()
    }
}

impl TrustSource for FileTrustSource {
    fn origin(&self) -> &TrustOrigin {
        &self.origin
    }

    fn current(&self) -> Result<Arc<TrustAnchors>, TrustReloadError> {
        self.current_versioned().map(|(anchors, _)| anchors)
    }

    fn current_versioned(&self) -> Result<(Arc<TrustAnchors>, Option<u64>), TrustReloadError> {
        let snapshot = self.files.snapshot();
        match &snapshot.trust {
            Ok(anchors) => Ok((anchors.clone(), Some(snapshot.generation))),
            Err(e) => Err(TrustReloadError::Unavailable(Box::new(e.clone()))),
        }
    }

    fn health(&self) -> Option<SourceHealth> {
        Some(self.files.health())
    }
}

impl TrustVerifier {
    /// A verifier over the CA bundle in `files`, authorizing servers as
    /// `authorization` says, with the default settings and no recorder; reloaded
    /// whenever the directory's watcher publishes a change. The bundle must hold a
    /// usable root now.
    ///
    /// ```no_run
    /// use svc_tls::files::{FileLayout, MountedFiles};
    /// use svc_tls::trust::{ServerAuthorization, TrustVerifier};
    ///
    /// let files = MountedFiles::open("/var/run/secrets/tls", FileLayout::KubernetesTls)?;
    /// let trust = TrustVerifier::from_files(&files, ServerAuthorization::HostName)?;
    /// # let _ = trust; Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`TrustError`] when the bundle holds no usable root now.
    pub fn from_files(
        files: &MountedFiles,
        authorization: ServerAuthorization,
    ) -> Result<Self, TrustError> {
        Self::from_files_with(
            files,
            authorization,
            &TrustSettings::default(),
            Arc::new(NoopRecorder),
        )
    }

    /// [`TrustVerifier::from_files`] with `settings` and `recorder`.
    ///
    /// # Errors
    /// As [`TrustVerifier::from_files`].
    pub fn from_files_with(
        files: &MountedFiles,
        authorization: ServerAuthorization,
        settings: &TrustSettings,
        recorder: Arc<dyn ReloadRecorder<TrustOrigin, TrustAnchors>>,
    ) -> Result<Self, TrustError> {
        let source = Arc::new(FileTrustSource::new(files.clone()));
        let verifier = Self::build_over_source(source, authorization, |builder| {
            builder
                .settings(settings.clone())
                .provider(files.provider().clone())
                .recorder(recorder)
        })?;
        files.follow(verifier.follower());
        Ok(verifier)
    }
}
