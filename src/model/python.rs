//! Wheel tags that decide whether a wheel installs: CPython tags (`cp312`, `cp313t`) and
//! manylinux platform tags (`manylinux_2_28_x86_64`), which carry the glibc floor.
//!
//! A torch wheel's tags decide which Pythons it installs on, not its `Requires-Python`:
//! torch 2.5.0 says `>=3.8` but ships no `cp38` wheel.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{GlibcVersion, ParseError};

/// A CPython wheel tag: `cp39`, `cp37m` (pymalloc ABI), `cp313t` (free-threaded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PythonTag {
    /// Python major (3).
    pub major: u8,
    /// Python minor.
    pub minor: u8,
    /// A free-threaded (PEP 703) build: `cp313t`.
    pub free_threaded: bool,
    /// The pre-3.8 pymalloc ABI suffix: `cp37m`.
    pub pymalloc: bool,
}

impl PythonTag {
    /// `3.12` for `cp312` (and for `cp312t`).
    pub fn version(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl FromStr for PythonTag {
    type Err = ParseError;
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "CPython tag";
        let Some(rest) = input.strip_prefix("cp") else {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected `cp` followed by the version (`cp312`)",
            ));
        };
        let (digits, free_threaded, pymalloc) = if let Some(d) = rest.strip_suffix('t') {
            (d, true, false)
        } else if let Some(d) = rest.strip_suffix('m') {
            (d, false, true)
        } else {
            (rest, false, false)
        };
        if !(2..=3).contains(&digits.len()) {
            return Err(ParseError::new(WHAT, input, "expected 2 or 3 digits after `cp`"));
        }
        if let Some(bad) = digits.find(|c: char| !c.is_ascii_digit()) {
            return Err(ParseError::at(WHAT, input, 2 + bad, "a digit"));
        }
        let (maj, min) = digits.split_at(1);
        Ok(PythonTag {
            major: maj.parse().expect("checked digit"),
            minor: min.parse().expect("checked digits"),
            free_threaded,
            pymalloc,
        })
    }
}

impl fmt::Display for PythonTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cp{}{}", self.major, self.minor)?;
        if self.free_threaded {
            f.write_str("t")?;
        }
        if self.pymalloc {
            f.write_str("m")?;
        }
        Ok(())
    }
}

/// A manylinux platform tag; its glibc floor decides which Linux distributions can install it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Manylinux {
    text: Box<str>,
    glibc: (u32, u32),
}

impl Manylinux {
    /// The oldest glibc that can install a wheel with this tag.
    pub fn glibc(&self) -> GlibcVersion {
        GlibcVersion::from_major_minor(self.glibc.0, self.glibc.1)
    }

    /// The tag as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for Manylinux {
    type Err = ParseError;

    /// Reads `manylinux1_x86_64`, `manylinux2014_x86_64`, `manylinux_2_28_x86_64`, with or
    /// without the architecture.
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "manylinux tag";
        let legacy = [
            ("manylinux1", (2, 5)),
            ("manylinux2010", (2, 12)),
            ("manylinux2014", (2, 17)),
        ];
        let arch_ok = |rest: &str| {
            rest.is_empty() || ["_x86_64", "_aarch64", "_i686", "_ppc64le", "_s390x"].contains(&rest)
        };
        for (name, glibc) in legacy {
            if let Some(rest) = input.strip_prefix(name) {
                if arch_ok(rest) {
                    return Ok(Manylinux {
                        text: input.into(),
                        glibc,
                    });
                }
            }
        }
        let err = || {
            ParseError::new(
                WHAT,
                input,
                "expected `manylinux1`, `manylinux2010`, `manylinux2014` or `manylinux_<major>_<minor>`, optionally followed by `_<arch>`",
            )
        };
        let rest = input.strip_prefix("manylinux_").ok_or_else(err)?;
        let mut it = rest.splitn(3, '_');
        let major: u32 = it.next().and_then(|s| s.parse().ok()).ok_or_else(err)?;
        let minor: u32 = it.next().and_then(|s| s.parse().ok()).ok_or_else(err)?;
        let arch = it.next().map(|a| format!("_{a}")).unwrap_or_default();
        if !arch_ok(&arch) {
            return Err(err());
        }
        Ok(Manylinux {
            text: input.into(),
            glibc: (major, minor),
        })
    }
}

impl fmt::Display for Manylinux {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

macro_rules! serde_via_str {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_via_str!(PythonTag);
serde_via_str!(Manylinux);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_tags() {
        for s in ["cp37m", "cp38", "cp312", "cp313t", "cp315t"] {
            assert_eq!(s.parse::<PythonTag>().unwrap().to_string(), s);
        }
        let t: PythonTag = "cp313t".parse().unwrap();
        assert!(t.free_threaded);
        assert_eq!(t.version(), "3.13");
        for bad in ["py3", "cp3", "cp3x1", "cp3121", ""] {
            assert!(bad.parse::<PythonTag>().is_err(), "{bad}");
        }
    }

    #[test]
    fn manylinux() {
        let cases = [
            ("manylinux1_x86_64", "2.5"),
            ("manylinux2014_aarch64", "2.17"),
            ("manylinux_2_28_x86_64", "2.28"),
            ("manylinux_2_17", "2.17"),
        ];
        for (tag, glibc) in cases {
            let m: Manylinux = tag.parse().unwrap();
            assert_eq!(m.glibc().to_string(), glibc);
            assert_eq!(m.to_string(), tag);
        }
        for bad in [
            "manylinux",
            "manylinux_2",
            "manylinux_2_x",
            "manylinux1_sparc",
            "linux_x86_64",
        ] {
            assert!(bad.parse::<Manylinux>().is_err(), "{bad}");
        }
    }
}
