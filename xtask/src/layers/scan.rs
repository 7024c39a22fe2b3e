//! A hand-written Rust tokenizer over stripped source, and the paths it writes:
//! `use` trees (grouped, nested, renamed), inline paths, `self::`/`super::` paths,
//! each in the module it is written in (inline `mod x { … }` blocks included); also
//! the structs, enums and unions it defines and the inherent impls it writes.

use super::ModulePath;

/// What a file writes, each item in the module it is written in.
pub(super) struct Scanned {
    pub(super) written: Vec<Written>,
    /// The inline `mod x { … }` blocks it defines.
    pub(super) inline_modules: Vec<ModulePath>,
    /// The structs, enums and unions it defines.
    pub(super) defined: Vec<Named>,
    /// The inherent impls it writes (`impl Type { … }`, `impl<T> a::Type<T> { … }`),
    /// by the type's name (the last segment of the path written); not trait impls.
    pub(super) inherent_impls: Vec<Named>,
}

/// A type named at a line of a file: defined there, or given an inherent impl.
pub(super) struct Named {
    pub(super) module: ModulePath,
    pub(super) name: String,
    pub(super) line: usize,
}

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

/// The paths written in a file's tokens, the inline modules, types and inherent
/// impls it defines; `file_module` is the module the file itself defines.
pub(super) fn scan(tokens: &[Token], file_module: &[String]) -> Scanned {
    let mut written = Vec::new();
    let mut inline_modules = Vec::new();
    let mut defined = Vec::new();
    let mut inherent_impls = Vec::new();
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
            Tok::Word(word) if word == "impl" && starts_item(tokens, i) => {
                if let Some(name) = inherent_impl(tokens, i + 1) {
                    inherent_impls.push(Named {
                        module: current(&open),
                        name,
                        line: tokens[i].line,
                    });
                }
                // The header's paths are read as any others.
                i += 1;
            }
            Tok::Word(word)
                if starts_path && matches!(word.as_str(), "struct" | "enum" | "union") =>
            {
                if let Some(name) = defined_name(tokens, i) {
                    defined.push(Named {
                        module: current(&open),
                        name,
                        line: tokens[i].line,
                    });
                }
                i += 1;
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
    Scanned {
        written,
        inline_modules,
        defined,
        inherent_impls,
    }
}

/// Whether `tokens[i]` starts an item (an `impl` block rather than an `impl Trait`
/// type): it follows the start of the file, the end of an item or attribute, the
/// opening of a block, or `unsafe`/`default`.
fn starts_item(tokens: &[Token], i: usize) -> bool {
    let Some(before) = i.checked_sub(1).map(|before| &tokens[before]) else {
        return true;
    };
    match &before.tok {
        Tok::Punct(c) => matches!(c, ';' | '{' | '}' | ']'),
        Tok::Word(word) => matches!(word.as_str(), "unsafe" | "default"),
        Tok::PathSep => false,
    }
}

/// Whether `tokens[i]` closes an angle bracket: a `>` that is not part of `->` or
/// `=>`.
fn closes_angle(tokens: &[Token], i: usize) -> bool {
    tokens[i].tok == Tok::Punct('>')
        && !(i > 0
            && (tokens[i - 1].tok == Tok::Punct('-') || tokens[i - 1].tok == Tok::Punct('=')))
}

/// The name of the type an `impl` header (its tokens from `tokens[i]`, just after
/// `impl`) gives inherent methods: the last segment of the path written, `Type` in
/// `impl<T> crate::a::Type<T> where T: X { … }`. `None` for a trait impl (a `for`
/// outside brackets before the body or `where`), and for what is not a plain path
/// (`impl dyn Trait`, a macro's fragment it cannot read).
fn inherent_impl(tokens: &[Token], mut i: usize) -> Option<String> {
    // The impl's own generics.
    if is_tok(tokens.get(i), &Tok::Punct('<')) {
        let mut depth = 0usize;
        while i < tokens.len() {
            if tokens[i].tok == Tok::Punct('<') {
                depth += 1;
            } else if closes_angle(tokens, i) {
                depth -= 1;
                if depth == 0 {
                    i += 1;
                    break;
                }
            }
            i += 1;
        }
    }
    // The self type's path.
    let mut name = None;
    if is_tok(tokens.get(i), &Tok::PathSep) {
        i += 1;
    }
    while let Some(Token {
        tok: Tok::Word(word),
        ..
    }) = tokens.get(i)
    {
        if matches!(word.as_str(), "dyn" | "for" | "where" | "impl") {
            return None;
        }
        name = Some(raw(word));
        i += 1;
        if is_tok(tokens.get(i), &Tok::PathSep) {
            i += 1;
        } else {
            break;
        }
    }
    let name = name?;
    // The rest of the header, up to the body: a `for` outside brackets makes the
    // path a trait's.
    let mut depth = 0usize;
    while let Some(token) = tokens.get(i) {
        match &token.tok {
            Tok::Punct('<' | '(' | '[') => depth += 1,
            Tok::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Tok::Punct('>') if closes_angle(tokens, i) => depth = depth.saturating_sub(1),
            Tok::Punct('{' | ';') if depth == 0 => return Some(name),
            Tok::Word(word) if depth == 0 && word == "for" => return None,
            Tok::Word(word) if depth == 0 && word == "where" => return Some(name),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The name a `struct`, `enum` or `union` at `tokens[i]` defines; `None` when it is
/// not a definition (`union` is also an ordinary name, as in `a.union(b)`).
fn defined_name(tokens: &[Token], i: usize) -> Option<String> {
    let Some(Token {
        tok: Tok::Word(name),
        ..
    }) = tokens.get(i + 1)
    else {
        return None;
    };
    if is_word(tokens.get(i), "union")
        && !(is_tok(tokens.get(i + 2), &Tok::Punct('{'))
            || is_tok(tokens.get(i + 2), &Tok::Punct('<'))
            || is_word(tokens.get(i + 2), "where"))
    {
        return None;
    }
    Some(raw(name))
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
    use super::{scan, tokenize};
    use crate::layers::check::check;
    use crate::layers::fixtures::{FIXTURE_RULES, LIB, found, tree};
    use crate::layers::rules::parse;
    use crate::layers::strip::strip;

    /// Each inherent impl's (module, line, type name) and each type defined, read
    /// from `lib.rs`-like source.
    fn impls_and_types(source: &str) -> (Vec<(String, usize, String)>, Vec<String>) {
        let scanned = scan(&tokenize(&strip(source)), &[]);
        let impls = scanned
            .inherent_impls
            .into_iter()
            .map(|named| (named.module.join("::"), named.line, named.name))
            .collect();
        let types = scanned
            .defined
            .into_iter()
            .map(|named| named.name)
            .collect();
        (impls, types)
    }

    #[test]
    fn inherent_impls_are_told_from_trait_impls_and_impl_types() {
        let source = r#"struct Plain;
impl Plain { fn f() -> impl Sized {} }
impl<F: Fn() -> u8, const N: usize> crate::a::Holder<F, { N }> where F: Clone {}
#[cfg(test)]
impl<T> Wrapped<Vec<T>> { fn g(x: impl Into<T>) -> Box<dyn Fn(&T) -> T> { todo!() } }
mod inner { impl super::Plain {} enum Kind { A } }
impl<T> Clone for Wrapped<T> {}
impl<F: for<'a> Fn(&'a u8) -> u8> Trait<F> for Plain {}
impl From<fn() -> u8> for Plain where Plain: Sized {}
unsafe impl Send for Plain {}
impl !Sync for Plain {}
impl dyn Trait {}
fn h(set: S) -> impl Iterator<Item = u8> { set.union(&set); "impl Plain {}"; }
union Bits { a: u8 }
// impl Plain {}
"#;
        let (impls, types) = impls_and_types(source);
        let expected = [
            ("", 2, "Plain"),
            ("", 3, "Holder"),
            ("", 5, "Wrapped"),
            ("inner", 6, "Plain"),
        ]
        .map(|(module, line, name)| (module.to_owned(), line, name.to_owned()));
        assert_eq!(impls, expected);
        assert_eq!(types, ["Plain", "Kind", "Bits"]);
    }

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
