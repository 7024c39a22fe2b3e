//! What an operator changes on the server: the workload's registration entry, the
//! federated bundles it federates with, minted SVIDs, the trust domain's bundle. Each
//! change returns once the agent serves it (the agent syncs every second).

use std::collections::BTreeSet;
use std::time::Duration;

use rustls_pki_types::CertificateDer;

use crate::cli::{certificates, pem};
use crate::{Minted, Spire, SpireError, served, write};

/// How long a change may take to reach the Workload API.
const SERVED_TIMEOUT: Duration = Duration::from_secs(30);

/// The entry's ID: one workload entry per instance, created on the first
/// registration and updated after that.
const ENTRY_ID: &str = "real-spire-workload";

/// The workload's registration entry as last written.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    pub(crate) spiffe_id: Option<String>,
    pub(crate) federates_with: BTreeSet<String>,
}

impl Spire {
    fn entry(&self) -> Entry {
        self.entry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Writes `entry` (create the first time, update after).
    async fn write_entry(&self, entry: Entry) -> Result<(), SpireError> {
        let existing = self.entry().spiffe_id.is_some();
        let Some(spiffe_id) = entry.spiffe_id.clone() else {
            return Ok(());
        };
        let selector = format!("unix:uid:{}", self.uid);
        let ttl = self.options.svid_ttl.as_secs().max(1).to_string();
        let mut args = vec![
            "entry",
            if existing { "update" } else { "create" },
            "-entryID",
            ENTRY_ID,
            "-parentID",
            &self.agent_id,
            "-spiffeID",
            &spiffe_id,
            "-selector",
            &selector,
            "-x509SVIDTTL",
            &ttl,
        ];
        let federated: Vec<String> = entry
            .federates_with
            .iter()
            .map(|td| format!("spiffe://{td}"))
            .collect();
        for td in &federated {
            args.extend(["-federatesWith", td]);
        }
        self.cli.run(&args).await?;
        *self
            .entry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = entry;
        Ok(())
    }

    /// Registers this process as `spiffe_id` (the entry is created, or updated to the
    /// new ID) and waits until the agent serves that SVID.
    ///
    /// # Errors
    /// The command fails or the SVID is not served in time.
    pub async fn register(&self, spiffe_id: &str) -> Result<(), SpireError> {
        let mut entry = self.entry();
        entry.spiffe_id = Some(spiffe_id.to_owned());
        self.write_entry(entry).await?;
        self.await_svid().await
    }

    /// Waits until the agent serves the registered SVID.
    pub(crate) async fn await_svid(&self) -> Result<(), SpireError> {
        let Some(id) = self.entry().spiffe_id else {
            return Ok(());
        };
        served::until(
            &self.endpoint(),
            &format!("an X509-SVID for {id}"),
            SERVED_TIMEOUT,
            |context| {
                context
                    .default_svid()
                    .is_some_and(|svid| svid.spiffe_id().to_string() == id)
            },
        )
        .await
    }

    /// The trust domain's bundle as the server has it (`spire-server bundle show`).
    ///
    /// # Errors
    /// The command fails.
    pub async fn bundle(&self) -> Result<Vec<CertificateDer<'static>>, SpireError> {
        let path = self.dir.join(format!("bundle-{}.pem", next_suffix()));
        self.cli.bundle(&path).await
    }

    /// A certificate and key for `spiffe_id` (URI SAN) and `localhost` (DNS SAN) from
    /// the server's CA, valid for an hour (`spire-server x509 mint`).
    ///
    /// # Errors
    /// The command fails or writes no usable PEM.
    pub async fn mint(&self, spiffe_id: &str) -> Result<Minted, SpireError> {
        let out = self.dir.join(format!("minted-{}", next_suffix()));
        std::fs::create_dir_all(&out).map_err(|e| SpireError::Io(out.clone(), e))?;
        let out_arg = out.display().to_string();
        self.cli
            .run(&[
                "x509",
                "mint",
                "-spiffeID",
                spiffe_id,
                "-ttl",
                "1h",
                "-dns",
                "localhost",
                "-write",
                &out_arg,
            ])
            .await?;
        let key_path = out.join("key.pem");
        let key_pem =
            std::fs::read_to_string(&key_path).map_err(|e| SpireError::Io(key_path, e))?;
        Ok(Minted {
            chain: certificates(&out.join("svid.pem"))?,
            key_pem,
        })
    }

    /// Federates the workload with `trust_domain`: its bundle (`cas`) is set on the
    /// server (`bundle set`) and the entry lists the domain in `federatesWith`.
    /// Returns once the agent serves that bundle.
    ///
    /// # Errors
    /// A command fails or the bundle is not served in time.
    pub async fn federate(
        &self,
        trust_domain: &str,
        cas: &[CertificateDer<'static>],
    ) -> Result<(), SpireError> {
        let td = served::bare(trust_domain).to_owned();
        let path = write(
            self.dir
                .join(format!("federated-{td}-{}.pem", next_suffix())),
            &pem(cas),
        )?;
        let id = format!("spiffe://{td}");
        let path_arg = path.display().to_string();
        self.cli
            .run(&["bundle", "set", "-id", &id, "-path", &path_arg])
            .await?;
        let mut entry = self.entry();
        entry.federates_with.insert(td.clone());
        self.write_entry(entry).await?;
        let want: Vec<Vec<u8>> = cas.iter().map(|c| c.as_ref().to_vec()).collect();
        served::until(
            &self.endpoint(),
            &format!("the federated bundle of {td}"),
            SERVED_TIMEOUT,
            |context| served::bundle_of(context, &td).is_some_and(|got| got == want),
        )
        .await
    }

    /// De-federates: `trust_domain`'s bundle is deleted from the server
    /// (`bundle delete -mode dissociate`, which also drops it from the entry).
    /// Returns once the agent no longer serves it.
    ///
    /// # Errors
    /// The command fails or the bundle is still served after the timeout.
    pub async fn defederate(&self, trust_domain: &str) -> Result<(), SpireError> {
        let td = served::bare(trust_domain).to_owned();
        let id = format!("spiffe://{td}");
        self.cli
            .run(&["bundle", "delete", "-id", &id, "-mode", "dissociate"])
            .await?;
        self.entry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .federates_with
            .remove(&td);
        served::until(
            &self.endpoint(),
            &format!("no bundle of {td}"),
            SERVED_TIMEOUT,
            |context| served::bundle_of(context, &td).is_none(),
        )
        .await
    }
}

/// A distinct file name part (several calls in one test).
fn next_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
