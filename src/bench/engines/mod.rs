//! Readers of the engines people already trust: NVIDIA DCGM's `dcgmi diag`, nccl-tests'
//! `all_reduce_perf` and NVIDIA's `nvbandwidth`.
//!
//! Owns: parsing what these programs print into typed results and into [`Figure`](crate::bench::Figure)s, and
//! building the argument lists gpuenv runs them with ([`dcgm::diag_args`],
//! [`nccl_tests::all_reduce_args`], [`nvbandwidth::args`]). Must not: run a process (the
//! bench edge does, with a timeout, through the host seam), print (that is `report`), or
//! judge a result against a datasheet or a peer (that is the bench judge). `fio` is read
//! elsewhere, beside the disk test.
//!
//! Every reader is total: any text gives a typed result or an [`EngineError`] that names
//! the program and what was expected, never a panic. An output over
//! [`MAX_OUTPUT_BYTES`] is refused before it is read, and every number taken from an
//! output is checked to be finite and not negative, because a figure of NaN
//! or -3 GB/s would otherwise travel to the judge and the fleet as if it were measured.

pub mod dcgm;
pub mod nccl_tests;
pub mod nvbandwidth;

#[cfg(test)]
mod proptests;

use crate::bench::figure::Engine;

/// The most bytes of one program's output a reader accepts: 16 MiB. The largest real
/// outputs are far below it (an `all_reduce_perf` sweep with `NCCL_DEBUG=INFO` on eight
/// GPUs is a few hundred KiB, a full `nvbandwidth` run on 72 GPUs about 1 MiB), so a larger
/// text is not one of these programs' reports.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

/// An outside program whose output gpuenv reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExternalEngine {
    /// NVIDIA DCGM's diagnostics, `dcgmi diag`.
    Dcgm,
    /// nccl-tests' `all_reduce_perf`.
    NcclTests,
    /// NVIDIA's `nvbandwidth`.
    Nvbandwidth,
}

impl ExternalEngine {
    /// Every engine read here, in the order a bench runs them: the health suite first, so
    /// that a failing GPU is known before the bandwidth tests load it.
    pub const ALL: [ExternalEngine; 3] = [
        ExternalEngine::Dcgm,
        ExternalEngine::NcclTests,
        ExternalEngine::Nvbandwidth,
    ];

    /// The program to look for on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            ExternalEngine::Dcgm => "dcgmi",
            ExternalEngine::NcclTests => "all_reduce_perf",
            ExternalEngine::Nvbandwidth => "nvbandwidth",
        }
    }

    /// The engine its figures are credited to.
    pub fn engine(self) -> Engine {
        match self {
            ExternalEngine::Dcgm => Engine::Dcgm,
            ExternalEngine::NcclTests => Engine::NcclTests,
            ExternalEngine::Nvbandwidth => Engine::Nvbandwidth,
        }
    }
}

/// Why an engine's output could not be read, or its arguments not built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The output is larger than [`MAX_OUTPUT_BYTES`].
    #[error("the output of `{program}` is {len} bytes, more than the {max} bytes gpuenv reads of it")]
    TooLarge {
        /// The program.
        program: &'static str,
        /// The output's length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// The output is not what the program prints.
    #[error("the output of `{program}` could not be read: {reason}")]
    Malformed {
        /// The program.
        program: &'static str,
        /// What was expected and what was found (quoted through `text::excerpt`).
        reason: String,
    },
    /// A request for arguments that the program does not take.
    #[error("cannot run `{program}`: {reason}")]
    BadRequest {
        /// The program.
        program: &'static str,
        /// What was asked and what is accepted.
        reason: String,
    },
}

/// Refuses an output over [`MAX_OUTPUT_BYTES`]; the first step of every reader.
pub(crate) fn check_size(program: &'static str, text: &str) -> Result<(), EngineError> {
    if text.len() > MAX_OUTPUT_BYTES {
        return Err(EngineError::TooLarge {
            program,
            len: text.len(),
            max: MAX_OUTPUT_BYTES,
        });
    }
    Ok(())
}

/// A malformed-output error of `program`.
pub(crate) fn malformed(program: &'static str, reason: impl Into<String>) -> EngineError {
    EngineError::Malformed {
        program,
        reason: reason.into(),
    }
}

/// `raw` read as a measured quantity: a finite decimal number that is not negative.
///
/// Rust's float parser accepts `NaN`, `inf` and `infinity`; none of them is a measurement,
/// and a negative bandwidth or time is a broken tool, so all are refused with the value
/// quoted.
pub(crate) fn measured(program: &'static str, what: &str, raw: &str) -> Result<f64, EngineError> {
    let value: f64 = raw.trim().parse().map_err(|_| {
        malformed(
            program,
            format!("{what} `{}` is not a number", crate::text::excerpt(raw.trim())),
        )
    })?;
    if !value.is_finite() || value < 0.0 {
        return Err(malformed(
            program,
            format!(
                "{what} `{}` is not a finite, non-negative number",
                crate::text::excerpt(raw.trim())
            ),
        ));
    }
    Ok(value)
}

/// The text from the first line that opens a JSON object: `dcgmi` and `nvbandwidth` may
/// print warnings (`WARNING: Failed to acquire log file lock`, `Successfully ran diagnostic
/// for group.`) before their document, and NVIDIA's own readers skip them the same way.
pub(crate) fn from_json_start(text: &str) -> Option<&str> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with('{') {
            return Some(&text[offset..]);
        }
        offset += line.len();
    }
    None
}

/// The first JSON value of `text`: trailing text after the document (a second warning, a
/// progress line) is ignored, as `dcgmi`'s and `nvbandwidth`'s own consumers do.
pub(crate) fn first_json_value(program: &'static str, text: &str) -> Result<serde_json::Value, EngineError> {
    let start = from_json_start(text)
        .ok_or_else(|| malformed(program, "no JSON document (no line starts with `{`)"))?;
    let mut stream = serde_json::Deserializer::from_str(start).into_iter::<serde_json::Value>();
    match stream.next() {
        Some(Ok(value)) => Ok(value),
        Some(Err(e)) => Err(malformed(program, format!("invalid JSON: {e}"))),
        None => Err(malformed(program, "no JSON document")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_names_its_program_and_engine() {
        let programs: Vec<&str> = ExternalEngine::ALL.iter().map(|e| e.program()).collect();
        assert_eq!(programs, ["dcgmi", "all_reduce_perf", "nvbandwidth"]);
        assert_eq!(ExternalEngine::Dcgm.engine(), Engine::Dcgm);
        assert_eq!(ExternalEngine::NcclTests.engine(), Engine::NcclTests);
        assert_eq!(ExternalEngine::Nvbandwidth.engine(), Engine::Nvbandwidth);
    }

    #[test]
    fn measured_refuses_what_is_not_a_measurement() {
        assert_eq!(measured("x", "busbw", " 235.26 "), Ok(235.26));
        assert_eq!(measured("x", "busbw", "0"), Ok(0.0));
        for bad in [
            "NaN", "nan", "inf", "-inf", "infinity", "-1.5", "1e400", "", "12,5", "0x10",
        ] {
            let err = measured("x", "busbw", bad).unwrap_err();
            assert!(err.to_string().contains("busbw"), "{bad}: {err}");
        }
    }

    #[test]
    fn json_start_skips_leading_warnings_only() {
        assert_eq!(
            from_json_start("WARNING: lock\n  {\"a\":1}\n"),
            Some("  {\"a\":1}\n")
        );
        assert_eq!(from_json_start("no json here\n"), None);
        assert!(first_json_value("x", "{\"a\":1}\ntrailing words").is_ok());
        assert!(first_json_value("x", "{\"a\":").is_err());
    }

    #[test]
    fn oversized_output_is_refused_before_reading() {
        let huge = "x".repeat(MAX_OUTPUT_BYTES + 1);
        assert!(matches!(
            check_size("dcgmi", &huge),
            Err(EngineError::TooLarge { program: "dcgmi", .. })
        ));
    }
}
