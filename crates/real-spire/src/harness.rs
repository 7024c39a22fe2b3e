//! One test body, two Workload APIs: what a SPIFFE test needs of either the emulator
//! (`spiffe_testbed::WorkloadApi`) or a real [`Spire`], so a suite runs the same
//! assertions against both.
//!
//! Where the two cannot be driven the same way, the method says what each does:
//! the emulator rotates an SVID on cue and pushes every change at once, while SPIRE
//! renews an SVID by itself once half its lifetime has passed and delivers entry and
//! bundle changes at the agent's next sync (every second here).
#![allow(clippy::expect_used)] // test support: a failed set-up is a broken test

use std::future::Future;
use std::time::Duration;

use rustls_pki_types::CertificateDer;

use crate::{Minted, Spire};

/// A SPIFFE Workload API a test runs against, with the control plane behind it.
pub trait WorkloadApiUnderTest: Sync {
    /// "spiffe-testbed" or "SPIRE v1.13.3": for failure messages.
    fn name(&self) -> String;
    /// The Workload API address (`unix:/...`).
    fn endpoint(&self) -> String;
    /// How long a change (rotation, federation, an agent back) may take to reach a
    /// client's stream.
    fn propagation(&self) -> Duration;
    /// The trust domain's own bundle.
    fn bundle(&self) -> impl Future<Output = Vec<CertificateDer<'static>>> + Send;
    /// A server certificate and key for `spiffe_id` from the trust domain's CA.
    fn mint(&self, spiffe_id: &str) -> impl Future<Output = Minted> + Send;
    /// Brings about the workload's next SVID: the emulator issues and pushes it now;
    /// SPIRE renews it by itself at half its lifetime, so nothing is done. Either way
    /// the caller then waits up to [`propagation`](Self::propagation) for it.
    fn rotate(&self);
    /// Federates the workload with `trust_domain` (its bundle `cas` is served).
    fn federate(
        &self,
        trust_domain: &str,
        cas: Vec<CertificateDer<'static>>,
    ) -> impl Future<Output = ()> + Send;
    /// De-federates: `trust_domain`'s bundle is no longer served.
    fn defederate(&self, trust_domain: &str) -> impl Future<Output = ()> + Send;
    /// Stops the agent (its socket goes, its streams end).
    fn stop_agent(&self) -> impl Future<Output = ()> + Send;
    /// Starts the stopped agent again on the same socket.
    fn start_agent(&self) -> impl Future<Output = ()> + Send;
    /// Breaks the open streams abruptly and serves again: the emulator ends them
    /// with `Unavailable` on live connections; SPIRE's agent is killed (SIGKILL) and
    /// started again.
    fn lose_streams(&self) -> impl Future<Output = ()> + Send;
}

impl WorkloadApiUnderTest for spiffe_testbed::WorkloadApi {
    fn name(&self) -> String {
        "spiffe-testbed".to_owned()
    }

    fn endpoint(&self) -> String {
        spiffe_testbed::WorkloadApi::endpoint(self)
    }

    fn propagation(&self) -> Duration {
        Duration::from_secs(10)
    }

    async fn bundle(&self) -> Vec<CertificateDer<'static>> {
        spiffe_testbed::WorkloadApi::bundle(self)
    }

    async fn mint(&self, spiffe_id: &str) -> Minted {
        let svid = self.issue(spiffe_id);
        Minted {
            key_pem: svid.key_pem(),
            chain: svid.chain,
        }
    }

    fn rotate(&self) {
        self.rotate_svid();
    }

    async fn federate(&self, trust_domain: &str, cas: Vec<CertificateDer<'static>>) {
        self.set_federated_bundle(trust_domain, cas);
    }

    async fn defederate(&self, trust_domain: &str) {
        self.set_federated_bundle(trust_domain, Vec::new());
    }

    async fn stop_agent(&self) {
        self.stop().await;
    }

    async fn start_agent(&self) {
        self.resume().await;
    }

    async fn lose_streams(&self) {
        self.drop_streams();
    }
}

impl WorkloadApiUnderTest for Spire {
    fn name(&self) -> String {
        format!("SPIRE {}", crate::spire_version())
    }

    fn endpoint(&self) -> String {
        Spire::endpoint(self)
    }

    fn propagation(&self) -> Duration {
        // A renewal is due at half the lifetime and made at the next sync; the rest
        // of the lifetime is slack for a loaded machine.
        self.svid_ttl() + Duration::from_secs(15)
    }

    async fn bundle(&self) -> Vec<CertificateDer<'static>> {
        Spire::bundle(self).await.expect("spire-server bundle show")
    }

    async fn mint(&self, spiffe_id: &str) -> Minted {
        Spire::mint(self, spiffe_id)
            .await
            .expect("spire-server x509 mint")
    }

    fn rotate(&self) {}

    async fn federate(&self, trust_domain: &str, cas: Vec<CertificateDer<'static>>) {
        Spire::federate(self, trust_domain, &cas)
            .await
            .expect("federated with SPIRE");
    }

    async fn defederate(&self, trust_domain: &str) {
        Spire::defederate(self, trust_domain)
            .await
            .expect("de-federated with SPIRE");
    }

    async fn stop_agent(&self) {
        Spire::stop_agent(self).await;
    }

    async fn start_agent(&self) {
        Spire::start_agent(self)
            .await
            .expect("the SPIRE agent starts again");
    }

    async fn lose_streams(&self) {
        self.kill_agent().await;
        Spire::start_agent(self)
            .await
            .expect("the SPIRE agent starts again after a kill");
    }
}
