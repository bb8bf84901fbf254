//! NVIDIA DCGM's diagnostics, `dcgmi diag -r LEVEL -j`: its arguments, and its JSON read
//! into every test, each GPU's status, warnings and info, and the figures DCGM prints.
//!
//! Owns: [`diag_args`], [`parse_diag`] and the types they return. Must not: run `dcgmi`,
//! or decide what a failed or skipped test means for the order (a skip can be a GPU
//! DCGM does not support at that level, not a fault).
//!
//! The document changed shape across releases, and real outputs of each are read:
//! - 2.x and 3.x: `{"DCGM GPU Diagnostic": {"test_categories": [...], "version": "3.1.0"}}`;
//!   a result names its GPUs as `gpu_ids` (`"0,1,2,3"`, or a number) or `gpu_id`
//!   (`"0"`), `status` is `Pass`/`PASS`/`Fail`/`Warn`/`Skip`/`Not Run`, `info` is one
//!   string, `warnings` a list of strings or of `{"warning": ...}` objects, and a test
//!   list may hold `null` entries (NVIDIA's `JsonResultTests.cpp` keeps such an output).
//! - 4.x: the root key is `DCGM Diagnostic`; a result names an entity (`entity_group`
//!   `GPU` or `CPU`, `entity_id`), `info` is a list of strings, each test has a
//!   `test_summary`, and the DCGM and driver versions are under `metadata`.
//!
//! A top-level `runtime_error` (no GPU, the host engine down) is kept on the report, not
//! turned into an error: it is what DCGM said, and the bench shows it.

use super::{EngineError, check_size, first_json_value, malformed, measured};
use crate::bench::figure::{Engine, Figure, Metric};
use crate::text::{excerpt, terminal_safe};
use serde_json::{Map, Value};

const PROGRAM: &str = "dcgmi";

/// The most tests, and results of one test, read: a level-4 run on eight GPUs has about
/// twenty tests of eight results each.
const MAX_ITEMS: usize = 10_000;

/// The arguments for a diagnostic at `level`, with JSON output.
///
/// Levels, from NVIDIA's DCGM user guide (Diagnostics,
/// <https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html>):
/// 1 checks the deployment in seconds, 2 adds short hardware tests (about two minutes),
/// 3 adds the stress and bandwidth tests (about half an hour), 4 the extended ones (an hour
/// or more). Anything else is refused, naming the accepted levels.
pub fn diag_args(level: u8) -> Result<Vec<String>, EngineError> {
    if !(1..=4).contains(&level) {
        return Err(EngineError::BadRequest {
            program: PROGRAM,
            reason: format!("diagnostic level {level} is not one of 1, 2, 3, 4"),
        });
    }
    Ok(vec!["diag".into(), "-r".into(), level.to_string(), "-j".into()])
}

/// How a test ended on one GPU (or on all of a result's GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DiagStatus {
    /// Passed.
    Pass,
    /// Passed with a warning.
    Warn,
    /// Failed.
    Fail,
    /// Skipped: not run here (not supported at this level or on this GPU, or gated).
    Skip,
    /// Not run: an earlier failure stopped the run.
    NotRun,
}

impl DiagStatus {
    fn parse(raw: &str) -> Option<DiagStatus> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "pass" | "passed" => Some(DiagStatus::Pass),
            "warn" | "warning" => Some(DiagStatus::Warn),
            "fail" | "failed" => Some(DiagStatus::Fail),
            "skip" | "skipped" => Some(DiagStatus::Skip),
            "not run" | "notrun" | "not_run" => Some(DiagStatus::NotRun),
            _ => None,
        }
    }
}

/// What a result is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiagEntity {
    /// These GPUs (DCGM's GPU ids, which are NVML's indices).
    Gpus(Vec<u32>),
    /// Another kind of entity (4.x `CPU`), with its id.
    Other {
        /// The entity group as DCGM names it (terminal-safe).
        group: String,
        /// The entity's id.
        id: u32,
    },
    /// The result names none (a whole-system check).
    Unspecified,
}

/// One result of a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagResult {
    /// What it is about.
    pub entity: DiagEntity,
    /// How it ended.
    pub status: DiagStatus,
    /// DCGM's warnings (terminal-safe).
    pub warnings: Vec<String>,
    /// DCGM's informational lines (terminal-safe).
    pub info: Vec<String>,
}

/// One test of the diagnostic (`software`, `PCIe`, `Targeted Stress`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagTest {
    /// Its category (`Deployment`, `Integration`, `Hardware`, `Stress`, `Custom`).
    pub category: String,
    /// Its name as DCGM prints it.
    pub name: String,
    /// Its results, one a GPU or a group of GPUs.
    pub results: Vec<DiagResult>,
    /// The 4.x `test_summary`: the test's status over every entity.
    pub summary: Option<DiagStatus>,
    /// Warnings of the summary (terminal-safe).
    pub summary_warnings: Vec<String>,
    /// Info lines of the summary (terminal-safe).
    pub summary_info: Vec<String>,
}

impl DiagTest {
    /// The test's status: the summary where DCGM gives one, else the worst of its
    /// results (fail over warn over pass; skipped and not-run only when nothing ran).
    pub fn status(&self) -> Option<DiagStatus> {
        if let Some(summary) = self.summary {
            return Some(summary);
        }
        let statuses = self.results.iter().map(|r| r.status);
        statuses
            .clone()
            .filter(|s| matches!(s, DiagStatus::Pass | DiagStatus::Warn | DiagStatus::Fail))
            .max()
            .or_else(|| statuses.min())
    }
}

/// A `dcgmi diag -j` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagReport {
    /// DCGM's version (`3.1.0`, `4.5.2`), where printed.
    pub version: Option<String>,
    /// The driver DCGM detected, where printed.
    pub driver: Option<String>,
    /// DCGM's `runtime_error`: the diagnostic could not run (terminal-safe).
    pub runtime_error: Option<String>,
    /// Every test, in printed order.
    pub tests: Vec<DiagTest>,
}

impl DiagReport {
    /// Every result that failed, with its test.
    pub fn failures(&self) -> Vec<(&DiagTest, &DiagResult)> {
        self.tests
            .iter()
            .flat_map(|t| t.results.iter().map(move |r| (t, r)))
            .filter(|(_, r)| r.status == DiagStatus::Fail)
            .collect()
    }

    /// The status of each test on GPU `gpu`, in printed order.
    pub fn gpu_results(&self, gpu: u32) -> Vec<(&DiagTest, &DiagResult)> {
        self.tests
            .iter()
            .flat_map(|t| t.results.iter().map(move |r| (t, r)))
            .filter(|(_, r)| matches!(&r.entity, DiagEntity::Gpus(ids) if ids.contains(&gpu)))
            .collect()
    }

    /// The figures DCGM printed: the PCIe test's `Host to GPU bandwidth` and `GPU to Host
    /// bandwidth` per GPU (its info lines, `GPU to Host bandwidth:\t\t58.62 GB/s` in 4.x,
    /// `GPU 0 GPU to Host bandwidth:\t\t24.02 GB/s, GPU 0 Host to GPU ...` in one line in
    /// 3.x). DCGM prints no other figure in a unit gpuenv compares (its `Diagnostic`
    /// test's gigaflops mix precisions), so no other is read.
    pub fn figures(&self) -> Vec<Figure> {
        let mut out = Vec::new();
        for test in &self.tests {
            if !test.name.eq_ignore_ascii_case("pcie") {
                continue;
            }
            for result in &test.results {
                let single = match &result.entity {
                    DiagEntity::Gpus(ids) if ids.len() == 1 => Some(ids[0]),
                    _ => None,
                };
                for line in &result.info {
                    for piece in line.split(", ") {
                        if let Some(figure) = pcie_figure(piece, single, &test.name) {
                            out.push(figure);
                        }
                    }
                }
            }
        }
        out
    }
}

/// One PCIe info piece as a figure, or `None` when it is not a bandwidth line or names
/// no GPU. The text was cleaned, so DCGM's tabs arrive as they were.
fn pcie_figure(piece: &str, single: Option<u32>, test: &str) -> Option<Figure> {
    let piece = piece.trim();
    // 3.x prefixes each piece with `GPU N `.
    let (gpu, rest) = match piece.strip_prefix("GPU ").and_then(|r| r.split_once(' ')) {
        Some((n, rest)) if n.parse::<u32>().is_ok() => (n.parse::<u32>().ok(), rest),
        _ => (single, piece),
    };
    let gpu = gpu?;
    let (label, value) = rest.split_once(':')?;
    let metric = match label.trim() {
        "Host to GPU bandwidth" => Metric::HostToDevice,
        "GPU to Host bandwidth" => Metric::DeviceToHost,
        _ => return None,
    };
    let number = value.trim().strip_suffix("GB/s")?;
    let value = measured(PROGRAM, "PCIe bandwidth", number).ok()?;
    Some(
        Figure::new(
            metric,
            value,
            Engine::Dcgm,
            format!("dcgmi diag {test} test, {}", label.trim()),
        )
        .on_gpu(gpu),
    )
}

/// Reads `dcgmi diag -j`. Lines before the document (`Successfully ran diagnostic for
/// group.`, warnings) are skipped.
pub fn parse_diag(text: &str) -> Result<DiagReport, EngineError> {
    check_size(PROGRAM, text)?;
    let doc = first_json_value(PROGRAM, text)?;
    let top = doc
        .as_object()
        .ok_or_else(|| malformed(PROGRAM, "the JSON is not an object"))?;
    let root = ["DCGM Diagnostic", "DCGM GPU Diagnostic"]
        .iter()
        .find_map(|k| top.get(*k))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            malformed(
                PROGRAM,
                "the JSON has neither a `DCGM Diagnostic` (4.x) nor a `DCGM GPU Diagnostic` (2.x, 3.x) object",
            )
        })?;
    let metadata = top.get("metadata").and_then(Value::as_object);
    let text_of = |key: &str| {
        root.get(key)
            .or_else(|| metadata.and_then(|m| m.get(key)))
            .and_then(Value::as_str)
            .map(terminal_safe)
    };
    let mut tests = Vec::new();
    match root.get("test_categories") {
        None | Some(Value::Null) => {}
        Some(Value::Array(categories)) => {
            for category in categories.iter().filter(|c| !c.is_null()) {
                read_category(category, &mut tests)?;
            }
        }
        Some(_) => return Err(malformed(PROGRAM, "`test_categories` is not a list")),
    }
    let runtime_error = text_of("runtime_error");
    if tests.is_empty() && runtime_error.is_none() {
        return Err(malformed(
            PROGRAM,
            "the diagnostic lists no tests and no `runtime_error`",
        ));
    }
    Ok(DiagReport {
        version: text_of("version"),
        driver: text_of("Driver Version Detected"),
        runtime_error,
        tests,
    })
}

fn read_category(category: &Value, tests: &mut Vec<DiagTest>) -> Result<(), EngineError> {
    let category = category
        .as_object()
        .ok_or_else(|| malformed(PROGRAM, "a test category is not an object"))?;
    let name = category
        .get("category")
        .and_then(Value::as_str)
        .map(terminal_safe)
        .ok_or_else(|| malformed(PROGRAM, "a test category has no `category` name"))?;
    let list = match category.get("tests") {
        Some(Value::Array(list)) => list,
        _ => {
            return Err(malformed(
                PROGRAM,
                format!("category `{name}` has no `tests` list"),
            ));
        }
    };
    for test in list.iter().filter(|t| !t.is_null()) {
        if tests.len() >= MAX_ITEMS {
            return Err(malformed(PROGRAM, format!("more than {MAX_ITEMS} tests")));
        }
        tests.push(read_test(&name, test)?);
    }
    Ok(())
}

fn read_test(category: &str, test: &Value) -> Result<DiagTest, EngineError> {
    let test = test
        .as_object()
        .ok_or_else(|| malformed(PROGRAM, format!("a test of `{category}` is not an object")))?;
    let name = test
        .get("name")
        .and_then(Value::as_str)
        .map(terminal_safe)
        .ok_or_else(|| malformed(PROGRAM, format!("a test of `{category}` has no name")))?;
    let what = format!("test `{name}`");
    let results = match test.get("results") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => {
            if list.len() > MAX_ITEMS {
                return Err(malformed(
                    PROGRAM,
                    format!("{what}: more than {MAX_ITEMS} results"),
                ));
            }
            list.iter()
                .filter(|r| !r.is_null())
                .map(|r| read_result(&what, r))
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => return Err(malformed(PROGRAM, format!("{what}: `results` is not a list"))),
    };
    let summary = test.get("test_summary").and_then(Value::as_object);
    let summary_status = summary.map(|s| status_of(&what, s)).transpose()?;
    Ok(DiagTest {
        category: category.to_string(),
        name,
        results,
        summary: summary_status,
        summary_warnings: summary.map(warnings_of).unwrap_or_default(),
        summary_info: summary.map(info_of).unwrap_or_default(),
    })
}

fn status_of(what: &str, object: &Map<String, Value>) -> Result<DiagStatus, EngineError> {
    let raw = object
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(PROGRAM, format!("{what}: a result has no `status`")))?;
    DiagStatus::parse(raw).ok_or_else(|| {
        malformed(
            PROGRAM,
            format!(
                "{what}: status `{}` is not Pass, Warn, Fail, Skip or Not Run",
                excerpt(raw)
            ),
        )
    })
}

fn read_result(what: &str, result: &Value) -> Result<DiagResult, EngineError> {
    let result = result
        .as_object()
        .ok_or_else(|| malformed(PROGRAM, format!("{what}: a result is not an object")))?;
    Ok(DiagResult {
        entity: entity_of(what, result)?,
        status: status_of(what, result)?,
        warnings: warnings_of(result),
        info: info_of(result),
    })
}

/// The GPUs or entity a result names, from any release's keys.
fn entity_of(what: &str, result: &Map<String, Value>) -> Result<DiagEntity, EngineError> {
    if let Some(id) = result.get("entity_id") {
        let id = id_of(what, id)?;
        let group = result
            .get("entity_group")
            .and_then(Value::as_str)
            .unwrap_or("GPU");
        return Ok(if group.eq_ignore_ascii_case("GPU") {
            DiagEntity::Gpus(vec![id])
        } else {
            DiagEntity::Other {
                group: terminal_safe(group),
                id,
            }
        });
    }
    let Some(ids) = result.get("gpu_ids").or_else(|| result.get("gpu_id")) else {
        return Ok(DiagEntity::Unspecified);
    };
    let ids = match ids {
        Value::String(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| id_of(what, &Value::String(s.to_string())))
            .collect::<Result<Vec<_>, _>>()?,
        Value::Array(list) => list
            .iter()
            .take(MAX_ITEMS)
            .map(|v| id_of(what, v))
            .collect::<Result<Vec<_>, _>>()?,
        other => vec![id_of(what, other)?],
    };
    Ok(DiagEntity::Gpus(ids))
}

fn id_of(what: &str, value: &Value) -> Result<u32, EngineError> {
    let parsed = match value {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse::<u32>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        malformed(
            PROGRAM,
            format!(
                "{what}: GPU id `{}` is not a GPU index",
                excerpt(&value.to_string())
            ),
        )
    })
}

/// Warning texts: strings, or objects with `warning` (3.x level-one results nest a
/// `warnings` string in the object instead).
fn warnings_of(object: &Map<String, Value>) -> Vec<String> {
    let texts = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(terminal_safe(s)),
            Value::Object(o) => o
                .get("warning")
                .or_else(|| o.get("warnings"))
                .and_then(Value::as_str)
                .map(terminal_safe),
            _ => None,
        }
    };
    match object.get("warnings") {
        Some(Value::Array(list)) => list.iter().take(MAX_ITEMS).filter_map(texts).collect(),
        Some(other) => texts(other).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Info lines: one string (2.x, 3.x) or a list (4.x).
fn info_of(object: &Map<String, Value>) -> Vec<String> {
    match object.get("info") {
        Some(Value::String(s)) => vec![terminal_safe(s)],
        Some(Value::Array(list)) => list
            .iter()
            .take(MAX_ITEMS)
            .filter_map(Value::as_str)
            .map(terminal_safe)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V3_8GPU: &str = include_str!("../../../tests/fixtures/bench/dcgm/dcgm-3.1.0-8gpu.json");
    const V4_GB10: &str = include_str!("../../../tests/fixtures/bench/dcgm/dcgm-4.5.2-gb10-r2.json");
    const V4_SKIP: &str = include_str!("../../../tests/fixtures/bench/dcgm/dcgm-4.2.3-gb10-r2-skip.json");

    #[test]
    fn args_name_the_level_and_json() {
        assert_eq!(diag_args(3).unwrap(), ["diag", "-r", "3", "-j"]);
        assert_eq!(diag_args(1).unwrap(), ["diag", "-r", "1", "-j"]);
        for bad in [0, 5, 255] {
            let err = diag_args(bad).unwrap_err().to_string();
            assert!(
                err.contains(&format!("level {bad}")) && err.contains("1, 2, 3, 4"),
                "{err}"
            );
        }
    }

    #[test]
    fn reads_a_dcgm_3_report_of_eight_gpus() {
        let report = parse_diag(V3_8GPU).unwrap();
        assert_eq!(report.version.as_deref(), Some("3.1.0"));
        assert_eq!(report.runtime_error, None);
        // Nine deployment tests (the `null` entries skipped) and the custom `software`.
        assert_eq!(report.tests.len(), 10);
        let denylist = &report.tests[0];
        assert_eq!(
            (denylist.category.as_str(), denylist.name.as_str()),
            ("Deployment", "Denylist")
        );
        assert_eq!(denylist.results[0].entity, DiagEntity::Gpus((0..8).collect()));
        assert_eq!(denylist.results[0].status, DiagStatus::Pass);
        assert_eq!(denylist.status(), Some(DiagStatus::Pass));
        let software = report.tests.last().unwrap();
        assert_eq!(software.name, "software");
        assert_eq!(software.results.len(), 8);
        assert_eq!(software.results[7].entity, DiagEntity::Gpus(vec![7]));
        assert!(report.failures().is_empty());
        assert_eq!(report.gpu_results(5).len(), 10);
        assert!(report.figures().is_empty());
    }

    #[test]
    fn reads_a_dcgm_4_report_with_a_failure_and_pcie_figures() {
        let report = parse_diag(V4_GB10).unwrap();
        assert_eq!(report.version.as_deref(), Some("4.5.2"));
        assert_eq!(report.driver.as_deref(), Some("580.82.09"));
        let names: Vec<&str> = report.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["software", "memory", "pcie"]);
        let software = &report.tests[0];
        assert_eq!(software.summary, Some(DiagStatus::Fail));
        assert_eq!(software.results[0].entity, DiagEntity::Gpus(vec![0]));
        assert!(
            software.results[0].warnings[0]
                .starts_with("Persistence Mode: Persistence mode for GPU 0 is disabled.")
        );
        assert!(software.summary_info[0].contains("SRAM Threshold checking was skipped"));
        let failures = report.failures();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].0.name, "software");
        assert_eq!(
            report.tests[1].results[0].info,
            ["Allocated 112427837082 bytes (87.5%)"]
        );
        assert_eq!(report.tests[2].status(), Some(DiagStatus::Pass));

        let figures = report.figures();
        assert_eq!(figures.len(), 2);
        assert_eq!(
            (figures[0].metric, figures[0].gpu, figures[0].value),
            (Metric::DeviceToHost, Some(0), 58.62)
        );
        assert_eq!(
            (figures[1].metric, figures[1].gpu, figures[1].value),
            (Metric::HostToDevice, Some(0), 58.88)
        );
        assert_eq!(figures[0].engine, Engine::Dcgm);
        assert_eq!(figures[0].detail, "dcgmi diag pcie test, GPU to Host bandwidth");
    }

    #[test]
    fn reads_skipped_tests() {
        let report = parse_diag(V4_SKIP).unwrap();
        assert_eq!(report.version.as_deref(), Some("4.2.3"));
        let statuses: Vec<_> = report.tests.iter().map(|t| t.status()).collect();
        assert_eq!(
            statuses,
            [
                Some(DiagStatus::Fail),
                Some(DiagStatus::Skip),
                Some(DiagStatus::Skip)
            ]
        );
        assert!(report.figures().is_empty());
    }

    #[test]
    fn reads_the_3x_pcie_info_line_and_its_other_spellings() {
        // The 3.x `info` string as quoted in NVIDIA/DCGM issue 215, in a 3.x result with
        // `gpu_id` as a string, warnings as objects, and a lower-case `Not Run` neighbour.
        let doc = r#"Successfully ran diagnostic for group.
{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Integration", "tests": [
  {"name": "PCIe", "results": [{"gpu_id": "0", "status": "Warn",
    "warnings": [{"warning": "slow \u001b[31mlink", "error_id": 12}],
    "info": "GPU 0 GPU to Host bandwidth:\t\t24.02 GB/s, GPU 0 Host to GPU bandwidth:\t\t25.93 GB/s, GPU 0 bidirectional bandwidth:\t39.32 GB/s, GPU 0 GPU to Host latency:\t\t3.024 us"},
    {"gpu_id": 1, "status": "not run"}]}]}], "version": "3.3.9"}}"#;
        let report = parse_diag(doc).unwrap();
        let pcie = &report.tests[0];
        assert_eq!(pcie.results[0].warnings, ["slow link"]);
        assert_eq!(pcie.results[1].status, DiagStatus::NotRun);
        assert_eq!(pcie.status(), Some(DiagStatus::Warn));
        let figures = report.figures();
        assert_eq!(figures.len(), 2);
        assert_eq!(
            (figures[0].metric, figures[0].value),
            (Metric::DeviceToHost, 24.02)
        );
        assert_eq!(
            (figures[1].metric, figures[1].value),
            (Metric::HostToDevice, 25.93)
        );
    }

    #[test]
    fn a_runtime_error_is_reported_not_refused() {
        let doc = r#"{"DCGM GPU Diagnostic": {"runtime_error": "No GPUs on this host", "version": "3.3.9"}}"#;
        let report = parse_diag(doc).unwrap();
        assert_eq!(report.runtime_error.as_deref(), Some("No GPUs on this host"));
        assert!(report.tests.is_empty());
    }

    #[test]
    fn hostile_reports_are_errors_not_panics() {
        let cut = &V4_GB10[..V4_GB10.len() / 3];
        assert!(parse_diag(cut).unwrap_err().to_string().contains("invalid JSON"));
        for bad in [
            "",
            "garbage\u{0}\u{1b}[2J",
            "[]",
            "{}",
            r#"{"DCGM Diagnostic": 7}"#,
            r#"{"DCGM Diagnostic": {"test_categories": 3}}"#,
            r#"{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"entity_id": -1, "status": "Pass"}]}]}]}}"#,
            r#"{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"entity_id": 99999999999, "status": "Pass"}]}]}]}}"#,
            r#"{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"gpu_ids": "0,x", "status": "Pass"}]}]}]}}"#,
            r#"{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"entity_id": 0}]}]}]}}"#,
        ] {
            assert!(parse_diag(bad).is_err(), "{bad}");
        }
        let odd = V4_GB10.replacen("\"Pass\"", "\"Maybe\"", 1);
        let err = parse_diag(&odd).unwrap_err().to_string();
        assert!(err.contains("`Maybe`") && err.contains("test `memory`"), "{err}");
        // A PCIe figure of NaN or a negative value is not a figure.
        for bad in ["NaN", "-58.62", "inf"] {
            let text = V4_GB10.replace("58.62 GB/s", &format!("{bad} GB/s"));
            let figures = parse_diag(&text).unwrap().figures();
            assert_eq!(figures.len(), 1, "{bad}");
            assert_eq!(figures[0].metric, Metric::HostToDevice);
        }
        let huge = " ".repeat(super::super::MAX_OUTPUT_BYTES + 1);
        assert!(matches!(parse_diag(&huge), Err(EngineError::TooLarge { .. })));
    }
}
