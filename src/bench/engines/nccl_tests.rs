//! nccl-tests' `all_reduce_perf`: its arguments, and its report read into rows and the
//! bus-bandwidth figure.
//!
//! Owns: [`all_reduce_args`] and [`parse_all_reduce`] with the types it returns. Must not:
//! run the program, or decide whether a bus bandwidth is good enough.
//!
//! The report, as nccl-tests' `src/util.cu` prints it (2.x), is a header of `#` lines
//! (`# nThread 1 nGpus 8 ...`, one `#  Rank  N Group G Pid P on HOST device D [BUS] NAME`
//! line a GPU), a table of one row a message size (`size count type redop root` then
//! `time algbw busbw #wrong` out of place and again in place), and a footer
//! (`# Out of bounds values : 0 OK`, `# Avg bus bandwidth : 68.4`). Older builds omit the
//! `Group` word and the `root` column, and label the last column `error`; NCCL's own
//! `INFO` lines may be interleaved; `srun --label` prefixes each line with `N: `. All of
//! these are read. `#wrong` is the count of elements that came back wrong, so any row
//! with one is data corruption, whatever the bandwidth (nccl-tests' `doc/PERFORMANCE.md`).

use super::{EngineError, check_size, malformed, measured};
use crate::bench::figure::{Engine, Figure, Metric};
use crate::text::{excerpt, terminal_safe};

const PROGRAM: &str = "all_reduce_perf";

/// The most result rows read: a sweep from 1 byte to 16 GiB by doubling is 35 rows, so
/// ten thousand is never a real report.
const MAX_ROWS: usize = 10_000;

/// The most `Rank` lines read; NCCL's largest jobs have tens of thousands of ranks, but
/// gpuenv runs one node.
const MAX_RANKS: usize = 65_536;

/// The arguments for an all-reduce over `gpus` GPUs of this node, from one process, the
/// sweep ending at `largest_gib` GiB.
///
/// nccl-tests' README: `-g` is the GPUs per thread, `-b`/`-e` the smallest and largest
/// message, `-f 2` doubles between them; its multi-node example sweeps `-b 8 -e 8G -f 2`,
/// so that the figure is taken where the bus bandwidth has levelled off
/// (<https://github.com/NVIDIA/nccl-tests/blob/master/README.md>). Each GPU holds a send
/// and a receive buffer of the largest size, so 8 GiB needs 16 GiB a GPU and more: the
/// caller picks a size the GPUs' memory holds ([`largest_gib`]). `-c 1` (the default,
/// written out) keeps the check that fills `#wrong`.
pub fn all_reduce_args(gpus: u32, largest_gib: u32) -> Result<Vec<String>, EngineError> {
    if gpus == 0 {
        return Err(EngineError::BadRequest {
            program: PROGRAM,
            reason: "an all-reduce needs at least one GPU, and 0 were asked for".into(),
        });
    }
    if largest_gib == 0 {
        return Err(EngineError::BadRequest {
            program: PROGRAM,
            reason: "the largest message must be at least 1 GiB".into(),
        });
    }
    Ok(["-b", "8", "-e"]
        .iter()
        .map(|a| a.to_string())
        .chain(std::iter::once(format!("{largest_gib}G")))
        .chain(["-f", "2", "-c", "1", "-g"].iter().map(|a| a.to_string()))
        .chain(std::iter::once(gpus.to_string()))
        .collect())
}

/// The largest message for GPUs whose smallest has `memory_mib`: 8 GiB where two
/// buffers of it take at most half the memory (40 GB cards and up), else the largest
/// power of two that does, at least 1 GiB; 1 GiB when the memory is not known.
pub fn largest_gib(memory_mib: Option<u64>) -> u32 {
    let Some(mib) = memory_mib else { return 1 };
    let mut gib = 8u32;
    while gib > 1 && u64::from(gib) * 2 * 1024 > mib / 2 {
        gib /= 2;
    }
    gib
}

/// One GPU of the run, from its `# Rank` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclRank {
    /// The NCCL rank.
    pub rank: u32,
    /// The host the rank ran on (terminal-safe).
    pub host: String,
    /// The CUDA device index on that host.
    pub device: u32,
    /// The PCI bus as printed (`0x18`, `0000:18:00`).
    pub bus: String,
    /// The GPU's name (`NVIDIA H100 80GB HBM3`, terminal-safe).
    pub name: String,
}

/// Timing of one message size, out of place or in place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NcclTiming {
    /// Microseconds per operation.
    pub time_us: f64,
    /// Algorithm bandwidth: bytes / time (GB/s).
    pub algbw: f64,
    /// Bus bandwidth: algbw x 2(n-1)/n for all-reduce (GB/s).
    pub busbw: f64,
    /// Elements that came back wrong; `None` where the check was off (`N/A`).
    pub wrong: Option<u64>,
}

/// One row of the table: a message size.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclRow {
    /// Message size in bytes.
    pub size: u64,
    /// Elements.
    pub count: u64,
    /// Element type (`float`).
    pub dtype: String,
    /// Reduction (`sum`); absent in the oldest builds.
    pub redop: Option<String>,
    /// Root rank (`-1` for all-reduce); absent in older builds.
    pub root: Option<i64>,
    /// Out-of-place timing.
    pub out_of_place: NcclTiming,
    /// In-place timing.
    pub in_place: NcclTiming,
}

impl NcclRow {
    /// The larger of the out-of-place and in-place bus bandwidths.
    pub fn busbw(&self) -> f64 {
        self.out_of_place.busbw.max(self.in_place.busbw)
    }

    /// Whether either run of this size returned wrong elements.
    pub fn corrupt(&self) -> bool {
        [self.out_of_place.wrong, self.in_place.wrong]
            .iter()
            .any(|w| w.is_some_and(|n| n > 0))
    }
}

/// An `all_reduce_perf` report.
#[derive(Debug, Clone, PartialEq)]
pub struct AllReduceRun {
    /// `nGpus` of the header: GPUs per thread.
    pub gpus_per_thread: Option<u32>,
    /// The GPUs, one a rank, as listed under `# Using devices`.
    pub ranks: Vec<NcclRank>,
    /// The table, in printed order.
    pub rows: Vec<NcclRow>,
    /// `# Out of bounds values : N`.
    pub out_of_bounds: Option<u64>,
    /// `# Avg bus bandwidth : X` (GB/s), over every size of the sweep.
    pub avg_busbw: Option<f64>,
}

impl AllReduceRun {
    /// The rows whose `#wrong` is above zero: data corruption.
    pub fn corrupt_rows(&self) -> Vec<&NcclRow> {
        self.rows.iter().filter(|r| r.corrupt()).collect()
    }

    /// Whether the run reported any corruption, in a row or in its out-of-bounds count.
    pub fn corrupt(&self) -> bool {
        !self.corrupt_rows().is_empty() || self.out_of_bounds.is_some_and(|n| n > 0)
    }

    /// The row of the largest message: where the bus bandwidth is read, because small
    /// messages measure latency, not the links (nccl-tests' `doc/PERFORMANCE.md`).
    pub fn largest(&self) -> Option<&NcclRow> {
        self.rows.iter().max_by_key(|r| r.size)
    }

    /// The bus-bandwidth figure: the better of out-of-place and in-place at the largest
    /// size, its detail naming the size, both values, the ranks and the average.
    pub fn figures(&self) -> Vec<Figure> {
        let Some(row) = self.largest() else {
            return Vec::new();
        };
        let ranks = if self.ranks.is_empty() {
            "ranks not listed".to_string()
        } else {
            format!("{} ranks", self.ranks.len())
        };
        let avg = self
            .avg_busbw
            .map(|a| format!("; average over the sweep {a} GB/s"))
            .unwrap_or_default();
        let detail = format!(
            "all_reduce_perf busbw at {} ({} B), the largest size: out-of-place {} GB/s, in-place {} GB/s; {}{}",
            human_bytes(row.size),
            row.size,
            row.out_of_place.busbw,
            row.in_place.busbw,
            ranks,
            avg
        );
        vec![Figure::new(
            Metric::NcclBusbw,
            row.busbw(),
            Engine::NcclTests,
            detail,
        )]
    }
}

/// `8589934592` as `8 GiB`, `134217728` as `128 MiB`: how nccl-tests' `-e` spells sizes.
fn human_bytes(size: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if size >= scale && size % scale == 0 {
            return format!("{} {unit}", size / scale);
        }
    }
    format!("{size} B")
}

/// Reads an `all_reduce_perf` report. Needs at least one result row; a row cut short,
/// a number that is not one, NaN, infinity or a negative value is an error naming the
/// line.
pub fn parse_all_reduce(text: &str) -> Result<AllReduceRun, EngineError> {
    check_size(PROGRAM, text)?;
    let mut run = AllReduceRun {
        gpus_per_thread: None,
        ranks: Vec::new(),
        rows: Vec::new(),
        out_of_bounds: None,
        avg_busbw: None,
    };
    for (index, raw_line) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = strip_label(raw_line.trim());
        if let Some(comment) = line.strip_prefix('#') {
            read_comment(&mut run, comment.trim(), line_no)?;
            continue;
        }
        // Rows begin with the size; anything else (NCCL INFO lines, which begin with the
        // host name, warnings, blank lines) is not part of the report.
        if !line.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        if run.rows.len() >= MAX_ROWS {
            return Err(malformed(PROGRAM, format!("more than {MAX_ROWS} result rows")));
        }
        run.rows.push(parse_row(line, line_no)?);
    }
    if run.rows.is_empty() {
        return Err(malformed(
            PROGRAM,
            "no result rows (expected lines of `size count type ... busbw #wrong`)",
        ));
    }
    Ok(run)
}

/// The line without `srun --label`'s `N: ` prefix.
fn strip_label(line: &str) -> &str {
    if let Some((label, rest)) = line.split_once(": ")
        && !label.is_empty()
        && label.bytes().all(|b| b.is_ascii_digit())
    {
        return rest.trim_start();
    }
    line
}

fn read_comment(run: &mut AllReduceRun, comment: &str, line_no: usize) -> Result<(), EngineError> {
    if comment.starts_with("nThread") {
        let words: Vec<&str> = comment.split_whitespace().collect();
        if let Some(pos) = words.iter().position(|w| *w == "nGpus") {
            let raw = words.get(pos + 1).copied().unwrap_or("");
            run.gpus_per_thread = Some(raw.parse().map_err(|_| {
                malformed(
                    PROGRAM,
                    format!("line {line_no}: nGpus `{}` is not a count", excerpt(raw)),
                )
            })?);
        }
    } else if comment.starts_with("Rank") {
        if run.ranks.len() >= MAX_RANKS {
            return Err(malformed(PROGRAM, format!("more than {MAX_RANKS} ranks")));
        }
        run.ranks.push(parse_rank(comment, line_no)?);
    } else if let Some((key, value)) = comment.split_once(':') {
        let first = value.split_whitespace().next().unwrap_or("");
        match key.trim() {
            "Out of bounds values" => {
                run.out_of_bounds = Some(first.parse().map_err(|_| {
                    malformed(
                        PROGRAM,
                        format!(
                            "line {line_no}: out-of-bounds count `{}` is not a count",
                            excerpt(first)
                        ),
                    )
                })?);
            }
            "Avg bus bandwidth" => {
                run.avg_busbw = Some(measured(
                    PROGRAM,
                    &format!("line {line_no}: average bus bandwidth"),
                    first,
                )?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// `Rank  0 Group  0 Pid 295203 on    node005 device  0 [0x18] NVIDIA H100 80GB HBM3`
/// (and the older form without `Group`).
fn parse_rank(comment: &str, line_no: usize) -> Result<NcclRank, EngineError> {
    let bad = || {
        malformed(
            PROGRAM,
            format!(
                "line {line_no}: `{}` is not `Rank N ... on HOST device D [BUS] NAME`",
                excerpt(comment)
            ),
        )
    };
    let words: Vec<&str> = comment.split_whitespace().collect();
    let value_after = |key: &str| -> Option<&str> {
        let pos = words.iter().position(|w| *w == key)?;
        words.get(pos + 1).copied()
    };
    let rank = value_after("Rank").and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let host = value_after("on").ok_or_else(bad)?;
    let device = value_after("device")
        .and_then(|v| v.parse().ok())
        .ok_or_else(bad)?;
    let bus_pos = words
        .iter()
        .position(|w| w.starts_with('[') && w.ends_with(']'))
        .ok_or_else(bad)?;
    let bus = words[bus_pos].trim_matches(|c| c == '[' || c == ']');
    let name = words.get(bus_pos + 1..).unwrap_or(&[]).join(" ");
    Ok(NcclRank {
        rank,
        host: terminal_safe(host),
        device,
        bus: terminal_safe(bus),
        name: terminal_safe(&name),
    })
}

/// A table row: `size count type [redop [root]]` then two groups of
/// `time algbw busbw wrong`.
fn parse_row(line: &str, line_no: usize) -> Result<NcclRow, EngineError> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    // 3 leading columns at least, at most 5, and 8 timing columns.
    if !(11..=13).contains(&tokens.len()) {
        return Err(malformed(
            PROGRAM,
            format!(
                "line {line_no}: a result row has 11 to 13 columns (size count type [redop] [root] and time algbw busbw #wrong twice), found {}: `{}`",
                tokens.len(),
                excerpt(line)
            ),
        ));
    }
    let count_of = |what: &str, raw: &str| -> Result<u64, EngineError> {
        raw.parse().map_err(|_| {
            malformed(
                PROGRAM,
                format!("line {line_no}: {what} `{}` is not a whole number", excerpt(raw)),
            )
        })
    };
    let size = count_of("size", tokens[0])?;
    let count = count_of("count", tokens[1])?;
    let dtype = terminal_safe(tokens[2]);
    let lead = tokens.len() - 8;
    let redop = (lead >= 4).then(|| terminal_safe(tokens[3]));
    let root = if lead == 5 {
        Some(tokens[4].parse::<i64>().map_err(|_| {
            malformed(
                PROGRAM,
                format!("line {line_no}: root `{}` is not a rank", excerpt(tokens[4])),
            )
        })?)
    } else {
        None
    };
    let out_of_place = parse_timing(&tokens[lead..lead + 4], line_no, "out-of-place")?;
    let in_place = parse_timing(&tokens[lead + 4..], line_no, "in-place")?;
    Ok(NcclRow {
        size,
        count,
        dtype,
        redop,
        root,
        out_of_place,
        in_place,
    })
}

fn parse_timing(tokens: &[&str], line_no: usize, which: &str) -> Result<NcclTiming, EngineError> {
    let field = |i: usize, what: &str| {
        measured(
            PROGRAM,
            &format!("line {line_no}: {which} {what}"),
            tokens.get(i).copied().unwrap_or(""),
        )
    };
    let time_us = field(0, "time")?;
    let algbw = field(1, "algbw")?;
    let busbw = field(2, "busbw")?;
    let raw_wrong = tokens.get(3).copied().unwrap_or("");
    let wrong = if raw_wrong == "N/A" {
        None
    } else {
        // nccl-tests prints the count with `%6g` (so a million is `1e+06`); builds before
        // 2.0 printed the largest relative error there instead. Either way any value above
        // zero means data came back wrong, so a fraction counts as one.
        let value = field(3, "#wrong")?;
        if value > 1e15 {
            return Err(malformed(
                PROGRAM,
                format!(
                    "line {line_no}: {which} #wrong `{}` is beyond any buffer",
                    excerpt(raw_wrong)
                ),
            ));
        }
        // In range and finite (checked above), so the conversion is exact for whole values.
        Some(value.ceil() as u64)
    };
    Ok(NcclTiming {
        time_us,
        algbw,
        busbw,
        wrong,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100X8: &str = include_str!("../../../tests/fixtures/bench/nccl-tests/h100x8-issue290.txt");
    const A100X8: &str = include_str!("../../../tests/fixtures/bench/nccl-tests/a100x8-superbench.txt");

    #[test]
    fn args_sweep_to_8g_over_the_gpus() {
        assert_eq!(
            all_reduce_args(8, 8).unwrap(),
            ["-b", "8", "-e", "8G", "-f", "2", "-c", "1", "-g", "8"]
        );
        let err = all_reduce_args(0, 8).unwrap_err();
        assert!(err.to_string().contains("at least one GPU"), "{err}");
        assert!(all_reduce_args(8, 0).is_err());
    }

    #[test]
    fn the_largest_message_fits_the_smallest_gpu() {
        // 80 GB H100 (81559 MiB): 8 GiB; 24 GB RTX 4090 (24564 MiB): 4 GiB (two buffers,
        // 8 GiB, a third of it); 16 GB: 2 GiB; 8 GB: 1 GiB; unknown: 1 GiB.
        assert_eq!(largest_gib(Some(81559)), 8);
        assert_eq!(largest_gib(Some(40960)), 8);
        assert_eq!(largest_gib(Some(24564)), 4);
        assert_eq!(largest_gib(Some(16380)), 2);
        assert_eq!(largest_gib(Some(8188)), 1);
        assert_eq!(largest_gib(Some(0)), 1);
        assert_eq!(largest_gib(None), 1);
    }

    #[test]
    fn reads_an_8_gpu_h100_run() {
        let run = parse_all_reduce(H100X8).unwrap();
        assert_eq!(run.gpus_per_thread, Some(8));
        assert_eq!(run.ranks.len(), 8);
        assert_eq!(
            run.ranks[7],
            NcclRank {
                rank: 7,
                host: "node005".into(),
                device: 7,
                bus: "0xc1".into(),
                name: "NVIDIA H100 80GB HBM3".into(),
            }
        );
        assert_eq!(run.rows.len(), 6);
        let last = run.largest().unwrap();
        assert_eq!(last.size, 4_294_967_296);
        assert_eq!(last.count, 1_073_741_824);
        assert_eq!(last.redop.as_deref(), Some("sum"));
        assert_eq!(last.root, Some(-1));
        assert_eq!(last.out_of_place.time_us, 15870.0);
        assert_eq!(last.out_of_place.busbw, 473.60);
        assert_eq!(last.in_place.busbw, 476.53);
        assert_eq!(last.in_place.wrong, Some(0));
        assert_eq!(run.avg_busbw, Some(439.369));
        assert_eq!(run.out_of_bounds, Some(0));
        assert!(!run.corrupt());

        let figures = run.figures();
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].metric, Metric::NcclBusbw);
        assert_eq!(figures[0].engine, Engine::NcclTests);
        assert_eq!(figures[0].value, 476.53);
        assert!(
            figures[0].detail.contains("4 GiB (4294967296 B)"),
            "{}",
            figures[0].detail
        );
        assert!(figures[0].detail.contains("8 ranks"), "{}", figures[0].detail);
    }

    #[test]
    fn reads_an_older_8_gpu_a100_run_with_info_lines_and_no_check() {
        let run = parse_all_reduce(A100X8).unwrap();
        assert_eq!(run.ranks.len(), 8);
        assert_eq!(run.ranks[0].name, "A100-SXM4-40GB");
        assert_eq!(run.ranks[0].host, "localhost");
        assert_eq!(run.rows.len(), 34);
        let last = run.largest().unwrap();
        assert_eq!(last.size, 8_589_934_592);
        assert_eq!(last.root, None);
        assert_eq!(last.out_of_place.busbw, 235.26);
        assert_eq!(last.in_place.busbw, 235.03);
        assert_eq!(last.out_of_place.wrong, None);
        assert_eq!(run.avg_busbw, Some(68.4048));
        let figure = &run.figures()[0];
        assert_eq!(figure.value, 235.26);
        assert!(
            figure.detail.contains("8 GiB (8589934592 B)"),
            "{}",
            figure.detail
        );
    }

    #[test]
    fn a_wrong_element_is_corruption() {
        // The H100 capture with the in-place #wrong of its last row changed from 0 to 12.
        let tampered = H100X8.replace("15773  272.30  476.53      0", "15773  272.30  476.53     12");
        let run = parse_all_reduce(&tampered).unwrap();
        assert!(run.corrupt());
        let rows = run.corrupt_rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].size, 4_294_967_296);
        assert_eq!(rows[0].in_place.wrong, Some(12));
        // `%6g` spelling of a large count.
        let big = H100X8.replace("15773  272.30  476.53      0", "15773  272.30  476.53  1e+06");
        assert_eq!(
            parse_all_reduce(&big).unwrap().largest().unwrap().in_place.wrong,
            Some(1_000_000)
        );
        let oob = H100X8.replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED");
        assert!(parse_all_reduce(&oob).unwrap().corrupt());
    }

    #[test]
    fn srun_labels_are_read_through() {
        let labelled: String = H100X8.lines().map(|l| format!(" 0: {l}\n")).collect();
        let run = parse_all_reduce(&labelled).unwrap();
        assert_eq!(run.rows.len(), 6);
        assert_eq!(run.ranks.len(), 8);
    }

    #[test]
    fn hostile_reports_are_errors_not_panics() {
        // Truncated in the middle of a row.
        let cut = &H100X8[..H100X8.find("   268435456").unwrap() + 40];
        let err = parse_all_reduce(cut).unwrap_err().to_string();
        assert!(err.contains("line 17"), "{err}");
        // Header only.
        let header: String = H100X8.lines().take(15).map(|l| format!("{l}\n")).collect();
        assert!(
            parse_all_reduce(&header)
                .unwrap_err()
                .to_string()
                .contains("no result rows")
        );
        // NaN, infinity and negative figures.
        for bad in ["NaN", "inf", "-473.60"] {
            let text = H100X8.replace("473.60", bad);
            let err = parse_all_reduce(&text).unwrap_err().to_string();
            assert!(err.contains("busbw"), "{bad}: {err}");
        }
        let text = H100X8.replace("439.369", "nan");
        assert!(
            parse_all_reduce(&text)
                .unwrap_err()
                .to_string()
                .contains("average")
        );
        // Garbage, empty, binary, a size beyond u64.
        assert!(parse_all_reduce("").is_err());
        assert!(parse_all_reduce("\u{0}\u{1b}[31m\u{ff}garbage\n").is_err());
        assert!(parse_all_reduce("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n").is_err());
        let huge_size = H100X8.replace("4294967296    1073741824", "99999999999999999999999 1");
        assert!(parse_all_reduce(&huge_size).is_err());
        let bad_rank = H100X8.replace("#  Rank  7 Group  0 Pid 295203 on", "#  Rank  x Group");
        assert!(
            parse_all_reduce(&bad_rank)
                .unwrap_err()
                .to_string()
                .contains("Rank")
        );
        // Too large to read.
        let huge = "1".repeat(super::super::MAX_OUTPUT_BYTES + 1);
        assert!(matches!(
            parse_all_reduce(&huge),
            Err(EngineError::TooLarge { .. })
        ));
    }

    #[test]
    fn names_from_outside_are_cleaned() {
        let text = H100X8.replace(
            "NVIDIA H100 80GB HBM3\n#  Rank  1",
            "NVIDIA \u{1b}]0;pwn\u{7}H100\n#  Rank  1",
        );
        let run = parse_all_reduce(&text).unwrap();
        assert_eq!(run.ranks[0].name, "NVIDIA H100");
    }

    #[test]
    fn sizes_read_as_nccl_tests_spells_them() {
        assert_eq!(human_bytes(8_589_934_592), "8 GiB");
        assert_eq!(human_bytes(134_217_728), "128 MiB");
        assert_eq!(human_bytes(1000), "1000 B");
    }
}
