//! The workspace's rule for errors
//! (docs/decisions/errors-cause-in-source.md), checked over a whole chain.
//!
//! An error's `Display` says what failed at its own layer; the cause is returned by
//! `std::error::Error::source` and nowhere else, so a chain reporter (anyhow's
//! `{:#}`, `svc_tls::excerpt::chain`, the example's printer) shows each cause once.
//! Every link of a chain also shows outside text only as a short escaped excerpt:
//! no raw control characters, and no link longer than [`MAX_LINK_CHARS`].

use std::error::Error;

/// The longest `Display` one link of a chain may have: its own words plus a short
/// excerpt of outside text (the excerpts are cut at 512 characters).
pub const MAX_LINK_CHARS: usize = 1024;

/// Why a chain breaks the rule: the link (0 = the error itself) and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct Violation {
    /// The link's position in the chain, 0 for the outermost.
    pub link: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// Every violation of the rule in `error`'s chain (empty when it holds): a link whose
/// `Display` contains its `source()`'s `Display`, a link with a raw control character,
/// a link longer than [`MAX_LINK_CHARS`].
pub fn violations(error: &(dyn Error + 'static)) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut current = Some(error);
    let mut link = 0usize;
    while let Some(e) = current {
        let text = e.to_string();
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            found.push(Violation {
                link,
                problem: format!("raw control character {c:?} in {:?}", excerpt(&text)),
            });
        }
        let chars = text.chars().count();
        if chars > MAX_LINK_CHARS {
            found.push(Violation {
                link,
                problem: format!("{chars} characters, more than {MAX_LINK_CHARS}"),
            });
        }
        if let Some(source) = e.source() {
            let inner = source.to_string();
            if !inner.is_empty() && text.contains(&inner) {
                found.push(Violation {
                    link,
                    problem: format!(
                        "Display {:?} contains its source's Display {:?}",
                        excerpt(&text),
                        excerpt(&inner)
                    ),
                });
            }
        }
        current = e.source();
        link += 1;
        if link > 64 {
            break;
        }
    }
    found
}

/// Panics naming `what` and every violation unless `error`'s chain follows the rule.
pub fn assert_follows_rule(what: &str, error: &(dyn Error + 'static)) {
    let found = violations(error);
    assert!(found.is_empty(), "{what}: {found:#?}");
}

/// `error` and each of its sources joined with `: `, whole (neither cut nor
/// escaped): what a test reads where it used to read the one `Display` that also
/// quoted the cause.
pub fn full_chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(e) = current {
        text.push_str(": ");
        text.push_str(&e.to_string());
        current = e.source();
    }
    text
}

fn excerpt(text: &str) -> String {
    text.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    /// A cause.
    #[derive(Debug)]
    struct Inner;
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the inner cause")
        }
    }
    impl Error for Inner {}

    /// Breaks the rule: prints its source and returns it.
    #[derive(Debug)]
    struct PrintsAndReturns(Inner);
    impl fmt::Display for PrintsAndReturns {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "outer failed: {}", self.0)
        }
    }
    impl Error for PrintsAndReturns {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Follows it: its own words, the cause returned.
    #[derive(Debug)]
    struct ReturnsOnly(Inner);
    impl fmt::Display for ReturnsOnly {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer failed")
        }
    }
    impl Error for ReturnsOnly {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Raw server text in a link below the top.
    #[derive(Debug)]
    struct Raw(String);
    impl fmt::Display for Raw {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl Error for Raw {}

    #[derive(Debug)]
    struct Wraps(Raw);
    impl fmt::Display for Wraps {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("request refused")
        }
    }
    impl Error for Wraps {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_printing_and_returning_its_source_is_caught() {
        let found = violations(&PrintsAndReturns(Inner));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].link, 0);
        assert!(found[0].problem.contains("contains its source's Display"));
    }

    #[test]
    fn an_error_returning_its_source_only_passes() {
        assert_eq!(violations(&ReturnsOnly(Inner)), Vec::new());
    }

    #[test]
    fn raw_or_long_server_text_anywhere_in_the_chain_is_caught() {
        let found = violations(&Wraps(Raw(crate::hostile::status_message())));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|v| v.link == 1));
        assert!(found[0].problem.contains("control character"));
        assert!(found[1].problem.contains("characters, more than"));
    }
}
