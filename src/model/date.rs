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
            let m = month.expect("a day comes after a month");
            let max = jiff::civil::date(year as i16, m as i8, 1).days_in_month();
            if !(1..=max as u32).contains(&d) {
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
    /// A full date (`YYYY-MM-DD`) from days since 1970-01-01, clamped to the years a
    /// date here can have (0001 to 9999).
    pub fn from_days(days: i64) -> PartialDate {
        let epoch = jiff::civil::date(1970, 1, 1);
        let date = jiff::Span::new()
            .try_days(days)
            .ok()
            .and_then(|span| epoch.checked_add(span).ok())
            .unwrap_or(if days < 0 {
                jiff::civil::Date::MIN
            } else {
                jiff::civil::Date::MAX
            });
        PartialDate::from(date)
    }

    /// Days since 1970-01-01 of the first day the date covers (`2026-06` is 2026-06-01).
    pub fn days(&self) -> i64 {
        let date = jiff::civil::date(
            self.year as i16,
            self.month.unwrap_or(1) as i8,
            self.day.unwrap_or(1) as i8,
        );
        jiff::civil::date(1970, 1, 1)
            .until((jiff::Unit::Day, date))
            .map_or(0, |span| i64::from(span.get_days()))
    }

    /// Today, by the system clock in UTC.
    pub fn today() -> PartialDate {
        PartialDate::from(jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date())
    }

    /// Whether the date has a day (`YYYY-MM-DD`).
    pub fn is_full(&self) -> bool {
        self.day.is_some()
    }
}

impl From<jiff::civil::Date> for PartialDate {
    fn from(d: jiff::civil::Date) -> PartialDate {
        PartialDate {
            year: d.year().clamp(1, 9999) as u16,
            month: Some(d.month() as u8),
            day: Some(d.day() as u8),
        }
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
