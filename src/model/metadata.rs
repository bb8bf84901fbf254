//! Python core metadata (a wheel's `METADATA`, PEP 658's `.metadata`, an egg's
//! `PKG-INFO`): the header block, the one reading of it both the image detection and the
//! PyPI refresh use.
//!
//! Owns: turning the RFC 822-style header block into the few fields gpuenv reads. Must
//! not: read files or fetch anything, or interpret the requirements (PEP 508 is
//! [`super::pep508`]). Takes any text and never panics (fuzzed through
//! `image::pyfiles`: `fuzz/fuzz_targets/metadata.rs`).

use serde::{Deserialize, Serialize};

/// The headers of a `METADATA` / `PKG-INFO` file that gpuenv reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// `Name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `Requires-Python`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    /// Every `Requires-Dist` value, as written.
    pub requires_dist: Vec<String>,
}

/// Parses the header block of core metadata (RFC 822 style): stops at the first empty
/// line, where the description begins; folded continuation lines (blank ones too) are joined; header
/// names are case-insensitive, as in any RFC 822 header.
pub fn parse_metadata(text: &str) -> Metadata {
    let mut out = Metadata::default();
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        // Only an empty line ends the headers: one of blanks is a continuation (RFC 822),
        // as in the License text sglang's metadata folds into its header.
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = headers.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            headers.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    for (key, value) in headers {
        match key.as_str() {
            "name" => out.name = Some(value),
            "version" => out.version = Some(value),
            "requires-python" => out.requires_python = Some(value),
            "requires-dist" => out.requires_dist.push(value),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_blanks_continues_a_header() {
        let m = parse_metadata(
            "Name: sglang\nLicense: Apache\n   Version 2.0\n        \n   TERMS\nRequires-Dist: torch==2.8.0; extra == \"srt\"\n\nbody\n",
        );
        assert_eq!(m.requires_dist, ["torch==2.8.0; extra == \"srt\""]);
    }

    #[test]
    fn headers_up_to_the_body() {
        let m = parse_metadata(
            "Metadata-Version: 2.1\nName: torch\nversion: 2.4.1\nRequires-Python: >=3.8.0\n\
             Requires-Dist: filelock\nRequires-Dist: nvidia-cudnn-cu12 ==9.1.0.70 ;\n  platform_system == \"Linux\"\n\
             \nRequires-Dist: not-a-header-in-the-body\n",
        );
        assert_eq!(m.name.as_deref(), Some("torch"));
        assert_eq!(m.version.as_deref(), Some("2.4.1"));
        assert_eq!(m.requires_python.as_deref(), Some(">=3.8.0"));
        assert_eq!(
            m.requires_dist,
            [
                "filelock",
                "nvidia-cudnn-cu12 ==9.1.0.70 ; platform_system == \"Linux\""
            ]
        );
    }
}
