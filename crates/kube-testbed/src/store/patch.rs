//! The three patch algorithms: JSON merge patch (RFC 7386), strategic merge patch,
//! and JSON patch (RFC 6902).

use serde_json::{Value, json};

use super::ApiError;

/// RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(t) = target.as_object_mut() {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// An approximation of a strategic merge patch: a JSON merge patch that also
/// understands the `$patch: replace|delete` directive, ignores the other `$`
/// directives, and merges lists of objects keyed by `name` (or `port`) instead of
/// replacing them. Other lists are replaced.
pub(crate) fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = patch.clone();
        strip_directives(&mut clean);
        *target = clean;
        return;
    }
    if !target.is_object() {
        *target = json!({});
    }
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() || v.get("$patch").and_then(Value::as_str) == Some("delete") {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(Value::Array(existing)), Value::Array(items))
                if merge_key(existing, items).is_some() =>
            {
                let key = merge_key(existing, items).unwrap_or("name");
                for item in items {
                    let id = item.get(key).cloned();
                    let pos = existing.iter().position(|e| e.get(key) == id.as_ref());
                    let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match (pos, delete) {
                        (Some(i), true) => {
                            existing.remove(i);
                        }
                        (Some(i), false) => strategic_merge(&mut existing[i], item),
                        (None, true) => {}
                        (None, false) => {
                            let mut clean = item.clone();
                            strip_directives(&mut clean);
                            existing.push(clean);
                        }
                    }
                }
            }
            (Some(existing), _) => strategic_merge(existing, v),
            (None, _) => {
                let mut clean = v.clone();
                strip_directives(&mut clean);
                t.insert(k.clone(), clean);
            }
        }
    }
}

fn merge_key(existing: &[Value], items: &[Value]) -> Option<&'static str> {
    ["name", "port"].into_iter().find(|key| {
        !items.is_empty()
            && items
                .iter()
                .chain(existing.iter())
                .all(|e| e.get(*key).is_some())
    })
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn pointer_parent<'a>(doc: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), ApiError> {
    let bad = || ApiError::new(422, "Invalid", format!("invalid JSON patch path {path:?}"));
    if !path.starts_with('/') {
        return Err(bad());
    }
    let (parent, last) = path.rsplit_once('/').ok_or_else(bad)?;
    let target = doc.pointer_mut(parent).ok_or_else(bad)?;
    Ok((target, unescape(last)))
}

fn jp_get(doc: &Value, path: &str) -> Option<Value> {
    doc.pointer(path).cloned()
}

fn jp_remove(doc: &mut Value, path: &str) -> Result<Value, ApiError> {
    let (parent, last) = pointer_parent(doc, path)?;
    let missing = || {
        ApiError::new(
            422,
            "Invalid",
            format!("JSON patch: path {path:?} does not exist"),
        )
    };
    match parent {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|_| missing())?;
            if i < a.len() {
                Ok(a.remove(i))
            } else {
                Err(missing())
            }
        }
        _ => Err(missing()),
    }
}

fn jp_add(doc: &mut Value, path: &str, value: Value) -> Result<(), ApiError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = pointer_parent(doc, path)?;
    let bad = || {
        ApiError::new(
            422,
            "Invalid",
            format!("JSON patch: cannot add at {path:?}"),
        )
    };
    match parent {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let i: usize = last.parse().map_err(|_| bad())?;
            if i > a.len() {
                return Err(bad());
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(bad()),
    }
}

/// RFC 6902 JSON patch.
pub(crate) fn json_patch(doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| ApiError::bad_request("a JSON patch must be an array of operations"))?;
    let mut doc = doc.clone();
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                ApiError::bad_request(format!("JSON patch op {name:?} needs a value"))
            })
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("JSON patch op {name:?} needs from")))
        };
        match name {
            "add" => jp_add(&mut doc, path, value()?)?,
            "remove" => {
                jp_remove(&mut doc, path)?;
            }
            "replace" => {
                jp_remove(&mut doc, path)?;
                jp_add(&mut doc, path, value()?)?;
            }
            "move" => {
                let v = jp_remove(&mut doc, from()?)?;
                jp_add(&mut doc, path, v)?;
            }
            "copy" => {
                let v = jp_get(&doc, from()?).ok_or_else(|| {
                    ApiError::new(422, "Invalid", "JSON patch: copy from a missing path")
                })?;
                jp_add(&mut doc, path, v)?;
            }
            "test" => {
                if jp_get(&doc, path) != Some(value()?) {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        format!("JSON patch: test failed at {path:?}"),
                    ));
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown JSON patch op {other:?}"
                )));
            }
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn strategic_merge_keys_lists_and_directives() {
        let mut doc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}], "x": [1, 2]}});
        strategic_merge(
            &mut doc,
            &json!({"$setElementOrder/ports": [], "spec": {
                "ports": [{"name": "http", "targetPort": 8080}, {"name": "https", "$patch": "delete"}, {"name": "m", "port": 9}],
                "x": [3]
            }}),
        );
        assert_eq!(
            doc,
            json!({"spec": {"ports": [{"port": 80, "name": "http", "targetPort": 8080}, {"name": "m", "port": 9}], "x": [3]}})
        );
        strategic_merge(&mut doc, &json!({"spec": {"$patch": "replace", "y": 1}}));
        assert_eq!(doc, json!({"spec": {"y": 1}}));
    }

    #[test]
    fn patches() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge_patch(&mut doc, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(doc, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
        let out = json_patch(
            &doc,
            &json!([
                {"op": "add", "path": "/l/-", "value": 4},
                {"op": "replace", "path": "/a/c", "value": 5},
                {"op": "remove", "path": "/a/d"},
                {"op": "test", "path": "/l/1", "value": 4},
                {"op": "copy", "from": "/a/c", "path": "/x"},
            ]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": {"c": 5}, "l": [3, 4], "x": 5}));
        assert!(json_patch(&doc, &json!([{"op": "test", "path": "/a/c", "value": 9}])).is_err());
        assert!(json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
