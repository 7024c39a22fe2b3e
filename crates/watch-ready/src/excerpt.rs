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
//!
//! Cutting is not enough for a kube client's credential failures: an exec
//! credential plugin's error holds its command line and its whole stdout and
//! stderr, and the start of stdout is where the token is. [`credential_failure`]
//! finds such an error anywhere in a chain and gives a fixed text naming the kind
//! of failure instead; [`chain`] and [`kube_watch_error`] log that text and
//! nothing of the error's own words.

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
///
/// Escaped: control characters (`\n`, ESC, C1 controls) and every other character
/// Rust's `Debug` writes as unprintable, which is what terminals and log viewers
/// interpret or hide: bidirectional controls (U+202A-U+202E, U+2066-U+2069), line
/// and paragraph separators (U+2028, U+2029), zero-width and other format
/// characters, unassigned code points. Each becomes its visible escape (`\n`,
/// `\u{202e}`); every other character is kept. Escaping an escaped text again
/// changes nothing.
pub fn escaped(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars) + 3);
    let mut used = 0usize;
    for c in text.chars() {
        let escape = needs_escape(c);
        let len = if escape { c.escape_debug().len() } else { 1 };
        if used + len > max_chars {
            out.push('…');
            return out;
        }
        used += len;
        if escape {
            let _ = write!(out, "{}", c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `c` is written as an escape: a control character, or one `Debug` would
/// not print as itself (quotes and the backslash excepted, which are harmless).
fn needs_escape(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    if matches!(c, '\\' | '\'' | '"') || c.is_ascii() {
        return false;
    }
    let mut escaped = c.escape_debug();
    !(escaped.next() == Some(c) && escaped.next().is_none())
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
    if let Some(fixed) = credential_failure(error) {
        return fixed.to_owned();
    }
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

/// What to log and keep for a watch error: the fixed text of
/// [`credential_failure`] when the kube client's credentials failed, otherwise the
/// error's message escaped and cut (a watcher error's message already quotes its
/// source, so the chain would repeat it).
pub fn kube_watch_error(error: &kube_runtime::watcher::Error) -> String {
    match credential_failure(error) {
        Some(fixed) => fixed.to_owned(),
        None => display(error),
    }
}

/// A fixed text naming the kind of kube client credential failure in `error` or
/// any of its sources (`kube::Error::Auth`, or a `kube::client::AuthError` a
/// request's auth layer returned inside `kube::Error::Service`), or `None` when
/// the chain holds none.
///
/// Why a fixed text rather than an excerpt: the credential errors quote what the
/// credential source produced. `AuthExecRun` shows the plugin's command (whose
/// arguments may name a secret) and its stdout, which is where the plugin writes
/// the token; `AuthExec` and `AuthExecParse` quote parts of that output; the
/// outer errors (`ServiceError: …`, `failed to perform initial object list: …`)
/// repeat the inner text. No cut is short enough to be safe, so none of the
/// chain's words are used.
pub fn credential_failure(error: &(dyn Error + 'static)) -> Option<&'static str> {
    use kube::client::AuthError;
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(auth) = e.downcast_ref::<AuthError>() {
            return Some(match auth {
                AuthError::AuthExecStart(_) => {
                    "kube client credentials: the exec credential plugin could not be started (command and output not logged)"
                }
                AuthError::AuthExecRun { .. } => {
                    "kube client credentials: the exec credential plugin exited with an error (command and output not logged)"
                }
                AuthError::AuthExecParse(_) | AuthError::ExecPluginFailed => {
                    "kube client credentials: the exec credential plugin's output is not a usable ExecCredential (output not logged)"
                }
                AuthError::AuthExec(_)
                | AuthError::AuthExecSerialize(_)
                | AuthError::MissingCommand
                | AuthError::ExecMissingClusterInfo => {
                    "kube client credentials: the exec credential plugin failed (details not logged)"
                }
                AuthError::UnrefreshableTokenResponse
                | AuthError::MalformedTokenExpirationDate(_) => {
                    "kube client credentials: the credential plugin's token cannot be refreshed (details not logged)"
                }
                AuthError::InvalidBasicAuth(_) | AuthError::InvalidBearerToken(_) => {
                    "kube client credentials: the configured credential is not a valid header value (not logged)"
                }
                AuthError::ReadTokenFile(..) | AuthError::ParseTokenKey(_) => {
                    "kube client credentials: the token file could not be read (details not logged)"
                }
                _ => "kube client credentials: authentication failed (details not logged)",
            });
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What terminals and log viewers interpret or hide is escaped (issue 50): bidi
    /// controls, line and paragraph separators, zero-width characters; letters of
    /// any script are kept, and escaping twice changes nothing.
    #[test]
    fn bidi_separators_and_zero_width_characters_are_escaped() {
        for (raw, shown) in [
            ("a\u{202e}b", "a\\u{202e}b"),
            ("a\u{2066}b\u{2069}", "a\\u{2066}b\\u{2069}"),
            ("x\u{2028}y\u{2029}", "x\\u{2028}y\\u{2029}"),
            ("zero\u{200b}width\u{feff}", "zero\\u{200b}width\\u{feff}"),
            ("CN=café, O=Ümlaut, 日本", "CN=café, O=Ümlaut, 日本"),
            ("say \"hi\" \\ 'x'", "say \"hi\" \\ 'x'"),
        ] {
            assert_eq!(escaped(raw, 64), shown, "{raw:?}");
            assert_eq!(escaped(&escaped(raw, 64), 64), shown);
        }
    }

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
