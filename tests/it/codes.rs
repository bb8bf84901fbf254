//! The finding codes and the doctor check ids are a contract: unique, kebab-case, and
//! snapshotted.

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

#[test]
fn doctor_check_ids_are_unique_kebab_case_and_match_the_snapshot() {
    use gpuenv::judge::CHECKS;
    let mut seen = std::collections::HashSet::new();
    for (id, meaning) in CHECKS {
        assert!(seen.insert(id), "duplicate doctor check id {id}");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !id.starts_with('-'),
            "not kebab-case: {id}"
        );
        assert!(!meaning.is_empty());
    }
    let listed: String = CHECKS.iter().map(|(c, _)| format!("{c}\n")).collect();
    let path = crate::support::root().join("tests/snapshots/doctor-checks.txt");
    let snapshot = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        listed,
        snapshot,
        "doctor check ids changed: this is a change of the JSON contract. If intended, update {}",
        path.display()
    );
}

/// Every id `doctor` writes is one of [`gpuenv::judge::CHECKS`], on every recorded host
/// (reading the document back would refuse any other), and every registered id is
/// written on some host: the list holds no id doctor has stopped emitting.
#[test]
fn doctor_emits_exactly_the_registered_check_ids() {
    use gpuenv::judge::CHECKS;
    let mut emitted = std::collections::BTreeSet::new();
    let hosts = crate::support::fixture("hosts");
    for entry in std::fs::read_dir(&hosts).unwrap() {
        let dir = entry.unwrap().path();
        // Each host is a directory; the folder's README is not one.
        if !dir.is_dir() {
            continue;
        }
        let run = crate::support::gpuenv(&["doctor", "--json", "--host-facts", dir.to_str().unwrap()]);
        let doc: gpuenv::report::doc::DoctorDoc = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", dir.display(), run.stderr));
        emitted.extend(doc.checks.iter().map(|c| c.id));
    }
    let registered: std::collections::BTreeSet<&str> = CHECKS.iter().map(|(c, _)| *c).collect();
    assert_eq!(emitted, registered);
}
