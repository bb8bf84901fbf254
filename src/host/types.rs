//! What the host probes find, as plain data. Parsers produce these; probes attach where
//! each came from; `doctor` and `check` judge them.

use serde::{Deserialize, Serialize};

use crate::model::{ComputeCapability, CudaVersion, CudnnVersion, DriverVersion, GlibcVersion, NcclVersion};

/// One GPU as a driver tool reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Index as `nvidia-smi` numbers it.
    pub index: u32,
    /// Product name exactly as reported (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// `GPU-...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// PCI bus id (`00000000:18:00.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_id: Option<String>,
    /// Total memory in MiB (81559 for an 80 GB H100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total_mib: Option<u64>,
    /// Compute capability, where the tool reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<ComputeCapability>,
    /// Product brand (`NVIDIA`, `GeForce`, `Quadro`, `Tesla`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand: Option<String>,
    /// PCIe generation the link can reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen_max: Option<u32>,
    /// PCIe generation in use now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen_current: Option<u32>,
    /// PCIe lanes the link can reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width_max: Option<u32>,
    /// PCIe lanes in use now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width_current: Option<u32>,
    /// Uncorrected ECC errors since the driver loaded (volatile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_uncorrected_volatile: Option<u64>,
    /// Uncorrected ECC errors over the GPU's life (aggregate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_uncorrected_aggregate: Option<u64>,
    /// Whether ECC is enabled now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_enabled: Option<bool>,
    /// MIG mode currently enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_enabled: Option<bool>,
}

/// The driver as a tool reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriverInfo {
    /// `535.104.05`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<DriverVersion>,
    /// The CUDA version the driver supports (nvidia-smi's "CUDA Version"; NVML's
    /// `cuDriverGetVersion`): `12.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaVersion>,
}

/// What `nvidia-smi -q -x` (or `--query-gpu`) reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmiReport {
    /// The driver.
    pub driver: DriverInfo,
    /// The GPUs, by index.
    pub gpus: Vec<GpuInfo>,
}

/// How two GPUs are connected (`nvidia-smi topo -m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// The GPU itself.
    SelfLink,
    /// NVLink with this many links (`NV18`).
    NvLink(u32),
    /// Same PCIe switch (`PIX`).
    Pix,
    /// Several PCIe switches, no host bridge (`PXB`).
    Pxb,
    /// Through a PCIe host bridge (`PHB`).
    Phb,
    /// Across host bridges within a NUMA node (`NODE`).
    Node,
    /// Across NUMA nodes, over the CPU interconnect (`SYS`).
    Sys,
    /// Through the CPU socket-level link (`SOC`, older drivers).
    Soc,
}

impl Link {
    /// NVLink rather than PCIe.
    pub fn is_nvlink(&self) -> bool {
        matches!(self, Link::NvLink(_))
    }
}

/// The GPU-to-GPU matrix of `nvidia-smi topo -m`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Row labels, `GPU0`, `GPU1`...
    pub gpus: Vec<String>,
    /// `links[i][j]`: how GPU i reaches GPU j.
    pub links: Vec<Vec<Link>>,
}

/// Why `nvidia-smi` gave no report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SmiFailure {
    /// Not installed (or not on PATH).
    NotFound,
    /// "Failed to initialize NVML: Driver/library version mismatch": the user-space
    /// library and the loaded kernel module differ (a driver upgrade without a reboot).
    DriverLibraryMismatch {
        /// The NVML library version newer drivers print.
        nvml_version: Option<String>,
    },
    /// "couldn't communicate with the NVIDIA driver": no kernel module loaded.
    NoDriver,
    /// "No devices were found".
    NoDevices,
    /// Anything else, with the first line of what it printed.
    Other {
        /// The message.
        message: String,
    },
}

/// `/proc/driver/nvidia/version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelModule {
    /// The loaded kernel module's version.
    pub version: DriverVersion,
    /// The open GPU kernel modules (needed by Blackwell and Grace Hopper) rather than the
    /// proprietary ones.
    pub open: bool,
    /// The CPU architecture the module was built for (`x86_64`, `aarch64`), where the
    /// line names it. On Jetson (L4T) boards `version` is the L4T release (`35.3.1`), not
    /// a driver branch; `aarch64` here is the hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
}

pub use crate::formats::OsRelease;

/// `/proc/cpuinfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// `AMD EPYC 7763 64-Core Processor`.
    pub model: String,
    /// Logical CPUs (what `nproc` counts).
    pub logical: u32,
    /// Physical cores, where cpuinfo says (`core id` per `physical id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical: Option<u32>,
    /// Sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
}

/// One mounted filesystem (`df -PkT`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// `/dev/nvme0n1p1`.
    pub device: String,
    /// `ext4`.
    pub fstype: String,
    /// Size in KiB.
    pub size_kib: u64,
    /// Available to unprivileged users, KiB.
    pub avail_kib: u64,
    /// Where it is mounted.
    pub mount: String,
}

/// A shared library as `ldconfig -p` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedLib {
    /// `libcudnn.so.9`.
    pub name: String,
    /// `/usr/lib/x86_64-linux-gnu/libcudnn.so.9`.
    pub path: String,
    /// What `ldconfig -p` lists in parentheses: `libc6,x86-64`; a 32-bit copy of the same
    /// library (the driver ships both) says `libc6`.
    #[serde(default)]
    pub abi: String,
}

/// Versions read from headers, files and names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LibVersion {
    /// A cuDNN version.
    Cudnn(CudnnVersion),
    /// An NCCL version.
    Nccl(NcclVersion),
}

/// A glibc version with where it was read.
pub type Glibc = GlibcVersion;
