//! `cargo xtask docs-check`: every relative link and every backticked repository path
//! in the repository's Markdown leads somewhere (`cargo xtask ci` runs it; it reads
//! files only, well under a second).
//!
//! The files are every Markdown file git tracks (docs, READMEs, CHANGELOGs, the
//! modules' `overview.md` files). In each, outside fenced code blocks:
//!
//! - **links** `[text](target)` and reference definitions `[label]: target` whose
//!   target has no scheme (`https:`, `mailto:`) and looks like a file path (it has a
//!   `/`, a file extension or is `.`/`..`; rustdoc's intra-doc targets such as
//!   `crate::client::PeerTls` are left to rustdoc): the file or directory must exist,
//!   relative to the Markdown file; an anchor (`file.md#section`, or `#section` alone
//!   for the file itself) must be one of the target's headings as GitHub slugs them
//!   ([`slug`]), or an explicit `<a id>`/`<a name>`;
//! - **backticked paths** such as `` `crates/svc-tls/src/client/pooled.rs` `` or
//!   `` `docs/operations.md` ``: a code span of path characters with a `/` whose first
//!   segment is a tracked top-level directory is a path from the repository root,
//!   else, when its first segment exists beside the Markdown file (a crate README's
//!   `` `src/lib.rs` ``), a path from there; it must exist. Spans with a wildcard, a
//!   placeholder or a `::` are not paths; a trailing `:line` or `#anchor` is checked
//!   as above.
//!
//! And the decision records (`docs/decisions/*.md`): each is listed in the index
//! (`docs/decisions/README.md`) and has a record's shape: `# title`, a `Status:` of
//! `current` or `superseded by <an existing record>`, then `## Decision`, `## Why` and
//! `## Cost`, in at most 100 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::process::workspace_root;

/// Entry point of the `docs-check` task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask docs-check".into());
    }
    let root = workspace_root();
    let files = tracked_markdown(&root)?;
    let mut headings = Headings::default();
    let mut broken = Vec::new();
    let mut links = 0;
    for file in &files {
        let text = std::fs::read_to_string(root.join(file))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let found = references(&text);
        links += found.len();
        for reference in found {
            if let Err(why) = check(&root, file, &reference, &mut headings) {
                broken.push(format!(
                    "{}:{}: {} `{}`: {why}",
                    file.display(),
                    reference.line,
                    reference.kind.noun(),
                    reference.target
                ));
            }
        }
    }
    broken.extend(unlisted_decisions(&root)?);
    if broken.is_empty() {
        eprintln!(
            "xtask: docs-check: {links} links and paths in {} Markdown files lead somewhere",
            files.len()
        );
        Ok(())
    } else {
        Err(format!(
            "docs-check: {} broken links or paths:\n  {}",
            broken.len(),
            broken.join("\n  ")
        ))
    }
}

/// The decision records (`docs/decisions/*.md`) that the index
/// (`docs/decisions/README.md`) does not link to (each must be listed there), and
/// those not in a record's shape ([`record_shape`]).
fn unlisted_decisions(root: &Path) -> Result<Vec<String>, String> {
    let dir = root.join(DECISIONS);
    let index = dir.join("README.md");
    if !index.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&index).map_err(|e| format!("{}: {e}", index.display()))?;
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md") && name != "README.md")
        .collect();
    files.sort();
    let mut problems: Vec<String> = not_in_index(&text, &files)
        .into_iter()
        .map(|name| format!("{DECISIONS}/{name}: not listed in {DECISIONS}/README.md (the index)"))
        .collect();
    for name in &files {
        let path = dir.join(name);
        let record =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Err(why) = record_shape(&record, |other| dir.join(other).is_file()) {
            problems.push(format!("{DECISIONS}/{name}: {why}"));
        }
    }
    Ok(problems)
}

/// The most lines a decision record may have (the rule says about 80).
const MAX_RECORD_LINES: usize = 100;

/// A decision record's shape (docs/decisions/README.md): `# title` on the first line,
/// `Status: current` or `Status: superseded by <file>.md` (an existing record) within
/// the next lines, then `## Decision`, `## Why` and `## Cost` in that order, and at
/// most [`MAX_RECORD_LINES`] lines.
fn record_shape(text: &str, exists: impl Fn(&str) -> bool) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    if !lines.first().is_some_and(|l| l.starts_with("# ")) {
        return Err("the first line is not `# <title>`".into());
    }
    let status = lines
        .iter()
        .take(6)
        .find_map(|l| l.strip_prefix("Status: "))
        .ok_or("no `Status:` line under the title")?;
    if status != "current" {
        let file = status
            .strip_prefix("superseded by ")
            .filter(|f| f.ends_with(".md") && !f.contains('/'))
            .ok_or_else(|| {
                format!("status `{status}` is neither `current` nor `superseded by <file>.md`")
            })?;
        if !exists(file) {
            return Err(format!("superseded by {file}, which does not exist"));
        }
    }
    let mut at = 0;
    for section in ["## Decision", "## Why", "## Cost"] {
        match lines[at..].iter().position(|l| l.trim_end() == section) {
            Some(i) => at += i + 1,
            None => return Err(format!("no `{section}` section (after the previous one)")),
        }
    }
    if lines.len() > MAX_RECORD_LINES {
        return Err(format!(
            "{} lines, over {MAX_RECORD_LINES}: keep the decision and its reasons, link the measurements",
            lines.len()
        ));
    }
    Ok(())
}

/// Which of `files` no link of the index `text` leads to.
fn not_in_index(text: &str, files: &[String]) -> Vec<String> {
    let linked: BTreeSet<String> = references(text)
        .into_iter()
        .filter(|r| r.kind == Kind::Link)
        .map(|r| r.target.split('#').next().unwrap_or("").to_owned())
        .collect();
    files
        .iter()
        .filter(|name| !linked.contains(name.as_str()))
        .cloned()
        .collect()
}

/// Where the decision records are, relative to the root.
const DECISIONS: &str = "docs/decisions";

/// The Markdown files git tracks, relative to the root.
fn tracked_markdown(root: &Path) -> Result<Vec<PathBuf>, String> {
    let output = std::process::Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "*.md",
        ])
        .output()
        .map_err(|e| format!("could not run git ls-files: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        // A file deleted in the work tree but still in the index is not read.
        .filter(|line| root.join(line).is_file())
        .map(PathBuf::from)
        .collect())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Link,
    Path,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Link => "link",
            Kind::Path => "path",
        }
    }
}

/// One link target or backticked path, with its 1-based line.
#[derive(Debug, PartialEq)]
struct Reference {
    kind: Kind,
    target: String,
    line: usize,
}

/// The links and backticked paths of a Markdown text, outside fenced code blocks.
fn references(text: &str) -> Vec<Reference> {
    let mut found = Vec::new();
    let mut fence: Option<&str> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let line_no = n + 1;
        // A reference definition: `[label]: target`.
        if let Some(rest) = trimmed.strip_prefix('[')
            && let Some((label, target)) = rest.split_once("]:")
            && !label.contains(']')
        {
            let target = target.split_whitespace().next().unwrap_or("");
            push_link(&mut found, target, line_no);
        }
        let (spans, prose) = code_spans(line);
        for span in spans {
            if is_repo_path(&span) {
                found.push(Reference {
                    kind: Kind::Path,
                    target: span,
                    line: line_no,
                });
            }
        }
        for target in inline_links(&prose) {
            push_link(&mut found, &target, line_no);
        }
    }
    found
}

fn push_link(found: &mut Vec<Reference>, target: &str, line: usize) {
    let target = target.trim_start_matches('<').trim_end_matches('>');
    if is_file_link(target) {
        found.push(Reference {
            kind: Kind::Link,
            target: target.to_owned(),
            line,
        });
    }
}

/// The contents of a line's code spans, and the line with them blanked out (so that
/// a link written inside backticks is not taken for one).
fn code_spans(line: &str) -> (Vec<String>, String) {
    let mut spans = Vec::new();
    let mut prose = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        prose.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let fence = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        match after.find(fence) {
            Some(end) => {
                spans.push(after[..end].trim().to_owned());
                prose.push(' ');
                rest = &after[end + ticks..];
            }
            None => {
                prose.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    prose.push_str(rest);
    (spans, prose)
}

/// The targets of `[text](target)` and `![alt](target)` in `prose`.
fn inline_links(prose: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        // Up to the `)` that closes the parenthesis (targets may hold balanced ones).
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inner = after[..end].trim();
        // `(target "title")`
        let target = inner.split_whitespace().next().unwrap_or("");
        targets.push(target.to_owned());
        rest = &after[end..];
    }
    targets
}

/// Whether a link target is a path in this repository (not a URL, not an intra-doc
/// path, not empty).
fn is_file_link(target: &str) -> bool {
    if target.is_empty() || target.contains("::") {
        return false;
    }
    if target.starts_with('#') {
        return true;
    }
    if let Some((scheme, _)) = target.split_once(':')
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return false;
    }
    let path = target.split('#').next().unwrap_or("");
    path.contains('/')
        || path == "."
        || path == ".."
        || Path::new(path).extension().is_some_and(|e| {
            e.to_str()
                .is_some_and(|e| e.chars().all(char::is_alphanumeric))
        })
}

/// Whether a code span is written as a repository path (checked against the tree by
/// [`check`], which decides where it is relative to).
fn is_repo_path(span: &str) -> bool {
    let path = span.split(['#']).next().unwrap_or("");
    let path = strip_line(path);
    !path.is_empty()
        && path.contains('/')
        && !path.starts_with('/')
        && !path.starts_with("~")
        && !path.contains("//")
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        && !path.split('/').any(|segment| segment == "..")
}

/// `path` without a trailing `:line` or `:line:column`.
fn strip_line(path: &str) -> &str {
    let mut path = path;
    for _ in 0..2 {
        if let Some((before, after)) = path.rsplit_once(':')
            && !after.is_empty()
            && after.chars().all(|c| c.is_ascii_digit())
        {
            path = before;
        }
    }
    path
}

/// Each Markdown file's anchors, read once.
#[derive(Default)]
struct Headings(BTreeMap<PathBuf, BTreeSet<String>>);

impl Headings {
    fn of(&mut self, file: &Path) -> Result<&BTreeSet<String>, String> {
        if !self.0.contains_key(file) {
            let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it: {e}"))?;
            self.0.insert(file.to_path_buf(), anchors(&text));
        }
        Ok(&self.0[file])
    }
}

/// A reference checked against the tree: the file or directory exists and the
/// anchor, if any, is one of its headings.
fn check(
    root: &Path,
    file: &Path,
    reference: &Reference,
    headings: &mut Headings,
) -> Result<(), String> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let (path, anchor) = match reference.target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (reference.target.as_str(), None),
    };
    let path = match reference.kind {
        Kind::Link => percent_decoded(path),
        Kind::Path => strip_line(path).to_owned(),
    };
    let target = if path.is_empty() {
        file.to_path_buf()
    } else {
        match reference.kind {
            Kind::Link => normalized(&dir.join(&path))?,
            Kind::Path => {
                let first = path.split('/').next().unwrap_or("");
                if is_top_level(root, first) {
                    PathBuf::from(&path)
                } else if root.join(dir).join(first).exists() {
                    dir.join(&path)
                } else {
                    // Not a path of this repository (`kubernetes.io/tls`, `api/v1`).
                    return Ok(());
                }
            }
        }
    };
    let on_disk = root.join(&target);
    if !on_disk.exists() {
        return Err(format!("{} does not exist", target.display()));
    }
    match anchor {
        Some(anchor) if on_disk.extension().is_some_and(|e| e == "md") => {
            if headings.of(&on_disk)?.contains(&anchor.to_lowercase()) {
                Ok(())
            } else {
                Err(format!("{} has no heading #{anchor}", target.display()))
            }
        }
        _ => Ok(()),
    }
}

/// Whether `segment` is a directory at the repository's top level that git tracks
/// (`crates`, `docs`, `xtask`, ...: not `target`).
fn is_top_level(root: &Path, segment: &str) -> bool {
    !segment.is_empty() && segment != "target" && root.join(segment).is_dir()
}

/// `path` with `.` and `..` resolved, still relative to the root; an error when it
/// climbs out of the repository.
fn normalized(path: &Path) -> Result<PathBuf, String> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err("it leads out of the repository".into());
                }
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::Prefix(_) => {
                return Err("it is an absolute path".into());
            }
        }
    }
    Ok(out)
}

/// `%20` and the like decoded, as a browser does before asking for the file.
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = path
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The anchors of a Markdown text: each ATX heading's GitHub slug (a repeated one
/// numbered `-1`, `-2`, ...), and each explicit `<a id="...">` / `<a name="...">`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        for key in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(key) {
                let value = &rest[at + key.len()..];
                if let Some(end) = value.find('"') {
                    out.insert(value[..end].to_lowercase());
                }
                rest = &rest[at + key.len()..];
            }
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let base = slug(&trimmed[hashes..]);
            let n = seen.entry(base.clone()).or_insert(0);
            out.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// A heading's anchor as GitHub makes it: the rendered text (code spans' contents,
/// links' text, no emphasis markers or HTML tags), lowercased, every character that is
/// not a letter, digit, `_`, `-` or space dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    // Closing hashes of `## Title ##`.
    let heading = heading.trim().trim_end_matches('#').trim_end();
    let mut text = String::new();
    let mut rest = heading;
    // Links: `[text](url)` is `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) => {
                text.push_str(&after[..close]);
                let tail = &after[close + 2..];
                rest = tail.find(')').map_or("", |end| &tail[end + 1..]);
            }
            None => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    // HTML tags.
    let mut plain = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => plain.push(c),
            _ => {}
        }
    }
    plain
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Headings, Kind, Reference, anchors, check, references, slug};

    #[test]
    fn every_decision_is_in_the_index() {
        let index = "# Decisions\n| [A](a.md) | current | x |\n| [B](b.md#why) | current | y |\n";
        let files: Vec<String> = ["a.md", "b.md", "c.md"].map(String::from).to_vec();
        assert_eq!(super::not_in_index(index, &files), vec!["c.md".to_owned()]);
    }

    #[test]
    fn a_record_has_title_status_and_the_three_sections() {
        use super::record_shape;
        let good = "# T\n\nStatus: current\n\n## Decision\nd\n## Why\nw\n## Cost\nc\n";
        assert_eq!(record_shape(good, |_| false), Ok(()));
        let superseded = good.replace("current", "superseded by newer.md");
        assert_eq!(record_shape(&superseded, |f| f == "newer.md"), Ok(()));
        let gone = record_shape(&superseded, |_| false).unwrap_err();
        assert!(gone.contains("newer.md, which does not exist"), "{gone}");
        let no_cost = good.replace("## Cost", "## Costs");
        assert!(
            record_shape(&no_cost, |_| true)
                .unwrap_err()
                .contains("## Cost")
        );
        let order = "# T\nStatus: current\n## Why\n## Decision\n## Cost\n";
        assert!(
            record_shape(order, |_| true)
                .unwrap_err()
                .contains("## Why")
        );
        let long = format!("{good}{}", "x\n".repeat(100));
        assert!(
            record_shape(&long, |_| true)
                .unwrap_err()
                .contains("over 100")
        );
        assert!(record_shape("Status: current\n", |_| true).is_err());
    }

    #[test]
    fn github_slugs() {
        assert_eq!(slug("Making a release"), "making-a-release");
        assert_eq!(
            slug("One watch layer (`watch-ready`) and one sync timeout"),
            "one-watch-layer-watch-ready-and-one-sync-timeout"
        );
        assert_eq!(
            slug("Errors: the cause in `source()`, never also in `Display` (issue 44)"),
            "errors-the-cause-in-source-never-also-in-display-issue-44"
        );
        assert_eq!(
            slug("Key exchange: X25519MLKEM768 first"),
            "key-exchange-x25519mlkem768-first"
        );
        assert_eq!(slug("See [the index](README.md) ##"), "see-the-index");
        assert_eq!(slug("svc_tls::client — peers"), "svc_tlsclient--peers");
        let text = "# A\n## Twice\n```\n## not a heading\n```\n## Twice\n<a id=\"Here\"></a>\n";
        let found = anchors(text);
        for anchor in ["a", "twice", "twice-1", "here"] {
            assert!(found.contains(anchor), "{anchor} in {found:?}");
        }
        assert!(!found.contains("not-a-heading"));
    }

    #[test]
    fn finds_links_and_paths_but_not_urls_code_blocks_or_rustdoc_paths() {
        let text = "See [ops](operations.md#alerts) and [site](https://example.com/x.md),\n\
                    [`PeerTls`](crate::client::PeerTls), `crates/svc-tls/src/lib.rs:12` and\n\
                    `kubernetes.io/tls`, `crates/*/README.md`, `--S-host`.\n\
                    ```sh\ncat docs/missing.md [x](missing.md)\n```\n\
                    [ref]: ../README.md\n";
        let found = references(text);
        let link = |target: &str, line| Reference {
            kind: Kind::Link,
            target: target.into(),
            line,
        };
        let path = |target: &str, line| Reference {
            kind: Kind::Path,
            target: target.into(),
            line,
        };
        assert_eq!(
            found,
            vec![
                link("operations.md#alerts", 1),
                path("crates/svc-tls/src/lib.rs:12", 2),
                path("kubernetes.io/tls", 3),
                link("../README.md", 7),
            ]
        );
    }

    /// The check fails on a broken link, a broken anchor and a broken backticked
    /// path, and passes on good ones, on a sample tree.
    #[test]
    fn fails_on_a_broken_link_anchor_or_path() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        std::fs::create_dir_all(root.join("docs/decisions")).unwrap();
        std::fs::create_dir_all(root.join("crates/a/src")).unwrap();
        std::fs::write(root.join("crates/a/src/lib.rs"), "").unwrap();
        std::fs::write(
            root.join("docs/decisions/README.md"),
            "# Decisions\n## Crypto provider: aws-lc-rs\n",
        )
        .unwrap();
        let sample = "# Ops\n\
            Good: [index](decisions/README.md#crypto-provider-aws-lc-rs), [up](#ops), \
            `crates/a/src/lib.rs`, `docs/decisions/`.\n\
            Bad: [gone](decisions.md), [anchor](decisions/README.md#ring), [self](#nope), \
            `crates/a/src/main.rs`, [out](../../x.md).\n";
        std::fs::write(root.join("docs/ops.md"), sample).unwrap();
        let file = std::path::Path::new("docs/ops.md");
        let mut headings = Headings::default();
        let mut verdicts: Vec<(String, bool)> = references(sample)
            .iter()
            .map(|r| {
                (
                    r.target.clone(),
                    check(root, file, r, &mut headings).is_ok(),
                )
            })
            .collect();
        verdicts.sort();
        let expected = [
            ("#nope", false),
            ("#ops", true),
            ("../../x.md", false),
            ("crates/a/src/lib.rs", true),
            ("crates/a/src/main.rs", false),
            ("decisions.md", false),
            ("decisions/README.md#crypto-provider-aws-lc-rs", true),
            ("decisions/README.md#ring", false),
            ("docs/decisions/", true),
        ];
        let expected: Vec<(String, bool)> = expected
            .iter()
            .map(|(t, ok)| ((*t).to_owned(), *ok))
            .collect();
        assert_eq!(verdicts, expected);
        let why = check(root, file, &references(sample)[5], &mut headings).unwrap_err();
        assert_eq!(why, "docs/decisions.md does not exist");
    }
}
