//! What was ordered, read as people write it: the `--order` TOML file and the `--expect-*`
//! flags go through one value parser, so `gpu_memory = "80GB"` in a file and
//! `--expect-gpu-memory 80GB` on the command line mean the same.
//!
//! Units, and why. A bare number is in the item's own unit: GB as sold per GPU for
//! `gpu_memory`, GiB for `memory`, GB for `disk`. A string may carry its unit, in any case
//! and with or without a space (`"80GB"`, `"1 TB"`, `"1.8TiB"`, `"81920MiB"`). What a unit
//! means depends on what is measured, because vendors sell them differently:
//! - memory (`memory`, `gpu_memory`) is sold in binary sizes: a "1 TB" server holds
//!   1024 GiB of DIMMs, an "80 GB" H100 80 GiB of HBM. There `M`/`MB`/`MiB`, `G`/`GB`/`GiB`
//!   and `T`/`TB`/`TiB` are all binary: 1 TB = 1024 GiB.
//! - disks are sold in decimal sizes: `GB` is 10^9 bytes and `TB` 10^12 (1 TB = 1000 GB);
//!   `GiB` and `TiB` are converted (1 TiB = 1099.5 GB).
//!
//! Counts (`gpus`, `cpus`, `sockets`, `pcie_gen`) are whole numbers above zero, as a number
//! or a string (`"8"`). Negative, zero, NaN and infinite values, empty strings and unknown
//! units are bad input.
//!
//! The machine's layout, read as listings write it: `nvlink` is `true`/`"all"` (every GPU
//! pair by NVLink) or a number of links each pair must have at least (`12`); `topology` is
//! `"nvswitch"` or `"pcie"`; `rdma` is `true` or the rate of a port (`"200G"`, `"400Gb/s"`);
//! `nic_speed` is a rate (`"100G"`, `"25GbE"`; a bare number is Gb/s); `data_disk_type` is
//! `"nvme"`, `"ssd"` or `"hdd"`; `system_disk` and `data_disk` are disk sizes (decimal, as
//! `disk`); `cpu_model` is text the CPU's model name must contain (`"EPYC 7T83"`, or a
//! pattern with `*`), and `"2x EPYC 7T83"` also asks for two sockets; `cuda` is the CUDA
//! version the driver must support (`"12.4"`); `container_runtime` is `true`. A `false` asks
//! for nothing, so it is refused: leave the key out instead.
//!
//! Health is part of every order without being written (see [`super::health`]);
//! `health_allow = ["mig", "unknown"]` relaxes the health items it names (`unknown`: every
//! health fact that cannot be read), and is not an item: an order of nothing else is empty.
//!
//! Owns: the keys of an order, their types and units, and every message about a bad one
//! (file, line, key, an excerpt of the value, and what was expected). Must not: read files (the caller
//! hands over the text), judge a host, or read a GPU name or a driver requirement beyond
//! "a non-empty string" (the lookup and the specifier parser do that when the order is
//! checked).

use std::collections::BTreeMap;
use std::fmt;

use toml::de::{DeTable, DeValue};

use crate::text::excerpt;

/// One thing an order can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    /// The GPU model.
    Gpu,
    /// How many GPUs.
    Gpus,
    /// Memory per GPU.
    GpuMemory,
    /// The driver.
    Driver,
    /// Logical CPUs.
    Cpus,
    /// System memory.
    Memory,
    /// Disk capacity.
    Disk,
    /// The CUDA version the driver supports, at least.
    Cuda,
    /// The PCIe generation every GPU's link can run at, at least.
    PcieGen,
    /// NVLink between every GPU pair, or at least N links per pair.
    Nvlink,
    /// How the GPUs are connected: through NVSwitch, or over PCIe.
    Topology,
    /// Words of the CPU model name.
    CpuModel,
    /// CPU sockets.
    Sockets,
    /// The system (root) disk's size.
    SystemDisk,
    /// The data disk's size: a filesystem apart from the system disk.
    DataDisk,
    /// What the data disk is: NVMe, SSD or HDD.
    DataDiskType,
    /// An RDMA port up, optionally at a rate.
    Rdma,
    /// A network interface at least this fast.
    NicSpeed,
    /// Docker hands the GPUs to containers (the NVIDIA runtime or CDI).
    ContainerRuntime,
    /// Every measured figure within its expected range (`gpuenv bench`).
    Bench,
    /// Dense matmul, TFLOPS, on every GPU (the best precision measured).
    MinMatmulTflops,
    /// Device memory bandwidth, GB/s, on every GPU.
    MinMemoryBandwidth,
    /// NCCL all_reduce bus bandwidth, GB/s.
    MinNcclBusbw,
    /// Peer-to-peer bandwidth, GB/s, of every GPU pair measured.
    MinP2pBandwidth,
    /// Sequential read of the data disk, GB/s.
    MinDiskRead,
    /// Sequential write of the data disk, GB/s.
    MinDiskWrite,
    /// Network throughput to a peer, Gb/s as links are sold.
    MinNetwork,
}

/// What `nvlink` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvlinkWant {
    /// Every GPU pair linked by NVLink.
    All,
    /// Every GPU pair linked by at least this many NVLinks.
    AtLeast(u32),
}

/// What `topology` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyWant {
    /// The GPUs share an NVSwitch fabric (HGX/DGX boards).
    Nvswitch,
    /// PCIe cards: every pair reaches the other over PCIe or better.
    Pcie,
}

/// What a disk is, from slowest to fastest: an order for one is met by it or a faster one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiskKind {
    /// Rotational.
    Hdd,
    /// Flash, not NVMe.
    Ssd,
    /// NVMe flash.
    Nvme,
}

impl DiskKind {
    /// The word in an order.
    pub fn word(self) -> &'static str {
        match self {
            DiskKind::Hdd => "hdd",
            DiskKind::Ssd => "ssd",
            DiskKind::Nvme => "nvme",
        }
    }
}

/// A network rate ordered, Gb/s, with its text when it carried a unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// Gb/s.
    pub gbps: f64,
    /// The text as written (`200G`) when it carried a unit.
    pub written: Option<String>,
}

impl Item {
    /// Every item, in the order acceptance reports them.
    pub const ALL: [Item; 27] = [
        Item::Gpu,
        Item::Gpus,
        Item::GpuMemory,
        Item::Driver,
        Item::Cuda,
        Item::PcieGen,
        Item::Nvlink,
        Item::Topology,
        Item::Cpus,
        Item::CpuModel,
        Item::Sockets,
        Item::Memory,
        Item::Disk,
        Item::SystemDisk,
        Item::DataDisk,
        Item::DataDiskType,
        Item::Rdma,
        Item::NicSpeed,
        Item::ContainerRuntime,
        Item::Bench,
        Item::MinMatmulTflops,
        Item::MinMemoryBandwidth,
        Item::MinNcclBusbw,
        Item::MinP2pBandwidth,
        Item::MinDiskRead,
        Item::MinDiskWrite,
        Item::MinNetwork,
    ];

    /// The items that measured figures decide (`gpuenv bench`), not the host's facts.
    pub const BENCH: [Item; 8] = [
        Item::Bench,
        Item::MinMatmulTflops,
        Item::MinMemoryBandwidth,
        Item::MinNcclBusbw,
        Item::MinP2pBandwidth,
        Item::MinDiskRead,
        Item::MinDiskWrite,
        Item::MinNetwork,
    ];

    /// The key in an order file, and the `item` of an acceptance line.
    pub fn key(self) -> &'static str {
        match self {
            Item::Gpu => "gpu",
            Item::Gpus => "gpus",
            Item::GpuMemory => "gpu_memory",
            Item::Driver => "driver",
            Item::Cpus => "cpus",
            Item::Memory => "memory",
            Item::Disk => "disk",
            Item::Cuda => "cuda",
            Item::PcieGen => "pcie_gen",
            Item::Nvlink => "nvlink",
            Item::Topology => "topology",
            Item::CpuModel => "cpu_model",
            Item::Sockets => "sockets",
            Item::SystemDisk => "system_disk",
            Item::DataDisk => "data_disk",
            Item::DataDiskType => "data_disk_type",
            Item::Rdma => "rdma",
            Item::NicSpeed => "nic_speed",
            Item::ContainerRuntime => "container_runtime",
            Item::Bench => "bench",
            Item::MinMatmulTflops => "min_matmul_tflops",
            Item::MinMemoryBandwidth => "min_memory_bandwidth",
            Item::MinNcclBusbw => "min_nccl_busbw",
            Item::MinP2pBandwidth => "min_p2p_bandwidth",
            Item::MinDiskRead => "min_disk_read",
            Item::MinDiskWrite => "min_disk_write",
            Item::MinNetwork => "min_network",
        }
    }

    /// The `check` flag that sets it.
    pub fn flag(self) -> &'static str {
        match self {
            Item::Gpu => "--expect-gpu",
            Item::Gpus => "--expect-gpus",
            Item::GpuMemory => "--expect-gpu-memory",
            Item::Driver => "--expect-driver",
            Item::Cpus => "--expect-cpus",
            Item::Memory => "--expect-memory",
            Item::Disk => "--expect-disk",
            Item::Cuda => "--expect-cuda",
            Item::PcieGen => "--expect-pcie-gen",
            Item::Nvlink => "--expect-nvlink",
            Item::Topology => "--expect-topology",
            Item::CpuModel => "--expect-cpu-model",
            Item::Sockets => "--expect-sockets",
            Item::SystemDisk => "--expect-system-disk",
            Item::DataDisk => "--expect-data-disk",
            Item::DataDiskType => "--expect-data-disk-type",
            Item::Rdma => "--expect-rdma",
            Item::NicSpeed => "--expect-nic-speed",
            Item::ContainerRuntime => "--expect-container-runtime",
            Item::Bench => "--expect-bench",
            Item::MinMatmulTflops => "--expect-min-matmul-tflops",
            Item::MinMemoryBandwidth => "--expect-min-memory-bandwidth",
            Item::MinNcclBusbw => "--expect-min-nccl-busbw",
            Item::MinP2pBandwidth => "--expect-min-p2p-bandwidth",
            Item::MinDiskRead => "--expect-min-disk-read",
            Item::MinDiskWrite => "--expect-min-disk-write",
            Item::MinNetwork => "--expect-min-network",
        }
    }

    fn from_key(key: &str) -> Option<Item> {
        Item::ALL.into_iter().find(|i| i.key() == key)
    }

    /// What a value must be, in words.
    fn wanted(self) -> &'static str {
        match self {
            Item::Gpu => "the GPU model as a string",
            Item::Gpus => "a whole number of GPUs above 0",
            Item::GpuMemory => {
                "the memory per GPU as sold: a number of GB, or a string with its unit (\"80GB\", \
                 \"80GiB\", \"81920MiB\"); GPU memory is sold in binary sizes, so a GB here is a GiB"
            }
            Item::Driver => "the driver version or requirement as a string",
            Item::Cpus => "a whole number of logical CPUs above 0",
            Item::Memory => {
                "the memory as a number of GiB, or a string with its unit (\"512GB\", \"1TB\"); \
                 memory is sold in binary sizes, so 1 TB = 1024 GiB"
            }
            Item::Disk | Item::SystemDisk | Item::DataDisk => {
                "the disk size as a number of GB, or a string with its unit (\"2TB\", \"1.8TiB\"); \
                 disks are sold in decimal sizes, so 1 TB = 1000 GB"
            }
            Item::Cuda => "the CUDA version the driver must support, as a string (\"12.4\")",
            Item::PcieGen => "a PCIe generation, a whole number from 1 to 7",
            Item::Nvlink => {
                "true or \"all\" (every GPU pair by NVLink), or the number of NVLinks each pair must \
                 have at least"
            }
            Item::Topology => "\"nvswitch\" or \"pcie\"",
            Item::CpuModel => {
                "words of the CPU model name as a string (\"EPYC 7T83\", \"2x EPYC 7T83\", \"2路EPYC 7T83\", \"Xeon*8480\")"
            }
            Item::Sockets => "a whole number of CPU sockets above 0",
            Item::DataDiskType => "\"nvme\", \"ssd\" or \"hdd\"",
            Item::Rdma => "true, or the rate of an RDMA port (\"200G\", \"400Gb/s\")",
            Item::NicSpeed => "a network rate (\"100G\", \"25GbE\", \"100Gb/s\"); a bare number is Gb/s",
            Item::ContainerRuntime => "true",
            Item::Bench => "true (every measured figure within its expected range)",
            Item::MinMatmulTflops => {
                "dense matmul TFLOPS per GPU: a number of TFLOPS, or a string with its unit (\"700TFLOPS\", \"0.7PFLOPS\")"
            }
            Item::MinMemoryBandwidth
            | Item::MinNcclBusbw
            | Item::MinP2pBandwidth
            | Item::MinDiskRead
            | Item::MinDiskWrite => {
                "a bandwidth in bytes a second: a number of GB/s, or a string with its unit (\"2.5TB/s\", \"800MB/s\", \"3GiB/s\"); decimal, 1 GB/s = 10^9 bytes/s"
            }
            Item::MinNetwork => {
                "a network rate (\"100G\", \"25Gb/s\", \"400Mbps\"); a bare number is Gb/s, as links are sold"
            }
        }
    }

    /// A good value, as it would be written in a file and on the command line.
    fn example(self) -> (&'static str, &'static str) {
        match self {
            Item::Gpu => ("\"H100 SXM\"", "\"H100 SXM\""),
            Item::Gpus => ("8", "8"),
            Item::GpuMemory => ("80", "80"),
            Item::Driver => ("\">=535\"", "'>=535'"),
            Item::Cpus => ("64", "64"),
            Item::Memory => ("512", "512"),
            Item::Disk => ("2000", "2000"),
            Item::Cuda => ("\"12.4\"", "12.4"),
            Item::PcieGen => ("4", "4"),
            Item::Nvlink => ("\"all\"", "all"),
            Item::Topology => ("\"nvswitch\"", "nvswitch"),
            Item::CpuModel => ("\"EPYC 7T83\"", "'EPYC 7T83'"),
            Item::Sockets => ("2", "2"),
            Item::SystemDisk => ("500", "500GB"),
            Item::DataDisk => ("\"4TB\"", "4TB"),
            Item::DataDiskType => ("\"nvme\"", "nvme"),
            Item::Rdma => ("\"200G\"", "200G"),
            Item::NicSpeed => ("\"100G\"", "100G"),
            Item::ContainerRuntime => ("true", ""),
            Item::Bench => ("true", ""),
            Item::MinMatmulTflops => ("700", "700"),
            Item::MinMemoryBandwidth => ("\"2.5TB/s\"", "2.5TB/s"),
            Item::MinNcclBusbw => ("350", "350"),
            Item::MinP2pBandwidth => ("300", "300GB/s"),
            Item::MinDiskRead => ("\"2GB/s\"", "2GB/s"),
            Item::MinDiskWrite => ("\"1GB/s\"", "1GB/s"),
            Item::MinNetwork => ("\"100G\"", "100G"),
        }
    }

    fn units(self) -> Option<&'static [(&'static str, f64)]> {
        match self {
            Item::GpuMemory | Item::Memory => Some(BINARY),
            Item::Disk | Item::SystemDisk | Item::DataDisk => Some(DECIMAL),
            Item::Rdma | Item::NicSpeed | Item::MinNetwork => Some(RATES),
            Item::MinMatmulTflops => Some(FLOPS),
            Item::MinMemoryBandwidth
            | Item::MinNcclBusbw
            | Item::MinP2pBandwidth
            | Item::MinDiskRead
            | Item::MinDiskWrite => Some(BYTES_PER_SECOND),
            _ => None,
        }
    }

    /// The unit a [`Size`] of this item is kept in.
    pub fn unit(self) -> &'static str {
        match self {
            Item::GpuMemory => "GB",
            Item::Memory => "GiB",
            Item::MinMatmulTflops => "TFLOPS",
            Item::MinMemoryBandwidth
            | Item::MinNcclBusbw
            | Item::MinP2pBandwidth
            | Item::MinDiskRead
            | Item::MinDiskWrite => "GB/s",
            Item::MinNetwork => "Gb/s",
            _ => "GB",
        }
    }
}

/// Units of memory, in GiB: binary, whatever the spelling.
const BINARY: &[(&str, f64)] = &[
    ("", 1.0),
    ("m", 1.0 / 1024.0),
    ("mb", 1.0 / 1024.0),
    ("mi", 1.0 / 1024.0),
    ("mib", 1.0 / 1024.0),
    ("g", 1.0),
    ("gb", 1.0),
    ("gi", 1.0),
    ("gib", 1.0),
    ("t", 1024.0),
    ("tb", 1024.0),
    ("ti", 1024.0),
    ("tib", 1024.0),
];

/// Units of disk, in GB (10^9 bytes): decimal, except the binary spellings.
const DECIMAL: &[(&str, f64)] = &[
    ("", 1.0),
    ("m", 1e-3),
    ("mb", 1e-3),
    ("mi", 1_048_576.0 / 1e9),
    ("mib", 1_048_576.0 / 1e9),
    ("g", 1.0),
    ("gb", 1.0),
    ("gi", 1_073_741_824.0 / 1e9),
    ("gib", 1_073_741_824.0 / 1e9),
    ("t", 1000.0),
    ("tb", 1000.0),
    ("ti", 1_099_511_627_776.0 / 1e9),
    ("tib", 1_099_511_627_776.0 / 1e9),
];

/// Network rates, in Gb/s: decimal, as links are sold (`200G` is 200 Gb/s; `GbE` is how
/// Ethernet NICs are named).
const RATES: &[(&str, f64)] = &[
    ("", 1.0),
    ("m", 1e-3),
    ("mb", 1e-3),
    ("mbps", 1e-3),
    ("mb/s", 1e-3),
    ("mbit", 1e-3),
    ("mbit/s", 1e-3),
    ("g", 1.0),
    ("gb", 1.0),
    ("gbe", 1.0),
    ("gbps", 1.0),
    ("gb/s", 1.0),
    ("gbit", 1.0),
    ("gbit/s", 1.0),
    ("t", 1000.0),
    ("tb", 1000.0),
    ("tbps", 1000.0),
    ("tb/s", 1000.0),
];

/// Matmul throughput, in TFLOPS.
const FLOPS: &[(&str, f64)] = &[
    ("", 1.0),
    ("tflops", 1.0),
    ("tflop/s", 1.0),
    ("gflops", 1e-3),
    ("gflop/s", 1e-3),
    ("pflops", 1000.0),
    ("pflop/s", 1000.0),
];

/// Bandwidth in bytes a second, in GB/s (10^9 bytes/s): decimal, as nvbandwidth,
/// nccl-tests and fio count, with the binary spellings converted. Units are read without
/// case, so `GB/s` is bytes here; a network rate in bits is `min_network`'s.
const BYTES_PER_SECOND: &[(&str, f64)] = &[
    ("", 1.0),
    ("mb/s", 1e-3),
    ("mib/s", 1_048_576.0 / 1e9),
    ("gb/s", 1.0),
    ("gib/s", 1_073_741_824.0 / 1e9),
    ("tb/s", 1000.0),
    ("tib/s", 1_099_511_627_776.0 / 1e9),
];

/// A size ordered, in its item's unit (see [`Item::unit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Size {
    /// The amount: GB as sold (= GiB) for `gpu_memory`, GiB for `memory`, GB for `disk`.
    pub value: f64,
    /// The text as written when it carried a unit (`1TB`), so the conversion can be shown.
    pub written: Option<String>,
}

/// What was ordered, to check the delivered host against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    /// GPU model (name or alias).
    pub gpu: Option<String>,
    /// Number of GPUs.
    pub gpus: Option<u32>,
    /// Memory per GPU, as sold.
    pub gpu_memory: Option<Size>,
    /// Driver version or requirement (`>=535`).
    pub driver: Option<String>,
    /// Logical CPUs.
    pub cpus: Option<u32>,
    /// System memory.
    pub memory: Option<Size>,
    /// Disk capacity over all real filesystems.
    pub disk: Option<Size>,
    /// The CUDA version the driver must support.
    pub cuda: Option<crate::model::CudaVersion>,
    /// The PCIe generation every GPU link can run at.
    pub pcie_gen: Option<u32>,
    /// NVLink between the GPUs.
    pub nvlink: Option<NvlinkWant>,
    /// How the GPUs are connected.
    pub topology: Option<TopologyWant>,
    /// Words of the CPU model name (a `2x` in front read into `sockets`).
    pub cpu_model: Option<String>,
    /// CPU sockets.
    pub sockets: Option<u32>,
    /// The system disk's size, GB.
    pub system_disk: Option<Size>,
    /// The data disk's size, GB.
    pub data_disk: Option<Size>,
    /// What the data disk is, at least.
    pub data_disk_type: Option<DiskKind>,
    /// An RDMA port up, at least at this rate when one is given.
    pub rdma: Option<Option<Rate>>,
    /// A network interface at least this fast.
    pub nic_speed: Option<Rate>,
    /// Docker hands the GPUs to containers.
    pub container_runtime: bool,
    /// Every measured figure within its expected range.
    pub bench: bool,
    /// Floors on measured figures, each in its item's unit ([`Item::unit`]).
    pub bench_floors: BTreeMap<Item, Size>,
    /// Health items the order relaxes (`mig`, `processes`..., or `unknown` for every
    /// fact that cannot be read); see [`super::health::Health::word`].
    pub health_allow: Vec<String>,
    /// Where `health_allow` was written (the file's line, or `--allow-health`).
    health_allow_at: Option<String>,
    /// Where each item was read (an order file's line and key, or a flag), for messages.
    origins: BTreeMap<Item, String>,
}

/// A value read for one item.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Text(String),
    Count(u32),
    Size(Size),
    Cuda(crate::model::CudaVersion),
    Nvlink(NvlinkWant),
    Topology(TopologyWant),
    DiskKind(DiskKind),
    /// `rdma`: `None` for `true`.
    Rdma(Option<Rate>),
    Rate(Rate),
    Yes,
}

impl Expect {
    /// Whether anything is expected.
    pub fn is_empty(&self) -> bool {
        self.gpu.is_none()
            && self.gpus.is_none()
            && self.gpu_memory.is_none()
            && self.driver.is_none()
            && self.cpus.is_none()
            && self.memory.is_none()
            && self.disk.is_none()
            && self.cuda.is_none()
            && self.pcie_gen.is_none()
            && self.nvlink.is_none()
            && self.topology.is_none()
            && self.cpu_model.is_none()
            && self.sockets.is_none()
            && self.system_disk.is_none()
            && self.data_disk.is_none()
            && self.data_disk_type.is_none()
            && self.rdma.is_none()
            && self.nic_speed.is_none()
            && !self.container_runtime
            && !self.bench
            && self.bench_floors.is_empty()
    }

    /// Whether the order asks for measured figures (`bench = true` or a floor).
    pub fn wants_bench(&self) -> bool {
        self.bench || !self.bench_floors.is_empty()
    }

    /// Where the health relaxations were written, as the items' text names it.
    pub fn health_allow_origin(&self) -> String {
        self.health_allow_at
            .clone()
            .unwrap_or_else(|| "the order".to_string())
    }

    /// Relaxes one health item (a word of [`super::health::Health::word`] or `unknown`),
    /// as `--allow-health` does; the error names the flag and the words known.
    pub fn allow_health(&mut self, word: &str) -> Result<(), String> {
        let word = word.trim();
        if super::health::Health::from_word(word).is_none() && word != super::health::ALLOW_UNKNOWN {
            return Err(format!(
                "--allow-health `{}`: not a health item; expected one of {}",
                excerpt(word),
                health_words()
            ));
        }
        if !self.health_allow.iter().any(|w| w == word) {
            self.health_allow.push(word.to_string());
        }
        self.health_allow_at = Some(match self.health_allow_at.take() {
            Some(at) if !at.contains("--allow-health") => format!("{at} and --allow-health"),
            Some(at) => at,
            None => "--allow-health".to_string(),
        });
        Ok(())
    }

    /// Where `item` was read: its line in the order file, or its flag.
    pub fn origin(&self, item: Item) -> String {
        self.origins
            .get(&item)
            .cloned()
            .unwrap_or_else(|| item.flag().to_string())
    }

    /// Sets `item` from the value of its `--expect-*` flag, replacing what an order file
    /// said. The error names the flag, the value and what was expected.
    pub fn set_flag(&mut self, item: Item, text: &str) -> Result<(), String> {
        let value = read(item, &Raw::Text(text)).map_err(|problem| {
            let (_, example) = item.example();
            format!(
                "{} `{}`: {problem}; expected {} (`{} {example}`)",
                item.flag(),
                excerpt(text),
                item.wanted(),
                item.flag()
            )
        })?;
        self.set(item, value, item.flag().to_string());
        Ok(())
    }

    fn set(&mut self, item: Item, value: Value, origin: String) {
        match (item, value) {
            (Item::Gpu, Value::Text(t)) => self.gpu = Some(t),
            (Item::Driver, Value::Text(t)) => self.driver = Some(t),
            (Item::Gpus, Value::Count(n)) => self.gpus = Some(n),
            (Item::Cpus, Value::Count(n)) => self.cpus = Some(n),
            (Item::GpuMemory, Value::Size(s)) => self.gpu_memory = Some(s),
            (Item::Memory, Value::Size(s)) => self.memory = Some(s),
            (Item::Disk, Value::Size(s)) => self.disk = Some(s),
            (Item::SystemDisk, Value::Size(s)) => self.system_disk = Some(s),
            (Item::DataDisk, Value::Size(s)) => self.data_disk = Some(s),
            (Item::Cuda, Value::Cuda(c)) => self.cuda = Some(c),
            (Item::PcieGen, Value::Count(n)) => self.pcie_gen = Some(n),
            (Item::Sockets, Value::Count(n)) => self.sockets = Some(n),
            (Item::Nvlink, Value::Nvlink(n)) => self.nvlink = Some(n),
            (Item::Topology, Value::Topology(t)) => self.topology = Some(t),
            (Item::DataDiskType, Value::DiskKind(k)) => self.data_disk_type = Some(k),
            (Item::Rdma, Value::Rdma(r)) => self.rdma = Some(r),
            (Item::NicSpeed, Value::Rate(r)) => self.nic_speed = Some(r),
            (Item::ContainerRuntime, Value::Yes) => self.container_runtime = true,
            (Item::Bench, Value::Yes) => self.bench = true,
            (
                Item::MinMatmulTflops
                | Item::MinMemoryBandwidth
                | Item::MinNcclBusbw
                | Item::MinP2pBandwidth
                | Item::MinDiskRead
                | Item::MinDiskWrite,
                Value::Size(s),
            ) => {
                self.bench_floors.insert(item, s);
            }
            (Item::MinNetwork, Value::Rate(r)) => {
                self.bench_floors.insert(
                    item,
                    Size {
                        value: r.gbps,
                        written: r.written,
                    },
                );
            }
            (Item::CpuModel, Value::Text(t)) => {
                // "2x EPYC 7T83", as orders name dual-socket machines, also asks for the
                // sockets, unless they were asked for on their own.
                let (count, words) = split_count(&t);
                if let Some(n) = count.filter(|_| self.sockets.is_none()) {
                    self.sockets = Some(n);
                    self.origins.insert(Item::Sockets, origin.clone());
                }
                self.cpu_model = Some(words);
            }
            // `read` gives each item its own kind of value.
            _ => return,
        }
        self.origins.insert(item, origin);
    }
}

/// An order file that cannot be read: every problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", problems.join("\n"))]
pub struct OrderError {
    /// Each problem, naming the file, the line and the key.
    pub problems: Vec<String>,
}

/// Reads an order file's text; `name` is how messages name the file. Every problem is
/// reported, not only the first.
pub fn parse_order(name: &str, text: &str) -> Result<Expect, OrderError> {
    let doc = DeTable::parse(text).map_err(|e| OrderError {
        problems: vec![format!(
            "order `{name}`{}: not valid TOML: {}",
            e.span()
                .map(|s| format!(" line {}", line_of(text, s.start)))
                .unwrap_or_default(),
            excerpt(e.message().trim())
        )],
    })?;
    let mut expect = Expect::default();
    let mut problems = Vec::new();
    for (key, value) in doc.get_ref().iter() {
        let name_of_key: &str = key.get_ref();
        if name_of_key == "health_allow" {
            let at = format!(
                "order `{name}` line {}, key `health_allow`",
                line_of(text, value.span().start)
            );
            match health_allow(value.get_ref()) {
                Ok(words) => {
                    expect.health_allow = words;
                    expect.health_allow_at = Some(at);
                }
                Err(problem) => problems.push(format!(
                    "{at}: {problem}; expected a list of {} (`health_allow = [\"mig\"]`)",
                    health_words()
                )),
            }
            continue;
        }
        let Some(item) = Item::from_key(name_of_key) else {
            problems.push(format!(
                "order `{name}` line {}: unknown key `{}`{}; an order has the keys {}",
                line_of(text, key.span().start),
                excerpt(name_of_key),
                suggestion(name_of_key),
                Item::ALL.map(Item::key).join(", ")
            ));
            continue;
        };
        let at = format!(
            "order `{name}` line {}, key `{name_of_key}`",
            line_of(text, value.span().start)
        );
        let raw = match value.get_ref() {
            DeValue::String(s) => Raw::Quoted(s),
            DeValue::Integer(i) => Raw::Number {
                value: i128::from_str_radix(i.as_str(), i.radix()).map_or(f64::NAN, |n| n as f64),
                text: i.to_string(),
                integer: true,
            },
            DeValue::Float(f) => Raw::Number {
                value: f.as_str().parse().unwrap_or(f64::NAN),
                text: f.as_str().to_string(),
                integer: false,
            },
            DeValue::Boolean(b) => Raw::Bool(*b),
            DeValue::Datetime(_) => Raw::Other("a date"),
            DeValue::Array(_) => Raw::Other("an array"),
            DeValue::Table(_) => Raw::Other("a table"),
        };
        match read(item, &raw) {
            Ok(v) => expect.set(item, v, at),
            Err(problem) => {
                let (example, _) = item.example();
                problems.push(format!(
                    "{at}: {problem}; expected {} (`{} = {example}`)",
                    item.wanted(),
                    item.key()
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(expect)
    } else {
        Err(OrderError { problems })
    }
}

/// The words a health relaxation may name.
fn health_words() -> String {
    super::health::Health::ALL
        .map(super::health::Health::word)
        .into_iter()
        .chain([super::health::ALLOW_UNKNOWN])
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `health_allow = ["mig", "unknown"]`: each word a health item or `unknown`.
fn health_allow(value: &DeValue<'_>) -> Result<Vec<String>, String> {
    let DeValue::Array(list) = value else {
        return Err("not a list".to_string());
    };
    let mut words = Vec::new();
    for v in list.iter() {
        let DeValue::String(w) = v.get_ref() else {
            return Err("an entry that is not a string".to_string());
        };
        let known = super::health::Health::from_word(w).is_some() || w == super::health::ALLOW_UNKNOWN;
        if !known {
            return Err(format!("`{}` is not a health item", excerpt(w)));
        }
        if !words.iter().any(|x: &String| x == w.as_ref()) {
            words.push(w.to_string());
        }
    }
    Ok(words)
}

/// A value as the file or the flag gave it.
enum Raw<'a> {
    /// A flag's text.
    Text(&'a str),
    /// A TOML string.
    Quoted(&'a str),
    /// A TOML number, with its text as written.
    Number { value: f64, text: String, integer: bool },
    /// A TOML boolean.
    Bool(bool),
    /// Anything else, named.
    Other(&'static str),
}

impl fmt::Display for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Raw::Text(t) => write!(f, "`{}`", excerpt(t)),
            Raw::Quoted(t) => write!(f, "`\"{}\"`", excerpt(t)),
            Raw::Number { text, .. } => write!(f, "`{}`", excerpt(text)),
            Raw::Bool(b) => write!(f, "`{b}`"),
            Raw::Other(what) => f.write_str(what),
        }
    }
}

/// Reads one value for `item`; the error says what is wrong with it, without the place.
fn read(item: Item, raw: &Raw<'_>) -> Result<Value, String> {
    if let Raw::Other(what) = raw {
        return Err(format!("found {what}"));
    }
    // `false` asks for nothing; a boolean means something only to the items that take one.
    match (raw, item) {
        (Raw::Bool(false), Item::Nvlink | Item::Rdma | Item::ContainerRuntime | Item::Bench) => {
            return Err("`false` asks for nothing: leave the key out instead".into());
        }
        (Raw::Bool(true), Item::Nvlink) => return Ok(Value::Nvlink(NvlinkWant::All)),
        (Raw::Bool(true), Item::Rdma) => return Ok(Value::Rdma(None)),
        (Raw::Bool(true), Item::ContainerRuntime | Item::Bench) => return Ok(Value::Yes),
        (Raw::Bool(_), _) => return Err("found a boolean".into()),
        _ => {}
    }
    let text = match raw {
        Raw::Text(t) | Raw::Quoted(t) => Some(t.trim()),
        _ => None,
    };
    let word = text.map(str::to_ascii_lowercase);
    match item {
        Item::ContainerRuntime | Item::Bench | Item::Rdma | Item::Nvlink
            if matches!(word.as_deref(), Some("true" | "yes")) =>
        {
            return Ok(match item {
                Item::ContainerRuntime | Item::Bench => Value::Yes,
                Item::Rdma => Value::Rdma(None),
                _ => Value::Nvlink(NvlinkWant::All),
            });
        }
        Item::ContainerRuntime | Item::Bench | Item::Rdma | Item::Nvlink
            if matches!(word.as_deref(), Some("false" | "no")) =>
        {
            return Err("`false` asks for nothing: leave the key out instead".into());
        }
        Item::ContainerRuntime | Item::Bench => return Err(format!("{raw} is not `true`")),
        Item::Nvlink if word.as_deref() == Some("all") => return Ok(Value::Nvlink(NvlinkWant::All)),
        Item::Nvlink => {
            let n = whole(raw, 64)?;
            return Ok(Value::Nvlink(NvlinkWant::AtLeast(n)));
        }
        Item::Topology => {
            return match word.as_deref() {
                Some("nvswitch") => Ok(Value::Topology(TopologyWant::Nvswitch)),
                Some("pcie") => Ok(Value::Topology(TopologyWant::Pcie)),
                Some(_) => Err(format!("{raw} is not a topology gpuenv knows")),
                None => Err(format!("{raw} is a number, not a string")),
            };
        }
        Item::DataDiskType => {
            return match word.as_deref() {
                Some("nvme") => Ok(Value::DiskKind(DiskKind::Nvme)),
                Some("ssd") => Ok(Value::DiskKind(DiskKind::Ssd)),
                Some("hdd") => Ok(Value::DiskKind(DiskKind::Hdd)),
                Some(_) => Err(format!("{raw} is not a kind of disk gpuenv knows")),
                None => Err(format!("{raw} is a number, not a string")),
            };
        }
        Item::Cuda => {
            let t = match raw {
                Raw::Number { text, .. } => text.as_str(),
                _ => text.unwrap_or_default(),
            };
            if t.is_empty() {
                return Err("the value is empty".into());
            }
            return t
                .parse::<crate::model::CudaVersion>()
                .map(Value::Cuda)
                .map_err(|e| format!("{raw} is not a CUDA version: {}", e.reason));
        }
        Item::CpuModel => {
            return match text {
                Some("") => Err("the value is empty".into()),
                Some(t) => Ok(Value::Text(t.to_string())),
                None => Err(format!("{raw} is a number, not a string")),
            };
        }
        Item::Sockets => return Ok(Value::Count(whole(raw, 64)?)),
        Item::PcieGen => {
            let n = whole(raw, 7)?;
            return Ok(Value::Count(n));
        }
        Item::Rdma | Item::NicSpeed | Item::MinNetwork => {
            let (gbps, unit) = number(raw, item.units())?;
            let rate = Rate {
                gbps,
                written: unit.map(|_| text.unwrap_or_default().to_string()),
            };
            return Ok(if item == Item::Rdma {
                Value::Rdma(Some(rate))
            } else {
                // `nic_speed` and `min_network` both take a rate.
                Value::Rate(rate)
            });
        }
        _ => {}
    }
    match item {
        Item::Gpu | Item::Driver => match raw {
            Raw::Text(t) | Raw::Quoted(t) if t.trim().is_empty() => Err("the value is empty".into()),
            Raw::Text(t) | Raw::Quoted(t) => Ok(Value::Text(t.trim().to_string())),
            // `driver = 535` is a branch written as a number; its text is the requirement.
            Raw::Number {
                text,
                integer: true,
                value,
            } if item == Item::Driver && *value > 0.0 => Ok(Value::Text(text.clone())),
            _ => Err(format!("{raw} is a number, not a string")),
        },
        Item::Gpus | Item::Cpus => {
            let n = number(raw, None)?.0;
            if n.fract() != 0.0 {
                return Err(format!("{raw} is not a whole number"));
            }
            // GPUs are counted per machine, as everywhere gpuenv reads a GPU count.
            let max = if item == Item::Gpus {
                crate::model::MAX_GPU_COUNT
            } else {
                u32::MAX
            };
            if n > f64::from(max) {
                return Err(if item == Item::Gpus {
                    format!("{raw} GPUs is more than the {max} one machine can hold")
                } else {
                    format!("{raw} is too large")
                });
            }
            Ok(Value::Count(n as u32))
        }
        // Read above, each in its own way.
        Item::Cuda
        | Item::PcieGen
        | Item::Nvlink
        | Item::Topology
        | Item::CpuModel
        | Item::Sockets
        | Item::DataDiskType
        | Item::Rdma
        | Item::NicSpeed
        | Item::MinNetwork
        | Item::Bench
        | Item::ContainerRuntime => Err(format!("{raw} cannot be read")),
        Item::GpuMemory
        | Item::Memory
        | Item::Disk
        | Item::SystemDisk
        | Item::DataDisk
        | Item::MinMatmulTflops
        | Item::MinMemoryBandwidth
        | Item::MinNcclBusbw
        | Item::MinP2pBandwidth
        | Item::MinDiskRead
        | Item::MinDiskWrite => {
            let (value, unit) = number(raw, item.units())?;
            Ok(Value::Size(Size {
                value,
                written: unit.map(|_| match raw {
                    Raw::Text(t) | Raw::Quoted(t) => t.trim().to_string(),
                    _ => raw.to_string(),
                }),
            }))
        }
    }
}

/// A positive, finite number in the item's unit, and the unit it was written with (when
/// one was). `units` is `None` for counts, which take none.
fn number(raw: &Raw<'_>, units: Option<&[(&str, f64)]>) -> Result<(f64, Option<String>), String> {
    let (value, unit) = match raw {
        Raw::Number { value, .. } => (*value, None),
        Raw::Text(t) | Raw::Quoted(t) => {
            let t = t.trim();
            if t.is_empty() {
                return Err("the value is empty".into());
            }
            let split = t
                .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
                .unwrap_or(t.len());
            let (num, unit) = t.split_at(split);
            let unit = unit.trim();
            let value: f64 = num.parse().map_err(|_| format!("{raw} is not a number"))?;
            if unit.is_empty() {
                (value, None)
            } else if !unit.chars().all(|c| c.is_ascii_alphabetic() || c == '/') {
                return Err(format!("{raw} is not a number"));
            } else {
                match units {
                    None => return Err(format!("{raw} is not a whole number")),
                    Some(table) => {
                        let lower = unit.to_ascii_lowercase();
                        let Some((_, factor)) = table.iter().find(|(u, _)| *u == lower) else {
                            return Err(format!("{raw} has an unknown unit `{}`", excerpt(unit)));
                        };
                        (value * factor, Some(unit.to_string()))
                    }
                }
            }
        }
        Raw::Other(what) => return Err(format!("found {what}")),
        Raw::Bool(_) => return Err("found a boolean".into()),
    };
    if value.is_nan() {
        return Err(format!("{raw} is not a number"));
    }
    if value.is_infinite() {
        return Err(format!("{raw} is not a finite number"));
    }
    if value < 0.0 {
        return Err(format!("{raw} is negative"));
    }
    if value == 0.0 {
        return Err(format!("{raw} is zero"));
    }
    Ok((value, unit))
}

/// A whole number from 1 to `max`.
fn whole(raw: &Raw<'_>, max: u32) -> Result<u32, String> {
    let n = number(raw, None)?.0;
    if n.fract() != 0.0 {
        return Err(format!("{raw} is not a whole number"));
    }
    if n > f64::from(max) {
        return Err(format!("{raw} is more than {max}"));
    }
    Ok(n as u32)
}

/// Chinese words for a socket count in front of a CPU model (`双路 EPYC 7T83`).
const SOCKET_WORDS: [(&str, u32); 5] = [("单路", 1), ("双路", 2), ("两路", 2), ("四路", 4), ("八路", 8)];

/// `"2x EPYC 7T83"`: the count in front and the rest. A count is written `2x`, `2 x`,
/// `2×`, `2*`, `2P` (each before a space), or as Chinese listings do, `2路EPYC` and
/// `双路 EPYC`.
pub fn split_count(text: &str) -> (Option<u32>, String) {
    let t = text.trim();
    for (word, n) in SOCKET_WORDS {
        if let Some(rest) = t.strip_prefix(word).filter(|r| !r.trim().is_empty()) {
            return (Some(n), rest.trim().to_string());
        }
    }
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits > 0 {
        let rest = t[digits..].trim_start();
        // `路` ("way") needs no space after it; a letter-like sign does, or `7763x` and
        // `7773P` would be counts.
        let after = rest
            .strip_prefix('路')
            .or_else(|| {
                ['x', 'X', '×', '*', 'P', 'p']
                    .iter()
                    .find_map(|c| rest.strip_prefix(*c))
                    .filter(|a| a.starts_with(char::is_whitespace))
            })
            .filter(|a| !a.trim().is_empty());
        if let Some(after) = after {
            if let Ok(n) = t[..digits].parse::<u32>() {
                if n > 0 {
                    return (Some(n), after.trim().to_string());
                }
            }
        }
    }
    (None, t.to_string())
}

/// ` (did you mean \`gpu_memory\`?)` for a key close to a known one.
fn suggestion(key: &str) -> String {
    let normal = key.to_ascii_lowercase().replace('-', "_");
    Item::ALL
        .into_iter()
        .map(|i| (strsim::levenshtein(&normal, i.key()), i.key()))
        .filter(|(d, k)| *d <= 3 && *d < k.len())
        .min()
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(text: &str) -> Result<Expect, String> {
        parse_order("order.toml", text).map_err(|e| e.to_string())
    }

    fn flag(item: Item, text: &str) -> Result<Expect, String> {
        let mut e = Expect::default();
        e.set_flag(item, text).map(|()| e)
    }

    fn size(v: f64, written: Option<&str>) -> Option<Size> {
        Some(Size {
            value: v,
            written: written.map(str::to_string),
        })
    }

    #[test]
    fn numbers_and_strings_with_units() {
        let e = order(
            "gpu = \"H100 SXM\"\ngpus = 8\ngpu_memory = \"80GB\"\ndriver = \">=535\"\ncpus = \"64\"\nmemory = \"1TB\"\ndisk = \"3.84 TB\"\n",
        )
        .unwrap();
        assert_eq!(e.gpu.as_deref(), Some("H100 SXM"));
        assert_eq!(e.gpus, Some(8));
        assert_eq!(e.gpu_memory, size(80.0, Some("80GB")));
        assert_eq!(e.driver.as_deref(), Some(">=535"));
        assert_eq!(e.cpus, Some(64));
        assert_eq!(e.memory, size(1024.0, Some("1TB")));
        assert_eq!(e.disk, size(3840.0, Some("3.84 TB")));
        assert_eq!(e.origin(Item::Memory), "order `order.toml` line 6, key `memory`");
        assert_eq!(e.origin(Item::Disk), "order `order.toml` line 7, key `disk`");

        // Plain numbers are in the item's unit; a float is a float.
        let e = order("gpu_memory = 80\nmemory = 1007.5\ndisk = 2000\n").unwrap();
        assert_eq!(e.gpu_memory, size(80.0, None));
        assert_eq!(e.memory, size(1007.5, None));
        assert_eq!(e.disk, size(2000.0, None));
    }

    #[test]
    fn memory_is_binary_and_disk_decimal() {
        for (text, gib) in [
            ("1TB", 1024.0),
            ("1 tb", 1024.0),
            ("1TiB", 1024.0),
            ("512G", 512.0),
            ("512 GiB", 512.0),
            ("512Gi", 512.0),
            ("524288MB", 512.0),
            ("0.5T", 512.0),
        ] {
            assert_eq!(
                flag(Item::Memory, text).unwrap().memory.map(|s| s.value),
                Some(gib),
                "{text}"
            );
        }
        assert_eq!(
            flag(Item::GpuMemory, "81920MiB")
                .unwrap()
                .gpu_memory
                .map(|s| s.value),
            Some(80.0)
        );
        for (text, gb) in [
            ("2TB", 2000.0),
            ("2 T", 2000.0),
            ("500GB", 500.0),
            ("1TiB", 1099.511627776),
            ("1GiB", 1.073741824),
            ("1500", 1500.0),
        ] {
            let got = flag(Item::Disk, text).unwrap().disk.unwrap().value;
            assert!((got - gb).abs() < 1e-9, "{text}: {got}");
        }
    }

    #[test]
    fn flags_and_files_read_values_the_same_way() {
        for (item, key, text) in [
            (Item::GpuMemory, "gpu_memory", "80G"),
            (Item::Memory, "memory", "1TB"),
            (Item::Disk, "disk", "1.8TiB"),
            (Item::Gpus, "gpus", "8"),
            (Item::Cpus, "cpus", "128"),
            (Item::Driver, "driver", "550.54.14"),
            (Item::Gpu, "gpu", "A100 80GB SXM"),
        ] {
            let from_flag = flag(item, text).unwrap();
            let from_file = order(&format!("{key} = \"{text}\"\n")).unwrap();
            assert_eq!(from_flag.gpu, from_file.gpu, "{key}");
            assert_eq!(from_flag.gpus, from_file.gpus, "{key}");
            assert_eq!(from_flag.gpu_memory, from_file.gpu_memory, "{key}");
            assert_eq!(from_flag.driver, from_file.driver, "{key}");
            assert_eq!(from_flag.cpus, from_file.cpus, "{key}");
            assert_eq!(from_flag.memory, from_file.memory, "{key}");
            assert_eq!(from_flag.disk, from_file.disk, "{key}");
            assert_eq!(from_flag.origin(item), item.flag());
        }
    }

    #[test]
    fn every_error_names_file_line_key_and_what_was_expected() {
        let e = order("gpu = \"H100\"\n\ngpu_memory = \"80X\"\n").unwrap_err();
        assert_eq!(
            e,
            "order `order.toml` line 3, key `gpu_memory`: `\"80X\"` has an unknown unit `X`; expected the \
             memory per GPU as sold: a number of GB, or a string with its unit (\"80GB\", \"80GiB\", \
             \"81920MiB\"); GPU memory is sold in binary sizes, so a GB here is a GiB (`gpu_memory = 80`)"
        );
        // Every problem, not only the first.
        let e = parse_order(
            "o.toml",
            "gpus = 0\ncpus = -4\nmemory = nan\ndisk = inf\ndriver = \"\"\ngpu = 4090\ncolour = \"green\"\ngpu_memroy = 80\n",
        )
        .unwrap_err();
        let lines: Vec<&str> = e.problems.iter().map(String::as_str).collect();
        assert_eq!(lines.len(), 8, "{lines:#?}");
        assert!(lines[0].starts_with("order `o.toml` line 1, key `gpus`: `0` is zero; expected a whole number of GPUs above 0 (`gpus = 8`)"), "{}", lines[0]);
        let e = parse_order("o.toml", "gpus = 99999999\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the 1024 one machine can hold"), "{e}");
        let e = flag(Item::Gpus, "2000").unwrap_err();
        assert!(e.contains("more than the 1024"), "{e}");
        assert!(
            lines[1].starts_with("order `o.toml` line 2, key `cpus`: `-4` is negative;"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].starts_with("order `o.toml` line 3, key `memory`: `nan` is not a number;"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].starts_with("order `o.toml` line 4, key `disk`: `inf` is not a finite number;"),
            "{}",
            lines[3]
        );
        assert!(
            lines[4].starts_with("order `o.toml` line 5, key `driver`: the value is empty;"),
            "{}",
            lines[4]
        );
        assert!(lines[5].starts_with("order `o.toml` line 6, key `gpu`: `4090` is a number, not a string; expected the GPU model as a string (`gpu = \"H100 SXM\"`)"), "{}", lines[5]);
        assert_eq!(
            lines[6],
            "order `o.toml` line 7: unknown key `colour`; an order has the keys gpu, gpus, gpu_memory, driver, cuda, pcie_gen, nvlink, topology, cpus, cpu_model, sockets, memory, disk, system_disk, data_disk, data_disk_type, rdma, nic_speed, container_runtime, bench, min_matmul_tflops, min_memory_bandwidth, min_nccl_busbw, min_p2p_bandwidth, min_disk_read, min_disk_write, min_network"
        );
        assert!(
            lines[7]
                .starts_with("order `o.toml` line 8: unknown key `gpu_memroy` (did you mean `gpu_memory`?)"),
            "{}",
            lines[7]
        );
    }

    #[test]
    fn bad_values_of_each_kind() {
        for (text, problem) in [
            ("gpus = 8.5", "`8.5` is not a whole number"),
            ("gpus = \"eight\"", "`\"eight\"` is not a number"),
            ("gpus = \"8x\"", "`\"8x\"` is not a whole number"),
            (
                "gpus = 99999999999",
                "`99999999999` GPUs is more than the 1024 one machine can hold",
            ),
            ("cpus = 99999999999", "`99999999999` is too large"),
            ("cpus = true", "found a boolean"),
            ("memory = \"-1TB\"", "`\"-1TB\"` is negative"),
            ("memory = \"1,024\"", "`\"1,024\"` is not a number"),
            ("memory = \"\"", "the value is empty"),
            ("memory = [512]", "found an array"),
            ("disk = \"2 XB\"", "`\"2 XB\"` has an unknown unit `XB`"),
            ("disk = 0.0", "`0.0` is zero"),
            ("disk = -inf", "`-inf` is not a finite number"),
            ("disk = 1979-05-27", "found a date"),
            ("driver = 535.104", "`535.104` is a number, not a string"),
            ("driver = -535", "`-535` is a number, not a string"),
            ("gpu = \"   \"", "the value is empty"),
            ("gpu = { name = \"H100\" }", "found a table"),
        ] {
            let e = order(text).unwrap_err();
            assert!(e.contains(&format!(": {problem}; expected ")), "{text}: {e}");
            assert!(e.starts_with("order `order.toml` line 1, key `"), "{text}: {e}");
        }
        // A whole number written as a float is still whole; a driver branch as a number
        // is its text.
        assert_eq!(order("gpus = 8.0").unwrap().gpus, Some(8));
        assert_eq!(order("driver = 535").unwrap().driver.as_deref(), Some("535"));
    }

    #[test]
    fn layout_keys_read_as_orders_write_them() {
        let e = order(
            "cuda = \"12.4\"\npcie_gen = 4\nnvlink = true\ntopology = \"NVSwitch\"\ncpu_model = \"2x EPYC 7T83\"\n\
             system_disk = \"480GB\"\ndata_disk = \"3.84TB\"\ndata_disk_type = \"NVMe\"\nrdma = \"400G\"\n\
             nic_speed = \"25GbE\"\ncontainer_runtime = true\n",
        )
        .unwrap();
        assert_eq!(e.cuda.as_ref().map(|c| c.to_string()).as_deref(), Some("12.4"));
        assert_eq!(e.pcie_gen, Some(4));
        assert_eq!(e.nvlink, Some(NvlinkWant::All));
        assert_eq!(e.topology, Some(TopologyWant::Nvswitch));
        // "2x" in front of a CPU model is the sockets.
        assert_eq!(e.cpu_model.as_deref(), Some("EPYC 7T83"));
        assert_eq!(e.sockets, Some(2));
        assert_eq!(
            e.origin(Item::Sockets),
            "order `order.toml` line 5, key `cpu_model`"
        );
        assert_eq!(e.system_disk, size(480.0, Some("480GB")));
        assert_eq!(e.data_disk, size(3840.0, Some("3.84TB")));
        assert_eq!(e.data_disk_type, Some(DiskKind::Nvme));
        assert_eq!(e.rdma.clone().flatten().map(|r| r.gbps), Some(400.0));
        assert_eq!(e.nic_speed.as_ref().map(|r| r.gbps), Some(25.0));
        assert!(e.container_runtime);
        assert!(!e.is_empty());

        // Other spellings of the same.
        let e = order("nvlink = 12\nrdma = true\nnic_speed = 100\nsockets = 2\ncpu_model = \"Xeon*8480*\"\n")
            .unwrap();
        assert_eq!(e.nvlink, Some(NvlinkWant::AtLeast(12)));
        assert_eq!(e.rdma, Some(None));
        assert_eq!(e.nic_speed.as_ref().map(|r| r.gbps), Some(100.0));
        assert_eq!(e.sockets, Some(2));
        assert_eq!(flag(Item::Nvlink, "all").unwrap().nvlink, Some(NvlinkWant::All));
        assert_eq!(
            flag(Item::Rdma, "200Gb/s")
                .unwrap()
                .rdma
                .flatten()
                .map(|r| r.gbps),
            Some(200.0)
        );
        assert_eq!(
            flag(Item::NicSpeed, "100 Gbps")
                .unwrap()
                .nic_speed
                .map(|r| r.gbps),
            Some(100.0)
        );
        assert_eq!(
            flag(Item::NicSpeed, "10000Mb/s")
                .unwrap()
                .nic_speed
                .map(|r| r.gbps),
            Some(10.0)
        );
        // A sockets key wins over the count in front of the model, wherever it is written.
        let e = order("sockets = 1\ncpu_model = \"2x EPYC 7T83\"\n").unwrap();
        assert_eq!(e.sockets, Some(1));
    }

    #[test]
    fn bad_layout_values_name_the_key() {
        for (text, problem) in [
            (
                "nvlink = false",
                "`false` asks for nothing: leave the key out instead",
            ),
            ("nvlink = \"some\"", "`\"some\"` is not a number"),
            ("nvlink = 0", "`0` is zero"),
            ("nvlink = 99", "`99` is more than 64"),
            ("topology = \"mesh\"", "`\"mesh\"` is not a topology gpuenv knows"),
            ("topology = 4", "`4` is a number, not a string"),
            ("pcie_gen = 9", "`9` is more than 7"),
            ("pcie_gen = 4.5", "`4.5` is not a whole number"),
            (
                "rdma = \"200 parsecs\"",
                "`\"200 parsecs\"` has an unknown unit `parsecs`",
            ),
            (
                "rdma = false",
                "`false` asks for nothing: leave the key out instead",
            ),
            ("nic_speed = \"-25G\"", "`\"-25G\"` is negative"),
            ("data_disk = \"-4TB\"", "`\"-4TB\"` is negative"),
            ("system_disk = \"1 XB\"", "`\"1 XB\"` has an unknown unit `XB`"),
            (
                "data_disk_type = \"tape\"",
                "`\"tape\"` is not a kind of disk gpuenv knows",
            ),
            ("cuda = \"twelve\"", "`\"twelve\"` is not a CUDA version"),
            ("cpu_model = 7763", "`7763` is a number, not a string"),
            ("sockets = -2", "`-2` is negative"),
            ("container_runtime = \"docker\"", "`\"docker\"` is not `true`"),
            (
                "container_runtime = false",
                "`false` asks for nothing: leave the key out instead",
            ),
        ] {
            let e = order(text).unwrap_err();
            let key = text.split(' ').next().unwrap();
            assert!(
                e.starts_with(&format!("order `order.toml` line 1, key `{key}`: {problem}")),
                "{text}: {e}"
            );
            assert!(e.contains("; expected "), "{text}: {e}");
        }
        let e = flag(Item::DataDiskType, "floppy").unwrap_err();
        assert!(e.starts_with("--expect-data-disk-type `floppy`: "), "{e}");
    }

    #[test]
    fn counts_in_front_of_names() {
        assert_eq!(split_count("2x EPYC 7T83"), (Some(2), "EPYC 7T83".into()));
        assert_eq!(split_count("2 x Xeon 8480+"), (Some(2), "Xeon 8480+".into()));
        assert_eq!(split_count("EPYC 7763"), (None, "EPYC 7763".into()));
        // A model number is not a count.
        assert_eq!(split_count("7763x"), (None, "7763x".into()));
        assert_eq!(split_count("0x EPYC"), (None, "0x EPYC".into()));
        // As Chinese listings and the buyer's guides write dual-socket machines.
        assert_eq!(split_count("2路EPYC 7T83"), (Some(2), "EPYC 7T83".into()));
        assert_eq!(split_count("2路 EPYC 7T83"), (Some(2), "EPYC 7T83".into()));
        assert_eq!(split_count("双路 Xeon 8480+"), (Some(2), "Xeon 8480+".into()));
        assert_eq!(split_count("双路EPYC 9654"), (Some(2), "EPYC 9654".into()));
        assert_eq!(split_count("2P EPYC 9654"), (Some(2), "EPYC 9654".into()));
        assert_eq!(split_count("2* EPYC 9654"), (Some(2), "EPYC 9654".into()));
        // A model number with a P after it is no count; nor is a count with nothing after.
        assert_eq!(split_count("7773P"), (None, "7773P".into()));
        assert_eq!(split_count("2路"), (None, "2路".into()));
    }

    #[test]
    fn flag_errors_name_the_flag_and_an_example() {
        assert_eq!(
            flag(Item::Gpus, "0").unwrap_err(),
            "--expect-gpus `0`: `0` is zero; expected a whole number of GPUs above 0 (`--expect-gpus 8`)"
        );
        let e = flag(Item::Memory, "1XB").unwrap_err();
        assert!(e.starts_with("--expect-memory `1XB`: `1XB` has an unknown unit `XB`; expected the memory as a number of GiB"), "{e}");
        assert!(e.contains("1 TB = 1024 GiB"), "{e}");
        let e = flag(Item::Disk, "NaN").unwrap_err();
        assert!(
            e.starts_with("--expect-disk `NaN`: `NaN` is not a number;"),
            "{e}"
        );
        let e = flag(Item::Driver, " ").unwrap_err();
        assert!(e.starts_with("--expect-driver ` `: the value is empty;"), "{e}");
    }

    #[test]
    fn syntax_errors_and_duplicates_have_lines() {
        let e = order("gpus = 8\ngpus = 4\n").unwrap_err();
        assert!(e.starts_with("order `order.toml` line 2: not valid TOML:"), "{e}");
        let e = order("gpus = 8\nmemory = 1TB\n").unwrap_err();
        assert!(e.starts_with("order `order.toml` line 2: not valid TOML:"), "{e}");
        assert!(order("").unwrap().is_empty());
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        const SECRET: &str = "S3CRET-PAST-THE-EXCERPT";

        fn bounded(message: &str) -> Result<(), TestCaseError> {
            prop_assert!(!message.contains(SECRET), "{}", message);
            // Each problem quotes at most an excerpt; an order has a handful of lines.
            for line in message.lines() {
                prop_assert!(line.chars().count() < 2000, "{}", line);
            }
            Ok(())
        }

        proptest! {
            #[test]
            fn any_text_is_an_order_or_an_error(text in any::<String>()) {
                let _ = parse_order("order.toml", &text);
            }

            /// Any value of any key, in any script, as a file or a flag: an answer or an
            /// error that quotes an excerpt of it, never a panic.
            #[test]
            fn values_in_any_script_never_panic(
                key in 0usize..7,
                value in "\\PC{0,40}",
                filler in "[a-zA-Z0-9 .]{0,400}",
                quoted in proptest::bool::ANY,
            ) {
                let item = Item::ALL[key];
                let long = format!("{value}{filler}{SECRET}");
                let escaped = long.replace('\\', "\\\\").replace('"', "\\\"");
                let text = if quoted {
                    format!("{} = \"{escaped}\"\n", item.key())
                } else {
                    format!("{} = {long}\n", item.key())
                };
                if let Err(e) = parse_order("order.toml", &text) {
                    if filler.len() + value.chars().count() > 250 {
                        bounded(&e.to_string())?;
                    }
                }
                let mut expect = Expect::default();
                let _ = expect.set_flag(item, &value);
                if let Err(e) = expect.set_flag(item, &long) {
                    if filler.len() + value.chars().count() > 250 {
                        bounded(&e)?;
                    }
                }
            }

            #[test]
            fn unknown_keys_are_quoted_as_excerpts(key in "[a-z_]{300,400}") {
                let e = parse_order("order.toml", &format!("{key}{SECRET} = 1\n")).unwrap_err();
                bounded(&e.to_string())?;
            }
        }
    }

    #[test]
    fn flags_replace_what_the_file_said() {
        let mut e = order("gpus = 8\nmemory = \"1TB\"\n").unwrap();
        e.set_flag(Item::Gpus, "4").unwrap();
        assert_eq!(e.gpus, Some(4));
        assert_eq!(e.origin(Item::Gpus), "--expect-gpus");
        assert_eq!(e.origin(Item::Memory), "order `order.toml` line 2, key `memory`");
    }

    proptest::proptest! {
        /// An order file of any text, and any value of each `--expect-*` flag, is read or
        /// refused with its problems, never a panic; each problem is one line.
        #[test]
        fn any_order_text_is_read_or_refused(text in proptest::prelude::any::<String>()) {
            if let Err(e) = parse_order("order.toml", &text) {
                proptest::prop_assert!(!e.problems.is_empty());
            }
            for item in Item::ALL {
                let _ = Expect::default().set_flag(item, &text);
            }
        }

        /// Known and unknown keys with values of any shape: numbers, strings of any
        /// characters, units, arrays and tables.
        #[test]
        fn order_entries_of_any_value_are_read_or_refused(
            entries in proptest::collection::vec((
                proptest::prelude::prop_oneof![
                    proptest::prelude::Just("gpu".to_string()), proptest::prelude::Just("gpus".to_string()),
                    proptest::prelude::Just("gpu_memory".to_string()), proptest::prelude::Just("driver".to_string()),
                    proptest::prelude::Just("cpus".to_string()), proptest::prelude::Just("memory".to_string()),
                    proptest::prelude::Just("disk".to_string()), "[a-z_é]{1,10}",
                ],
                proptest::prelude::prop_oneof![
                    "-?[0-9]{1,12}(\\.[0-9]{1,6})?",
                    "\"[0-9. ]{0,8}[a-zA-Zé卡]{0,4}\"",
                    "\"\\PC{0,12}\"",
                    proptest::prelude::Just("nan".to_string()), proptest::prelude::Just("inf".to_string()),
                    proptest::prelude::Just("[1, 2]".to_string()), proptest::prelude::Just("{ a = 1 }".to_string()),
                    proptest::prelude::Just("true".to_string()),
                ],
            ), 0..8),
        ) {
            let text: String = entries.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
            match parse_order("order.toml", &text) {
                Ok(_) => {}
                Err(e) => {
                    for p in &e.problems {
                        proptest::prop_assert!(p.starts_with("order `order.toml`"), "{}", p);
                    }
                }
            }
        }
    }

    #[test]
    fn bench_floors_read_with_units() {
        let e = parse_order(
            "o.toml",
            "bench = true\nmin_matmul_tflops = \"0.7PFLOPS\"\nmin_memory_bandwidth = \"2.5TB/s\"\n\
             min_nccl_busbw = 350\nmin_p2p_bandwidth = \"300GB/s\"\nmin_disk_read = \"800MB/s\"\n\
             min_disk_write = \"1GiB/s\"\nmin_network = \"100G\"\n",
        )
        .expect("reads");
        assert!(e.bench && e.wants_bench() && !e.is_empty());
        let v = |i: Item| e.bench_floors[&i].value;
        assert!((v(Item::MinMatmulTflops) - 700.0).abs() < 1e-9);
        assert!((v(Item::MinMemoryBandwidth) - 2500.0).abs() < 1e-9);
        assert!((v(Item::MinNcclBusbw) - 350.0).abs() < 1e-9);
        assert!((v(Item::MinP2pBandwidth) - 300.0).abs() < 1e-9);
        assert!((v(Item::MinDiskRead) - 0.8).abs() < 1e-9);
        assert!((v(Item::MinDiskWrite) - 1.073741824).abs() < 1e-9);
        assert!((v(Item::MinNetwork) - 100.0).abs() < 1e-9);
        for bad in [
            "bench = false",
            "min_disk_read = \"3 furlongs\"",
            "min_nccl_busbw = -1",
            "min_matmul_tflops = \"\"",
        ] {
            let err = parse_order("o.toml", bad).expect_err(bad);
            assert!(err.problems[0].contains("expected"), "{bad}: {err}");
        }
        let mut e = Expect::default();
        e.set_flag(Item::MinDiskWrite, "2GB/s").expect("flag reads");
        assert!((e.bench_floors[&Item::MinDiskWrite].value - 2.0).abs() < 1e-9);
    }
}
