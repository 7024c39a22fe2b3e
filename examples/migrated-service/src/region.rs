//! The region service, through its generated client (`region-api`, progenitor's
//! output over svc-tls's pooled peer client): built once at start-up when
//! `--region-host` is set, then called every round. Its connections follow identity
//! and CA rotations, and each request carries a principal signed for its URL.

use std::time::Duration;

use clap::{Arg, ArgMatches, Command};
use platform_client_compat::tls::ClusterClient;
use platform_client_compat::tls::client::PeerTls;
use platform_client_compat::tls::options::{ClientIdentityOptions, PeerOptions};
use platform_client_compat::tls::principal::Principal;

use crate::Error;

/// `--organization-id`: the organization whose regions are listed.
pub(crate) fn augment(cmd: Command) -> Command {
    cmd.arg(
        Arg::new("organization-id")
            .long("organization-id")
            .default_value("platform")
            .overrides_with("organization-id")
            .help("The organization whose regions are listed from the region service (with --region-host)"),
    )
}

/// `--organization-id`.
pub(crate) fn organization(matches: &ArgMatches) -> String {
    matches
        .get_one::<String>("organization-id")
        .cloned()
        .unwrap_or_default()
}

/// The generated client over the region peer, when `--region-host` is set.
pub(crate) async fn connect(
    cluster: &ClusterClient,
    peer: &PeerOptions,
    me: &ClientIdentityOptions,
    principal: Principal,
    sync_timeout: Duration,
) -> Result<Option<region_api::Client>, Error> {
    if !peer.is_configured() {
        return Ok(None);
    }
    let tls = PeerTls::from_options(cluster, peer, me, sync_timeout).await?;
    Ok(Some(region_api::connect(&tls, move || principal.clone())?))
}

/// One `listRegions` call: prints the regions, or why the call failed (the service
/// goes on, as a controller's next reconcile would).
pub(crate) async fn list(client: &region_api::Client, organization: &str) {
    match client
        .list_regions()
        .organization_id(organization)
        .send()
        .await
    {
        Ok(regions) => {
            let names: Vec<&str> = regions.iter().map(|r| r.metadata.name.as_str()).collect();
            println!("region: {} regions: {}", names.len(), names.join(", "));
        }
        Err(e) => println!(
            "region: listRegions failed: {}",
            platform_client_compat::tls::excerpt::chain(&e)
        ),
    }
}
