//! What a receiver accepts: the strict mode (signed principals bound to this
//! receiver), or the compatibility mode (also what the deployed Go senders send),
//! and the audiences a receiver must name.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::*;
use crate::last_good::{SystemClock, WarningLimiter};

/// Which principals an [`IngressVerifier`] accepts.
///
/// The deployed Go senders put in `X-Principal` either the principal's JSON,
/// base64url-encoded and **unsigned** (what most of them send), or a JWS signed
/// with their client certificate's key that carries no `iat`, `exp`, `aud` or
/// `jti`. The Go receiving middleware accepts both from a caller whose client
/// certificate the ingress verified, trying the unsigned form first. This crate's
/// senders sign every principal and bind it to its receiver (`aud`), its time
/// (`iat`, `exp`) and one use (`jti`).
///
/// | token | [`Strict`](ReceivingMode::Strict) (the default) | [`GoCompatible`](ReceivingMode::GoCompatible), before `until`, from a listed sender |
/// |---|---|---|
/// | signed, `iat`/`exp`/`aud`/`jti` for this receiver | accepted once | accepted once |
/// | signed for another audience, expired, over the lifetime cap, replayed | refused | refused |
/// | signed, no `iat`/`exp`/`aud`/`jti` (Go's signed form) | refused | accepted, counted |
/// | unsigned base64url JSON (Go's usual form) | refused ([`RequestPrincipalError::Unsigned`]) | accepted, counted and logged (at most once a minute) |
///
/// **The compatibility mode is bounded** ([`CompatibilityWindow`]): it needs an end
/// date and the senders (typed certificate names) that may still use the Go forms,
/// and refuses to build without either
/// ([`ReceiverConfigError::CompatibilityWithoutEnd`],
/// [`ReceiverConfigError::CompatibilityWithoutSenders`]) or over unverified headers
/// ([`ReceiverConfigError::CompatibilityWithUnverifiedHeaders`]). A sender not on
/// the list is judged as in the strict mode; from `until` on, every sender is, and
/// the receiver says so (one WARN at most once a minute, and the
/// `svc_tls_principal_receiving_mode` gauge, feature `metrics`).
///
/// **What the Go forms are bound to, here: nothing the caller proves.** Every form
/// needs the forwarded client certificate first
/// ([`IngressVerifier::peer_certificate`]: the ingress says it verified it, it
/// chains to the watched CA, it is on the allow-list when there is one), but that
/// certificate arrives in a request header: the caller proved no key to this
/// service. Anyone who reaches the pod other than through an `auth-tls` ingress host
/// can write the headers with a listed sender's (public) certificate and claim any
/// principal in the unsigned form; through the ingress, any holder of a listed
/// sender's key can. A Go signed token is bound to the sender's key but to no
/// receiver, time or use: captured once, it replays until `until`. The serving half
/// is different: there the caller is the certificate its own TLS connection proved
/// ([`serving::Caller`](crate::serving::Caller)), so whatever a request claims is
/// bound to that verified connection certificate (the caller holds its key);
/// [`serving::request_principal`](crate::serving::request_principal) refuses the
/// unsigned form all the same and verifies a JWS against that certificate's key
/// (Go's untimed signed form too, unless its `VerifyOptions` require times). Run
/// this mode while Go
/// senders call the service, watch the counters
/// (`svc_tls_principal_accepted_unsigned_total`,
/// `svc_tls_principal_accepted_without_times_total`,
/// `svc_tls_principal_accepted_without_audience_total`, feature `metrics`), and
/// switch to the strict mode once they stay flat (`docs/operations.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReceivingMode {
    /// Signed principals bound to this receiver only: `iat`, `exp` and an `aud`
    /// naming one of the receiver's audiences are required
    /// ([`TokenTimes::Required`]). The default.
    #[default]
    Strict,
    /// Also what the deployed Go senders send, from the senders of the
    /// receiver's [`CompatibilityWindow`] and before its end: the unsigned
    /// base64url JSON form, and signed tokens without times, audience or `jti`.
    /// Present times, audiences and `jti`s are still checked. Each such principal is counted
    /// ([`TokenRecorder::accepted_unsigned`](crate::principal::TokenRecorder::accepted_unsigned),
    /// `accepted_without_times`, `accepted_without_audience`); unsigned ones are
    /// logged at WARN at most once a minute, with the count held back.
    GoCompatible,
}

impl ReceivingMode {
    /// The mode's name: `strict` or `go-compatible`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::GoCompatible => "go-compatible",
        }
    }
}

/// `strict` or `go-compatible` (configuration text).
impl std::str::FromStr for ReceivingMode {
    type Err = ReceiverConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "strict" => Ok(Self::Strict),
            "go-compatible" => Ok(Self::GoCompatible),
            other => Err(ReceiverConfigError::UnknownMode {
                value: sender_text(other),
            }),
        }
    }
}

impl fmt::Display for ReceivingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a receiver's configuration cannot verify principals
/// ([`IngressVerifier::check_configuration`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiverConfigError {
    /// No audience and no opt-out: a receiver must say who it is, so that a
    /// principal signed for another service is not accepted here.
    #[error(
        "the receiver names no audience: give the https:// origins its senders call it at (with_audiences), or opt out explicitly (without_audience_check)"
    )]
    NoAudiences,
    /// The strict mode with the audience check opted out: the strict mode requires
    /// every token's `aud` to name this receiver, so it needs the audiences.
    #[error(
        "the strict mode checks every principal's audience, and the receiver names none: give its audiences (with_audiences)"
    )]
    StrictWithoutAudiences,
    /// The compatibility mode without the senders that may use the Go forms: it
    /// would accept an unsigned principal from any certificate the ingress accepts.
    #[error(
        "the go-compatible receiving mode names no sender allowed to send the Go forms: list them (CompatibilityWindow::new, IngressBuilder::compatible_senders; the example: --principal-compat-sender)"
    )]
    CompatibilityWithoutSenders,
    /// The compatibility mode without an end date: it must say when it stops.
    #[error(
        "the go-compatible receiving mode has no end date: give it one (CompatibilityWindow::new, IngressBuilder::compatible_until; the example: --principal-compat-until)"
    )]
    CompatibilityWithoutEnd,
    /// The compatibility mode over a forwarded certificate believed on the
    /// headers alone ([`IngressVerifier::unverified_headers_only`]): anyone could
    /// name any certificate and any principal.
    #[error(
        "the go-compatible receiving mode refuses unverified ingress headers: verify the forwarded certificate against the ingress's CA (IngressVerifier::verified)"
    )]
    CompatibilityWithUnverifiedHeaders,
    /// An end date that is neither an RFC 3339 time nor a `YYYY-MM-DD` date.
    #[error(
        "{value:?} is not an end date: expected an RFC 3339 time (2027-03-01T00:00:00Z) or a date (2027-03-01, midnight UTC)"
    )]
    InvalidUntil {
        /// The text given (cut and Debug-escaped).
        value: String,
    },
    /// A mode name that is neither `strict` nor `go-compatible`.
    #[error("{value:?} is not a receiving mode: expected strict or go-compatible")]
    UnknownMode {
        /// The text given (cut and Debug-escaped).
        value: String,
    },
}

impl ReceiverConfigError {
    /// Whether a receiver can accept any principal: `strict` (times and audience
    /// required), whether it names audiences, whether it opted out of the check.
    ///
    /// # Errors
    /// [`ReceiverConfigError::NoAudiences`] without audiences and without the
    /// opt-out, [`ReceiverConfigError::StrictWithoutAudiences`] for the strict mode
    /// without audiences.
    pub fn check(strict: bool, has_audiences: bool, opted_out: bool) -> Result<(), Self> {
        match (has_audiences, opted_out, strict) {
            (true, _, _) => Ok(()),
            (false, false, _) => Err(Self::NoAudiences),
            (false, true, true) => Err(Self::StrictWithoutAudiences),
            (false, true, false) => Ok(()),
        }
    }
}

/// The bound of the compatibility mode: until when, and for which senders, the Go
/// forms are accepted ([`ReceivingMode`] has the table).
///
/// The senders are typed certificate names ([`AllowedPeer`]) matched against the
/// forwarded certificate; a verified caller not on the list is judged as in the
/// strict mode (it may send principals, bound ones only). From `until` on the
/// receiver acts as strict for every sender, logs that it does (one WARN at most
/// once a minute) and exports it (`svc_tls_principal_receiving_mode`).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use svc_tls::receiving::{AllowedPeer, CompatibilityWindow, ReceiverConfigError};
///
/// let until = CompatibilityWindow::parse_until("2027-03-01")?;
/// let window = CompatibilityWindow::new(
///     until,
///     [AllowedPeer::uri("spiffe://example.org/ns/unikorn/sa/go-sender")],
/// )?;
/// assert!(window.is_open_at(until - Duration::from_secs(1)));
/// assert!(!window.is_open_at(until));
/// // No sender: refused, naming what is missing.
/// assert_eq!(
///     CompatibilityWindow::new(until, []).unwrap_err(),
///     ReceiverConfigError::CompatibilityWithoutSenders,
/// );
/// # Ok::<(), ReceiverConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompatibilityWindow {
    until: SystemTime,
    senders: Arc<[AllowedPeer]>,
}

impl CompatibilityWindow {
    /// The Go forms from `senders` until `until` (exclusive).
    ///
    /// # Errors
    /// [`ReceiverConfigError::CompatibilityWithoutSenders`] when `senders` is empty.
    pub fn new<I>(until: SystemTime, senders: I) -> Result<Self, ReceiverConfigError>
    where
        I: IntoIterator<Item = AllowedPeer>,
    {
        let senders: Arc<[AllowedPeer]> = senders.into_iter().collect();
        if senders.is_empty() {
            return Err(ReceiverConfigError::CompatibilityWithoutSenders);
        }
        Ok(Self { until, senders })
    }

    /// The end: from this time on the receiver acts as strict.
    pub fn until(&self) -> SystemTime {
        self.until
    }

    /// The senders that may use the Go forms.
    pub fn senders(&self) -> &[AllowedPeer] {
        &self.senders
    }

    /// Whether the window is open at `now` (before `until`).
    pub fn is_open_at(&self, now: SystemTime) -> bool {
        now < self.until
    }

    /// An end date from configuration text: an RFC 3339 time
    /// (`2027-03-01T00:00:00Z`, `2027-03-01T01:00:00+01:00`) or a date
    /// (`2027-03-01`, midnight UTC).
    ///
    /// # Errors
    /// [`ReceiverConfigError::InvalidUntil`] naming the text (cut, escaped).
    pub fn parse_until(text: &str) -> Result<SystemTime, ReceiverConfigError> {
        use k8s_openapi::jiff::{Timestamp, civil::Date, tz::TimeZone};
        let invalid = || ReceiverConfigError::InvalidUntil {
            value: sender_text(text),
        };
        let timestamp = match text.parse::<Timestamp>() {
            Ok(timestamp) => timestamp,
            Err(_) => text
                .parse::<Date>()
                .ok()
                .and_then(|date| date.to_zoned(TimeZone::UTC).ok())
                .map(|zoned| zoned.timestamp())
                .ok_or_else(invalid)?,
        };
        Ok(SystemTime::from(timestamp))
    }
}

/// What a receiver's mode is, shared by its clones and read by the metrics at scrape
/// time: the mode chosen, its window, and the rate limit of the "acting as strict"
/// WARN.
#[derive(Debug)]
pub(crate) struct ModeState {
    pub(super) mode: ReceivingMode,
    pub(super) window: Option<CompatibilityWindow>,
    ended_log: WarningLimiter,
}

impl ModeState {
    pub(super) fn new(mode: ReceivingMode, window: Option<CompatibilityWindow>) -> Arc<Self> {
        Arc::new(Self {
            mode,
            window,
            ended_log: WarningLimiter::new(UNSIGNED_LOG_PERIOD, Arc::new(SystemClock::new())),
        })
    }

    /// The mode in force at `now`: the compatibility mode acts as strict without an
    /// open window.
    pub(crate) fn in_force(&self, now: SystemTime) -> ReceivingMode {
        match (&self.mode, &self.window) {
            (ReceivingMode::GoCompatible, Some(window)) if window.is_open_at(now) => {
                ReceivingMode::GoCompatible
            }
            _ => ReceivingMode::Strict,
        }
    }

    /// Whether the Go forms are accepted from `certificate` at `now`: the
    /// compatibility mode, its window open, the certificate one of its senders.
    /// Logs (rate-limited) when the window has ended.
    pub(super) fn admits_go_forms(&self, certificate: &PeerCertificate, now: SystemTime) -> bool {
        if self.mode != ReceivingMode::GoCompatible {
            return false;
        }
        let Some(window) = &self.window else {
            return false;
        };
        if !window.is_open_at(now) {
            if let Some(held_back) = self.ended_log.admit() {
                let until = k8s_openapi::jiff::Timestamp::try_from(window.until)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                tracing::warn!(
                    %until,
                    held_back,
                    "the go-compatible receiving mode ended: this receiver acts as strict (signed, bound principals only); set --principal-receiving-mode=strict, or a later end date if Go senders still call it (docs/operations.md); at most one such line a minute"
                );
            }
            return false;
        }
        PeerNames::of(certificate.der())
            .is_ok_and(|names| window.senders.iter().any(|peer| names.matches(peer)))
    }
}

/// How often an accepted unsigned principal is logged, at most.
const UNSIGNED_LOG_PERIOD: Duration = Duration::from_secs(60);

/// The rate limit of the unsigned-principal WARN, shared by a verifier's clones.
pub(super) fn unsigned_log_limiter() -> Arc<WarningLimiter> {
    Arc::new(WarningLimiter::new(
        UNSIGNED_LOG_PERIOD,
        Arc::new(SystemClock::new()),
    ))
}

/// base64url, padded or not (the Go senders' encoding of the unsigned form).
const UNSIGNED: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The unsigned form's JSON, when `token` is one: base64url without dots that
/// decodes to a JSON object. A compact JWS always has dots, so it never is.
fn unsigned_json(token: &str) -> Option<Vec<u8>> {
    if token.contains('.') {
        return None;
    }
    let json = UNSIGNED.decode(token).ok()?;
    json.first().is_some_and(|b| *b == b'{').then_some(json)
}

impl IngressVerifier {
    /// Which principals are accepted (default [`ReceivingMode::Strict`]).
    /// [`ReceivingMode::GoCompatible`] needs its bound too
    /// ([`IngressVerifier::with_compatibility`], which sets the mode itself):
    /// without it every request is refused
    /// ([`ReceiverConfigError::CompatibilityWithoutEnd`]).
    #[must_use]
    pub fn with_mode(mut self, mode: ReceivingMode) -> Self {
        let window = match mode {
            ReceivingMode::Strict => None,
            ReceivingMode::GoCompatible => self.mode.window.clone(),
        };
        self.mode = ModeState::new(mode, window);
        self
    }

    /// The compatibility mode, bounded by `window`: the Go forms are accepted from
    /// its senders until its end ([`CompatibilityWindow`]); every other request is
    /// judged as in the strict mode.
    ///
    /// ```no_run
    /// # fn f(trust: svc_tls::TrustVerifier) -> Result<(), Box<dyn std::error::Error>> {
    /// use svc_tls::receiving::{AllowedPeer, CompatibilityWindow, IngressVerifier};
    ///
    /// let window = CompatibilityWindow::new(
    ///     CompatibilityWindow::parse_until("2027-03-01")?,
    ///     [AllowedPeer::uri("spiffe://example.org/ns/unikorn/sa/go-sender")],
    /// )?;
    /// let ingress = IngressVerifier::verified(trust)
    ///     .with_audiences(["https://region.example.com".parse()?])
    ///     .with_compatibility(window);
    /// ingress.check_configuration()?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_compatibility(mut self, window: CompatibilityWindow) -> Self {
        self.mode = ModeState::new(ReceivingMode::GoCompatible, Some(window));
        self
    }

    /// The mode chosen ([`IngressVerifier::mode_in_force`]: the mode acting now).
    pub fn mode(&self) -> ReceivingMode {
        self.mode.mode
    }

    /// The mode acting now: the compatibility mode is strict once its window has
    /// ended (or without one).
    pub fn mode_in_force(&self) -> ReceivingMode {
        self.mode.in_force(SystemTime::now())
    }

    /// The compatibility mode's bound, when set.
    pub fn compatibility(&self) -> Option<&CompatibilityWindow> {
        self.mode.window.as_ref()
    }

    /// The mode's shared state (the metrics read it at scrape time).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn mode_state(&self) -> &Arc<ModeState> {
        &self.mode
    }

    /// Opts out of the audience check, explicitly: a token's `aud` is not compared
    /// with anything. Without audiences and without this, every request is refused
    /// ([`RequestPrincipalError::Configuration`]), as
    /// [`IngressBuilder::build`](crate::receiving::IngressBuilder::build) refuses to
    /// build. The strict mode cannot opt out
    /// ([`ReceiverConfigError::StrictWithoutAudiences`]), and a compatibility mode
    /// whose window has ended acts as strict: it then refuses every token.
    #[must_use]
    pub fn without_audience_check(mut self) -> Self {
        self.audience_unchecked = true;
        self
    }

    /// Whether this verifier can accept any principal: it names its audiences, or
    /// (in the compatibility mode) opted out of the check; a compatibility mode
    /// has its bound and verifies the forwarded certificate.
    ///
    /// # Errors
    /// [`ReceiverConfigError::NoAudiences`],
    /// [`ReceiverConfigError::StrictWithoutAudiences`],
    /// [`ReceiverConfigError::CompatibilityWithoutEnd`] (the mode set without its
    /// [`CompatibilityWindow`]) or
    /// [`ReceiverConfigError::CompatibilityWithUnverifiedHeaders`].
    pub fn check_configuration(&self) -> Result<(), ReceiverConfigError> {
        let compatible = self.mode.mode == ReceivingMode::GoCompatible;
        if compatible {
            if self.mode.window.is_none() {
                return Err(ReceiverConfigError::CompatibilityWithoutEnd);
            }
            if self.is_unverified() {
                return Err(ReceiverConfigError::CompatibilityWithUnverifiedHeaders);
            }
        }
        ReceiverConfigError::check(
            !compatible,
            !self.audiences.is_empty(),
            self.audience_unchecked,
        )
    }

    /// The unsigned form of `token`, decoded, when it is one: accepted when `go`
    /// (the compatibility mode admits this caller now; logged, rate-limited),
    /// refused otherwise. `None`: not the unsigned form, verify it as a JWS.
    pub(super) fn unsigned_principal<T: DeserializeOwned>(
        &self,
        token: &str,
        certificate: &PeerCertificate,
        go: bool,
        settled: &mut Settled,
    ) -> Option<Result<T, RequestPrincipalError>> {
        let json = unsigned_json(token)?;
        if !go {
            return Some(Err(RequestPrincipalError::Unsigned));
        }
        let decoded = serde_json::from_slice(&json).map_err(|e| {
            RequestPrincipalError::Verify(match e.classify() {
                serde_json::error::Category::Data => VerifyError::PayloadType(e),
                _ => VerifyError::PayloadNotJson(e),
            })
        });
        if decoded.is_ok() {
            settled.unsigned = true;
            settled.without_times = true;
            settled.without_audience = true;
            if let Some(held_back) = self.unsigned_log.admit() {
                let subject = PeerNames::of(certificate.der())
                    .map(|names| sender_text(&names.subject))
                    .unwrap_or_default();
                tracing::warn!(
                    peer = %subject,
                    held_back,
                    "accepted an unsigned X-Principal (a Go sender's form) in the go-compatible receiving mode: the caller proved no key to this service (its certificate came in a header), so the principal is bound to nothing; the strict mode refuses it (docs/operations.md); at most one such line a minute"
                );
            }
        }
        Some(decoded)
    }
}
