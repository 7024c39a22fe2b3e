//! Comments, string literals and character literals blanked out of Rust source,
//! lines kept.

/// `source` with comments, string literals and character literals blanked (every
/// character but a newline becomes a space), so that line numbers still hold.
pub(super) fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |out: &mut String, chars: &[char]| {
        for &c in chars {
            out.push(if c == '\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let end = if c == '/' && next == Some('/') {
            // A line comment, doc comments included.
            let mut end = i;
            while end < chars.len() && chars[end] != '\n' {
                end += 1;
            }
            end
        } else if c == '/' && next == Some('*') {
            // A block comment; they nest.
            let mut depth = 0usize;
            let mut end = i;
            while end < chars.len() {
                match (chars[end], chars.get(end + 1).copied()) {
                    ('/', Some('*')) => {
                        depth += 1;
                        end += 2;
                    }
                    ('*', Some('/')) => {
                        depth -= 1;
                        end += 2;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => end += 1,
                }
            }
            end
        } else if c == '"' {
            // A string (its `b` or `c` prefix, if any, stays as a harmless word).
            let mut end = i + 1;
            while end < chars.len() {
                match chars[end] {
                    '\\' => end += 2,
                    '"' => {
                        end += 1;
                        break;
                    }
                    _ => end += 1,
                }
            }
            end.min(chars.len())
        } else if c == '_' || c.is_alphanumeric() {
            let mut word_end = i;
            while word_end < chars.len()
                && (chars[word_end] == '_' || chars[word_end].is_alphanumeric())
            {
                word_end += 1;
            }
            let word: String = chars[i..word_end].iter().collect();
            let mut quote = word_end;
            while chars.get(quote) == Some(&'#') {
                quote += 1;
            }
            if matches!(word.as_str(), "r" | "br" | "cr") && chars.get(quote) == Some(&'"') {
                // A raw string: it ends at a quote followed by as many `#`.
                let hashes = quote - word_end;
                let mut end = quote + 1;
                loop {
                    if end >= chars.len() {
                        break chars.len();
                    }
                    if chars[end] == '"' && (1..=hashes).all(|k| chars.get(end + k) == Some(&'#')) {
                        break end + 1 + hashes;
                    }
                    end += 1;
                }
            } else {
                out.push_str(&word);
                i = word_end;
                continue;
            }
        } else if c == '\'' {
            // A character literal, or a lifetime or label (left as it is).
            if next == Some('\\') {
                let mut end = i + 3;
                while end < chars.len() && chars[end] != '\'' && chars[end] != '\n' {
                    end += 1;
                }
                (end + 1).min(chars.len())
            } else if chars.get(i + 2) == Some(&'\'') {
                i + 3
            } else {
                out.push(c);
                i += 1;
                continue;
            }
        } else {
            out.push(c);
            i += 1;
            continue;
        };
        blank(&mut out, &chars[i..end]);
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_keeps_lines_and_code() {
        let source = "let a = \"x\ny\"; // c\nlet b = r#\"\"#; let c = '\"'; fn f<'a>() {}\n";
        let stripped = strip(source);
        assert_eq!(stripped.lines().count(), source.lines().count());
        assert_eq!(
            stripped,
            "let a =   \n  ;     \nlet b =      ; let c =    ; fn f<'a>() {}\n"
        );
    }
}
