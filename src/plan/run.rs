//! A whole plan: the estimate, the GPUs it fits on with the stack the resolver finds for
//! each, the machine, the time and cost, the offers ranked, and the order to accept.
//!
//! Owns: putting the parts together and the order the plan implies. Must not: parse flags,
//! read files or print (the command does), or judge a stack itself (the resolver does).

use serde::{Deserialize, Serialize};

use super::fit::{self, Fit, Machine};
use super::offers::{self, Offer, RankedOffer};
use super::types::{Assumption, Estimate, FitStack, Method, ModelShape, Settings, Shard};
use crate::db::Db;
use crate::db::records::Gpu;
use crate::judge::{Expect, Item};
use crate::resolve::{GpuAsk, Query, Status};

/// What the plan was asked beyond the model and settings.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The GPU count, when given (`--gpus`); else the fewest that fit.
    pub gpus: Option<u32>,
    /// Only these GPU records (`--gpu`); every GPU of compat-db when empty.
    pub only: Vec<Gpu>,
    /// Tokens to process (`--tokens`), for the time.
    pub tokens: Option<u64>,
    /// Tensor-parallel size (`--tp`), when given.
    pub tp: Option<u32>,
    /// Pipeline stages (`--pp`), when given.
    pub pp: Option<u32>,
    /// Model FLOPs utilization.
    pub mfu: f64,
    /// Price of one GPU for an hour (`--price`), for the cost.
    pub price_per_gpu_hour: Option<f64>,
    /// The dataset, GB.
    pub dataset_gb: f64,
    /// Checkpoints kept on disk.
    pub keep_checkpoints: u32,
    /// The stack's part of the question (`--torch`, `--python`, `--driver`...), as a query
    /// whose GPUs the plan fills in.
    pub stack: Query,
    /// Offers to rank.
    pub offers: Vec<Offer>,
}

/// The plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The model.
    pub model: ModelShape,
    /// The settings, with the GPU count the estimate is for.
    pub settings: Settings,
    /// The estimate at those settings.
    pub estimate: Estimate,
    /// Every GPU that was tried, fitting first, then by count.
    pub fits: Vec<Fit>,
    /// The machine around the pick (the best offer, else the first fitting GPU).
    pub machine: Option<Machine>,
    /// The assumptions of the fit, the time and the machine.
    pub assumptions: Vec<Assumption>,
    /// The offers, best first.
    pub offers: Vec<RankedOffer>,
}

/// The best stack for `count` of `gpu` with the stack flags of `q`.
fn stack_for(
    db: &Db,
    q: &Query,
    gpu: &Gpu,
    count: u32,
    driver: Option<crate::model::DriverVersion>,
) -> FitStack {
    let mut q = q.clone();
    q.gpus = vec![GpuAsk {
        gpu: gpu.clone(),
        count,
    }];
    if driver.is_some() {
        q.driver = driver;
    }
    let a = crate::resolve::resolve(db, &q);
    match a.stacks.first() {
        Some(s) if s.status != Status::Incompatible => FitStack {
            status: format!("{:?}", s.status).to_lowercase(),
            torch: Some(format!("{}+{}", s.torch, s.variant)),
            python: Some(s.python.clone()),
            cuda: s.cuda.as_ref().map(|c| c.to_string()),
            min_driver: s.needs.driver_native.clone(),
            why: None,
        },
        best => FitStack {
            status: "incompatible".into(),
            torch: None,
            python: None,
            cuda: None,
            min_driver: None,
            why: best
                .and_then(|s| {
                    s.findings
                        .iter()
                        .find(|f| f.severity == crate::resolve::Severity::Incompatible)
                        .map(|f| f.message.clone())
                })
                .or_else(|| a.findings.first().map(|f| f.message.clone()))
                .or(Some("no torch build answers the question".into())),
        },
    }
}

/// The bytes one checkpoint takes: the weights and the optimizer states, whole.
fn checkpoint_bytes(model: &ModelShape, s: &Settings) -> u64 {
    let mut whole = s.clone();
    whole.gpus = 1;
    whole.shard = Shard::None;
    whole.tp = 1;
    whole.pp = 1;
    let e = super::estimate::estimate(model, &whole);
    match s.method {
        Method::Inference => e.per_gpu.weights,
        _ => e.per_gpu.weights + e.per_gpu.optimizer,
    }
}

/// Makes the plan.
pub fn plan(db: &Db, model: ModelShape, mut settings: Settings, o: &Options) -> Plan {
    // The estimate shown is at the count asked (one GPU without --gpus), split as the
    // fit splits that count, so the figure printed is the one the fit uses.
    let n = o.gpus.unwrap_or(1);
    if let Ok(l) = fit::layout(&model, &settings, n, o.tp, o.pp) {
        settings = fit::settings_at(&settings, n, &l);
    } else {
        settings.gpus = n;
    }
    let estimate = super::estimate::estimate(&model, &settings);
    let est = |s: &Settings| super::estimate::estimate(&model, s);
    let gpus: Vec<&Gpu> = if o.only.is_empty() {
        db.gpus.iter().collect()
    } else {
        o.only.iter().collect()
    };
    let ask = ask(o);
    let mut fits: Vec<Fit> = gpus
        .iter()
        .map(|g| fit::fit_gpu(g, &model, &settings, &ask, &est))
        .collect();
    // Fitting first, the fewest GPUs first, then the most room left: the tightest fit
    // (a fraction of a GiB to spare) is the last choice of its count, not the first.
    fits.sort_by(|a, b| {
        (!a.fits, a.count, std::cmp::Reverse(a.headroom_bytes), a.gpu.as_str()).cmp(&(
            !b.fits,
            b.count,
            std::cmp::Reverse(b.headroom_bytes),
            b.gpu.as_str(),
        ))
    });
    // The resolver's answer turns on what a GPU runs (its compute capability, and whether
    // it may use CUDA forward compatibility, the CPU it sits beside), not on its name or
    // count: GPUs alike share
    // one answer, so a plan over every GPU of compat-db asks it a few times, not ninety.
    let mut answers: std::collections::HashMap<(String, bool, Option<String>), FitStack> =
        std::collections::HashMap::new();
    for f in fits.iter_mut().filter(|f| f.fits) {
        if let Some(g) = gpus.iter().find(|g| g.name == f.gpu) {
            let key = (
                g.compute_capability.to_string(),
                g.forward_compat,
                g.host_arch.clone(),
            );
            let stack = answers
                .entry(key)
                .or_insert_with(|| stack_for(db, &o.stack, g, f.count, None))
                .clone();
            f.stack = Some(stack);
        }
    }
    let ckpt = checkpoint_bytes(&model, &settings);
    let mut assumptions = vec![
        Assumption {
            what: "GPU memory".into(),
            value: format!(
                "the total nvidia-smi reports for the GPU (an H100 80GB: 79.65 GiB, not 80), recorded per GPU in \
                 compat-db; where none is recorded, {}% of the size sold, said so; a GPU fits when the estimate per \
                 GPU is at most that (or the engine's share of it)",
                fit::UNRECORDED_USABLE_PERCENT
            ),
            source: "compat-db GPU records (usable_memory_mib), each from a captured nvidia-smi output".into(),
        },
        Assumption {
            what: "more GPUs than one".into(),
            value: "training: data parallelism with the model states sharded (ZeRO-3/FSDP) unless --shard, --tp or \
                    --pp say otherwise; inference: transformers splits the layers (device_map=\"auto\", stages run in \
                    turn), vLLM and SGLang run the widest tensor parallelism that divides the attention heads within \
                    a node and pipeline stages for the rest; past 8 GPUs, whole nodes of 8"
                .into(),
            source: format!(
                "Rajbhandari et al. 2020, ZeRO, arXiv:1910.02054, §5; {}; HGX/DGX boards hold 8 GPUs",
                fit::TP_SOURCE
            ),
        },
        Assumption {
            what: "interconnect".into(),
            value: "NVLink within a node for tensor parallelism, where the GPU can have it; PCIe for pipeline and \
                    data parallelism; RDMA between nodes"
                .into(),
            source: fit::INTERCONNECT_SOURCE.into(),
        },
    ];
    if o.tokens.is_some() || settings.method == Method::Inference {
        assumptions.extend(fit::time_assumptions(o.mfu, settings.method, settings.engine));
    }
    let mut ranked: Vec<RankedOffer> = o
        .offers
        .iter()
        .map(|offer| judge_offer(db, &model, &settings, o, offer, ckpt))
        .collect();
    offers::rank(&mut ranked);
    // The machine around the pick: the best offer that falls short in nothing, else the
    // first GPU that fits.
    let machine =
        pick(&ranked, &fits).map(|(_, count, _)| fit::machine(count, ckpt, o.dataset_gb, o.keep_checkpoints));
    if let Some(m) = &machine {
        assumptions.extend(m.rules.iter().cloned());
    }
    Plan {
        model,
        settings,
        estimate,
        fits,
        machine,
        assumptions,
        offers: ranked,
    }
}

/// One offer: its GPUs as written, the fit at its count, the stack on its driver, its
/// links, RAM and disk against the machine, and the cost.
fn judge_offer(
    db: &Db,
    model: &ModelShape,
    settings: &Settings,
    o: &Options,
    offer: &Offer,
    ckpt: u64,
) -> RankedOffer {
    let mut out = RankedOffer {
        offer: offer.clone(),
        gpu: None,
        count: offer.count.unwrap_or(1),
        fits: false,
        headroom_bytes: None,
        stack_runs: false,
        stack: None,
        hours: None,
        cost: None,
        reasons: Vec::new(),
    };
    let found = match db.gpus_written(&offer.gpu) {
        Ok(f) => f,
        Err(e) => {
            out.reasons
                .push(format!("its GPU `{}` is not one compat-db knows: {e}", offer.gpu));
            return out;
        }
    };
    let Some((m, written_count)) = found.into_iter().next() else {
        out.reasons.push(format!("its GPU `{}` names no GPU", offer.gpu));
        return out;
    };
    let gpu = m.chosen;
    let count = offer.count.unwrap_or(written_count).max(1);
    out.count = count;
    out.gpu = Some(gpu.name.clone());
    let est = |s: &Settings| super::estimate::estimate(model, s);
    let f = fit::fit_gpu(
        gpu,
        model,
        settings,
        &fit::Ask {
            gpus: Some(count),
            ..ask(o)
        },
        &est,
    );
    out.fits = f.fits;
    out.headroom_bytes = Some(f.headroom_bytes);
    out.hours = f.hours;
    if !f.fits {
        out.reasons.push(format!(
            "does not fit: {:.1} GiB per GPU at {count} GPU(s), the {} has {:.0} GiB",
            f.per_gpu_bytes as f64 / (1u64 << 30) as f64,
            gpu.name,
            gpu.memory_gib
        ));
    }
    let driver = match &offer.driver {
        None => None,
        Some(d) => match db.driver_written(d) {
            Ok((v, _)) => Some(v),
            Err(e) => {
                out.reasons.push(format!("its driver `{d}` cannot be read: {e}"));
                None
            }
        },
    };
    let stack = stack_for(db, &o.stack, gpu, count, driver);
    out.stack_runs = stack.status != "incompatible";
    if !out.stack_runs {
        out.reasons.push(format!(
            "no stack runs on it: {}",
            stack.why.as_deref().unwrap_or("the resolver found none")
        ));
    }
    out.stack = Some(stack);
    let (nvlink, rdma) = offers::listed_links(offer.interconnect.as_deref());
    if count > 1 && f.shard != Shard::None && nvlink == Some(false) {
        out.reasons.push(
            "its GPUs are linked by PCIe only, and the model is split across them, which wants NVLink".into(),
        );
    }
    if count > fit::GPUS_PER_NODE && rdma == Some(false) {
        out.reasons
            .push("several nodes and no RDMA listed: the gradients cross nodes every step".into());
    }
    {
        let m = fit::machine(count, ckpt, o.dataset_gb, o.keep_checkpoints);
        let ram_needed = m.ram_gib.max(ckpt.div_ceil(1 << 30));
        if let Some(ram) = offer.ram.as_deref() {
            let mut e = Expect::default();
            match e.set_flag(Item::Memory, ram) {
                Ok(()) => {
                    if let Some(gib) = e.memory.map(|s| s.value) {
                        if gib < ram_needed as f64 {
                            out.reasons
                                .push(format!("RAM {ram} is below the {ram_needed} GiB the plan asks"));
                        }
                    }
                }
                Err(_) => out
                    .reasons
                    .push(format!("its RAM `{ram}` cannot be read as a size")),
            }
        }
        if let Some(disk) = offer.disk.as_deref() {
            let mut e = Expect::default();
            // Listings add the kind after the size (`8TB NVMe`).
            let size = disk.split_whitespace().next().unwrap_or(disk);
            match e.set_flag(Item::Disk, size) {
                Ok(()) => {
                    if let Some(gb) = e.disk.map(|s| s.value) {
                        if gb < m.disk_gb as f64 {
                            out.reasons
                                .push(format!("disk {disk} is below the {} GB the plan asks", m.disk_gb));
                        }
                    }
                }
                Err(_) => out
                    .reasons
                    .push(format!("its disk `{disk}` cannot be read as a size")),
            }
        }
    }
    out.cost = match (out.hours, offer.price_per_hour) {
        (Some(h), Some(p)) => Some(fit::cents(h * p)),
        _ => None,
    };
    out
}

/// What the fit is asked, from the options.
fn ask(o: &Options) -> fit::Ask {
    fit::Ask {
        gpus: o.gpus,
        tp: o.tp,
        pp: o.pp,
        tokens: o.tokens,
        mfu: o.mfu,
    }
}

/// The plan's pick: the best offer that fits, runs a stack and falls short in nothing, else
/// the first GPU that fits; its GPU, count and stack.
fn pick(offers: &[RankedOffer], fits: &[Fit]) -> Option<(String, u32, Option<FitStack>)> {
    match offers
        .iter()
        .find(|o| o.fits && o.stack_runs && o.reasons.is_empty())
    {
        Some(o) => Some((o.gpu.clone()?, o.count, o.stack.clone())),
        None => {
            let f = fits.iter().find(|f| f.fits)?;
            Some((f.gpu.clone(), f.count, f.stack.clone()))
        }
    }
}

/// The order to accept on delivery for the plan's pick: the first offer that fits, runs a
/// stack and falls short in nothing, else the first fitting GPU. Keys and units as `check --order` reads them.
pub fn order(plan: &Plan) -> Option<String> {
    let (gpu, count, stack) = pick(&plan.offers, &plan.fits)?;
    let fit = plan.fits.iter().find(|f| f.gpu == gpu);
    let memory_gib = fit.map(|f| f.memory_bytes as f64 / (1u64 << 30) as f64);
    let mut lines = vec![
        format!(
            "# The order gpuenv plan made for {} ({} parameters, {}); check it on delivery with",
            plan.model.source,
            plan.model.params,
            format!("{:?}", plan.settings.method).to_lowercase()
        ),
        "# `gpuenv check --order THIS_FILE`.".to_string(),
        format!("gpu = \"{gpu}\""),
        format!("gpus = {count}"),
    ];
    if let Some(m) = memory_gib {
        lines.push(format!("gpu_memory = \"{m:.0}GB\""));
    }
    if let Some(d) = stack.as_ref().and_then(|s| s.min_driver.clone()) {
        lines.push(format!("driver = \">={d}\""));
    }
    if let Some(m) = &plan.machine {
        lines.push(format!("cpus = {}", m.cpu_cores));
        lines.push(format!("memory = \"{}GiB\"", m.ram_gib));
        lines.push(format!("disk = \"{}GB\"", m.disk_gb.max(1)));
    }
    let shard = fit.map_or(plan.settings.shard, |f| f.shard);
    if count > 1 && count <= fit::GPUS_PER_NODE && shard != Shard::None {
        lines.push("nvlink = \"all\"".into());
    }
    if count > fit::GPUS_PER_NODE {
        lines.push("rdma = true".into());
    }
    Some(lines.join("\n") + "\n")
}
