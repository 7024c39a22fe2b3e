//! The shared value types of the `unikorn-cloud.org` group.
//!
//! One file for the group's value types: each is small (a newtype or a string
//! enum with its serde and schema rules), and they are read together; the unit
//! tests live in `values/tests.rs`.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::Ipv4Addr;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::string_enum;

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

/// An arbitrary key/value tag.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Tag {
    /// Name of the tag.
    pub name: String,
    /// Value of the tag.
    pub value: String,
}

impl Tag {
    /// A tag.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// A list of tags (a JSON array of [`Tag`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct TagList(pub Vec<Tag>);

impl TagList {
    /// Whether the list holds a tag with this name and value.
    pub fn contains(&self, tag: &Tag) -> bool {
        self.0
            .iter()
            .any(|t| t.name == tag.name && t.value == tag.value)
    }

    /// Whether the list holds every tag of `other` (true when `other` is empty).
    pub fn contains_all(&self, other: &TagList) -> bool {
        other.0.iter().all(|tag| self.contains(tag))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The tags.
    pub fn iter(&self) -> std::slice::Iter<'_, Tag> {
        self.0.iter()
    }
}

impl From<Vec<Tag>> for TagList {
    fn from(tags: Vec<Tag>) -> Self {
        Self(tags)
    }
}

impl FromIterator<Tag> for TagList {
    fn from_iter<I: IntoIterator<Item = Tag>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a TagList {
    type Item = &'a Tag;
    type IntoIter = std::slice::Iter<'a, Tag>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Why a string is not an [`IPv4Address`] or [`IPv4Prefix`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueParseError {
    /// Not a dotted-quad IPv4 address.
    #[error("not an IPv4 address {0:?}")]
    Address(String),
    /// Not an IPv4 CIDR prefix.
    #[error("not an IPv4 prefix {0:?}")]
    Prefix(String),
}

/// An IPv4 address, a dotted-quad JSON string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IPv4Address(pub Ipv4Addr);

impl fmt::Display for IPv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for IPv4Address {
    type Err = ValueParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse()
            .map(Self)
            .map_err(|_| ValueParseError::Address(text.to_owned()))
    }
}

impl Serialize for IPv4Address {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for IPv4Address {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for IPv4Address {
    fn schema_name() -> Cow<'static, str> {
        "IPv4Address".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"
        })
    }
}

/// An IPv4 network prefix, a CIDR JSON string (`10.0.0.0/24`).
///
/// Like Go's `net.ParseCIDR`, parsing keeps only the network: `10.0.0.7/24`
/// becomes `10.0.0.0/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IPv4Prefix {
    network: Ipv4Addr,
    length: u8,
}

impl IPv4Prefix {
    /// The prefix of `length` bits containing `address` (`None` when
    /// `length > 32`).
    pub fn new(address: Ipv4Addr, length: u8) -> Option<Self> {
        if length > 32 {
            return None;
        }
        let mask = u32::MAX.checked_shl(32 - u32::from(length)).unwrap_or(0);
        Some(Self {
            network: Ipv4Addr::from(u32::from(address) & mask),
            length,
        })
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length in bits.
    pub fn length(&self) -> u8 {
        self.length
    }

    /// Whether the prefix contains an address.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        Self::new(address, self.length).is_some_and(|p| p.network == self.network)
    }
}

impl fmt::Display for IPv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.length)
    }
}

impl FromStr for IPv4Prefix {
    type Err = ValueParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || ValueParseError::Prefix(text.to_owned());
        let (address, length) = text.split_once('/').ok_or_else(error)?;
        let address: Ipv4Addr = address.parse().map_err(|_| error())?;
        if length.is_empty() || length.len() > 2 || !length.bytes().all(|b| b.is_ascii_digit()) {
            return Err(error());
        }
        let length: u8 = length.parse().map_err(|_| error())?;
        Self::new(address, length).ok_or_else(error)
    }
}

impl Serialize for IPv4Prefix {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IPv4Prefix {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for IPv4Prefix {
    fn schema_name() -> Cow<'static, str> {
        "IPv4Prefix".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": r"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\/(?:3[0-2]|[1-2]?[0-9])$"
        })
    }
}

/// Generic machine settings shared by the platform's machine pools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineGeneric {
    /// The image to boot.
    pub image_id: String,
    /// The flavor (machine size).
    pub flavor_id: String,
    /// The root disk size; the flavor's disk when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::quantity")]
    pub disk_size: Option<Quantity>,
    /// The number of machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
}

/// Generic network settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkGeneric {
    /// The network prefix nodes are allocated from.
    pub node_network: IPv4Prefix,
    /// DNS name servers (a non-empty set).
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_nameservers: Vec<IPv4Address>,
}

string_enum! {
    /// The kind of application an [`ApplicationReference`] points to.
    ApplicationReferenceKind {
        /// A [`HelmApplication`](super::HelmApplication).
        Helm = "HelmApplication",
    }
}

/// A reference to one version of an application.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplicationReference {
    /// The kind of application.
    pub kind: ApplicationReferenceKind,
    /// The application's name.
    pub name: String,
    /// The application version.
    pub version: SemanticVersion,
}

/// A named [`ApplicationReference`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplicationNamedReference {
    /// The name the reference is known by.
    pub name: String,
    /// The application reference.
    pub reference: ApplicationReference,
}

#[cfg(test)]
mod tests;
