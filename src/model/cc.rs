//! Compute capability (`8.6`, `9.0a`, `12.0`) and the GPU architectures they belong to.
//!
//! A compute capability is `major.minor` plus an optional suffix: `a` marks an
//! arch-specific target (`sm_90a` runs only on 9.0), `f` a family-specific one
//! (`sm_100f` runs on the 10.x family, CUDA 12.9+). Both forms people write are read:
//! `8.6` (nvidia-smi, TORCH_CUDA_ARCH_LIST) and `sm_86` / `compute_86` (nvcc,
//! `torch.cuda.get_arch_list()`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// The suffix of an arch-specific (`a`) or family-specific (`f`) target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArchSuffix {
    /// Plain `sm_XY`: portable within the major.
    None,
    /// `sm_XYa`: runs only on exactly this compute capability.
    Arch,
    /// `sm_XYf`: runs on this family (same major, minor at least this one).
    Family,
}

/// A compute capability: `8.6`, `9.0a`, `10.0f`, `12.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputeCapability {
    /// Major revision: decides the architecture family.
    pub major: u8,
    /// Minor revision.
    pub minor: u8,
    /// Arch- or family-specific suffix.
    pub suffix: ArchSuffix,
}

impl ComputeCapability {
    /// A plain compute capability.
    pub const fn new(major: u8, minor: u8) -> Self {
        ComputeCapability {
            major,
            minor,
            suffix: ArchSuffix::None,
        }
    }

    /// The nvcc spelling: `sm_86`, `sm_90a`, `sm_120`.
    pub fn sm(&self) -> String {
        format!("sm_{}{}{}", self.major, self.minor, self.suffix_str())
    }

    /// The PTX spelling: `compute_90`.
    pub fn compute(&self) -> String {
        format!("compute_{}{}{}", self.major, self.minor, self.suffix_str())
    }

    /// The same compute capability without a suffix.
    pub fn plain(&self) -> Self {
        ComputeCapability::new(self.major, self.minor)
    }

    /// The architecture this compute capability belongs to, if known.
    pub fn architecture(&self) -> Option<Architecture> {
        Architecture::of(*self)
    }

    fn suffix_str(&self) -> &'static str {
        match self.suffix {
            ArchSuffix::None => "",
            ArchSuffix::Arch => "a",
            ArchSuffix::Family => "f",
        }
    }

    /// Parses `sm_86`, `sm_90a`, `compute_90`; returns whether it was a PTX (`compute_`) name.
    pub fn parse_nvcc(input: &str) -> Result<(Self, bool), ParseError> {
        const WHAT: &str = "compute capability";
        let (rest, ptx, offset) = if let Some(r) = input.strip_prefix("sm_") {
            (r, false, 3)
        } else if let Some(r) = input.strip_prefix("compute_") {
            (r, true, 8)
        } else {
            return Err(ParseError::at(WHAT, input, 0, "`sm_` or `compute_`"));
        };
        let (digits, suffix) = split_suffix(rest);
        if digits.len() < 2 || digits.len() > 3 {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected 2 or 3 digits after the prefix (`sm_86`, `sm_120`)",
            ));
        }
        if let Some(bad) = digits.find(|c: char| !c.is_ascii_digit()) {
            return Err(ParseError::at(WHAT, input, offset + bad, "a digit"));
        }
        let (maj, min) = digits.split_at(digits.len() - 1);
        let major = maj
            .parse()
            .map_err(|_| ParseError::new(WHAT, input, "major too large"))?;
        let minor = min
            .parse()
            .map_err(|_| ParseError::new(WHAT, input, "minor too large"))?;
        Ok((ComputeCapability { major, minor, suffix }, ptx))
    }
}

fn split_suffix(s: &str) -> (&str, ArchSuffix) {
    if let Some(r) = s.strip_suffix('a') {
        (r, ArchSuffix::Arch)
    } else if let Some(r) = s.strip_suffix('f') {
        (r, ArchSuffix::Family)
    } else {
        (s, ArchSuffix::None)
    }
}

impl FromStr for ComputeCapability {
    type Err = ParseError;

    /// Reads `8.6`, `9.0a`, `12.0`, and also `sm_86` / `compute_90`.
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "compute capability";
        if input.starts_with("sm_") || input.starts_with("compute_") {
            return Self::parse_nvcc(input).map(|(cc, _)| cc);
        }
        let (body, suffix) = split_suffix(input);
        let Some((maj, min)) = body.split_once('.') else {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected `major.minor` such as `8.6` or `9.0a`",
            ));
        };
        if maj.is_empty() || maj.len() > 2 {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected a 1- or 2-digit major before `.`",
            ));
        }
        if let Some(bad) = maj.find(|c: char| !c.is_ascii_digit()) {
            return Err(ParseError::at(WHAT, input, bad, "a digit"));
        }
        if min.len() != 1 {
            return Err(ParseError::new(WHAT, input, "expected one digit after `.`"));
        }
        if !min.as_bytes()[0].is_ascii_digit() {
            return Err(ParseError::at(WHAT, input, maj.len() + 1, "a digit"));
        }
        Ok(ComputeCapability {
            major: maj.parse().expect("checked digits"),
            minor: min.parse().expect("checked digit"),
            suffix,
        })
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{}", self.major, self.minor, self.suffix_str())
    }
}

impl Serialize for ComputeCapability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeCapability {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// NVIDIA GPU architectures, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// Compute capability 3.x (K80: 3.7).
    Kepler,
    /// 5.x.
    Maxwell,
    /// 6.x (P100: 6.0, P40: 6.1).
    Pascal,
    /// 7.0 and 7.2 (V100).
    Volta,
    /// 7.5 (T4).
    Turing,
    /// 8.0, 8.6, 8.7, 8.8 (A100, A10, RTX 30).
    Ampere,
    /// 8.9 (L4, L40, RTX 40).
    Ada,
    /// 9.0 (H100, H200, GH200).
    Hopper,
    /// 10.x, 11.x, 12.x (B200, GB200, B300, RTX 50, RTX PRO 6000).
    Blackwell,
}

impl Architecture {
    /// Every architecture, oldest first.
    pub const ALL: [Architecture; 9] = [
        Architecture::Kepler,
        Architecture::Maxwell,
        Architecture::Pascal,
        Architecture::Volta,
        Architecture::Turing,
        Architecture::Ampere,
        Architecture::Ada,
        Architecture::Hopper,
        Architecture::Blackwell,
    ];

    /// The architecture of a compute capability.
    pub fn of(cc: ComputeCapability) -> Option<Architecture> {
        use Architecture::*;
        Some(match (cc.major, cc.minor) {
            (3, _) => Kepler,
            (5, _) => Maxwell,
            (6, _) => Pascal,
            (7, 0) | (7, 2) => Volta,
            (7, 5) => Turing,
            (8, 9) => Ada,
            (8, _) => Ampere,
            (9, _) => Hopper,
            (10..=12, _) => Blackwell,
            _ => return None,
        })
    }

    /// The lowercase name used in records.
    pub fn name(&self) -> &'static str {
        use Architecture::*;
        match self {
            Kepler => "kepler",
            Maxwell => "maxwell",
            Pascal => "pascal",
            Volta => "volta",
            Turing => "turing",
            Ampere => "ampere",
            Ada => "ada",
            Hopper => "hopper",
            Blackwell => "blackwell",
        }
    }
}

impl Architecture {
    /// The name as NVIDIA writes it: `Ada Lovelace`, `Blackwell`.
    pub fn title(&self) -> &'static str {
        use Architecture::*;
        match self {
            Kepler => "Kepler",
            Maxwell => "Maxwell",
            Pascal => "Pascal",
            Volta => "Volta",
            Turing => "Turing",
            Ampere => "Ampere",
            Ada => "Ada Lovelace",
            Hopper => "Hopper",
            Blackwell => "Blackwell",
        }
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Architecture {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let lower = s.to_ascii_lowercase();
        let key = match lower.as_str() {
            "ada lovelace" | "ada-lovelace" | "lovelace" => "ada",
            "blackwell ultra" => "blackwell",
            other => other,
        };
        Architecture::ALL
            .into_iter()
            .find(|a| a.name() == key)
            .ok_or_else(|| {
                ParseError::new(
                    "GPU architecture",
                    s,
                    "expected one of kepler, maxwell, pascal, volta, turing, ampere, ada, hopper, blackwell",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings() {
        let a: ComputeCapability = "9.0a".parse().unwrap();
        assert_eq!(a.sm(), "sm_90a");
        assert_eq!(a.to_string(), "9.0a");
        let b: ComputeCapability = "sm_120".parse().unwrap();
        assert_eq!(b, ComputeCapability::new(12, 0));
        assert_eq!(b.to_string(), "12.0");
        let (c, ptx) = ComputeCapability::parse_nvcc("compute_90").unwrap();
        assert!(ptx);
        assert_eq!(c.to_string(), "9.0");
        assert_eq!(
            "sm_100f".parse::<ComputeCapability>().unwrap().suffix,
            ArchSuffix::Family
        );
    }

    #[test]
    fn ordering() {
        let v: Vec<ComputeCapability> = ["8.6", "12.0", "9.0", "9.0a", "10.0"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let mut sorted = v.clone();
        sorted.sort();
        let names: Vec<String> = sorted.iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ["8.6", "9.0", "9.0a", "10.0", "12.0"]);
    }

    #[test]
    fn architectures() {
        let arch = |s: &str| s.parse::<ComputeCapability>().unwrap().architecture().unwrap();
        assert_eq!(arch("3.7"), Architecture::Kepler);
        assert_eq!(arch("7.0"), Architecture::Volta);
        assert_eq!(arch("7.5"), Architecture::Turing);
        assert_eq!(arch("8.6"), Architecture::Ampere);
        assert_eq!(arch("8.9"), Architecture::Ada);
        assert_eq!(arch("12.0"), Architecture::Blackwell);
        assert_eq!("Ada Lovelace".parse::<Architecture>().unwrap(), Architecture::Ada);
    }

    #[test]
    fn rejects() {
        for bad in [
            "86", "8.", ".6", "8.x", "sm_8", "sm_9x0", "x.0", "8.66", "123.0", "",
        ] {
            assert!(bad.parse::<ComputeCapability>().is_err(), "{bad}");
        }
        let e = "8.x".parse::<ComputeCapability>().unwrap_err();
        assert!(e.to_string().contains("found `x` at character 3"), "{e}");
    }
}
