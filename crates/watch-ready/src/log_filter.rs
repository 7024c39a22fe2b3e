//! [`RawBodyFilter`]: keeps kube-client's log lines that print an API server's raw
//! response body out of the log.
//!
//! kube-client 5 logs a body it could not decode whole and unescaped:
//! `Client::request` and `Client::request_status` write
//! `tracing::warn!("{}, {:?}", text, e)` (and `request_status` a TRACE line
//! `"Status from {}"`), all under the target `kube_client::client`. A hostile or
//! broken API server controls that text: newlines that forge log records, ANSI and
//! bidi escapes that rewrite a terminal, megabytes per line. The watch layer already
//! reports such a failure itself, escaped and cut (the watch's health and its
//! `last_error`), so the raw lines add nothing but risk.
//!
//! Apply [`RawBodyFilter`] to the layer that writes the log, or, with an `EnvFilter`,
//! the directive [`RAW_BODY_DIRECTIVE`] (an `EnvFilter` target matches by prefix, so
//! the directive also silences `kube_client::client::*`: kube's connection builder's
//! ERROR lines; the filter matches the one target exactly).
//!
//! ```
//! use tracing_subscriber::prelude::*;
//!
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer().with_filter(watch_ready::RawBodyFilter));
//! # drop(subscriber);
//! ```

use tracing::Metadata;
use tracing::subscriber::Interest;
use tracing_subscriber::layer::{Context, Filter};

/// The `tracing` target of kube-client's lines that print a raw response body.
pub const KUBE_CLIENT_RAW_BODY_TARGET: &str = "kube_client::client";

/// The `EnvFilter` directive that turns those lines off (with the rest of
/// `kube_client::client::*`).
pub const RAW_BODY_DIRECTIVE: &str = "kube_client::client=off";

/// A per-layer `tracing` filter that drops every event of
/// [`KUBE_CLIENT_RAW_BODY_TARGET`] (exactly that target) and lets everything else
/// through. kube-client 5 logs a body it could not decode whole and unescaped
/// (`tracing::warn!("{}, {:?}", text, e)` in `Client::request`), text a hostile API
/// server controls; the watch layer reports such a failure itself, escaped and cut.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawBodyFilter;

impl RawBodyFilter {
    fn keeps(metadata: &Metadata<'_>) -> bool {
        metadata.target() != KUBE_CLIENT_RAW_BODY_TARGET
    }
}

impl<S> Filter<S> for RawBodyFilter {
    fn enabled(&self, metadata: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::keeps(metadata)
    }

    fn callsite_enabled(&self, metadata: &'static Metadata<'static>) -> Interest {
        if Self::keeps(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
}
