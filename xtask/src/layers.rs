//! `cargo xtask layers`: checks the intended layering of crates' modules against the
//! rules in `layers.toml` at the workspace root, so that the shape cannot drift
//! silently (`cargo xtask ci` runs it).
//!
//! A rule names a module `from` (that module's file or folder and everything under
//! it, inline `mod x { … }` blocks included) and the modules it must not name. A file
//! names a module through a path in code:
//!
//! - `use` declarations, `pub use` and `pub(…) use` included, with grouped and nested
//!   trees (`use crate::{a::x, b::{self, y as z}}`);
//! - inline paths such as `crate::a::B::new()`;
//! - `self::` and `super::` paths (in `use` or inline), resolved against the module
//!   they are written in: `super::x` in `identity::resolver` is `identity::x`, and in
//!   that file's `mod tests { … }` it is `identity::resolver::x`;
//! - a path whose first segment is a child module of the module it is written in
//!   (`use material::Pem;` in `lib.rs`).
//!
//! Comments (doc comments and intra-doc links too), string literals (raw and byte
//! strings too) and character literals are blanked before scanning. Not modelled:
//! `#[path]` attributes, what a glob import or a re-export brings in (only the path
//! written is checked), and paths assembled by macros from fragments.
//!
//! The rules file:
//!
//! ```toml
//! [[crate]]
//! src = "crates/svc-tls/src"    # a crate's source folder, from the workspace root
//! [[crate.rule]]
//! from = "material"             # a module path: `material`, `identity::resolver`
//! forbid = ["identity", "spiffe"]
//! why = "material knows no source"   # optional; printed with a violation
//! ```

use std::{
    collections::BTreeSet,
    fmt,
    path::{Path, PathBuf},
};

use serde::Deserialize;

use crate::process::workspace_root;

/// The rules file, relative to the workspace root.
const RULES: &str = "layers.toml";

/// Entry point of the `layers` task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask layers".into());
    }
    let root = workspace_root();
    let rules = load(&root.join(RULES))?;
    let report = check(&root, &rules)?;
    for note in &report.notes {
        eprintln!("xtask: layers: note: {note}");
    }
    for violation in &report.violations {
        println!("{violation}");
    }
    let count = report.violations.len();
    let summary = format!(
        "layers: {} files scanned, {} rules, {count} violation{}",
        report.files,
        report.rules,
        if count == 1 { "" } else { "s" }
    );
    if report.violations.is_empty() {
        eprintln!("xtask: {summary}");
        Ok(())
    } else {
        Err(format!("{summary} (rules in {RULES})"))
    }
}

/// `layers.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(rename = "crate", default)]
    crates: Vec<CrateEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CrateEntry {
    src: String,
    #[serde(rename = "rule", default)]
    rules: Vec<RuleEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    from: String,
    forbid: Vec<String>,
    why: Option<String>,
}

/// A module path inside a crate, without `crate::`; empty for the crate root.
type ModulePath = Vec<String>;

/// The checked rules of one crate.
#[derive(Debug)]
pub(crate) struct CrateRules {
    /// The source folder, relative to the workspace root.
    src: String,
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    from: ModulePath,
    forbid: Vec<ModulePath>,
    why: Option<String>,
}

/// Reads and checks the rules file.
pub(crate) fn load(path: &Path) -> Result<Vec<CrateRules>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    parse(&text).map_err(|error| format!("{}: {error}", path.display()))
}

/// The rules in `text`, each module path checked.
fn parse(text: &str) -> Result<Vec<CrateRules>, String> {
    let file: RulesFile = toml::from_str(text).map_err(|error| error.to_string())?;
    file.crates
        .into_iter()
        .map(|entry| {
            if entry.src.trim().is_empty() {
                return Err("a [[crate]] has an empty `src`".to_owned());
            }
            let rules = entry
                .rules
                .into_iter()
                .map(|rule| {
                    let context = || format!("{}: rule from `{}`", entry.src, rule.from);
                    let from = module_path(&rule.from)
                        .map_err(|error| format!("{}: `from`: {error}", context()))?;
                    if rule.forbid.is_empty() {
                        return Err(format!("{}: `forbid` is empty", context()));
                    }
                    let forbid = rule
                        .forbid
                        .iter()
                        .map(|text| {
                            let forbidden = module_path(text)
                                .map_err(|error| format!("{}: `forbid`: {error}", context()))?;
                            if from.starts_with(&forbidden) {
                                return Err(format!(
                                    "{}: forbids `{text}`, which contains `{}` itself",
                                    context(),
                                    rule.from
                                ));
                            }
                            Ok(forbidden)
                        })
                        .collect::<Result<_, String>>()?;
                    Ok(Rule {
                        from,
                        forbid,
                        why: rule.why,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(CrateRules {
                src: entry.src,
                rules,
            })
        })
        .collect()
}

/// `identity::resolver` as its segments; a module path, not a `crate::` path.
fn module_path(text: &str) -> Result<ModulePath, String> {
    let segments: ModulePath = text.split("::").map(str::to_owned).collect();
    for segment in &segments {
        let mut chars = segment.chars();
        let identifier = chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
            && chars.all(|c| c == '_' || c.is_alphanumeric());
        if !identifier || matches!(segment.as_str(), "crate" | "self" | "super" | "_") {
            return Err(format!(
                "`{text}` is not a module path (write `a::b`, without `crate::`)"
            ));
        }
    }
    Ok(segments)
}

/// What one run found.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) files: usize,
    pub(crate) rules: usize,
    pub(crate) violations: Vec<Violation>,
    /// Modules the rules name that no file defines (yet): their rules check nothing.
    pub(crate) notes: Vec<String>,
}

/// A file under a rule's `from` naming a path under one of its `forbid` modules.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Violation {
    /// The file, relative to the root the check ran from.
    pub(crate) file: PathBuf,
    pub(crate) line: usize,
    /// The module the path is written in.
    pub(crate) module: ModulePath,
    /// The path named, resolved to a `crate::` path.
    pub(crate) path: ModulePath,
    /// The rule's `why`, or which rule it is.
    pub(crate) why: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let module = if self.module.is_empty() {
            "crate".to_owned()
        } else {
            self.module.join("::")
        };
        write!(
            f,
            "{}:{}: module `{module}` imports `crate::{}` (forbidden: {})",
            self.file.display(),
            self.line,
            self.path.join("::"),
            self.why
        )
    }
}

/// Checks every crate in `rules`, their `src` folders taken relative to `root`.
pub(crate) fn check(root: &Path, rules: &[CrateRules]) -> Result<Report, String> {
    let mut report = Report {
        files: 0,
        rules: rules.iter().map(|krate| krate.rules.len()).sum(),
        violations: Vec::new(),
        notes: Vec::new(),
    };
    for krate in rules {
        check_crate(root, krate, &mut report)?;
    }
    report.violations.sort();
    report.violations.dedup();
    Ok(report)
}

/// A path written in a file, before resolution.
struct Written {
    /// The module it is written in (the file's, plus any inline `mod` blocks).
    module: ModulePath,
    segments: Vec<String>,
    line: usize,
}

fn check_crate(root: &Path, krate: &CrateRules, report: &mut Report) -> Result<(), String> {
    let src = root.join(&krate.src);
    if !src.is_dir() {
        return Err(format!(
            "{RULES}: `src = \"{}\"` is not a directory under {}",
            krate.src,
            root.display()
        ));
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files)?;
    files.sort();

    // Every module first (files and inline blocks): a path may start with a child.
    let mut known: BTreeSet<ModulePath> = BTreeSet::new();
    let mut scanned = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
        let module = file_module(&src, file)?;
        let (written, inline) = scan(&tokenize(&strip(&text)), &module);
        known.insert(module);
        known.extend(inline);
        scanned.push((file, written));
    }
    report.files += files.len();

    let named = krate
        .rules
        .iter()
        .flat_map(|rule| std::iter::once(&rule.from).chain(&rule.forbid));
    let mut missing: Vec<String> = Vec::new();
    for module in named {
        let shown = module.join("::");
        if !known.iter().any(|known| known.starts_with(module)) && !missing.contains(&shown) {
            missing.push(shown);
        }
    }
    if !missing.is_empty() {
        report.notes.push(format!(
            "{}: no module yet for {}",
            krate.src,
            missing
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }

    // The most specific rule speaks for a path that several rules forbid.
    let mut rules: Vec<&Rule> = krate.rules.iter().collect();
    rules.sort_by_key(|rule| std::cmp::Reverse(rule.from.len()));
    for (file, written) in scanned {
        let shown = file.strip_prefix(root).unwrap_or(file).to_path_buf();
        for path in written {
            let Some(resolved) = resolve(&path.segments, &path.module, &known) else {
                continue;
            };
            let hit = rules.iter().find_map(|rule| {
                if !path.module.starts_with(&rule.from) {
                    return None;
                }
                let forbidden = rule
                    .forbid
                    .iter()
                    .find(|forbidden| resolved.starts_with(forbidden))?;
                Some(rule.why.clone().unwrap_or_else(|| {
                    format!(
                        "`{}` may not name `{}`",
                        rule.from.join("::"),
                        forbidden.join("::")
                    )
                }))
            });
            if let Some(why) = hit {
                report.violations.push(Violation {
                    file: shown.clone(),
                    line: path.line,
                    module: path.module,
                    path: resolved,
                    why,
                });
            }
        }
    }
    Ok(())
}

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot list {}: {error}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|error| format!("cannot list {}: {error}", dir.display()))?
            .path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module a file defines: `src/identity/resolver.rs` is `identity::resolver`,
/// `src/identity/mod.rs` is `identity`, `src/lib.rs` and `src/main.rs` the root.
fn file_module(src: &Path, file: &Path) -> Result<ModulePath, String> {
    let relative = file
        .strip_prefix(src)
        .map_err(|_| format!("{} is not under {}", file.display(), src.display()))?;
    let mut segments = relative
        .with_extension("")
        .components()
        .map(|component| {
            component
                .as_os_str()
                .to_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{}: the path is not UTF-8", file.display()))
        })
        .collect::<Result<ModulePath, String>>()?;
    match segments.last().map(String::as_str) {
        Some("mod") => {
            segments.pop();
        }
        Some("lib" | "main") if segments.len() == 1 => segments.clear(),
        _ => {}
    }
    Ok(segments)
}

/// `segments`, written in `module`, as a path from the crate root; `None` when it
/// does not lead into this crate (another crate, `Self::`, a local name).
fn resolve(
    segments: &[String],
    module: &[String],
    known: &BTreeSet<ModulePath>,
) -> Option<ModulePath> {
    let (first, rest) = segments.split_first()?;
    let (mut resolved, mut rest): (ModulePath, &[String]) = match first.as_str() {
        "crate" => (Vec::new(), rest),
        "self" => (module.to_vec(), rest),
        "super" => (module.to_vec(), segments),
        _ => {
            let mut child = module.to_vec();
            child.push(first.clone());
            if !known.contains(&child) {
                return None;
            }
            (module.to_vec(), segments)
        }
    };
    while let Some((segment, tail)) = rest.split_first() {
        if segment != "super" {
            break;
        }
        resolved.pop()?;
        rest = tail;
    }
    for segment in rest {
        match segment.as_str() {
            "self" => {}
            "super" | "crate" | "::" => return None,
            _ => resolved.push(segment.clone()),
        }
    }
    Some(resolved)
}

/// `source` with comments, string literals and character literals blanked (every
/// character but a newline becomes a space), so that line numbers still hold.
fn strip(source: &str) -> String {
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

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// An identifier or keyword (a raw identifier keeps its `r#`); also numbers.
    Word(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

/// The tokens of stripped source, with 1-based line numbers. `$` is dropped, so that
/// `$crate::x` in a macro reads as `crate::x`.
fn tokenize(stripped: &str) -> Vec<Token> {
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
fn scan(tokens: &[Token], file_module: &[String]) -> (Vec<Written>, Vec<ModulePath>) {
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
    use super::*;

    const FIXTURE_RULES: &str = r#"
[[crate]]
src = "fixture/src"

[[crate.rule]]
from = "material"
forbid = ["identity", "spiffe"]
why = "material knows no source"

[[crate.rule]]
from = "identity::resolver"
forbid = ["identity::from_secret", "spiffe"]
why = "the resolver does not know its implementations"

[[crate.rule]]
from = "identity"
forbid = ["spiffe"]
"#;

    /// Writes `files` (path under `fixture/src`, contents) into a fresh directory.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join("fixture/src").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    /// (file, line, `crate::` path) of each violation.
    fn found(report: &Report) -> Vec<(String, usize, String)> {
        report
            .violations
            .iter()
            .map(|v| {
                (
                    v.file.display().to_string(),
                    v.line,
                    format!("crate::{}", v.path.join("::")),
                )
            })
            .collect()
    }

    const LIB: &str = "pub mod material;\npub mod identity;\npub mod spiffe;\n\
                       use spiffe::Root;\nuse material::Pem;\n";

    #[test]
    fn every_form_of_forbidden_path_is_reported_at_its_line() {
        let dir = tree(&[
            ("lib.rs", LIB),
            (
                "material/mod.rs",
                r##"//! Material; see [`crate::spiffe::Svid`].
use crate::spiffe::SpiffeError;
pub use crate::identity::Identity;
pub(crate) use crate::{
    der::Der,
    spiffe::{self, stream::Stream as S},
};
const QUOTE: char = '"';
const RAW: &str = r#"a "quoted" word"#;
impl<'a> Der<'a> {
    fn f(&self) -> usize { crate::identity::resolver::count() }
}
pub mod der;
#[cfg(test)]
mod tests {
    use super::super::spiffe::Fake;
}
"##,
            ),
            ("material/der.rs", "use super::super::{spiffe as s};\n"),
            (
                "identity/resolver.rs",
                "use super::Seam;\n\
                 use super::from_secret::SecretIdentity;\n\
                 fn f() { let _ = self::helper(); }\n\
                 mod tests {\n    use super::super::from_secret::Fixture;\n    use super::*;\n}\n\
                 fn g() -> crate::spiffe::Source { todo!() }\n",
            ),
            (
                "identity/mod.rs",
                "pub mod resolver;\npub mod from_secret;\n",
            ),
            ("identity/from_secret.rs", "use crate::material::Pem;\n"),
            ("spiffe/mod.rs", "use crate::identity::Identity;\n"),
        ]);
        let rules = parse(FIXTURE_RULES).unwrap();
        let report = check(dir.path(), &rules).unwrap();
        let m = "fixture/src/material/mod.rs";
        let r = "fixture/src/identity/resolver.rs";
        let expected = [
            (
                "fixture/src/identity/resolver.rs",
                2,
                "identity::from_secret::SecretIdentity",
            ),
            (r, 5, "identity::from_secret::Fixture"),
            (r, 8, "spiffe::Source"),
            ("fixture/src/material/der.rs", 1, "spiffe"),
            (m, 2, "spiffe::SpiffeError"),
            (m, 3, "identity::Identity"),
            (m, 6, "spiffe"),
            (m, 6, "spiffe::stream::Stream"),
            (m, 11, "identity::resolver::count"),
            (m, 16, "spiffe::Fake"),
        ]
        .map(|(file, line, path)| (file.to_owned(), line, format!("crate::{path}")));
        assert_eq!(found(&report), expected);
        assert_eq!(report.files, 7);
        assert_eq!(report.rules, 3);
        assert!(report.notes.is_empty(), "{:?}", report.notes);

        let shown: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown[0],
            "fixture/src/identity/resolver.rs:2: module `identity::resolver` imports \
             `crate::identity::from_secret::SecretIdentity` (forbidden: the resolver does not \
             know its implementations)"
        );
        assert_eq!(
            shown[1],
            "fixture/src/identity/resolver.rs:5: module `identity::resolver::tests` imports \
             `crate::identity::from_secret::Fixture` (forbidden: the resolver does not know its \
             implementations)"
        );
    }

    #[test]
    fn a_rule_without_why_names_itself() {
        let dir = tree(&[
            ("lib.rs", LIB),
            ("identity/mod.rs", "use crate::spiffe::X;\n"),
        ]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(
            report.violations[0].to_string(),
            "fixture/src/identity/mod.rs:1: module `identity` imports `crate::spiffe::X` \
             (forbidden: `identity` may not name `spiffe`)"
        );
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

    #[test]
    fn notes_name_modules_no_file_defines() {
        let dir = tree(&[("lib.rs", LIB), ("material.rs", "")]);
        let report = check(dir.path(), &parse(FIXTURE_RULES).unwrap()).unwrap();
        assert_eq!(
            report.notes,
            [
                "fixture/src: no module yet for `identity`, `spiffe`, `identity::resolver`, \
                 `identity::from_secret`"
            ]
        );
    }

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

    #[test]
    fn modules_of_files() {
        let src = Path::new("/x/src");
        let module = |file: &str| file_module(src, &src.join(file)).unwrap().join("::");
        assert_eq!(module("lib.rs"), "");
        assert_eq!(module("main.rs"), "");
        assert_eq!(module("identity/mod.rs"), "identity");
        assert_eq!(module("identity/resolver.rs"), "identity::resolver");
        assert_eq!(module("identity/lib.rs"), "identity::lib");
    }

    #[test]
    fn bad_rules_are_refused_with_the_reason() {
        let refuse = |text: &str| parse(text).unwrap_err();
        assert!(
            refuse("[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"a\"\nforbids = [\"b\"]\n")
                .contains("forbids")
        );
        assert!(
            refuse(
                "[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"crate::a\"\nforbid = [\"b\"]\n"
            )
            .contains("`crate::a` is not a module path")
        );
        assert!(
            refuse("[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"a::b\"\nforbid = [\"a\"]\n")
                .contains("contains `a::b` itself")
        );
        assert!(
            refuse("[[crate]]\nsrc = \"s\"\n[[crate.rule]]\nfrom = \"a\"\nforbid = []\n")
                .contains("`forbid` is empty")
        );
        let dir = tempfile::tempdir().unwrap();
        let error = check(
            dir.path(),
            &parse("[[crate]]\nsrc = \"nowhere\"\n").unwrap(),
        )
        .unwrap_err();
        assert!(
            error.contains("`src = \"nowhere\"` is not a directory"),
            "{error}"
        );
    }

    #[test]
    fn the_workspace_rules_parse_and_name_existing_folders() {
        let root = workspace_root();
        let rules = load(&root.join(RULES)).unwrap();
        assert!(!rules.is_empty());
        for krate in &rules {
            assert!(
                root.join(&krate.src).is_dir(),
                "{} is not a folder",
                krate.src
            );
            assert!(!krate.rules.is_empty(), "{} has no rules", krate.src);
        }
        // And the whole workspace can be scanned (today's violations are not asserted).
        let report = check(&root, &rules).unwrap();
        assert!(report.files > 0);
    }
}
