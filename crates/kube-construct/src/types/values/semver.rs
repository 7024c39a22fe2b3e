//! Semantic versions and version constraints: parsing, precedence, serde and schema.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern the platform's CRDs apply to a semantic version.
pub(crate) const SEMVER_PATTERN: &str = r"^v?[0-9]+(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$";

/// Why a string is not a [`SemanticVersion`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SemanticVersionError {
    /// The text is empty.
    #[error("invalid semantic version: the text is empty")]
    Empty,
    /// The text does not have the shape `v?MAJOR(.MINOR)?(.PATCH)?(-pre)?(+build)?`.
    #[error("invalid semantic version {text:?}: {reason}")]
    Malformed {
        /// The text offered.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A semantic version, as the platform writes it: `v?MAJOR(.MINOR)?(.PATCH)?`
/// with optional `-prerelease` and `+build` parts (Masterminds' lenient form).
///
/// It serialises back to exactly the text it was parsed from (a leading `v` and
/// missing minor/patch parts are kept). Comparison follows semantic-version
/// precedence, as Go's `Compare`/`Equal` do: build metadata and the spelling
/// (`v1.2` versus `1.2.0`) are ignored, so `==` can hold between values with
/// different text; compare [`as_str`](Self::as_str) for textual identity.
#[derive(Clone)]
pub struct SemanticVersion {
    original: String,
    major: u64,
    minor: u64,
    patch: u64,
    prerelease: Option<String>,
    build: Option<String>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

/// Checks a dot-separated list of `[0-9A-Za-z-]+` identifiers.
fn valid_identifiers(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(is_ident_char))
}

fn parse_number(text: &str, which: &'static str) -> Result<u64, &'static str> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(which);
    }
    text.parse::<u64>()
        .map_err(|_| "a version number does not fit in 64 bits")
}

impl SemanticVersion {
    /// Parses a semantic version.
    pub fn parse(text: &str) -> Result<Self, SemanticVersionError> {
        if text.is_empty() {
            return Err(SemanticVersionError::Empty);
        }
        let malformed = |reason| SemanticVersionError::Malformed {
            text: text.to_owned(),
            reason,
        };
        let rest = text.strip_prefix('v').unwrap_or(text);
        let (rest, build) = match rest.split_once('+') {
            Some((rest, build)) => {
                if !valid_identifiers(build) {
                    return Err(malformed(
                        "the build metadata is not dot-separated [0-9A-Za-z-] identifiers",
                    ));
                }
                (rest, Some(build.to_owned()))
            }
            None => (rest, None),
        };
        let (core, prerelease) = match rest.split_once('-') {
            Some((core, pre)) => {
                if !valid_identifiers(pre) {
                    return Err(malformed(
                        "the prerelease is not dot-separated [0-9A-Za-z-] identifiers",
                    ));
                }
                if pre.split('.').any(|part| {
                    part.len() > 1
                        && part.starts_with('0')
                        && part.bytes().all(|b| b.is_ascii_digit())
                }) {
                    return Err(malformed(
                        "a numeric prerelease identifier has a leading zero",
                    ));
                }
                (core, Some(pre.to_owned()))
            }
            None => (rest, None),
        };
        let mut numbers = core.split('.');
        let major = parse_number(
            numbers.next().unwrap_or(""),
            "the major version is not a number",
        )
        .map_err(malformed)?;
        let minor = match numbers.next() {
            Some(part) => {
                parse_number(part, "the minor version is not a number").map_err(malformed)?
            }
            None => 0,
        };
        let patch = match numbers.next() {
            Some(part) => {
                parse_number(part, "the patch version is not a number").map_err(malformed)?
            }
            None => 0,
        };
        if numbers.next().is_some() {
            return Err(malformed("more than three version numbers"));
        }
        Ok(Self {
            original: text.to_owned(),
            major,
            minor,
            patch,
            prerelease,
            build,
        })
    }

    /// The exact text the version was parsed from.
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// The major version.
    pub fn major(&self) -> u64 {
        self.major
    }

    /// The minor version (0 when the text has none).
    pub fn minor(&self) -> u64 {
        self.minor
    }

    /// The patch version (0 when the text has none).
    pub fn patch(&self) -> u64 {
        self.patch
    }

    /// The prerelease part, without its `-`.
    pub fn prerelease(&self) -> Option<&str> {
        self.prerelease.as_deref()
    }

    /// The build metadata, without its `+`.
    pub fn build(&self) -> Option<&str> {
        self.build.as_deref()
    }
}

/// Compares prerelease identifier lists by semantic-version precedence.
fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let x_numeric = x.bytes().all(|c| c.is_ascii_digit());
                let y_numeric = y.bytes().all(|c| c.is_ascii_digit());
                let ordering = match (x_numeric, y_numeric) {
                    // No leading zeros (checked on parse): longer is larger.
                    (true, true) => x.len().cmp(&y.len()).then_with(|| x.cmp(y)),
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => x.cmp(y),
                };
                if ordering != Ordering::Equal {
                    return ordering;
                }
            }
        }
    }
}

impl Ord for SemanticVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (&self.prerelease, &other.prerelease) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => compare_prerelease(a, b),
            })
    }
}

impl PartialOrd for SemanticVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SemanticVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SemanticVersion {}

impl Hash for SemanticVersion {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Equal versions have equal numbers and identical prerelease text.
        (self.major, self.minor, self.patch, &self.prerelease).hash(state);
    }
}

impl fmt::Debug for SemanticVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SemanticVersion({:?})", self.original)
    }
}

impl fmt::Display for SemanticVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl FromStr for SemanticVersion {
    type Err = SemanticVersionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl TryFrom<&str> for SemanticVersion {
    type Error = SemanticVersionError;

    fn try_from(text: &str) -> Result<Self, Self::Error> {
        Self::parse(text)
    }
}

impl Serialize for SemanticVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.original)
    }
}

impl<'de> Deserialize<'de> for SemanticVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for SemanticVersion {
    fn schema_name() -> Cow<'static, str> {
        "SemanticVersion".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": SEMVER_PATTERN })
    }
}

/// Why a string is not a [`SemanticVersionConstraints`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SemanticVersionConstraintsError {
    /// The text is empty or blank.
    #[error("invalid version constraints: the text is empty")]
    Empty,
}

/// A version-constraint string (Masterminds syntax, e.g. `>=1.2.0, <2`).
///
/// Kept verbatim: this type checks only that the text is not blank. Go parses
/// the constraints and writes back its own rendering of them; we write back the
/// text we read, which Go reads the same way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SemanticVersionConstraints(String);

impl SemanticVersionConstraints {
    /// Wraps a constraint string.
    pub fn new(text: impl Into<String>) -> Result<Self, SemanticVersionConstraintsError> {
        let text = text.into();
        if text.trim().is_empty() {
            return Err(SemanticVersionConstraintsError::Empty);
        }
        Ok(Self(text))
    }

    /// The constraint text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SemanticVersionConstraints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SemanticVersionConstraints {
    type Err = SemanticVersionConstraintsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text)
    }
}

impl Serialize for SemanticVersionConstraints {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SemanticVersionConstraints {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for SemanticVersionConstraints {
    fn schema_name() -> Cow<'static, str> {
        "SemanticVersionConstraints".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}
