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
    /// The PCIe generation the card itself can reach (`max_device_link_gen`): with
    /// [`GpuInfo::pcie_gen_host_max`] it tells a Gen4 card in a Gen3 slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen_device_max: Option<u32>,
    /// The PCIe generation the slot (the host side of the link) can reach
    /// (`max_host_link_gen`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gen_host_max: Option<u32>,
    /// What the GPU is doing now: memory, processes, power, temperature, throttling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<GpuState>,
}

/// A GPU's state when it was probed. Every field is `None` when the source did not say;
/// an empty list is a reading ("no process"), not a missing one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuState {
    /// Where these readings came from (`nvidia-smi -q -x`, `nvml`; `nvml, nvidia-smi -q -x`
    /// when NVML's readings were completed from the XML).
    pub source: String,
    /// Memory in use, MiB (what `nvidia-smi` shows as used; the driver's reservation is
    /// apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_mib: Option<u64>,
    /// GPU utilization, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_pct: Option<u32>,
    /// The performance state (`P0`..`P12`; `P8` and above is idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pstate: Option<String>,
    /// Power drawn now, watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_draw_w: Option<f64>,
    /// The power limit in force, watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<f64>,
    /// The limit the board ships with, watts (a lower `power_limit_w` was set by someone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_default_limit_w: Option<f64>,
    /// GPU core temperature, degrees C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// The temperature at which the GPU slows itself down, degrees C, as the card reports
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_slowdown_c: Option<u32>,
    /// Clock-event (throttle) reasons active now; `None` when not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<Vec<Throttle>>,
    /// Persistence mode on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<bool>,
    /// Processes holding GPU memory; `None` when not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<GpuProcess>>,
    /// How the GPU's memory has been repaired (retired pages, remapped rows), and which
    /// health features the GPU has at all; `None` when the report has no such section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<MemoryRepair>,
}

/// What `nvidia-smi -q -x` says of the GPU's memory repairs (`retired_pages`,
/// `remapped_rows`) and of the features that make a health reading meaningful. Each field
/// is `None` when the report says `N/A` or nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRepair {
    /// Pages retired after double-bit (uncorrectable) ECC errors.
    pub retired_double_bit: Option<u64>,
    /// Pages retired after repeated single-bit errors.
    pub retired_single_bit: Option<u64>,
    /// A page waits to be retired at the next driver load (`pending_retirement`).
    pub retirement_pending: Option<bool>,
    /// A row waits to be remapped at the next GPU reset (`remapped_row_pending`).
    pub remap_pending: Option<bool>,
    /// A remap failed: the bank has no spare row left (`remapped_row_failure`).
    pub remap_failure: Option<bool>,
    /// Rows remapped after uncorrectable errors (`remapped_row_unc`).
    pub remapped_uncorrectable: Option<u64>,
    /// `false` where `mig_mode` reads `N/A`: the GPU has no MIG, so MIG cannot be on.
    pub mig_supported: Option<bool>,
    /// `false` where `ecc_mode` reads `N/A`: the GPU has no ECC, so no error is counted.
    pub ecc_supported: Option<bool>,
}

/// Why the GPU runs its clocks below the maximum (`clocks_event_reasons`, formerly
/// `clocks_throttle_reasons`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Throttle {
    /// Nothing to do: normal at idle.
    GpuIdle,
    /// Application clocks were set lower.
    ApplicationsClocks,
    /// The software power cap (the power limit) holds the clocks.
    SwPowerCap,
    /// Hardware slowdown: too hot, or the power supply asserted the brake.
    HwSlowdown,
    /// Hardware thermal slowdown.
    HwThermal,
    /// Hardware power brake slowdown (an external signal, often the PSU).
    HwPowerBrake,
    /// Software thermal slowdown (over the target temperature).
    SwThermal,
    /// Sync boost (clocks held with other GPUs).
    SyncBoost,
    /// Display clock setting.
    DisplayClocks,
}

impl Throttle {
    /// A reason that costs speed on a machine at work: heat, power brake or a hardware
    /// slowdown (idle, application clocks and sync boost are settings, not faults).
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            Throttle::HwSlowdown | Throttle::HwThermal | Throttle::HwPowerBrake | Throttle::SwThermal
        )
    }
}

/// A process holding GPU memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Its process id (in the host's namespace, as the driver sees it).
    pub pid: u32,
    /// Its name or command path.
    pub name: String,
    /// `C` (compute), `G` (graphics) or `C+G`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// GPU memory it holds, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_mib: Option<u64>,
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

/// The matrix of `nvidia-smi topo -m`: GPU to GPU, GPU to NIC, and each GPU's affinity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Row labels, `GPU0`, `GPU1`...
    pub gpus: Vec<String>,
    /// `links[i][j]`: how GPU i reaches GPU j.
    pub links: Vec<Vec<Link>>,
    /// The NICs of the matrix, in column order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<TopoNic>,
    /// `nic_links[i][k]`: how GPU i reaches NIC k.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic_links: Vec<Vec<Link>>,
    /// Each GPU's CPU affinity as printed (`0-55,112-167`); `None` for `N/A` or absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_affinity: Vec<Option<String>>,
    /// Each GPU's NUMA node(s) as printed (`0`, `0-1`); `None` for `N/A` or absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa_affinity: Vec<Option<String>>,
}

/// A NIC column of `nvidia-smi topo -m`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoNic {
    /// The label in the matrix (`NIC0`, or `mlx5_0` on older drivers).
    pub label: String,
    /// The device the legend names for it (`mlx5_0`), where there is a legend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// One GPU's NVLinks, as `nvidia-smi nvlink -s` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLinkGpu {
    /// The GPU index.
    pub gpu: u32,
    /// Its links, by number.
    pub links: Vec<NvLinkLane>,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLinkLane {
    /// The link number.
    pub link: u32,
    /// Up (`false` for `<inactive>`).
    pub active: bool,
    /// Its speed, GB/s per direction, when active (`26.562` on H100: NVLink 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_gb_s: Option<f64>,
}

/// The machine's network: RDMA devices, Ethernet interfaces and GPUDirect RDMA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// RDMA ports (`/sys/class/infiniband/*/ports/*`).
    #[serde(default)]
    pub rdma: Vec<RdmaPort>,
    /// Network interfaces other than loopback and virtual ones (`/sys/class/net/*`).
    #[serde(default)]
    pub interfaces: Vec<NetInterface>,
    /// Whether `nvidia_peermem` (GPUDirect RDMA) is loaded (`/proc/modules`); `None` when
    /// the module list could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peermem: Option<bool>,
}

/// One port of an RDMA device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RdmaPort {
    /// The device (`mlx5_0`).
    pub device: String,
    /// The port number.
    pub port: u32,
    /// `InfiniBand` or `Ethernet` (RoCE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_layer: Option<String>,
    /// `ACTIVE`, `DOWN`, `INIT`... (the word of `4: ACTIVE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The rate in Gb/s (`200 Gb/sec (4X HDR)` gives 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbps: Option<f64>,
    /// The sysfs directory read.
    pub source: String,
}

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetInterface {
    /// `eth0`, `ens1f0np0`.
    pub name: String,
    /// Link speed, Mb/s; `None` when down or unknown (the kernel's `-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    /// The kernel driver (`mlx5_core`, `ice`), from the device's `uevent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// `up`, `down`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operstate: Option<String>,
    /// The sysfs directory read.
    pub source: String,
}

/// What a filesystem is stored on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskMedia {
    /// An NVMe drive.
    Nvme,
    /// A non-rotational drive that is not NVMe (SATA/SAS SSD, or a virtual disk that says
    /// it does not rotate).
    Ssd,
    /// A rotational drive.
    Hdd,
    /// A network filesystem.
    Network,
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
    /// NUMA nodes (`/sys/devices/system/node/node*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_nodes: Option<u32>,
}

/// One mounted filesystem (`df -PkT`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The whole block device under it (`nvme0n1` for `/dev/nvme0n1p2`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// What it is stored on, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<DiskMedia>,
    /// Where `media` was read (`/sys/block/sda/queue/rotational`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_source: Option<String>,
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
