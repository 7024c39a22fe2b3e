//! The parser of Go's duration language and its signed value.

use std::fmt;
use std::time::Duration;

/// A signed duration in nanoseconds, with Go's range (`i64`) and Go's text form.
///
/// `Display` writes what Go's `Duration.String` writes (`1h30m0s`, `300ms`, `-1s`,
/// `0s`), so a value read from a flag can be echoed back in the form the operator
/// knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration {
    nanos: i64,
}

impl GoDuration {
    /// Zero.
    pub const ZERO: Self = Self { nanos: 0 };

    /// From signed nanoseconds.
    pub const fn from_nanos(nanos: i64) -> Self {
        Self { nanos }
    }

    /// From whole seconds (saturating at Go's range).
    pub const fn from_secs(secs: i64) -> Self {
        Self {
            nanos: secs.saturating_mul(1_000_000_000),
        }
    }

    /// The signed number of nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.nanos
    }

    /// Whether the value is below zero.
    pub const fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// The value as a [`Duration`] when it is zero or positive; `None` when negative.
    pub fn to_std(self) -> Option<Duration> {
        u64::try_from(self.nanos).ok().map(Duration::from_nanos)
    }
}

impl From<Duration> for GoDuration {
    /// Saturates at Go's maximum (about 292 years).
    fn from(d: Duration) -> Self {
        Self {
            nanos: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SECOND: u64 = 1_000_000_000;
        let u = self.nanos.unsigned_abs();
        let sign = if self.nanos < 0 { "-" } else { "" };
        if u == 0 {
            return f.write_str("0s");
        }
        if u < SECOND {
            let (unit, digits) = match u {
                0..1_000 => ("ns", 0),
                1_000..1_000_000 => ("µs", 3),
                _ => ("ms", 6),
            };
            let scale = 10u64.pow(digits);
            write!(f, "{sign}{}", u / scale)?;
            write_fraction(f, u % scale, digits)?;
            return f.write_str(unit);
        }
        let secs = u / SECOND;
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        f.write_str(sign)?;
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if h > 0 || m > 0 {
            write!(f, "{m}m")?;
        }
        write!(f, "{s}")?;
        write_fraction(f, u % SECOND, 9)?;
        f.write_str("s")
    }
}

/// Writes `.ddd` for a non-zero fraction of `digits` digits, without trailing zeros.
fn write_fraction(f: &mut fmt::Formatter<'_>, frac: u64, digits: u32) -> fmt::Result {
    if frac == 0 || digits == 0 {
        return Ok(());
    }
    let text = format!("{frac:0width$}", width = digits as usize);
    write!(f, ".{}", text.trim_end_matches('0'))
}

/// `1 << 63` as Go's parser uses it: the bound of the unsigned accumulator.
const LIMIT: u64 = 1 << 63;

/// Parses a duration exactly as Go's `time.ParseDuration` does, with Go's error texts.
///
/// ```
/// use svc_tls::duration::{GoDuration, parse_go_duration};
///
/// assert_eq!(parse_go_duration("1h30m"), Ok(GoDuration::from_secs(5400)));
/// assert_eq!(parse_go_duration("-1s"), Ok(GoDuration::from_secs(-1)));
/// assert_eq!(parse_go_duration("0"), Ok(GoDuration::ZERO));
/// assert_eq!(
///     parse_go_duration("x").unwrap_err(),
///     r#"time: invalid duration "x""#
/// );
/// ```
pub fn parse_go_duration(text: &str) -> Result<GoDuration, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(text));
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(GoDuration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        // The next character must be a digit or a dot.
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        // The integer part.
        let int_len = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let whole = leading_int(&s[..int_len]).ok_or_else(invalid)?;
        let had_int = int_len > 0;
        s = &s[int_len..];
        // The fraction.
        let mut fraction = 0u64;
        let mut scale = 1f64;
        let mut had_fraction = false;
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            (fraction, scale) = leading_fraction(&rest[..frac_len]);
            had_fraction = frac_len > 0;
            s = &rest[frac_len..];
        }
        if !had_int && !had_fraction {
            // No digits at all (e.g. ".s").
            return Err(invalid());
        }
        // The unit: everything up to the next digit or dot.
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", go_quote(text)));
        }
        let unit_text = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match unit_text {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    go_quote(unit_text),
                    go_quote(text)
                ));
            }
        };
        if whole > LIMIT / unit {
            return Err(invalid());
        }
        let mut value = whole * unit;
        if fraction > 0 {
            // As Go: the fraction is scaled through a float64, then truncated.
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let extra = (fraction as f64 * (unit as f64 / scale)) as u64;
            value = value.checked_add(extra).ok_or_else(invalid)?;
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total = total.checked_add(value).ok_or_else(invalid)?;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // total <= 1 << 63, so the negation fits (i64::MIN at the extreme).
        let nanos = i64::try_from(total).map_or(i64::MIN, |t| -t);
        return Ok(GoDuration::from_nanos(nanos));
    }
    i64::try_from(total)
        .map(GoDuration::from_nanos)
        .map_err(|_| invalid())
}

/// The digits as an integer no larger than `1 << 63`; `None` on overflow.
fn leading_int(digits: &str) -> Option<u64> {
    let mut x: u64 = 0;
    for b in digits.bytes() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(b - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some(x)
}

/// The fraction digits as an integer and its scale (10^digits kept); digits that no
/// longer fit are ignored, as Go ignores them.
fn leading_fraction(digits: &str) -> (u64, f64) {
    let mut x: u64 = 0;
    let mut scale = 1f64;
    let mut overflow = false;
    for b in digits.bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale)
}

/// Quotes as Go's `time` package quotes inside its errors: in double quotes, with `"`
/// and `\` escaped and every byte of a non-ASCII or control character as `\xNN`.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c < ' ' || !c.is_ascii() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}
