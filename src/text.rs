//! Text helpers for reading what other programs print.
//!
//! Owns: cleaning program output before it is parsed or shown. Must not: parse any
//! program's format (that is `host::parse`) or print.

/// The text without ANSI escape sequences (`ESC [ ... final byte`): the classic Docker
/// builder colours what a step writes to stderr, and `nvidia-smi topo -m` from the 590
/// drivers underlines its header on a terminal; captures keep the escapes.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, then one final byte in `@`..=`~`.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_removed() {
        assert_eq!(
            strip_ansi("\u{1b}[91mERROR: no\n\u{1b}[0m\u{1b}[91mmore\u{1b}[0m"),
            "ERROR: no\nmore"
        );
        assert_eq!(strip_ansi("\u{1b}[4mGPU0\tCPU\u{1b}[0m"), "GPU0\tCPU");
        assert_eq!(strip_ansi("plain"), "plain");
        assert_eq!(strip_ansi("a\u{1b}"), "a");
        assert_eq!(strip_ansi("a\u{1b}[12"), "a");
    }
}
