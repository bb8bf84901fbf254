//! A whole plan: the estimate, the GPUs it fits on with the stack the resolver finds for
//! each, the machine, the time and cost, the offers ranked, and the order to accept.
//!
//! Owns: putting the parts together and the order the plan implies. Must not: parse flags,
//! read files or print (the command does), or judge a stack itself (the resolver does).

use serde::{Deserialize, Serialize};

use super::fit::{self, Fit, Machine};
use super::offers::{self, Offer, RankedOffer};
use super::types::{Assumption, DriverFloor, Estimate, FitStack, Method, ModelShape, Settings, Shard};
use crate::db::Db;
use crate::db::records::{Gpu, Nvlink};
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
    /// The currency of `--price` (`--currency`), printed with the costs.
    pub currency: Option<offers::Currency>,
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
    /// What the machine and the order are for.
    #[serde(default)]
    pub pick: Option<Pick>,
}

/// The best stack for `count` of `gpu` with the stack flags of `q`, on `driver` when the
/// offer lists one (else on the driver of `q`, if any), and the driver floor its order asks
/// for ([`driver_floor`]).
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
            driver_floor: driver_floor(&a.stacks, gpu, q.driver.as_ref()),
            why: None,
        },
        best => FitStack {
            status: "incompatible".into(),
            torch: None,
            python: None,
            cuda: None,
            min_driver: None,
            driver_floor: None,
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

/// The best stack for each `(gpu, count)`, asked on every core at once: the questions are
/// independent and the resolver is pure, each thread over its own index of the database.
fn stacks_at_once(db: &Db, q: &Query, asks: &[(&Gpu, u32)]) -> Vec<FitStack> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(asks.len());
    if threads <= 1 {
        return asks.iter().map(|(g, c)| stack_for(db, q, g, *c, None)).collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = asks
            .chunks(asks.len().div_ceil(threads))
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(g, c)| stack_for(db, q, g, *c, None))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The driver an order asks for: the floor of the stack that runs on the most drivers
/// among the good ones (those the resolver finds compatible, natively), so that the order
/// turns away no host a good stack runs on.
/// - With a driver (the offer's, or `--driver`): the newest torch that driver runs
///   natively, the resolver's first compatible stack; its own floor (CUDA's minimum driver)
///   is at most that driver.
/// - Without one: the lowest native floor of every compatible stack, which is that of the
///   lowest CUDA whose builds run the GPU natively; of the builds for it, the newest torch.
///   The newest stack's floor (torch 2.15's 595.45.04) would turn away most rented hosts.
fn driver_floor(
    stacks: &[crate::resolve::Stack],
    gpu: &Gpu,
    driver: Option<&crate::model::DriverVersion>,
) -> Option<DriverFloor> {
    let native = |s: &&crate::resolve::Stack| {
        s.status == Status::Compatible
            && s.needs
                .driver_native
                .as_deref()
                .and_then(|d| d.parse::<crate::model::DriverVersion>().ok())
                .is_some()
    };
    let floor_of = |s: &crate::resolve::Stack| {
        s.needs
            .driver_native
            .as_deref()
            .and_then(|d| d.parse::<crate::model::DriverVersion>().ok())
    };
    let build = |s: &crate::resolve::Stack| format!("{}+{}", s.torch, s.variant);
    let cuda = |s: &crate::resolve::Stack| s.cuda.as_ref().map_or("?".to_string(), |c| c.to_string());
    match driver {
        Some(d) => {
            let s = stacks.iter().find(native)?;
            let floor = floor_of(s)?;
            Some(DriverFloor {
                driver: floor.to_string(),
                torch: build(s),
                why: format!(
                    "torch {}, the newest build driver {d} runs natively (CUDA {}, whose minimum driver is {floor}): \
                     a host with that driver or newer runs it",
                    build(s),
                    cuda(s)
                ),
            })
        }
        None => {
            let newest = stacks.iter().find(native)?;
            let mut best = newest;
            for s in stacks.iter().filter(native) {
                // The resolver ranks the newest first: a later stack replaces the one held
                // only when its floor is lower.
                if floor_of(s) < floor_of(best) {
                    best = s;
                }
            }
            let floor = floor_of(best)?;
            let newer = if std::ptr::eq(best, newest) {
                String::new()
            } else {
                format!(
                    "; the newest, torch {}, would need driver {} or newer, which fewer rented hosts have",
                    build(newest),
                    floor_of(newest).map_or("?".to_string(), |d| d.to_string())
                )
            };
            Some(DriverFloor {
                driver: floor.to_string(),
                torch: build(best),
                why: format!(
                    "torch {}, the newest build for CUDA {}, the lowest CUDA whose builds run the {} natively: of the \
                     stacks that run, it runs on the most drivers{newer}",
                    build(best),
                    cuda(best),
                    gpu.name
                ),
            })
        }
    }
}

/// What the run keeps on disk: the model as downloaded (16-bit weights, as the Hub serves
/// them) and one checkpoint: the weights and optimizer states of full training; the
/// adapters and their optimizer states for LoRA and QLoRA, whose base is not saved again;
/// nothing for inference.
fn storage(model: &ModelShape, s: &Settings) -> fit::Storage {
    let mut whole = s.clone();
    whole.gpus = 1;
    whole.shard = Shard::None;
    whole.tp = 1;
    whole.pp = 1;
    whole.offload = crate::plan::Offload::None;
    whole.optimizer_in_backward = false;
    let e = super::estimate::estimate(model, &whole);
    let checkpoint = match s.method {
        Method::Inference => 0,
        Method::Full => e.per_gpu.weights.saturating_add(e.per_gpu.optimizer),
        // The adapters' own bytes equal their gradients' (both fp32).
        Method::Lora | Method::Qlora => e.per_gpu.gradients.saturating_add(e.per_gpu.optimizer),
    };
    fit::Storage {
        // Served models download as they run (an FP8 or int4 checkpoint); trained ones in
        // 16 bits, as the Hub serves them.
        base_bytes: match s.method {
            Method::Inference => e.per_gpu.weights,
            _ => model.params.saturating_mul(2),
        },
        checkpoint_bytes: checkpoint,
        adapters: matches!(s.method, Method::Lora | Method::Qlora),
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
    // The estimate turns on the count and its split, not on the GPU: computed once per
    // split and shared by every GPU the search tries at that count.
    let totals = std::cell::RefCell::new(std::collections::HashMap::new());
    let est = |s: &Settings| -> u64 {
        let key = (s.gpus, s.tp, s.pp, s.shard);
        if let Some(&t) = totals.borrow().get(&key) {
            return t;
        }
        let t = super::estimate::estimate(&model, s).per_gpu.total;
        totals.borrow_mut().insert(key, t);
        t
    };
    // A board modified after sale is tried only when asked for by name: no NVIDIA fact
    // vouches for it, so it is never proposed as an ordinary pick.
    let gpus: Vec<&Gpu> = if o.only.is_empty() {
        db.gpus.iter().filter(|g| g.modified.is_none()).collect()
    } else {
        o.only.iter().collect()
    };
    let ask = ask(o);
    let mut fits: Vec<Fit> = gpus
        .iter()
        .map(|g| fit::fit_gpu(g, &model, &settings, &ask, &est))
        .collect();
    // Fitting first, the fewest GPUs first, then those with room to spare before tight
    // ones (the estimate is held to within 25% of measured runs, so a fit with less than a
    // fifth of it to spare may not hold), and among each the smallest card.
    let tight = |f: &Fit| f.headroom_bytes < i64::try_from(f.per_gpu_bytes / 5).unwrap_or(i64::MAX);
    fits.sort_by(|a, b| {
        (!a.fits, a.count, tight(a), a.memory_bytes, a.gpu.as_str()).cmp(&(
            !b.fits,
            b.count,
            tight(b),
            b.memory_bytes,
            b.gpu.as_str(),
        ))
    });
    // The resolver's answer turns on what a GPU runs (its compute capability, and whether
    // it may use CUDA forward compatibility, the CPU it sits beside), not on its name or
    // count: GPUs alike share
    // one answer, so a plan over every GPU of compat-db asks it a few times, not ninety.
    // Without a driver in the question, forward compatibility decides nothing (it is a
    // rule about a driver older than the build's CUDA), so GPUs alike in compute
    // capability and host CPU share one answer: a plan over every GPU of compat-db asks
    // the resolver 17 times, not ninety, and those questions run on every core at once.
    let key = |g: &Gpu| {
        (
            g.compute_capability.to_string(),
            o.stack.driver.is_some() && g.forward_compat,
            g.host_arch.clone(),
        )
    };
    let mut asks: Vec<(&Gpu, u32)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for f in fits.iter().filter(|f| f.fits) {
        if let Some(g) = gpus.iter().find(|g| g.name == f.gpu) {
            if seen.insert(key(g)) {
                asks.push((g, f.count));
            }
        }
    }
    let answers: std::collections::HashMap<_, FitStack> = asks
        .iter()
        .map(|(g, _)| key(g))
        .zip(stacks_at_once(db, &o.stack, &asks))
        .collect();
    for f in fits.iter_mut().filter(|f| f.fits) {
        if let Some(g) = gpus.iter().find(|g| g.name == f.gpu) {
            f.stack = answers.get(&key(g)).cloned();
        }
    }
    let ckpt = storage(&model, &settings);
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
    for g in gpus.iter().filter(|g| g.modified.is_some()) {
        assumptions.push(modified_board(g));
    }
    if o.tokens.is_some() || settings.method == Method::Inference {
        assumptions.extend(fit::time_assumptions(o.mfu, settings.method, settings.engine));
    }
    let mut ranked: Vec<RankedOffer> = o
        .offers
        .iter()
        .map(|offer| judge_offer(db, &model, &settings, o, offer, &ckpt))
        .collect();
    offers::rank(&mut ranked);
    // The machine around the pick: the best offer that falls short in nothing, else the
    // first GPU that fits.
    let chosen = pick(db, &ranked, &fits);
    let machine = chosen
        .as_ref()
        .map(|p| fit::machine(p.count, &ckpt, o.dataset_gb, o.keep_checkpoints));
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
        pick: chosen,
    }
}

/// What a plan that uses a board modified after sale rests on, said with the plan's
/// assumptions.
fn modified_board(g: &Gpu) -> Assumption {
    Assumption {
        what: format!("{}: a modified board", g.name),
        value: g.modified.clone().unwrap_or_default(),
        source: format!(
            "compat-db gpu/{}: {}",
            g.id,
            g.sources
                .iter()
                .map(|s| s.url.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The GPU record a listing names, its count, and a note when that record is a board
/// modified after sale (`RTX 4090 48GB`). A memory size no record of the GPU has
/// (`RTX 4090 32GB`) is no GPU compat-db knows: the lookup says which sizes it knows.
fn gpu_of_listing<'a>(db: &'a Db, text: &str) -> Result<(&'a Gpu, u32, Option<String>), String> {
    let found = db
        .gpus_written(text)
        .map_err(|e| format!("its GPU `{text}` is not one compat-db knows: {e}"))?;
    let Some((m, n)) = found.into_iter().next() else {
        return Err(format!("its GPU `{text}` names no GPU"));
    };
    let note = m.chosen.modified.as_ref().map(|risk| {
        format!(
            "its GPU `{text}` read as the {}, a modified board: {risk}",
            m.chosen.name
        )
    });
    Ok((m.chosen, n, note))
}

/// Whether every pair of `count` GPUs of `gpu` is joined by NVLink, from what the GPU can
/// have (compat-db) and what the listing says; and a note when the listing claims more
/// than the GPU can have.
fn judged_nvlink(
    gpu: &Gpu,
    count: u32,
    listed: Option<bool>,
    interconnect: Option<&str>,
) -> (bool, Option<String>) {
    let said = interconnect.unwrap_or_default();
    match gpu.nvlink {
        // Modules on a baseboard: NVLink (or NVSwitch) joins them unless the listing says
        // they are PCIe cards.
        Nvlink::Board => (listed != Some(false), None),
        Nvlink::Bridge => {
            if count <= 2 {
                (listed == Some(true), None)
            } else {
                let note = (listed == Some(true)).then(|| {
                    format!(
                        "the listing says NVLink (`{said}`), but the {} takes NVLink bridges, which join pairs of \
                         cards, never all {count}: judged as PCIe between the pairs",
                        gpu.name
                    )
                });
                (false, note)
            }
        }
        Nvlink::None => {
            let note = (listed == Some(true)).then(|| {
                format!(
                    "the listing says NVLink (`{said}`), but the {} has no NVLink (compat-db): judged as PCIe",
                    gpu.name
                )
            });
            (false, note)
        }
    }
}

/// A published measurement of the same training over NVLink and over PCIe.
pub const PCIE_SLOWDOWN_SOURCE: &str = "Hugging Face Transformers docs, perf_hardware (v4.49.0), \
https://huggingface.co/docs/transformers/v4.49.0/perf_hardware: GPT-2 trained with DDP on 2x TITAN RTX, 101 s with \
NVLink, 131 s with NCCL_P2P_DISABLE=1 (over PCIe)";

/// What a split of the model over GPUs that PCIe joins means for the run: the parallelism
/// that suits those links, and the slowdown, as far as a published figure says.
fn pcie_parallelism(method: Method, shard: Shard, count: u32) -> String {
    let how = if method == Method::Inference {
        "serve it with pipeline parallelism (whole layers on each GPU, activations passed once per stage) rather \
         than tensor parallelism, whose all-reduce in every layer would cross PCIe"
            .to_string()
    } else {
        format!(
            "{} gathers every layer's weights across the {count} GPUs each step, over PCIe here (1.5x the traffic \
             of plain data parallelism: ZeRO, arXiv:1910.02054, §7); pipeline parallelism passes only activations \
             between stages, and tensor parallelism across PCIe is the slowest choice",
            match shard {
                Shard::Fsdp => "FSDP",
                Shard::Zero1 => "ZeRO-1",
                Shard::Zero2 => "ZeRO-2",
                _ => "ZeRO-3",
            }
        )
    };
    format!(
        "its GPUs are linked by PCIe only and the model is split across them: {how}. The time above leaves that \
         traffic out; the one published measurement, data parallelism on 2 GPUs, took 1.3x as long over PCIe as \
         over NVLink ({PCIE_SLOWDOWN_SOURCE}); a model split over {count} GPUs moves more and may lose more"
    )
}

/// One offer: its GPUs as written, the fit at its count, the stack on its driver, its
/// links, RAM and disk against the machine, and the price and cost.
fn judge_offer(
    db: &Db,
    model: &ModelShape,
    settings: &Settings,
    o: &Options,
    offer: &Offer,
    ckpt: &fit::Storage,
) -> RankedOffer {
    let mut out = RankedOffer::listed(offer);
    let (gpu, written_count, named) = match gpu_of_listing(db, &offer.gpu) {
        Ok(found) => found,
        Err(reason) => {
            out.reasons.push(reason);
            out.price(out.count, None);
            return out;
        }
    };
    out.notes.extend(named);
    let count = offer.count.unwrap_or(written_count).max(1);
    out.count = count;
    out.gpu = Some(gpu.name.clone());
    out.memory_gib = Some(gpu.memory_gib);
    let est = |s: &Settings| super::estimate::estimate(model, s).per_gpu.total;
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
    if !f.unverified_figures.is_empty() {
        out.notes
            .push(unverified_speed_note(&gpu.name, &f.unverified_figures));
    }
    out.shard = Some(f.shard);
    if o.tokens.is_some() && f.hours.is_none() {
        out.unranked_on_time = true;
        out.notes.push(format!(
            "unranked on time: compat-db has no BF16 TFLOPS figure for the {}, so the run's hours and cost are \
             unknown; it ranks after the offers whose run cost is known, by price per machine-hour, which says \
             nothing of what the run costs",
            gpu.name
        ));
    }
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
    let (listed_nvlink, rdma) = offers::listed_links(offer.interconnect.as_deref());
    if count > 1 {
        let (all, note) = judged_nvlink(gpu, count, listed_nvlink, offer.interconnect.as_deref());
        out.nvlink = Some(all);
        out.notes.extend(note);
        if f.shard != Shard::None && !all {
            let p = pcie_parallelism(settings.method, f.shard, count.min(fit::GPUS_PER_NODE));
            out.notes.push(p.clone());
            out.parallelism = Some(p);
        }
    }
    if count > fit::GPUS_PER_NODE && rdma == Some(false) {
        out.reasons
            .push("several nodes and no RDMA listed: the gradients cross nodes every step".into());
    }
    {
        let m = fit::machine(count, ckpt, o.dataset_gb, o.keep_checkpoints);
        let ram_needed = m.ram_gib;
        if let Some(ram) = offer.ram.as_deref() {
            let mut e = Expect::default();
            match e.set_flag(Item::Memory, ram) {
                Ok(()) => {
                    if let Some(gib) = e.memory.map(|s| s.value) {
                        out.ram_gib = Some(gib);
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
                        out.disk_gb = Some(gb);
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
        if let Some(n) = offer.cpus {
            if n < m.cpu_cores {
                out.reasons
                    .push(format!("{n} CPUs are below the {} the plan asks", m.cpu_cores));
            }
        }
    }
    out.price(count, out.hours);
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

/// What the plan settles on, for the machine and the order: the best offer that fits,
/// runs a stack and falls short in nothing, else the first GPU that fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pick {
    /// The offer's name, when the pick is an offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// The GPU record.
    pub gpu: String,
    /// How many.
    pub count: u32,
    /// Memory per GPU, GiB, as judged.
    pub memory_gib: f64,
    /// How the model states split over them.
    pub shard: Shard,
    /// What NVLink the GPU can have (compat-db).
    pub gpu_nvlink: Nvlink,
    /// Every GPU pair joined by NVLink, as judged for an offer from its GPU and listing;
    /// for a GPU of compat-db, what its record allows.
    pub nvlink: bool,
    /// The stack, with the driver floor its order asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<FitStack>,
    /// CPUs as the offer lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// RAM as the offer lists it, GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_gib: Option<f64>,
    /// Disk as the offer lists it, GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_gb: Option<f64>,
}

/// The plan's pick: the best offer that fits, runs a stack and falls short in nothing, else
/// the first GPU that fits.
fn pick(db: &Db, offers: &[RankedOffer], fits: &[Fit]) -> Option<Pick> {
    if let Some(o) = offers
        .iter()
        .find(|o| o.fits && o.stack_runs && o.reasons.is_empty())
    {
        let name = o.gpu.as_deref()?;
        let g = db.gpus.iter().find(|g| g.name == name)?;
        return Some(Pick {
            offer: Some(o.offer.name.clone()),
            gpu: g.name.clone(),
            count: o.count,
            memory_gib: o.memory_gib.unwrap_or(g.memory_gib),
            shard: o.shard.unwrap_or(Shard::None),
            gpu_nvlink: g.nvlink,
            nvlink: o.nvlink.unwrap_or(false),
            stack: o.stack.clone(),
            cpus: o.offer.cpus,
            ram_gib: o.ram_gib,
            disk_gb: o.disk_gb,
        });
    }
    let f = fits.iter().find(|f| f.fits)?;
    let g = db.gpus.iter().find(|g| g.name == f.gpu)?;
    Some(Pick {
        offer: None,
        gpu: f.gpu.clone(),
        count: f.count,
        memory_gib: f.memory_bytes as f64 / (1u64 << 30) as f64,
        shard: f.shard,
        gpu_nvlink: g.nvlink,
        nvlink: g.nvlink == Nvlink::Board,
        stack: f.stack.clone(),
        cpus: None,
        ram_gib: None,
        disk_gb: None,
    })
}

/// A number as an order writes it: whole when it is.
fn whole(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The order to accept on delivery for the plan's pick ([`Pick`]). Keys and units as
/// `check --order` reads them; the comments say where each value comes from.
pub fn order(plan: &Plan) -> Option<String> {
    let p = plan.pick.as_ref()?;
    let mut lines = vec![
        format!(
            "# The order gpuenv plan made for {} ({} parameters, {}); check it on delivery with",
            plan.model.source,
            plan.model.params,
            format!("{:?}", plan.settings.method).to_lowercase()
        ),
        "# `gpuenv check --order THIS_FILE`.".to_string(),
    ];
    if let Some(name) = &p.offer {
        lines.push(format!("# For the offer `{}`.", name.replace('\n', " ")));
    }
    lines.push(format!("gpu = \"{}\"", p.gpu));
    lines.push(format!("gpus = {}", p.count));
    lines.push(format!("gpu_memory = \"{:.0}GB\"", p.memory_gib));
    if let Some(f) = p.stack.as_ref().and_then(|s| s.driver_floor.as_ref()) {
        lines.push(format!("# The driver floor comes from {}.", f.why));
        lines.push(format!("driver = \">={}\"", f.driver));
    }
    if let Some(m) = &plan.machine {
        let listed = p.cpus.is_some() || p.ram_gib.is_some() || p.disk_gb.is_some();
        if listed {
            lines.push(
                "# CPUs, memory and disk as the offer lists them (at least what the plan needs), so that a short \
                 delivery fails."
                    .to_string(),
            );
        }
        let cpus = p.cpus.map_or(m.cpu_cores, |c| c.max(m.cpu_cores));
        let ram = p.ram_gib.map_or(m.ram_gib as f64, |r| r.max(m.ram_gib as f64));
        let disk = p
            .disk_gb
            .map_or(m.disk_gb.max(1) as f64, |d| d.max(m.disk_gb as f64));
        lines.push(format!("cpus = {cpus}"));
        lines.push(format!("memory = \"{}GiB\"", whole(ram)));
        lines.push(format!("disk = \"{}GB\"", whole(disk)));
    }
    let split = p.count > 1 && p.shard != Shard::None;
    if split && p.count <= fit::GPUS_PER_NODE {
        match (p.gpu_nvlink, p.nvlink) {
            (Nvlink::Board, true) => {
                lines.push(format!(
                    "# The model is split across the GPUs and the {} is a module on an NVLink board: every pair \
                     linked.",
                    p.gpu
                ));
                lines.push("nvlink = \"all\"".into());
            }
            (gpu_nvlink, _) => {
                lines.push(format!(
                    "# The model is split across the GPUs, which PCIe joins ({}): no NVLink is asked; every pair \
                     must reach the others over PCIe.",
                    match gpu_nvlink {
                        Nvlink::None => format!("the {} has no NVLink", p.gpu),
                        Nvlink::Bridge => format!("NVLink bridges join pairs of {} cards at most", p.gpu),
                        Nvlink::Board => "the offer lists PCIe".to_string(),
                    }
                ));
                lines.push("topology = \"pcie\"".into());
            }
        }
    }
    if p.count > fit::GPUS_PER_NODE {
        lines.push("rdma = true".into());
    }
    Some(lines.join("\n") + "\n")
}

/// What a time resting on unverified figures says, in a plan's notes and on its terminal.
pub fn unverified_speed_note(gpu: &str, figures: &[String]) -> String {
    format!(
        "its time rests on compat-db figures for the {gpu} that are unverified (read from a copy or a third \
         party, not from NVIDIA): {}",
        figures.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(method: Method) -> Settings {
        Settings {
            method,
            ..Settings::default()
        }
    }

    fn shape(params: u64) -> ModelShape {
        ModelShape {
            params,
            active_params: params,
            source: "test".into(),
            ..ModelShape::default()
        }
    }

    fn options(offers: Vec<Offer>) -> Options {
        Options {
            mfu: fit::DEFAULT_MFU,
            keep_checkpoints: 1,
            offers,
            ..Options::default()
        }
    }

    /// Without a driver the floor is the lowest of the stacks that run natively, not the
    /// newest stack's; with one it is at most that driver, and the newest torch it runs.
    #[test]
    fn the_driver_floor_runs_on_the_most_drivers() {
        let db = Db::embedded().unwrap();
        let g = db.gpu("RTX 4090").unwrap();
        let q = Query::default();
        let s = stack_for(db, &q, g, 8, None);
        let f = s.driver_floor.clone().unwrap();
        let floor: crate::model::DriverVersion = f.driver.parse().unwrap();
        let newest: crate::model::DriverVersion = s.min_driver.as_deref().unwrap().parse().unwrap();
        assert!(floor < newest, "{f:?} vs the newest stack's {newest}");
        assert!(
            f.why
                .contains("the lowest CUDA whose builds run the RTX 4090 natively"),
            "{}",
            f.why
        );
        assert!(
            f.why
                .contains(&format!("the newest, torch {}", s.torch.as_deref().unwrap())),
            "{}",
            f.why
        );
        // No stack that runs natively has a lower floor.
        let mut all = q.clone();
        all.gpus = vec![GpuAsk {
            gpu: g.clone(),
            count: 8,
        }];
        for st in crate::resolve::resolve(db, &all)
            .stacks
            .iter()
            .filter(|st| st.status == Status::Compatible)
        {
            if let Some(d) = st.needs.driver_native.as_deref() {
                assert!(d.parse::<crate::model::DriverVersion>().unwrap() >= floor, "{d}");
            }
        }
        // On a listed driver: the newest torch it runs natively, whose floor is at most it.
        let d: crate::model::DriverVersion = "535.86.05".parse().unwrap();
        let s = stack_for(db, &q, g, 8, Some(d.clone()));
        let f = s.driver_floor.unwrap();
        assert!(
            f.driver.parse::<crate::model::DriverVersion>().unwrap() <= d,
            "{f:?}"
        );
        assert_eq!(Some(f.torch.clone()), s.torch, "the best stack on that driver");
        assert!(
            f.why.contains("the newest build driver 535.86.05 runs natively"),
            "{}",
            f.why
        );
    }

    /// A listing cannot give NVLink to a GPU that has none, nor bridges to all of eight.
    #[test]
    fn nvlink_is_judged_from_the_record() {
        let db = Db::embedded().unwrap();
        let rtx = db.gpu("RTX 4090").unwrap();
        let bridge = db.gpus.iter().find(|g| g.nvlink == Nvlink::Bridge).unwrap();
        let board = db.gpu("H100 SXM").unwrap();
        let (all, note) = judged_nvlink(rtx, 8, Some(true), Some("NVLink"));
        assert!(!all);
        assert!(
            note.unwrap()
                .contains("has no NVLink (compat-db): judged as PCIe")
        );
        assert_eq!(judged_nvlink(rtx, 8, None, None), (false, None));
        let (all, note) = judged_nvlink(bridge, 8, Some(true), Some("NVLink"));
        assert!(!all);
        assert!(note.unwrap().contains("join pairs of cards, never all 8"));
        assert_eq!(judged_nvlink(bridge, 2, Some(true), Some("NVLink")), (true, None));
        assert_eq!(judged_nvlink(board, 8, None, None), (true, None));
        assert_eq!(judged_nvlink(board, 8, Some(false), Some("PCIe")), (false, None));
    }

    /// The modified 48 GB RTX 4090 is never proposed: a plan over every GPU leaves it out;
    /// asked for by name, it is planned, and the plan says what it rests on.
    #[test]
    fn a_modified_board_only_when_asked_for() {
        let db = Db::embedded().unwrap();
        let s = settings(Method::Full);
        let p = plan(db, shape(7_000_000_000), s.clone(), &options(vec![]));
        assert!(p.fits.iter().all(|f| f.gpu != "RTX 4090 48GB"), "{:?}", p.fits);
        assert!(p.fits.iter().any(|f| f.gpu == "RTX 4060 Ti 16GB"));
        assert!(p.assumptions.iter().all(|a| !a.what.contains("modified")));
        let mut o = options(vec![]);
        o.only = vec![db.gpu("RTX 4090 48G").unwrap().clone()];
        let p = plan(db, shape(7_000_000_000), s, &o);
        assert_eq!(p.fits.len(), 1);
        assert_eq!(p.fits[0].gpu, "RTX 4090 48GB");
        let said = p
            .assumptions
            .iter()
            .find(|a| a.what == "RTX 4090 48GB: a modified board")
            .expect("the plan says it rests on a modified board");
        assert!(said.value.contains("No NVIDIA warranty"), "{}", said.value);
    }

    #[test]
    fn a_memory_size_in_a_gpu_name() {
        let db = Db::embedded().unwrap();
        // The modified 48 GB board has a record of its own: read as it, and said.
        let (g, n, note) = gpu_of_listing(db, "8x RTX 4090 48GB").unwrap();
        assert_eq!((g.name.as_str(), n, g.memory_gib), ("RTX 4090 48GB", 8, 48.0));
        let note = note.unwrap();
        assert!(
            note.contains("a modified board") && note.contains("not an NVIDIA product"),
            "{note}"
        );
        let (g, n, _) = gpu_of_listing(db, "8卡 RTX 4090 48G").unwrap();
        assert_eq!((g.name.as_str(), n), ("RTX 4090 48GB", 8));
        let (g, _, note) = gpu_of_listing(db, "RTX 4090 24GB").unwrap();
        assert_eq!((g.name.as_str(), note), ("RTX 4090", None));
        // A size no record has is no GPU compat-db knows, and the sizes it knows are named.
        let e = gpu_of_listing(db, "RTX 4090 32GB").unwrap_err();
        assert!(
            e.contains("32 GB") && e.contains("24 GB") && e.contains("48 GB"),
            "{e}"
        );
        assert!(gpu_of_listing(db, "RTX 9999 48GB").is_err());
    }

    /// The order: NVLink for a split over board modules; nothing of it for cards that have
    /// none, or bridges; the offer's listed CPUs, RAM and disk.
    #[test]
    fn the_order_asks_what_the_gpu_can_have() {
        let db = Db::embedded().unwrap();
        let offer = |gpu: &str, interconnect: &str| Offer {
            name: gpu.into(),
            gpu: gpu.into(),
            driver: Some("550".into()),
            interconnect: Some(interconnect.into()),
            ram: Some("1TB".into()),
            disk: Some("8TB NVMe".into()),
            cpus: Some(96),
            ..Offer::default()
        };
        let mut s = settings(Method::Full);
        s.gpus = 8;
        s.shard = Shard::Zero3;
        let plan_for = |o: Offer| {
            let mut opts = options(vec![o]);
            opts.gpus = Some(8);
            plan(db, shape(7_000_000_000), s.clone(), &opts)
        };
        let p = plan_for(offer("8x H100 SXM", "NVLink"));
        let text = order(&p).unwrap();
        assert!(text.contains("nvlink = \"all\"\n"), "{text}");
        assert!(
            text.contains("cpus = 96\nmemory = \"1024GiB\"\ndisk = \"8000GB\"\n"),
            "{text}"
        );
        assert!(text.contains("# For the offer `8x H100 SXM`."), "{text}");
        let p = plan_for(offer("8x RTX 4090", "NVLink"));
        assert_eq!(p.offers[0].nvlink, Some(false));
        let text = order(&p).unwrap();
        assert!(!text.contains("nvlink"), "{text}");
        assert!(text.contains("topology = \"pcie\"\n"), "{text}");
        assert!(text.contains("the RTX 4090 has no NVLink"), "{text}");
        let bridge = db
            .gpus
            .iter()
            .find(|g| g.nvlink == Nvlink::Bridge && g.memory_gib >= 24.0)
            .unwrap();
        let p = plan_for(offer(&format!("8x {}", bridge.name), "NVLink bridge"));
        let text = order(&p).unwrap();
        assert!(!text.contains("nvlink ="), "{text}");
        assert!(text.contains("NVLink bridges join pairs"), "{text}");
        // Listed RAM below the plan's: falls short, and the order is the fit's minimum.
        let mut short = offer("8x H100 SXM", "NVLink");
        short.ram = Some("64GB".into());
        let p = plan_for(short);
        assert!(
            p.offers[0].reasons[0].starts_with("RAM 64GB is below"),
            "{:?}",
            p.offers[0].reasons
        );
        assert_eq!(p.pick.as_ref().unwrap().offer, None);
    }
}
