//! Text that may come from outside the process, cut and escaped before it is
//! logged: the one place both the watch layer and `svc-tls` take log excerpts from.
//!
//! Error messages carry text nobody here wrote: a Secret's malformed PEM line, a
//! forwarded certificate header, an exec credential plugin's whole output inside a
//! watch error. Logged as is, such text can forge log lines (a `\n` followed by a
//! fake record) or flood the log (tens of KiB per line). [`chain`] renders an
//! error with its sources (`outer: inner: ...`) and [`escaped`] any text, both
//! escaped (control characters such as `\n`, `\t` or ESC become visible escapes;
//! other characters are kept) and cut to a fixed number of characters, ending in
//! `…` when cut.

use std::error::Error;
use std::fmt::Write as _;

/// How many characters of a value from a sender an error message keeps (a header
/// value, an algorithm name).
pub const SENDER_TEXT_CHARS: usize = 64;

/// How many characters of a logged error chain are kept: enough for the words of
/// several layers and the start of what the innermost one quotes.
pub const LOGGED_CHAIN_CHARS: usize = 512;

/// `text` cut to at most `max_chars` characters (then `…`), unescaped: for a
/// value an error type shows Debug-escaped itself.
pub fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// `text` escaped and cut to at most `max_chars` characters of output (then `…`).
pub fn escaped(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars) + 3);
    let mut used = 0usize;
    for c in text.chars() {
        let len = if c.is_control() {
            c.escape_debug().len()
        } else {
            1
        };
        if used + len > max_chars {
            out.push('…');
            return out;
        }
        used += len;
        if c.is_control() {
            let _ = write!(out, "{}", c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// `error` and its sources joined with `: `, escaped and cut to
/// [`LOGGED_CHAIN_CHARS`] characters: what to log for any error that may quote
/// outside text. Reading stops once the cap is reached, so a huge message is not
/// copied whole.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    chain_of(error, LOGGED_CHAIN_CHARS)
}

/// As [`chain`], for a value that is only `Display` (the text is escaped and cut).
pub fn display(value: &dyn std::fmt::Display) -> String {
    escaped(&value.to_string(), LOGGED_CHAIN_CHARS)
}

/// As [`chain`], with another cap.
pub fn chain_of(error: &(dyn Error + 'static), max_chars: usize) -> String {
    let mut text = String::new();
    let mut current: Option<&(dyn Error + 'static)> = Some(error);
    let mut previous = String::new();
    while let Some(e) = current {
        let message = e.to_string();
        // thiserror's `{0}` / `transparent` repeat the source's words: skip a
        // layer whose message is the one just shown.
        if message != previous {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
            previous = message;
        }
        if text.len() > max_chars * 4 {
            break;
        }
        current = e.source();
    }
    escaped(&text, max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(String, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn chains_are_escaped_and_capped() {
        let hostile = format!(
            "line\n2026-01-01 ERROR forged\u{1b}[31m {}",
            "x".repeat(40 * 1024)
        );
        let error = Layer(
            "CA Secret unikorn/ca".into(),
            Some(Box::new(Layer(hostile, None))),
        );
        let shown = chain(&error);
        assert!(
            shown.starts_with("CA Secret unikorn/ca: line\\n2026"),
            "{shown}"
        );
        assert!(
            !shown.contains('\n') && !shown.contains('\u{1b}'),
            "{shown}"
        );
        assert!(
            shown.chars().count() <= LOGGED_CHAIN_CHARS + 1,
            "{}",
            shown.len()
        );
        assert!(shown.ends_with('…'));
        // Short text is kept whole.
        assert_eq!(chain(&Layer("short".into(), None)), "short");
        assert_eq!(escaped("tab\there", 64), "tab\\there");
        assert_eq!(cut("abcdef", 3), "abc…");
    }
}
