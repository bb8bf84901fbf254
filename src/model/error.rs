//! The one error type of the model: a string that is not the value it should be.

/// The most characters of a reason an error prints: a parser's reason may quote the input
/// again, and a 5,000-character input must not make a 10 KB message.
const REASON_CHARS: usize = 400;

/// A value that does not parse: names the input, what was expected and where it went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {what} `{}`: {}",
    crate::text::excerpt(input),
    crate::text::excerpt_of(reason, REASON_CHARS)
)]
pub struct ParseError {
    /// What the input should have been, e.g. "CUDA version".
    pub what: &'static str,
    /// The input as given.
    pub input: String,
    /// Why it is not one, pointing at the offending character where there is one.
    pub reason: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, input: &str, reason: impl Into<String>) -> Self {
        ParseError {
            what,
            input: input.to_string(),
            reason: reason.into(),
        }
    }

    /// An error at byte offset `at` of `input`, naming the character found there.
    pub(crate) fn at(what: &'static str, input: &str, at: usize, expected: &str) -> Self {
        let found = match input[at..].chars().next() {
            Some(c) => format!("`{}`", c.escape_debug()),
            None => "the end".to_string(),
        };
        // Columns are 1-based for people.
        let col = input[..at].chars().count() + 1;
        Self::new(
            what,
            input,
            format!("expected {expected}, found {found} at character {col}"),
        )
    }
}
