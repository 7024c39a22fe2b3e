//! Text a hostile server sends, and the check that an error shows only an escaped
//! excerpt of it: what our error messages owe the logs they end up in when the text
//! comes from a server that is not ours (a tenant cluster's API server).

/// A `Status.message` a hostile API server could send: a forged log line, an ANSI
/// colour escape and 20 KiB of padding.
pub fn status_message() -> String {
    let mut message = String::from("denied\nERROR forged line \u{1b}[31mred ");
    while message.len() < 20 * 1024 {
        message.push('x');
    }
    message
}

/// Panics unless `text` (an error's `Display`) starts with `prefix`, holds no raw
/// newline or escape character, shows the start of [`status_message`] escaped, and
/// stays under 600 characters.
pub fn assert_escaped_excerpt(text: &str, prefix: &str) {
    assert!(text.starts_with(prefix), "{text:.200}");
    assert!(
        !text.contains('\n') && !text.contains('\u{1b}'),
        "{text:.200}"
    );
    assert!(text.contains("denied\\nERROR forged line"), "{text:.200}");
    assert!(text.chars().count() <= 600, "{} characters", text.len());
}
