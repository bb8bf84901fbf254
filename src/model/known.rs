//! Reading back the words of gpuenv's own vocabularies.
//!
//! Reports hold some words as `&'static str`: a finding's `code`, a doctor check's `id`,
//! an acceptance `item`, what a verification `covers`... Each is drawn from a closed list
//! gpuenv itself defines (the finding codes of `resolve::codes`, the checks of
//! `judge::CHECKS`, ...). Reading a document back looks the word up in its list and
//! returns the list's own `&'static str`, so the Rust types stay as they are, nothing is
//! leaked, and a word the list lacks (a renamed code, a typo, a document from another
//! version) is an error that names it, not a value no code path can produce.

use std::borrow::Cow;

/// A word of one of gpuenv's vocabularies, as the list holds it. Fields of this type are
/// read back through [`one_of`] (or its kin) with `deserialize_with`; the alias also keeps
/// serde's derive from taking a `&'static str` field for one borrowed from the input,
/// which would tie every document read to a `'static` input.
pub type Word = &'static str;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// The entry of `known` equal to `word`.
pub fn lookup(word: &str, known: impl IntoIterator<Item = &'static str>) -> Option<&'static str> {
    known.into_iter().find(|k| *k == word)
}

/// Deserializes one word of the vocabulary `known`; `what` names it in the error.
pub fn one_of<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    known: impl IntoIterator<Item = &'static str> + Clone,
) -> Result<&'static str, D::Error> {
    let word = Cow::<'de, str>::deserialize(d)?;
    lookup(&word, known.clone()).ok_or_else(|| {
        let list: Vec<&str> = known.into_iter().collect();
        D::Error::custom(format!(
            "unknown {what} `{word}`; gpuenv knows: {}",
            list.join(", ")
        ))
    })
}

/// [`one_of`] for a list of words, each looked up alike.
pub fn each_of<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    known: impl IntoIterator<Item = &'static str> + Clone,
) -> Result<Vec<&'static str>, D::Error> {
    let words = Vec::<Cow<'de, str>>::deserialize(d)?;
    words
        .iter()
        .map(|word| {
            lookup(word, known.clone()).ok_or_else(|| D::Error::custom(format!("unknown {what} `{word}`")))
        })
        .collect()
}

/// [`one_of`] for a word that may be absent (`null`).
pub fn maybe_one_of<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    known: impl IntoIterator<Item = &'static str> + Clone,
) -> Result<Option<&'static str>, D::Error> {
    match Option::<Cow<'de, str>>::deserialize(d)? {
        None => Ok(None),
        Some(word) => lookup(&word, known.clone())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("unknown {what} `{word}`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLOURS: [&str; 2] = ["red", "green"];

    fn colour<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        one_of(d, "colour", COLOURS)
    }

    #[derive(Debug, Deserialize)]
    struct Paint {
        #[serde(deserialize_with = "colour")]
        colour: &'static str,
    }

    #[test]
    fn a_known_word_reads_back_as_the_lists_own_and_an_unknown_one_is_named() {
        let p: Paint = serde_json::from_str(r#"{"colour": "green"}"#).unwrap();
        assert_eq!(p.colour, "green");
        let e = serde_json::from_str::<Paint>(r#"{"colour": "blue"}"#).unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown colour `blue`; gpuenv knows: red, green"),
            "{e}"
        );
    }
}
