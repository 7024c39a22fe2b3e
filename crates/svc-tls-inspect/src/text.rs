//! Text from outside, made safe for a terminal: everything the human report shows
//! that someone else wrote (a certificate's subject, issuer and SANs, a Secret's
//! data keys, a loader's or handshake's message, a flag's name) goes through
//! [`shown`].
//!
//! Whoever can write a Secret the service reads chooses its certificates' text: a
//! common name holding ESC sequences would recolour or rewrite the operator's
//! terminal, one holding a newline could print a fake `result: ok (exit 0)` line.
//! [`shown`] escapes such characters (`\u{1b}`, `\n`) and cuts long values with
//! `…`: it is the workspace's one escaping helper (`svc_tls::excerpt::escaped`,
//! from watch-ready), which also writes the other characters Rust's `Debug`
//! escapes as unprintable (bidirectional overrides such as U+202E, zero-width and
//! format characters, line and paragraph separators, unassigned code points) as
//! `\u{…}`, in every log excerpt as here. The JSON output keeps the
//! exact values (serde_json escapes control characters itself).

use svc_tls::excerpt;

/// How many characters of one value (a subject, an issuer, a SAN, a data key, a
/// flag's name) the human report keeps.
pub const VALUE_CHARS: usize = 256;

/// How many characters of a message (a loader's, a handshake's) it keeps.
pub const MESSAGE_CHARS: usize = excerpt::LOGGED_CHAIN_CHARS;

/// How many SANs of one certificate it lists (then `… and N more`).
pub const MAX_SANS: usize = 16;

/// `text` with control and other unprintable characters escaped, cut to
/// `max_chars` characters of output (then `…`): the workspace's one escaping
/// helper.
pub fn shown(text: &str, max_chars: usize) -> String {
    excerpt::escaped(text, max_chars)
}

/// A value, escaped and cut to [`VALUE_CHARS`].
pub fn value(text: &str) -> String {
    shown(text, VALUE_CHARS)
}

/// A message, escaped and cut to [`MESSAGE_CHARS`].
pub fn message(text: &str) -> String {
    shown(text, MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_unprintables_are_escaped_and_values_cut() {
        assert_eq!(shown("CN=a\u{1b}[2J\nb", 64), "CN=a\\u{1b}[2J\\nb");
        assert_eq!(shown("x\u{202e}y\u{200b}z", 64), "x\\u{202e}y\\u{200b}z");
        assert_eq!(shown("CN=café, O=Ümlaut", 64), "CN=café, O=Ümlaut");
        assert_eq!(shown(&"a".repeat(10), 4), "aaaa…");
        // Escaping twice changes nothing: the report escapes values, then lines.
        let once = shown("a\u{9b}b\u{2028}c", 64);
        assert_eq!(shown(&once, 64), once);
        assert!(!once.chars().any(char::is_control));
    }
}
