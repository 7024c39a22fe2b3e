//! A minimal decoder for the Kubernetes protobuf encoding, for the request bodies
//! `kubectl create secret|configmap|namespace|service` sends (typed clients send protobuf
//! and do not fall back to JSON). Only these kinds and the common `ObjectMeta`
//! fields are understood; anything else is answered 415.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// Why a protobuf body could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ProtoError {
    #[error("not a Kubernetes protobuf envelope")]
    Envelope,
    #[error("truncated or malformed protobuf")]
    Malformed,
    #[error("protobuf bodies of kind {0:?} are not supported; send JSON")]
    Unsupported(String),
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.buf.split_first().ok_or(ProtoError::Malformed)?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(ProtoError::Malformed)
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ProtoError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let field = match tag & 7 {
            0 => Field::Varint(self.varint()?),
            1 => {
                self.buf = self.buf.get(8..).ok_or(ProtoError::Malformed)?;
                Field::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| ProtoError::Malformed)?;
                if len > self.buf.len() {
                    return Err(ProtoError::Malformed);
                }
                let (b, rest) = self.buf.split_at(len);
                self.buf = rest;
                Field::Bytes(b)
            }
            5 => {
                self.buf = self.buf.get(4..).ok_or(ProtoError::Malformed)?;
                Field::Fixed
            }
            _ => return Err(ProtoError::Malformed),
        };
        Ok(Some((tag >> 3, field)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtoError> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed)
}

/// A map entry (key 1, value 2); `bytes_value` base64-encodes the value.
fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ProtoError> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(b)) => k = string(b)?,
            (2, Field::Bytes(b)) if bytes_value => {
                v = Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            }
            (2, Field::Bytes(b)) => v = Value::String(string(b)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn insert_entry(obj: &mut Map<String, Value>, key: &str, entry: (String, Value)) {
    if let Some(m) = obj.entry(key).or_insert_with(|| json!({})).as_object_mut() {
        m.insert(entry.0, entry.1);
    }
}

fn push(obj: &mut Map<String, Value>, key: &str, v: Value) {
    if let Some(a) = obj.entry(key).or_insert_with(|| json!([])).as_array_mut() {
        a.push(v);
    }
}

fn owner_reference(b: &[u8]) -> Result<Value, ProtoError> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(b)) => o.insert("kind".into(), Value::String(string(b)?)),
            (3, Field::Bytes(b)) => o.insert("name".into(), Value::String(string(b)?)),
            (4, Field::Bytes(b)) => o.insert("uid".into(), Value::String(string(b)?)),
            (5, Field::Bytes(b)) => o.insert("apiVersion".into(), Value::String(string(b)?)),
            (6, Field::Varint(v)) => o.insert("controller".into(), Value::Bool(v != 0)),
            (7, Field::Varint(v)) => o.insert("blockOwnerDeletion".into(), Value::Bool(v != 0)),
            _ => None,
        };
    }
    Ok(Value::Object(o))
}

fn object_meta(b: &[u8]) -> Result<Value, ProtoError> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(b)) => {
                m.insert("name".into(), Value::String(string(b)?));
            }
            (2, Field::Bytes(b)) => {
                m.insert("generateName".into(), Value::String(string(b)?));
            }
            (3, Field::Bytes(b)) => {
                m.insert("namespace".into(), Value::String(string(b)?));
            }
            (6, Field::Bytes(b)) => {
                m.insert("resourceVersion".into(), Value::String(string(b)?));
            }
            (11, Field::Bytes(b)) => insert_entry(&mut m, "labels", map_entry(b, false)?),
            (12, Field::Bytes(b)) => insert_entry(&mut m, "annotations", map_entry(b, false)?),
            (13, Field::Bytes(b)) => push(&mut m, "ownerReferences", owner_reference(b)?),
            (14, Field::Bytes(b)) => push(&mut m, "finalizers", Value::String(string(b)?)),
            _ => {}
        }
    }
    m.retain(|_, v| v.as_str() != Some(""));
    Ok(Value::Object(m))
}

fn service_port(b: &[u8]) -> Result<Value, ProtoError> {
    let mut p = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(b)) => p.insert("name".into(), Value::String(string(b)?)),
            (2, Field::Bytes(b)) => p.insert("protocol".into(), Value::String(string(b)?)),
            (3, Field::Varint(v)) => p.insert("port".into(), json!(v as i32)),
            (4, Field::Bytes(b)) => {
                let (mut ty, mut int, mut s) = (0, 0, String::new());
                for (n, f) in fields(b)? {
                    match (n, f) {
                        (1, Field::Varint(v)) => ty = v,
                        (2, Field::Varint(v)) => int = v as i32,
                        (3, Field::Bytes(b)) => s = string(b)?,
                        _ => {}
                    }
                }
                let v = if ty == 1 {
                    Value::String(s)
                } else {
                    json!(int)
                };
                p.insert("targetPort".into(), v)
            }
            (5, Field::Varint(v)) => p.insert("nodePort".into(), json!(v as i32)),
            (6, Field::Bytes(b)) => p.insert("appProtocol".into(), Value::String(string(b)?)),
            _ => None,
        };
    }
    // proto2 sends unset optionals as zero values; JSON clients omit them
    p.retain(|k, v| v.as_str() != Some("") && !(k == "nodePort" && v == &json!(0)));
    Ok(Value::Object(p))
}

fn service_spec(b: &[u8]) -> Result<Value, ProtoError> {
    let mut s = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(b)) => push(&mut s, "ports", service_port(b)?),
            (2, Field::Bytes(b)) => insert_entry(&mut s, "selector", map_entry(b, false)?),
            (3, Field::Bytes(b)) => {
                s.insert("clusterIP".into(), Value::String(string(b)?));
            }
            (4, Field::Bytes(b)) => {
                s.insert("type".into(), Value::String(string(b)?));
            }
            (5, Field::Bytes(b)) => push(&mut s, "externalIPs", Value::String(string(b)?)),
            (10, Field::Bytes(b)) => {
                s.insert("externalName".into(), Value::String(string(b)?));
            }
            (18, Field::Bytes(b)) => push(&mut s, "clusterIPs", Value::String(string(b)?)),
            _ => {}
        }
    }
    s.retain(|_, v| v.as_str() != Some(""));
    Ok(Value::Object(s))
}

/// Decode a protobuf request body into the JSON form of the object.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let envelope = body.strip_prefix(b"k8s\0").ok_or(ProtoError::Envelope)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(envelope)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(b)) => api_version = string(b)?,
                        (2, Field::Bytes(b)) => kind = string(b)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let mut o = Map::new();
    o.insert("apiVersion".into(), Value::String(api_version.clone()));
    o.insert("kind".into(), Value::String(kind.clone()));
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => {
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(b)) => {
                        o.insert("metadata".into(), object_meta(b)?);
                    }
                    (2, Field::Bytes(b)) => insert_entry(&mut o, "data", map_entry(b, true)?),
                    (3, Field::Bytes(b)) => {
                        o.insert("type".into(), Value::String(string(b)?));
                    }
                    (4, Field::Bytes(b)) => {
                        insert_entry(&mut o, "stringData", map_entry(b, false)?)
                    }
                    (5, Field::Varint(v)) => {
                        o.insert("immutable".into(), Value::Bool(v != 0));
                    }
                    _ => {}
                }
            }
        }
        ("v1", "ConfigMap") => {
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(b)) => {
                        o.insert("metadata".into(), object_meta(b)?);
                    }
                    (2, Field::Bytes(b)) => insert_entry(&mut o, "data", map_entry(b, false)?),
                    (3, Field::Bytes(b)) => insert_entry(&mut o, "binaryData", map_entry(b, true)?),
                    (4, Field::Varint(v)) => {
                        o.insert("immutable".into(), Value::Bool(v != 0));
                    }
                    _ => {}
                }
            }
        }
        ("v1", "Namespace") => {
            for (n, f) in fields(raw)? {
                if let (1, Field::Bytes(b)) = (n, f) {
                    o.insert("metadata".into(), object_meta(b)?);
                }
            }
        }
        ("v1", "Service") => {
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(b)) => {
                        o.insert("metadata".into(), object_meta(b)?);
                    }
                    (2, Field::Bytes(b)) => {
                        o.insert("spec".into(), service_spec(b)?);
                    }
                    _ => {}
                }
            }
        }
        _ => return Err(ProtoError::Unsupported(kind)),
    }
    Ok(Value::Object(o))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ld(field: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![(field << 3) | 2, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decodes_a_secret() {
        let meta = [
            ld(1, b"s1"),
            ld(3, b"ns"),
            ld(11, &[ld(1, b"a"), ld(2, b"b")].concat()),
        ]
        .concat();
        let secret = [
            ld(1, &meta),
            ld(2, &[ld(1, b"k"), ld(2, b"\x00\x01")].concat()),
            ld(3, b"kubernetes.io/tls"),
        ]
        .concat();
        let tm = [ld(1, b"v1"), ld(2, b"Secret")].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &secret)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                   "metadata": {"name": "s1", "namespace": "ns", "labels": {"a": "b"}},
                   "data": {"k": "AAE="}})
        );
        assert_eq!(decode(b"nope"), Err(ProtoError::Envelope));
        assert_eq!(decode(&body[..body.len() - 3]), Err(ProtoError::Malformed));
    }
}
