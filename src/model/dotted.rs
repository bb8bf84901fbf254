//! Dotted-numeric versions: CUDA toolkits, drivers, cuDNN, NCCL, glibc.
//!
//! These are not PEP 440 and not semver. They compare numerically part by part (`535.104.05`
//! sorts after `535.86.10`, and `12.4` equals `12.4.0`), and print exactly as given, because
//! users grep for the string the vendor wrote (`535.104.05`, with its leading zero).
//! CUDA runfile installs write a date as the last part (`12.1.20230222`): it parses as a
//! number like any other, and [`CudaVersion::major_minor`] is what rules should compare.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// The most parts any dotted version has (`9.1.0.70`).
const MAX_PARTS: usize = 4;

/// A dotted-numeric version with 1 to 4 parts, kept with its original spelling.
#[derive(Clone)]
pub struct Dotted {
    parts: [u32; MAX_PARTS],
    len: u8,
    text: Box<str>,
}

impl Dotted {
    /// Parses `input` as `min..=max` dot-separated decimal numbers; `what` names the value
    /// in the error ("driver version").
    pub fn parse(input: &str, what: &'static str, min: usize, max: usize) -> Result<Self, ParseError> {
        debug_assert!(min >= 1 && max <= MAX_PARTS && min <= max);
        let expected = || {
            if min == max {
                format!("{min} dot-separated numbers")
            } else {
                format!("{min} to {max} dot-separated numbers")
            }
        };
        if input.is_empty() {
            return Err(ParseError::new(
                what,
                input,
                format!("expected {}, found nothing", expected()),
            ));
        }
        let mut parts = [0u32; MAX_PARTS];
        let mut len = 0usize;
        let mut start = 0usize;
        for (i, field) in input.split('.').enumerate() {
            if i >= max {
                return Err(ParseError::new(
                    what,
                    input,
                    format!("expected {}, found more", expected()),
                ));
            }
            if field.is_empty() {
                return Err(ParseError::at(what, input, start, "a digit"));
            }
            if let Some(bad) = field.find(|c: char| !c.is_ascii_digit()) {
                return Err(ParseError::at(what, input, start + bad, "a digit or `.`"));
            }
            parts[i] = field
                .parse()
                .map_err(|_| ParseError::new(what, input, format!("part `{field}` is too large")))?;
            len = i + 1;
            start += field.len() + 1;
        }
        if len < min {
            return Err(ParseError::new(
                what,
                input,
                format!("expected {}, found {len}", expected()),
            ));
        }
        Ok(Dotted {
            parts,
            len: len as u8,
            text: input.into(),
        })
    }

    /// The numeric parts as written (no padding).
    pub fn parts(&self) -> &[u32] {
        &self.parts[..self.len as usize]
    }

    /// The first part.
    pub fn major(&self) -> u32 {
        self.parts[0]
    }

    /// The second part, 0 when absent.
    pub fn minor(&self) -> u32 {
        self.parts[1]
    }

    /// The third part, 0 when absent.
    pub fn patch(&self) -> u32 {
        self.parts[2]
    }

    /// The version exactly as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Parts with trailing zeros dropped: the identity used by `Eq` and `Hash`.
    fn significant(&self) -> &[u32] {
        let mut n = self.len as usize;
        while n > 1 && self.parts[n - 1] == 0 {
            n -= 1;
        }
        &self.parts[..n]
    }
}

impl PartialEq for Dotted {
    fn eq(&self, other: &Self) -> bool {
        self.parts == other.parts
    }
}
impl Eq for Dotted {}

impl Hash for Dotted {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.significant().hash(state);
    }
}

impl PartialOrd for Dotted {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Dotted {
    fn cmp(&self, other: &Self) -> Ordering {
        // Unused parts are zero, so `12.4` and `12.4.0` compare equal.
        self.parts.cmp(&other.parts)
    }
}

impl fmt::Display for Dotted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Dotted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.text)
    }
}

/// Defines a newtype over [`Dotted`] with its own name in errors and its own part counts.
macro_rules! dotted_kind {
    ($(#[$doc:meta])* $name:ident, $what:literal, $min:literal, $max:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Dotted);

        impl $name {
            /// What this value is called in messages.
            pub const WHAT: &'static str = $what;

            /// The underlying dotted version.
            pub fn dotted(&self) -> &Dotted {
                &self.0
            }
            /// The version exactly as written.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }
            /// The first part.
            pub fn major(&self) -> u32 {
                self.0.major()
            }
            /// The second part (0 when absent).
            pub fn minor(&self) -> u32 {
                self.0.minor()
            }
            /// The numeric parts as written.
            pub fn parts(&self) -> &[u32] {
                self.0.parts()
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, ParseError> {
                Dotted::parse(s, $what, $min, $max).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

dotted_kind!(
    /// A CUDA version: `12.4`, `12.4.1`, the cudart `12.4.127`, or the date-style `12.1.20230222`.
    CudaVersion,
    "CUDA version",
    2,
    3
);
dotted_kind!(
    /// An NVIDIA driver version: `570.26`, `535.104.05`. Compared numerically, printed as given.
    DriverVersion,
    "driver version",
    2,
    3
);
dotted_kind!(
    /// A cuDNN version: `9.1.0.70`, `8.9.2.26`, or a shorter `9.1`.
    CudnnVersion,
    "cuDNN version",
    2,
    4
);
dotted_kind!(
    /// An NCCL version: `2.21.5`.
    NcclVersion,
    "NCCL version",
    2,
    3
);
dotted_kind!(
    /// A glibc version: `2.28`, `2.35`.
    GlibcVersion,
    "glibc version",
    2,
    3
);

impl CudaVersion {
    /// `(major, minor)`: what CUDA compatibility rules compare. A runtime built with
    /// 12.4 Update 1 (cudart 12.4.127) is still CUDA 12.4.
    pub fn major_minor(&self) -> (u32, u32) {
        (self.major(), self.minor())
    }

    /// Builds `major.minor`.
    pub fn from_major_minor(major: u32, minor: u32) -> Self {
        format!("{major}.{minor}")
            .parse()
            .expect("two numbers always make a CUDA version")
    }
}

impl DriverVersion {
    /// The driver branch: `535` for `535.104.05`.
    pub fn branch(&self) -> u32 {
        self.major()
    }
}

impl GlibcVersion {
    /// Builds `major.minor`.
    pub fn from_major_minor(major: u32, minor: u32) -> Self {
        format!("{major}.{minor}")
            .parse()
            .expect("two numbers always make a glibc version")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_given_compares_numerically() {
        let a: DriverVersion = "535.104.05".parse().unwrap();
        let b: DriverVersion = "535.86.10".parse().unwrap();
        assert!(a > b);
        assert_eq!(a.to_string(), "535.104.05");
        let c: DriverVersion = "535.104.5".parse().unwrap();
        assert_eq!(a, c);
        assert_eq!(a.branch(), 535);
    }

    #[test]
    fn trailing_zero_is_equal() {
        let a: CudaVersion = "12.4".parse().unwrap();
        let b: CudaVersion = "12.4.0".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.cmp(&b), Ordering::Equal);
        assert!("12.4.1".parse::<CudaVersion>().unwrap() > b);
    }

    #[test]
    fn date_style_cuda() {
        let v: CudaVersion = "12.1.20230222".parse().unwrap();
        assert_eq!(v.major_minor(), (12, 1));
        assert_eq!(v.to_string(), "12.1.20230222");
    }

    #[test]
    fn cudnn_four_parts() {
        let v: CudnnVersion = "9.1.0.70".parse().unwrap();
        assert_eq!(v.parts(), &[9, 1, 0, 70]);
        assert!(v < "9.10.2.21".parse().unwrap());
    }

    #[test]
    fn errors_point_at_the_character() {
        let e = "12.x".parse::<CudaVersion>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid CUDA version `12.x`: expected a digit or `.`, found `x` at character 4"
        );
        let e = "12..4".parse::<CudaVersion>().unwrap_err();
        assert!(e.to_string().contains("at character 4"), "{e}");
        let e = "12".parse::<CudaVersion>().unwrap_err();
        assert!(
            e.to_string()
                .contains("expected 2 to 3 dot-separated numbers, found 1"),
            "{e}"
        );
        let e = "1.2.3.4".parse::<CudaVersion>().unwrap_err();
        assert!(e.to_string().contains("found more"), "{e}");
        let e = "".parse::<DriverVersion>().unwrap_err();
        assert!(e.to_string().contains("found nothing"), "{e}");
        let e = "99999999999.1".parse::<DriverVersion>().unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        let e = "535.104.05 ".parse::<DriverVersion>().unwrap_err();
        assert!(e.to_string().contains("found ` `"), "{e}");
    }
}
