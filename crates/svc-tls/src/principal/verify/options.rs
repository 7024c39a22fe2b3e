//! What a verification accepts: the algorithm policy, token size, times and audience.

use super::*;

/// RSA keys shorter than this are refused when verifying.
pub(crate) const MIN_RSA_BITS: usize = 2048;

/// The default cap on a principal token's length, in bytes, checked before the
/// token is split or decoded. A PS512 token for a [`Principal`](crate::principal::Principal)
/// with an RSA-4096 key is well under 2 KiB; 16 KiB leaves room for large
/// payloads while keeping a hostile sender from making the verifier decode,
/// parse and hash hundreds of kilobytes per request.
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 16 * 1024;

/// How a token is verified: the algorithm policy, the length cap, the time checks
/// (present times are always checked, against the clock and the lifetime cap) and
/// the audience check (a present `aud` must name one of `audiences`, when they are
/// given); [`TokenTimes::Required`] requires times and audience.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// The accepted algorithms.
    pub policy: AlgorithmPolicy,
    /// The cap on the token's length, checked before anything else.
    pub max_len: usize,
    /// Whether `iat` and `exp` are required.
    pub times: TokenTimes,
    /// The clock difference tolerated for `iat` and `exp`.
    pub clock_skew: Duration,
    /// The time to check against (`None`: the system clock at the call).
    pub now: Option<SystemTime>,
    /// The longest lifetime accepted (default [`DEFAULT_MAX_PRINCIPAL_LIFETIME`]).
    pub max_lifetime: Duration,
    /// This receiver's audiences: the origins (`https://host[:port]`) its senders
    /// call it at. Empty: a token's `aud` is not checked (and the strict mode
    /// refuses every token).
    pub audiences: Arc<[String]>,
    /// The receiver's replay cache: when set, a token must carry a `jti` not
    /// accepted before (a token without one is refused), and is remembered until
    /// it expires. `None` (the default): no replay check.
    pub replay: Option<Arc<super::super::ReplayCache>>,
    /// A token without `jti` passes the replay check (the compatibility mode's
    /// senders, within its window: Go's signed tokens carry none). Set by the
    /// ingress verifier only.
    pub(crate) jti_optional: bool,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self::new(AlgorithmPolicy::default())
    }
}

impl VerifyOptions {
    /// `policy`, the default cap [`DEFAULT_MAX_TOKEN_BYTES`], times checked when
    /// present with [`DEFAULT_CLOCK_SKEW`].
    pub fn new(policy: AlgorithmPolicy) -> Self {
        Self {
            policy,
            max_len: DEFAULT_MAX_TOKEN_BYTES,
            times: TokenTimes::default(),
            clock_skew: DEFAULT_CLOCK_SKEW,
            now: None,
            max_lifetime: DEFAULT_MAX_PRINCIPAL_LIFETIME,
            audiences: Arc::from(Vec::new()),
            replay: None,
            jti_optional: false,
        }
    }

    /// Refuses a second use of any token, with `cache` (share one per receiver; see
    /// [`ReplayCache`](super::super::ReplayCache) for its bound). Tokens must then
    /// carry a `jti`, as this crate's signers write since 0.2.0; Go senders' do not.
    #[must_use]
    pub fn with_replay_cache(mut self, cache: Arc<super::super::ReplayCache>) -> Self {
        self.replay = Some(cache);
        self
    }

    /// Another lifetime cap: tokens whose `exp - iat` is longer are refused
    /// ([`VerifyError::LifetimeTooLong`]).
    #[must_use]
    pub fn with_max_lifetime(mut self, max: Duration) -> Self {
        self.max_lifetime = max;
        self
    }

    /// This receiver's audiences, as the URLs its senders call it at (only their
    /// origins count: `https://identity.example/api` is `https://identity.example`).
    /// A token whose `aud` names none of them is refused
    /// ([`VerifyError::AudienceMismatch`]).
    #[must_use]
    pub fn with_audiences<I: IntoIterator<Item = Url>>(mut self, audiences: I) -> Self {
        self.audiences = audiences_of(audiences);
        self
    }

    /// Another length cap.
    #[must_use]
    pub fn with_max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }

    /// Whether times are required ([`TokenTimes::Required`]: strict mode).
    #[must_use]
    pub fn with_times(mut self, times: TokenTimes) -> Self {
        self.times = times;
        self
    }

    /// Another clock-skew allowance.
    #[must_use]
    pub fn with_clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew;
        self
    }

    /// Checks times against `now` instead of the system clock.
    #[must_use]
    pub fn at(mut self, now: SystemTime) -> Self {
        self.now = Some(now);
        self
    }
}
