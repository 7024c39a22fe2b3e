//! Outside text in errors: escaped and cut (the kubeconfig's writer chose it).
//!
//! The same rule as `watch_ready::excerpt` (svc-tls's and kube-construct's), kept
//! here in 40 lines rather than making this crate depend on watch-ready, which
//! brings kube-runtime into a crate that watches nothing.

use super::MESSAGE_CHARS;

/// `error` and its sources joined with `: ` (thiserror's `{0}` layers that repeat
/// their source are skipped). Stops reading once it is long enough to be cut.
pub(super) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut current = Some(error);
    while let Some(e) = current {
        let message = e.to_string();
        if !text.ends_with(&message) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&message);
        }
        if text.len() > MESSAGE_CHARS * 4 {
            break;
        }
        current = e.source();
    }
    text
}

/// `text` with control characters escaped (`\n`, `\u{1b}`), cut to at most
/// `max_chars` characters of output, then `…`.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars) + 3);
    let mut used = 0usize;
    for c in text.chars() {
        let escaped = c.is_control();
        let len = if escaped { c.escape_debug().len() } else { 1 };
        if used + len > max_chars {
            out.push('…');
            return out;
        }
        used += len;
        if escaped {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}
