//! The states, read at scrape time from the tracked resolvers' and verifiers'
//! [`state`](crate::IdentityResolver::state) snapshots and from the watched Secrets of
//! the registries the metrics are installed into. Nothing here runs on the handshake
//! path.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `svc_tls_identity_cert_expiration_timestamp_seconds` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_identity_cert_not_before_timestamp_seconds` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_identity_cert_refresh_timestamp_seconds` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_identity_state` | gauge (1 for the current state, 0 for the others) | `source`, `name`, `cluster`, `state` (`fresh`, `stale`, `expired`, `not_yet_valid`) |
//! | `svc_tls_identity_stale_seconds` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_identity_source_healthy` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_trust_roots_expiration_timestamp_seconds` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_trust_roots` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_trust_last_change_timestamp_seconds` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_trust_stale` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_trust_source_healthy` | gauge | `source`, `name`, `cluster` |
//! | `svc_tls_secret_watch_healthy` | gauge | `secret`, `cluster` |
//! | `svc_tls_registry_entries` | gauge | `kind` (`secret`, `configmap`, `cluster_trust_bundle_set`, `api_client`, `peer_pool`) |
//! | `svc_tls_secret_watch_errors_total` | counter | `secret`, `cluster` |
//! | `svc_tls_secret_watch_relists_total` | counter | `secret`, `cluster` |
//! | `svc_tls_secret_watch_ignored_objects_total` | counter | `secret`, `cluster` |
//! | `svc_tls_secret_watch_over_limit_total` | counter | `secret`, `cluster` |
//! | `svc_tls_secret_watch_coalesced_total` | counter | `secret`, `cluster` |
//! | `svc_tls_trust_secret_private_key_dropped` | gauge (1 when it held one) | `secret`, `cluster` |
//! | `svc_tls_trust_secret_ca_crt_private_keys_dropped_total` | counter (versions whose `ca.crt` embedded a private key, dropped before caching) | `secret`, `cluster` |
//! | `svc_tls_principal_receiving_mode` | gauge (receivers acting in each mode now) | `mode` (`strict`, `go-compatible`) |
//!
//! Every `cluster` value is one cluster's ([`ClusterId::metric_label`](cluster_id::ClusterId::metric_label)),
//! so no two clusters' values share a series. One Secret of one cluster watched
//! under two credentials (two shared watches) is one series: its errors and relists
//! are summed, it is healthy only while every one of its watches is, and a key
//! dropped by any of them shows.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, PoisonError, Weak};
use std::time::SystemTime;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use super::{install::LabelSet, install::Shared, install::cluster_label, install::unix_seconds};
use crate::material::CertificateValidity;

/// The values of the `state` label of `svc_tls_identity_state`.
pub const IDENTITY_STATES: [&str; 4] = ["fresh", "stale", "expired", "not_yet_valid"];

/// Reads the states at scrape time.
pub(crate) struct StateCollector {
    shared: Weak<Shared>,
}

impl fmt::Debug for StateCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateCollector").finish_non_exhaustive()
    }
}

impl StateCollector {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        Self {
            shared: Arc::downgrade(shared),
        }
    }
}

type Gauges = Family<LabelSet, Gauge>;
type Counters = Family<LabelSet, Counter>;

fn emit<M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    family: &Family<LabelSet, M>,
) -> Result<(), fmt::Error> {
    family.encode(encoder.encode_descriptor(name, help, unit, M::TYPE)?)
}

fn set(family: &Gauges, labels: &LabelSet, value: i64) {
    family.get_or_create(labels).set(value);
}

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(shared) = self.shared.upgrade() else {
            return Ok(());
        };
        let (identities, trusts, watches, receivers) = {
            let mut tracked = shared
                .tracked
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // What no longer lives is no longer exported (and forgotten).
            tracked
                .identities
                .retain(|_, weak| weak.upgrade().is_some());
            tracked.trusts.retain(|_, weak| weak.upgrade().is_some());
            (
                tracked
                    .identities
                    .iter()
                    .filter_map(|(labels, weak)| Some((labels.clone(), weak.upgrade()?)))
                    .collect::<Vec<_>>(),
                tracked
                    .trusts
                    .iter()
                    .filter_map(|(labels, weak)| Some((labels.clone(), weak.upgrade()?)))
                    .collect::<Vec<_>>(),
                tracked.watches.clone(),
                {
                    tracked.receivers.retain(|weak| weak.strong_count() > 0);
                    tracked
                        .receivers
                        .iter()
                        .filter_map(Weak::upgrade)
                        .collect::<Vec<_>>()
                },
            )
        };
        let now = SystemTime::now();
        let seconds = Some(&Unit::Seconds);

        let (expiry, not_before, refresh, state, stale_age, healthy) = (
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
        );
        for (labels, resolver) in &identities {
            let snapshot = resolver.state();
            let set_labels = labels.set();
            set(&expiry, &set_labels, unix_seconds(snapshot.not_after));
            let served = resolver.current();
            set(&not_before, &set_labels, unix_seconds(served.not_before()));
            set(
                &refresh,
                &set_labels,
                unix_seconds(snapshot.last_good_reload),
            );
            let current = match snapshot.validity {
                CertificateValidity::Expired { .. } => "expired",
                CertificateValidity::NotYetValid { .. } => "not_yet_valid",
                _ if snapshot.stale => "stale",
                _ => "fresh",
            };
            for name in IDENTITY_STATES {
                set(
                    &state,
                    &labels.with("state", name),
                    i64::from(name == current),
                );
            }
            let age = if snapshot.stale {
                now.duration_since(snapshot.last_good_reload)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            } else {
                0
            };
            set(&stale_age, &set_labels, age);
            if let Some(watch) = &snapshot.watch {
                set(&healthy, &set_labels, i64::from(watch.connected));
            }
        }
        emit(
            &mut encoder,
            "svc_tls_identity_cert_expiration_timestamp",
            "When the client certificate served expires (notAfter, Unix time)",
            seconds,
            &expiry,
        )?;
        emit(
            &mut encoder,
            "svc_tls_identity_cert_not_before_timestamp",
            "When the client certificate served became valid (notBefore, Unix time)",
            seconds,
            &not_before,
        )?;
        emit(
            &mut encoder,
            "svc_tls_identity_cert_refresh_timestamp",
            "When the identity served was loaded (the last successful refresh, Unix time)",
            seconds,
            &refresh,
        )?;
        emit(
            &mut encoder,
            "svc_tls_identity_state",
            "The identity's state: 1 for the current one of fresh, stale (the last reload failed; the last good identity is served), expired, not_yet_valid",
            None,
            &state,
        )?;
        emit(
            &mut encoder,
            "svc_tls_identity_stale",
            "How long the identity served has been stale (since its load, while reloads fail; 0 when fresh)",
            seconds,
            &stale_age,
        )?;
        emit(
            &mut encoder,
            "svc_tls_identity_source_healthy",
            "Whether the identity source's watch or stream receives changes (1) or not (0)",
            None,
            &healthy,
        )?;

        let (roots_expiry, roots, changed, stale, healthy) = (
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
            Gauges::default(),
        );
        for (labels, verifier) in &trusts {
            let snapshot = verifier.state();
            let labels = labels.set();
            if let Some(not_after) = snapshot.not_after {
                set(&roots_expiry, &labels, unix_seconds(not_after));
            }
            set(
                &roots,
                &labels,
                i64::try_from(snapshot.roots).unwrap_or(i64::MAX),
            );
            set(&changed, &labels, unix_seconds(snapshot.last_good_reload));
            set(&stale, &labels, i64::from(snapshot.stale));
            if let Some(watch) = &snapshot.watch {
                set(&healthy, &labels, i64::from(watch.connected));
            }
        }
        emit(
            &mut encoder,
            "svc_tls_trust_roots_expiration_timestamp",
            "The earliest notAfter among the trusted roots used (Unix time)",
            seconds,
            &roots_expiry,
        )?;
        emit(
            &mut encoder,
            "svc_tls_trust_roots",
            "How many roots are trusted (the last good set)",
            None,
            &roots,
        )?;
        emit(
            &mut encoder,
            "svc_tls_trust_last_change_timestamp",
            "When the root set used was loaded (Unix time)",
            seconds,
            &changed,
        )?;
        emit(
            &mut encoder,
            "svc_tls_trust_stale",
            "Whether the last trust reload failed (1: the last good roots are used)",
            None,
            &stale,
        )?;
        emit(
            &mut encoder,
            "svc_tls_trust_source_healthy",
            "Whether the trust source's watch or stream receives changes (1) or not (0)",
            None,
            &healthy,
        )?;

        let (watch_healthy, errors, relists, key_dropped, ca_crt_keys) = (
            Gauges::default(),
            Counters::default(),
            Counters::default(),
            Gauges::default(),
            Counters::default(),
        );
        let (ignored, over_limit, coalesced) = (
            Counters::default(),
            Counters::default(),
            Counters::default(),
        );
        // Healthy while every watch of the series is (see the module documentation).
        let mut connected = BTreeMap::<LabelSet, bool>::new();
        for watches in watches.iter().filter_map(|w| w.upgrade()) {
            for secret in watches.shared_secrets() {
                let labels = vec![
                    ("secret", secret.secret_ref().to_string()),
                    ("cluster", cluster_label(Some(secret.cluster()))),
                ];
                let source = secret.source();
                let health = source.watch_health();
                errors.get_or_create(&labels).inc_by(health.errors);
                relists.get_or_create(&labels).inc_by(source.relists());
                let status = source.watch_status();
                ignored
                    .get_or_create(&labels)
                    .inc_by(status.foreign_ignored);
                over_limit.get_or_create(&labels).inc_by(status.over_limit);
                coalesced.get_or_create(&labels).inc_by(status.coalesced);
                if source.dropped_private_key() {
                    set(&key_dropped, &labels, 1);
                }
                let in_ca_crt = source.ca_crt_private_keys_dropped();
                if in_ca_crt > 0 {
                    ca_crt_keys.get_or_create(&labels).inc_by(in_ca_crt);
                }
                *connected.entry(labels).or_insert(true) &= health.connected;
            }
        }
        for (labels, connected) in &connected {
            set(&watch_healthy, labels, i64::from(*connected));
        }
        emit(
            &mut encoder,
            "svc_tls_secret_watch_healthy",
            "Whether the watch of a Secret is synced and receiving changes (1) or failing (0; the last state seen is served)",
            None,
            &watch_healthy,
        )?;
        emit(
            &mut encoder,
            "svc_tls_secret_watch_errors",
            "Errors of the watch of a Secret (each one restarts the watch with backoff), 410 relists included",
            None,
            &errors,
        )?;
        emit(
            &mut encoder,
            "svc_tls_secret_watch_relists",
            "Relists of the watch of a Secret after a 410 Gone (routine: the API server compacted the resourceVersion)",
            None,
            &relists,
        )?;
        emit(
            &mut encoder,
            "svc_tls_secret_watch_ignored_objects",
            "Objects the API server sent to the watch of a Secret that are not that Secret (another name or namespace): ignored, never cached",
            None,
            &ignored,
        )?;
        emit(
            &mut encoder,
            "svc_tls_secret_watch_over_limit",
            "Versions of a Secret, LIST bodies and WATCH events refused by a cap of the watch (object size, object count, body size): the last good version is kept",
            None,
            &over_limit,
        )?;
        emit(
            &mut encoder,
            "svc_tls_secret_watch_coalesced",
            "Versions of a Secret never applied because a newer one replaced them within the coalescing interval",
            None,
            &coalesced,
        )?;
        emit(
            &mut encoder,
            "svc_tls_trust_secret_private_key_dropped",
            "1 when a Secret read only as a CA held a private key (tls.key), dropped before caching: give the service a ca.crt-only Secret or ConfigMap",
            None,
            &key_dropped,
        )?;
        emit(
            &mut encoder,
            "svc_tls_trust_secret_ca_crt_private_keys_dropped",
            "Versions of a Secret read only as a CA whose ca.crt embedded a private key (a PEM PRIVATE KEY block), dropped before caching (its certificates kept)",
            None,
            &ca_crt_keys,
        )?;

        // The mode each tracked receiver acts in now: a compatibility mode past its
        // end counts as strict.
        let modes = Gauges::default();
        for mode in [
            crate::principal::ingress::ReceivingMode::Strict,
            crate::principal::ingress::ReceivingMode::GoCompatible,
        ] {
            let count = receivers
                .iter()
                .filter(|receiver| receiver.in_force(now) == mode)
                .count();
            set(
                &modes,
                &vec![("mode", mode.as_str().to_owned())],
                i64::try_from(count).unwrap_or(i64::MAX),
            );
        }
        emit(
            &mut encoder,
            "svc_tls_principal_receiving_mode",
            "Principal receivers acting in each mode now (strict, go-compatible); a go-compatible receiver past its end date counts as strict",
            None,
            &modes,
        )?;

        // The registry's size: entries per kind, API clients and shared pools, each
        // evicted once unused for the grace.
        let entries = Gauges::default();
        let mut totals = crate::watch::RegistryCounts::default();
        for watches in watches.iter().filter_map(|w| w.upgrade()) {
            let counts = watches.counts();
            totals.secrets += counts.secrets;
            totals.configmaps += counts.configmaps;
            totals.cluster_trust_bundles += counts.cluster_trust_bundles;
            totals.kube_clients += counts.kube_clients;
            totals.shared_values += counts.shared_values;
        }
        for (kind, count) in [
            ("secret", totals.secrets),
            ("configmap", totals.configmaps),
            ("cluster_trust_bundle_set", totals.cluster_trust_bundles),
            ("api_client", totals.kube_clients),
            ("peer_pool", totals.shared_values),
        ] {
            set(
                &entries,
                &vec![("kind", kind.to_owned())],
                i64::try_from(count).unwrap_or(i64::MAX),
            );
        }
        emit(
            &mut encoder,
            "svc_tls_registry_entries",
            "What the registry of shared watches holds now, by kind: watched Secrets and ConfigMaps (per cluster, credential and use), watched sets of ClusterTrustBundles (per cluster, credential, signer and selector), API clients (per cluster and credential) and shared peer pools",
            None,
            &entries,
        )?;
        Ok(())
    }
}
