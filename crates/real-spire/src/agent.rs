//! The agent's life: started with a join token once, then restarted from its data
//! directory (its SVID and the disk key manager's keys), stopped gracefully or killed.

use std::time::{Duration, Instant};

use test_support::supervised::Supervised;

use crate::{START_TIMEOUT, Spire, SpireError, served};

/// How long a stopped agent gets to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

impl Spire {
    /// Starts the agent (`-joinToken` on the first start only) and waits until its
    /// Workload API answers (with an SVID or with "no identity issued").
    pub(crate) async fn start_agent_with(&self, token: Option<&str>) -> Result<(), SpireError> {
        let mut args = vec![
            "run".to_owned(),
            "-config".to_owned(),
            self.agent_conf.display().to_string(),
        ];
        if let Some(token) = token {
            args.extend(["-joinToken".to_owned(), token.to_owned()]);
        }
        let agent = Supervised::start(
            "spire-agent",
            &self.agent_binary,
            &args,
            &self.dir.join("agent.log"),
            None,
        )
        .map_err(|e| SpireError::Spawn("spire-agent", e))?;
        *self.agent_slot() = Some(agent);
        let endpoint = self.endpoint();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match served::fetch(&endpoint).await {
                Ok(_) => return Ok(()),
                // The Workload API answered: the agent is up, the entry may be missing.
                Err(error)
                    if error.contains("no identity") || error.contains("PermissionDenied") =>
                {
                    return Ok(());
                }
                Err(_) => {}
            }
            self.check_running(&self.agent, "spire-agent")?;
            if Instant::now() > deadline {
                return Err(self.not_ready(&self.agent, "spire-agent"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn agent_slot(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<test_support::supervised::Supervised>> {
        self.agent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops the agent as its supervisor would (TERM, then KILL after 10 s) and waits
    /// until it has exited: its socket no longer answers.
    pub async fn stop_agent(&self) {
        let agent = self.agent_slot().take();
        if let Some(agent) = agent {
            let _ = tokio::task::spawn_blocking(move || agent.stop(STOP_GRACE)).await;
        }
    }

    /// Kills the agent at once (SIGKILL, a crash): open streams break without a
    /// goodbye.
    pub async fn kill_agent(&self) {
        let agent = self.agent_slot().take();
        if let Some(agent) = agent {
            let _ = tokio::task::spawn_blocking(move || drop(agent)).await;
        }
    }

    /// Starts the stopped (or killed) agent again from its data directory (no new
    /// attestation) and waits until it serves the workload's SVID.
    ///
    /// # Errors
    /// The agent exits or does not serve in time.
    pub async fn start_agent(&self) -> Result<(), SpireError> {
        self.start_agent_with(None).await?;
        self.await_svid().await
    }

    /// [`stop_agent`](Self::stop_agent) then [`start_agent`](Self::start_agent).
    ///
    /// # Errors
    /// As [`start_agent`](Self::start_agent).
    pub async fn restart_agent(&self) -> Result<(), SpireError> {
        self.stop_agent().await;
        self.start_agent().await
    }
}
