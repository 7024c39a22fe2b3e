#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn v(text: &str) -> SemanticVersion {
    SemanticVersion::parse(text).unwrap()
}

#[test]
fn semantic_version_round_trips_its_exact_text() {
    for text in [
        "v1.2.3",
        "1.2.3",
        "v1",
        "1.2",
        "v0.1.0-rc.1+build.5",
        "1.0.0+20130313144700",
        "01.2.3",
    ] {
        let parsed = v(text);
        assert_eq!(parsed.as_str(), text);
        assert_eq!(parsed.to_string(), text);
        let json = serde_json::to_value(&parsed).unwrap();
        assert_eq!(json, serde_json::Value::String(text.into()));
        let back: SemanticVersion = serde_json::from_value(json).unwrap();
        assert_eq!(back.as_str(), text);
    }
}

#[test]
fn semantic_version_parts() {
    let parsed = v("v1.2.3-alpha.1+exp.sha.5114f85");
    assert_eq!((parsed.major(), parsed.minor(), parsed.patch()), (1, 2, 3));
    assert_eq!(parsed.prerelease(), Some("alpha.1"));
    assert_eq!(parsed.build(), Some("exp.sha.5114f85"));
    let short = v("v2");
    assert_eq!((short.major(), short.minor(), short.patch()), (2, 0, 0));
    assert_eq!(short.prerelease(), None);
    assert_eq!(short.build(), None);
}

#[test]
fn semantic_version_rejects_what_the_crd_pattern_rejects() {
    for text in [
        "",
        "v",
        "x1.0.0",
        "1.2.3.4",
        "1..2",
        "1.2.",
        "1.2.3-",
        "1.2.3+",
        "1.2.3-a..b",
        "1.2.3-a_b",
        "1.2.3+b@d",
        "V1.2.3",
        " 1.2.3",
        "1.2.3-01",
        "99999999999999999999999",
    ] {
        assert!(
            SemanticVersion::parse(text).is_err(),
            "{text:?} should be rejected"
        );
        let json = serde_json::Value::String(text.into());
        assert!(serde_json::from_value::<SemanticVersion>(json).is_err());
    }
    let error = SemanticVersion::parse("1.x").unwrap_err();
    assert!(error.to_string().contains("\"1.x\""), "{error}");
    assert!(serde_json::from_value::<SemanticVersion>(serde_json::json!(1)).is_err());
}

#[test]
fn semantic_version_precedence() {
    let ordered = [
        "0.9.9",
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "v1.0.1",
        "1.1",
        "2",
    ];
    for pair in ordered.windows(2) {
        assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
    }
    // Spelling and build metadata do not affect equality (Go's Equal).
    assert_eq!(v("v1.2"), v("1.2.0"));
    assert_eq!(v("1.2.0+a"), v("1.2.0+b"));
    assert_ne!(v("1.2.0-a"), v("1.2.0"));
    use std::collections::HashSet;
    let set: HashSet<_> = [v("v1.2"), v("1.2.0"), v("1.2.0+x")].into_iter().collect();
    assert_eq!(set.len(), 1);
}

#[test]
fn constraints_keep_their_text() {
    let c: SemanticVersionConstraints =
        serde_json::from_value(serde_json::json!(">= 1.2, < 2")).unwrap();
    assert_eq!(c.as_str(), ">= 1.2, < 2");
    assert_eq!(
        serde_json::to_value(&c).unwrap(),
        serde_json::json!(">= 1.2, < 2")
    );
    assert!(serde_json::from_value::<SemanticVersionConstraints>(serde_json::json!("  ")).is_err());
}

#[test]
fn tag_list_contains_and_contains_all() {
    let list: TagList = vec![Tag::new("a", "1"), Tag::new("b", "2")].into();
    assert!(list.contains(&Tag::new("a", "1")));
    assert!(!list.contains(&Tag::new("a", "2")), "value must match too");
    assert!(!list.contains(&Tag::new("c", "1")));
    assert!(list.contains_all(&TagList::default()));
    assert!(list.contains_all(&vec![Tag::new("b", "2"), Tag::new("a", "1")].into()));
    assert!(!list.contains_all(&vec![Tag::new("a", "1"), Tag::new("b", "3")].into()));
    assert!(!TagList::default().contains(&Tag::new("a", "1")));
    assert_eq!(
        serde_json::to_value(&list).unwrap(),
        serde_json::json!([{"name": "a", "value": "1"}, {"name": "b", "value": "2"}])
    );
}

#[test]
fn ipv4_values() {
    let address: IPv4Address = serde_json::from_value(serde_json::json!("192.168.0.1")).unwrap();
    assert_eq!(
        serde_json::to_value(address).unwrap(),
        serde_json::json!("192.168.0.1")
    );
    assert!(serde_json::from_value::<IPv4Address>(serde_json::json!("300.1.1.1")).is_err());
    assert!(serde_json::from_value::<IPv4Address>(serde_json::json!("::1")).is_err());

    let prefix: IPv4Prefix = serde_json::from_value(serde_json::json!("10.1.2.3/16")).unwrap();
    assert_eq!(
        serde_json::to_value(prefix).unwrap(),
        serde_json::json!("10.1.0.0/16")
    );
    assert!(prefix.contains("10.1.255.1".parse().unwrap()));
    assert!(!prefix.contains("10.2.0.1".parse().unwrap()));
    assert_eq!(
        "0.0.0.0/0".parse::<IPv4Prefix>().unwrap().to_string(),
        "0.0.0.0/0"
    );
    assert_eq!(
        "1.2.3.4/32".parse::<IPv4Prefix>().unwrap().to_string(),
        "1.2.3.4/32"
    );
    for bad in [
        "10.0.0.0",
        "10.0.0.0/33",
        "10.0.0.0/",
        "10.0.0/8",
        "10.0.0.0/+8",
        "10.0.0.0/008",
    ] {
        assert!(bad.parse::<IPv4Prefix>().is_err(), "{bad:?}");
    }
}

#[test]
fn generic_shapes() {
    let machine = MachineGeneric {
        image_id: "img".into(),
        flavor_id: "flv".into(),
        disk_size: None,
        replicas: None,
    };
    assert_eq!(
        serde_json::to_value(&machine).unwrap(),
        serde_json::json!({"imageId": "img", "flavorId": "flv"})
    );
    let json =
        serde_json::json!({"imageId": "i", "flavorId": "f", "diskSize": "50Gi", "replicas": 3});
    let machine: MachineGeneric = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&machine).unwrap(), json);
    assert!(
        serde_json::from_value::<MachineGeneric>(
            serde_json::json!({"imageId": "i", "flavorId": "f", "replicas": -1})
        )
        .is_err()
    );

    let json = serde_json::json!({"nodeNetwork": "192.168.0.0/24", "dnsNameservers": ["8.8.8.8"]});
    let network: NetworkGeneric = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&network).unwrap(), json);

    let json = serde_json::json!({"name": "x", "reference": {"kind": "HelmApplication", "name": "cilium", "version": "v1.15.0"}});
    let named: ApplicationNamedReference = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(named.reference.kind, ApplicationReferenceKind::Helm);
    assert_eq!(serde_json::to_value(&named).unwrap(), json);
}
