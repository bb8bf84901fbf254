//! Judging a probed host: `doctor`'s checks, the machine facts `check` feeds the resolver,
//! and acceptance against what was ordered.
//!
//! Owns: the doctor check list (stable ids in [`CHECKS`]), turning host facts into a
//! resolver query, and the acceptance items. Must not: probe (facts arrive as a
//! [`HostReport`]), print, or restate a compatibility rule (those are the resolver's: its
//! findings are passed through with their codes).

use serde::Serialize;

use crate::db::Db;
use crate::host::{HostReport, SmiFailure};
use crate::model::{Version, VersionSpecifiers};
use crate::resolve::{Finding, GpuAsk, Installed, Query, Status, judge_installed};

/// Every doctor check id: part of the JSON contract.
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
    (
        "gpu-health",
        "no uncorrected ECC errors, full PCIe width, MIG as expected",
    ),
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
    ("disk-free", "the data disk has room for checkpoints"),
];

/// pass / warn / fail / skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable id (see [`CHECKS`]).
    pub id: &'static str,
    /// The outcome.
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub reason: String,
    /// The resolver's findings behind it, with their codes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
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
        match db.gpu(&g.name) {
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
    let failure = match &host.gpu_failure {
        Some(SmiFailure::DriverLibraryMismatch { .. }) => {
            Some("the NVIDIA driver's library and its kernel module differ (reboot after the driver upgrade)")
        }
        Some(SmiFailure::NoDriver) => Some("no NVIDIA kernel module is loaded"),
        Some(SmiFailure::NoDevices) => Some("the driver finds no GPU"),
        _ => None,
    };
    match (host.driver.is_some(), host.gpus.is_empty()) {
        (false, _) => Some(match failure {
            Some(f) => format!("this host has no working NVIDIA driver: {f}"),
            None => "no NVIDIA driver was found on this host".to_string(),
        }),
        (true, true) => Some(match failure {
            Some(f) => format!("no GPU is usable on this host: {f}"),
            None => "no NVIDIA GPU is visible on this host".to_string(),
        }),
        (true, false) => None,
    }
}

/// The machine facts of a host as a resolver query (GPUs, driver, glibc, nvcc, and the
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
        ..Query::default()
    }
}

fn gib(kib: u64) -> f64 {
    kib as f64 / (1024.0 * 1024.0)
}

fn gb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e9
}

/// The filesystem checkpoints would go to: the largest local filesystem other than `/`
/// when there is one (a separate data disk), else the largest network one, else `/`.
pub fn data_disk(host: &HostReport) -> Option<&crate::host::Mount> {
    let real = |m: &&crate::host::Mount| {
        !matches!(
            m.fstype.as_str(),
            "tmpfs" | "devtmpfs" | "overlay" | "squashfs" | "proc" | "sysfs" | "efivarfs" | "vfat"
        ) && !m.mount.starts_with("/boot")
            && !m.mount.starts_with("/snap")
    };
    let network = |m: &crate::host::Mount| {
        m.fstype.starts_with("nfs")
            || m.fstype.starts_with("fuse")
            || matches!(
                m.fstype.as_str(),
                "cifs" | "smb3" | "ceph" | "lustre" | "gpfs" | "9p"
            )
    };
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
    let mut out = Vec::new();
    let machine = machine_query(db, host);

    // GPUs visible.
    out.push(match (&host.gpu_failure, host.gpus.len()) {
        (_, n) if n > 0 => check(
            "gpus-visible",
            Verdict::Pass,
            format!("{n} GPU{} visible ({})", if n == 1 { "" } else { "s" }, host.gpus_source.as_deref().unwrap_or("?")),
        ),
        (Some(SmiFailure::DriverLibraryMismatch { nvml_version }), _) => check(
            "gpus-visible",
            Verdict::Fail,
            format!(
                "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch: the user-space driver{} differs from the loaded kernel module{}; reboot (or unload and reload the nvidia modules) after a driver upgrade",
                nvml_version.as_deref().map(|v| format!(" ({v})")).unwrap_or_default(),
                host.kernel_module.as_ref().map(|k| format!(" ({})", k.value.version)).unwrap_or_default()
            ),
        ),
        (Some(SmiFailure::NoDriver), _) => check("gpus-visible", Verdict::Fail, "nvidia-smi cannot communicate with the NVIDIA driver: the kernel module is not loaded (install the driver, or reboot after installing it)"),
        (Some(SmiFailure::NoDevices), _) => check("gpus-visible", Verdict::Fail, "the driver is loaded but finds no GPU (a failed adapter initialisation, or GPUs not passed through to this machine)"),
        (Some(SmiFailure::Other { message }), _) => check("gpus-visible", Verdict::Fail, format!("nvidia-smi failed: {message}")),
        (Some(SmiFailure::NotFound) | None, _) => match &host.kernel_module {
            Some(k) => check(
                "gpus-visible",
                Verdict::Fail,
                format!("the NVIDIA kernel module {} is loaded, but neither NVML nor nvidia-smi answers: install the driver's user-space libraries and utilities", k.value.version),
            ),
            None => check("gpus-visible", Verdict::Fail, "no NVIDIA GPU: neither NVML nor nvidia-smi is available on this machine"),
        },
    });

    // User space vs kernel module.
    match (&host.driver, &host.kernel_module) {
        (Some(d), Some(k)) if d.source != "/proc/driver/nvidia/version" && !d.source.starts_with("GPUENV_") && d.value != k.value.version => out.push(check(
            "driver-module",
            Verdict::Fail,
            format!("user-space driver {} ({}) differs from the loaded kernel module {}: reboot after the driver upgrade", d.value, d.source, k.value.version),
        )),
        (Some(d), Some(k)) => out.push(check(
            "driver-module",
            Verdict::Pass,
            format!("driver {} with the {} kernel module", d.value, if k.value.open { "open" } else { "proprietary" }),
        )),
        (Some(d), None) => out.push(check("driver-module", Verdict::Skip, format!("driver {} ({}); no /proc/driver/nvidia/version to compare with", d.value, d.source))),
        (None, _) => out.push(check("driver-module", Verdict::Skip, "no NVIDIA driver found")),
    }

    // GPUs in the database.
    let (asks, unknown) = host_gpus(db, host);
    if host.gpus.is_empty() {
        out.push(check("gpus-known", Verdict::Skip, "no GPU to look up"));
    } else if unknown.is_empty() {
        let names: Vec<String> = asks
            .iter()
            .map(|a| format!("{}x {} ({})", a.count, a.gpu.name, a.gpu.compute_capability.sm()))
            .collect();
        out.push(check("gpus-known", Verdict::Pass, names.join(", ")));
    } else {
        out.push(check(
            "gpus-known",
            Verdict::Warn,
            format!(
                "not in compat-db: {}; their architecture cannot be checked against torch builds",
                unknown.join(", ")
            ),
        ));
    }

    // GPU health.
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
        if let (Some(cur), Some(max)) = (g.pcie_width_current, g.pcie_width_max) {
            if cur < max {
                worst = worst.max(Verdict::Warn);
                health.push(format!(
                    "GPU {} runs its PCIe link at x{cur} of x{max}: host-device copies are slower",
                    g.index
                ));
            }
        }
        if g.mig_enabled == Some(true) {
            worst = worst.max(Verdict::Warn);
            health.push(format!(
                "GPU {} has MIG enabled: CUDA sees MIG instances, not the whole GPU",
                g.index
            ));
        }
    }
    out.push(if host.gpus.is_empty() {
        check("gpu-health", Verdict::Skip, "no GPU")
    } else if health.is_empty() {
        check(
            "gpu-health",
            Verdict::Pass,
            "no uncorrected ECC errors, PCIe links at full width, MIG off",
        )
    } else {
        check("gpu-health", worst, health.join("; "))
    });

    // Installed torch, per Python.
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
        out.push(check("torch-stack", Verdict::Skip, why.clone()));
        out.push(check("cuda-available", Verdict::Skip, why.clone()));
        out.push(check("nvcc-torch", Verdict::Skip, why.clone()));
        out.push(check("cudnn-shadowing", Verdict::Skip, why));
    } else {
        for p in &with_torch {
            let t = p.torch.as_ref().expect("filtered");
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
            match judge_installed(db, &machine, &installed) {
                Ok(stack) => {
                    let verdict = match stack.status {
                        Status::Compatible => Verdict::Pass,
                        Status::Conditional => Verdict::Warn,
                        Status::Incompatible => Verdict::Fail,
                    };
                    let mut c = check(
                        "torch-stack",
                        verdict,
                        format!(
                            "torch {} (CUDA {}) in {} (Python {py}): {}",
                            t.version,
                            t.cuda.as_deref().unwrap_or("none: a CPU build"),
                            p.path,
                            stack.status
                        ),
                    );
                    c.findings = stack
                        .findings
                        .iter()
                        .filter(|f| {
                            f.severity > crate::resolve::Severity::Info
                                || f.code.starts_with("driver-")
                                || f.code == "gpu-sass"
                        })
                        .cloned()
                        .collect();
                    out.push(c);
                }
                Err(e) => out.push(check(
                    "torch-stack",
                    Verdict::Warn,
                    format!("torch {} in {}: cannot be judged: {e}", t.version, p.path),
                )),
            }
            out.push(cuda_available(host, p, t));
            out.push(nvcc_torch(host, t));
            out.push(cudnn_shadowing(host, p, t));
        }
    }

    // Containers.
    out.push(match &host.docker {
        None => check("container-runtime", Verdict::Skip, "the Docker probe did not run"),
        Some(Err(e)) => check("container-runtime", Verdict::Skip, format!("no Docker Engine: {e}")),
        Some(Ok(info)) => {
            let nvidia = info.runtimes.iter().any(|r| r.contains("nvidia"));
            let cdi = !info.cdi_spec_dirs.is_empty() && host.nvidia_ctk.is_some();
            let default = info.default_runtime.as_deref() == Some("nvidia");
            if nvidia || cdi {
                check(
                    "container-runtime",
                    Verdict::Pass,
                    format!(
                        "Docker {} has the NVIDIA runtime{}{}",
                        info.server_version.as_deref().unwrap_or("?"),
                        if default { " (the default)" } else { " (use `--gpus all` or `--runtime nvidia`)" },
                        host.nvidia_ctk.as_deref().map(|v| format!("; nvidia-ctk {v}")).unwrap_or_default()
                    ),
                )
            } else {
                check(
                    "container-runtime",
                    if host.gpus.is_empty() { Verdict::Skip } else { Verdict::Warn },
                    format!(
                        "Docker {} has no NVIDIA runtime (runtimes: {}): containers will not see the GPUs; install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`",
                        info.server_version.as_deref().unwrap_or("?"),
                        info.runtimes.join(", ")
                    ),
                )
            }
        }
    });

    // Disk.
    out.push(match data_disk(host) {
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
    });
    out
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
        "no NVIDIA GPU is visible to this machine".to_string()
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
        _ => check(
            "cudnn-shadowing",
            Verdict::Skip,
            "cuDNN is not loaded by torch here (a CPU build, or CUDA did not initialise)",
        ),
    }
}

/// What was ordered, to check the delivered host against.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// GPU model (name or alias).
    pub gpu: Option<String>,
    /// Number of GPUs.
    pub gpus: Option<u32>,
    /// Memory per GPU, GB as sold (80 for an 80 GB H100).
    pub gpu_memory: Option<f64>,
    /// Driver version specifier (`>=535`).
    pub driver: Option<String>,
    /// Logical CPUs.
    pub cpus: Option<u32>,
    /// Memory, GiB.
    pub memory: Option<f64>,
    /// Disk capacity, GB, over all real filesystems.
    pub disk: Option<f64>,
}

impl Expect {
    /// Whether anything is expected.
    pub fn is_empty(&self) -> bool {
        *self == Expect::default()
    }
}

/// One acceptance item.
#[derive(Debug, Clone, Serialize)]
pub struct Acceptance {
    /// `gpu`, `gpus`, `gpu_memory`, `driver`, `cpus`, `memory`, `disk`.
    pub item: &'static str,
    /// What was ordered.
    pub expected: String,
    /// What the host has.
    pub found: String,
    /// Whether it matches.
    pub pass: bool,
}

/// Checks the host against the order. A GPU's memory matches when it is at least 95% of
/// the size sold (the driver reserves some: an 80 GB H100 reports 79.6 GiB).
pub fn accept(db: &Db, host: &HostReport, e: &Expect) -> Result<Vec<Acceptance>, String> {
    let mut out = Vec::new();
    let names: Vec<&str> = host.gpus.iter().map(|g| g.name.as_str()).collect();
    if let Some(want) = &e.gpu {
        let rec = db.gpu(want).map_err(|err| format!("--expect-gpu: {err}"))?;
        let matching = host
            .gpus
            .iter()
            .filter(|g| db.gpu(&g.name).map(|r| r.id == rec.id).unwrap_or(false))
            .count();
        let found = if names.is_empty() {
            "no GPU".to_string()
        } else {
            summarize(&names)
        };
        out.push(Acceptance {
            item: "gpu",
            expected: rec.name.clone(),
            found,
            pass: matching > 0 && matching == host.gpus.len(),
        });
    }
    if let Some(n) = e.gpus {
        out.push(Acceptance {
            item: "gpus",
            expected: n.to_string(),
            found: host.gpus.len().to_string(),
            pass: host.gpus.len() as u32 >= n,
        });
    }
    if let Some(gbs) = e.gpu_memory {
        let min = host.gpus.iter().filter_map(|g| g.memory_total_mib).min();
        let found_gib = min.map(|m| m as f64 / 1024.0);
        out.push(Acceptance {
            item: "gpu_memory",
            expected: format!("{gbs} GB per GPU"),
            found: found_gib.map_or("unknown".to_string(), |g| format!("{g:.1} GiB (smallest GPU)")),
            pass: found_gib.is_some_and(|g| g >= gbs * 0.95),
        });
    }
    if let Some(spec) = &e.driver {
        let specs: VersionSpecifiers =
            crate::model::parse_specifiers(spec).map_err(|err| format!("--expect-driver: {err}"))?;
        let found = host.driver.as_ref().map(|d| d.value.to_string());
        let pass = found
            .as_deref()
            .and_then(|d| d.parse::<Version>().ok())
            .is_some_and(|v| specs.contains(&v));
        out.push(Acceptance {
            item: "driver",
            expected: specs.to_string(),
            found: found.unwrap_or_else(|| "no driver".into()),
            pass,
        });
    }
    if let Some(n) = e.cpus {
        let found = host.cpu.as_ref().map(|c| c.logical);
        out.push(Acceptance {
            item: "cpus",
            expected: n.to_string(),
            found: found.map_or("unknown".into(), |c| c.to_string()),
            pass: found.is_some_and(|c| c >= n),
        });
    }
    if let Some(m) = e.memory {
        let found = host.memory_kib.map(gib);
        out.push(Acceptance {
            item: "memory",
            expected: format!("{m} GiB"),
            found: found.map_or("unknown".into(), |g| format!("{g:.0} GiB")),
            // The kernel keeps some memory for itself; 5% covers it on any size sold.
            pass: found.is_some_and(|g| g >= m * 0.95),
        });
    }
    if let Some(d) = e.disk {
        let total: u64 = host
            .mounts
            .iter()
            .filter(|m| {
                !matches!(
                    m.fstype.as_str(),
                    "tmpfs" | "devtmpfs" | "overlay" | "squashfs" | "proc" | "sysfs" | "efivarfs"
                )
            })
            .map(|m| m.size_kib)
            .sum();
        let found = gb(total);
        out.push(Acceptance {
            item: "disk",
            expected: format!("{d} GB"),
            found: format!("{found:.0} GB"),
            pass: found >= d * 0.95,
        });
    }
    Ok(out)
}

fn summarize(names: &[&str]) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    for n in names {
        match out.iter_mut().find(|(x, _)| x == n) {
            Some((_, c)) => *c += 1,
            None => out.push((n.to_string(), 1)),
        }
    }
    out.iter()
        .map(|(n, c)| format!("{c}x {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
