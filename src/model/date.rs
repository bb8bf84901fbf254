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

impl PartialDate {
    /// A full date (`YYYY-MM-DD`) from days since 1970-01-01 (Howard Hinnant's
    /// civil-from-days algorithm).
    pub fn from_days(days: i64) -> PartialDate {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        PartialDate {
            year: year.clamp(0, 9999) as u16,
            month: Some(month as u8),
            day: Some(day as u8),
        }
    }

    /// Days since 1970-01-01 of the first day the date covers (`2026-06` is 2026-06-01).
    pub fn days(&self) -> i64 {
        let (y, m, d) = (
            i64::from(self.year),
            i64::from(self.month.unwrap_or(1)),
            i64::from(self.day.unwrap_or(1)),
        );
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// Whether the date has a day (`YYYY-MM-DD`).
    pub fn is_full(&self) -> bool {
        self.day.is_some()
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

    #[test]
    fn days_round_trip() {
        let d = |s: &str| s.parse::<PartialDate>().unwrap();
        assert_eq!(d("1970-01-01").days(), 0);
        assert_eq!(d("2026-12-01").days() - d("2026-09-02").days(), 90);
        assert_eq!(d("2024-03-01").days() - d("2024-02-28").days(), 2);
        assert_eq!(d("2026-06").days(), d("2026-06-01").days());
        for s in ["1970-01-01", "2000-02-29", "2026-12-01", "2099-12-31"] {
            assert_eq!(PartialDate::from_days(d(s).days()).to_string(), s);
        }
        assert!(d("2026-12-01").is_full() && !d("2026-12").is_full());
    }
}
