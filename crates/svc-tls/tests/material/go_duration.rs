//! `--client-certificate-reload-interval` accepts exactly what Go's
//! `time.ParseDuration` accepts, with Go's error texts. The expected values are
//! Go's: they follow its grammar, range and float scaling of fractions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use clap::Command;
use svc_tls::duration::{GoDuration, parse_go_duration};
use svc_tls::options::ClientIdentityOptions;

const NS: i64 = 1;
const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;
const M: i64 = 60 * S;
const H: i64 = 60 * M;

/// Accepted values and their nanoseconds.
const ACCEPTED: &[(&str, i64)] = &[
    // The bare zero, signed or not.
    ("0", 0),
    ("+0", 0),
    ("-0", 0),
    ("0s", 0),
    ("-0s", 0),
    // Simple.
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("24h", 24 * H),
    // Signed (negative disabled the Go timer).
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-1s", -S),
    ("+5m", 5 * M),
    ("-1h30m", -(H + 30 * M)),
    // Decimal.
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", S),
    ("1.00s", S),
    ("1.004s", S + 4 * MS),
    ("1.0040s", S + 4 * MS),
    ("100.00100s", 100 * S + MS),
    ("1.5h", H + 30 * M),
    // Every unit.
    ("10ns", 10 * NS),
    ("11us", 11 * US),
    ("12\u{b5}s", 12 * US),
    ("12\u{3bc}s", 12 * US),
    ("1us", US),
    ("1\u{b5}s", US),
    ("13ms", 13 * MS),
    ("300ms", 300 * MS),
    ("14s", 14 * S),
    ("15m", 15 * M),
    ("16h", 16 * H),
    // Compound, in any order, units repeated.
    ("1h30m", H + 30 * M),
    ("3h30m", 3 * H + 30 * M),
    ("10.5s4m", 4 * M + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
    (
        "1h2m3s4ms5us6ns",
        H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
    ),
    ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    ("1s1s", 2 * S),
    // Fractions longer than fit are cut as Go cuts them.
    ("52763797000ns", 52_763_797_000),
    ("0.3333333333333333333h", 20 * M),
    ("0.100000000000000000000h", 6 * M),
    ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
    // The extremes of an int64 of nanoseconds.
    ("9223372036854775807ns", i64::MAX),
    ("9223372036854775.807us", i64::MAX),
    ("9223372036s854ms775us807ns", i64::MAX),
    ("-9223372036854775808ns", i64::MIN),
    ("-9223372036854775.808us", i64::MIN),
];

/// Refused values and Go's error text for each.
const REFUSED: &[(&str, &str)] = &[
    ("", r#"time: invalid duration """#),
    ("3", r#"time: missing unit in duration "3""#),
    ("00", r#"time: missing unit in duration "00""#),
    ("1.5", r#"time: missing unit in duration "1.5""#),
    ("-", r#"time: invalid duration "-""#),
    ("+", r#"time: invalid duration "+""#),
    ("s", r#"time: invalid duration "s""#),
    (".", r#"time: invalid duration ".""#),
    ("-.", r#"time: invalid duration "-.""#),
    (".s", r#"time: invalid duration ".s""#),
    ("+.s", r#"time: invalid duration "+.s""#),
    ("x", r#"time: invalid duration "x""#),
    ("daily", r#"time: invalid duration "daily""#),
    ("1d", r#"time: unknown unit "d" in duration "1d""#),
    ("1e3s", r#"time: unknown unit "e" in duration "1e3s""#),
    ("1 h", r#"time: unknown unit " h" in duration "1 h""#),
    ("1h ", r#"time: unknown unit "h " in duration "1h ""#),
    ("-1h-", r#"time: unknown unit "h-" in duration "-1h-""#),
    ("1..2s", r#"time: missing unit in duration "1..2s""#),
    (
        "1\u{b5}",
        r#"time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5""#,
    ),
    ("1\"s", r#"time: unknown unit "\"s" in duration "1\"s""#),
    ("3000000h", r#"time: invalid duration "3000000h""#),
    (
        "9223372036854775808ns",
        r#"time: invalid duration "9223372036854775808ns""#,
    ),
    (
        "9223372036854775.808us",
        r#"time: invalid duration "9223372036854775.808us""#,
    ),
    (
        "-9223372036854775809ns",
        r#"time: invalid duration "-9223372036854775809ns""#,
    ),
    (
        "9223372036854ms775us808ns",
        r#"time: invalid duration "9223372036854ms775us808ns""#,
    ),
];

#[test]
fn parse_go_duration_matches_go_on_the_table() {
    for (text, nanos) in ACCEPTED {
        assert_eq!(
            parse_go_duration(text),
            Ok(GoDuration::from_nanos(*nanos)),
            "{text:?}"
        );
    }
    for (text, message) in REFUSED {
        assert_eq!(parse_go_duration(text).unwrap_err(), *message, "{text:?}");
    }
}

/// Every accepted value starts the service through the flag (the unprefixed identity's:
/// a prefixed identity has none, as in Go); every refused one stops it with Go's
/// message and the flag's name.
#[test]
fn the_flag_takes_every_go_duration() {
    let command = || {
        let cmd = ClientIdentityOptions::augment(Command::new("svc"), None);
        ClientIdentityOptions::augment(cmd, Some("audit"))
    };
    let flag = ClientIdentityOptions::reload_interval_flag(None).unwrap();
    for (text, nanos) in ACCEPTED {
        let m = command()
            .try_get_matches_from(["svc".to_owned(), format!("--{flag}={text}")])
            .unwrap_or_else(|e| panic!("--{flag}={text}: {e}"));
        let opts = ClientIdentityOptions::from_matches(&m, None).unwrap();
        assert_eq!(
            opts.deprecated_reload_interval(),
            Some(GoDuration::from_nanos(*nanos)),
            "--{flag}={text}"
        );
        let audit = ClientIdentityOptions::from_matches(&m, Some("audit")).unwrap();
        assert_eq!(audit.deprecated_reload_interval(), None, "--{flag}={text}");
    }
    for (text, message) in REFUSED {
        let err = command()
            .try_get_matches_from([
                "svc".to_owned(),
                format!("--client-certificate-reload-interval={text}"),
            ])
            .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{text:?}"
        );
        let shown = err.to_string();
        assert!(shown.contains(message), "{text:?}: {shown}");
        assert!(
            shown.contains("--client-certificate-reload-interval"),
            "{text:?}: {shown}"
        );
    }
}

#[test]
fn display_is_go_duration_string() {
    for (nanos, text) in [
        (0, "0s"),
        (1, "1ns"),
        (1_100, "1.1µs"),
        (2_200 * US, "2.2ms"),
        (300 * MS, "300ms"),
        (S, "1s"),
        (-S, "-1s"),
        (3 * S + 300 * MS, "3.3s"),
        (4 * M + 5 * S, "4m5s"),
        (4 * M + 5 * S + 1, "4m5.000000001s"),
        (5 * H + 6 * M + 7 * S + MS, "5h6m7.001s"),
        (H + 30 * M, "1h30m0s"),
        (M, "1m0s"),
        (24 * H, "24h0m0s"),
        (i64::MAX, "2562047h47m16.854775807s"),
        (i64::MIN, "-2562047h47m16.854775808s"),
    ] {
        assert_eq!(GoDuration::from_nanos(nanos).to_string(), text);
    }
}

#[test]
fn conversions_keep_the_sign() {
    assert_eq!(GoDuration::from_secs(-1).to_std(), None);
    assert_eq!(
        GoDuration::from_secs(2).to_std(),
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(GoDuration::ZERO.to_std(), Some(std::time::Duration::ZERO));
    assert!(GoDuration::from_nanos(-1).is_negative());
}
