//! What the Go side of a run was: its version, the hybrid it offers first, and the
//! like-for-like handshake pairs it is judged on.

use super::results::Results;

/// The hybrid Go's `crypto/tls` offers first by default, from `go version`: the
/// `X25519Kyber768Draft00` draft up to Go 1.23, `X25519MLKEM768` from Go 1.24.
pub fn go_hybrid(version: &str) -> &'static str {
    let minor = version
        .split_whitespace()
        .find_map(|word| word.strip_prefix("go1."))
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u32>()
                .ok()
        });
    match minor {
        Some(minor) if minor >= 24 => "X25519MLKEM768",
        _ => "X25519Kyber768Draft00",
    }
}

/// The like-for-like handshake comparisons with Go: (our id's mode, Go's id's mode,
/// what the row says about the key exchange).
pub(super) fn like_for_like(results: &Results) -> [(&'static str, String); 2] {
    let theirs = match results.go.as_deref().map(go_hybrid) {
        Ok("X25519MLKEM768") => "Go X25519MLKEM768: the same hybrid".to_owned(),
        Ok(other) => format!("Go {other}: two different hybrids"),
        Err(_) => "Go its default hybrid".to_owned(),
    };
    [
        ("reload-x25519", "X25519 on both sides".to_owned()),
        (
            "reload",
            format!("hybrid on both sides, each side's default (ours X25519MLKEM768, {theirs})"),
        ),
    ]
}

/// The Go version of this run, for the tables' text.
pub(super) fn go_named(results: &Results) -> String {
    match &results.go {
        Ok(version) => format!(
            "Go {}",
            version
                .split_whitespace()
                .find(|word| word.starts_with("go1"))
                .unwrap_or(version)
        ),
        Err(_) => "Go (not measured in this run)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_hybrid_from_the_version() {
        assert_eq!(
            go_hybrid("go version go1.23.5 linux/amd64"),
            "X25519Kyber768Draft00"
        );
        assert_eq!(go_hybrid("go1.23"), "X25519Kyber768Draft00");
        assert_eq!(
            go_hybrid("go version go1.24rc1 linux/amd64"),
            "X25519MLKEM768"
        );
        assert_eq!(
            go_hybrid("go version go1.26.0 linux/amd64"),
            "X25519MLKEM768"
        );
    }
}
