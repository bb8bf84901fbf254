//! The CPU architecture of a Linux host, as wheel tags and `uname -m` name it.
//!
//! Why a type of its own: torch's CUDA wheels exist per architecture (PyPI's aarch64 wheels
//! were CPU-only builds up to 2.10), so a verdict for a Grace machine (GH200, GB200) depends
//! on it. Records and reports write the canonical names `x86_64` and `aarch64`; people also
//! write `arm64` (Docker, macOS), `sbsa` (NVIDIA's name for server Arm) and `amd64`, which
//! [`HostArch::read`] accepts and says how it read them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// A host CPU architecture that torch publishes Linux wheels for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostArch {
    /// `x86_64` (`amd64`).
    X86_64,
    /// `aarch64` (`arm64`, NVIDIA's `sbsa`): Grace and other server Arm CPUs.
    Aarch64,
}

/// The forms [`HostArch::read`] accepts, for messages.
pub const ARCH_FORMS: &str = "x86_64 (or amd64), aarch64 (or arm64, sbsa)";

impl HostArch {
    /// Both, in the order records list them.
    pub const ALL: [HostArch; 2] = [HostArch::X86_64, HostArch::Aarch64];

    /// The canonical name (`x86_64`, `aarch64`): the `uname -m` of Linux and the suffix of
    /// wheel platform tags.
    pub fn as_str(self) -> &'static str {
        match self {
            HostArch::X86_64 => "x86_64",
            HostArch::Aarch64 => "aarch64",
        }
    }

    /// Reads what a person or a tool writes: the canonical names, `amd64`, `arm64`, `sbsa`,
    /// in any case. Returns the architecture and, when the text was not its canonical name,
    /// a sentence saying how it was read.
    pub fn read(text: &str) -> Result<(HostArch, Option<String>), ParseError> {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        let (arch, alias) = match lower.as_str() {
            "x86_64" => (HostArch::X86_64, false),
            "aarch64" => (HostArch::Aarch64, false),
            "amd64" | "x86-64" | "x64" => (HostArch::X86_64, true),
            "arm64" | "sbsa" | "arm64-sbsa" => (HostArch::Aarch64, true),
            _ => {
                return Err(ParseError::new(
                    "CPU architecture",
                    t,
                    format!("expected {ARCH_FORMS}"),
                ));
            }
        };
        let note = (alias || t != arch.as_str()).then(|| {
            format!(
                "`{t}` is the {} architecture; Linux and wheel tags call it {}",
                if arch == HostArch::Aarch64 {
                    "64-bit Arm"
                } else {
                    "64-bit x86"
                },
                arch.as_str()
            )
        });
        Ok((arch, note))
    }
}

impl fmt::Display for HostArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Strict: only the canonical names, as records write them.
impl FromStr for HostArch {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        HostArch::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| ParseError::new("CPU architecture", s, "expected `x86_64` or `aarch64`"))
    }
}

impl Serialize for HostArch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for HostArch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_names_people_write() {
        assert_eq!(HostArch::read("aarch64").unwrap(), (HostArch::Aarch64, None));
        assert_eq!(HostArch::read(" x86_64 ").unwrap(), (HostArch::X86_64, None));
        for alias in ["arm64", "ARM64", "sbsa"] {
            let (a, note) = HostArch::read(alias).unwrap();
            assert_eq!(a, HostArch::Aarch64);
            assert!(note.unwrap().contains("aarch64"), "{alias}");
        }
        let (a, note) = HostArch::read("amd64").unwrap();
        assert_eq!(a, HostArch::X86_64);
        assert!(note.unwrap().contains("x86_64"));
    }

    #[test]
    fn refuses_other_names_listing_the_forms() {
        let e = HostArch::read("ppc64le").unwrap_err().to_string();
        assert!(
            e.contains("ppc64le") && e.contains("aarch64") && e.contains("arm64"),
            "{e}"
        );
        assert!(
            "arm64".parse::<HostArch>().is_err(),
            "records write the canonical name"
        );
        assert_eq!("aarch64".parse::<HostArch>().unwrap(), HostArch::Aarch64);
    }
}
