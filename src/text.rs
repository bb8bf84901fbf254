//! Text helpers for reading what other programs print, and for showing text that came
//! from outside.
//!
//! Owns: cleaning program output before it is parsed ([`strip_ansi`]), making text from
//! outside (a daemon, a registry, upstream, an archive, a file) safe for a terminal
//! ([`terminal_safe`]), and capping what an error quotes of an input ([`excerpt`]). Must
//! not: parse any program's format (that is `host::parse`) or print.

/// The most characters an error message quotes of one input (a line of a file, a value
/// from a server): enough to recognise it, never a whole file.
pub const EXCERPT_CHARS: usize = 200;

/// `text` made safe to show on a terminal: escape sequences removed (CSI, OSC and other
/// `ESC` sequences, and their C1 forms), line breaks shown as the visible escapes `\n` and
/// `\r` so that no line can be forged, tabs kept, every other control character (C0, DEL,
/// C1) shown as `\u{..}`, and the bidirectional overrides that reorder what is shown
/// removed.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                // CSI: parameters and intermediates up to one final byte in `@`..=`~`.
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (`ESC \`).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                // Any other escape: the one character that follows.
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push('\t'),
            // Bidirectional embeddings, overrides and isolates reorder what a terminal shows.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// At most [`EXCERPT_CHARS`] characters of `text`, terminal-safe, with `...` and the
/// number of characters left out when it was longer: what an error may quote of an input.
pub fn excerpt(text: &str) -> String {
    excerpt_of(text, EXCERPT_CHARS)
}

/// [`excerpt`] at most `chars` characters long: for a message that may quote an input
/// more than once (a parser's reason under its input).
pub fn excerpt_of(text: &str, chars: usize) -> String {
    let total = text.chars().count();
    if total <= chars {
        return terminal_safe(text);
    }
    let head: String = text.chars().take(chars).collect();
    format!("{}... ({} more characters)", terminal_safe(&head), total - chars)
}

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
    fn outside_text_cannot_forge_lines_or_drive_the_terminal() {
        assert_eq!(terminal_safe("ok\nFAKE: pass"), "ok\\nFAKE: pass");
        assert_eq!(terminal_safe("a\r\nb"), "a\\r\\nb");
        assert_eq!(terminal_safe("\u{1b}[2J\u{1b}[31mred\u{1b}[0m"), "red");
        assert_eq!(terminal_safe("\u{1b}]0;title\u{7}x"), "x");
        assert_eq!(
            terminal_safe("\u{1b}]8;;http://evil\u{1b}\\link\u{1b}]8;;\u{1b}\\"),
            "link"
        );
        assert_eq!(terminal_safe("\u{9b}31mx"), "\\u{9b}31mx");
        assert_eq!(
            terminal_safe("bell\u{7}nul\u{0}del\u{7f}"),
            "bell\\u{7}nul\\u{0}del\\u{7f}"
        );
        assert_eq!(terminal_safe("abc\u{202e}fed"), "abcfed");
        assert_eq!(terminal_safe("tab\tkept, é 卡 kept"), "tab\tkept, é 卡 kept");
        assert_eq!(terminal_safe("trailing\u{1b}"), "trailing");
    }

    #[test]
    fn excerpts_are_capped() {
        assert_eq!(excerpt("short"), "short");
        let long = "x".repeat(EXCERPT_CHARS + 50);
        let e = excerpt(&long);
        assert!(e.starts_with(&"x".repeat(EXCERPT_CHARS)), "{e}");
        assert!(e.ends_with("... (50 more characters)"), "{e}");
        assert_eq!(excerpt("A=1\nB=secret"), "A=1\\nB=secret");
    }

    proptest::proptest! {
        /// Whatever comes in, nothing that reaches a terminal can move the cursor or
        /// start a line.
        #[test]
        fn no_control_character_survives(text in "\\PC{0,40}|[\\x00-\\x1f\\x7f-\\u{9f}a\\[\\]]{0,40}") {
            let safe = terminal_safe(&text);
            proptest::prop_assert!(!safe.chars().any(|c| c.is_control() && c != '\t'), "{:?}", safe);
            proptest::prop_assert!(excerpt(&text).chars().count() <= EXCERPT_CHARS * 6 + 40);
        }
    }

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
