//! The shared value types of the `unikorn-cloud.org` group.
//!
//! One file for the group's small value types (a newtype or a string enum with its
//! serde and schema rules), read together; semantic versions and their constraints
//! live in `values/semver.rs`, the unit tests in `values/tests.rs`.

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::string_enum::string_enum;

mod semver;

/// The pattern, for the CRD schema tests.
#[cfg(test)]
pub(crate) use semver::SEMVER_PATTERN;
pub use semver::{
    SemanticVersion, SemanticVersionConstraints, SemanticVersionConstraintsError,
    SemanticVersionError,
};

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
