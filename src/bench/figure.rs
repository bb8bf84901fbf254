//! A measured figure and the document that carries them (`bench --json`, `--bench-results`,
//! a node's results in `fleet report`).
//!
//! Units are fixed per metric so that a figure read back from any engine compares with
//! any other: decimal GB/s (10^9 bytes a second, as nvbandwidth, nccl-tests and fio's
//! `bw_bytes` count), dense TFLOPS (10^12 floating-point operations a second, a
//! multiply-add counted as two), IOPS, images a second, microseconds.

use serde::{Deserialize, Serialize};

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Dense matrix multiply, BF16 inputs (TFLOPS).
    MatmulBf16,
    /// Dense matrix multiply, FP16 inputs (TFLOPS).
    MatmulFp16,
    /// Dense matrix multiply, FP32 inputs on TF32 tensor cores (TFLOPS).
    MatmulTf32,
    /// Dense matrix multiply, FP8 (e4m3) inputs (TFLOPS).
    MatmulFp8,
    /// Device memory bandwidth: a device-to-device copy, bytes read plus bytes written
    /// (GB/s).
    MemoryBandwidth,
    /// Pinned host memory to one GPU (GB/s).
    HostToDevice,
    /// One GPU to pinned host memory (GB/s).
    DeviceToHost,
    /// One GPU to another, `gpu` to `peer` (GB/s).
    PeerToPeer,
    /// NCCL all_reduce bus bandwidth over all GPUs, nccl-tests' busbw (GB/s).
    NcclBusbw,
    /// ResNet-50 synthetic training throughput (images/s).
    Resnet50,
    /// Sequential read of the data disk, O_DIRECT (GB/s).
    DiskSeqRead,
    /// Sequential write of the data disk, O_DIRECT (GB/s).
    DiskSeqWrite,
    /// 4 KiB random reads of the data disk, O_DIRECT (IOPS).
    DiskRandRead,
    /// Host memory bandwidth (GB/s).
    HostMemoryBandwidth,
    /// TCP throughput to a peer, several streams (GB/s).
    NetworkTcp,
    /// Round-trip latency to a peer (microseconds).
    NetworkLatency,
    /// RDMA write bandwidth to a peer (GB/s).
    NetworkRdma,
    /// Download speed from a registry or package index (GB/s).
    Download,
}

impl Metric {
    /// The unit every figure of this metric is in.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::MatmulBf16 | Metric::MatmulFp16 | Metric::MatmulTf32 | Metric::MatmulFp8 => "TFLOPS",
            Metric::DiskRandRead => "IOPS",
            Metric::Resnet50 => "images/s",
            Metric::NetworkLatency => "us",
            _ => "GB/s",
        }
    }

    /// Whether a larger figure is better (all but latency).
    pub fn higher_is_better(self) -> bool {
        self != Metric::NetworkLatency
    }
}

/// The program that produced a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// gpuenv's own measurement (in Rust, or its embedded script through torch).
    Gpuenv,
    /// NVIDIA DCGM's `dcgmi diag`.
    Dcgm,
    /// nccl-tests' `all_reduce_perf`.
    NcclTests,
    /// NVIDIA's `nvbandwidth`.
    Nvbandwidth,
    /// `fio`.
    Fio,
    /// perftest's `ib_write_bw`.
    Perftest,
}

impl Engine {
    /// The program, as a user would look for it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Gpuenv => "gpuenv",
            Engine::Dcgm => "dcgmi diag",
            Engine::NcclTests => "all_reduce_perf",
            Engine::Nvbandwidth => "nvbandwidth",
            Engine::Fio => "fio",
            Engine::Perftest => "ib_write_bw",
        }
    }
}

/// One measured figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What was measured.
    pub metric: Metric,
    /// The GPU's index (nvidia-smi's), for a per-GPU figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The other end: a peer GPU's index for [`Metric::PeerToPeer`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<u32>,
    /// The figure, in [`Metric::unit`].
    pub value: f64,
    /// The unit, written out so a reader of the JSON needs no table.
    pub unit: String,
    /// Who measured it.
    pub engine: Engine,
    /// How: sizes, iterations, the path or peer (`8192x8192x8192, 20 iterations`).
    #[serde(default)]
    pub detail: String,
}

impl Figure {
    /// A figure of `metric`, its unit filled in.
    pub fn new(metric: Metric, value: f64, engine: Engine, detail: impl Into<String>) -> Figure {
        Figure {
            metric,
            gpu: None,
            peer: None,
            value,
            unit: metric.unit().to_string(),
            engine,
            detail: detail.into(),
        }
    }

    /// The same figure, of GPU `index`.
    pub fn on_gpu(mut self, index: u32) -> Figure {
        self.gpu = Some(index);
        self
    }

    /// The same figure, towards peer GPU `index`.
    pub fn to_peer(mut self, index: u32) -> Figure {
        self.peer = Some(index);
        self
    }
}

/// `gpuenv bench --json`: every figure measured, and what could not be.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchDoc {
    /// The document's version (`report::SCHEMA_VERSION`).
    pub schema_version: u32,
    /// The host's name, as `doctor` reports it.
    #[serde(default)]
    pub hostname: String,
    /// `/etc/machine-id`, where readable: the key that tells nodes apart in a fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// The GPUs measured: index and the name nvidia-smi gives.
    #[serde(default)]
    pub gpus: Vec<BenchGpu>,
    /// Every figure measured.
    #[serde(default)]
    pub figures: Vec<Figure>,
    /// What was not measured, and why (`nvbandwidth not installed; gpuenv measured`,
    /// `no CUDA torch found`).
    #[serde(default)]
    pub skipped: Vec<String>,
    /// The burn-in, when one ran (`--burn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burn: Option<super::burn::BurnResult>,
    /// What an engine people trust found wrong: a DCGM test that failed, an all-reduce
    /// whose results were wrong. Each is a finding of the bench, whatever the figures say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<EngineFailure>,
}

/// A failure an engine reported (`dcgmi diag`'s `Fail`, nccl-tests' `#wrong`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineFailure {
    /// The engine that found it.
    pub engine: Engine,
    /// The GPU it is about, where one is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The test or figure that failed (`Memory`, `all_reduce 8 GiB`).
    pub test: String,
    /// What the engine said, terminal-safe.
    pub reason: String,
}

/// A GPU a bench ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchGpu {
    /// nvidia-smi's index.
    pub index: u32,
    /// nvidia-smi's name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// The memory it reports, MiB: with the name, it chooses the record a bench is judged
    /// by (the name alone does not tell an 8 GB RTX 4060 Ti from the 16 GB one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
}
