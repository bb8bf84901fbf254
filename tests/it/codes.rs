//! The finding codes are a contract: unique, kebab-case, and snapshotted.

use gpuenv::resolve::codes::CODES;

#[test]
fn codes_are_unique_kebab_case_and_match_the_snapshot() {
    let mut seen = std::collections::HashSet::new();
    for (code, meaning) in CODES {
        assert!(seen.insert(code), "duplicate finding code {code}");
        assert!(
            code.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !code.starts_with('-'),
            "not kebab-case: {code}"
        );
        assert!(!meaning.is_empty());
    }
    let listed: String = CODES.iter().map(|(c, _)| format!("{c}\n")).collect();
    let path = crate::support::root().join("tests/snapshots/finding-codes.txt");
    let snapshot = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        listed,
        snapshot,
        "finding codes changed: this is a change of the JSON contract. If intended, update {}",
        path.display()
    );
}
