//! The probes, in their documented order, run concurrently with a deadline.
//!
//! Order, and why:
//! 1. GPUs and driver: NVML first (what CUDA itself asks; exact CUDA version), then
//!    `/proc/driver/nvidia/version` (the loaded kernel module, even when user space is
//!    broken), then `nvidia-smi -q -x` (everything per GPU), then `nvidia-smi --query-gpu`
//!    CSV (older or stripped installs), then the plain table (its "CUDA Version"). A missing
//!    source means "next source". Where NVML gave the GPUs, `nvidia-smi -q -x` still runs
//!    and fills what NVML left unread (each end's PCIe generation, parts of the state):
//!    the XML is the fuller record and the raw evidence a report embeds. With more than one
//!    GPU, `nvidia-smi topo -m` adds the interconnect, `nvidia-smi nvlink -s` each GPU's
//!    NVLinks and `lspci -n -d 10de:` the NVSwitch count.
//! 2. CUDA toolkits: `nvcc` on PATH, then `/usr/local/cuda*/version.json` or `version.txt`.
//! 3. cuDNN and NCCL: headers at the known paths, then `ldconfig -p`; pip packages come
//!    with the Python probe. The driver's own libraries (`libcuda.so.1`,
//!    `libnvidia-ml.so.1`) as `ldconfig -p` lists them, each resolved with `readlink -f`:
//!    the file a link points to carries the user-space driver's version
//!    (`libcuda.so.550.127`), which is all there is to compare with the kernel module when
//!    NVML and nvidia-smi refuse to start over a mismatch.
//! 4. Pythons: `--python`, the active venv (`VIRTUAL_ENV`) or conda env (`CONDA_PREFIX`),
//!    then `python3` on PATH: one subprocess each, printing JSON.
//! 5. Containers: the Docker Engine (through the seam), `nvidia-ctk --version`, and the CDI
//!    specs in the directories the Engine reads them from (where it has CDI enabled).
//! 6. System, in this order: `/etc/os-release`; glibc (`ldd --version`, then `getconf
//!    GNU_LIBC_VERSION`); the kernel release; the architecture (`uname -m`); the host name (`/proc/sys/kernel/hostname`);
//!    the CPU (`/proc/cpuinfo`, NUMA nodes from `/sys/devices/system/node`); memory
//!    (`/proc/meminfo`); filesystems (`df -PkT`), each with the disk under it and what that
//!    is (network filesystem type, NVMe name, `/sys/block/*/queue/rotational`, through
//!    `slaves/` for md and device-mapper); the network: RDMA ports
//!    (`/sys/class/infiniband`), interfaces with a device behind them (`/sys/class/net`)
//!    and GPUDirect RDMA (`nvidia_peermem` in `/proc/modules`).
//!
//! Each group runs on its own thread; one that is not done by the deadline is reported as
//! timed out and left behind, so a hung `nvidia-smi` cannot hang `doctor`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::parse;
use super::system::{NvmlProbe, Outcome, System};
use super::types::*;
use crate::model::EngineInfo;
use crate::model::{CudaVersion, DriverVersion, GlibcVersion, HostArch};

/// A fact and where it came from (sources here: `nvml`, `nvidia-smi -q -x`,
/// `/proc/driver/nvidia/version`, `GPUENV_DRIVER`...).
pub use crate::model::Sourced;

/// A CUDA toolkit found on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toolkit {
    /// Its version.
    pub version: CudaVersion,
    /// Where (`/usr/local/cuda-12.4`).
    pub path: String,
    /// Whether it has `bin/nvcc` (a devel install).
    pub nvcc: bool,
    /// The file the version was read from.
    pub source: String,
}

/// A library found (cuDNN, NCCL).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibFound {
    /// Its version, when the file says.
    pub version: Option<String>,
    /// Where.
    pub path: String,
    /// How it was found: `header`, `ldconfig`.
    pub source: String,
}

/// A CDI spec file in one of the Engine's spec directories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdiSpec {
    /// Where (`/etc/cdi/nvidia.yaml`).
    pub path: String,
    /// The device kind it declares (`nvidia.com/gpu`), when it could be read.
    pub kind: Option<String>,
}

/// What torch says about itself inside one Python.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TorchProbe {
    /// `torch.__version__`.
    pub version: String,
    /// `torch.version.cuda` (`None` for a CPU build).
    pub cuda: Option<String>,
    /// `torch.backends.cudnn.version()` (`90100` for 9.1.0).
    pub cudnn: Option<i64>,
    /// `torch.cuda.nccl.version()`.
    pub nccl: Option<String>,
    /// `torch.cuda.is_available()`.
    pub cuda_available: bool,
    /// Why not, when it raised.
    pub cuda_error: Option<String>,
    /// Warnings `is_available()` raised (torch explains a too-old driver there).
    pub cuda_warnings: Vec<String>,
    /// `torch.cuda.get_arch_list()`.
    pub arch_list: Vec<String>,
    /// Device names torch sees.
    pub devices: Vec<String>,
}

/// One Python interpreter and what is installed in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PythonEnv {
    /// The interpreter as found.
    pub path: String,
    /// How it was found: `--python`, `VIRTUAL_ENV`, `CONDA_PREFIX`, `PATH`.
    pub origin: String,
    /// `3.11.7`.
    pub version: Option<String>,
    /// torch, when importable.
    pub torch: Option<TorchProbe>,
    /// Why torch could not be imported, when it is installed but broken.
    pub torch_error: Option<String>,
    /// `nvidia-*`, torch, torchvision, torchaudio, triton distributions and versions.
    pub packages: BTreeMap<String, String>,
    /// Why the probe itself failed.
    pub error: Option<String>,
}

/// A probe that failed or was cut off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeIssue {
    /// Which probe group.
    pub probe: String,
    /// What happened.
    pub message: String,
}

/// What the Docker probe found: the Engine's answer, or why there was none. In JSON
/// `{"status": "ok", "engine": {...}}` or `{"status": "error", "error": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum DockerProbe {
    /// The Engine answered.
    Ok {
        /// What it says about itself.
        engine: EngineInfo,
    },
    /// It did not: unreachable, refused, or failed.
    Error {
        /// Why, as the client reported it.
        error: String,
    },
}

impl DockerProbe {
    /// The Engine's answer, when there was one.
    pub fn engine(&self) -> Option<&EngineInfo> {
        match self {
            DockerProbe::Ok { engine } => Some(engine),
            DockerProbe::Error { .. } => None,
        }
    }
}

impl From<Result<EngineInfo, String>> for DockerProbe {
    fn from(r: Result<EngineInfo, String>) -> DockerProbe {
        match r {
            Ok(engine) => DockerProbe::Ok { engine },
            Err(error) => DockerProbe::Error { error },
        }
    }
}

/// Everything the probes found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The user-space driver version.
    pub driver: Option<Sourced<DriverVersion>>,
    /// The CUDA version the driver supports.
    pub driver_cuda: Option<Sourced<CudaVersion>>,
    /// The loaded kernel module.
    pub kernel_module: Option<Sourced<KernelModule>>,
    /// The driver's user-space libraries (`libcuda.so.1`, `libnvidia-ml.so.1`), each with
    /// the version its real file carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_libraries: Vec<LibFound>,
    /// GPUs.
    pub gpus: Vec<GpuInfo>,
    /// Where the GPU list came from.
    pub gpus_source: Option<String>,
    /// Why no GPU list could be read (no GPU, no driver, a mismatch...).
    pub gpu_failure: Option<SmiFailure>,
    /// GPU interconnect.
    pub topology: Option<Sourced<Topology>>,
    /// Each GPU's NVLinks (`nvidia-smi nvlink -s`), where there is more than one GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<Sourced<Vec<NvLinkGpu>>>,
    /// NVSwitch devices found (`lspci`): the fabric of HGX/DGX boards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvswitches: Option<Sourced<u32>>,
    /// `nvcc` on PATH.
    pub nvcc: Option<Sourced<CudaVersion>>,
    /// Toolkits under `/usr/local`.
    pub toolkits: Vec<Toolkit>,
    /// cuDNN libraries and headers of the system (not pip's).
    pub cudnn: Vec<LibFound>,
    /// NCCL libraries and headers of the system.
    pub nccl: Vec<LibFound>,
    /// Python interpreters.
    pub pythons: Vec<PythonEnv>,
    /// The Docker Engine, or why it did not answer; `None` when the probe did not run.
    pub docker: Option<DockerProbe>,
    /// `nvidia-ctk` version.
    pub nvidia_ctk: Option<String>,
    /// CDI specs in the Engine's spec directories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdi_specs: Vec<CdiSpec>,
    /// `/etc/os-release`.
    pub os: Option<OsRelease>,
    /// glibc.
    pub glibc: Option<Sourced<GlibcVersion>>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// The CPU architecture (`uname -m`): which torch wheels exist for the host (PyPI's
    /// aarch64 wheels were CPU-only builds up to 2.10) and which glibc floor they have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Sourced<HostArch>>,
    /// CPU.
    pub cpu: Option<CpuInfo>,
    /// Total memory, KiB.
    pub memory_kib: Option<u64>,
    /// Filesystems.
    pub mounts: Vec<Mount>,
    /// RDMA, network interfaces, GPUDirect RDMA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// The host's name (`/proc/sys/kernel/hostname`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// An ID of this machine for gpuenv, stable across reboots: derived from
    /// `/etc/machine-id` as systemd's `sd_id128_get_machine_app_specific()` does
    /// (HMAC-SHA256 keyed by the machine ID over gpuenv's fixed application ID, the first
    /// 32 hex digits), never the raw ID, which machine-id(5) says is confidential. Two
    /// reports with the same value come from the same machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// The NVIDIA XID events of the kernel log since boot; `None` where the log could not
    /// be read (no permission, no journal and no `dmesg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_log: Option<Sourced<Vec<XidEvent>>>,
    /// Probes that failed or were cut off.
    pub issues: Vec<ProbeIssue>,
    /// `GPUENV_*` overrides applied.
    pub overrides: Vec<String>,
}

impl HostReport {
    /// Whether the `GPUENV_*` variable `var` replaced a fact of this report: it is in
    /// [`HostReport::overrides`] (`VAR=value`), or a fact names it as its source.
    pub fn overridden(&self, var: &str) -> bool {
        self.overrides
            .iter()
            .any(|o| o.split_once('=').is_some_and(|(k, _)| k == var))
            || self.driver.as_ref().is_some_and(|d| d.source == var)
            || self.gpus_source.as_deref() == Some(var)
            || self.nvcc.as_ref().is_some_and(|n| n.source == var)
            || self.glibc.as_ref().is_some_and(|g| g.source == var)
    }
}

/// How to probe.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Interpreters named with `--python`.
    pub pythons: Vec<String>,
    /// Deadline for all probes.
    pub deadline: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            pythons: Vec::new(),
            deadline: Duration::from_secs(20),
        }
    }
}

/// The Python probe script, run as `python -c`.
pub const PYTHON_PROBE: &str = include_str!("python_probe.py");

/// A partial report from one probe group.
type Part = Box<dyn FnOnce(&mut HostReport) + Send>;

/// A probe group: reads the system, returns its part of the report.
type Group = Box<dyn FnOnce(&dyn System) -> Part + Send>;

/// Runs every probe and assembles the report.
pub fn probe(sys: Arc<dyn System>, opts: &ProbeOptions) -> HostReport {
    let (tx, rx) = mpsc::channel::<(&'static str, Part)>();
    let groups: Vec<(&'static str, Group)> = vec![
        ("gpus", Box::new(probe_gpus)),
        ("toolkits", Box::new(probe_toolkits)),
        ("libraries", Box::new(probe_libraries)),
        ("pythons", {
            let pythons = opts.pythons.clone();
            Box::new(move |s: &dyn System| probe_pythons(s, &pythons))
        }),
        ("containers", Box::new(probe_containers)),
        ("system", Box::new(probe_system)),
    ];
    let names: Vec<&'static str> = groups.iter().map(|(n, _)| *n).collect();
    for (name, f) in groups {
        let tx = tx.clone();
        let sys = sys.clone();
        std::thread::spawn(move || {
            let part = f(sys.as_ref());
            let _ = tx.send((name, part));
        });
    }
    drop(tx);
    let mut report = HostReport::default();
    let mut parts: Vec<(&'static str, Part)> = Vec::new();
    let end = Instant::now() + opts.deadline;
    while parts.len() < names.len() {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(p) => parts.push(p),
            Err(_) => break,
        }
    }
    // Apply in the documented order, whatever order the threads finished in.
    for name in &names {
        match parts.iter().position(|(n, _)| n == name) {
            Some(i) => {
                let (_, part) = parts.remove(i);
                part(&mut report);
            }
            None => report.issues.push(ProbeIssue {
                probe: (*name).to_string(),
                message: format!("did not finish within {:?}; its facts are missing", opts.deadline),
            }),
        }
    }
    report
}

/// What the GPU probes found, filled source after source in the documented order.
#[derive(Default)]
struct GpuFacts {
    driver: Option<Sourced<DriverVersion>>,
    driver_cuda: Option<Sourced<CudaVersion>>,
    gpus: Vec<GpuInfo>,
    gpus_source: Option<String>,
    failure: Option<SmiFailure>,
    issues: Vec<ProbeIssue>,
}

fn probe_gpus(sys: &dyn System) -> Part {
    let mut f = GpuFacts::default();
    gpus_from_nvml(sys, &mut f);

    let kernel_module = sys
        .read("/proc/driver/nvidia/version")
        .and_then(|t| parse::proc_driver_version(&t))
        .map(|k| Sourced::new(k, "/proc/driver/nvidia/version"));

    if f.gpus_source.is_none() {
        gpus_from_smi(sys, &mut f);
    } else if !f.gpus.is_empty() {
        // NVML answered; nvidia-smi has not run yet.
        fill_from_xml(sys, &mut f);
    }
    // The kernel module answers for the driver when user space cannot (a mismatch).
    if f.driver.is_none() {
        f.driver = kernel_module
            .as_ref()
            .map(|k| Sourced::new(k.value.version.clone(), "/proc/driver/nvidia/version"));
    }
    if f.gpus.is_empty() && f.failure.is_none() && f.gpus_source.is_some() {
        f.failure = Some(SmiFailure::NoDevices);
    }
    let topology = topology(sys, &f.gpus);
    let nvlink = nvlink(sys, &f.gpus);
    let nvswitches = nvswitches(sys, &f.gpus);
    let kernel_log = kernel_xids(sys);
    let GpuFacts {
        driver,
        driver_cuda,
        gpus,
        gpus_source,
        failure,
        issues,
    } = f;
    Box::new(move |r: &mut HostReport| {
        r.driver = driver;
        r.driver_cuda = driver_cuda;
        r.kernel_module = kernel_module;
        r.gpus = gpus;
        r.gpus_source = gpus_source;
        r.gpu_failure = failure;
        r.topology = topology;
        r.nvlink = nvlink;
        r.nvswitches = nvswitches;
        r.kernel_log = kernel_log;
        r.issues.extend(issues);
    })
}

/// One `NVRM: Xid` line of the kernel log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidEvent {
    /// The XID number.
    pub xid: u32,
    /// The device as the driver named it (`PCI:0000:3b:00`).
    pub device: String,
    /// The rest of the line after the XID, as the driver wrote it (cut to a line's length).
    pub text: String,
}

/// The kernel log's lines gpuenv reads: the last ones since boot, so that a noisy kernel
/// cannot make the probe or its record grow without end.
pub const KERNEL_LOG_LINES: &str = "20000";

/// The XID events of the kernel log since boot: the journal's kernel messages, else
/// `dmesg`. A log that reads empty is not read (the kernel always logs at boot; an empty
/// answer is a missing permission), so `None`.
fn kernel_xids(sys: &dyn System) -> Option<Sourced<Vec<XidEvent>>> {
    let sources: [(&str, &[&str]); 2] = [
        (
            "journalctl",
            &["-k", "-b", "-q", "--no-pager", "-n", KERNEL_LOG_LINES],
        ),
        ("dmesg", &[]),
    ];
    sources.into_iter().find_map(|(program, args)| {
        let out = sys.run(program, args);
        (out.ok() && !out.stdout.trim().is_empty()).then(|| {
            let events = out.stdout.lines().filter_map(parse::xid_line).collect();
            Sourced::new(events, crate::host::system::command_key(program, args))
        })
    })
}

/// NVML: the driver, its exact CUDA version and the GPUs, when the library answers.
fn gpus_from_nvml(sys: &dyn System, f: &mut GpuFacts) {
    match sys.nvml() {
        NvmlProbe::Read {
            driver: d,
            cuda_driver,
            gpus: g,
        } => {
            f.driver = d.parse().ok().map(|v| Sourced::new(v, "nvml"));
            f.driver_cuda = cuda_driver
                .map(|c| CudaVersion::from_major_minor((c / 1000) as u32, ((c % 1000) / 10) as u32))
                .map(|v| Sourced::new(v, "nvml"));
            f.gpus = g;
            f.gpus_source = Some("nvml".to_string());
        }
        NvmlProbe::Failed { error } => f.issues.push(ProbeIssue {
            probe: "nvml".into(),
            message: error,
        }),
        NvmlProbe::Unavailable { .. } => {}
    }
}

/// nvidia-smi, where NVML did not answer: `-q -x`, then the `--query-gpu` CSV, then the
/// plain table for the driver's CUDA version; why it failed when it did.
fn gpus_from_smi(sys: &dyn System, f: &mut GpuFacts) {
    let xml = sys.run("nvidia-smi", &["-q", "-x"]);
    if xml.ok() {
        match parse::smi_xml(&xml.stdout) {
            Ok(r) => {
                f.gpus = r.gpus;
                f.gpus_source = Some("nvidia-smi -q -x".into());
                if f.driver.is_none() {
                    f.driver = r.driver.version.map(|v| Sourced::new(v, "nvidia-smi -q -x"));
                }
                if f.driver_cuda.is_none() {
                    f.driver_cuda = r.driver.cuda.map(|v| Sourced::new(v, "nvidia-smi -q -x"));
                }
            }
            Err(e) => f.issues.push(ProbeIssue {
                probe: "nvidia-smi -q -x".into(),
                message: e,
            }),
        }
    } else if xml.outcome == Outcome::NotFound {
        f.failure = Some(SmiFailure::NotFound);
    } else {
        f.failure = Some(parse::smi_failure(xml.status, &xml.stdout, &xml.stderr));
    }
    if f.gpus_source.is_none() && f.failure.is_none() {
        let query = format!("--query-gpu={}", parse::SMI_QUERY_FIELDS);
        let format = format!("--format={}", parse::SMI_QUERY_FORMAT);
        let csv = sys.run("nvidia-smi", &[&query, &format]);
        if csv.ok() {
            if let Ok(r) = parse::smi_csv(&csv.stdout) {
                f.gpus = r.gpus;
                f.gpus_source = Some("nvidia-smi --query-gpu".into());
                if f.driver.is_none() {
                    f.driver = r
                        .driver
                        .version
                        .map(|v| Sourced::new(v, "nvidia-smi --query-gpu"));
                }
            }
        }
    }
    if f.gpus_source.is_some() && f.driver_cuda.is_none() {
        let table = sys.run("nvidia-smi", &[]);
        if table.ok() {
            f.driver_cuda = parse::smi_table_cuda(&table.stdout).map(|v| Sourced::new(v, "nvidia-smi"));
        }
    }
}

/// `nvidia-smi -q -x` where NVML gave the GPUs: fills, GPU by GPU, what NVML left `None`
/// (the PCIe generation of each end of the link, and the state field by field). A GPU is
/// matched by bus id, else by UUID, and by index only when NVML gave it neither (a wrong
/// match would pin one GPU's readings on another). The XML failing is no failure of the
/// probe (NVML answered); a document that does not parse is reported.
fn fill_from_xml(sys: &dyn System, f: &mut GpuFacts) {
    let out = sys.run("nvidia-smi", &["-q", "-x"]);
    if !out.ok() {
        return;
    }
    let report = match parse::smi_xml(&out.stdout) {
        Ok(r) => r,
        Err(e) => {
            f.issues.push(ProbeIssue {
                probe: "nvidia-smi -q -x".into(),
                message: e,
            });
            return;
        }
    };
    for gpu in &mut f.gpus {
        if let Some(xml) = matching_gpu(gpu, &report.gpus) {
            fill_gpu(gpu, xml);
        }
    }
}

/// The GPU of `others` that is `gpu`: same bus id, else same UUID, else (when `gpu` has
/// neither) same index.
fn matching_gpu<'a>(gpu: &GpuInfo, others: &'a [GpuInfo]) -> Option<&'a GpuInfo> {
    let same = |a: &Option<String>, b: &Option<String>, eq: fn(&str, &str) -> bool| matches!((a, b), (Some(a), Some(b)) if eq(a, b));
    others
        .iter()
        .find(|o| same(&gpu.bus_id, &o.bus_id, same_bus_id))
        .or_else(|| {
            others
                .iter()
                .find(|o| same(&gpu.uuid, &o.uuid, |a, b| a.eq_ignore_ascii_case(b)))
        })
        .or_else(|| {
            (gpu.bus_id.is_none() && gpu.uuid.is_none())
                .then(|| others.iter().find(|o| o.index == gpu.index))
                .flatten()
        })
}

/// `00000000:18:00.0` and `0000:18:00.0` are the same device: NVML and nvidia-smi differ
/// in the domain's width across versions, and in the case of the hex digits.
fn same_bus_id(a: &str, b: &str) -> bool {
    let split = |id: &str| {
        let id = id.trim().to_ascii_lowercase();
        match id.split_once(':') {
            Some((domain, rest)) if rest.contains(':') => {
                (u32::from_str_radix(domain, 16).ok(), rest.to_string())
            }
            _ => (Some(0), id),
        }
    };
    let (da, ra) = split(a);
    let (db, rb) = split(b);
    da.is_some() && da == db && ra == rb
}

/// Fills what `gpu` (read through NVML) left `None` from the same GPU in the XML.
fn fill_gpu(gpu: &mut GpuInfo, xml: &GpuInfo) {
    gpu.pcie_gen_device_max = gpu.pcie_gen_device_max.or(xml.pcie_gen_device_max);
    gpu.pcie_gen_host_max = gpu.pcie_gen_host_max.or(xml.pcie_gen_host_max);
    let Some(from) = &xml.state else { return };
    let Some(state) = &mut gpu.state else {
        gpu.state = Some(from.clone());
        return;
    };
    let before = state.clone();
    state.memory_used_mib = state.memory_used_mib.or(from.memory_used_mib);
    state.utilization_pct = state.utilization_pct.or(from.utilization_pct);
    state.pstate = state.pstate.take().or_else(|| from.pstate.clone());
    state.power_draw_w = state.power_draw_w.or(from.power_draw_w);
    state.power_limit_w = state.power_limit_w.or(from.power_limit_w);
    state.power_default_limit_w = state.power_default_limit_w.or(from.power_default_limit_w);
    state.temperature_c = state.temperature_c.or(from.temperature_c);
    state.temperature_slowdown_c = state.temperature_slowdown_c.or(from.temperature_slowdown_c);
    state.throttle = state.throttle.take().or_else(|| from.throttle.clone());
    state.persistence_mode = state.persistence_mode.or(from.persistence_mode);
    state.repair = state.repair.take().or_else(|| from.repair.clone());
    match (&mut state.processes, &from.processes) {
        (None, p) => state.processes = p.clone(),
        // NVML gives pids only; the XML names them.
        (Some(ours), Some(theirs)) => {
            for p in ours.iter_mut().filter(|p| p.name.is_empty()) {
                if let Some(named) = theirs.iter().find(|t| t.pid == p.pid) {
                    p.name = named.name.clone();
                }
            }
        }
        (Some(_), None) => {}
    }
    if *state != before {
        // Say that the readings are of two sources, so that none is taken for the other.
        state.source = format!("{}, {}", before.source, from.source);
    }
}

/// `nvidia-smi nvlink -s`, where there is more than one GPU to link; `None` when it fails
/// or lists no GPU.
fn nvlink(sys: &dyn System, gpus: &[GpuInfo]) -> Option<Sourced<Vec<NvLinkGpu>>> {
    if gpus.len() < 2 {
        return None;
    }
    let out = sys.run("nvidia-smi", &["nvlink", "-s"]);
    if !out.ok() {
        return None;
    }
    parse::smi_nvlink_status(&out.stdout)
        .ok()
        .filter(|g| !g.is_empty())
        .map(|g| Sourced::new(g, "nvidia-smi nvlink -s"))
}

/// The NVSwitches `lspci -n -d 10de:` lists, where there is more than one GPU: `Some(0)`
/// when it ran and listed none, `None` when it is missing or failed.
fn nvswitches(sys: &dyn System, gpus: &[GpuInfo]) -> Option<Sourced<u32>> {
    if gpus.len() < 2 {
        return None;
    }
    let out = sys.run("lspci", &["-n", "-d", "10de:"]);
    out.ok()
        .then(|| Sourced::new(parse::lspci_nvswitches(&out.stdout), "lspci -n -d 10de:"))
}

/// `nvidia-smi topo -m`, where there is more than one GPU to link.
fn topology(sys: &dyn System, gpus: &[GpuInfo]) -> Option<Sourced<Topology>> {
    if gpus.len() > 1 {
        let t = sys.run("nvidia-smi", &["topo", "-m"]);
        if t.ok() {
            parse::smi_topo(&t.stdout)
                .ok()
                .map(|t| Sourced::new(t, "nvidia-smi topo -m"))
        } else {
            None
        }
    } else {
        None
    }
}

fn probe_toolkits(sys: &dyn System) -> Part {
    let nvcc_out = sys.run("nvcc", &["--version"]);
    let nvcc = if nvcc_out.ok() {
        parse::nvcc_version(&nvcc_out.stdout).map(|v| Sourced::new(v, "nvcc --version"))
    } else {
        None
    };
    let mut toolkits = Vec::new();
    for name in sys.list("/usr/local").unwrap_or_default() {
        if !name.starts_with("cuda") {
            continue;
        }
        let path = format!("/usr/local/{name}");
        let json_path = format!("{path}/version.json");
        let txt_path = format!("{path}/version.txt");
        let found = sys
            .read(&json_path)
            .and_then(|t| parse::cuda_version_json(&t))
            .map(|v| (v, json_path))
            .or_else(|| {
                sys.read(&txt_path)
                    .and_then(|t| parse::cuda_version_txt(&t))
                    .map(|v| (v, txt_path))
            });
        if let Some((version, source)) = found {
            let has_nvcc = sys
                .list(&format!("{path}/bin"))
                .is_some_and(|b| b.iter().any(|f| f == "nvcc"));
            toolkits.push(Toolkit {
                version,
                path,
                nvcc: has_nvcc,
                source,
            });
        }
    }
    Box::new(move |r: &mut HostReport| {
        r.nvcc = nvcc;
        r.toolkits = toolkits;
    })
}

/// Where cuDNN and NCCL headers are installed by NVIDIA's packages and tarballs.
const CUDNN_HEADERS: [&str; 4] = [
    "/usr/include/cudnn_version.h",
    "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
    "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
    "/usr/local/cuda/include/cudnn_version.h",
];
const NCCL_HEADERS: [&str; 2] = ["/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h"];

/// The driver's user-space libraries, by the names `ldconfig -p` lists them under.
const DRIVER_LIBRARIES: [&str; 2] = ["libcuda.so.1", "libnvidia-ml.so.1"];

fn probe_libraries(sys: &dyn System) -> Part {
    let mut cudnn = Vec::new();
    let mut nccl = Vec::new();
    let mut driver_libraries = Vec::new();
    for h in CUDNN_HEADERS {
        if let Some(v) = sys.read(h).and_then(|t| parse::cudnn_header(&t)) {
            cudnn.push(LibFound {
                version: Some(v.to_string()),
                path: h.to_string(),
                source: "header".into(),
            });
        }
    }
    for h in NCCL_HEADERS {
        if let Some(v) = sys.read(h).and_then(|t| parse::nccl_header(&t)) {
            nccl.push(LibFound {
                version: Some(v.to_string()),
                path: h.to_string(),
                source: "header".into(),
            });
        }
    }
    let ld = sys.run("ldconfig", &["-p"]);
    if ld.ok() {
        // 32-bit copies (flag `libc6` alone) are not what a 64-bit torch loads.
        // The unversioned `.so` link is for compilers; what a process loads is versioned.
        for lib in parse::ldconfig(&ld.stdout)
            .into_iter()
            .filter(|l| l.abi != "libc6" && !l.name.ends_with(".so"))
        {
            // The versioned file name (libcudnn.so.9.1.0) says the full version; the link
            // name (libcudnn.so.9) only the major.
            let file = lib.path.rsplit('/').next().unwrap_or(&lib.path).to_string();
            if DRIVER_LIBRARIES.contains(&lib.name.as_str()) {
                if let Some(found) = driver_library(sys, &lib.name, &lib.path) {
                    driver_libraries.push(found);
                }
            } else if lib.name.starts_with("libcudnn.so") {
                cudnn.push(LibFound {
                    version: parse::lib_version(&file, "libcudnn.so.")
                        .or_else(|| parse::lib_version(&lib.name, "libcudnn.so.")),
                    path: lib.path.clone(),
                    source: "ldconfig".into(),
                });
            } else if lib.name.starts_with("libnccl.so") {
                nccl.push(LibFound {
                    version: parse::lib_version(&file, "libnccl.so.")
                        .or_else(|| parse::lib_version(&lib.name, "libnccl.so.")),
                    path: lib.path.clone(),
                    source: "ldconfig".into(),
                });
            }
        }
    }
    Box::new(move |r: &mut HostReport| {
        r.cudnn = cudnn;
        r.nccl = nccl;
        r.driver_libraries = driver_libraries;
    })
}

/// `libcuda.so.1` resolved to the file it links to, and the driver version that file's
/// name carries (`libcuda.so.550.127`); `None` when it does not resolve to a versioned file.
fn driver_library(sys: &dyn System, name: &str, path: &str) -> Option<LibFound> {
    let out = sys.run("readlink", &["-f", path]);
    if !out.ok() {
        return None;
    }
    let target = out.stdout.trim();
    let stem = name.strip_suffix(".1").unwrap_or(name);
    let version = parse::lib_version(target, stem)?;
    // `libcuda.so.1` itself, unresolved, names no driver.
    version
        .parse::<DriverVersion>()
        .ok()
        .filter(|_| version.contains('.'))?;
    Some(LibFound {
        version: Some(version),
        path: target.to_string(),
        source: format!("readlink -f {path}"),
    })
}

fn probe_pythons(sys: &dyn System, named: &[String]) -> Part {
    let mut candidates: Vec<(String, String)> = named
        .iter()
        .map(|p| (p.clone(), "--python".to_string()))
        .collect();
    if let Some(v) = sys.env("VIRTUAL_ENV") {
        candidates.push((format!("{v}/bin/python"), "VIRTUAL_ENV".into()));
    }
    if let Some(c) = sys.env("CONDA_PREFIX") {
        candidates.push((format!("{c}/bin/python"), "CONDA_PREFIX".into()));
    }
    candidates.push(("python3".into(), "PATH".into()));
    let mut pythons: Vec<PythonEnv> = Vec::new();
    for (path, origin) in candidates {
        let out = sys.run(&path, &["-c", PYTHON_PROBE]);
        let mut env = PythonEnv {
            path: path.clone(),
            origin,
            ..PythonEnv::default()
        };
        if out.outcome == Outcome::NotFound {
            if env.origin == "PATH" {
                continue; // no python3 on PATH is a fact, reported by its absence
            }
            env.error = Some(format!("`{path}` not found"));
        } else if !out.ok() {
            let first = out
                .stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            env.error = Some(format!(
                "the probe failed ({}): {first}",
                describe(&out.outcome, out.status)
            ));
        } else {
            read_python_json(&out.stdout, &mut env);
        }
        // The same interpreter reached twice (a venv's python3 on PATH) is reported once.
        let dup = pythons.iter().any(|p| {
            p.error.is_none()
                && env.error.is_none()
                && p.version == env.version
                && p.packages == env.packages
                && p.torch == env.torch
        });
        if !dup {
            pythons.push(env);
        }
    }
    Box::new(move |r: &mut HostReport| r.pythons = pythons)
}

fn describe(o: &Outcome, status: Option<i32>) -> String {
    match o {
        Outcome::Exited => format!("exit {}", status.map_or("?".to_string(), |s| s.to_string())),
        Outcome::NotFound => "not found".into(),
        Outcome::TimedOut => "timed out".into(),
        Outcome::Failed(e) => e.clone(),
    }
}

/// Reads the probe's JSON into `env`.
pub fn read_python_json(text: &str, env: &mut PythonEnv) {
    let v: serde_json::Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => {
            env.error = Some(format!("the probe printed something other than JSON: {e}"));
            return;
        }
    };
    let s = |x: &serde_json::Value| x.as_str().map(str::to_string);
    env.version = s(&v["python"]);
    if let Some(pk) = v["packages"].as_object() {
        env.packages = pk
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect();
    }
    env.torch_error = s(&v["torch_import_error"]);
    if let Some(t) = v.get("torch").filter(|t| t.is_object()) {
        let list = |x: &serde_json::Value| {
            x.as_array()
                .map(|a| a.iter().filter_map(|i| i.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        env.torch = Some(TorchProbe {
            version: s(&t["version"]).unwrap_or_default(),
            cuda: s(&t["cuda"]),
            cudnn: t["cudnn"].as_i64(),
            nccl: s(&t["nccl"]),
            cuda_available: t["cuda_available"].as_bool().unwrap_or(false),
            cuda_error: s(&t["cuda_error"]),
            cuda_warnings: list(&t["cuda_warnings"]),
            arch_list: list(&t["arch_list"]),
            devices: list(&t["devices"]),
        });
    }
}

fn probe_containers(sys: &dyn System) -> Part {
    let docker = sys.docker();
    let ctk = sys.run("nvidia-ctk", &["--version"]);
    let nvidia_ctk = if ctk.ok() {
        parse::nvidia_ctk_version(&ctk.stdout)
    } else {
        None
    };
    // The Engine reports spec directories only with CDI enabled; the specs in them decide
    // which devices `--device vendor/class=...` can name.
    let mut cdi_specs = Vec::new();
    if let Ok(info) = &docker {
        for dir in &info.cdi_spec_dirs {
            for name in sys.list(dir).unwrap_or_default() {
                if !(name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")) {
                    continue;
                }
                let path = format!("{}/{name}", dir.trim_end_matches('/'));
                let kind = sys.read(&path).and_then(|t| parse::cdi_spec_kind(&t));
                cdi_specs.push(CdiSpec { path, kind });
            }
        }
    }
    Box::new(move |r: &mut HostReport| {
        r.docker = Some(docker.into());
        r.nvidia_ctk = nvidia_ctk;
        r.cdi_specs = cdi_specs;
    })
}

fn probe_system(sys: &dyn System) -> Part {
    let os = sys.read("/etc/os-release").map(|t| parse::os_release(&t));
    let ldd = sys.run("ldd", &["--version"]);
    let mut glibc = if ldd.ok() {
        parse::ldd_version(&ldd.stdout).map(|v| Sourced::new(v, "ldd --version"))
    } else {
        None
    };
    if glibc.is_none() {
        let g = sys.run("getconf", &["GNU_LIBC_VERSION"]);
        if g.ok() {
            glibc = parse::getconf_glibc(&g.stdout).map(|v| Sourced::new(v, "getconf GNU_LIBC_VERSION"));
        }
    }
    let kernel = sys
        .read("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_string());
    let arch = arch(sys);
    let hostname = super::machine::hostname(sys);
    let machine_id = super::machine::machine_id(sys);
    let cpu = sys.read("/proc/cpuinfo").map(|t| CpuInfo {
        numa_nodes: super::machine::numa_nodes(sys),
        ..parse::cpuinfo(&t)
    });
    let memory_kib = sys
        .read("/proc/meminfo")
        .and_then(|t| parse::meminfo_total_kib(&t));
    let dfo = sys.run("df", &["-PkT"]);
    let mut mounts = if dfo.ok() {
        parse::df(&dfo.stdout)
    } else {
        Vec::new()
    };
    super::machine::classify_mounts(sys, &mut mounts);
    let network = super::machine::network(sys);
    Box::new(move |r: &mut HostReport| {
        r.os = os;
        r.glibc = glibc;
        r.kernel = kernel;
        r.arch = arch;
        r.hostname = hostname;
        r.machine_id = machine_id;
        r.cpu = cpu;
        r.memory_kib = memory_kib;
        r.mounts = mounts;
        r.network = network;
    })
}

/// The machine's architecture as `uname -m` prints it; `None` when it did not answer or
/// printed one gpuenv does not judge (`ppc64le`): an unknown architecture is no fact.
fn arch(sys: &dyn System) -> Option<Sourced<HostArch>> {
    let out = sys.run("uname", &["-m"]);
    if !out.ok() {
        return None;
    }
    let (arch, _) = HostArch::read(out.stdout.trim()).ok()?;
    Some(Sourced::new(arch, "uname -m"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::system::{CmdOutput, HostRecord, NvmlProbe, Recording};

    /// A system whose `nvidia-smi` never returns, and which otherwise answers like a
    /// recorded GPU-less host.
    struct Hanging(Recording);

    impl System for Hanging {
        fn run(&self, program: &str, args: &[&str]) -> CmdOutput {
            if program == "nvidia-smi" {
                std::thread::sleep(Duration::from_secs(3600));
            }
            self.0.run(program, args)
        }
        fn read(&self, path: &str) -> Option<String> {
            self.0.read(path)
        }
        fn list(&self, dir: &str) -> Option<Vec<String>> {
            self.0.list(dir)
        }
        fn env(&self, key: &str) -> Option<String> {
            self.0.env(key)
        }
        fn nvml(&self) -> NvmlProbe {
            NvmlProbe::Unavailable {
                reason: "test".into(),
            }
        }
        fn docker(&self) -> Result<EngineInfo, String> {
            Err("no docker in this test".into())
        }
    }

    fn ran(stdout: &str) -> CmdOutput {
        CmdOutput {
            outcome: crate::host::system::Outcome::Exited,
            status: Some(0),
            stdout: stdout.to_string(),
            stderr: String::new(),
        }
    }

    /// A record with NVML's GPUs (or failure) and nvidia-smi's answers.
    fn record(nvml: NvmlProbe, commands: &[(&str, CmdOutput)]) -> HostRecord {
        let mut r = HostRecord {
            gpuenv_host_record: 1,
            nvml: Some(nvml),
            ..HostRecord::default()
        };
        for (k, v) in commands {
            r.commands.insert(k.to_string(), v.clone());
        }
        r
    }

    fn gpus_part(sys: &dyn System) -> HostReport {
        let mut r = HostReport::default();
        probe_gpus(sys)(&mut r);
        r
    }

    const TWO_GPU_XML: &str = "<nvidia_smi_log><driver_version>550.90.07</driver_version>\
        <gpu id=\"00000000:18:00.0\"><product_name>A</product_name><uuid>GPU-a</uuid>\
        <pci><pci_bus_id>00000000:18:00.0</pci_bus_id><pci_gpu_link_info><pcie_gen>\
        <max_device_link_gen>5</max_device_link_gen><max_host_link_gen>4</max_host_link_gen>\
        </pcie_gen></pci_gpu_link_info></pci><performance_state>P0</performance_state>\
        <fb_memory_usage><used>100 MiB</used></fb_memory_usage>\
        <processes><process_info><pid>42</pid><type>C</type><process_name>python</process_name>\
        <used_memory>90 MiB</used_memory></process_info></processes></gpu>\
        <gpu id=\"00000000:2A:00.0\"><product_name>B</product_name><uuid>GPU-b</uuid>\
        <performance_state>P8</performance_state><processes></processes></gpu></nvidia_smi_log>";

    fn nvml_gpu(index: u32, bus: Option<&str>, uuid: Option<&str>, state: Option<GpuState>) -> GpuInfo {
        GpuInfo {
            index,
            name: "G".into(),
            bus_id: bus.map(str::to_string),
            uuid: uuid.map(str::to_string),
            state,
            ..GpuInfo::default()
        }
    }

    /// NVML's gaps are filled from the XML, GPU by GPU, matched by bus id (whatever the
    /// domain's width or the case), else UUID; what NVML read stays.
    #[test]
    fn nvml_gaps_are_filled_from_the_xml() {
        let nvml_state = GpuState {
            source: "nvml".into(),
            memory_used_mib: Some(99),
            processes: Some(vec![GpuProcess {
                pid: 42,
                name: String::new(),
                kind: Some("C".into()),
                used_mib: Some(90),
            }]),
            ..GpuState::default()
        };
        let nvml = NvmlProbe::Read {
            driver: "550.90.07".into(),
            cuda_driver: Some(12040),
            // NVML's order differs from nvidia-smi's, and the second has no bus id.
            gpus: vec![
                nvml_gpu(0, None, Some("gpu-B"), None),
                nvml_gpu(1, Some("0000:18:00.0"), None, Some(nvml_state)),
            ],
        };
        let sys = Recording::replay(record(nvml, &[("nvidia-smi -q -x", ran(TWO_GPU_XML))]));
        let r = gpus_part(&sys);
        assert_eq!(r.gpus_source.as_deref(), Some("nvml"));
        let (b, a) = (&r.gpus[0], &r.gpus[1]);
        assert_eq!((a.pcie_gen_device_max, a.pcie_gen_host_max), (Some(5), Some(4)));
        let sa = a.state.as_ref().unwrap();
        assert_eq!(sa.source, "nvml, nvidia-smi -q -x");
        assert_eq!(sa.memory_used_mib, Some(99), "NVML's reading stays");
        assert_eq!(sa.pstate.as_deref(), Some("P0"));
        assert_eq!(sa.processes.as_ref().unwrap()[0].name, "python");
        let sb = b.state.as_ref().unwrap();
        assert_eq!(sb.source, "nvidia-smi -q -x");
        assert_eq!(
            (sb.pstate.as_deref(), sb.processes.clone()),
            (Some("P8"), Some(vec![]))
        );
        assert_eq!(b.pcie_gen_device_max, None);
    }

    /// A GPU NVML identified by bus id that the XML lacks is not matched by index.
    #[test]
    fn no_match_by_index_when_ids_differ() {
        let nvml = NvmlProbe::Read {
            driver: "550.90.07".into(),
            cuda_driver: None,
            gpus: vec![nvml_gpu(0, Some("00000000:99:00.0"), None, None)],
        };
        let sys = Recording::replay(record(nvml, &[("nvidia-smi -q -x", ran(TWO_GPU_XML))]));
        assert_eq!(gpus_part(&sys).gpus[0].state, None);
        // Without any id, the index decides.
        let nvml = NvmlProbe::Read {
            driver: "550.90.07".into(),
            cuda_driver: None,
            gpus: vec![nvml_gpu(1, None, None, None)],
        };
        let sys = Recording::replay(record(nvml, &[("nvidia-smi -q -x", ran(TWO_GPU_XML))]));
        let r = gpus_part(&sys);
        assert_eq!(r.gpus[0].state.as_ref().unwrap().pstate.as_deref(), Some("P8"));
        // A document that does not parse is reported, and NVML's list stands.
        let nvml = NvmlProbe::Read {
            driver: "550.90.07".into(),
            cuda_driver: None,
            gpus: vec![nvml_gpu(0, None, None, None)],
        };
        let sys = Recording::replay(record(
            nvml,
            &[("nvidia-smi -q -x", ran("<nvidia_smi_log><gpu>"))],
        ));
        let r = gpus_part(&sys);
        assert_eq!(r.gpus.len(), 1);
        assert_eq!(r.issues[0].probe, "nvidia-smi -q -x");
    }

    /// Counts the runs of `nvidia-smi -q -x`.
    struct Counting(Recording, std::sync::atomic::AtomicUsize);

    impl System for Counting {
        fn run(&self, program: &str, args: &[&str]) -> CmdOutput {
            if program == "nvidia-smi" && args == ["-q", "-x"] {
                self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            self.0.run(program, args)
        }
        fn read(&self, path: &str) -> Option<String> {
            self.0.read(path)
        }
        fn list(&self, dir: &str) -> Option<Vec<String>> {
            self.0.list(dir)
        }
        fn env(&self, key: &str) -> Option<String> {
            self.0.env(key)
        }
        fn nvml(&self) -> NvmlProbe {
            self.0.nvml()
        }
        fn docker(&self) -> Result<EngineInfo, String> {
            self.0.docker()
        }
    }

    #[test]
    fn the_xml_runs_once_whichever_source_answers() {
        for nvml in [
            NvmlProbe::Failed {
                error: "Driver/library version mismatch".into(),
            },
            NvmlProbe::Read {
                driver: "550.90.07".into(),
                cuda_driver: None,
                gpus: vec![nvml_gpu(0, Some("00000000:18:00.0"), None, None)],
            },
        ] {
            let sys = Counting(
                Recording::replay(record(nvml, &[("nvidia-smi -q -x", ran(TWO_GPU_XML))])),
                Default::default(),
            );
            let r = gpus_part(&sys);
            assert!(!r.gpus.is_empty());
            assert_eq!(sys.1.load(std::sync::atomic::Ordering::SeqCst), 1);
        }
    }

    /// NVLinks and NVSwitches are asked for with more than one GPU only; a command that is
    /// missing or fails reads as unknown, one that ran and found none as zero.
    #[test]
    fn nvlink_and_nvswitches() {
        let nvlink =
            "GPU 0: A (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\nGPU 1: B (UUID: GPU-b)\n\t Link 0: <inactive>\n";
        let with = |lspci: Option<CmdOutput>| {
            let mut commands = vec![
                ("nvidia-smi -q -x", ran(TWO_GPU_XML)),
                ("nvidia-smi nvlink -s", ran(nvlink)),
            ];
            if let Some(l) = lspci {
                commands.push(("lspci -n -d 10de:", l));
            }
            gpus_part(&Recording::replay(record(
                NvmlProbe::Unavailable {
                    reason: "test".into(),
                },
                &commands,
            )))
        };
        let r = with(Some(ran(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/host/lspci/hgx-h100-8gpu-4nvswitch-synthetic.txt"
        )))));
        let links = r.nvlink.unwrap();
        assert_eq!(links.source, "nvidia-smi nvlink -s");
        assert_eq!(links.value.len(), 2);
        assert!(links.value[0].links[0].active && !links.value[1].links[0].active);
        let switches = r.nvswitches.unwrap();
        assert_eq!(
            (switches.value, switches.source.as_str()),
            (4, "lspci -n -d 10de:")
        );
        assert_eq!(
            with(Some(ran("01:00.0 0300: 10de:2684 (rev a1)\n")))
                .nvswitches
                .map(|s| s.value),
            Some(0)
        );
        let mut failed = ran("");
        failed.status = Some(1);
        assert_eq!(with(Some(failed)).nvswitches, None);
        assert_eq!(with(None).nvswitches, None, "lspci not installed");
        // One GPU: neither command runs.
        let one = "<nvidia_smi_log><gpu id=\"0\"><product_name>A</product_name></gpu></nvidia_smi_log>";
        let r = gpus_part(&Recording::replay(record(
            NvmlProbe::Unavailable {
                reason: "test".into(),
            },
            &[
                ("nvidia-smi -q -x", ran(one)),
                ("nvidia-smi nvlink -s", ran(nvlink)),
                ("lspci -n -d 10de:", ran("07:00.0 0680: 10de:22a3\n")),
            ],
        )));
        assert_eq!((r.nvlink, r.nvswitches), (None, None));
    }

    #[test]
    fn a_hung_probe_is_cut_off_and_reported() {
        let mut record = HostRecord {
            gpuenv_host_record: 1,
            ..HostRecord::default()
        };
        record.files.insert(
            "/proc/meminfo".into(),
            Some("MemTotal:       16384000 kB\n".into()),
        );
        let sys = Arc::new(Hanging(Recording::replay(record)));
        let start = Instant::now();
        let report = probe(
            sys,
            &ProbeOptions {
                pythons: Vec::new(),
                deadline: Duration::from_millis(300),
            },
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "waited for the hung probe"
        );
        assert_eq!(report.issues.len(), 1, "{:?}", report.issues);
        assert_eq!(report.issues[0].probe, "gpus");
        assert!(report.issues[0].message.contains("did not finish within 300ms"));
        // The other groups still answered.
        assert_eq!(report.memory_kib, Some(16_384_000));
    }
}
