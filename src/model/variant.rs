//! The CUDA variant of a PyTorch build: the `cu121` in `2.4.1+cu121` and in
//! `https://download.pytorch.org/whl/cu121`, or `cpu`.
//!
//! `cuXYZ` is the CUDA major followed by a one-digit minor with the dot removed:
//! `cu121` is 12.1, `cu102` is 10.2, `cu130` is 13.0. Every CUDA minor so far has been a
//! single digit, which is what makes the tag unambiguous.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{CudaVersion, ParseError};

/// `cpu` or `cuXYZ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// A build without CUDA.
    Cpu,
    /// A build against CUDA `major.minor`.
    Cuda {
        /// CUDA major.
        major: u8,
        /// CUDA minor (one digit).
        minor: u8,
    },
}

impl Variant {
    /// The CUDA version of the build (`12.1` for `cu121`); `None` for `cpu`.
    pub fn cuda(&self) -> Option<CudaVersion> {
        match *self {
            Variant::Cpu => None,
            Variant::Cuda { major, minor } => Some(CudaVersion::from_major_minor(major.into(), minor.into())),
        }
    }

    /// The variant built against a CUDA version; `None` when the minor has two digits,
    /// which no `cuXYZ` tag can express.
    pub fn for_cuda(cuda: &CudaVersion) -> Option<Variant> {
        let (major, minor) = cuda.major_minor();
        if minor > 9 || major > 99 {
            return None;
        }
        Some(Variant::Cuda {
            major: major as u8,
            minor: minor as u8,
        })
    }

    /// Whether this is a CUDA build.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Variant::Cuda { .. })
    }
}

impl FromStr for Variant {
    type Err = ParseError;
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "CUDA variant";
        if input == "cpu" {
            return Ok(Variant::Cpu);
        }
        let Some(digits) = input.strip_prefix("cu") else {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected `cpu` or `cu` followed by the CUDA version without its dot (`cu121`)",
            ));
        };
        if !(2..=3).contains(&digits.len()) {
            return Err(ParseError::new(
                WHAT,
                input,
                "expected 2 or 3 digits after `cu` (`cu92`, `cu121`)",
            ));
        }
        if let Some(bad) = digits.find(|c: char| !c.is_ascii_digit()) {
            return Err(ParseError::at(WHAT, input, 2 + bad, "a digit"));
        }
        let (maj, min) = digits.split_at(digits.len() - 1);
        Ok(Variant::Cuda {
            major: maj.parse().expect("checked digits"),
            minor: min.parse().expect("checked digit"),
        })
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Cpu => f.write_str("cpu"),
            Variant::Cuda { major, minor } => write!(f, "cu{major}{minor}"),
        }
    }
}

impl Serialize for Variant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Variant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags() {
        let cases = [
            ("cu121", "12.1"),
            ("cu102", "10.2"),
            ("cu130", "13.0"),
            ("cu92", "9.2"),
        ];
        for (tag, cuda) in cases {
            let v: Variant = tag.parse().unwrap();
            assert_eq!(v.cuda().unwrap().to_string(), cuda);
            assert_eq!(v.to_string(), tag);
            assert_eq!(Variant::for_cuda(&cuda.parse().unwrap()), Some(v));
        }
        assert_eq!("cpu".parse::<Variant>().unwrap(), Variant::Cpu);
        assert_eq!(Variant::Cpu.cuda(), None);
    }

    #[test]
    fn rejects() {
        for bad in ["cu", "cu1", "cu1211", "cuda121", "CU121", "cu12a", "rocm6.2", ""] {
            assert!(bad.parse::<Variant>().is_err(), "{bad}");
        }
        assert!(
            "cu12a"
                .parse::<Variant>()
                .unwrap_err()
                .to_string()
                .contains("character 5")
        );
    }
}
