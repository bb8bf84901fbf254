//! NVIDIA's `nvbandwidth`: its arguments, and its report, JSON (`-j`) or plain text, read
//! into testcases and host-to-device, device-to-host and peer-to-peer figures.
//!
//! Owns: [`args`], [`parse`] (and [`parse_json`], [`parse_text`]) with the types they
//! return. Must not: run the program, or judge a bandwidth.
//!
//! Both forms carry, a testcase, a matrix of GB/s whose rows and columns the description
//! names: `memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)` for host to device,
//! `CPU(row) <- GPU(column)` for device to host, `GPU(row) -> GPU(column)` or
//! `GPU(row) <- GPU(column)` between GPUs; the arrow is the direction the data moved.
//! A cell is a number or `N/A` (a GPU with itself since v0.5; v0.2 printed `0.00` there).
//! The JSON form (`json_output.cpp`) writes each cell as a string and the description
//! beside it; the text form (`output.cpp`) prints `Running NAME.`, the description, a
//! header of column numbers, one line a row, and `SUM NAME total`. A pasted report may
//! lack the `Running` line, so a matrix is also named by the `SUM` line after it.

use super::{EngineError, check_size, first_json_value, malformed, measured};
use crate::bench::figure::{Engine, Figure, Metric};
use crate::text::{excerpt, terminal_safe};
use serde_json::Value;

const PROGRAM: &str = "nvbandwidth";

/// The most rows or columns of one matrix: NVLink domains reach 72 GPUs (GB200 NVL72),
/// so 1024 is generous and bounds a hostile matrix to a million cells.
const MAX_DIM: usize = 1024;

/// The most testcases of one report (nvbandwidth 0.8 has 32).
const MAX_TESTCASES: usize = 1024;

/// The testcases gpuenv runs: pinned host to each GPU and back, and every GPU pair in
/// both directions, all through the copy engines (nvbandwidth's `-l`; the copy engine is
/// how `cudaMemcpy` moves data in training, and the SM variants measure a kernel copy).
pub const TESTCASES: [&str; 4] = [
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
];

/// The arguments: JSON output and the [`TESTCASES`]. `-t` takes several names after one
/// flag (`multitoken` in `nvbandwidth.cpp`; a second `-t` is refused by its option
/// parser), so the names follow a single `-t`.
pub fn args() -> Vec<String> {
    ["-j", "-t"]
        .iter()
        .copied()
        .chain(TESTCASES)
        .map(str::to_string)
        .collect()
}

/// How a testcase ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestcaseStatus {
    /// Measured.
    Passed,
    /// Not applicable to this machine (one GPU for a peer test, no peer access).
    Waived,
    /// The name is not one this build knows.
    NotFound,
    /// Failed, with nvbandwidth's message (terminal-safe).
    Error(String),
}

/// One testcase of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Testcase {
    /// Its name (`host_to_device_memcpy_ce`).
    pub name: String,
    /// How it ended.
    pub status: TestcaseStatus,
    /// The description line (`memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)`).
    pub description: Option<String>,
    /// The matrix, rows of cells; `None` is `N/A`. Units as the description says
    /// (GB/s for bandwidth, ns for the latency testcases).
    pub matrix: Vec<Vec<Option<f64>>>,
    /// The total nvbandwidth printed.
    pub sum: Option<f64>,
}

/// An nvbandwidth report.
#[derive(Debug, Clone, PartialEq)]
pub struct NvbandwidthRun {
    /// `v0.8`, where printed.
    pub version: Option<String>,
    /// The NVIDIA driver, where printed.
    pub driver: Option<String>,
    /// The GPUs as listed (`NVIDIA A100-SXM4-80GB (00000000:34:00)`), by index.
    pub devices: Vec<String>,
    /// Every testcase, in printed order.
    pub testcases: Vec<Testcase>,
}

/// What a testcase measures, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

fn kind(name: &str) -> Option<Kind> {
    match name {
        "host_to_device_memcpy_ce" | "host_to_device_memcpy_sm" => Some(Kind::HostToDevice),
        "device_to_host_memcpy_ce" | "device_to_host_memcpy_sm" => Some(Kind::DeviceToHost),
        "device_to_device_memcpy_read_ce"
        | "device_to_device_memcpy_write_ce"
        | "device_to_device_memcpy_read_sm"
        | "device_to_device_memcpy_write_sm" => Some(Kind::DeviceToDevice),
        _ => None,
    }
}

impl NvbandwidthRun {
    /// The testcase called `name`.
    pub fn testcase(&self, name: &str) -> Option<&Testcase> {
        self.testcases.iter().find(|t| t.name == name)
    }

    /// The figures: host to device and device to host per GPU (the column), and per
    /// ordered pair of distinct GPUs from the device-to-device testcases, the source GPU
    /// as `gpu` and the destination as `peer`, as the description's arrow says. Cells
    /// that are `N/A`, a GPU with itself, testcases that did not pass and testcases that
    /// measure something else (bidirectional, latency, all-to-one) give none.
    pub fn figures(&self) -> Vec<Figure> {
        let mut out = Vec::new();
        for tc in &self.testcases {
            if tc.status != TestcaseStatus::Passed {
                continue;
            }
            let Some(kind) = kind(&tc.name) else {
                continue;
            };
            // Without a description the names' documented layout holds: host rows,
            // GPU columns, and for peers the read testcase's `GPU(row) -> GPU(column)`.
            let reversed =
                tc.description.as_deref().is_some_and(|d| d.contains("<-")) && kind == Kind::DeviceToDevice;
            let engine_kind = if tc.name.ends_with("_sm") {
                "SM copy kernel"
            } else {
                "copy engine"
            };
            for (row, cells) in tc.matrix.iter().enumerate() {
                for (col, cell) in cells.iter().enumerate() {
                    let Some(value) = *cell else { continue };
                    let (Ok(row_u), Ok(col_u)) = (u32::try_from(row), u32::try_from(col)) else {
                        continue;
                    };
                    let figure = match kind {
                        Kind::HostToDevice | Kind::DeviceToHost => {
                            let metric = if kind == Kind::HostToDevice {
                                Metric::HostToDevice
                            } else {
                                Metric::DeviceToHost
                            };
                            let cpu = if tc.matrix.len() > 1 {
                                format!(", CPU node {row}")
                            } else {
                                String::new()
                            };
                            Figure::new(
                                metric,
                                value,
                                Engine::Nvbandwidth,
                                format!("nvbandwidth {} ({engine_kind}{cpu})", tc.name),
                            )
                            .on_gpu(col_u)
                        }
                        Kind::DeviceToDevice => {
                            if row == col {
                                continue;
                            }
                            let (from, to) = if reversed { (col_u, row_u) } else { (row_u, col_u) };
                            Figure::new(
                                Metric::PeerToPeer,
                                value,
                                Engine::Nvbandwidth,
                                format!("nvbandwidth {} ({engine_kind}, GPU {from} to GPU {to})", tc.name),
                            )
                            .on_gpu(from)
                            .to_peer(to)
                        }
                    };
                    out.push(figure);
                }
            }
        }
        out
    }
}

/// Reads a report in either form: JSON where the first non-blank line opens an object,
/// otherwise text.
pub fn parse(text: &str) -> Result<NvbandwidthRun, EngineError> {
    check_size(PROGRAM, text)?;
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    match first {
        Some(l) if l.starts_with('{') => parse_json(text),
        _ => parse_text(text),
    }
}

/// Reads `nvbandwidth -j`. Warning lines before the document are skipped.
pub fn parse_json(text: &str) -> Result<NvbandwidthRun, EngineError> {
    check_size(PROGRAM, text)?;
    let doc = first_json_value(PROGRAM, text)?;
    let root = doc
        .get("nvbandwidth")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed(PROGRAM, "the JSON has no `nvbandwidth` object"))?;
    if let Some(error) = root.get("error").and_then(Value::as_str) {
        return Err(malformed(
            PROGRAM,
            format!("nvbandwidth reported an error: {}", excerpt(error)),
        ));
    }
    let string = |key: &str| root.get(key).and_then(Value::as_str).map(terminal_safe);
    let devices = match root.get("GPU Device list") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .take(MAX_DIM)
            .map(|d| device_name_json(d.as_str().unwrap_or("")))
            .collect(),
        Some(_) => return Err(malformed(PROGRAM, "`GPU Device list` is not a list")),
    };
    let cases = root
        .get("testcases")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed(PROGRAM, "the JSON has no `testcases` list"))?;
    if cases.len() > MAX_TESTCASES {
        return Err(malformed(PROGRAM, format!("more than {MAX_TESTCASES} testcases")));
    }
    let testcases = cases
        .iter()
        .enumerate()
        .map(|(i, case)| testcase_json(i, case))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NvbandwidthRun {
        version: string("version"),
        driver: string("Driver Version"),
        devices,
        testcases,
    })
}

/// `0: NVIDIA GB200 (00000008:06:00): (host)` to `NVIDIA GB200 (00000008:06:00)`.
fn device_name_json(entry: &str) -> String {
    let rest = entry.split_once(": ").map_or(entry, |(_, r)| r);
    let name = rest.rsplit_once("): (").map_or(rest, |(n, _)| n);
    let name = if rest.contains("): (") {
        format!("{name})")
    } else {
        name.to_string()
    };
    terminal_safe(name.trim())
}

fn testcase_json(index: usize, case: &Value) -> Result<Testcase, EngineError> {
    let field = |key: &str| case.get(key).and_then(Value::as_str);
    let name = field("name")
        .map(terminal_safe)
        .ok_or_else(|| malformed(PROGRAM, format!("testcase {index} has no name")))?;
    let status = match field("status") {
        Some("Passed") => TestcaseStatus::Passed,
        Some("Waived") => TestcaseStatus::Waived,
        Some("Not Found") => TestcaseStatus::NotFound,
        Some(other) => TestcaseStatus::Error(terminal_safe(field("error").unwrap_or(other))),
        None => {
            return Err(malformed(PROGRAM, format!("testcase `{name}` has no status")));
        }
    };
    let what = format!("testcase `{name}`");
    let matrix = match case.get("bandwidth_matrix") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(rows)) => {
            if rows.len() > MAX_DIM {
                return Err(malformed(PROGRAM, format!("{what}: more than {MAX_DIM} rows")));
            }
            rows.iter()
                .map(|row| {
                    let cells = row
                        .as_array()
                        .ok_or_else(|| malformed(PROGRAM, format!("{what}: a matrix row is not a list")))?;
                    if cells.len() > MAX_DIM {
                        return Err(malformed(PROGRAM, format!("{what}: more than {MAX_DIM} columns")));
                    }
                    cells
                        .iter()
                        .map(|cell| match cell {
                            Value::String(s) => cell_value(&what, s),
                            Value::Number(n) => {
                                let s = n.to_string();
                                cell_value(&what, &s)
                            }
                            _ => Err(malformed(
                                PROGRAM,
                                format!("{what}: a cell is neither a number nor `N/A`"),
                            )),
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => {
            return Err(malformed(
                PROGRAM,
                format!("{what}: `bandwidth_matrix` is not a list"),
            ));
        }
    };
    if status == TestcaseStatus::Passed && matrix.is_empty() {
        return Err(malformed(PROGRAM, format!("{what} passed but has no matrix")));
    }
    let sum = match case.get("sum") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(measured(PROGRAM, &format!("{what}: sum"), &n.to_string())?),
        Some(_) => return Err(malformed(PROGRAM, format!("{what}: `sum` is not a number"))),
    };
    Ok(Testcase {
        name,
        status,
        description: field("bandwidth_description").map(|d| terminal_safe(d.trim())),
        matrix,
        sum,
    })
}

/// One cell: a measurement or `N/A`.
fn cell_value(what: &str, raw: &str) -> Result<Option<f64>, EngineError> {
    if raw.trim() == "N/A" {
        return Ok(None);
    }
    measured(PROGRAM, &format!("{what}: cell"), raw).map(Some)
}

/// Reads nvbandwidth's plain-text report.
pub fn parse_text(text: &str) -> Result<NvbandwidthRun, EngineError> {
    check_size(PROGRAM, text)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut run = NvbandwidthRun {
        version: None,
        driver: None,
        devices: Vec::new(),
        testcases: Vec::new(),
    };
    // The name from the last `Running NAME.` not yet given to a matrix.
    let mut running: Option<String> = None;
    // `Waived:` lines seen: a report of only waived testcases is a report.
    let mut waived_lines = 0usize;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let line_no = i + 1;
        if let Some(v) = line.strip_prefix("nvbandwidth Version:") {
            run.version = Some(terminal_safe(v.trim()));
        } else if let Some(v) = line.strip_prefix("Driver Version:") {
            run.driver = Some(terminal_safe(v.trim()));
        } else if let Some(rest) = line.strip_prefix("Device ")
            && let Some((index, name)) = rest.split_once(": ")
            && index.parse::<usize>().is_ok()
        {
            if run.devices.len() < MAX_DIM {
                run.devices.push(terminal_safe(name.trim()));
            }
        } else if let Some(name) = line.strip_prefix("Running ").and_then(|r| r.strip_suffix('.')) {
            running = Some(terminal_safe(name));
        } else if let Some(name) = line.strip_prefix("Waiving ").and_then(|r| r.strip_suffix('.')) {
            push_testcase(&mut run, status_only(name, TestcaseStatus::Waived))?;
        } else if line.starts_with("Waived:") {
            // Since v0.5 a waived testcase prints `Waived: ` alone, after its `Running`
            // line where it printed one; without one it cannot be named.
            waived_lines += 1;
            if let Some(name) = running.take() {
                push_testcase(&mut run, status_only(&name, TestcaseStatus::Waived))?;
            }
        } else if let Some(message) = line.strip_prefix("Error:")
            && let Some(name) = running.take()
        {
            let status = TestcaseStatus::Error(terminal_safe(message.trim()));
            push_testcase(&mut run, status_only(&name, status))?;
        } else if line.contains("(row)") && line.contains("(column)") {
            let (testcase, next) = read_matrix(&lines, i, running.take())?;
            push_testcase(&mut run, testcase)?;
            i = next;
            continue;
        } else if let Some(rest) = line.strip_prefix("SUM ") {
            // A SUM after its matrix was consumed by `read_matrix`; one here has no
            // matrix before it.
            return Err(malformed(
                PROGRAM,
                format!("line {line_no}: `SUM {}` follows no matrix", excerpt(rest)),
            ));
        }
        i += 1;
    }
    if run.testcases.is_empty() && waived_lines == 0 {
        return Err(malformed(
            PROGRAM,
            "no testcase results (expected a `... (row) ... (column) ...` matrix, `Waived:` or `Waiving NAME.`)",
        ));
    }
    Ok(run)
}

fn status_only(name: &str, status: TestcaseStatus) -> Testcase {
    Testcase {
        name: terminal_safe(name),
        status,
        description: None,
        matrix: Vec::new(),
        sum: None,
    }
}

fn push_testcase(run: &mut NvbandwidthRun, testcase: Testcase) -> Result<(), EngineError> {
    if run.testcases.len() >= MAX_TESTCASES {
        return Err(malformed(PROGRAM, format!("more than {MAX_TESTCASES} testcases")));
    }
    run.testcases.push(testcase);
    Ok(())
}

/// The matrix whose description is line `start`: the header of column numbers, the rows
/// up to a blank line, and the `SUM NAME total` line after. Returns the testcase and the
/// index of the first line after it.
fn read_matrix(
    lines: &[&str],
    start: usize,
    running: Option<String>,
) -> Result<(Testcase, usize), EngineError> {
    let description = terminal_safe(lines[start].trim());
    let header_no = start + 2;
    let header = lines.get(start + 1).map(|l| l.trim()).unwrap_or("");
    let columns: Vec<&str> = header.split_whitespace().collect();
    let sequential = !columns.is_empty()
        && columns.len() <= MAX_DIM
        && columns
            .iter()
            .enumerate()
            .all(|(i, c)| c.parse::<usize>().ok() == Some(i));
    if !sequential {
        return Err(malformed(
            PROGRAM,
            format!(
                "line {header_no}: expected the column numbers 0, 1, ... under `{}`, found `{}`",
                excerpt(&description),
                excerpt(header)
            ),
        ));
    }
    let what = running.as_ref().map_or_else(
        || format!("matrix at line {}", start + 1),
        |n| format!("testcase `{n}`"),
    );
    let mut matrix = Vec::new();
    let mut i = start + 2;
    while let Some(line) = lines.get(i).map(|l| l.trim()) {
        if line.is_empty() {
            break;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let row_no = i + 1;
        if tokens.first().and_then(|t| t.parse::<usize>().ok()) != Some(matrix.len()) {
            break;
        }
        if matrix.len() >= MAX_DIM {
            return Err(malformed(PROGRAM, format!("{what}: more than {MAX_DIM} rows")));
        }
        if tokens.len() != columns.len() + 1 {
            return Err(malformed(
                PROGRAM,
                format!(
                    "line {row_no}: {what} has {} columns but this row has {} cells: `{}`",
                    columns.len(),
                    tokens.len().saturating_sub(1),
                    excerpt(line)
                ),
            ));
        }
        let cells = tokens[1..]
            .iter()
            .map(|t| cell_value(&format!("line {row_no}: {what}"), t))
            .collect::<Result<Vec<_>, _>>()?;
        matrix.push(cells);
        i += 1;
    }
    if matrix.is_empty() {
        return Err(malformed(
            PROGRAM,
            format!("line {}: {what} has no rows", start + 3),
        ));
    }
    // The SUM line: after at most one blank line.
    let mut name = running;
    let mut sum = None;
    let mut next = i;
    for (j, line) in lines.iter().enumerate().skip(i).take(2) {
        if let Some(rest) = line.trim().strip_prefix("SUM ") {
            let mut words = rest.split_whitespace();
            let sum_name = words.next().unwrap_or("");
            let total = words.next().unwrap_or("");
            sum = Some(measured(PROGRAM, &format!("line {}: SUM", j + 1), total)?);
            if name.is_none() {
                name = Some(terminal_safe(sum_name));
            }
            next = j + 1;
            break;
        }
    }
    let name = name.ok_or_else(|| {
        malformed(
            PROGRAM,
            format!(
                "line {}: a matrix with neither a `Running NAME.` line before it nor a `SUM NAME` line after it",
                start + 1
            ),
        )
    })?;
    Ok((
        Testcase {
            name,
            status: TestcaseStatus::Passed,
            description: Some(description),
            matrix,
            sum,
        },
        next,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON_1GPU: &str = include_str!("../../../tests/fixtures/bench/nvbandwidth/v0.5-1gpu.json");
    const A6000X6: &str = include_str!("../../../tests/fixtures/bench/nvbandwidth/a6000x6-issue50.txt");
    const README_8GPU: &str =
        include_str!("../../../tests/fixtures/bench/nvbandwidth/readme-8gpu-d2d-write.txt");

    fn peer(figures: &[Figure], gpu: u32, peer: u32) -> Vec<f64> {
        figures
            .iter()
            .filter(|f| f.metric == Metric::PeerToPeer && f.gpu == Some(gpu) && f.peer == Some(peer))
            .map(|f| f.value)
            .collect()
    }

    #[test]
    fn args_run_the_four_copy_engine_testcases_as_json() {
        assert_eq!(
            args(),
            [
                "-j",
                "-t",
                "host_to_device_memcpy_ce",
                "device_to_host_memcpy_ce",
                "device_to_device_memcpy_read_ce",
                "device_to_device_memcpy_write_ce"
            ]
        );
    }

    #[test]
    fn reads_nvbandwidth_json_of_one_gpu() {
        let run = parse(JSON_1GPU).unwrap();
        assert_eq!(run.version.as_deref(), Some("v0.5"));
        assert_eq!(run.driver.as_deref(), Some("565.02"));
        assert_eq!(run.testcases.len(), 32);
        let h2d = run.testcase("host_to_device_memcpy_ce").unwrap();
        assert_eq!(h2d.status, TestcaseStatus::Passed);
        assert_eq!(h2d.matrix, vec![vec![Some(12.3964)]]);
        assert_eq!(
            h2d.description.as_deref(),
            Some("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)")
        );
        assert_eq!(
            run.testcase("device_to_device_memcpy_read_ce").unwrap().status,
            TestcaseStatus::Waived
        );
        let figures = run.figures();
        let h2d: Vec<_> = figures
            .iter()
            .filter(|f| f.metric == Metric::HostToDevice)
            .collect();
        // host_to_device_memcpy_ce and host_to_device_memcpy_sm.
        assert_eq!(h2d.len(), 2);
        assert_eq!((h2d[0].gpu, h2d[0].value), (Some(0), 12.3964));
        assert_eq!(h2d[0].engine, Engine::Nvbandwidth);
        assert!(h2d[0].detail.contains("copy engine"));
        let d2h: Vec<_> = figures
            .iter()
            .filter(|f| f.metric == Metric::DeviceToHost)
            .collect();
        assert_eq!((d2h[0].gpu, d2h[0].value), (Some(0), 13.2001));
        // The waived peer testcases give no figure, nor does the latency testcase.
        assert!(figures.iter().all(|f| f.metric != Metric::PeerToPeer));
        assert_eq!(figures.len(), 4);
    }

    #[test]
    fn reads_a_six_gpu_text_matrix_named_by_its_sum() {
        let run = parse(A6000X6).unwrap();
        assert_eq!(run.version.as_deref(), Some("v0.8"));
        assert_eq!(run.driver.as_deref(), Some("580.95.05"));
        let tc = run.testcase("device_to_device_memcpy_read_ce").unwrap();
        assert_eq!(tc.matrix.len(), 6);
        assert_eq!(tc.matrix[0][0], None);
        assert_eq!(tc.matrix[0][3], Some(21.95));
        assert_eq!(tc.sum, Some(715.53));
        let figures = run.figures();
        // Six GPUs, every ordered pair of distinct GPUs.
        assert_eq!(figures.len(), 30);
        // `GPU(row) -> GPU(column)`: row 0, column 3 is GPU 0 to GPU 3.
        assert_eq!(peer(&figures, 0, 3), [21.95]);
        assert_eq!(peer(&figures, 3, 0), [21.82]);
        assert!(peer(&figures, 2, 2).is_empty());
    }

    #[test]
    fn reads_the_readme_8_gpu_write_matrix_with_its_arrow_reversed() {
        let run = parse(README_8GPU).unwrap();
        let tc = run.testcase("device_to_device_memcpy_write_ce").unwrap();
        assert_eq!(tc.matrix.len(), 8);
        // v0.2 printed 0.00 for a GPU with itself; that is not a figure.
        assert_eq!(tc.matrix[0][0], Some(0.0));
        let figures = run.figures();
        assert_eq!(figures.len(), 56);
        // `GPU(row) <- GPU(column)`: row 6, column 0 (274.89) is GPU 0 to GPU 6, and
        // row 0, column 6 (276.55) is GPU 6 to GPU 0.
        assert_eq!(peer(&figures, 0, 6), [274.89]);
        assert_eq!(peer(&figures, 6, 0), [276.55]);
    }

    #[test]
    fn text_waived_and_failed_testcases_are_kept() {
        // As v0.5 and later print a testcase that cannot run (nvbandwidth issue 13 shows
        // the older `Waiving NAME.`), then one that fails.
        let text = "Device 0: NVIDIA GeForce RTX 2080 Ti\nDevice 1: NVIDIA GeForce RTX 2080 Ti\n\nRunning device_to_device_memcpy_write_ce.\nWaived: \nWaiving device_to_device_memcpy_read_ce.\nRunning host_to_device_memcpy_ce.\nError: cuMemHostAlloc failed\n";
        let run = parse(text).unwrap();
        assert_eq!(
            run.devices,
            ["NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 Ti"]
        );
        let statuses: Vec<_> = run
            .testcases
            .iter()
            .map(|t| (t.name.as_str(), t.status.clone()))
            .collect();
        assert_eq!(
            statuses,
            [
                ("device_to_device_memcpy_write_ce", TestcaseStatus::Waived),
                ("device_to_device_memcpy_read_ce", TestcaseStatus::Waived),
                (
                    "host_to_device_memcpy_ce",
                    TestcaseStatus::Error("cuMemHostAlloc failed".into())
                ),
            ]
        );
        assert!(run.figures().is_empty());
        // Unnamed waivers only: a report with nothing measured, not an error.
        assert!(parse("Waived: \nWaived: \n").unwrap().testcases.is_empty());
    }

    #[test]
    fn json_with_device_list_and_errors() {
        let doc = r#"{"nvbandwidth":{"GPU Device list":["0: NVIDIA GB200 (00000008:06:00): (n179)"],
            "testcases":[{"name":"device_to_device_memcpy_write_ce","status":"Error","error":"boom \u001b[31m"}],
            "version":"v0.8"}}"#;
        let run = parse_json(doc).unwrap();
        assert_eq!(run.devices, ["NVIDIA GB200 (00000008:06:00)"]);
        assert_eq!(run.testcases[0].status, TestcaseStatus::Error("boom ".into()));
        assert!(run.figures().is_empty());
        let failed = r#"{"nvbandwidth":{"error":"CUDA_ERROR_NO_DEVICE","testcases":[]}}"#;
        assert!(
            parse_json(failed)
                .unwrap_err()
                .to_string()
                .contains("CUDA_ERROR_NO_DEVICE")
        );
    }

    #[test]
    fn hostile_reports_are_errors_not_panics() {
        // Truncated JSON.
        let cut = &JSON_1GPU[..JSON_1GPU.len() / 2];
        assert!(parse(cut).unwrap_err().to_string().contains("invalid JSON"));
        // NaN, infinity, negative, garbage cells.
        for bad in ["NaN", "inf", "-12.3964", "twelve"] {
            let text = JSON_1GPU.replacen("\"12.3964\"", &format!("\"{bad}\""), 1);
            assert!(parse(&text).is_err(), "{bad}");
            let text = A6000X6.replacen("21.95", bad, 1);
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains("line 12"), "{bad}: {err}");
        }
        // A row cut short, a header that is not column numbers, a matrix with no name.
        let short = A6000X6.replace(
            " 4     22.64     22.64     21.81     26.35       N/A     26.34",
            " 4     22.64",
        );
        assert!(parse(&short).unwrap_err().to_string().contains("6 columns"));
        let header = A6000X6.replace(
            "           0         1         2",
            "           0         7         2",
        );
        assert!(parse(&header).unwrap_err().to_string().contains("column numbers"));
        let nameless = A6000X6.replace("SUM device_to_device_memcpy_read_ce 715.53", "");
        assert!(parse(&nameless).unwrap_err().to_string().contains("neither"));
        // Nothing, garbage, binary, wrong JSON shapes.
        assert!(parse("").is_err());
        assert!(parse("\u{0}\u{ff}\u{1b}[2J garbage").is_err());
        assert!(parse("{\"nvbandwidth\": 3}").is_err());
        assert!(
            parse("{\"nvbandwidth\": {\"testcases\": [{\"name\": \"x\", \"status\": \"Passed\"}]}}").is_err()
        );
        assert!(parse("{\"nvbandwidth\": {\"testcases\": [{\"name\": \"x\", \"status\": \"Passed\", \"bandwidth_matrix\": [[{}]]}]}}").is_err());
        // A matrix wider than any machine.
        let wide: String = (0..=MAX_DIM).map(|i| format!("{i} ")).collect();
        let text = format!("Running x.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n{wide}\n0 1\n");
        assert!(parse(&text).unwrap_err().to_string().contains("column numbers"));
        let huge = " ".repeat(super::super::MAX_OUTPUT_BYTES + 1);
        assert!(matches!(parse(&huge), Err(EngineError::TooLarge { .. })));
    }
}
