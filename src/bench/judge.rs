//! Judging measured figures: each against its GPU's datasheet times the efficiency that
//! published measurements reach (compat-db's `efficiency` records), and each against the
//! same figure of the machine's other GPUs (or, across a fleet, of the other nodes).
//!
//! Owns: which efficiency record judges a figure, the PCIe link's theoretical rate, the
//! verdict and the words of its rule, and the peer rule ([`PEER_FRACTION`] below the
//! median). Must not: measure, read files, print, or decide acceptance (that is
//! [`crate::judge::bench`]); it reads the database and the documents handed to it and
//! nothing else.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::figure::{BenchDoc, Figure, Metric};
use crate::db::{Db, Efficiency, EfficiencyBasis, Gpu};
use crate::host::GpuInfo;

/// How far below the median of its peers a figure may fall before it is named: 10%.
///
/// GPUs of one model in one node differ by about 5% from the silicon and the cooling
/// (ml-engineering's accelerator chapter, "Not all accelerators are created equal":
/// "I have seen 5% and higher differences on an 8-gpu node"), and nvbandwidth's published
/// 8-GPU rows differ by less than 1% on a healthy node (NVIDIA/nvbandwidth issue 24:
/// device_to_host 52.76 to 52.78 GB/s). Twice the normal spread is a card, a slot or a
/// cable that is not like the others.
pub const PEER_FRACTION: f64 = 0.10;

/// The fewest figures compared. With two, the median is their mean, which the slow one
/// drags down with it, so the better of the two is the reference instead (see
/// [`reference()`]); with one there is nothing to compare.
pub const PEER_MIN: usize = 2;

/// A figure's verdict against its datasheet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// At or above the record's `pass_min` share.
    Pass,
    /// Between `warn_min` and `pass_min`.
    Warn,
    /// Below `warn_min`.
    Fail,
    /// No datasheet fact or no efficiency record to judge it by: never a pass.
    Unknown,
}

impl Verdict {
    /// The word, as the JSON writes it.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::Unknown => "unknown",
        }
    }
}

/// A PCIe link as the machine reports it: the generation and the lanes it can train to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    /// PCIe generation (1 to 5).
    pub generation: u32,
    /// Lanes (1 to 32).
    pub width: u32,
}

impl PcieLink {
    /// The link's theoretical rate in one direction, GB/s (10^9 bytes a second): the
    /// per-lane transfer rate times the lanes times the encoding's payload share, over 8
    /// bits. PCI-SIG's rates: 2.5, 5, 8, 16 and 32 GT/s for Gen1 to Gen5; 8b/10b encoding
    /// for Gen1 and Gen2, 128b/130b from Gen3 (<https://pcisig.com/specifications>).
    /// Gen5 x16 gives 63.0 GB/s, Gen4 x16 31.5. `None` for Gen6 and later, whose FLIT mode
    /// has no fixed encoding share, and for a width no slot has.
    pub fn theoretical_gbs(self) -> Option<f64> {
        let (gts, payload) = match self.generation {
            1 => (2.5, 8.0 / 10.0),
            2 => (5.0, 8.0 / 10.0),
            3 => (8.0, 128.0 / 130.0),
            4 => (16.0, 128.0 / 130.0),
            5 => (32.0, 128.0 / 130.0),
            _ => return None,
        };
        if !(1..=32).contains(&self.width) {
            return None;
        }
        Some(gts * f64::from(self.width) * payload / 8.0)
    }

    /// `Gen5 x16`.
    pub fn label(self) -> String {
        format!("Gen{} x{}", self.generation, self.width)
    }
}

/// Each GPU's PCIe link from what `doctor` read: the generation and width the link can
/// reach (`pcie_gen_max`, `pcie_width_max`), not the current ones, which drop at idle.
pub fn links_from_host(gpus: &[GpuInfo]) -> BTreeMap<u32, PcieLink> {
    gpus.iter()
        .filter_map(|g| {
            Some((
                g.index,
                PcieLink {
                    generation: g.pcie_gen_max?,
                    width: g.pcie_width_max?,
                },
            ))
        })
        .collect()
}

/// One figure and how it fares against its datasheet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// The figure.
    pub figure: Figure,
    /// The GPU record it was judged by (`H100 SXM`), for a per-GPU figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_record: Option<String>,
    /// The datasheet figure it is divided by, in the figure's unit (after the record's
    /// factor), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasheet: Option<f64>,
    /// Which fact that is (`bf16_tflops`, `pcie_link Gen5 x16`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasheet_fact: Option<String>,
    /// The figure over the datasheet figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// The rule, in words: what was compared and the ranges, or why nothing could be.
    pub rule: String,
    /// The efficiency record that set the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<String>,
    /// Where the range comes from (the record's first source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whether the range is marked unverified in compat-db.
    #[serde(default)]
    pub unverified: bool,
}

/// A figure more than [`PEER_FRACTION`] worse than the median of its peers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outlier {
    /// What was measured.
    pub metric: Metric,
    /// Who is named: `GPU 5`, `GPU 2 -> GPU 5`, or a node's name.
    pub who: String,
    /// The GPU's index, for a GPU named on its machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The peer GPU's index, for a pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<u32>,
    /// Its figure.
    pub value: f64,
    /// What it was held to: the median of the group, or the better of two.
    pub median: f64,
    /// How many figures the median was taken over.
    pub peers: usize,
    /// The unit of both.
    pub unit: String,
    /// The rule, in words, with the numbers.
    pub rule: String,
}

/// Every figure of a document judged, and the GPUs that stand out among their peers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// Each figure, in the document's order.
    pub figures: Vec<Judged>,
    /// Figures worse than their peers by more than [`PEER_FRACTION`].
    pub outliers: Vec<Outlier>,
}

impl Judgement {
    /// Counts of pass, warn, fail and unknown.
    pub fn tally(&self) -> [usize; 4] {
        let mut t = [0; 4];
        for j in &self.figures {
            t[j.verdict as usize] += 1;
        }
        t
    }
}

/// Judges every figure of `doc` against the GPU records of `db` and against its peers.
/// `links` is each GPU's PCIe link (from [`links_from_host`]); a GPU without one has its
/// host copies judged `unknown`.
pub fn judge(doc: &BenchDoc, db: &Db, links: &BTreeMap<u32, PcieLink>) -> Judgement {
    let records: BTreeMap<u32, Option<&Gpu>> = doc
        .gpus
        .iter()
        .map(|g| (g.index, db.gpu_reported(&g.name, g.memory_mib).ok()))
        .collect();
    let figures = doc
        .figures
        .iter()
        .map(|f| judge_one(f, doc, &records, db, links))
        .collect();
    Judgement {
        figures,
        outliers: outliers_within(doc),
    }
}

fn judge_one(
    f: &Figure,
    doc: &BenchDoc,
    records: &BTreeMap<u32, Option<&Gpu>>,
    db: &Db,
    links: &BTreeMap<u32, PcieLink>,
) -> Judged {
    let unknown = |rule: String, gpu_record: Option<String>| Judged {
        figure: f.clone(),
        gpu_record,
        datasheet: None,
        datasheet_fact: None,
        share: None,
        verdict: Verdict::Unknown,
        rule,
        efficiency: None,
        source: None,
        unverified: false,
    };
    let name = metric_name(f.metric);
    if !Efficiency::METRICS.contains(&name.as_str()) {
        return unknown(
            format!("no datasheet figure to compare {name} with: judged against its peers only"),
            None,
        );
    }
    if !f.value.is_finite() || f.value < 0.0 {
        return unknown(format!("the figure {} is not a measurement", f.value), None);
    }
    // A machine-wide figure (NCCL's busbw) is judged by the first GPU's record: bench runs
    // it over GPUs of one model, and `doctor` would name a mixed machine.
    let index = f.gpu.or_else(|| doc.gpus.first().map(|g| g.index));
    let Some(index) = index else {
        return unknown(
            "no GPU named for this figure: no datasheet to compare with".into(),
            None,
        );
    };
    let Some(gpu) = records.get(&index).copied().flatten() else {
        let written = doc
            .gpus
            .iter()
            .find(|g| g.index == index)
            .map_or_else(|| format!("GPU {index}"), |g| crate::text::terminal_safe(&g.name));
        return unknown(
            format!("`{written}` is not a GPU in compat-db: no datasheet"),
            None,
        );
    };
    let mut candidates: Vec<&Efficiency> = db
        .efficiencies
        .iter()
        .filter(|e| e.metric == name && e.applies(gpu.architecture, gpu.nvlink))
        .collect();
    // The most specific record decides: one for the architecture over one for every GPU,
    // one for the NVLink kind over one for any.
    candidates.sort_by_key(|e| (e.architectures.is_empty(), e.nvlink.is_none(), e.id.clone()));
    let Some(eff) = candidates.first().copied() else {
        return unknown(
            format!("no efficiency record for {name} on {} in compat-db", gpu.name),
            Some(gpu.name.clone()),
        );
    };
    let (fact, basis) = match eff.basis {
        EfficiencyBasis::Bf16Tflops => ("bf16_tflops".to_string(), gpu.bf16_tflops),
        EfficiencyBasis::Fp8Tflops => ("fp8_tflops".to_string(), gpu.fp8_tflops),
        EfficiencyBasis::Fp16Tflops => ("fp16_tflops".to_string(), gpu.fp16_tflops),
        EfficiencyBasis::Tf32Tflops => ("tf32_tflops".to_string(), gpu.tf32_tflops),
        EfficiencyBasis::BandwidthGbs => ("bandwidth_gbs".to_string(), gpu.bandwidth_gbs.map(f64::from)),
        EfficiencyBasis::NvlinkGbs => ("nvlink_gbs".to_string(), gpu.nvlink_gbs.map(f64::from)),
        EfficiencyBasis::PcieLink => match links.get(&index) {
            Some(link) => (format!("pcie_link {}", link.label()), link.theoretical_gbs()),
            None => ("pcie_link".to_string(), None),
        },
    };
    let mut judged = unknown(String::new(), Some(gpu.name.clone()));
    judged.efficiency = Some(eff.id.clone());
    judged.source = eff.sources.first().map(|s| s.url.clone());
    judged.unverified = !eff.unverified.is_empty();
    let Some(basis) = basis.filter(|b| b.is_finite() && *b > 0.0) else {
        judged.rule = match eff.basis {
            EfficiencyBasis::PcieLink => format!(
                "GPU {index}'s PCIe link generation and width are unknown (or Gen6 and later): no theoretical rate to compare {name} with"
            ),
            _ => format!(
                "{} has no {fact} in compat-db: no datasheet figure for {name}",
                gpu.name
            ),
        };
        return judged;
    };
    let datasheet = basis * eff.factor();
    let share = f.value / datasheet;
    let verdict = if share >= eff.pass_min {
        Verdict::Pass
    } else if share >= eff.warn_min {
        Verdict::Warn
    } else {
        Verdict::Fail
    };
    let factor = if eff.factor() == 1.0 {
        String::new()
    } else {
        format!(" x {}", eff.factor())
    };
    judged.datasheet = Some(datasheet);
    judged.datasheet_fact = Some(fact.clone());
    judged.share = Some(share);
    judged.verdict = verdict;
    judged.rule = format!(
        "{value:.1} {unit} is {pct:.0}% of {datasheet:.1} {unit} ({gpu} {fact} {basis}{factor}); pass at {pass:.0}% or more, warn at {warn:.0}% or more, as published measurements reach ({measured}){unv}",
        value = f.value,
        unit = f.unit,
        pct = share * 100.0,
        gpu = gpu.name,
        basis = trim_number(basis),
        pass = eff.pass_min * 100.0,
        warn = eff.warn_min * 100.0,
        measured = eff.measured,
        unv = if judged.unverified {
            "; the range is marked unverified in compat-db"
        } else {
            ""
        },
    );
    judged
}

/// `989.5`, `900`, `63.02`: a datasheet number as written, or a computed one (a PCIe
/// link's rate) to two decimals.
fn trim_number(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The metric's name in `bench --json` (`matmul-bf16`).
pub fn metric_name(m: Metric) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The median of `values` (the mean of the middle two for an even count); `None` for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 0 {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// What a group's figures are held to, and its name in the rule: the median of three or
/// more; of two, the better one (their mean would move with the slow one).
pub fn reference(metric: Metric, values: &[f64]) -> Option<(f64, &'static str)> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    match finite.len() {
        0 | 1 => None,
        2 => {
            let best = if metric.higher_is_better() {
                finite[0].max(finite[1])
            } else {
                finite[0].min(finite[1])
            };
            Some((best, "the better"))
        }
        _ => median(&finite).map(|m| (m, "the median")),
    }
}

/// Whether `value` is worse than `median` by more than [`PEER_FRACTION`].
fn is_slow(metric: Metric, value: f64, median: f64) -> bool {
    if metric.higher_is_better() {
        value < median * (1.0 - PEER_FRACTION)
    } else {
        value > median * (1.0 + PEER_FRACTION)
    }
}

fn peer_rule(
    metric: Metric,
    value: f64,
    (median, what): (f64, &str),
    n: usize,
    unit: &str,
    among: &str,
) -> String {
    let (how, bound) = if metric.higher_is_better() {
        ("below", median * (1.0 - PEER_FRACTION))
    } else {
        ("above", median * (1.0 + PEER_FRACTION))
    };
    let off = if median > 0.0 {
        ((value - median) / median * 100.0).abs()
    } else {
        0.0
    };
    format!(
        "{value:.1} {unit} is {off:.0}% {how} {what} {median:.1} {unit} of {n} {among}; more than {pct:.0}% {how} it ({how} {bound:.1} {unit}) names it",
        pct = PEER_FRACTION * 100.0
    )
}

/// The figures of one machine's GPUs that are worse than the median of the same metric on
/// its other GPUs. Per-GPU figures are grouped by metric; peer-to-peer figures by metric
/// over every pair, so a bad link names its pair.
pub fn outliers_within(doc: &BenchDoc) -> Vec<Outlier> {
    let mut groups: BTreeMap<Metric, Vec<&Figure>> = BTreeMap::new();
    for f in &doc.figures {
        if f.gpu.is_some() && f.value.is_finite() {
            groups.entry(f.metric).or_default().push(f);
        }
    }
    let mut out = Vec::new();
    for (metric, figs) in groups {
        // One GPU measured twice (two engines) is still one peer: keep each (gpu, peer)'s
        // best figure.
        let mut best: BTreeMap<(Option<u32>, Option<u32>), &Figure> = BTreeMap::new();
        for f in figs {
            let key = (f.gpu, f.peer);
            let better = best.get(&key).is_none_or(|b| {
                if metric.higher_is_better() {
                    f.value > b.value
                } else {
                    f.value < b.value
                }
            });
            if better {
                best.insert(key, f);
            }
        }
        if best.len() < PEER_MIN {
            continue;
        }
        let values: Vec<f64> = best.values().map(|f| f.value).collect();
        let Some((med, what)) = reference(metric, &values) else {
            continue;
        };
        let among = if metric == Metric::PeerToPeer {
            "GPU pairs"
        } else {
            "GPUs of this machine"
        };
        for f in best.values() {
            if is_slow(metric, f.value, med) {
                let who = match (f.gpu, f.peer) {
                    (Some(g), Some(p)) => format!("GPU {g} -> GPU {p}"),
                    (Some(g), None) => format!("GPU {g}"),
                    _ => continue,
                };
                out.push(Outlier {
                    metric,
                    who,
                    gpu: f.gpu,
                    peer: f.peer,
                    value: f.value,
                    median: med,
                    peers: values.len(),
                    unit: f.unit.clone(),
                    rule: peer_rule(metric, f.value, (med, what), values.len(), &f.unit, among),
                });
            }
        }
    }
    out
}

/// A node's figure of `metric`: the median over its GPUs (or pairs) for a per-GPU metric,
/// the best machine-wide figure otherwise.
pub fn node_figure(doc: &BenchDoc, metric: Metric) -> Option<f64> {
    let per_gpu: Vec<f64> = doc
        .figures
        .iter()
        .filter(|f| f.metric == metric && f.gpu.is_some())
        .map(|f| f.value)
        .collect();
    if !per_gpu.is_empty() {
        return median(&per_gpu);
    }
    let whole = doc
        .figures
        .iter()
        .filter(|f| f.metric == metric && f.gpu.is_none() && f.value.is_finite())
        .map(|f| f.value);
    if metric.higher_is_better() {
        whole.reduce(f64::max)
    } else {
        whole.reduce(f64::min)
    }
}

/// The nodes of a fleet whose figure of a metric is worse than the median of the nodes by
/// more than [`PEER_FRACTION`], by the rule GPUs of one machine are held to. `nodes` is
/// each node's name and its `bench --json` document; a metric is compared over the nodes
/// that measured it, when they are at least [`PEER_MIN`].
pub fn outliers_across(nodes: &[(String, &BenchDoc)]) -> Vec<Outlier> {
    let mut metrics: Vec<Metric> = nodes
        .iter()
        .flat_map(|(_, d)| d.figures.iter().map(|f| f.metric))
        .collect();
    metrics.sort();
    metrics.dedup();
    let mut out = Vec::new();
    for metric in metrics {
        let values: Vec<(&String, f64)> = nodes
            .iter()
            .filter_map(|(name, d)| node_figure(d, metric).map(|v| (name, v)))
            .collect();
        if values.len() < PEER_MIN {
            continue;
        }
        let Some((med, what)) = reference(metric, &values.iter().map(|(_, v)| *v).collect::<Vec<_>>()) else {
            continue;
        };
        for (name, v) in &values {
            if is_slow(metric, *v, med) {
                out.push(Outlier {
                    metric,
                    who: crate::text::terminal_safe(name),
                    gpu: None,
                    peer: None,
                    value: *v,
                    median: med,
                    peers: values.len(),
                    unit: metric.unit().to_string(),
                    rule: peer_rule(metric, *v, (med, what), values.len(), metric.unit(), "nodes"),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::figure::{BenchGpu, Engine};
    use crate::db::Efficiency;

    fn db() -> &'static Db {
        Db::embedded().expect("the shipped compat-db loads")
    }

    fn machine(name: &str, n: u32) -> BenchDoc {
        BenchDoc {
            schema_version: 1,
            hostname: "node-a".into(),
            gpus: (0..n)
                .map(|index| BenchGpu {
                    index,
                    name: name.into(),
                    memory_mib: None,
                })
                .collect(),
            ..BenchDoc::default()
        }
    }

    /// nvidia-smi names the 8 GB and the 16 GB RTX 4060 Ti alike; the memory the bench
    /// header reports (16380 MiB in torch's `total_memory` of the 16 GB card, 8188 MiB of
    /// the 8 GB one) chooses the record the figures are judged by.
    #[test]
    fn the_reported_memory_chooses_the_board() {
        let judged_by = |memory_mib: Option<u64>| {
            let mut doc = machine("NVIDIA GeForce RTX 4060 Ti", 1);
            doc.gpus[0].memory_mib = memory_mib;
            doc.figures
                .push(Figure::new(Metric::MemoryBandwidth, 250.0, Engine::Gpuenv, "").on_gpu(0));
            let j = judge(&doc, db(), &gen5x16(1));
            j.figures[0].gpu_record.clone()
        };
        assert_eq!(judged_by(Some(16380)).as_deref(), Some("RTX 4060 Ti 16GB"));
        assert_eq!(judged_by(Some(8188)).as_deref(), Some("RTX 4060 Ti"));
        // No memory reported (a document written before it was): the name alone decides.
        assert_eq!(judged_by(None).as_deref(), Some("RTX 4060 Ti"));
    }

    fn gen5x16(n: u32) -> BTreeMap<u32, PcieLink> {
        (0..n)
            .map(|i| {
                (
                    i,
                    PcieLink {
                        generation: 5,
                        width: 16,
                    },
                )
            })
            .collect()
    }

    /// nvbandwidth's device_to_host_memcpy_sm row on an 8x H100 node, as published in
    /// NVIDIA/nvbandwidth issue 24 (https://github.com/NVIDIA/nvbandwidth/issues/24):
    /// 52.77 52.77 52.77 52.78 52.76 52.77 52.78 52.77 GB/s. GPU 5's figure is lowered here
    /// to 40.10 GB/s, a card in a slot that does not deliver, which the published node did
    /// not have.
    const NVBANDWIDTH_8X_H100_D2H: [f64; 8] = [52.77, 52.77, 52.77, 52.78, 52.76, 52.77, 52.78, 52.77];

    fn eight_with_one_slow() -> BenchDoc {
        let mut doc = machine("NVIDIA H100 80GB HBM3", 8);
        for (i, v) in NVBANDWIDTH_8X_H100_D2H.iter().enumerate() {
            let v = if i == 5 { 40.10 } else { *v };
            doc.figures.push(
                Figure::new(
                    Metric::DeviceToHost,
                    v,
                    Engine::Nvbandwidth,
                    "device_to_host_memcpy_sm",
                )
                .on_gpu(i as u32),
            );
        }
        doc
    }

    #[test]
    fn pcie_rates_follow_pci_sig_rates_and_encodings() {
        let rate = |generation, width| PcieLink { generation, width }.theoretical_gbs();
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 0.01;
        assert!(close(rate(5, 16), 63.02));
        assert!(close(rate(4, 16), 31.51));
        assert!(close(rate(3, 16), 15.75));
        assert!(close(rate(3, 8), 7.88));
        assert!(close(rate(2, 16), 8.0));
        assert!(close(rate(1, 1), 0.25));
        assert_eq!(rate(6, 16), None);
        assert_eq!(rate(5, 0), None);
        assert_eq!(rate(0, 16), None);
    }

    #[test]
    fn a_slow_gpu_among_eight_is_named_and_judged_against_its_link() {
        let doc = eight_with_one_slow();
        let j = judge(&doc, db(), &gen5x16(8));
        assert_eq!(j.outliers.len(), 1, "{:#?}", j.outliers);
        let o = &j.outliers[0];
        assert_eq!(
            (o.who.as_str(), o.gpu, o.metric),
            ("GPU 5", Some(5), Metric::DeviceToHost)
        );
        assert!((o.median - 52.77).abs() < 1e-9);
        assert!(
            o.rule.contains("24% below the median 52.8 GB/s of 8 GPUs"),
            "{}",
            o.rule
        );
        // Against the datasheet: 52.77 of Gen5 x16's 63.0 GB/s is 84%, a pass; GPU 5's
        // 40.10 is 64%, a warn.
        for f in &j.figures {
            let want = if f.figure.gpu == Some(5) {
                Verdict::Warn
            } else {
                Verdict::Pass
            };
            assert_eq!(f.verdict, want, "{}", f.rule);
            assert_eq!(f.efficiency.as_deref(), Some("device-to-host"));
            assert_eq!(f.datasheet_fact.as_deref(), Some("pcie_link Gen5 x16"));
            assert!(f.source.as_deref().unwrap().starts_with("https://"));
        }
        // The healthy published row names nobody.
        let mut healthy = doc.clone();
        healthy.figures[5].value = 52.77;
        assert!(judge(&healthy, db(), &gen5x16(8)).outliers.is_empty());
    }

    #[test]
    fn a_slot_at_gen3_fails_against_the_link_it_should_have() {
        // A Gen5 card whose slot trained at Gen3 x16 reaches about 13 GB/s: judged against
        // the link the machine reports it can reach (Gen5 x16), that is a fail.
        let mut doc = machine("NVIDIA H100 80GB HBM3", 1);
        doc.figures
            .push(Figure::new(Metric::HostToDevice, 13.1, Engine::Gpuenv, "pinned 1 GiB").on_gpu(0));
        let j = judge(&doc, db(), &gen5x16(1));
        assert_eq!(j.figures[0].verdict, Verdict::Fail, "{}", j.figures[0].rule);
    }

    #[test]
    fn matmul_is_judged_against_dense_bf16_and_the_published_efficiency() {
        let mut doc = machine("NVIDIA H100 80GB HBM3", 3);
        doc.figures = vec![
            Figure::new(Metric::MatmulBf16, 794.5, Engine::Gpuenv, "").on_gpu(0),
            Figure::new(Metric::MatmulBf16, 600.0, Engine::Gpuenv, "").on_gpu(1),
            Figure::new(Metric::MatmulBf16, 400.0, Engine::Gpuenv, "").on_gpu(2),
        ];
        let j = judge(&doc, db(), &BTreeMap::new());
        let verdicts: Vec<Verdict> = j.figures.iter().map(|f| f.verdict).collect();
        assert_eq!(verdicts, [Verdict::Pass, Verdict::Warn, Verdict::Fail]);
        assert_eq!(j.figures[0].datasheet, Some(989.5));
        assert!(
            j.figures[0]
                .rule
                .contains("80% of 989.5 TFLOPS (H100 SXM bf16_tflops 989.5)"),
            "{}",
            j.figures[0].rule
        );
        // 600 and 400 are more than 10% below the median 600? Only 400 is.
        assert_eq!(j.outliers.len(), 1);
        assert_eq!(j.outliers[0].gpu, Some(2));
    }

    #[test]
    fn what_has_no_datasheet_is_unknown_never_pass() {
        let mut doc = machine("NVIDIA H100 80GB HBM3", 1);
        doc.gpus.push(BenchGpu {
            index: 1,
            name: "Frobnicator 9000".into(),
            memory_mib: None,
        });
        doc.figures = vec![
            // No link known: no theoretical rate.
            Figure::new(Metric::DeviceToHost, 52.0, Engine::Gpuenv, "").on_gpu(0),
            // A GPU compat-db does not know.
            Figure::new(Metric::MatmulBf16, 500.0, Engine::Gpuenv, "").on_gpu(1),
            // Host figures have no datasheet.
            Figure::new(Metric::DiskSeqRead, 3.1, Engine::Fio, "/data"),
            Figure::new(Metric::Resnet50, 3000.0, Engine::Gpuenv, "").on_gpu(0),
        ];
        let j = judge(&doc, db(), &BTreeMap::new());
        for f in &j.figures {
            assert_eq!(f.verdict, Verdict::Unknown, "{}", f.rule);
            assert!(!f.rule.is_empty());
        }
        assert!(j.figures[0].rule.contains("PCIe link"), "{}", j.figures[0].rule);
        assert!(
            j.figures[1].rule.contains("not a GPU in compat-db"),
            "{}",
            j.figures[1].rule
        );
        assert_eq!(j.tally(), [0, 0, 0, 4]);
    }

    #[test]
    fn the_most_specific_record_judges_peer_copies_and_nccl() {
        // H100 SXM (NVLink on the board): peer copies against one direction of NVLink.
        let mut doc = machine("NVIDIA H100 80GB HBM3", 2);
        doc.figures = vec![
            Figure::new(Metric::PeerToPeer, 380.0, Engine::Nvbandwidth, "")
                .on_gpu(0)
                .to_peer(1),
            Figure::new(Metric::NcclBusbw, 480.0, Engine::NcclTests, "8 GPUs, 8 GB"),
        ];
        let j = judge(&doc, db(), &gen5x16(2));
        assert_eq!(j.figures[0].efficiency.as_deref(), Some("peer-to-peer-nvlink"));
        assert_eq!(j.figures[0].datasheet, Some(450.0));
        assert_eq!(j.figures[0].verdict, Verdict::Pass);
        assert_eq!(j.figures[1].efficiency.as_deref(), Some("nccl-busbw-hopper"));
        assert_eq!(j.figures[1].verdict, Verdict::Pass);
        // L40S (no NVLink): peer copies cross PCIe.
        let mut pcie = machine("NVIDIA L40S", 2);
        pcie.figures = vec![
            Figure::new(Metric::PeerToPeer, 20.0, Engine::Gpuenv, "")
                .on_gpu(0)
                .to_peer(1),
        ];
        let links = (0..2)
            .map(|i| {
                (
                    i,
                    PcieLink {
                        generation: 4,
                        width: 16,
                    },
                )
            })
            .collect();
        let j = judge(&pcie, db(), &links);
        assert_eq!(j.figures[0].efficiency.as_deref(), Some("peer-to-peer-pcie"));
        assert_eq!(j.figures[0].verdict, Verdict::Pass, "{}", j.figures[0].rule);
    }

    #[test]
    fn a_bad_pair_is_named_by_its_two_gpus() {
        // 8x H100 SXM bidirectional P2P row from NVIDIA/nccl issue 1264 (GPU 0 to 1..7:
        // 742.21 744.11 749.03 740.60 742.12 742.30 741.20 GB/s), with 0 -> 3 lowered here
        // to 520.0 GB/s.
        let row = [742.21, 744.11, 520.0, 740.60, 742.12, 742.30, 741.20];
        let mut doc = machine("NVIDIA H100 80GB HBM3", 8);
        for (i, v) in row.iter().enumerate() {
            doc.figures.push(
                Figure::new(Metric::PeerToPeer, *v, Engine::Gpuenv, "")
                    .on_gpu(0)
                    .to_peer(i as u32 + 1),
            );
        }
        let o = outliers_within(&doc);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].who, "GPU 0 -> GPU 3");
    }

    #[test]
    fn the_slow_node_of_a_fleet_is_named() {
        let a = eight_with_one_slow();
        let mut b = a.clone();
        b.hostname = "node-b".into();
        for f in &mut b.figures {
            f.value *= 0.7;
        }
        let nodes = vec![("node-a".to_string(), &a), ("node-b".to_string(), &b)];
        let o = outliers_across(&nodes);
        assert_eq!(o.len(), 1, "{o:#?}");
        assert_eq!(o[0].who, "node-b");
        assert!(o[0].rule.contains("the better"), "{}", o[0].rule);
        // Three nodes: held to the median.
        let c = a.clone();
        let nodes = vec![
            ("a".to_string(), &a),
            ("b".to_string(), &b),
            ("c".to_string(), &c),
        ];
        let o = outliers_across(&nodes);
        assert_eq!(o.iter().map(|o| o.who.as_str()).collect::<Vec<_>>(), ["b"]);
        // Latency: lower is better, a node far above the median is named.
        let lat = |v| {
            let mut d = BenchDoc::default();
            d.figures
                .push(Figure::new(Metric::NetworkLatency, v, Engine::Gpuenv, ""));
            d
        };
        let (x, y, z) = (lat(20.0), lat(21.0), lat(45.0));
        let nodes = vec![
            ("x".to_string(), &x),
            ("y".to_string(), &y),
            ("z".to_string(), &z),
        ];
        assert_eq!(outliers_across(&nodes)[0].who, "z");
    }

    #[test]
    fn every_efficiency_metric_is_a_bench_metric() {
        for name in Efficiency::METRICS {
            let m: Metric = serde_json::from_value(serde_json::Value::String((*name).into()))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(metric_name(m), *name);
        }
        // And every shipped record names one of them, with a source.
        assert!(!db().efficiencies.is_empty());
        for e in &db().efficiencies {
            assert!(Efficiency::METRICS.contains(&e.metric.as_str()), "{}", e.id);
            assert!(e.warn_min < e.pass_min, "{}", e.id);
            assert!(!e.sources.is_empty(), "{}", e.id);
        }
    }

    #[test]
    fn bad_numbers_are_not_measurements() {
        let mut doc = machine("NVIDIA H100 80GB HBM3", 3);
        doc.figures = vec![
            Figure::new(Metric::MatmulBf16, f64::NAN, Engine::Gpuenv, "").on_gpu(0),
            Figure::new(Metric::MatmulBf16, -1.0, Engine::Gpuenv, "").on_gpu(1),
            Figure::new(Metric::MatmulBf16, f64::INFINITY, Engine::Gpuenv, "").on_gpu(2),
        ];
        let j = judge(&doc, db(), &BTreeMap::new());
        assert!(j.figures.iter().all(|f| f.verdict == Verdict::Unknown));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }
}
