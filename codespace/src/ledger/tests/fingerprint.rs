use std::collections::BTreeMap;

use serde_json::json;

use crate::ledger::canonical_json;

fn versions(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn fingerprint_is_stable_hex_and_covers_every_field() {
    let v = versions(&[("a.txt", "v1")]);
    let base = crate::ledger::fingerprint("demo", "P", &v, false);
    assert_eq!(base.len(), 64);
    assert!(base.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(base, crate::ledger::fingerprint("demo", "P", &v, false));
    let others = [
        crate::ledger::fingerprint("demo2", "P", &v, false),
        crate::ledger::fingerprint("demo", "P2", &v, false),
        crate::ledger::fingerprint("demo", "P", &versions(&[("a.txt", "v2")]), false),
        crate::ledger::fingerprint("demo", "P", &BTreeMap::new(), false),
        crate::ledger::fingerprint("demo", "P", &v, true),
    ];
    for other in others {
        assert_ne!(base, other);
    }
}

#[test]
fn fingerprint_is_unambiguous_where_concatenation_would_not_be() {
    // Moving text between fields must change the fingerprint.
    let e = BTreeMap::new();
    assert_ne!(crate::ledger::fingerprint("ab", "c", &e, false), crate::ledger::fingerprint("a", "bc", &e, false));
    assert_ne!(
        crate::ledger::fingerprint("w", "p", &versions(&[("a", "bc")]), false),
        crate::ledger::fingerprint("w", "p", &versions(&[("ab", "c")]), false)
    );
}

#[test]
fn canonical_json_sorts_keys_at_every_depth() {
    let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": "s\"q"}});
    assert_eq!(canonical_json(&a), r#"{"a":{"x":"s\"q","y":[1,{"c":3,"d":2}]},"b":1}"#);
}
