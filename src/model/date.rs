//! Release and end-of-life dates as vendors publish them: a year, a month or a day
//! (`2026-06` for "June 2026"). Kept at the precision given, never invented.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ParseError;

/// `YYYY`, `YYYY-MM` or `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartialDate {
    /// Year.
    pub year: u16,
    /// Month 1-12, when known.
    pub month: Option<u8>,
    /// Day 1-31, when known.
    pub day: Option<u8>,
}

impl FromStr for PartialDate {
    type Err = ParseError;
    fn from_str(input: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "date";
        let err = || ParseError::new(WHAT, input, "expected `YYYY`, `YYYY-MM` or `YYYY-MM-DD`");
        let mut it = input.split('-');
        let num = |s: Option<&str>, len: usize| -> Result<Option<u32>, ParseError> {
            match s {
                None => Ok(None),
                Some(s) if s.len() == len && s.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(Some(s.parse().expect("checked digits")))
                }
                Some(_) => Err(err()),
            }
        };
        let year = num(it.next(), 4)?.ok_or_else(err)?;
        let month = num(it.next(), 2)?;
        let day = num(it.next(), 2)?;
        if it.next().is_some() {
            return Err(err());
        }
        if let Some(m) = month {
            if !(1..=12).contains(&m) {
                return Err(ParseError::new(WHAT, input, "month must be 01 to 12"));
            }
        }
        if let Some(d) = day {
            let max = match month.expect("a day comes after a month") {
                2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            if !(1..=max).contains(&d) {
                return Err(ParseError::new(
                    WHAT,
                    input,
                    format!("day must be 01 to {max} in that month"),
                ));
            }
        }
        Ok(PartialDate {
            year: year as u16,
            month: month.map(|m| m as u8),
            day: day.map(|d| d as u8),
        })
    }
}

impl fmt::Display for PartialDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}", self.year)?;
        if let Some(m) = self.month {
            write!(f, "-{m:02}")?;
        }
        if let Some(d) = self.day {
            write!(f, "-{d:02}")?;
        }
        Ok(())
    }
}

impl Serialize for PartialDate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PartialDate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions() {
        for s in ["2026", "2026-06", "2024-02-29"] {
            assert_eq!(s.parse::<PartialDate>().unwrap().to_string(), s);
        }
        for bad in [
            "26",
            "2026-6",
            "2026-13",
            "2023-02-29",
            "2026-06-31",
            "June 2026",
            "2026-01-01-01",
        ] {
            assert!(bad.parse::<PartialDate>().is_err(), "{bad}");
        }
        assert!("2026-06".parse::<PartialDate>().unwrap() < "2026-06-01".parse().unwrap());
    }
}
