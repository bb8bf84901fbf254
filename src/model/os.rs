//! The glibc of the Linux distributions GPU hosts run, for the manylinux rule.
//!
//! Each value is the version of the distribution's own glibc package (Ubuntu: `libc6` on
//! packages.ubuntu.com; Debian: packages.debian.org; RHEL family: the `glibc` package of
//! the release). A distribution's glibc does not change within a release.

use super::GlibcVersion;

/// `(names, glibc)`: the spellings people use (`ubuntu22.04` as in image tags,
/// `ubuntu-22.04`, `jammy`).
const TABLE: &[(&[&str], (u32, u32))] = &[
    (&["ubuntu18.04", "bionic"], (2, 27)),
    (&["ubuntu20.04", "focal"], (2, 31)),
    (&["ubuntu22.04", "jammy"], (2, 35)),
    (&["ubuntu24.04", "noble"], (2, 39)),
    (&["debian10", "buster"], (2, 28)),
    (&["debian11", "bullseye"], (2, 31)),
    (&["debian12", "bookworm"], (2, 36)),
    (&["debian13", "trixie"], (2, 41)),
    (&["centos7", "rhel7", "ubi7"], (2, 17)),
    (
        &["centos8", "rhel8", "rockylinux8", "rocky8", "almalinux8", "ubi8"],
        (2, 28),
    ),
    (
        &[
            "rhel9",
            "rockylinux9",
            "rocky9",
            "almalinux9",
            "ubi9",
            "centosstream9",
        ],
        (2, 34),
    ),
    (&["amzn2", "amazonlinux2"], (2, 26)),
    (&["amzn2023", "amazonlinux2023"], (2, 34)),
];

/// The glibc of a distribution named as in image tags (`ubuntu22.04`), with or without
/// separators and case (`Ubuntu 22.04`, `rocky-9`), or by codename (`jammy`).
pub fn glibc_of_os(name: &str) -> Option<GlibcVersion> {
    let key: String = name
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect();
    TABLE
        .iter()
        .find(|(names, _)| names.contains(&key.as_str()))
        .map(|(_, (a, b))| GlibcVersion::from_major_minor(*a, *b))
}

/// The oldest Ubuntu and RHEL releases whose glibc is at least `glibc`, as people write
/// them (`Ubuntu 20.04`, `RHEL/Rocky 8`), for suggestions; those the table has.
pub fn oldest_os_with(glibc: &GlibcVersion) -> Vec<String> {
    let oldest = |prefix: &str| {
        TABLE
            .iter()
            .filter(|(_, (a, b))| GlibcVersion::from_major_minor(*a, *b) >= *glibc)
            .filter_map(|(names, v)| names.iter().find(|n| n.starts_with(prefix)).map(|n| (v, n)))
            .min_by_key(|(v, _)| **v)
            .map(|(_, n)| n[prefix.len()..].to_string())
    };
    let mut out = Vec::new();
    if let Some(v) = oldest("ubuntu") {
        out.push(format!("Ubuntu {v}"));
    }
    if let Some(v) = oldest("rhel") {
        out.push(format!("RHEL {v}"));
    }
    out
}

/// Every name [`glibc_of_os`] knows, for messages.
pub fn known_os() -> Vec<&'static str> {
    TABLE.iter().map(|(names, _)| names[0]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        assert_eq!(glibc_of_os("ubuntu22.04").unwrap().to_string(), "2.35");
        assert_eq!(glibc_of_os("Ubuntu 22.04").unwrap().to_string(), "2.35");
        assert_eq!(glibc_of_os("jammy").unwrap().to_string(), "2.35");
        assert_eq!(glibc_of_os("rocky-9").unwrap().to_string(), "2.34");
        assert_eq!(glibc_of_os("centos7").unwrap().to_string(), "2.17");
        assert!(glibc_of_os("windows").is_none());
    }

    #[test]
    fn oldest_releases_for_a_floor() {
        let g = |s: &str| s.parse::<GlibcVersion>().unwrap();
        assert_eq!(oldest_os_with(&g("2.28")), ["Ubuntu 20.04", "RHEL 8"]);
        assert_eq!(oldest_os_with(&g("2.17")), ["Ubuntu 18.04", "RHEL 7"]);
        assert_eq!(oldest_os_with(&g("2.36")), ["Ubuntu 24.04"]);
    }
}
