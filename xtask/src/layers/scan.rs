//! A hand-written Rust tokenizer over stripped source, and the paths it writes:
//! `use` trees (grouped, nested, renamed), inline paths, `self::`/`super::` paths,
//! each in the module it is written in (inline `mod x { … }` blocks included).

use super::ModulePath;

/// A path written in a file, before resolution.
pub(super) struct Written {
    /// The module it is written in (the file's, plus any inline `mod` blocks).
    pub(super) module: ModulePath,
    pub(super) segments: Vec<String>,
    pub(super) line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    /// An identifier or keyword (a raw identifier keeps its `r#`); also numbers.
    Word(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug)]
pub(super) struct Token {
    tok: Tok,
    line: usize,
}

/// The tokens of stripped source, with 1-based line numbers. `$` is dropped, so that
/// `$crate::x` in a macro reads as `crate::x`.
pub(super) fn tokenize(stripped: &str) -> Vec<Token> {
    let chars: Vec<char> = stripped.chars().collect();
    let word_char = |c: char| c == '_' || c.is_alphanumeric();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() || c == '$' {
            i += 1;
        } else if word_char(c) {
            let start = i;
            while i < chars.len() && word_char(chars[i]) {
                i += 1;
            }
            // `r#ident`
            if i - start == 1
                && c == 'r'
                && chars.get(i) == Some(&'#')
                && chars.get(i + 1).is_some_and(|&c| word_char(c))
            {
                i += 1;
                while i < chars.len() && word_char(chars[i]) {
                    i += 1;
                }
            }
            tokens.push(Token {
                tok: Tok::Word(chars[start..i].iter().collect()),
                line,
            });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            tokens.push(Token {
                tok: Tok::Punct(c),
                line,
            });
            i += 1;
        }
    }
    tokens
}

fn is_word(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token { tok: Tok::Word(w), .. }) if w == word)
}

fn is_tok(token: Option<&Token>, tok: &Tok) -> bool {
    token.is_some_and(|token| &token.tok == tok)
}

/// The paths written in a file's tokens, and the inline modules it defines;
/// `file_module` is the module the file itself defines.
pub(super) fn scan(tokens: &[Token], file_module: &[String]) -> (Vec<Written>, Vec<ModulePath>) {
    let mut written = Vec::new();
    let mut inline_modules = Vec::new();
    // Open inline `mod name {` blocks, with the brace depth inside each.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let current = |open: &[(String, usize)]| {
        let mut module = file_module.to_vec();
        module.extend(open.iter().map(|(name, _)| name.clone()));
        module
    };
    let mut i = 0;
    while i < tokens.len() {
        // A path start is not the continuation of another path, nor a field or method.
        let starts_path = i == 0
            || !(is_tok(tokens.get(i - 1), &Tok::PathSep)
                || is_tok(tokens.get(i - 1), &Tok::Punct('.')));
        match &tokens[i].tok {
            Tok::Word(word)
                if word == "use" && starts_path && !is_tok(tokens.get(i + 1), &Tok::Punct('<')) =>
            {
                i += 1;
                let mut leaves = Vec::new();
                use_tree(tokens, &mut i, &mut Vec::new(), &mut leaves);
                // Whatever is left of a tree that could not be read, up to its `;`.
                while let Some(token) = tokens.get(i) {
                    i += 1;
                    if token.tok == Tok::Punct(';') {
                        break;
                    }
                }
                let module = current(&open);
                written.extend(leaves.into_iter().map(|(segments, line)| Written {
                    module: module.clone(),
                    segments,
                    line,
                }));
            }
            Tok::Word(word) if word == "mod" && is_tok(tokens.get(i + 2), &Tok::Punct('{')) => {
                if let Some(Token {
                    tok: Tok::Word(name),
                    ..
                }) = tokens.get(i + 1)
                {
                    depth += 1;
                    open.push((raw(name), depth));
                    inline_modules.push(current(&open));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if open.last().is_some_and(|(_, inside)| *inside == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Word(first) if starts_path && is_tok(tokens.get(i + 1), &Tok::PathSep) => {
                let line = tokens[i].line;
                let mut segments = vec![raw(first)];
                i += 1;
                while is_tok(tokens.get(i), &Tok::PathSep) {
                    match tokens.get(i + 1) {
                        Some(Token {
                            tok: Tok::Word(segment),
                            ..
                        }) => {
                            segments.push(raw(segment));
                            i += 2;
                        }
                        _ => break,
                    }
                }
                written.push(Written {
                    module: current(&open),
                    segments,
                    line,
                });
            }
            _ => i += 1,
        }
    }
    (written, inline_modules)
}

/// `r#type` as the name `type`.
fn raw(word: &str) -> String {
    word.strip_prefix("r#").unwrap_or(word).to_owned()
}

/// Parses one use tree at `tokens[*i]`, pushing each leaf path (with the line of
/// its first token in the tree) onto `leaves`; `prefix` holds the enclosing groups'
/// segments. Stops at the `;` or at what it cannot read.
fn use_tree(
    tokens: &[Token],
    i: &mut usize,
    prefix: &mut Vec<String>,
    leaves: &mut Vec<(Vec<String>, usize)>,
) {
    let base = prefix.len();
    let mut line = None;
    if is_tok(tokens.get(*i), &Tok::PathSep) {
        // `::name`: another crate.
        line = Some(tokens[*i].line);
        prefix.push("::".to_owned());
        *i += 1;
    }
    let mut group = false;
    while let Some(token) = tokens.get(*i) {
        match &token.tok {
            Tok::Word(word) if word != "as" => {
                line.get_or_insert(token.line);
                prefix.push(raw(word));
                *i += 1;
                if is_tok(tokens.get(*i), &Tok::PathSep) {
                    *i += 1;
                } else {
                    break;
                }
            }
            Tok::Punct('*') => {
                line.get_or_insert(token.line);
                prefix.push("*".to_owned());
                *i += 1;
                break;
            }
            Tok::Punct('{') => {
                group = true;
                *i += 1;
                while let Some(token) = tokens.get(*i) {
                    match token.tok {
                        Tok::Punct('}') => {
                            *i += 1;
                            break;
                        }
                        Tok::Punct(',') => *i += 1,
                        Tok::Punct(';') => break,
                        _ => {
                            let before = *i;
                            use_tree(tokens, i, prefix, leaves);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
                break;
            }
            _ => break,
        }
    }
    if is_word(tokens.get(*i), "as") {
        *i += if matches!(
            tokens.get(*i + 1),
            Some(Token {
                tok: Tok::Word(_),
                ..
            })
        ) {
            2
        } else {
            1
        };
    }
    if !group && prefix.len() > base {
        leaves.push((prefix.clone(), line.unwrap_or(0)));
    }
    prefix.truncate(base);
}

#[cfg(test)]
mod tests {
    use crate::layers::check::check;
    use crate::layers::fixtures::{FIXTURE_RULES, LIB, found, tree};
    use crate::layers::rules::parse;

    #[test]
    fn comments_strings_and_other_crates_are_allowed() {
        let material = r####"//! See [`crate::spiffe::SpiffeError`] and crate::identity.
/// Links [`crate::identity::Identity`] and [`super::spiffe`].
/* block /* nested crate::spiffe::X */ still a comment: crate::spiffe::Y */
#[doc = "crate::spiffe::D"]
const A: &str = "crate::spiffe::Z \" crate::identity::Q";
const B: &str = r#"a "quoted" crate::identity::Q"#;
const C: &[u8] = br##"crate::spiffe::"# "##;
const D: char = '"';
const E: char = '\'';
const F: char = '{';
const G: u8 = b'"';
const H: char = '\u{7b}';
const I: &str = "crate::spiffe::after_chars";
fn f<'a>(x: &'a str) -> &'a str { 'outer: loop { break 'outer x; } }
fn g() -> ::spiffe::X509Svid { spiffe::workload::connect(); todo!() }
use ::spiffe::Thing;
use std::sync::{watch, Arc};
use super::material::der::Der;
use self::der::Inner;
fn h() -> impl Sized + use<> { x.spiffe::<u8>() }
pub(crate) mod der { use super::super::material::Pem; }
pub(in crate::material) fn i() {}
"####;
        let dir = tree(&[("lib.rs", LIB), ("material/mod.rs", material)]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(found(&report), []);
        assert_eq!(report.files, 2);
    }
}
