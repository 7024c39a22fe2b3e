use super::*;

#[test]
fn the_built_configuration_is_checked_as_kube_parsed_it() {
    let entry = KubeconfigEntry::new(EntryKind::Cluster, "c");
    let check = |url: &str| {
        let config = kube::Config::new(url.parse().unwrap_or_default());
        check_built(&config, "x", &entry).map_err(|e| e.refused_field())
    };
    assert_eq!(check("https://h:6443"), Ok(()));
    assert_eq!(check("http://h"), Err(Some(RefusedField::ServerNotHttps)));
    assert_eq!(
        check("https://u:p@h"),
        Err(Some(RefusedField::ServerUserInfo))
    );
    let mut config = kube::Config::new("https://h".parse().unwrap_or_default());
    config.accept_invalid_certs = true;
    assert_eq!(
        check_built(&config, "x", &entry).map_err(|e| e.refused_field()),
        Err(Some(RefusedField::InsecureSkipTlsVerify))
    );
}

#[test]
fn excerpts_escape_and_cut() {
    assert_eq!(excerpt("a\nb\u{1b}c", 64), "a\\nb\\u{1b}c");
    assert_eq!(excerpt("abcdef", 3), "abc…");
    assert_eq!(excerpt("ab\n", 3), "ab…");
    assert_eq!(excerpt("", 3), "");
}
