//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector`
//! query parameters with the Kubernetes grammar.

use serde_json::Value;

/// Why a selector string could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectorError {
    /// The label selector does not follow the Kubernetes grammar.
    #[error("unable to parse requirement: {0}")]
    Label(String),
    /// The field selector names a field this resource does not support; the message
    /// is the apiserver's, naming the fields it does support.
    #[error("\"{0}\" is not a known field selector: only {1}")]
    UnsupportedField(String, String),
    /// The field selector does not follow `field=value`, `field==value`, `field!=value`.
    #[error("invalid field selector: {0}")]
    Field(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LabelReq {
    key: String,
    op: LabelOp,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Split on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError::Label(s.to_string()));
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Label(s.to_string()));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Label(whole.to_string()))?;
    let mut values = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        if !valid_value(v) {
            return Err(SelectorError::Label(whole.to_string()));
        }
        values.push(v.to_string());
    }
    Ok(values)
}

impl LabelSelector {
    /// Parse a label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`).
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let input = input.trim();
        let mut reqs = Vec::new();
        if input.is_empty() {
            return Ok(Self { reqs });
        }
        for part in split_top_level(input)? {
            let part = part.trim();
            let err = || SelectorError::Label(part.to_string());
            if part.is_empty() {
                return Err(err());
            }
            if let Some(key) = part.strip_prefix('!') {
                let key = key.trim();
                if !valid_key(key) {
                    return Err(err());
                }
                reqs.push(LabelReq {
                    key: key.to_string(),
                    op: LabelOp::NotExists,
                });
                continue;
            }
            let (key, op) = if let Some((k, v)) = part.split_once("!=") {
                (k, LabelOp::NotEq(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once("==") {
                (k, LabelOp::Eq(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once('=') {
                (k, LabelOp::Eq(v.trim().to_string()))
            } else if let Some(idx) = part.find(" notin ").or_else(|| part.find(" notin(")) {
                let (k, rest) = part.split_at(idx);
                let rest = rest.trim_start().trim_start_matches("notin");
                (k, LabelOp::NotIn(parse_set(rest, part)?))
            } else if let Some(idx) = part.find(" in ").or_else(|| part.find(" in(")) {
                let (k, rest) = part.split_at(idx);
                let rest = rest.trim_start().trim_start_matches("in");
                (k, LabelOp::In(parse_set(rest, part)?))
            } else {
                (part, LabelOp::Exists)
            };
            let key = key.trim();
            if !valid_key(key) {
                return Err(err());
            }
            if let LabelOp::Eq(v) | LabelOp::NotEq(v) = &op
                && !valid_value(v)
            {
                return Err(err());
            }
            reqs.push(LabelReq {
                key: key.to_string(),
                op,
            });
        }
        Ok(Self { reqs })
    }

    /// Whether an object (its `metadata.labels`) satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| {
            let v = get(&r.key);
            match &r.op {
                LabelOp::Eq(want) => v == Some(want.as_str()),
                LabelOp::NotEq(want) => v != Some(want.as_str()),
                LabelOp::In(set) => v.is_some_and(|v| set.iter().any(|s| s == v)),
                LabelOp::NotIn(set) => !v.is_some_and(|v| set.iter().any(|s| s == v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldReq {
    field: String,
    value: String,
    negate: bool,
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<FieldReq>,
}

impl FieldSelector {
    /// Parse a field selector; `supported` lists the field paths this kind supports.
    pub fn parse(input: &str, supported: &[&str]) -> Result<Self, SelectorError> {
        let input = input.trim();
        let mut reqs = Vec::new();
        if input.is_empty() {
            return Ok(Self { reqs });
        }
        for part in input.split(',') {
            let part = part.trim();
            let (field, value, negate) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, false)
            } else {
                return Err(SelectorError::Field(part.to_string()));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                let known: Vec<String> = supported.iter().map(|f| format!("\"{f}\"")).collect();
                return Err(SelectorError::UnsupportedField(
                    field.to_string(),
                    known.join(", "),
                ));
            }
            reqs.push(FieldReq {
                field: field.to_string(),
                value: value.trim().to_string(),
                negate,
            });
        }
        Ok(Self { reqs })
    }

    /// The value required for `metadata.name`, when the selector pins it (used by authorization).
    pub fn pinned_name(&self) -> Option<&str> {
        self.reqs
            .iter()
            .find(|r| r.field == "metadata.name" && !r.negate)
            .map(|r| r.value.as_str())
    }

    /// Whether an object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|r| {
            let pointer = format!("/{}", r.field.replace('.', "/"));
            let actual = obj.pointer(&pointer).and_then(Value::as_str).unwrap_or("");
            (actual == r.value) != r.negate
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n", "namespace": "ns", "labels": labels}, "type": "Opaque"})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("missing!=x"));
        assert!(m("app in (web, api)"));
        assert!(!m("app notin (web,api)"));
        assert!(m("missing notin (a)"));
        assert!(!m("missing in (a)"));
        assert!(m("tier"));
        assert!(!m("!tier"));
        assert!(m("!missing"));
        assert!(m("app=web,tier in (front)"));
        assert!(!m("app=web,tier=back"));
        assert!(LabelSelector::parse("app in (a").is_err());
        assert!(LabelSelector::parse("a=b,").is_err());
        assert!(LabelSelector::parse("a=b c").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let sup = ["metadata.name", "metadata.namespace", "type"];
        let m = |s: &str| FieldSelector::parse(s, &sup).unwrap().matches(&o);
        assert!(m("metadata.name=n"));
        assert!(m("metadata.namespace==ns,type=Opaque"));
        assert!(!m("metadata.name!=n"));
        assert_eq!(
            FieldSelector::parse("spec.x=1", &sup),
            Err(SelectorError::UnsupportedField(
                "spec.x".into(),
                "\"metadata.name\", \"metadata.namespace\", \"type\"".into()
            ))
        );
    }
}
