//! The burn-in: every GPU at full matmul load for a stated time, watched second by second,
//! its health read before and after.
//!
//! Owns: running the GPU bench script in burn mode (through the host seam), sampling
//! `nvidia-smi --query-gpu` once a second meanwhile (one command for the whole run, so
//! `--record` keeps every sample and a replay sees the same sequence), reading those
//! samples, comparing the health before and after (ECC, retired pages, row remaps, XIDs of
//! the kernel log, as `doctor` reads them), and the verdict with the rule behind each
//! finding. Must not: print, judge anything but the burn-in, or reach the machine other
//! than through [`System`] and the host probe.
//!
//! The rules:
//! - any new uncorrected ECC error, page retired after a double-bit error, row remap
//!   pending, failed or made, or XID in the kernel log fails: a sound GPU makes none under
//!   load (NVIDIA, GPU Memory Error Management,
//!   <https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html>; Xid Errors,
//!   <https://docs.nvidia.com/deploy/xid-errors/index.html>);
//! - a thermal slowdown (hardware or software) or a hardware power brake in any sample
//!   under load fails: each cuts the clocks far below what the card is sold for
//!   (NVIDIA, NVML API, nvmlClocksEventReasons,
//!   <https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html>). The
//!   software power cap is normal under a full matmul load (the card runs at its power
//!   limit) and is only counted;
//! - a GPU whose sustained SM clock (the median of its samples under load) is more than
//!   [`CLOCK_FRACTION`] below the median of all GPUs' sustained clocks fails, and so does one
//!   whose sustained matmul throughput is that far below its peers'.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::gpu::{self, GpuRun, Matmul};
use crate::host::system::{Outcome, System};
use crate::host::{HostReport, ProbeOptions};

/// How far below the median of its peers a GPU's sustained SM clock (or matmul
/// throughput) may fall: 10%. GPUs of one model under the same load boost to within a
/// few percent of each other (the spread of boost clocks between cards of one SKU, and
/// the steps of 15 MHz the clock moves in); a gap of a tenth is no such spread but a card
/// that runs hot (a fan, a heatsink, a blocked airflow), or has a lower power limit set.
pub const CLOCK_FRACTION: f64 = 0.10;

/// A sample counts as under load when the GPU was busy at least this share of the last
/// interval: the burn keeps it near 100%; the seconds while torch starts, and after the
/// load stops, are idle, and their clocks say nothing of the card under load.
pub const LOAD_UTILIZATION: u32 = 80;

/// How long the sampler runs beyond the burn itself: torch's start and the allocation
/// before the load begins.
pub const SAMPLER_MARGIN_S: u64 = 30;

/// The fields sampled, in nvidia-smi's names since driver 530 (`clocks_event_reasons.*`).
pub const FIELDS: &str = "index,timestamp,utilization.gpu,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit,clocks_event_reasons.active,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.sw_power_cap";

/// The same fields in the names of older drivers (`clocks_throttle_reasons.*`), which
/// newer ones still accept.
pub const FIELDS_OLD: &str = "index,timestamp,utilization.gpu,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit,clocks_throttle_reasons.active,clocks_throttle_reasons.hw_thermal_slowdown,clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_power_brake_slowdown,clocks_throttle_reasons.sw_power_cap";

/// How many fields a sample has.
const FIELD_COUNT: usize = 13;

/// NVML's clock-event bits (nvml.h, nvmlClocksEventReasons; the same values as the
/// older nvmlClocksThrottleReasons: NVIDIA, NVML API, R510,
/// <https://docs.nvidia.com/deploy/archive/R510/nvml-api/group__nvmlClocksThrottleReasons.html>).
mod bits {
    pub const SW_POWER_CAP: u64 = 0x4;
    pub const HW_SLOWDOWN: u64 = 0x8;
    pub const SW_THERMAL: u64 = 0x20;
    pub const HW_THERMAL: u64 = 0x40;
    pub const HW_POWER_BRAKE: u64 = 0x80;
}

/// How long, and on which GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct BurnOptions {
    /// The load's length, seconds.
    pub seconds: u64,
    /// The GPUs (nvidia-smi's indices); all when `None`.
    pub gpus: Option<Vec<u32>>,
}

/// One second of one GPU, as nvidia-smi sampled it. A field nvidia-smi gave as `[N/A]` or
/// `[Not Supported]` is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// nvidia-smi's index.
    pub gpu: u32,
    /// nvidia-smi's timestamp (`2026/12/04 19:30:01.123`).
    pub timestamp: String,
    /// Busy share of the last interval, percent.
    pub utilization: Option<u32>,
    /// SM clock, MHz.
    pub sm_clock: Option<u32>,
    /// The SM clock the card can reach, MHz.
    pub sm_clock_max: Option<u32>,
    /// Core temperature, degrees C.
    pub temperature: Option<u32>,
    /// Power drawn, W.
    pub power: Option<f64>,
    /// The power limit, W.
    pub power_limit: Option<f64>,
    /// The clock-event bitmask.
    pub active: Option<u64>,
    /// Hardware thermal slowdown.
    pub hw_thermal: Option<bool>,
    /// Software thermal slowdown.
    pub sw_thermal: Option<bool>,
    /// Hardware power brake.
    pub hw_power_brake: Option<bool>,
    /// Software power cap.
    pub sw_power_cap: Option<bool>,
}

impl Sample {
    /// A reason is on when its field says `Active` or its bit is set in the bitmask.
    fn has(&self, flag: Option<bool>, bit: u64) -> bool {
        flag == Some(true) || self.active.is_some_and(|a| a & bit != 0)
    }

    fn under_load(&self) -> bool {
        self.utilization.is_some_and(|u| u >= LOAD_UTILIZATION)
    }
}

/// Reads the samples of `nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`.
/// A line without the right number of fields (one cut off when the sampler was stopped)
/// is passed over and counted; an index that is not a number refuses the whole output.
pub fn parse_samples(csv: &str) -> Result<(Vec<Sample>, usize), String> {
    let mut samples = Vec::new();
    let mut passed = 0usize;
    for (i, line) in csv.lines().enumerate() {
        if i >= gpu::MAX_LINES * 10 {
            return Err(format!(
                "the sampler printed more than {} lines",
                gpu::MAX_LINES * 10
            ));
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != FIELD_COUNT {
            passed += 1;
            continue;
        }
        let gpu = f[0].parse::<u32>().map_err(|_| {
            format!(
                "line {} of the sampler's output does not start with a GPU index: {}",
                i + 1,
                crate::text::excerpt(line)
            )
        })?;
        samples.push(Sample {
            gpu,
            timestamp: crate::text::excerpt(f[1]),
            utilization: num(f[2]),
            sm_clock: num(f[3]),
            sm_clock_max: num(f[4]),
            temperature: num(f[5]),
            power: watts(f[6]),
            power_limit: watts(f[7]),
            active: hex(f[8]),
            hw_thermal: active(f[9]),
            sw_thermal: active(f[10]),
            hw_power_brake: active(f[11]),
            sw_power_cap: active(f[12]),
        });
    }
    Ok((samples, passed))
}

fn num(s: &str) -> Option<u32> {
    s.parse().ok()
}

fn watts(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|w| w.is_finite() && *w >= 0.0)
}

fn hex(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u64::from_str_radix(digits, 16).ok()
}

fn active(s: &str) -> Option<bool> {
    match s {
        "Active" => Some(true),
        "Not Active" => Some(false),
        _ => None,
    }
}

/// A verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Within every rule.
    #[default]
    Pass,
    /// Not judged in full: a reading was missing.
    Warn,
    /// A rule broken.
    Fail,
}

/// One finding of the burn-in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What it means for the burn-in.
    pub verdict: Verdict,
    /// The GPU, when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// A stable code (`burn-thermal-slowdown`).
    pub code: String,
    /// What was found.
    pub found: String,
    /// The rule, and its source.
    pub rule: String,
}

/// One GPU over the burn-in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BurnGpu {
    /// nvidia-smi's index.
    pub index: u32,
    /// Samples in all.
    pub samples: usize,
    /// Samples under load.
    pub samples_under_load: usize,
    /// The median SM clock under load, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_median: Option<u32>,
    /// The highest SM clock the card can reach, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_max: Option<u32>,
    /// The highest temperature, degrees C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_max: Option<u32>,
    /// The highest power drawn, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_max: Option<f64>,
    /// The power limit, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit: Option<f64>,
    /// Samples under load with a thermal slowdown (hardware or software).
    pub thermal_samples: usize,
    /// Samples under load with the hardware power brake.
    pub power_brake_samples: usize,
    /// Samples under load at the software power cap (normal under full load).
    pub power_cap_samples: usize,
    /// Sustained BF16 matmul throughput over the whole burn-in, TFLOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
}

/// The burn-in's result: `bench --json`'s `burn`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BurnResult {
    /// The load's length asked for, seconds.
    pub seconds: u64,
    /// The verdict: the worst of the findings' (pass without any).
    pub verdict: Verdict,
    /// Each GPU.
    pub gpus: Vec<BurnGpu>,
    /// Every rule broken, and every reading that was missing.
    pub findings: Vec<Finding>,
    /// The peer rule's fraction ([`CLOCK_FRACTION`]).
    pub clock_fraction: f64,
    /// The sampler's command.
    #[serde(default)]
    pub sampler: String,
    /// Sampler lines passed over (cut off or unreadable).
    #[serde(default)]
    pub samples_passed_over: usize,
}

/// A GPU's health as the host probe read it: what must not grow or turn on.
#[derive(Debug, Clone, Default, PartialEq)]
struct Health {
    ecc_volatile: Option<u64>,
    ecc_aggregate: Option<u64>,
    retired_double_bit: Option<u64>,
    retirement_pending: Option<bool>,
    remap_pending: Option<bool>,
    remap_failure: Option<bool>,
    remapped_uncorrectable: Option<u64>,
}

fn health_of(host: &HostReport, index: u32) -> Option<Health> {
    let g = host.gpus.iter().find(|g| g.index == index)?;
    let repair = g
        .state
        .as_ref()
        .and_then(|s| s.repair.clone())
        .unwrap_or_default();
    Some(Health {
        ecc_volatile: g.ecc_uncorrected_volatile,
        ecc_aggregate: g.ecc_uncorrected_aggregate,
        retired_double_bit: repair.retired_double_bit,
        retirement_pending: repair.retirement_pending,
        remap_pending: repair.remap_pending,
        remap_failure: repair.remap_failure,
        remapped_uncorrectable: repair.remapped_uncorrectable,
    })
}

const RULE_ECC: &str = "fails on any uncorrected ECC error, page retired after a double-bit error, or row remap \
     pending, failed or made during the burn-in: a sound GPU makes none under load (NVIDIA, GPU Memory Error \
     Management: https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html)";
const RULE_XID: &str = "fails on any NVRM Xid line the kernel log gained during the burn-in (NVIDIA, Xid Errors: \
     https://docs.nvidia.com/deploy/xid-errors/index.html)";
const RULE_THERMAL: &str = "fails on a thermal slowdown (hardware or software) or the hardware power brake in any \
     sample under load: each cuts the clocks far below the card's (NVIDIA, NVML API, nvmlClocksEventReasons: \
     https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html)";
const RULE_CLOCK: &str = "fails where a GPU's median SM clock under load is more than 10% below the median of all \
     GPUs': cards of one model under one load boost within a few percent of each other, so a tenth is a card \
     that runs hot or is power-limited (gpuenv's rule)";
const RULE_TFLOPS: &str = "fails where a GPU's sustained matmul throughput over the burn-in is more than 10% below \
     the median of all GPUs' (gpuenv's rule, as for the clock)";

fn finding(verdict: Verdict, gpu: Option<u32>, code: &str, found: String, rule: &str) -> Finding {
    Finding {
        verdict,
        gpu,
        code: code.into(),
        found,
        rule: rule.into(),
    }
}

/// The median of `v` (the lower of the two middle values for an even count, so that it
/// is always a value measured); `None` when empty.
fn median<T: PartialOrd + Copy>(v: &[T]) -> Option<T> {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    s.get(s.len().checked_sub(1)? / 2).copied()
}

/// Judges a burn-in from what was read: health before and after, the samples, and the
/// script's run (its per-GPU totals). `gpus` are the GPUs loaded.
pub fn judge(
    seconds: u64,
    gpus: &[u32],
    before: &HostReport,
    after: &HostReport,
    samples: &[Sample],
    script: Result<&GpuRun, &str>,
) -> BurnResult {
    let mut findings = Vec::new();
    let mut rows = Vec::new();
    if gpus.is_empty() {
        findings.push(finding(
            Verdict::Fail,
            None,
            "burn-load-failed",
            "no GPU was found to load".into(),
            "fails where the matmul load did not run on every GPU for the whole time",
        ));
    }

    // The load itself: every GPU must have run it to the end.
    let burned: Vec<&Matmul> = match script {
        Ok(run) => {
            for s in &run.skipped {
                findings.push(finding(
                    Verdict::Fail,
                    None,
                    "burn-load-failed",
                    format!("the load did not run as asked: {s}"),
                    "fails where the matmul load did not run on every GPU for the whole time",
                ));
            }
            run.burn.iter().collect()
        }
        Err(why) => {
            findings.push(finding(
                Verdict::Fail,
                None,
                "burn-load-failed",
                format!("the load did not run: {}", crate::text::excerpt(why)),
                "fails where the matmul load did not run on every GPU for the whole time",
            ));
            Vec::new()
        }
    };

    for &g in gpus {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.gpu == g).collect();
        let loaded: Vec<&Sample> = mine.iter().copied().filter(|s| s.under_load()).collect();
        let clocks: Vec<u32> = loaded.iter().filter_map(|s| s.sm_clock).collect();
        let thermal: Vec<&Sample> = loaded
            .iter()
            .copied()
            .filter(|s| s.has(s.hw_thermal, bits::HW_THERMAL) || s.has(s.sw_thermal, bits::SW_THERMAL))
            .collect();
        // The hardware slowdown bit alone (a GPU that reports no finer reason) is heat or
        // the brake: NVML names both as its causes.
        let brake: Vec<&Sample> = loaded
            .iter()
            .copied()
            .filter(|s| {
                s.has(s.hw_power_brake, bits::HW_POWER_BRAKE)
                    || s.active.is_some_and(|a| a & bits::HW_SLOWDOWN != 0)
            })
            .filter(|s| !thermal.contains(s))
            .collect();
        let row = BurnGpu {
            index: g,
            samples: mine.len(),
            samples_under_load: loaded.len(),
            sm_clock_median: median(&clocks),
            sm_clock_max: mine.iter().filter_map(|s| s.sm_clock_max).max(),
            temperature_max: mine.iter().filter_map(|s| s.temperature).max(),
            power_max: mine
                .iter()
                .filter_map(|s| s.power)
                .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.max(p)))),
            power_limit: mine.iter().rev().find_map(|s| s.power_limit),
            thermal_samples: thermal.len(),
            power_brake_samples: brake.len(),
            power_cap_samples: loaded
                .iter()
                .filter(|s| s.has(s.sw_power_cap, bits::SW_POWER_CAP))
                .count(),
            tflops: burned
                .iter()
                .find(|m| m.gpu == g)
                .and_then(|m| gpu::tflops(m).ok()),
        };
        if mine.is_empty() {
            findings.push(finding(
                Verdict::Warn,
                Some(g),
                "burn-no-samples",
                format!("no nvidia-smi sample of GPU {g}: clocks, heat and power were not watched"),
                RULE_THERMAL,
            ));
        } else if loaded.is_empty() {
            findings.push(finding(
                Verdict::Warn,
                Some(g),
                "burn-no-samples",
                format!(
                    "none of GPU {g}'s {} samples shows it under load (utilization {LOAD_UTILIZATION}% or more)",
                    mine.len()
                ),
                RULE_THERMAL,
            ));
        }
        if let Some(first) = thermal.first() {
            findings.push(finding(
                Verdict::Fail,
                Some(g),
                "burn-thermal-slowdown",
                format!(
                    "GPU {g} slowed down for heat in {} of {} samples under load, first at {} ({} C, SM {} MHz)",
                    thermal.len(),
                    loaded.len(),
                    first.timestamp,
                    first.temperature.map_or("?".into(), |t| t.to_string()),
                    first.sm_clock.map_or("?".into(), |c| c.to_string())
                ),
                RULE_THERMAL,
            ));
        }
        if let Some(first) = brake.first() {
            findings.push(finding(
                Verdict::Fail,
                Some(g),
                "burn-power-brake",
                format!(
                    "GPU {g} had the hardware power brake (or a hardware slowdown) on in {} of {} samples under load, first at {}",
                    brake.len(),
                    loaded.len(),
                    first.timestamp
                ),
                RULE_THERMAL,
            ));
        }
        if !burned.iter().any(|m| m.gpu == g) && script.is_ok() {
            findings.push(finding(
                Verdict::Fail,
                Some(g),
                "burn-load-failed",
                format!("the load reported no end on GPU {g}"),
                "fails where the matmul load did not run on every GPU for the whole time",
            ));
        }
        health_findings(g, before, after, &mut findings);
        rows.push(row);
    }
    xid_findings(before, after, &mut findings);
    peer_findings(&rows, &mut findings);

    let verdict = findings.iter().map(|f| f.verdict).max().unwrap_or(Verdict::Pass);
    BurnResult {
        seconds,
        verdict,
        gpus: rows,
        findings,
        clock_fraction: CLOCK_FRACTION,
        sampler: String::new(),
        samples_passed_over: 0,
    }
}

/// A GPU whose sustained clock, or throughput, is more than [`CLOCK_FRACTION`] below
/// its peers' median.
fn peer_findings(rows: &[BurnGpu], findings: &mut Vec<Finding>) {
    let clocks: Vec<(u32, f64)> = rows
        .iter()
        .filter_map(|r| r.sm_clock_median.map(|c| (r.index, f64::from(c))))
        .collect();
    let tflops: Vec<(u32, f64)> = rows
        .iter()
        .filter_map(|r| r.tflops.map(|t| (r.index, t)))
        .collect();
    for (values, code, what, unit, rule) in [
        (
            &clocks,
            "burn-slow-clock",
            "median SM clock under load",
            "MHz",
            RULE_CLOCK,
        ),
        (
            &tflops,
            "burn-slow-matmul",
            "sustained BF16 matmul throughput",
            "TFLOPS",
            RULE_TFLOPS,
        ),
    ] {
        if values.len() < 2 {
            continue;
        }
        let all: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
        let Some(mid) = median(&all) else { continue };
        for &(g, v) in values.iter() {
            if v < mid * (1.0 - CLOCK_FRACTION) {
                findings.push(finding(
                    Verdict::Fail,
                    Some(g),
                    code,
                    format!(
                        "GPU {g}'s {what} is {v:.1} {unit}, {:.0}% below the median of the {} GPUs ({mid:.1} {unit})",
                        (1.0 - v / mid) * 100.0,
                        all.len()
                    ),
                    rule,
                ));
            }
        }
    }
}

/// What grew or turned on between the two readings of one GPU.
fn health_findings(g: u32, before: &HostReport, after: &HostReport, findings: &mut Vec<Finding>) {
    let (Some(b), Some(a)) = (health_of(before, g), health_of(after, g)) else {
        findings.push(finding(
            Verdict::Warn,
            Some(g),
            "burn-health-unread",
            format!("GPU {g}'s ECC and memory repairs could not be read before and after"),
            RULE_ECC,
        ));
        return;
    };
    let grew = |what: &str, b: Option<u64>, a: Option<u64>| match (b, a) {
        (Some(b), Some(a)) if a > b => Some(format!("{what} went from {b} to {a}")),
        (None, Some(a)) if a > 0 => Some(format!("{what} reads {a} after (not read before)")),
        _ => None,
    };
    let turned = |what: &str, b: Option<bool>, a: Option<bool>| {
        (a == Some(true) && b != Some(true)).then(|| format!("{what} turned on"))
    };
    let changes: Vec<String> = [
        grew(
            "uncorrected ECC errors (volatile)",
            b.ecc_volatile,
            a.ecc_volatile,
        ),
        grew(
            "uncorrected ECC errors (aggregate)",
            b.ecc_aggregate,
            a.ecc_aggregate,
        ),
        grew(
            "pages retired after double-bit errors",
            b.retired_double_bit,
            a.retired_double_bit,
        ),
        turned(
            "a pending page retirement",
            b.retirement_pending,
            a.retirement_pending,
        ),
        turned("a pending row remap", b.remap_pending, a.remap_pending),
        turned("a row remap failure", b.remap_failure, a.remap_failure),
        grew(
            "rows remapped after uncorrectable errors",
            b.remapped_uncorrectable,
            a.remapped_uncorrectable,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !changes.is_empty() {
        findings.push(finding(
            Verdict::Fail,
            Some(g),
            "burn-memory-errors",
            format!("GPU {g} during the burn-in: {}", changes.join("; ")),
            RULE_ECC,
        ));
    }
}

/// XID lines the kernel log gained: those after, less as many of each as there were
/// before (the log since boot holds both).
fn xid_findings(before: &HostReport, after: &HostReport, findings: &mut Vec<Finding>) {
    let (Some(b), Some(a)) = (&before.kernel_log, &after.kernel_log) else {
        findings.push(finding(
            Verdict::Warn,
            None,
            "burn-health-unread",
            "the kernel log could not be read before and after: XIDs were not compared".into(),
            RULE_XID,
        ));
        return;
    };
    let mut left = b.value.clone();
    let mut new = Vec::new();
    for e in &a.value {
        match left.iter().position(|x| x == e) {
            Some(i) => {
                left.remove(i);
            }
            None => new.push(e),
        }
    }
    if !new.is_empty() {
        let shown: Vec<String> = new
            .iter()
            .take(5)
            .map(|e| {
                format!(
                    "Xid {} on {}: {}",
                    e.xid,
                    crate::text::excerpt(&e.device),
                    crate::text::excerpt(&e.text)
                )
            })
            .collect();
        findings.push(finding(
            Verdict::Fail,
            None,
            "burn-xid",
            format!(
                "the kernel log gained {} XID line(s) during the burn-in: {}",
                new.len(),
                shown.join("; ")
            ),
            RULE_XID,
        ));
    }
}

/// Which field names this nvidia-smi takes: the new ones, else the old ones; `None` when
/// it answers neither (no nvidia-smi, no driver).
fn sampler_fields(sys: &dyn System) -> Option<&'static str> {
    [FIELDS, FIELDS_OLD].into_iter().find(|fields| {
        sys.run(
            "nvidia-smi",
            &[&format!("--query-gpu={fields}"), "--format=csv,noheader,nounits"],
        )
        .ok()
    })
}

/// Runs the burn-in: the health read, the load and the sampler side by side, the health
/// read again, and the verdict. `python` holds a CUDA torch. The system's timeout must
/// exceed `opts.seconds` by a few minutes (see [`time_limit`]).
pub fn run(sys: Arc<dyn System>, python: &str, opts: &BurnOptions, probe: &ProbeOptions) -> BurnResult {
    // A look first (`--check`, seconds): a Python without a CUDA torch, or GPUs torch
    // cannot see, end the burn-in now rather than after its whole length of sampling.
    let mut check_args = vec!["--check".to_string()];
    check_args.extend(gpu::gpus_args(opts.gpus.as_deref()));
    let check = gpu::run_script(sys.as_ref(), python, &check_args);
    let seen = gpu::read_output(
        python,
        &check.outcome,
        check.status.map(i64::from),
        &check.stdout,
        &check.stderr,
    )
    .and_then(|run| {
        if run.gpus.is_empty() {
            Err(format!(
                "torch under `{}` sees no GPU: {}",
                crate::text::excerpt(python),
                run.skipped.join("; ")
            ))
        } else {
            Ok(run)
        }
    });
    if let Err(why) = seen {
        return not_run(opts, &why);
    }
    let before = crate::host::probe(sys.clone(), probe);
    // The GPUs asked for, else those the probe found; where it found none (no nvidia-smi,
    // no NVML), those torch saw.
    let mut gpus: Vec<u32> = match &opts.gpus {
        Some(g) => g.clone(),
        None => before.gpus.iter().map(|g| g.index).collect(),
    };
    let fields = sampler_fields(sys.as_ref());
    let sampler_secs = opts.seconds.saturating_add(SAMPLER_MARGIN_S).to_string();
    let query = fields.map(|f| format!("--query-gpu={f}"));
    let sampler_args: Vec<&str> = match &query {
        Some(q) => vec![
            "--signal=INT",
            &sampler_secs,
            "nvidia-smi",
            q,
            "--format=csv,noheader,nounits",
            "-l",
            "1",
        ],
        None => Vec::new(),
    };
    let mut args = vec!["--burn".to_string(), opts.seconds.to_string()];
    args.extend(gpu::gpus_args(opts.gpus.as_deref()));

    let (script, sampled) = std::thread::scope(|s| {
        let sampler = (!sampler_args.is_empty()).then(|| {
            let sys = sys.as_ref();
            let a = &sampler_args;
            // `timeout` stops nvidia-smi's own loop: one command, whose whole output the
            // record keeps.
            s.spawn(move || sys.run("timeout", a))
        });
        let script = gpu::run_script(sys.as_ref(), python, &args);
        let sampled = sampler.map(|h| h.join());
        (script, sampled)
    });
    let after = crate::host::probe(sys.clone(), probe);

    let parsed = gpu::read_output(
        python,
        &script.outcome,
        script.status.map(i64::from),
        &script.stdout,
        &script.stderr,
    );
    if gpus.is_empty() {
        if let Ok(run) = &parsed {
            gpus = run.gpus.iter().map(|g| g.index).collect();
        }
    }
    let mut notes = Vec::new();
    let (samples, passed) = match sampled {
        None => {
            notes.push(
                "nvidia-smi answers neither its new nor its old field names: nothing was sampled".to_string(),
            );
            (Vec::new(), 0)
        }
        Some(Err(_)) => {
            notes.push("the sampler's thread failed".to_string());
            (Vec::new(), 0)
        }
        Some(Ok(out)) => {
            // `timeout` ends nvidia-smi's loop with status 124: that is how it should end.
            let ended =
                out.outcome == Outcome::Exited && matches!(out.status, Some(0) | Some(124) | Some(130));
            if !ended {
                notes.push(format!(
                    "the sampler (`timeout ... nvidia-smi -l 1`) ended badly: {}",
                    crate::text::excerpt(out.stderr.trim())
                ));
            }
            parse_samples(&out.stdout).unwrap_or_else(|e| {
                notes.push(e);
                (Vec::new(), 0)
            })
        }
    };
    let mut result = judge(
        opts.seconds,
        &gpus,
        &before,
        &after,
        &samples,
        parsed.as_ref().map_err(String::as_str),
    );
    for n in notes {
        result
            .findings
            .push(finding(Verdict::Warn, None, "burn-sampler", n, RULE_THERMAL));
    }
    result.verdict = result
        .findings
        .iter()
        .map(|f| f.verdict)
        .max()
        .unwrap_or_default();
    result.sampler = sampler_args.join(" ");
    result.samples_passed_over = passed;
    result
}

/// A burn-in that could not put a load on the GPUs (no CUDA torch, no GPU torch sees):
/// failed, with only that reason. A burn-in asked for and not run is never a pass.
pub fn not_run(opts: &BurnOptions, why: &str) -> BurnResult {
    let none = HostReport::default();
    let mut result = judge(
        opts.seconds,
        &opts.gpus.clone().unwrap_or_default(),
        &none,
        &none,
        &[],
        Err(why),
    );
    result.findings.retain(|f| f.code == "burn-load-failed");
    result.verdict = Verdict::Fail;
    result
}

/// How long the system must let the burn-in's commands run: the load, torch's start,
/// and the script's own grace for its workers.
pub fn time_limit(seconds: u64) -> std::time::Duration {
    std::time::Duration::from_secs(seconds.saturating_add(300))
}

#[cfg(test)]
mod tests;
