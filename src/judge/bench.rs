//! Acceptance from measured figures: the order's `bench = true` and its floors
//! (`min_matmul_tflops`, `min_memory_bandwidth`, `min_nccl_busbw`, `min_p2p_bandwidth`,
//! `min_disk_read`, `min_disk_write`, `min_network`) against a `gpuenv bench --json`
//! document, and whether such a document is of the machine being accepted.
//!
//! Why a measured item never passes on less than a measurement: a listing's speed is a
//! promise, and `doctor`'s facts (link rates, NVLink counts) are what the system
//! advertises. An order that asks for figures and gets none is not accepted; a floor
//! whose metric was not measured is not a pass; a figure judged `unknown` (no datasheet
//! fact, no efficiency record) is not a pass either. The order asked for these explicitly,
//! so `health_allow` relaxes none of them.
//!
//! Owns: the items' comparisons and words, the [`Measured`] view of a bench document that
//! `check` and `fleet report` show, and the rule that tells whether a bench document was
//! measured on a given machine ([`same_machine`], [`identity`], [`gpus_fit`]). Must not:
//! measure, read files, print, or judge a figure against its datasheet or its peers (that
//! is [`mod@crate::bench::judge`], whose verdicts are taken as they are).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::accept::{AcceptVerdict, Acceptance, conversion, num};
use super::order::{Expect, Item, Size};
use crate::bench::burn::{BurnResult, Verdict as BurnVerdict};
use crate::bench::figure::BenchGpu;
use crate::bench::judge::{PEER_FRACTION, metric_name};
use crate::bench::{BenchDoc, Figure, Judged, Metric, Outlier, PcieLink, Verdict};
use crate::db::{Db, Efficiency};
use crate::host::HostReport;
use crate::text::excerpt;

/// How many problems the `bench` item names in its `found`; the rest are counted, and every
/// figure stays in the bench results shown beside the items.
const NAMED_AT_MOST: usize = 12;

/// A `gpuenv bench` document judged on the machine being accepted: `check --json`'s
/// `bench`, and the measured figures of the acceptance page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The host the figures were measured on, as the document names it.
    pub hostname: String,
    /// Its machine ID (derived, as `doctor` shows it), when the document has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// Whether the order asked for measured figures (`bench = true` or a floor). When it
    /// did not, the figures are shown and judged but neither accept nor refuse anything.
    pub counts_for_acceptance: bool,
    /// The GPUs measured.
    pub gpus: Vec<BenchGpu>,
    /// Every figure against its datasheet, in the document's order.
    pub figures: Vec<Judged>,
    /// GPUs (or GPU pairs) more than [`PEER_FRACTION`] below the median of their peers.
    pub outliers: Vec<Outlier>,
    /// The burn-in, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burn: Option<BurnResult>,
    /// What the bench did not measure, and why.
    #[serde(default)]
    pub skipped: Vec<String>,
    /// What an engine people trust found wrong (a DCGM test failed, an all-reduce gave
    /// wrong results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<crate::bench::EngineFailure>,
}

impl Measured {
    /// Judges `doc` against compat-db's datasheets and efficiencies and against its own
    /// peers; `links` is each GPU's PCIe link as the machine reports it, `counts` whether
    /// the order asked for measured figures.
    pub fn judge(db: &Db, doc: &BenchDoc, links: &BTreeMap<u32, PcieLink>, counts: bool) -> Measured {
        let judgement = crate::bench::judge(doc, db, links);
        Measured {
            hostname: doc.hostname.clone(),
            machine_id: doc.machine_id.clone(),
            counts_for_acceptance: counts,
            gpus: doc.gpus.clone(),
            figures: judgement.figures,
            outliers: judgement.outliers,
            burn: doc.burn.clone(),
            skipped: doc.skipped.clone(),
            failures: doc.failures.clone(),
        }
    }

    /// Counts of pass, warn, fail and unknown over every figure.
    pub fn tally(&self) -> [usize; 4] {
        let mut t = [0; 4];
        for j in &self.figures {
            t[j.verdict as usize] += 1;
        }
        t
    }

    /// How many GPUs were measured: those the document lists, or more where its figures
    /// name more.
    fn gpus_measured(&self) -> usize {
        let named: std::collections::BTreeSet<u32> = self
            .gpus
            .iter()
            .map(|g| g.index)
            .chain(
                self.figures
                    .iter()
                    .flat_map(|j| j.figure.gpu.into_iter().chain(j.figure.peer)),
            )
            .collect();
        named.len()
    }

    fn finite(&self) -> impl Iterator<Item = &Figure> {
        self.figures
            .iter()
            .map(|j| &j.figure)
            .filter(|f| f.value.is_finite() && f.value >= 0.0)
    }
}

/// Whether a datasheet can judge `metric`: the metrics compat-db keeps an efficiency for.
/// Host figures (disk, network, host memory, downloads) and ResNet-50 have none; `bench =
/// true` holds them to their peers and the floors only.
pub fn has_datasheet(metric: Metric) -> bool {
    Efficiency::METRICS.contains(&metric_name(metric).as_str())
}

// ---------------------------------------------------------------------------------------
// Which machine
// ---------------------------------------------------------------------------------------

/// Whether a bench document was measured on the machine named by `hostname` and
/// `machine_id` (as a `doctor` report gives them): the machine IDs must be equal where both
/// are known, the host names where both are known, and at least one of the two must be
/// compared. One machine ID under two host names is two machines cloned from one image
/// whose `/etc/machine-id` was not cleared, as `fleet report` counts them. The error says
/// why, in a clause.
pub fn identity(doc: &BenchDoc, hostname: Option<&str>, machine_id: Option<&str>) -> Result<(), String> {
    let theirs_name = Some(doc.hostname.trim()).filter(|n| !n.is_empty());
    let ours_name = hostname.map(str::trim).filter(|n| !n.is_empty());
    let theirs_id = doc.machine_id.as_deref().filter(|i| !i.is_empty());
    let ours_id = machine_id.filter(|i| !i.is_empty());
    if let (Some(a), Some(b)) = (theirs_id, ours_id)
        && a != b
    {
        return Err(format!(
            "it was measured on another machine (machine ID {} there, {} here)",
            excerpt(a),
            excerpt(b)
        ));
    }
    if let (Some(a), Some(b)) = (theirs_name, ours_name)
        && a != b
    {
        let ids = if theirs_id.is_some() && ours_id.is_some() {
            ", though with the same machine ID: a machine cloned from one image, or renamed since"
        } else {
            ""
        };
        return Err(format!(
            "it was measured on `{}`, and this host is `{}`{ids}",
            excerpt(a),
            excerpt(b)
        ));
    }
    let compared =
        (theirs_id.is_some() && ours_id.is_some()) || (theirs_name.is_some() && ours_name.is_some());
    if !compared {
        return Err(format!(
            "it cannot be told to be of this machine: {} and {}, so neither the machine ID nor the host name can be compared",
            match (theirs_id, theirs_name) {
                (None, None) => "it names neither a machine ID nor a host name".to_string(),
                (None, Some(n)) => format!("it names the host `{}` but no machine ID", excerpt(n)),
                (Some(_), None) => "it names a machine ID but no host name".to_string(),
                (Some(_), Some(_)) => "it names a machine ID and a host name".to_string(),
            },
            match (ours_id, ours_name) {
                (None, None) => "this host reports neither",
                (None, Some(_)) => "this host reports a host name but no machine ID",
                (Some(_), None) => "this host reports a machine ID but no host name",
                (Some(_), Some(_)) => "this host reports both",
            }
        ));
    }
    Ok(())
}

/// Whether the GPUs a bench document measured are GPUs the machine has: of each model
/// (compat-db's record where it knows the name, the name otherwise), no more than the
/// machine holds. A machine that lists no GPU (its driver failed) is not compared: its
/// acceptance fails on that already. The error names both sets.
pub fn gpus_fit(db: &Db, doc: &BenchDoc, machine: &[&str]) -> Result<(), String> {
    if machine.is_empty() || doc.gpus.is_empty() {
        return Ok(());
    }
    let model = |name: &str| {
        db.gpu(name)
            .map_or_else(|_| name.trim().to_string(), |g| g.id.clone())
    };
    let count = |names: &mut dyn Iterator<Item = &str>| {
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for n in names {
            *by.entry(model(n)).or_default() += 1;
        }
        by
    };
    let theirs = count(&mut doc.gpus.iter().map(|g| g.name.as_str()));
    let ours = count(&mut machine.iter().copied());
    if theirs
        .iter()
        .all(|(m, n)| ours.get(m).is_some_and(|have| have >= n))
    {
        return Ok(());
    }
    Err(format!(
        "it measured {}, and this host has {}",
        summary(doc.gpus.iter().map(|g| g.name.as_str())),
        summary(machine.iter().copied())
    ))
}

/// `8x NVIDIA H200`, `1x A, 2x B`.
fn summary<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut out: Vec<(&str, usize)> = Vec::new();
    for n in names {
        match out.iter_mut().find(|(x, _)| *x == n) {
            Some((_, c)) => *c += 1,
            None => out.push((n, 1)),
        }
    }
    out.iter()
        .map(|(n, c)| format!("{c}x {}", excerpt(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`identity`] and [`gpus_fit`] against a probed host: a result of another node would
/// accept the wrong machine.
pub fn same_machine(db: &Db, doc: &BenchDoc, host: &HostReport) -> Result<(), String> {
    identity(doc, host.hostname.as_deref(), host.machine_id.as_deref())?;
    let names: Vec<&str> = host.gpus.iter().map(|g| g.name.as_str()).collect();
    gpus_fit(db, doc, &names)
}

/// Reads a `gpuenv bench --json` document: `schema_version` must be `schema_version`
/// (the caller's, which `report` owns), and every figure in its metric's unit with a
/// value that is a measurement. The error says what the text is instead, in a clause.
pub fn parse_results(text: &str, schema_version: u32) -> Result<BenchDoc, String> {
    /// What a JSON document is, when it is not a bench document.
    #[derive(Deserialize)]
    struct Head {
        schema_version: Option<serde_json::Value>,
        figures: Option<serde::de::IgnoredAny>,
        host: Option<serde::de::IgnoredAny>,
        checks: Option<serde::de::IgnoredAny>,
    }
    let head: Head = serde_json::from_str(text).map_err(|e| {
        if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
            "not a JSON object; expected the document `gpuenv bench --json` prints".to_string()
        } else {
            format!("not JSON ({e}); expected the document `gpuenv bench --json` prints")
        }
    })?;
    if head.figures.is_none() {
        return Err(if head.host.is_some() && head.checks.is_some() {
            "a `gpuenv doctor --json` report, not bench results; expected the document `gpuenv bench --json` prints (it has `figures`)".to_string()
        } else {
            "not bench results (it has no `figures`); expected the document `gpuenv bench --json` prints"
                .to_string()
        });
    }
    match head.schema_version {
        Some(serde_json::Value::Number(v)) if v.as_u64() == Some(u64::from(schema_version)) => {}
        Some(serde_json::Value::Number(v)) => {
            let age = if v.as_u64().is_some_and(|v| v < u64::from(schema_version)) {
                "an older"
            } else {
                "a newer"
            };
            return Err(format!(
                "written by {age} gpuenv (schema_version {v}; this one reads {schema_version}): run this gpuenv's `bench --json` on the machine again"
            ));
        }
        _ => {
            return Err(format!(
                "it has no numeric `schema_version`; expected {schema_version}, as `gpuenv bench --json` writes it"
            ));
        }
    }
    let doc: BenchDoc = serde_json::from_str(text)
        .map_err(|e| format!("not readable as `gpuenv bench --json` results: {e}"))?;
    for (i, f) in doc.figures.iter().enumerate() {
        let name = metric_name(f.metric);
        if f.unit != f.metric.unit() {
            return Err(format!(
                "figure {} ({name}) is in `{}`; {name} is written in {}",
                i + 1,
                excerpt(&f.unit),
                f.metric.unit()
            ));
        }
        if !f.value.is_finite() || f.value < 0.0 {
            return Err(format!(
                "figure {} ({name}) is {}, not a measurement",
                i + 1,
                f.value
            ));
        }
    }
    Ok(doc)
}

// ---------------------------------------------------------------------------------------
// The items
// ---------------------------------------------------------------------------------------

/// What `bench = true` asks for, in words.
const BENCH_EXPECTED: &str = "every measured figure within its datasheet range, no GPU more than 10% below its peers, a burn-in (when one ran) passed";

/// Each measured item the order asks for, with what it asks in words, in the order's item
/// order (as `fleet report` lists an order's items).
pub fn asked(e: &Expect) -> Vec<(Item, String)> {
    let mut out = Vec::new();
    if e.bench {
        out.push((Item::Bench, BENCH_EXPECTED.to_string()));
    }
    for (item, floor) in &e.bench_floors {
        out.push((*item, floor_expected(*item, floor)));
    }
    out.sort_by_key(|(i, _)| Item::ALL.iter().position(|x| x == i));
    out
}

/// The measured items of an order: none when it asks for no figure; one item, not
/// accepted, when it does and no bench results were given; else `bench` and each floor
/// against `m`. `machine_gpus` is how many GPUs the machine itself lists: a bench of fewer
/// is not a measurement of every GPU.
pub fn items(e: &Expect, m: Option<&Measured>, machine_gpus: usize) -> Vec<Acceptance> {
    if !e.wants_bench() {
        return Vec::new();
    }
    let Some(m) = m else {
        return vec![no_results(e)];
    };
    let mut out = Vec::new();
    if e.bench {
        out.push(bench_item(m, machine_gpus));
    }
    for (item, floor) in &e.bench_floors {
        out.push(floor_item(m, *item, floor, machine_gpus));
    }
    out
}

fn measured_item(which: Item, expected: String, found: String, holds: bool, rule: String) -> Acceptance {
    let verdict = if holds {
        AcceptVerdict::Pass
    } else {
        AcceptVerdict::Fail
    };
    Acceptance {
        item: which.key(),
        expected,
        found,
        pass: holds,
        verdict,
        // Measured figures are never replaced by a `GPUENV_*` override, and the order
        // asked for them by name: nothing relaxes them.
        overridden_by: None,
        relaxed_by: None,
        rule,
    }
}

/// The one item of an order that asks for figures when none were given.
fn no_results(e: &Expect) -> Acceptance {
    let asked = asked(e);
    let which = asked.first().map_or(Item::Bench, |(i, _)| *i);
    let expected = asked
        .iter()
        .map(|(i, what)| format!("{}: {what}", i.key()))
        .collect::<Vec<_>>()
        .join("; ");
    measured_item(
        which,
        expected,
        "no bench results".into(),
        false,
        "the order asks for measured figures, and the machine's facts are no evidence of its speed: run \
         `gpuenv bench --json > FILE` on this machine and give `gpuenv check --bench-results FILE` (in \
         `fleet report`, give the node's FILE among the inputs)"
            .into(),
    )
}

/// `GPU 5 matmul-bf16`, `GPU 0 -> GPU 3 peer-to-peer`, `nccl-busbw`.
fn label(f: &Figure) -> String {
    let name = metric_name(f.metric);
    match (f.gpu, f.peer) {
        (Some(g), Some(p)) => format!("GPU {g} -> GPU {p} {name}"),
        (Some(g), None) => format!("GPU {g} {name}"),
        _ => name,
    }
}

/// A figure in words: `432 TFLOPS`.
fn amount(f: &Figure) -> String {
    format!("{} {}", num(f.value), f.unit)
}

/// `bench = true`: every figure a datasheet judges is a pass, no GPU stands out below its
/// peers, the burn-in (when one ran) passed, and every GPU of the machine was measured.
fn bench_item(m: &Measured, machine_gpus: usize) -> Acceptance {
    let mut problems: Vec<String> = Vec::new();
    let judged: Vec<&Judged> = m
        .figures
        .iter()
        .filter(|j| has_datasheet(j.figure.metric))
        .collect();
    if judged.is_empty() {
        let why = m
            .skipped
            .first()
            .map(|s| format!(" (skipped: {})", excerpt(s)))
            .unwrap_or_default();
        problems.push(format!(
            "no figure a datasheet can judge was measured (matmul, memory bandwidth, host links, peer copies, NCCL){why}"
        ));
    }
    if m.gpus_measured() < machine_gpus {
        problems.push(format!(
            "the bench measured {} of this machine's {machine_gpus} GPUs",
            m.gpus_measured()
        ));
    }
    // What NVIDIA's own tools failed outweighs any figure.
    for f in &m.failures {
        let gpu = f.gpu.map(|g| format!(" GPU {g}")).unwrap_or_default();
        problems.push(format!("{}{gpu} {}: {}", f.engine.name(), f.test, f.reason));
    }
    // The peer rule first: it names a GPU against the others, the plainest evidence of a
    // bad card, slot or cable.
    for o in &m.outliers {
        problems.push(format!("{} {}: {}", o.who, metric_name(o.metric), o.rule));
    }
    for j in judged.iter().filter(|j| j.verdict != Verdict::Pass) {
        let f = &j.figure;
        problems.push(match (j.verdict, j.share, j.datasheet) {
            (Verdict::Unknown, _, _) => format!("{} {}: unknown, {}", label(f), amount(f), j.rule),
            (v, Some(share), Some(sheet)) => format!(
                "{} {}: {}, {:.0}% of the datasheet's {} {}",
                label(f),
                amount(f),
                v.word(),
                share * 100.0,
                num(sheet),
                f.unit
            ),
            (v, _, _) => format!("{} {}: {}, {}", label(f), amount(f), v.word(), j.rule),
        });
    }
    if let Some(b) = &m.burn {
        match b.verdict {
            BurnVerdict::Pass => {}
            BurnVerdict::Fail | BurnVerdict::Warn => {
                let how = if b.verdict == BurnVerdict::Fail {
                    "the burn-in failed"
                } else {
                    "the burn-in was not judged in full"
                };
                let said: Vec<String> = b
                    .findings
                    .iter()
                    .filter(|x| x.verdict != BurnVerdict::Pass)
                    .map(|x| match x.gpu {
                        Some(g) => format!("GPU {g} {}: {}", x.code, x.found),
                        None => format!("{}: {}", x.code, x.found),
                    })
                    .collect();
                problems.push(if said.is_empty() {
                    how.to_string()
                } else {
                    format!("{how}: {}", said.join(", "))
                });
            }
        }
    }
    let holds = problems.is_empty();
    let found = if holds {
        let burn = match &m.burn {
            Some(b) => format!("; the burn-in of {} s passed", b.seconds),
            None => "; no burn-in ran".to_string(),
        };
        format!(
            "{} figure{} judged against the datasheet, every one a pass; no GPU more than {:.0}% below its peers{burn}",
            judged.len(),
            if judged.len() == 1 { "" } else { "s" },
            PEER_FRACTION * 100.0
        )
    } else {
        let more = problems.len().saturating_sub(NAMED_AT_MOST);
        let mut shown: Vec<String> = problems.into_iter().take(NAMED_AT_MOST).collect();
        if more > 0 {
            shown.push(format!("and {more} more (every figure is in the bench results)"));
        }
        shown.join("; ")
    };
    measured_item(
        Item::Bench,
        BENCH_EXPECTED.into(),
        found,
        holds,
        format!(
            "each figure a datasheet can judge (matmul, device memory bandwidth, host-to-device and device-to-host \
             copies, peer copies, NCCL busbw) against the GPU's datasheet figure times the share published \
             measurements reach (compat-db's efficiency records): only `pass` is accepted; `warn`, `fail` and \
             `unknown` (no datasheet fact or no efficiency record) are not. A GPU or GPU pair more than {:.0}% \
             below the median of its peers is not accepted, nor a burn-in that failed or could not be judged, \
             nor a bench of fewer GPUs than the machine has. Host figures (disk, network, host memory) have \
             no datasheet: only their floors judge them",
            PEER_FRACTION * 100.0
        ),
    )
}

/// What a floor measures: its metrics, and whether it is held on every GPU, every GPU
/// pair, or once for the machine.
#[derive(Clone, Copy)]
enum Scope {
    EveryGpu(&'static [Metric]),
    EveryPair(Metric),
    Machine(&'static [Metric]),
}

const MATMUL: &[Metric] = &[
    Metric::MatmulBf16,
    Metric::MatmulFp16,
    Metric::MatmulTf32,
    Metric::MatmulFp8,
];

fn scope(item: Item) -> Scope {
    match item {
        Item::MinMatmulTflops => Scope::EveryGpu(MATMUL),
        Item::MinMemoryBandwidth => Scope::EveryGpu(&[Metric::MemoryBandwidth]),
        Item::MinP2pBandwidth => Scope::EveryPair(Metric::PeerToPeer),
        Item::MinNcclBusbw => Scope::Machine(&[Metric::NcclBusbw]),
        Item::MinDiskRead => Scope::Machine(&[Metric::DiskSeqRead]),
        Item::MinDiskWrite => Scope::Machine(&[Metric::DiskSeqWrite]),
        Item::MinNetwork => Scope::Machine(&[Metric::NetworkTcp, Metric::NetworkRdma]),
        // `Expect` keeps floors of the items above only.
        _ => Scope::Machine(&[]),
    }
}

/// `at least 700 TFLOPS on every GPU`.
fn floor_expected(item: Item, floor: &Size) -> String {
    let whom = match scope(item) {
        Scope::EveryGpu(_) => " on every GPU",
        Scope::EveryPair(_) => " between every GPU pair",
        Scope::Machine(_) => "",
    };
    format!("at least {} {}{whom}", num(floor.value), item.unit())
}

/// The floor's figure in the floor's unit: network rates are ordered in Gb/s, as links
/// are sold, and measured in GB/s.
fn in_floor_unit(item: Item, gbs_or_other: f64) -> f64 {
    if item == Item::MinNetwork {
        gbs_or_other * 8.0
    } else {
        gbs_or_other
    }
}

/// Whether a network figure was measured on this host's loopback (`bench` without
/// `--peer`): its detail names the peer after ` to ` (`4 streams to 127.0.0.1:41234, ...`).
/// Such a figure is the host's own TCP stack, not the network to another node.
fn on_loopback(f: &Figure) -> bool {
    let Some(rest) = f.detail.split(" to ").nth(1) else {
        return false;
    };
    let peer = rest.split([',', ' ', ';']).next().unwrap_or("");
    if let Ok(sa) = peer.parse::<std::net::SocketAddr>() {
        return sa.ip().is_loopback();
    }
    let loopback = |h: &str| {
        let h = h.trim_start_matches('[').trim_end_matches(']');
        h.eq_ignore_ascii_case("localhost") || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    loopback(peer) || peer.rsplit_once(':').is_some_and(|(h, _)| loopback(h))
}

fn floor_rule(item: Item, floor: &Size) -> String {
    let unit = item.unit();
    let conv = conversion(floor, unit);
    let at = format!("{} {unit}", num(floor.value));
    let what = match item {
        Item::MinMatmulTflops => format!(
            "every GPU's best dense matmul figure over the precisions measured (BF16, FP16, TF32, FP8) must be at least {at}; the lowest GPU is named"
        ),
        Item::MinMemoryBandwidth => format!(
            "every GPU's device memory bandwidth (a device-to-device copy, bytes read plus written) must be at least {at}; the lowest GPU is named"
        ),
        Item::MinP2pBandwidth => {
            format!("every GPU pair measured must reach at least {at} one way; the slowest pair is named")
        }
        Item::MinNcclBusbw => format!(
            "NCCL all_reduce bus bandwidth over all GPUs (nccl-tests' busbw, algbw x 2(n-1)/n; the best measured) must be at least {at}"
        ),
        Item::MinDiskRead => format!(
            "sequential read of the data disk (O_DIRECT; the best of the engines that measured it) must be at least {at}, decimal (1 GB/s = 10^9 bytes/s)"
        ),
        Item::MinDiskWrite => format!(
            "sequential write of the data disk (O_DIRECT; the best of the engines that measured it) must be at least {at}, decimal (1 GB/s = 10^9 bytes/s)"
        ),
        Item::MinNetwork => format!(
            "throughput to a peer node over TCP or RDMA, in Gb/s as links are sold (GB/s x 8), must be at least {at}; a figure measured on loopback is this host's TCP stack, not the network, and does not count"
        ),
        _ => format!("at least {at}"),
    };
    format!("{conv}{what}; a figure not measured is not a pass")
}

/// One floor against the measured figures.
fn floor_item(m: &Measured, item: Item, floor: &Size, machine_gpus: usize) -> Acceptance {
    let expected = floor_expected(item, floor);
    let rule = floor_rule(item, floor);
    let unit = item.unit();
    let shown = |v: f64| format!("{} {unit}", num(in_floor_unit(item, v)));
    let not_measured = |what: String| format!("not measured: {what} in the bench results");
    let (found, holds) = match scope(item) {
        Scope::EveryGpu(metrics) => {
            // Each GPU's best figure: one GPU measured by two engines, or matmul in several
            // precisions, is held to its best.
            let mut best: BTreeMap<u32, &Figure> = BTreeMap::new();
            for f in m.finite().filter(|f| metrics.contains(&f.metric)) {
                if let Some(g) = f.gpu
                    && best.get(&g).is_none_or(|b| f.value > b.value)
                {
                    best.insert(g, f);
                }
            }
            let names: Vec<String> = metrics.iter().map(|x| metric_name(*x)).collect();
            let missing: Vec<u32> = m
                .gpus
                .iter()
                .map(|g| g.index)
                .filter(|i| !best.contains_key(i))
                .collect();
            match best.iter().min_by(|a, b| a.1.value.total_cmp(&b.1.value)) {
                None => (
                    not_measured(format!("no {} figure of any GPU", names.join(" or "))),
                    false,
                ),
                Some((gpu, f)) => {
                    let below = best
                        .values()
                        .filter(|f| in_floor_unit(item, f.value) < floor.value)
                        .count();
                    let mut found = format!(
                        "lowest GPU {gpu}: {} ({}, {})",
                        shown(f.value),
                        metric_name(f.metric),
                        engine_word(f)
                    );
                    if below > 1 {
                        found.push_str(&format!("; {below} of {} GPUs below the floor", best.len()));
                    }
                    if !missing.is_empty() {
                        found.push_str(&format!(
                            "; not measured on GPU {}",
                            missing.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                        ));
                    }
                    let counted = m.gpus_measured();
                    if counted < machine_gpus {
                        found.push_str(&format!(
                            "; the bench measured {counted} of this machine's {machine_gpus} GPUs"
                        ));
                    }
                    (found, below == 0 && missing.is_empty() && counted >= machine_gpus)
                }
            }
        }
        Scope::EveryPair(metric) => {
            let mut best: BTreeMap<(u32, u32), &Figure> = BTreeMap::new();
            for f in m.finite().filter(|f| f.metric == metric) {
                if let (Some(g), Some(p)) = (f.gpu, f.peer)
                    && best.get(&(g, p)).is_none_or(|b| f.value > b.value)
                {
                    best.insert((g, p), f);
                }
            }
            match best.iter().min_by(|a, b| a.1.value.total_cmp(&b.1.value)) {
                None => (
                    not_measured(format!("no {} figure of any GPU pair", metric_name(metric))),
                    false,
                ),
                Some(((g, p), f)) => {
                    let below = best.values().filter(|f| f.value < floor.value).count();
                    let mut found = format!(
                        "slowest pair GPU {g} -> GPU {p}: {} ({})",
                        shown(f.value),
                        engine_word(f)
                    );
                    if below > 1 {
                        found.push_str(&format!("; {below} of {} pairs below the floor", best.len()));
                    }
                    (found, below == 0)
                }
            }
        }
        Scope::Machine(metrics) => {
            let all: Vec<&Figure> = m
                .finite()
                .filter(|f| metrics.contains(&f.metric) && f.gpu.is_none())
                .collect();
            let (counted, looped): (Vec<&Figure>, Vec<&Figure>) = if item == Item::MinNetwork {
                all.into_iter().partition(|f| !on_loopback(f))
            } else {
                (all, Vec::new())
            };
            let names: Vec<String> = metrics.iter().map(|x| metric_name(*x)).collect();
            match counted.iter().max_by(|a, b| a.value.total_cmp(&b.value)) {
                None if !looped.is_empty() => (
                    format!(
                        "not measured: only on loopback ({}), this host's own TCP stack; run `gpuenv bench --peer HOST` towards another node",
                        shown(looped[0].value)
                    ),
                    false,
                ),
                None => (not_measured(format!("no {} figure", names.join(" or "))), false),
                Some(f) => {
                    let v = in_floor_unit(item, f.value);
                    let detail = if f.detail.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", excerpt(&f.detail))
                    };
                    (
                        format!(
                            "{} ({}, {}{detail})",
                            shown(f.value),
                            metric_name(f.metric),
                            engine_word(f)
                        ),
                        v >= floor.value,
                    )
                }
            }
        }
    };
    measured_item(item, expected, found, holds, rule)
}

fn engine_word(f: &Figure) -> String {
    serde_json::to_value(f.engine)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Engine;
    use crate::judge::order::parse_order;

    fn db() -> &'static Db {
        Db::embedded().unwrap()
    }

    fn doc(n: u32) -> BenchDoc {
        BenchDoc {
            schema_version: 1,
            hostname: "node-a".into(),
            gpus: (0..n)
                .map(|index| BenchGpu {
                    index,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    memory_mib: None,
                })
                .collect(),
            ..BenchDoc::default()
        }
    }

    /// ml-engineering's maximum achievable BF16 matmul on H100 SXM (794.5 TFLOPS), on every
    /// GPU, as the matmul-bf16 efficiency record cites it.
    fn healthy(n: u32) -> BenchDoc {
        let mut d = doc(n);
        for g in 0..n {
            d.figures
                .push(Figure::new(Metric::MatmulBf16, 794.5, Engine::Gpuenv, "8192^3").on_gpu(g));
        }
        d
    }

    fn measured(d: &BenchDoc) -> Measured {
        Measured::judge(db(), d, &BTreeMap::new(), true)
    }

    fn order(text: &str) -> Expect {
        parse_order("o.toml", text).unwrap()
    }

    #[test]
    fn an_order_for_figures_without_results_is_not_accepted() {
        let e = order("bench = true\nmin_nccl_busbw = 350\n");
        let items = items(&e, None, 8);
        assert_eq!(items.len(), 1);
        let a = &items[0];
        assert_eq!((a.item, a.pass, a.verdict), ("bench", false, AcceptVerdict::Fail));
        assert_eq!(a.found, "no bench results");
        assert!(
            a.expected.contains("min_nccl_busbw: at least 350 GB/s"),
            "{}",
            a.expected
        );
        assert!(a.rule.contains("--bench-results FILE"), "{}", a.rule);
        // Floors alone name their first key.
        let items = super::items(&order("min_disk_read = \"2GB/s\"\n"), None, 0);
        assert_eq!(items[0].item, "min_disk_read");
        // An order without measured keys has no measured item, results or not.
        assert!(super::items(&order("gpus = 8\n"), None, 8).is_empty());
    }

    #[test]
    fn bench_true_passes_only_on_passing_figures_of_every_gpu() {
        let e = order("bench = true\n");
        let m = measured(&healthy(8));
        let a = &items(&e, Some(&m), 8)[0];
        assert!(a.pass, "{a:?}");
        assert!(
            a.found.starts_with("8 figures judged against the datasheet"),
            "{}",
            a.found
        );
        // Fewer GPUs measured than the machine has.
        let a = &items(&e, Some(&m), 16)[0];
        assert!(!a.pass);
        assert!(
            a.found.contains("measured 8 of this machine's 16 GPUs"),
            "{}",
            a.found
        );
        // A warn is not accepted, and names the GPU.
        let mut slow = healthy(8);
        slow.figures[5].value = 600.0;
        let a = &items(&e, Some(&measured(&slow)), 8)[0];
        assert!(!a.pass);
        assert!(
            a.found
                .contains("GPU 5 matmul-bf16: 600.0 TFLOPS is 24% below the median 794.5 TFLOPS"),
            "{}",
            a.found
        );
        assert!(
            a.found
                .contains("GPU 5 matmul-bf16 600 TFLOPS: warn, 61% of the datasheet's 989.5 TFLOPS"),
            "{}",
            a.found
        );
        // Host figures alone: nothing a datasheet judges, so not a pass.
        let mut host = doc(0);
        host.figures
            .push(Figure::new(Metric::DiskSeqRead, 3.0, Engine::Fio, ""));
        host.skipped.push("the GPU path: no CUDA torch".into());
        let a = &items(&e, Some(&measured(&host)), 0)[0];
        assert!(!a.pass);
        assert!(a.found.contains("no figure a datasheet can judge"), "{}", a.found);
        assert!(a.found.contains("no CUDA torch"), "{}", a.found);
    }

    #[test]
    fn a_failure_an_engine_reported_is_not_accepted_whatever_the_figures() {
        let e = order("bench = true\n");
        let mut d = healthy(8);
        assert!(items(&e, Some(&measured(&d)), 8)[0].pass);
        d.failures.push(crate::bench::EngineFailure {
            engine: Engine::Dcgm,
            gpu: Some(3),
            test: "Memory".into(),
            reason: "Memory error detected on GPU 3".into(),
        });
        let a = &items(&e, Some(&measured(&d)), 8)[0];
        assert!(!a.pass);
        assert!(
            a.found
                .contains("dcgmi diag GPU 3 Memory: Memory error detected on GPU 3"),
            "{}",
            a.found
        );
    }

    #[test]
    fn an_unknown_figure_and_a_failed_burn_in_are_not_accepted() {
        let e = order("bench = true\n");
        let mut d = healthy(2);
        // No PCIe link known: host copies cannot be judged.
        d.figures
            .push(Figure::new(Metric::HostToDevice, 55.0, Engine::Gpuenv, "").on_gpu(0));
        let a = &items(&e, Some(&measured(&d)), 2)[0];
        assert!(!a.pass);
        assert!(
            a.found.contains("GPU 0 host-to-device 55 GB/s: unknown"),
            "{}",
            a.found
        );
        let mut d = healthy(2);
        d.burn = Some(BurnResult {
            seconds: 600,
            verdict: BurnVerdict::Fail,
            findings: vec![crate::bench::burn::Finding {
                verdict: BurnVerdict::Fail,
                gpu: Some(1),
                code: "burn-thermal-slowdown".into(),
                found: "thermal slowdown in 20 of 32 samples".into(),
                rule: "r".into(),
            }],
            ..BurnResult::default()
        });
        let a = &items(&e, Some(&measured(&d)), 2)[0];
        assert!(!a.pass);
        assert!(
            a.found
                .contains("the burn-in failed: GPU 1 burn-thermal-slowdown: thermal slowdown"),
            "{}",
            a.found
        );
        // Health relaxations do not reach it.
        let e = order("bench = true\nhealth_allow = [\"unknown\", \"throttle\"]\n");
        assert!(!items(&e, Some(&measured(&d)), 2)[0].pass);
    }

    #[test]
    fn floors_hold_the_lowest_gpu_and_never_pass_unmeasured() {
        let mut d = healthy(4);
        d.figures[2].value = 650.0;
        d.figures
            .push(Figure::new(Metric::MatmulFp8, 1402.6, Engine::Gpuenv, "").on_gpu(2));
        d.figures
            .push(Figure::new(Metric::NcclBusbw, 473.6, Engine::NcclTests, "4 GiB"));
        let m = measured(&d);
        // The best precision of each GPU: GPU 2's FP8 lifts it; the lowest is then 794.5.
        let e =
            order("min_matmul_tflops = \"0.7PFLOPS\"\nmin_nccl_busbw = 450\nmin_memory_bandwidth = 2000\n");
        let got = items(&e, Some(&m), 4);
        let by = |k: &str| got.iter().find(|a| a.item == k).unwrap();
        let mm = by("min_matmul_tflops");
        assert!(mm.pass, "{mm:?}");
        assert!(
            mm.found.starts_with("lowest GPU 0: 794.5 TFLOPS (matmul-bf16"),
            "{}",
            mm.found
        );
        assert!(
            mm.rule.starts_with("\"0.7PFLOPS\" read as 700 TFLOPS; "),
            "{}",
            mm.rule
        );
        assert!(by("min_nccl_busbw").pass);
        assert_eq!(by("min_nccl_busbw").expected, "at least 450 GB/s");
        let mem = by("min_memory_bandwidth");
        assert!(!mem.pass);
        assert!(
            mem.found.starts_with("not measured: no memory-bandwidth figure"),
            "{}",
            mem.found
        );
        // Below: named, with how many are below.
        let e = order("min_matmul_tflops = 800\n");
        let a = &items(&e, Some(&m), 4)[0];
        assert!(!a.pass);
        assert!(a.found.contains("3 of 4 GPUs below the floor"), "{}", a.found);
        // A GPU listed but not measured fails the floor.
        let mut short = d.clone();
        short.figures.retain(|f| f.gpu != Some(3));
        let a = &items(&order("min_matmul_tflops = 100\n"), Some(&measured(&short)), 4)[0];
        assert!(!a.pass);
        assert!(a.found.contains("not measured on GPU 3"), "{}", a.found);
    }

    #[test]
    fn network_floors_are_gbits_and_loopback_does_not_count() {
        let mut d = doc(0);
        d.figures.push(Figure::new(
            Metric::NetworkTcp,
            11.8,
            Engine::Gpuenv,
            "8 streams to 10.0.0.2:29571, 118 GB confirmed by the peer in 10 s; payload bytes only",
        ));
        let m = measured(&d);
        let a = &items(&order("min_network = \"90G\"\n"), Some(&m), 0)[0];
        assert!(a.pass, "{a:?}");
        assert!(a.found.starts_with("94.4 Gb/s (network-tcp"), "{}", a.found);
        assert!(!items(&order("min_network = \"100G\"\n"), Some(&m), 0)[0].pass);
        let mut lo = doc(0);
        for peer in ["127.0.0.1:4000", "[::1]:4000", "localhost:29571"] {
            lo.figures = vec![Figure::new(
                Metric::NetworkTcp,
                40.0,
                Engine::Gpuenv,
                format!("4 streams to {peer}, 200 GB confirmed by the peer in 5 s"),
            )];
            let a = &items(&order("min_network = 10\n"), Some(&measured(&lo)), 0)[0];
            assert!(!a.pass, "{peer}");
            assert!(a.found.contains("only on loopback"), "{}", a.found);
        }
    }

    #[test]
    fn the_machine_is_told_by_its_id_and_name() {
        let mut d = doc(0);
        d.hostname = "node-a".into();
        assert!(identity(&d, Some("node-a"), None).is_ok());
        assert!(
            identity(&d, Some("node-b"), None)
                .unwrap_err()
                .contains("measured on `node-a`, and this host is `node-b`")
        );
        d.machine_id = Some("aa".into());
        assert!(
            identity(&d, Some("node-a"), Some("bb"))
                .unwrap_err()
                .contains("another machine")
        );
        assert!(identity(&d, None, Some("aa")).is_ok());
        assert!(
            identity(&d, Some("clone"), Some("aa"))
                .unwrap_err()
                .contains("cloned")
        );
        let none = BenchDoc::default();
        assert!(
            identity(&none, Some("node-a"), None)
                .unwrap_err()
                .contains("neither a machine ID nor a host name")
        );
        // GPUs: of each model no more than the machine has.
        let eight = healthy(8);
        let h100 = vec!["NVIDIA H100 80GB HBM3"; 8];
        assert!(gpus_fit(db(), &eight, &h100).is_ok());
        assert!(gpus_fit(db(), &eight, &h100[..4]).is_err());
        let err = gpus_fit(db(), &eight, &["NVIDIA H200"; 8]).unwrap_err();
        assert_eq!(
            err,
            "it measured 8x NVIDIA H100 80GB HBM3, and this host has 8x NVIDIA H200"
        );
    }

    #[test]
    fn results_are_read_strictly() {
        let good = serde_json::to_string(&healthy(1)).unwrap();
        assert_eq!(parse_results(&good, 1).unwrap(), healthy(1));
        assert!(parse_results(&good, 2).unwrap_err().contains("an older gpuenv"));
        assert!(parse_results("{", 1).unwrap_err().starts_with("not JSON"));
        assert!(
            parse_results("[1]", 1)
                .unwrap_err()
                .starts_with("not a JSON object")
        );
        assert!(
            parse_results("{\"schema_version\":1,\"host\":{},\"checks\":[]}", 1)
                .unwrap_err()
                .contains("`gpuenv doctor --json` report")
        );
        let mbs = good.replace("\"unit\":\"TFLOPS\"", "\"unit\":\"GFLOPS\"");
        assert!(parse_results(&mbs, 1).unwrap_err().contains("is in `GFLOPS`"));
        let neg = good.replace("794.5", "-794.5");
        assert!(parse_results(&neg, 1).unwrap_err().contains("not a measurement"));
        let no_version = good.replace("\"schema_version\":1,", "");
        assert!(
            parse_results(&no_version, 1)
                .unwrap_err()
                .contains("no numeric `schema_version`")
        );
    }
}
