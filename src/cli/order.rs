//! The order flags (`--expect-*` and `--order FILE`, shared by `check` and `fleet report`)
//! and their reading into one [`Expect`].
//!
//! Owns: the flags' definitions and help, reading the order file within its cap, and
//! which flag sets which item (a flag given replaces what the file said). Must not: judge
//! a host against the order (that is `judge::accept`) or print.

use clap::Args;

use super::CliError;
use crate::judge::{Expect, Item};

/// What was ordered: each item as a flag, or all of them in a TOML file.
#[derive(Debug, Args, Clone, Default)]
pub struct OrderArgs {
    /// The GPU model ordered, as the listing wrote it (`A100`: any A100 record passes;
    /// `8x H800` also asks for the count).
    #[arg(long, value_name = "NAME")]
    pub expect_gpu: Option<String>,
    /// How many GPUs were ordered.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub expect_gpus: Option<String>,
    /// Memory per GPU ordered, as sold: GB (80), or with a unit (80GB, 81920MiB).
    #[arg(long, value_name = "GB", allow_hyphen_values = true)]
    pub expect_gpu_memory: Option<String>,
    /// The driver promised: a branch (`535`, `R535`: any 535.x release), a version, or a
    /// requirement (`>=535.104.05`, `>=535,<560`).
    #[arg(long, value_name = "SPEC")]
    pub expect_driver: Option<String>,
    /// Logical CPUs ordered.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub expect_cpus: Option<String>,
    /// Memory ordered: GiB (512), or with a unit (512GB, 1TB; binary: 1 TB = 1024 GiB).
    #[arg(long, value_name = "GIB", allow_hyphen_values = true)]
    pub expect_memory: Option<String>,
    /// Disk ordered: GB (2000), or with a unit (2TB, 1.8TiB; decimal: 1 TB = 1000 GB).
    #[arg(long, value_name = "GB", allow_hyphen_values = true)]
    pub expect_disk: Option<String>,
    /// The CUDA version the driver must support, at least (`12.4`).
    #[arg(long, value_name = "VERSION")]
    pub expect_cuda: Option<String>,
    /// The PCIe generation every GPU's link must reach (the lower of card and slot).
    #[arg(long, value_name = "GEN", allow_hyphen_values = true)]
    pub expect_pcie_gen: Option<String>,
    /// NVLink between every GPU pair (`all`, the default), or at least N links per pair.
    #[arg(long, value_name = "all|N", num_args = 0..=1, default_missing_value = "all")]
    pub expect_nvlink: Option<String>,
    /// How the GPUs are connected: `nvswitch` or `pcie`.
    #[arg(long, value_name = "nvswitch|pcie")]
    pub expect_topology: Option<String>,
    /// Words of the CPU model (`EPYC 7T83`; `2x EPYC 7T83` also asks for two sockets;
    /// `*` is a wildcard).
    #[arg(long, value_name = "WORDS")]
    pub expect_cpu_model: Option<String>,
    /// CPU sockets ordered.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub expect_sockets: Option<String>,
    /// System disk ordered: GB, or with a unit (decimal: 1 TB = 1000 GB).
    #[arg(long, value_name = "GB", allow_hyphen_values = true)]
    pub expect_system_disk: Option<String>,
    /// Data disk ordered, apart from the system disk: GB, or with a unit.
    #[arg(long, value_name = "GB", allow_hyphen_values = true)]
    pub expect_data_disk: Option<String>,
    /// What the data disk is, at least: `nvme`, `ssd` or `hdd`.
    #[arg(long, value_name = "nvme|ssd|hdd")]
    pub expect_data_disk_type: Option<String>,
    /// An RDMA port up (InfiniBand or RoCE), at least at RATE when given (`200G`).
    #[arg(long, value_name = "RATE", num_args = 0..=1, default_missing_value = "true")]
    pub expect_rdma: Option<String>,
    /// A network interface at least this fast (`100G`, `25GbE`; a number is Gb/s).
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub expect_nic_speed: Option<String>,
    /// Docker hands the GPUs to containers (the nvidia runtime, or CDI).
    #[arg(long)]
    pub expect_container_runtime: bool,
    /// Every figure `gpuenv bench` measured within its expected range (read from
    /// `--bench-results`).
    #[arg(long)]
    pub expect_bench: bool,
    /// Dense matmul TFLOPS every GPU must reach (`700`, `0.7PFLOPS`).
    #[arg(long, value_name = "TFLOPS", allow_hyphen_values = true)]
    pub expect_min_matmul_tflops: Option<String>,
    /// Device memory bandwidth every GPU must reach: GB/s, or with a unit (`2.5TB/s`).
    #[arg(long, value_name = "GB/S", allow_hyphen_values = true)]
    pub expect_min_memory_bandwidth: Option<String>,
    /// NCCL all_reduce bus bandwidth the machine must reach: GB/s, or with a unit.
    #[arg(long, value_name = "GB/S", allow_hyphen_values = true)]
    pub expect_min_nccl_busbw: Option<String>,
    /// Peer-to-peer bandwidth every GPU pair must reach: GB/s, or with a unit.
    #[arg(long, value_name = "GB/S", allow_hyphen_values = true)]
    pub expect_min_p2p_bandwidth: Option<String>,
    /// Sequential read the data disk must reach: GB/s, or with a unit (`800MB/s`).
    #[arg(long, value_name = "GB/S", allow_hyphen_values = true)]
    pub expect_min_disk_read: Option<String>,
    /// Sequential write the data disk must reach: GB/s, or with a unit.
    #[arg(long, value_name = "GB/S", allow_hyphen_values = true)]
    pub expect_min_disk_write: Option<String>,
    /// Network throughput to a peer (`100G`, `25Gb/s`; a number is Gb/s).
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub expect_min_network: Option<String>,
    /// The order as a TOML file with the same items as the `--expect-*` flags (`gpu`,
    /// `gpus`, `gpu_memory`, `driver`, `cuda`, `pcie_gen`, `nvlink`, `topology`, `cpus`,
    /// `cpu_model`, `sockets`, `memory`, `disk`, `system_disk`, `data_disk`,
    /// `data_disk_type`, `rdma`, `nic_speed`, `container_runtime`, and the measured
    /// `bench`, `min_matmul_tflops`, `min_memory_bandwidth`, `min_nccl_busbw`,
    /// `min_p2p_bandwidth`, `min_disk_read`, `min_disk_write`, `min_network`), read with
    /// the same units; flags given as well take precedence.
    #[arg(long, value_name = "FILE")]
    pub order: Option<std::path::PathBuf>,
    /// Accept although this health item fails or is unknown (`mig`, `processes`,
    /// `throttle`, `ecc`, `row-remap`, `retired-pages`, `nvml`; `unknown` for every fact
    /// that cannot be read); repeatable, added to the order's `health_allow`, and printed.
    #[arg(long, value_name = "ITEM")]
    pub allow_health: Vec<String>,
}

impl OrderArgs {
    /// The order these flags describe: the file's items, then each flag given over them.
    /// Empty when neither `--order` nor an `--expect-*` flag was given. A file that cannot
    /// be read or does not parse, and a flag whose value does not read, are bad input.
    pub fn expectation(&self) -> Result<Expect, CliError> {
        let mut expect = match &self.order {
            Some(path) => {
                let text = crate::files::read_text(path, crate::files::limits::ORDER, "order")
                    .map_err(super::stack::read_error)?;
                crate::judge::parse_order(&crate::files::shown(path), &text)?
            }
            None => Expect::default(),
        };
        for (item, value) in [
            (Item::Gpu, &self.expect_gpu),
            (Item::Gpus, &self.expect_gpus),
            (Item::GpuMemory, &self.expect_gpu_memory),
            (Item::Driver, &self.expect_driver),
            (Item::Cpus, &self.expect_cpus),
            (Item::Memory, &self.expect_memory),
            (Item::Disk, &self.expect_disk),
            (Item::Cuda, &self.expect_cuda),
            (Item::PcieGen, &self.expect_pcie_gen),
            (Item::Nvlink, &self.expect_nvlink),
            (Item::Topology, &self.expect_topology),
            (Item::CpuModel, &self.expect_cpu_model),
            (Item::Sockets, &self.expect_sockets),
            (Item::SystemDisk, &self.expect_system_disk),
            (Item::DataDisk, &self.expect_data_disk),
            (Item::DataDiskType, &self.expect_data_disk_type),
            (Item::Rdma, &self.expect_rdma),
            (Item::NicSpeed, &self.expect_nic_speed),
            (
                Item::ContainerRuntime,
                &self.expect_container_runtime.then(|| "true".to_string()),
            ),
            (Item::Bench, &self.expect_bench.then(|| "true".to_string())),
            (Item::MinMatmulTflops, &self.expect_min_matmul_tflops),
            (Item::MinMemoryBandwidth, &self.expect_min_memory_bandwidth),
            (Item::MinNcclBusbw, &self.expect_min_nccl_busbw),
            (Item::MinP2pBandwidth, &self.expect_min_p2p_bandwidth),
            (Item::MinDiskRead, &self.expect_min_disk_read),
            (Item::MinDiskWrite, &self.expect_min_disk_write),
            (Item::MinNetwork, &self.expect_min_network),
        ] {
            if let Some(v) = value {
                expect.set_flag(item, v).map_err(CliError::Usage)?;
            }
        }
        for word in &self.allow_health {
            expect.allow_health(word).map_err(CliError::Usage)?;
        }
        Ok(expect)
    }
}
