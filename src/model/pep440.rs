//! PEP 440 versions and specifiers, for Python and PyTorch, through `pep440_rs`.
//!
//! Traps this module exists for:
//! - `2.4.1+cu121` and `2.4.1` are the same release: the local segment (`+cu121`) names the
//!   build, and PyPI's default wheels have none, so the CUDA of a build must be read from
//!   its metadata, not from the string.
//! - NVIDIA's builds are pre-releases with a commit and container in the local segment:
//!   `2.6.0a0+ecf3bae40a.nv25.1`. They satisfy `>=2.6.0a0` but not `>=2.6`.
//! - `==2.4.*` matches `2.4.1+cu121`; `==2.4.1` matches `2.4.1+cu121` too (a specifier
//!   without a local segment ignores the candidate's).

pub use pep440_rs::{Operator, Version, VersionSpecifier, VersionSpecifiers};

use super::{ParseError, Variant};

/// Parses a PEP 440 version (`2.4.1+cu121`, `2.5.0a0+872d972e41`, `3.12`).
pub fn parse_version(input: &str) -> Result<Version, ParseError> {
    input
        .trim()
        .parse::<Version>()
        .map_err(|e| ParseError::new("PEP 440 version", input, e.to_string()))
}

/// Parses PEP 440 specifiers (`>=3.9,<3.14`, `==2.4.*`). A bare version (`2.4.1`) is read
/// as `==2.4.1`, since that is what people mean when they type one on a command line.
pub fn parse_specifiers(input: &str) -> Result<VersionSpecifiers, ParseError> {
    let trimmed = input.trim();
    let owned;
    let text = if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        owned = format!("=={trimmed}");
        owned.as_str()
    } else {
        trimmed
    };
    text.parse::<VersionSpecifiers>().map_err(|e| {
        // pep440_rs renders a caret under the offending span on following lines; the first
        // line names the problem, the rest point at it.
        let message = e.to_string();
        let reason = message
            .lines()
            .collect::<Vec<_>>()
            .join(" | ")
            .replace("Failed to parse version: ", "");
        ParseError::new("version specifier", input, reason)
    })
}

/// The CUDA variant named by a torch version's local segment (`+cu121`), if any.
pub fn local_variant(version: &Version) -> Option<Variant> {
    let first = version.local().first()?;
    first.to_string().parse().ok()
}

/// `2.4.1` for `2.4.1+cu121`: the release as PyPI knows it.
pub fn public(version: &Version) -> Version {
    version.clone().without_local()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_strings() {
        let v = parse_version("2.4.1+cu121").unwrap();
        assert_eq!(local_variant(&v), "cu121".parse().ok());
        assert_eq!(public(&v).to_string(), "2.4.1");
        let ngc = parse_version("2.6.0a0+ecf3bae40a.nv25.1").unwrap();
        assert!(ngc.is_pre());
        assert_eq!(local_variant(&ngc), None);
        assert_eq!(ngc.to_string(), "2.6.0a0+ecf3bae40a.nv25.1");
        let nv = parse_version("2.5.0a0+872d972e41").unwrap();
        assert!(nv < parse_version("2.5.0").unwrap());
    }

    #[test]
    fn specifiers() {
        let s = parse_specifiers(">=3.9,<3.14").unwrap();
        assert!(s.contains(&parse_version("3.13").unwrap()));
        assert!(!s.contains(&parse_version("3.14").unwrap()));
        let s = parse_specifiers("==2.4.*").unwrap();
        assert!(s.contains(&parse_version("2.4.1+cu121").unwrap()));
        let s = parse_specifiers("2.4.1").unwrap();
        assert!(s.contains(&parse_version("2.4.1+cu121").unwrap()));
        assert!(!s.contains(&parse_version("2.4.0").unwrap()));
    }

    #[test]
    fn bad_specifier_names_input() {
        let e = parse_specifiers(">=3.x").unwrap_err();
        assert!(
            e.to_string().starts_with("invalid version specifier `>=3.x`"),
            "{e}"
        );
        assert!(parse_version("2.4.1+").is_err());
    }
}
