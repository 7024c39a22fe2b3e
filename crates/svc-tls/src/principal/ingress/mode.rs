//! What a receiver accepts: the strict mode (signed principals bound to this
//! receiver), or the compatibility mode (also what the deployed Go senders send),
//! and the audiences a receiver must name.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::*;
use crate::last_good::{SystemClock, WarningLimiter};

/// Which principals an [`IngressVerifier`] accepts.
///
/// The deployed Go senders put in `X-Principal` either the principal's JSON,
/// base64url-encoded and **unsigned** (what most of them send), or a JWS signed
/// with their client certificate's key that carries no `iat`, `exp` or `aud`. The
/// Go receiving middleware accepts both from a caller whose client certificate the
/// ingress verified, trying the unsigned form first. This crate's senders sign every
/// principal and bind it to its receiver (`aud`) and its time (`iat`, `exp`).
///
/// | token | [`Strict`](ReceivingMode::Strict) (the default) | [`GoCompatible`](ReceivingMode::GoCompatible) |
/// |---|---|---|
/// | signed, `iat`/`exp`/`aud` for this receiver | accepted | accepted |
/// | signed for another audience, expired, over the lifetime cap | refused | refused |
/// | signed, no `iat`/`exp`/`aud` (Go's signed form) | refused | accepted, counted |
/// | unsigned base64url JSON (Go's usual form) | refused ([`RequestPrincipalError::Unsigned`]) | accepted, counted and logged (at most once a minute) |
///
/// Every form needs the forwarded client certificate first
/// ([`IngressVerifier::peer_certificate`]: the ingress verified it, it chains to the
/// watched CA, it is on the allow-list when there is one). What the compatibility
/// mode trusts is that certificate only: any workload holding a certificate the
/// ingress accepts can claim any principal in the unsigned form. Run it while Go
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
    /// Also what the deployed Go senders send: the unsigned base64url JSON form,
    /// and signed tokens without times or audience. Present times and audiences are
    /// still checked. Each such principal is counted
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
    /// Which principals are accepted (default [`ReceivingMode::Strict`]). Sets the
    /// token-times requirement with it: [`TokenTimes::Required`] in the strict
    /// mode, [`TokenTimes::CheckedWhenPresent`] in the compatibility mode.
    #[must_use]
    pub fn with_mode(mut self, mode: ReceivingMode) -> Self {
        self.mode = mode;
        self.times = match mode {
            ReceivingMode::Strict => TokenTimes::Required,
            ReceivingMode::GoCompatible => TokenTimes::CheckedWhenPresent,
        };
        self
    }

    /// The mode in force.
    pub fn mode(&self) -> ReceivingMode {
        self.mode
    }

    /// Opts out of the audience check, explicitly: a token's `aud` is not compared
    /// with anything. Without audiences and without this, every request is refused
    /// ([`RequestPrincipalError::Configuration`]), as
    /// [`IngressBuilder::build`](crate::receiving::IngressBuilder::build) refuses to
    /// build. The strict mode cannot opt out
    /// ([`ReceiverConfigError::StrictWithoutAudiences`]).
    #[must_use]
    pub fn without_audience_check(mut self) -> Self {
        self.audience_unchecked = true;
        self
    }

    /// Whether this verifier can accept any principal: it names its audiences, or
    /// (in the compatibility mode) opted out of the check.
    ///
    /// # Errors
    /// [`ReceiverConfigError::NoAudiences`] or
    /// [`ReceiverConfigError::StrictWithoutAudiences`].
    pub fn check_configuration(&self) -> Result<(), ReceiverConfigError> {
        ReceiverConfigError::check(
            self.times == TokenTimes::Required,
            !self.audiences.is_empty(),
            self.audience_unchecked,
        )
    }

    /// The unsigned form of `token`, decoded, when it is one: accepted in the
    /// compatibility mode (and logged, rate-limited), refused in the strict mode.
    /// `None`: not the unsigned form, verify it as a JWS.
    pub(super) fn unsigned_principal<T: DeserializeOwned>(
        &self,
        token: &str,
        certificate: &PeerCertificate,
        settled: &mut Settled,
    ) -> Option<Result<T, RequestPrincipalError>> {
        let json = unsigned_json(token)?;
        if self.mode == ReceivingMode::Strict {
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
                    "accepted an unsigned X-Principal (a Go sender's form) in the go-compatible receiving mode: it is bound to nothing but the caller's certificate; the strict mode refuses it (docs/operations.md); at most one such line a minute"
                );
            }
        }
        Some(decoded)
    }
}
