//! Which GPUs the estimate fits on, how many of each, and what the machine around them
//! needs: the interconnect the parallelism asks for, CPU cores, RAM and disk, and the time
//! and cost of a run.
//!
//! Owns: the search for the smallest count of a GPU that holds the estimate, the headroom,
//! the interconnect advice, the machine's rules and the time formula, each with its source.
//! Must not: estimate memory (that is [`mod@super::estimate`], handed in as a function), or
//! judge a stack (the caller asks the resolver).

use serde::{Deserialize, Serialize};

use super::types::{Assumption, Estimate, FitStack, Method, Settings, Shard};
use crate::db::records::Gpu;

/// GPUs in one node of the machines rented for training (HGX/DGX boards hold 8): above it
/// the run spans nodes.
pub const GPUS_PER_NODE: u32 = 8;

/// The most GPUs the search tries for one model.
pub const MAX_GPUS: u32 = 1024;

/// A GPU's memory in bytes, as its record gives it (GiB: GPU memory is sold in binary
/// sizes, "80 GB" is 80 GiB).
pub fn capacity_bytes(gpu: &Gpu) -> u64 {
    (gpu.memory_gib * 1024.0 * 1024.0 * 1024.0) as u64
}

/// How one GPU model holds the estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The compat-db record's name.
    pub gpu: String,
    /// How many of it.
    pub count: u32,
    /// Whether the estimate fits at that count.
    pub fits: bool,
    /// Memory left per GPU (negative: short by that much).
    pub headroom_bytes: i64,
    /// The GPU's memory.
    pub memory_bytes: u64,
    /// The estimate per GPU at that count.
    pub per_gpu_bytes: u64,
    /// How the model states are split over the GPUs at that count.
    pub shard: Shard,
    /// What the split asks of the links between the GPUs, when there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<String>,
    /// Hours of the run, when tokens and the GPU's compute are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<f64>,
    /// The best stack the resolver finds for it, filled by the caller.
    #[serde(default)]
    pub stack: Option<FitStack>,
}

/// The sharding the search uses at `n` GPUs: what was asked, or, when nothing was and one
/// GPU is not enough, the model states split over all of them (ZeRO-3/FSDP for training;
/// for inference the same share of weights and cache, as tensor parallelism gives).
fn shard_at(s: &Settings, n: u32) -> Shard {
    if n > 1 && s.shard == Shard::None {
        Shard::Zero3
    } else {
        s.shard
    }
}

/// What links `count` GPUs need for a run split by `shard`; `None` for one GPU.
pub fn interconnect(count: u32, shard: Shard, method: Method) -> Option<String> {
    if count <= 1 {
        return None;
    }
    let within = if shard == Shard::None {
        "PCIe carries data parallelism within a node; NVLink speeds its all-reduce".to_string()
    } else if method == Method::Inference {
        "NVLink between the GPUs: the model is split across them (tensor parallelism), and every layer exchanges activations"
            .to_string()
    } else {
        "NVLink between the GPUs: the model states are split across them (ZeRO-3/FSDP, or tensor and pipeline parallelism), and every layer gathers weights or exchanges activations"
            .to_string()
    };
    if count <= GPUS_PER_NODE {
        Some(within)
    } else {
        let nodes = count.div_ceil(GPUS_PER_NODE);
        Some(format!(
            "{within}; and RDMA (InfiniBand or RoCE) between the {nodes} nodes: data parallelism across nodes all-reduces \
             the gradients every step"
        ))
    }
}

/// The source of the interconnect advice.
pub const INTERCONNECT_SOURCE: &str = "the GPU-rental buyer's guides: tensor or pipeline parallelism within a node wants \
NVLink; data parallelism across nodes wants RDMA (InfiniBand/RoCE)";

/// How `gpu` holds the estimate: at `given` GPUs when the count was given, else at the
/// fewest that fit (up to [`MAX_GPUS`]; when none does, at the most tried).
pub fn fit_gpu(
    gpu: &Gpu,
    s: &Settings,
    given: Option<u32>,
    estimate: &dyn Fn(&Settings) -> Estimate,
    tokens: Option<u64>,
    params: u64,
    mfu: f64,
) -> Fit {
    let memory = capacity_bytes(gpu);
    let at = |n: u32| {
        let mut s = s.clone();
        s.gpus = n;
        s.shard = shard_at(&s, n);
        (estimate(&s).per_gpu.total, s.shard)
    };
    let (count, (per_gpu, shard)) = match given {
        Some(n) => (n, at(n)),
        None => {
            // Fewest GPUs first; the estimate only falls as the count grows under sharding,
            // so the first that fits is the answer.
            let mut found = None;
            let mut n = 1;
            while n <= MAX_GPUS {
                let r = at(n);
                if r.0 <= memory {
                    found = Some((n, r));
                    break;
                }
                // Whole nodes past one node, as they are rented.
                n = if n < GPUS_PER_NODE {
                    n + 1
                } else {
                    n + GPUS_PER_NODE
                };
            }
            found.unwrap_or_else(|| (MAX_GPUS, at(MAX_GPUS)))
        }
    };
    let headroom = memory as i128 - per_gpu as i128;
    Fit {
        gpu: gpu.name.clone(),
        count,
        fits: per_gpu <= memory,
        headroom_bytes: headroom.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        memory_bytes: memory,
        per_gpu_bytes: per_gpu,
        shard,
        interconnect: interconnect(count, shard, s.method),
        hours: tokens.and_then(|t| hours(params, t, count, gpu, mfu, s.method)),
        stack: None,
    }
}

/// FLOPs per parameter per token: 6 for training (forward 2, backward 4), 2 for inference
/// (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", arXiv:2001.08361, §2.1:
/// C ≈ 6N per token trained).
fn flops_per_param(method: Method) -> f64 {
    match method {
        Method::Inference => 2.0,
        _ => 6.0,
    }
}

/// Hours to process `tokens`: FLOPs / (GPUs x the GPU's dense BF16 TFLOPS x MFU).
pub fn hours(params: u64, tokens: u64, count: u32, gpu: &Gpu, mfu: f64, method: Method) -> Option<f64> {
    let tflops = gpu.bf16_tflops?;
    let flops = flops_per_param(method) * params as f64 * tokens as f64;
    let rate = f64::from(count) * tflops * 1e12 * mfu;
    (rate > 0.0).then(|| cents(flops / rate / 3600.0))
}

/// Rounded to hundredths: an estimate has no more digits than that, and a document read
/// back must give the same number.
pub fn cents(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// The default model FLOPs utilization: what share of the GPU's peak a training run
/// reaches.
pub const DEFAULT_MFU: f64 = 0.4;

/// The assumptions of the time estimate.
pub fn time_assumptions(mfu: f64) -> Vec<Assumption> {
    vec![
        Assumption {
            what: "compute of a run".into(),
            value: "6 x parameters x tokens FLOPs for training (2 x for inference)".into(),
            source: "Kaplan et al. 2020, Scaling Laws for Neural Language Models, arXiv:2001.08361, §2.1".into(),
        },
        Assumption {
            what: "model FLOPs utilization (MFU)".into(),
            value: format!("{:.0}% of the GPU's dense BF16 peak (--mfu)", mfu * 100.0),
            source: "Chowdhery et al. 2022, PaLM, arXiv:2204.02311, Table 3: 46.2% MFU for PaLM 540B on TPU v4; \
                     Korthikanti et al. 2022, arXiv:2205.05198, Table 5: 41-56% on A100s. 40% is below what large, \
                     tuned runs reach"
                .into(),
        },
        Assumption {
            what: "GPU compute".into(),
            value: "dense BF16 Tensor Core TFLOPS, from the GPU's compat-db record".into(),
            source: "NVIDIA datasheets, cited in each record".into(),
        },
    ]
}

/// What the machine around the GPUs needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU cores, at least.
    pub cpu_cores: u32,
    /// RAM, GiB, at least.
    pub ram_gib: u64,
    /// Disk, GB (decimal, as disks are sold), at least.
    pub disk_gb: u64,
    /// The rules behind each.
    pub rules: Vec<Assumption>,
}

/// Where the machine's rules come from.
const GUIDE: &str = "the GPU-rental buyer's guides (guide 003): at least 8 cores; RAM at least 64 GB, or 128 GB for \
several GPUs; disk for the dataset plus checkpoints";

/// The machine for `count` GPUs: the guides' floors, and disk for the dataset and `keep`
/// checkpoints of `checkpoint_bytes` each (a checkpoint is the weights plus the optimizer
/// states, whole).
pub fn machine(count: u32, checkpoint_bytes: u64, dataset_gb: f64, keep: u32) -> Machine {
    let ram_gib = if count > 1 { 128 } else { 64 };
    // Loading a checkpoint passes it through CPU memory once (torch.load, safetensors).
    let checkpoint_gib = checkpoint_bytes.div_ceil(1 << 30);
    let ram = ram_gib.max(checkpoint_gib);
    let disk = dataset_gb + f64::from(keep) * checkpoint_bytes as f64 / 1e9;
    Machine {
        cpu_cores: 8,
        ram_gib: ram,
        disk_gb: disk.ceil() as u64,
        rules: vec![
            Assumption {
                what: "CPU".into(),
                value: "8 cores at least".into(),
                source: GUIDE.into(),
            },
            Assumption {
                what: "RAM".into(),
                value: format!(
                    "{ram_gib} GiB ({}), or one checkpoint ({checkpoint_gib} GiB) if larger: loading one passes it through CPU memory",
                    if count > 1 { "several GPUs" } else { "one GPU" }
                ),
                source: GUIDE.into(),
            },
            Assumption {
                what: "disk".into(),
                value: format!(
                    "the dataset ({dataset_gb} GB, --dataset) plus {keep} checkpoint(s) of {:.0} GB (--keep-checkpoints; \
                     weights plus optimizer states)",
                    checkpoint_bytes as f64 / 1e9
                ),
                source: GUIDE.into(),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::plan::types::{Attention, Engine, MemoryTerms, Optimizer, Precision};

    fn settings() -> Settings {
        Settings {
            method: Method::Full,
            precision: Precision::Mixed,
            optimizer: Optimizer::Adamw,
            seq_len: 2048,
            batch: 1,
            checkpointing: true,
            gpus: 1,
            shard: Shard::None,
            lora_rank: 16,
            attention: Attention::Flash,
            engine: Engine::Hf,
        }
    }

    /// Model states of mixed-precision Adam, 16 bytes per parameter, sharded as asked.
    fn states(params: u64) -> impl Fn(&Settings) -> Estimate {
        move |s: &Settings| {
            let n = u64::from(s.gpus.max(1));
            let total = match s.shard {
                Shard::None => 16 * params,
                _ => 16 * params / n,
            };
            Estimate {
                per_gpu: MemoryTerms {
                    total,
                    ..MemoryTerms::default()
                },
                assumptions: Vec::new(),
            }
        }
    }

    #[test]
    fn the_fewest_gpus_that_hold_it() {
        let db = Db::embedded().unwrap();
        let h100 = db.gpu("H100 SXM").unwrap();
        // 7B at 16 bytes a parameter: 112 GB, two 80 GiB GPUs.
        let f = fit_gpu(
            h100,
            &settings(),
            None,
            &states(7_000_000_000),
            None,
            7_000_000_000,
            DEFAULT_MFU,
        );
        assert_eq!((f.count, f.fits, f.shard), (2, true, Shard::Zero3));
        assert_eq!(f.headroom_bytes, capacity_bytes(h100) as i64 - 56_000_000_000);
        assert!(
            f.interconnect
                .as_deref()
                .unwrap()
                .starts_with("NVLink between the GPUs")
        );
        // 1B fits one.
        let f = fit_gpu(
            h100,
            &settings(),
            None,
            &states(1_000_000_000),
            None,
            1_000_000_000,
            DEFAULT_MFU,
        );
        assert_eq!((f.count, f.interconnect.clone()), (1, None));
        // A count given is taken, fitting or not.
        let f = fit_gpu(
            h100,
            &settings(),
            Some(1),
            &states(7_000_000_000),
            None,
            7_000_000_000,
            DEFAULT_MFU,
        );
        assert!(!f.fits);
        assert!(f.headroom_bytes < 0);
        // Past a node, whole nodes, and RDMA between them.
        let f = fit_gpu(
            h100,
            &settings(),
            None,
            &states(70_000_000_000),
            None,
            70_000_000_000,
            DEFAULT_MFU,
        );
        assert_eq!(f.count, 16);
        assert!(
            f.interconnect
                .as_deref()
                .unwrap()
                .contains("RDMA (InfiniBand or RoCE) between the 2 nodes")
        );
    }

    #[test]
    fn machine_rules_and_run_time() {
        let m = machine(8, 100_000_000_000, 500.0, 2);
        assert_eq!((m.cpu_cores, m.ram_gib, m.disk_gb), (8, 128, 700));
        let m = machine(1, 300 * (1 << 30), 0.0, 1);
        assert_eq!(m.ram_gib, 300, "a checkpoint larger than the floor");
        let db = Db::embedded().unwrap();
        let mut g = db.gpu("H100 SXM").unwrap().clone();
        g.bf16_tflops = Some(989.5);
        // 6 x 7e9 x 1e12 / (8 x 989.5e12 x 0.4) s.
        let h = hours(7_000_000_000, 1_000_000_000_000, 8, &g, 0.4, Method::Full).unwrap();
        assert_eq!(h, cents(6.0 * 7e9 * 1e12 / (8.0 * 989.5e12 * 0.4) / 3600.0));
        assert_eq!(h, 3684.52);
        g.bf16_tflops = None;
        assert_eq!(hours(7, 7, 1, &g, 0.4, Method::Full), None);
    }
}
