//! Health: what every acceptance holds implicitly, whatever the order lists. A GPU with
//! uncorrected ECC errors, a pending or failed memory repair, MIG on unasked, another
//! tenant's process, a hardware slowdown, or that the driver lists but cannot reach is
//! not what anybody ordered.
//!
//! Owns: each health item's rule (with the NVIDIA document it rests on), and how an
//! order's `health_allow` relaxes one. A fact that cannot be read is `unknown`, which does
//! not pass unless the order allows unknowns. Must not: probe, print or read the order.

use super::accept::{AcceptVerdict, Acceptance};
use crate::db::{Xid, XidFault};
use crate::host::{GpuInfo, HostReport, Throttle};

/// One health item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// Uncorrected ECC errors, volatile or aggregate.
    Ecc,
    /// A row remap pending or failed.
    RowRemap,
    /// A page retirement pending, or pages retired after double-bit errors.
    RetiredPages,
    /// MIG on where the order did not ask for it.
    Mig,
    /// Another process holding GPU memory.
    Processes,
    /// A hardware slowdown or power brake active.
    Throttle,
    /// A GPU the driver lists that NVML (and so `nvidia-smi`) cannot reach.
    Nvml,
    /// An XID error of a GPU fault in the kernel log since boot.
    Xid,
}

/// The word of `health_allow` that relaxes every item whose fact is unknown.
pub const ALLOW_UNKNOWN: &str = "unknown";

impl Health {
    /// Every health item, in the order acceptance reports them.
    pub const ALL: [Health; 8] = [
        Health::Nvml,
        Health::Xid,
        Health::Ecc,
        Health::RowRemap,
        Health::RetiredPages,
        Health::Mig,
        Health::Processes,
        Health::Throttle,
    ];

    /// The item's id in the JSON (`health-ecc`).
    pub fn key(self) -> &'static str {
        match self {
            Health::Ecc => "health-ecc",
            Health::RowRemap => "health-row-remap",
            Health::RetiredPages => "health-retired-pages",
            Health::Mig => "health-mig",
            Health::Processes => "health-processes",
            Health::Throttle => "health-throttle",
            Health::Nvml => "health-nvml",
            Health::Xid => "health-xid",
        }
    }

    /// The word that relaxes it in `health_allow` and `--allow-health` (`ecc`).
    pub fn word(self) -> &'static str {
        &self.key()["health-".len()..]
    }

    /// The health item a `health_allow` word names.
    pub fn from_word(word: &str) -> Option<Health> {
        Health::ALL.into_iter().find(|h| h.word() == word)
    }

    /// What a healthy GPU shows.
    fn expected(self) -> &'static str {
        match self {
            Health::Ecc => "no uncorrected ECC error",
            Health::RowRemap => "no row remap pending or failed",
            Health::RetiredPages => "no page retirement pending, no page retired after a double-bit error",
            Health::Mig => "MIG off (the order did not ask for MIG)",
            Health::Processes => "no process holding GPU memory",
            Health::Throttle => "no hardware slowdown or power brake active",
            Health::Nvml => "every GPU the driver lists reachable through NVML",
            Health::Xid => "no XID of a GPU fault in the kernel log since boot",
        }
    }

    /// How it is judged, and NVIDIA's document the rule rests on.
    fn rule(self) -> &'static str {
        match self {
            Health::Ecc => {
                "fails on any uncorrected ECC error, volatile (since the driver loaded) or aggregate (over the \
                 GPU's life); no count (ECC off or absent) passes only where the GPU reports ECC as off or \
                 unsupported (NVIDIA, GPU Memory Error Management: \
                 https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html)"
            }
            Health::RowRemap => {
                "fails on remapped_row_pending (a row waits for a GPU reset) or remapped_row_failure (a bank \
                 has no spare row: NVIDIA's RMA signal); GPUs before Ampere retire pages instead \
                 (NVIDIA, GPU Memory Error Management, Error Recovery and Response Flags: \
                 https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html)"
            }
            Health::RetiredPages => {
                "fails on pending_retirement (a page waits for the driver to reload) or any page retired \
                 after a double-bit error; Ampere and later GPUs remap rows instead and report N/A here \
                 (NVIDIA, Dynamic Page Retirement: https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html)"
            }
            Health::Mig => {
                "fails where MIG mode is on and the order did not allow it: MIG splits the GPU into \
                 instances, and a job sees one slice, not the GPU bought \
                 (NVIDIA, MIG User Guide: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/)"
            }
            Health::Processes => {
                "fails where any process holds GPU memory on a machine just delivered: its memory and \
                 compute are another tenant's (the processes nvidia-smi lists)"
            }
            Health::Throttle => {
                "fails where the clock-event reasons HW Slowdown, HW Thermal Slowdown or HW Power Brake \
                 Slowdown are active: each cuts the core clocks by a factor of 2 or more (NVIDIA, NVML \
                 API, nvmlClocksEventReasons: https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html)"
            }
            Health::Nvml => {
                "fails where the driver is loaded but nvidia-smi (NVML) reports an error instead of the GPUs, \
                 or lists none"
            }
            Health::Xid => {
                "fails on an NVRM Xid line of the kernel log since boot (its last 20000 lines) whose XID \
                 compat-db's XID records (`gpuenv show xid 79`) file as a fault of the GPU, its memory \
                 or its bus, or that they do not hold; those NVIDIA files under the application are \
                 listed only (NVIDIA, Xid Catalog: \
                 https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"
            }
        }
    }
}

/// What a health fact came out as.
enum Reading {
    Healthy(String),
    Sick(String),
    Unknown(String),
}

/// The health items, each relaxed where `allow` names it (or `unknown`, for an unknown
/// fact); `allowed_by` says where the relaxation was written, for the item's text. `xids`
/// is compat-db's XID table (NVIDIA's catalog, with whose fault each one is).
pub fn health_items(host: &HostReport, xids: &[Xid], allow: &[String], allowed_by: &str) -> Vec<Acceptance> {
    let allows = |w: &str| allow.iter().any(|a| a == w);
    Health::ALL
        .into_iter()
        .map(|h| {
            let reading = read(host, xids, h);
            let (pass, found, relaxed) = match reading {
                Reading::Healthy(f) => (true, f, None),
                Reading::Sick(f) if allows(h.word()) => (true, f, Some(h.word())),
                Reading::Sick(f) => (false, f, None),
                Reading::Unknown(f) if allows(h.word()) => (true, format!("unknown: {f}"), Some(h.word())),
                Reading::Unknown(f) if allows(ALLOW_UNKNOWN) => {
                    (true, format!("unknown: {f}"), Some(ALLOW_UNKNOWN))
                }
                Reading::Unknown(f) => (false, format!("unknown: {f}"), None),
            };
            let relaxed_by = relaxed.map(|w| format!("{allowed_by} allows `{w}`"));
            Acceptance {
                item: h.key(),
                expected: h.expected().to_string(),
                found: match &relaxed_by {
                    Some(r) => format!("{found} (relaxed: {r})"),
                    None => found,
                },
                pass,
                verdict: if pass {
                    AcceptVerdict::Pass
                } else {
                    AcceptVerdict::Fail
                },
                overridden_by: None,
                relaxed_by,
                rule: h.rule().to_string(),
            }
        })
        .collect()
}

fn read(host: &HostReport, xids: &[Xid], h: Health) -> Reading {
    if h == Health::Nvml {
        return nvml(host);
    }
    if h == Health::Xid {
        return xid(host, xids);
    }
    if host.gpus.is_empty() {
        return Reading::Unknown("no GPU listed".into());
    }
    let per_gpu: Vec<Reading> = host.gpus.iter().map(|g| gpu_reading(g, h)).collect();
    let pick =
        |want: fn(&Reading) -> Option<&str>| -> Vec<&str> { per_gpu.iter().filter_map(want).collect() };
    let sick = pick(|r| match r {
        Reading::Sick(f) => Some(f.as_str()),
        _ => None,
    });
    if !sick.is_empty() {
        return Reading::Sick(grouped(&sick, host.gpus.len()));
    }
    let unknown = pick(|r| match r {
        Reading::Unknown(f) => Some(f.as_str()),
        _ => None,
    });
    if !unknown.is_empty() {
        return Reading::Unknown(grouped(&unknown, host.gpus.len()));
    }
    let healthy = pick(|r| match r {
        Reading::Healthy(f) => Some(f.as_str()),
        _ => None,
    });
    Reading::Healthy(grouped(&healthy, host.gpus.len()))
}

/// Per-GPU findings, said once where every GPU of several says the same
/// (`every GPU (8): processes not reported`).
fn grouped(found: &[&str], gpus: usize) -> String {
    let bare = |f: &str| {
        f.strip_prefix("GPU ")
            .and_then(|rest| rest.split_once(": "))
            .map_or(f.to_string(), |(_, text)| text.to_string())
    };
    let first = found.first().map(|f| bare(f)).unwrap_or_default();
    if gpus > 1 && found.len() == gpus && found.iter().all(|f| bare(f) == first) {
        let any_prefixed = found.iter().any(|f| f.starts_with("GPU "));
        if any_prefixed {
            format!("every GPU ({gpus}): {first}")
        } else {
            format!("{first} (every GPU)")
        }
    } else {
        let mut out: Vec<&str> = found.to_vec();
        out.dedup();
        out.join("; ")
    }
}

fn gpu_reading(g: &GpuInfo, h: Health) -> Reading {
    let gpu = format!("GPU {}", g.index);
    let state = g.state.as_ref();
    let repair = state.and_then(|s| s.repair.as_ref());
    match h {
        Health::Ecc => match (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate) {
            (v, a) if v.unwrap_or(0) > 0 || a.unwrap_or(0) > 0 => Reading::Sick(format!(
                "{gpu}: uncorrected ECC errors, volatile {}, aggregate {}",
                v.map_or("unknown".into(), |n| n.to_string()),
                a.map_or("unknown".into(), |n| n.to_string())
            )),
            (Some(_), _) | (_, Some(_)) => Reading::Healthy("0 uncorrected ECC errors".into()),
            _ if repair.and_then(|r| r.ecc_supported) == Some(false) => {
                Reading::Healthy("no ECC on this GPU".into())
            }
            _ if g.ecc_enabled == Some(false) => Reading::Healthy("ECC off: no error counted".into()),
            _ => Reading::Unknown(format!("{gpu}: no uncorrected ECC count reported")),
        },
        Health::RowRemap => match repair.map(|r| (r.remap_pending, r.remap_failure)) {
            Some((Some(p), Some(f))) if p || f => Reading::Sick(format!(
                "{gpu}: row remap {}",
                match (p, f) {
                    (true, true) => "pending and failed",
                    (true, false) => "pending",
                    _ => "failed",
                }
            )),
            Some((Some(true), None)) => Reading::Sick(format!("{gpu}: row remap pending")),
            Some((None, Some(true))) => Reading::Sick(format!("{gpu}: row remap failed")),
            Some((Some(false), Some(false))) => Reading::Healthy("no row remap pending or failed".into()),
            // Pre-Ampere GPUs have no row remapper; their page retirements are read.
            _ if repair.is_some_and(|r| r.retirement_pending.is_some()) => {
                Reading::Healthy("no row remapper (this GPU retires pages)".into())
            }
            _ => Reading::Unknown(format!("{gpu}: remapped_rows not reported")),
        },
        Health::RetiredPages => match repair {
            Some(r) if r.retirement_pending == Some(true) || r.retired_double_bit.unwrap_or(0) > 0 => {
                Reading::Sick(format!(
                    "{gpu}: {}",
                    [
                        (r.retirement_pending == Some(true)).then(|| "page retirement pending".to_string()),
                        r.retired_double_bit
                            .filter(|&n| n > 0)
                            .map(|n| format!("{n} pages retired after double-bit errors")),
                    ]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(", ")
                ))
            }
            Some(r) if r.retirement_pending == Some(false) => {
                Reading::Healthy("no page retirement pending, none after a double-bit error".into())
            }
            // Ampere and later remap rows; their `retired_pages` reads N/A.
            Some(r) if r.remap_pending.is_some() || r.remap_failure.is_some() => {
                Reading::Healthy("no page retirement on this GPU (it remaps rows)".into())
            }
            _ => Reading::Unknown(format!("{gpu}: retired_pages not reported")),
        },
        Health::Mig => match g.mig_enabled {
            Some(true) => Reading::Sick(format!("{gpu}: MIG enabled")),
            Some(false) => Reading::Healthy("MIG off".into()),
            None if repair.and_then(|r| r.mig_supported) == Some(false) => {
                Reading::Healthy("no MIG on this GPU".into())
            }
            None => Reading::Unknown(format!("{gpu}: MIG mode not reported")),
        },
        Health::Processes => match state.and_then(|s| s.processes.as_ref()) {
            Some(list) if !list.is_empty() => Reading::Sick(format!(
                "{gpu}: {}",
                list.iter()
                    .map(|p| {
                        let name = if p.name.is_empty() {
                            "unnamed"
                        } else {
                            p.name.as_str()
                        };
                        match p.used_mib {
                            Some(m) => format!("pid {} {name} holds {m} MiB", p.pid),
                            None => format!("pid {} {name}", p.pid),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(_) => Reading::Healthy("no process".into()),
            None => Reading::Unknown(format!("{gpu}: processes not reported")),
        },
        Health::Throttle => match state.and_then(|s| s.throttle.as_ref()) {
            Some(active) => {
                let hw: Vec<&str> = active
                    .iter()
                    .filter_map(|t| match t {
                        Throttle::HwSlowdown => Some("HW Slowdown"),
                        Throttle::HwThermal => Some("HW Thermal Slowdown"),
                        Throttle::HwPowerBrake => Some("HW Power Brake Slowdown"),
                        _ => None,
                    })
                    .collect();
                if hw.is_empty() {
                    Reading::Healthy("no hardware slowdown active".into())
                } else {
                    Reading::Sick(format!("{gpu}: {} active", hw.join(", ")))
                }
            }
            None => Reading::Unknown(format!("{gpu}: clock-event reasons not reported")),
        },
        // Read for the host in `nvml` and `xid`, never per GPU.
        Health::Nvml | Health::Xid => Reading::Unknown(format!("{gpu}: read for the host")),
    }
}

fn nvml(host: &HostReport) -> Reading {
    match (&host.gpu_failure, host.gpus.is_empty(), &host.kernel_module) {
        (Some(f), _, Some(_)) => Reading::Sick(format!(
            "the driver is loaded but nvidia-smi reports no GPU: {}",
            failure_text(f)
        )),
        (Some(f), _, None) => Reading::Unknown(format!("no GPU reached: {}", failure_text(f))),
        (None, false, _) => Reading::Healthy(format!(
            "{} GPU(s) reached ({})",
            host.gpus.len(),
            host.gpus_source.as_deref().unwrap_or("driver tools")
        )),
        (None, true, Some(_)) => Reading::Sick("the driver is loaded but lists no GPU".into()),
        (None, true, None) => Reading::Unknown("no driver and no GPU".into()),
    }
}

/// The kernel log's XIDs judged by compat-db's table: one NVIDIA files under the GPU, or
/// one the table does not hold (no pass without the fact), fails; one NVIDIA files under
/// the application is listed.
fn xid(host: &HostReport, xids: &[Xid]) -> Reading {
    let Some(log) = &host.kernel_log else {
        return Reading::Unknown("the kernel log could not be read (journalctl -k, dmesg)".into());
    };
    let mut faults = Vec::new();
    let mut apps = Vec::new();
    for e in &log.value {
        let known = xids.iter().find(|x| x.code == e.xid);
        let device = if e.device.is_empty() {
            "a GPU"
        } else {
            e.device.as_str()
        };
        let line = match known {
            Some(x) => format!(
                "XID {} on {device}: {}; NVIDIA: {}",
                e.xid, x.description, x.action
            ),
            None => format!(
                "XID {} on {device}: not in compat-db's XID table; see NVIDIA's Xid catalog",
                e.xid
            ),
        };
        match known.map(|x| x.fault) {
            Some(XidFault::Application | XidFault::Informational) => apps.push(line),
            Some(XidFault::Gpu) | None => faults.push(line),
        }
    }
    faults.dedup();
    apps.dedup();
    match (faults.is_empty(), apps.is_empty()) {
        (false, _) => Reading::Sick(faults.join("; ")),
        (true, false) => Reading::Healthy(format!(
            "no XID of a GPU fault ({}); listed, of the application or an event only: {}",
            log.source,
            apps.join("; ")
        )),
        (true, true) => Reading::Healthy(format!("no XID in the kernel log ({})", log.source)),
    }
}

fn failure_text(f: &crate::host::SmiFailure) -> String {
    use crate::host::SmiFailure as F;
    match f {
        F::NotFound => "nvidia-smi not found".into(),
        F::DriverLibraryMismatch { .. } => {
            "Failed to initialize NVML: Driver/library version mismatch".into()
        }
        F::NoDriver => "couldn't communicate with the NVIDIA driver".into(),
        F::NoDevices => "No devices were found".into(),
        F::Other { message } => crate::text::excerpt(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{GpuProcess, GpuState};

    fn xids() -> &'static [Xid] {
        &crate::db::Db::embedded()
            .expect("the embedded database loads")
            .xids
    }

    fn host(state: GpuState, mig: Option<bool>) -> HostReport {
        HostReport {
            gpus: vec![GpuInfo {
                index: 0,
                name: "NVIDIA A100-SXM4-80GB".into(),
                ecc_uncorrected_volatile: Some(0),
                ecc_uncorrected_aggregate: Some(0),
                mig_enabled: mig,
                state: Some(state),
                ..GpuInfo::default()
            }],
            ..HostReport::default()
        }
    }

    fn by_key(items: &[Acceptance], h: Health) -> &Acceptance {
        items.iter().find(|a| a.item == h.key()).unwrap()
    }

    /// A fault fails unless its own word allows it; `unknown` relaxes unknown facts only,
    /// never a fault; each relaxation is said in `found` and `relaxed_by`.
    #[test]
    fn faults_and_unknowns_are_relaxed_only_by_name() {
        let state = GpuState {
            processes: Some(vec![GpuProcess {
                pid: 7,
                name: "python".into(),
                kind: Some("C".into()),
                used_mib: Some(1024),
            }]),
            ..GpuState::default()
        };
        let h = host(state, None);
        let strict = health_items(&h, xids(), &[], "the order");
        assert!(!by_key(&strict, Health::Processes).pass);
        assert_eq!(
            by_key(&strict, Health::Processes).found,
            "GPU 0: pid 7 python holds 1024 MiB"
        );
        assert!(!by_key(&strict, Health::Throttle).pass);
        assert!(by_key(&strict, Health::Throttle).found.starts_with("unknown: "));
        assert!(by_key(&strict, Health::Ecc).pass);

        let unknowns = health_items(&h, xids(), &["unknown".into()], "order.toml line 2");
        assert!(
            !by_key(&unknowns, Health::Processes).pass,
            "a fault is not an unknown"
        );
        let t = by_key(&unknowns, Health::Throttle);
        assert!(t.pass);
        assert_eq!(
            t.relaxed_by.as_deref(),
            Some("order.toml line 2 allows `unknown`")
        );
        assert!(
            t.found.ends_with("(relaxed: order.toml line 2 allows `unknown`)"),
            "{}",
            t.found
        );

        let processes = health_items(&h, xids(), &["processes".into()], "--allow-health");
        assert!(by_key(&processes, Health::Processes).pass);
        assert!(!by_key(&processes, Health::Throttle).pass);
    }

    #[test]
    fn words_and_keys_are_stable_kebab_case() {
        let keys: Vec<&str> = Health::ALL.map(Health::key).to_vec();
        assert_eq!(
            keys,
            [
                "health-nvml",
                "health-xid",
                "health-ecc",
                "health-row-remap",
                "health-retired-pages",
                "health-mig",
                "health-processes",
                "health-throttle"
            ]
        );
        for h in Health::ALL {
            assert_eq!(Health::from_word(h.word()), Some(h));
        }
        assert_eq!(Health::from_word(ALLOW_UNKNOWN), None);
    }

    /// Only the hardware reasons fail: idle and a software power cap are settings.
    #[test]
    fn only_hardware_slowdowns_fail() {
        for (active, pass) in [
            (vec![Throttle::GpuIdle], true),
            (vec![Throttle::SwPowerCap], true),
            (vec![Throttle::HwPowerBrake], false),
            (vec![Throttle::HwThermal], false),
            (vec![Throttle::HwSlowdown], false),
        ] {
            let h = host(
                GpuState {
                    throttle: Some(active.clone()),
                    ..GpuState::default()
                },
                Some(false),
            );
            assert_eq!(
                by_key(&health_items(&h, xids(), &[], "o"), Health::Throttle).pass,
                pass,
                "{active:?}"
            );
        }
    }
}
