//! Judging a probed host: `doctor`'s checks, the machine facts `check` feeds the resolver,
//! and acceptance against what was ordered.
//!
//! Owns: the doctor check list (stable ids in [`CHECKS`]), turning host facts into a
//! resolver query, reading an order ([`order`]) and the acceptance items (`accept`), those
//! decided by measured figures included ([`mod@bench`]).
//! Must not: probe (facts arrive as a [`HostReport`]), print, or restate a compatibility
//! rule (those are the resolver's: its findings are passed through with their codes).
//!
//! A check that fails because of another says so and names the real cause: with a
//! driver/library mismatch, `cuda-available` says the mismatch is why, not "no GPU". And a
//! check never passes on a fact it does not have: an unknown user-space driver, GPUs the
//! database lacks, or no usable GPU turn a pass into a skip, a warning or a failure.

use crate::resolve::Code;
use serde::{Deserialize, Serialize};

use crate::db::Db;
use crate::host::{DockerProbe, HostReport, SmiFailure};
use crate::resolve::{Finding, GpuAsk, Installed, Query, Status, judge_installed};

mod accept;
pub mod bench;
mod delivery;
pub mod health;
pub mod layout;
pub mod order;

pub use accept::{
    AcceptVerdict, Acceptance, Accepted, accept, accept_measured, accept_with_health, override_for, tally,
};
pub use bench::Measured;
pub use order::{Expect, Item, OrderError, Size, parse_order};

/// Every doctor check id: part of the JSON contract, snapshotted in
/// `tests/snapshots/doctor-checks.txt` (a test holds the two equal).
pub const CHECKS: &[(&str, &str)] = &[
    ("gpus-visible", "the driver sees the GPUs"),
    (
        "driver-module",
        "the user-space driver matches the loaded kernel module",
    ),
    (
        "gpus-known",
        "every GPU is in the database, so its architecture can be checked",
    ),
    ("gpu-health", "no uncorrected ECC errors, MIG as expected"),
    (
        "pcie-link",
        "each GPU's PCIe link runs at what the card can: no Gen4 card in a Gen3 slot, full width",
    ),
    (
        "gpu-interconnect",
        "several GPUs: every pair has a direct path, NVLink on all pairs or none, no NVLink down",
    ),
    (
        "gpu-idle",
        "no GPU memory in use and no process on the GPUs, as on a fresh delivery",
    ),
    (
        "gpu-throttle",
        "no thermal, power-brake or hardware slowdown; idle temperature and power limit as shipped",
    ),
    ("persistence-mode", "persistence mode on for data-center GPUs"),
    (
        "torch-stack",
        "each installed torch runs with this driver and these GPUs",
    ),
    ("cuda-available", "torch.cuda.is_available() is true, or why not"),
    ("nvcc-torch", "nvcc matches torch's CUDA, for building extensions"),
    (
        "cudnn-shadowing",
        "no system cuDNN shadows the one torch's wheel brings",
    ),
    (
        "container-runtime",
        "Docker has the NVIDIA runtime, so containers see the GPUs",
    ),
    (
        "network-rdma",
        "several GPUs: an RDMA port up, and GPUDirect RDMA (nvidia_peermem) with it",
    ),
    ("disk-free", "the data disk has room for checkpoints"),
    (
        "disk-layout",
        "a data disk apart from the system disk, not on a rotating drive",
    ),
];

/// pass / warn / fail / skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Holds.
    Pass,
    /// Not applicable here (no Python with torch, no Docker...).
    Skip,
    /// Worth fixing; does not stop work.
    Warn,
    /// Stops work.
    Fail,
}

/// Deserializes a check id: the registered `&'static str` equal to it.
fn check_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(d, "doctor check", CHECKS.iter().map(|(c, _)| *c))
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// Stable id (see [`CHECKS`]).
    #[serde(deserialize_with = "check_id")]
    pub id: crate::model::known::Word,
    /// The outcome.
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub reason: String,
    /// The resolver's findings behind it, with their codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

fn check(id: &'static str, verdict: Verdict, reason: impl Into<String>) -> Check {
    debug_assert!(CHECKS.iter().any(|(c, _)| *c == id), "unregistered check {id}");
    Check {
        id,
        verdict,
        reason: reason.into(),
        findings: Vec::new(),
    }
}

/// Options of `doctor`.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// Warn when the data disk has less free space than this, GB.
    pub min_free_gb: f64,
}

/// The host's GPUs as database records, with counts; names the database lacks are
/// returned apart.
pub fn host_gpus(db: &Db, host: &HostReport) -> (Vec<GpuAsk>, Vec<String>) {
    let mut asks: Vec<GpuAsk> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for g in &host.gpus {
        match db.gpu_reported(&g.name, g.memory_total_mib) {
            Ok(rec) => match asks.iter_mut().find(|a| a.gpu.id == rec.id) {
                Some(a) => a.count += 1,
                None => asks.push(GpuAsk {
                    gpu: rec.clone(),
                    count: 1,
                }),
            },
            Err(_) => {
                if !unknown.contains(&g.name) {
                    unknown.push(g.name.clone());
                }
            }
        }
    }
    (asks, unknown)
}

/// Why a probed host cannot run CUDA at all, when that is what its probes found: no
/// driver, or a driver that sees no GPU. Absence found by a probe is a fact, unlike a
/// fact that is merely unknown.
pub fn no_cuda_device(host: &HostReport) -> Option<String> {
    gpu_unusable(host)
}

/// Why no GPU is usable on a host, as a clause (`the NVIDIA kernel module is not loaded`),
/// when its probes found no driver or no GPU; `None` when it has both. The first failure in
/// the chain module, user-space driver, NVML/nvidia-smi, devices is named.
pub fn gpu_unusable(host: &HostReport) -> Option<String> {
    if host.driver.is_some() && !host.gpus.is_empty() {
        return None;
    }
    Some(if mismatch_reported(host) {
        let (user, module) = mismatch_versions(host);
        format!(
            "a driver library/module mismatch (user space {}, kernel module {}): reboot or reload the nvidia kernel modules",
            user.unwrap_or_else(|| "unknown".into()),
            module.unwrap_or_else(|| "unknown".into())
        )
    } else {
        match (&host.gpu_failure, &host.kernel_module) {
            (Some(SmiFailure::NoDriver), _) => "the NVIDIA kernel module is not loaded".to_string(),
            (Some(SmiFailure::NoDevices), _) => "the driver finds no GPU".to_string(),
            (Some(SmiFailure::Other { message }), _) => format!("nvidia-smi failed: {message}"),
            (_, Some(k)) if !host.driver.as_ref().is_some_and(|d| is_user_space(&d.source)) => format!(
                "the driver's user-space libraries are missing (only the kernel module {} is loaded)",
                k.value.version
            ),
            (_, Some(_)) => "the driver lists no GPU".to_string(),
            (_, None) => "this machine has no NVIDIA driver or GPU".to_string(),
        }
    })
}

/// The machine facts of a host as a resolver query (GPUs, driver, glibc, architecture, nvcc, and the
/// absence of any usable GPU when that is what was found).
pub fn machine_query(db: &Db, host: &HostReport) -> Query {
    let (gpus, _) = host_gpus(db, host);
    Query {
        no_cuda_device: no_cuda_device(host),
        gpus,
        driver: host.driver.as_ref().map(|d| d.value.clone()),
        glibc: host
            .glibc
            .as_ref()
            .map(|g| (g.value.clone(), format!("host ({})", g.source))),
        nvcc: host.nvcc.as_ref().map(|n| n.value.clone()),
        arch: host
            .arch
            .as_ref()
            .map(|a| (a.value, format!("host ({})", a.source))),
        ..Query::default()
    }
}

/// The host's GPUs grouped by the name the driver gives them, in the order first seen.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuGroup {
    /// How many.
    pub count: usize,
    /// The name as the driver gives it.
    pub name: String,
    /// The compat-db record it matches: its name and `sm_XY`.
    pub record: Option<(String, String)>,
    /// The memory of the first of them, as reported.
    pub memory_mib: Option<u64>,
}

/// The host's GPUs by name, each with the record it matches.
pub fn gpu_groups(db: &Db, host: &HostReport) -> Vec<GpuGroup> {
    let mut groups: Vec<GpuGroup> = Vec::new();
    for g in &host.gpus {
        match groups.iter_mut().find(|x| x.name == g.name) {
            Some(x) => x.count += 1,
            None => groups.push(GpuGroup {
                count: 1,
                name: g.name.clone(),
                record: db
                    .gpu_reported(&g.name, g.memory_total_mib)
                    .ok()
                    .map(|r| (r.name.clone(), r.compute_capability.sm())),
                memory_mib: g.memory_total_mib,
            }),
        }
    }
    groups
}

/// How a topology links its GPUs: how many, how many pairs, how many of those by NVLink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSummary {
    /// GPUs in the matrix.
    pub gpus: usize,
    /// Pairs of them.
    pub pairs: usize,
    /// Pairs linked by NVLink.
    pub nvlink: usize,
}

/// The pairs of a topology's GPUs, and which are linked by NVLink.
pub fn link_summary(t: &crate::host::Topology) -> LinkSummary {
    let gpus = t.gpus.len();
    let mut s = LinkSummary {
        gpus,
        pairs: 0,
        nvlink: 0,
    };
    for i in 0..gpus {
        for j in i + 1..gpus {
            s.pairs += 1;
            if t.links
                .get(i)
                .and_then(|r| r.get(j))
                .is_some_and(|l| l.is_nvlink())
            {
                s.nvlink += 1;
            }
        }
    }
    s
}

/// The query `check` asks: the project's needs (`project`, from flags and files) on this
/// host. The machine comes from the host unless a flag names it; the host's lack of a GPU
/// or driver stays a fact unless the flags name both. With no Python asked for, only the
/// host's own Pythons are: one specifier cannot say "any of", so the first one found
/// decides.
pub fn check_query(db: &Db, host: &HostReport, mut q: Query) -> Result<Query, String> {
    let machine = machine_query(db, host);
    if q.gpus.is_empty() || q.driver.is_none() {
        q.no_cuda_device = machine.no_cuda_device;
    }
    if q.gpus.is_empty() {
        q.gpus = machine.gpus;
    }
    if q.driver.is_none() {
        q.driver = machine.driver;
    }
    if q.glibc.is_none() {
        q.glibc = machine.glibc;
    }
    if q.arch.is_none() {
        q.arch = machine.arch;
    }
    q.nvcc = machine.nvcc;
    if q.python.is_empty() {
        let first = host
            .pythons
            .iter()
            .filter_map(|p| p.version.as_deref())
            .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
            .next();
        if let Some(v) = first {
            let spec = crate::model::parse_specifiers(&format!("=={v}")).map_err(|e| e.to_string())?;
            q.python.push((spec, "this host's python3".into()));
        }
    }
    Ok(q)
}

fn gb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e9
}

/// The filesystem checkpoints would go to: the largest local filesystem other than `/`
/// when there is one (a separate data disk), else the largest network one, else `/`.
pub fn data_disk(host: &HostReport) -> Option<&crate::host::Mount> {
    let real = |m: &&crate::host::Mount| layout::holds_data(m);
    let network = layout::is_network;
    let root = host.mounts.iter().find(|m| m.mount == "/");
    let others = || {
        host.mounts
            .iter()
            .filter(real)
            .filter(move |m| m.mount != "/" && root.is_none_or(|r| r.device != m.device))
    };
    others()
        .filter(|m| !network(m))
        .max_by_key(|m| m.size_kib)
        .or_else(|| others().max_by_key(|m| m.size_kib))
        .or(root)
}

/// `gpuenv doctor`: every check, in [`CHECKS`] order.
pub fn doctor(db: &Db, host: &HostReport, opts: &DoctorOptions) -> Vec<Check> {
    let (asks, unknown) = host_gpus(db, host);
    let mut out = vec![
        gpus_visible(host),
        driver_module(host),
        gpus_known(host, &asks, &unknown),
        gpu_health(host),
        delivery::pcie_link(host),
        delivery::gpu_interconnect(db, host),
        delivery::gpu_idle(host),
        delivery::gpu_throttle(host),
        delivery::persistence_mode(db, host),
    ];
    out.extend(torch_checks(db, host, &unknown));
    out.push(container_runtime(host));
    out.push(delivery::network_rdma(host));
    out.push(disk_free(host, opts));
    out.push(delivery::disk_layout(host));
    out
}

/// `gpus-visible`.
fn gpus_visible(host: &HostReport) -> Check {
    match host.gpus.len() {
        0 => check("gpus-visible", Verdict::Fail, no_gpu_cause(host)),
        n => check(
            "gpus-visible",
            Verdict::Pass,
            format!(
                "{n} GPU{} visible ({})",
                if n == 1 { "" } else { "s" },
                host.gpus_source.as_deref().unwrap_or("?")
            ),
        ),
    }
}

/// `gpus-known`: `asks` and `unknown` are [`host_gpus`]'s answer.
fn gpus_known(host: &HostReport, asks: &[GpuAsk], unknown: &[String]) -> Check {
    if host.gpus.is_empty() {
        check("gpus-known", Verdict::Skip, "no GPU to look up")
    } else if unknown.is_empty() {
        let names: Vec<String> = asks
            .iter()
            .map(|a| format!("{}x {} ({})", a.count, a.gpu.name, a.gpu.compute_capability.sm()))
            .collect();
        check("gpus-known", Verdict::Pass, names.join(", "))
    } else {
        check(
            "gpus-known",
            Verdict::Warn,
            format!(
                "not in compat-db: {}; their architecture cannot be checked against torch builds",
                unknown.join(", ")
            ),
        )
    }
}

/// `gpu-health`.
fn gpu_health(host: &HostReport) -> Check {
    let mut health = Vec::new();
    let mut worst = Verdict::Pass;
    for g in &host.gpus {
        if g.ecc_uncorrected_volatile.unwrap_or(0) > 0 || g.ecc_uncorrected_aggregate.unwrap_or(0) > 0 {
            worst = Verdict::Fail;
            health.push(format!(
                "GPU {} has uncorrected ECC errors (volatile {}, aggregate {}): ask for a replacement",
                g.index,
                g.ecc_uncorrected_volatile.unwrap_or(0),
                g.ecc_uncorrected_aggregate.unwrap_or(0)
            ));
        }
        if g.mig_enabled == Some(true) {
            worst = worst.max(Verdict::Warn);
            health.push(format!(
                "GPU {} has MIG enabled: CUDA sees MIG instances, not the whole GPU",
                g.index
            ));
        }
    }
    if host.gpus.is_empty() {
        check("gpu-health", Verdict::Skip, "no GPU")
    } else if health.is_empty() {
        check("gpu-health", Verdict::Pass, "no uncorrected ECC errors, MIG off")
    } else {
        check("gpu-health", worst, health.join("; "))
    }
}

/// The four checks about an installed torch (`torch-stack`, `cuda-available`, `nvcc-torch`,
/// `cudnn-shadowing`), for each Python that has one; skipped together, with the same
/// reason, when none has.
fn torch_checks(db: &Db, host: &HostReport, unknown: &[String]) -> Vec<Check> {
    let with_torch: Vec<_> = host.pythons.iter().filter(|p| p.torch.is_some()).collect();
    if with_torch.is_empty() {
        let why = if host.pythons.is_empty() {
            "no Python interpreter found".to_string()
        } else {
            format!(
                "torch is not installed in {}",
                host.pythons
                    .iter()
                    .map(|p| p.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return vec![
            check("torch-stack", Verdict::Skip, why.clone()),
            check("cuda-available", Verdict::Skip, why.clone()),
            check("nvcc-torch", Verdict::Skip, why.clone()),
            check("cudnn-shadowing", Verdict::Skip, why),
        ];
    }
    let machine = machine_query(db, host);
    let mut out = Vec::new();
    for p in &with_torch {
        let t = p.torch.as_ref().expect("filtered");
        out.push(torch_stack(db, host, &machine, unknown, p, t));
        out.push(cuda_available(host, p, t));
        out.push(nvcc_torch(host, t));
        out.push(cudnn_shadowing(host, p, t));
    }
    out
}

/// `torch-stack` for one Python's torch: the resolver's judgement of it on this machine.
fn torch_stack(
    db: &Db,
    host: &HostReport,
    machine: &Query,
    unknown: &[String],
    p: &crate::host::PythonEnv,
    t: &crate::host::TorchProbe,
) -> Check {
    let py = p
        .version
        .as_deref()
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .unwrap_or_default();
    let installed = Installed {
        version: t.version.clone(),
        cuda: t.cuda.clone(),
        arch_list: t.arch_list.clone(),
        python: py.clone(),
    };
    let what = format!(
        "torch {} (CUDA {}) in {} (Python {py})",
        t.version,
        t.cuda.as_deref().unwrap_or("none: a CPU build"),
        p.path
    );
    match judge_installed(db, machine, &installed) {
        // A CUDA build with no usable GPU runs nowhere, whatever the resolver makes
        // of the driver alone: say why no GPU is usable.
        judged if t.cuda.is_some() && host.gpus.is_empty() => {
            let mut c = check(
                "torch-stack",
                Verdict::Fail,
                format!("{what}: cannot run on a GPU here: {}", no_gpu_because(host)),
            );
            if let Ok(stack) = judged {
                c.findings = stack
                    .findings
                    .iter()
                    .filter(|f| f.severity > crate::resolve::Severity::Info)
                    .cloned()
                    .collect();
            }
            c
        }
        Ok(stack) => {
            let mut verdict = match stack.status {
                Status::Compatible => Verdict::Pass,
                Status::Conditional => Verdict::Warn,
                Status::Incompatible => Verdict::Fail,
            };
            let mut reason = format!("{what}: {}", stack.status);
            // A pass needs every fact it rests on.
            if t.cuda.is_some() && verdict == Verdict::Pass {
                if !unknown.is_empty() {
                    verdict = Verdict::Warn;
                    reason.push_str(&format!(
                        "; not checked against {}: not in compat-db, so its architecture is unknown",
                        unknown.join(", ")
                    ));
                }
                if host.driver.is_none() {
                    verdict = Verdict::Warn;
                    reason.push_str(
                        "; the driver's version is unknown, so torch's CUDA was not checked against it",
                    );
                }
            }
            let mut c = check("torch-stack", verdict, reason);
            c.findings = stack
                .findings
                .iter()
                .filter(|f| {
                    // What the driver and the kernels say, whatever their weight.
                    f.severity > crate::resolve::Severity::Info
                        || matches!(
                            f.code,
                            Code::DriverNative
                                | Code::DriverMinorVersionCompat
                                | Code::DriverForwardCompat
                                | Code::DriverTooOld
                                | Code::DriverUnsupportedGpu
                                | Code::DriverBranchUnknown
                                | Code::DriverEndOfLife
                                | Code::GpuSass
                        )
                })
                .cloned()
                .collect();
            c
        }
        Err(e) => check(
            "torch-stack",
            Verdict::Warn,
            format!("torch {} in {}: cannot be judged: {e}", t.version, p.path),
        ),
    }
}

/// `disk-free`: room on the [`data_disk`].
fn disk_free(host: &HostReport, opts: &DoctorOptions) -> Check {
    match data_disk(host) {
        None => check("disk-free", Verdict::Skip, "no filesystem information"),
        Some(m) => {
            let free = gb(m.avail_kib);
            let separate = m.mount != "/";
            let text = format!(
                "{} ({}{}) has {:.0} GB free of {:.0} GB",
                m.mount,
                m.device,
                if separate {
                    ", a data disk apart from the system disk"
                } else {
                    ", the system disk: no separate data disk"
                },
                free,
                gb(m.size_kib)
            );
            if free < opts.min_free_gb {
                check(
                    "disk-free",
                    Verdict::Warn,
                    format!(
                        "{text}: below the {:.0} GB checkpoints need (--min-free-gb)",
                        opts.min_free_gb
                    ),
                )
            } else {
                check("disk-free", Verdict::Pass, text)
            }
        }
    }
}

/// What to do about a driver whose user space and kernel module differ.
const RELOAD: &str = "reboot, or unload and reload the nvidia kernel modules, so that the loaded module matches the installed libraries";

/// Sources of a driver version that are the user-space driver itself (the kernel module's
/// `/proc/driver/nvidia/version` and overrides are not).
fn is_user_space(source: &str) -> bool {
    source == "nvml" || source.starts_with("nvidia-smi")
}

/// Every version of the user-space driver the probes read, each with where: NVML or
/// nvidia-smi when they answered, the NVML library version nvidia-smi prints beside a
/// mismatch, and the driver libraries' file names.
fn user_space_versions(host: &HostReport) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(d) = host.driver.as_ref().filter(|d| is_user_space(&d.source)) {
        out.push((d.value.to_string(), d.source.clone()));
    }
    if let Some(SmiFailure::DriverLibraryMismatch {
        nvml_version: Some(v),
    }) = &host.gpu_failure
    {
        out.push((v.clone(), "the NVML library version nvidia-smi prints".into()));
    }
    for lib in &host.driver_libraries {
        if let Some(v) = &lib.version {
            out.push((v.clone(), lib.path.clone()));
        }
    }
    out
}

/// Whether NVML or nvidia-smi refused to start over a driver/library version mismatch.
fn mismatch_reported(host: &HostReport) -> bool {
    matches!(host.gpu_failure, Some(SmiFailure::DriverLibraryMismatch { .. }))
        || host
            .issues
            .iter()
            .any(|i| i.probe == "nvml" && i.message.to_ascii_lowercase().contains("version mismatch"))
}

/// Whether a user-space version agrees with the module's, as far as both go: nvidia-smi
/// prints the NVML library as `570.124` beside a `570.124.06` module.
fn same_driver(user: &str, module: &str) -> bool {
    let parts = |v: &str| v.split('.').map(|p| p.parse::<u64>().ok()).collect::<Vec<_>>();
    let (u, m) = (parts(user), parts(module));
    if u.iter().chain(&m).any(Option::is_none) {
        return user == module;
    }
    u.iter().zip(&m).all(|(a, b)| a == b)
}

/// Why no GPU is usable on this host: the first failure in the chain module, user-space
/// driver, NVML/nvidia-smi, devices. `gpus-visible` says it in full; the checks that fail
/// for want of a GPU say it in a clause ([`no_gpu_because`]).
fn no_gpu_cause(host: &HostReport) -> String {
    if mismatch_reported(host) {
        let who = if matches!(host.gpu_failure, Some(SmiFailure::DriverLibraryMismatch { .. })) {
            "nvidia-smi: Failed to initialize NVML"
        } else {
            "NVML"
        };
        let (shown, module) = mismatch_versions(host);
        return format!(
            "{who}: Driver/library version mismatch: the user-space driver{} differs from the loaded kernel module{}; {RELOAD}",
            shown.map(|v| format!(" ({v})")).unwrap_or_default(),
            module.map(|m| format!(" ({m})")).unwrap_or_default()
        );
    }
    match &host.gpu_failure {
        Some(SmiFailure::NoDriver) => "nvidia-smi cannot communicate with the NVIDIA driver: the kernel module is not loaded (install the driver, or reboot after installing it)".to_string(),
        Some(SmiFailure::NoDevices) => "the driver is loaded but finds no GPU (a failed adapter initialisation, or GPUs not passed through to this machine)".to_string(),
        Some(SmiFailure::Other { message }) => format!("nvidia-smi failed: {message}"),
        Some(SmiFailure::NotFound | SmiFailure::DriverLibraryMismatch { .. }) | None => match &host.kernel_module {
            Some(k) => format!(
                "the NVIDIA kernel module {} is loaded, but neither NVML nor nvidia-smi answers: install the driver's user-space libraries and utilities",
                k.value.version
            ),
            None => "no NVIDIA GPU: neither NVML nor nvidia-smi is available on this machine".to_string(),
        },
    }
}

/// [`gpu_unusable`] in a sentence, for the checks that fail because no GPU is usable.
fn no_gpu_because(host: &HostReport) -> String {
    let why = gpu_unusable(host).unwrap_or_else(|| "this machine has no NVIDIA driver or GPU".to_string());
    format!("no GPU is usable: {why} (see gpus-visible)")
}

/// On a mismatch: the user-space version that differs from the module (or the first one
/// read), and the module's.
fn mismatch_versions(host: &HostReport) -> (Option<String>, Option<String>) {
    let module = host.kernel_module.as_ref().map(|k| k.value.version.to_string());
    let user = user_space_versions(host);
    let shown = user
        .iter()
        .find(|(v, _)| module.as_deref().is_none_or(|m| !same_driver(v, m)))
        .or(user.first())
        .map(|(v, _)| v.clone());
    (shown, module)
}

/// The user-space driver against the loaded kernel module. It passes only when a
/// user-space version was read and every one read agrees with the module; a mismatch NVML
/// reported fails even when no user-space version could be read.
fn driver_module(host: &HostReport) -> Check {
    let user = user_space_versions(host);
    let listed = |vs: &[&(String, String)]| {
        vs.iter()
            .map(|(v, src)| format!("{v} ({src})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mismatch = mismatch_reported(host);
    let Some(k) = &host.kernel_module else {
        return if mismatch {
            check(
                "driver-module",
                Verdict::Fail,
                format!(
                    "NVML reports a driver/library version mismatch, and /proc/driver/nvidia/version cannot be read to name the loaded kernel module; {RELOAD}"
                ),
            )
        } else if user.is_empty() {
            check("driver-module", Verdict::Skip, "no NVIDIA driver found")
        } else {
            check(
                "driver-module",
                Verdict::Skip,
                format!(
                    "user-space driver {}; no /proc/driver/nvidia/version to compare with",
                    listed(&user.iter().collect::<Vec<_>>())
                ),
            )
        };
    };
    let module = k.value.version.to_string();
    let kind = if k.value.open { "open" } else { "proprietary" };
    let differing: Vec<&(String, String)> = user.iter().filter(|(v, _)| !same_driver(v, &module)).collect();
    if !differing.is_empty() {
        return check(
            "driver-module",
            Verdict::Fail,
            format!(
                "the user-space driver {} differs from the loaded {kind} kernel module {module}: {RELOAD}",
                listed(&differing)
            ),
        );
    }
    if mismatch {
        return check(
            "driver-module",
            Verdict::Fail,
            format!(
                "NVML reports a driver/library version mismatch with the loaded {kind} kernel module {module}{}: {RELOAD}",
                if user.is_empty() {
                    ", and the user-space driver's version could not be read".to_string()
                } else {
                    format!(
                        " (user space read as {})",
                        listed(&user.iter().collect::<Vec<_>>())
                    )
                }
            ),
        );
    }
    if !user.is_empty() {
        return check(
            "driver-module",
            Verdict::Pass,
            format!(
                "the user-space driver {} matches the loaded {kind} kernel module {module}",
                listed(&user.iter().collect::<Vec<_>>())
            ),
        );
    }
    let why = match host.driver.as_ref().filter(|d| d.source.starts_with("GPUENV_")) {
        Some(d) => format!(
            "the driver {} comes from {} (an override), and no user-space driver was read",
            d.value, d.source
        ),
        None => "neither NVML nor nvidia-smi answered and no driver library could be resolved".to_string(),
    };
    check(
        "driver-module",
        Verdict::Skip,
        format!(
            "only the loaded {kind} kernel module {module} is known: {why}, so the user-space driver cannot be compared with it"
        ),
    )
}

/// Whether Docker hands the GPUs to containers: through the registered `nvidia` runtime,
/// or through CDI (the Engine has CDI enabled and a spec of kind `nvidia.com/gpu` is in
/// its spec directories). With the toolkit installed (`nvidia-ctk` found), the advice is
/// what is missing, not to install it.
fn container_runtime(host: &HostReport) -> Check {
    let info = match &host.docker {
        None => return check("container-runtime", Verdict::Skip, "the Docker probe did not run"),
        Some(DockerProbe::Error { error }) => {
            return check(
                "container-runtime",
                Verdict::Skip,
                format!("no Docker Engine: {error}"),
            );
        }
        Some(DockerProbe::Ok { engine }) => engine,
    };
    let docker = format!("Docker {}", info.server_version.as_deref().unwrap_or("?"));
    let runtime = info.runtimes.iter().any(|r| r.contains("nvidia"));
    let cdi_enabled = !info.cdi_spec_dirs.is_empty();
    let cdi_spec = host
        .cdi_specs
        .iter()
        .find(|s| s.kind.as_deref() == Some("nvidia.com/gpu"))
        .map(|s| s.path.clone())
        .or_else(|| {
            info.cdi_devices
                .iter()
                .any(|d| d.starts_with("nvidia.com/gpu="))
                .then(|| "the Engine's discovered devices".to_string())
        });
    let cdi = cdi_enabled.then_some(cdi_spec).flatten();
    let ctk = host
        .nvidia_ctk
        .as_deref()
        .map(|v| format!("; nvidia-ctk {v}"))
        .unwrap_or_default();
    // A machine with no trace of an NVIDIA driver has nothing for a runtime to hand over.
    let nvidia_here = !host.gpus.is_empty()
        || host.kernel_module.is_some()
        || mismatch_reported(host)
        || matches!(
            host.gpu_failure,
            Some(SmiFailure::NoDriver | SmiFailure::NoDevices | SmiFailure::Other { .. })
        );
    if runtime || cdi.is_some() {
        let how = match (runtime, &cdi) {
            (true, _) => format!(
                "has the NVIDIA runtime{}",
                if info.default_runtime.as_deref() == Some("nvidia") {
                    " (the default)"
                } else {
                    " (use `--gpus all` or `--runtime nvidia`)"
                }
            ),
            (false, Some(spec)) => {
                format!("has CDI devices nvidia.com/gpu ({spec}): use `--device nvidia.com/gpu=all`")
            }
            (false, None) => unreachable!("one of the two holds"),
        };
        return if host.gpus.is_empty() && nvidia_here {
            check(
                "container-runtime",
                Verdict::Fail,
                format!(
                    "{docker} {how}, but containers get no GPU: {}",
                    no_gpu_because(host)
                ),
            )
        } else {
            check("container-runtime", Verdict::Pass, format!("{docker} {how}{ctk}"))
        };
    }
    let verdict = if nvidia_here { Verdict::Warn } else { Verdict::Skip };
    let runtimes = info.runtimes.join(", ");
    let reason = match &host.nvidia_ctk {
        Some(v) => {
            let cdi_fix = if cdi_enabled {
                format!(
                    "; or, as the Engine reads CDI specs from {} and none there is for nvidia.com/gpu, generate one with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` and run containers with `--device nvidia.com/gpu=all`",
                    info.cdi_spec_dirs.join(", ")
                )
            } else {
                String::new()
            };
            format!(
                "the NVIDIA Container Toolkit is installed (nvidia-ctk {v}), but the `nvidia` runtime is not registered with {docker} (runtimes: {runtimes}): containers will not see the GPUs; register it with `sudo nvidia-ctk runtime configure --runtime=docker`, then restart dockerd (`sudo systemctl restart docker`){cdi_fix}"
            )
        }
        None => format!(
            "{docker} has no NVIDIA runtime (runtimes: {runtimes}) and nvidia-ctk is not installed: containers will not see the GPUs; install nvidia-container-toolkit, then run `sudo nvidia-ctk runtime configure --runtime=docker` and restart dockerd"
        ),
    };
    check("container-runtime", verdict, reason)
}

fn cuda_available(host: &HostReport, p: &crate::host::PythonEnv, t: &crate::host::TorchProbe) -> Check {
    if t.cuda_available {
        return check(
            "cuda-available",
            Verdict::Pass,
            format!("torch in {} sees {} CUDA device(s)", p.path, t.devices.len()),
        );
    }
    let said = t.cuda_error.clone().or_else(|| t.cuda_warnings.first().cloned());
    let why = if t.cuda.is_none() {
        format!(
            "torch {} is a CPU-only build: reinstall it from a CUDA index (gpuenv query shows the line)",
            t.version
        )
    } else if host.gpus.is_empty() {
        // torch's own words (often "Error 804" or "no CUDA GPUs are available") describe the
        // symptom; the probes know the cause.
        format!(
            "{}{}",
            no_gpu_because(host),
            said.as_deref()
                .map(|s| format!(" (torch says: {s})"))
                .unwrap_or_default()
        )
    } else if let Some(s) = &said {
        if s.contains("too old") {
            format!(
                "the NVIDIA driver is too old for torch's CUDA {}: {s}",
                t.cuda.as_deref().unwrap_or("?")
            )
        } else {
            s.clone()
        }
    } else {
        "torch found no usable GPU (is CUDA_VISIBLE_DEVICES empty?)".to_string()
    };
    check(
        "cuda-available",
        Verdict::Fail,
        format!("torch.cuda.is_available() is False in {}: {why}", p.path),
    )
}

fn nvcc_torch(host: &HostReport, t: &crate::host::TorchProbe) -> Check {
    let (Some(nvcc), Some(tc)) = (&host.nvcc, &t.cuda) else {
        return check(
            "nvcc-torch",
            Verdict::Skip,
            if host.nvcc.is_none() {
                "no nvcc on PATH: CUDA extensions cannot be built here (a devel image or toolkit has it)"
            } else {
                "torch is a CPU build"
            },
        );
    };
    let Ok(tcv) = tc.parse::<crate::model::CudaVersion>() else {
        return check(
            "nvcc-torch",
            Verdict::Skip,
            format!("torch's CUDA `{tc}` is not a version"),
        );
    };
    if nvcc.value.major() != tcv.major() {
        check(
            "nvcc-torch",
            Verdict::Fail,
            format!(
                "nvcc {} and torch's CUDA {tc} differ in the major version: CUDA extensions will not build",
                nvcc.value
            ),
        )
    } else if nvcc.value.minor() != tcv.minor() {
        check(
            "nvcc-torch",
            Verdict::Warn,
            format!(
                "nvcc {} and torch's CUDA {tc} differ in the minor version: torch warns when building extensions; usually fine",
                nvcc.value
            ),
        )
    } else {
        check(
            "nvcc-torch",
            Verdict::Pass,
            format!("nvcc {} matches torch's CUDA {tc}", nvcc.value),
        )
    }
}

/// cuDNN `90100` (torch's integer) as `9.1.0`.
fn cudnn_int(v: i64) -> String {
    if v >= 10000 {
        format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
    }
}

fn cudnn_shadowing(host: &HostReport, p: &crate::host::PythonEnv, t: &crate::host::TorchProbe) -> Check {
    let wheel = p
        .packages
        .iter()
        .find(|(k, _)| k.starts_with("nvidia-cudnn-cu"))
        .map(|(_, v)| v.clone());
    let loaded = t.cudnn.map(cudnn_int);
    let system: Vec<String> = host
        .cudnn
        .iter()
        .map(|c| format!("{} ({})", c.version.as_deref().unwrap_or("?"), c.path))
        .collect();
    match (&wheel, &loaded) {
        (Some(w), Some(l)) => {
            let wheel3: String = w.split('.').take(3).collect::<Vec<_>>().join(".");
            if wheel3 != *l {
                check(
                    "cudnn-shadowing",
                    Verdict::Fail,
                    format!(
                        "torch loads cuDNN {l} but its wheel pins nvidia-cudnn {w}: another cuDNN is found first (system: {}); remove it from LD_LIBRARY_PATH, or torch fails with \"runtime cuDNN older than compile time\"",
                        if system.is_empty() {
                            "none listed".to_string()
                        } else {
                            system.join(", ")
                        }
                    ),
                )
            } else {
                check(
                    "cudnn-shadowing",
                    Verdict::Pass,
                    format!("torch loads the cuDNN {l} its wheel brings"),
                )
            }
        }
        (None, Some(l)) if !system.is_empty() => check(
            "cudnn-shadowing",
            Verdict::Pass,
            format!(
                "torch bundles or loads cuDNN {l}; system cuDNN: {}",
                system.join(", ")
            ),
        ),
        _ if t.cuda.is_none() => check(
            "cudnn-shadowing",
            Verdict::Skip,
            "torch is a CPU build: it loads no cuDNN",
        ),
        _ if !t.cuda_available => check(
            "cudnn-shadowing",
            Verdict::Skip,
            "torch loaded no cuDNN: CUDA did not initialise (see cuda-available)",
        ),
        (_, Some(l)) => check(
            "cudnn-shadowing",
            Verdict::Skip,
            format!(
                "torch loads cuDNN {l}; no nvidia-cudnn wheel or system cuDNN was found to compare it with"
            ),
        ),
        (_, None) => check(
            "cudnn-shadowing",
            Verdict::Skip,
            "torch reports no cuDNN version although CUDA initialised",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::probe::ProbeIssue;
    use crate::host::{KernelModule, LibFound, Sourced};

    fn module(v: &str) -> Option<Sourced<KernelModule>> {
        Some(Sourced::new(
            KernelModule {
                version: v.parse().unwrap(),
                open: true,
                arch: None,
            },
            "/proc/driver/nvidia/version",
        ))
    }

    #[test]
    fn versions_agree_as_far_as_both_go() {
        assert!(same_driver("570.124", "570.124.06"));
        assert!(same_driver("550.90.07", "550.90.07"));
        assert!(!same_driver("550.127", "550.90.07"));
        assert!(!same_driver("570.124.04", "570.124.06"));
        assert!(!same_driver("35.3.1", "535.104.05"));
        assert!(!same_driver("550.x", "550.90.07"));
    }

    #[test]
    fn driver_module_passes_only_on_a_user_space_version_read() {
        let mut host = HostReport {
            kernel_module: module("565.57.01"),
            ..HostReport::default()
        };
        // The fallback from the module to itself is no comparison.
        host.driver = Some(Sourced::new(
            "565.57.01".parse().unwrap(),
            "/proc/driver/nvidia/version",
        ));
        assert_eq!(driver_module(&host).verdict, Verdict::Skip);
        host.driver = Some(Sourced::new("565.57.01".parse().unwrap(), "nvml"));
        let c = driver_module(&host);
        assert_eq!(c.verdict, Verdict::Pass);
        assert!(
            c.reason.contains("the loaded open kernel module 565.57.01"),
            "{}",
            c.reason
        );
        // NVML's own mismatch error fails it even beside a version that agrees.
        host.issues.push(ProbeIssue {
            probe: "nvml".into(),
            message: "Driver/library version mismatch".into(),
        });
        assert_eq!(driver_module(&host).verdict, Verdict::Fail);
        host.issues.clear();
        // A library of another version fails it.
        host.driver_libraries.push(LibFound {
            version: Some("565.77".into()),
            path: "/usr/lib64/libcuda.so.565.77".into(),
            source: "readlink -f /usr/lib64/libcuda.so.1".into(),
        });
        let c = driver_module(&host);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(
            c.reason
                .starts_with("the user-space driver 565.77 (/usr/lib64/libcuda.so.565.77) differs"),
            "{}",
            c.reason
        );
        // No module to compare with.
        host.kernel_module = None;
        assert_eq!(driver_module(&host).verdict, Verdict::Skip);
        host.gpu_failure = Some(SmiFailure::DriverLibraryMismatch { nvml_version: None });
        assert_eq!(driver_module(&host).verdict, Verdict::Fail);
    }

    #[test]
    fn the_cause_follows_the_chain() {
        let mut host = HostReport::default();
        assert_eq!(
            no_gpu_because(&host),
            "no GPU is usable: this machine has no NVIDIA driver or GPU (see gpus-visible)"
        );
        host.gpu_failure = Some(SmiFailure::NoDriver);
        assert!(no_gpu_because(&host).contains("the NVIDIA kernel module is not loaded"));
        host.gpu_failure = Some(SmiFailure::NoDevices);
        assert!(no_gpu_because(&host).contains("the driver finds no GPU"));
        host.kernel_module = module("550.90.07");
        host.gpu_failure = Some(SmiFailure::DriverLibraryMismatch {
            nvml_version: Some("550.127".into()),
        });
        assert!(
            no_gpu_because(&host).contains("(user space 550.127, kernel module 550.90.07)"),
            "{}",
            no_gpu_because(&host)
        );
    }
}
