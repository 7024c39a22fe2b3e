//! The protected header's times and audience, checked against the options.

use super::*;

/// `iat` and `exp` from the header, each checked to be a non-negative integer.
pub(super) fn header_times(
    header: &RawHeader,
    required: TokenTimes,
) -> Result<(Option<u64>, Option<u64>), VerifyError> {
    let read = |value: &Option<serde_json::Value>, member: &'static str| match value {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or(VerifyError::MalformedTime { member }),
    };
    let (iat, exp) = (read(&header.iat, "iat")?, read(&header.exp, "exp")?);
    if required == TokenTimes::Required {
        if iat.is_none() {
            return Err(VerifyError::MissingTimes { member: "iat" });
        }
        if exp.is_none() {
            return Err(VerifyError::MissingTimes { member: "exp" });
        }
    }
    if let (Some(iat), Some(exp)) = (iat, exp)
        && exp < iat
    {
        return Err(VerifyError::MalformedTime { member: "exp" });
    }
    Ok((iat, exp))
}

/// Present times against now, with the allowance, and against the lifetime cap.
pub(super) fn check_times(
    (iat, exp): (Option<u64>, Option<u64>),
    options: &VerifyOptions,
) -> Result<(), VerifyError> {
    if iat.is_none() && exp.is_none() {
        return Ok(());
    }
    let now = options
        .now
        .unwrap_or_else(SystemTime::now)
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let skew = options.clock_skew.as_secs();
    if let Some(exp) = exp
        && now > exp.saturating_add(skew)
    {
        return Err(VerifyError::Expired { exp, now, skew });
    }
    if let Some(iat) = iat
        && iat > now.saturating_add(skew)
    {
        return Err(VerifyError::IssuedInFuture { iat, now, skew });
    }
    // After expiry: an old token is refused as expired, which says more.
    let max = options.max_lifetime.as_secs();
    // The lifetime the token shows: exp - iat when both are there; with one only,
    // how far exp lies ahead of now, or how long ago iat was (less the skew
    // allowance, so a clock difference alone never exceeds the cap).
    let lifetime = match (iat, exp) {
        (Some(iat), Some(exp)) => exp.saturating_sub(iat),
        (None, Some(exp)) => exp.saturating_sub(now.saturating_add(skew)),
        (Some(iat), None) => now.saturating_sub(iat.saturating_add(skew)),
        (None, None) => 0,
    };
    if lifetime > max {
        return Err(VerifyError::LifetimeTooLong { lifetime, max });
    }
    Ok(())
}

/// What a verification found, for the recorder: the algorithm once accepted, and
/// which bindings an accepted token lacked.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Settled {
    /// The token's algorithm, once its `alg` was accepted.
    pub(crate) algorithm: Option<Algorithm>,
    /// The accepted token lacked `iat` or `exp` (the strict mode refuses it).
    pub(crate) without_times: bool,
    /// The accepted token lacked `aud` (the strict mode refuses it).
    pub(crate) without_audience: bool,
    /// The accepted principal was the unsigned form (the compatibility mode only).
    pub(crate) unsigned: bool,
}

/// The origins of `urls`, as audiences are compared.
pub(crate) fn audiences_of<I: IntoIterator<Item = Url>>(urls: I) -> Arc<[String]> {
    urls.into_iter()
        .map(|url| url.origin().ascii_serialization())
        .collect()
}

/// `aud` from the header: each audience named (a string, or a non-empty array of
/// strings, as JWT allows), or `None` when absent. Read before the signature is
/// checked, so that a malformed member is refused whatever the signature; what
/// it names is judged after ([`check_audience`]).
pub(super) fn header_audience(
    header: &RawHeader,
    options: &VerifyOptions,
) -> Result<Option<Vec<String>>, VerifyError> {
    let strict = options.times == TokenTimes::Required;
    if strict && options.audiences.is_empty() {
        return Err(VerifyError::AudienceNotConfigured);
    }
    let audiences = match &header.aud {
        None if strict => return Err(VerifyError::MissingAudience),
        None => return Ok(None),
        Some(serde_json::Value::String(aud)) => vec![aud.clone()],
        Some(serde_json::Value::Array(values)) if !values.is_empty() => values
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(VerifyError::MalformedAudience)?,
        Some(_) => return Err(VerifyError::MalformedAudience),
    };
    Ok(Some(audiences))
}

/// A present audience against this receiver's (not checked when it names none).
pub(super) fn check_audience(
    audience: Option<Vec<String>>,
    options: &VerifyOptions,
) -> Result<(), VerifyError> {
    let Some(audience) = audience else {
        return Ok(());
    };
    if options.audiences.is_empty() || audience.iter().any(|a| options.audiences.contains(a)) {
        return Ok(());
    }
    Err(VerifyError::AudienceMismatch {
        aud: audience.iter().take(4).map(|a| sender_text(a)).collect(),
        expected: options.audiences.to_vec(),
    })
}
