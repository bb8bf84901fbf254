//! `doctor`'s checks of a machine as delivered: the PCIe links, the paths between GPUs,
//! whether the GPUs are idle and cool and unthrottled, persistence mode, RDMA, and the
//! disks' layout. Each says what it read and where, and what to do.
//!
//! Owns: the verdict and reason of `pcie-link`, `gpu-interconnect`, `gpu-idle`,
//! `gpu-throttle`, `persistence-mode`, `network-rdma` and `disk-layout`, and their
//! thresholds (each with its reason next to it). Must not: probe, print, or decide what a
//! mount or a link is (that is [`super::layout`]).

use super::layout::{
    describe_mount, is_network, link_word, list_pairs, pairs, pcie_capability, port_up, separate_data_disk,
    summarize_links, system_disk,
};
use super::{Check, Verdict, check};
use crate::db::Db;
use crate::db::records::Segment;
use crate::host::{DiskMedia, GpuInfo, HostReport, Link, Throttle};

/// Memory in use on an idle GPU, MiB, above which someone is using it. A GPU nobody uses
/// shows a few MiB (the driver's own, and a display server's on workstation cards);
/// a CUDA context alone takes some hundreds, so 1 GiB is past anything left by the system.
const IDLE_MEMORY_MIB: u64 = 1024;

/// Utilization, percent, above which a GPU with no visible process is busy (a process in
/// another container or VM, which the driver does not name to this one).
const IDLE_UTILIZATION_PCT: u32 = 10;

/// How far below its slowdown temperature an idle GPU should sit, degrees C. NVIDIA
/// publishes no idle norm per GPU; an idle card in a working chassis runs tens of degrees
/// below the point where it throttles, so one within 25 degrees of it at idle points at
/// airflow or a fan.
const IDLE_TEMPERATURE_MARGIN_C: u32 = 25;

/// Whether a GPU is idle now: a performance state of P8 or deeper, or no utilization.
fn idle(g: &GpuInfo) -> Option<bool> {
    let s = g.state.as_ref()?;
    if let Some(p) = s
        .pstate
        .as_deref()
        .and_then(|p| p.strip_prefix('P'))
        .and_then(|n| n.parse::<u32>().ok())
    {
        return Some(p >= 8);
    }
    s.utilization_pct.map(|u| u == 0)
}

/// The worst of two verdicts.
fn worst(a: Verdict, b: Verdict) -> Verdict {
    a.max(b)
}

/// Lines and the worst verdict among them.
#[derive(Default)]
struct Findings {
    verdict: Option<Verdict>,
    lines: Vec<String>,
}

impl Findings {
    fn add(&mut self, v: Verdict, line: String) {
        self.verdict = Some(self.verdict.map_or(v, |w| worst(w, v)));
        self.lines.push(line);
    }

    fn into_check(self, id: &'static str, pass: String) -> Check {
        match self.verdict {
            None => check(id, Verdict::Pass, pass),
            Some(v) => check(id, v, self.lines.join("; ")),
        }
    }
}

/// `pcie-link`: each GPU's link against what the card and its slot can do.
pub(super) fn pcie_link(host: &HostReport) -> Check {
    if host.gpus.is_empty() {
        return check("pcie-link", Verdict::Skip, "no GPU");
    }
    let mut f = Findings::default();
    let mut known = 0;
    let mut split_unknown: Vec<String> = Vec::new();
    for g in &host.gpus {
        let i = g.index;
        let cap = pcie_capability(g);
        if cap.is_none() && g.pcie_width_max.is_none() {
            f.add(Verdict::Skip, format!("GPU {i}: its PCIe link was not reported"));
            continue;
        }
        known += 1;
        if g.pcie_gen_device_max.is_none() || g.pcie_gen_host_max.is_none() {
            // The link's maximum alone is the lower of card and slot: a Gen4 card in a
            // Gen3 slot reads Gen3 there, and looks fine.
            split_unknown.push(i.to_string());
        }
        if let (Some(d), Some(h)) = (g.pcie_gen_device_max, g.pcie_gen_host_max) {
            if h < d {
                f.add(
                    Verdict::Warn,
                    format!(
                        "GPU {i} is a PCIe Gen{d} card in a Gen{h} slot: copies between host and GPU run at Gen{h}, \
                         half the bandwidth per generation; ask for a Gen{d} slot"
                    ),
                );
            }
        }
        if let (Some(cur), Some(max)) = (g.pcie_width_current, g.pcie_width_max) {
            if cur < max {
                f.add(
                    Verdict::Warn,
                    format!("GPU {i} runs its PCIe link at x{cur} of x{max}: host-device copies are slower; reseat the card or ask for another slot"),
                );
            }
        }
        // The generation drops at idle to save power; only a busy GPU below it is slow.
        if let (Some(cur), Some(cap), Some(false)) = (g.pcie_gen_current, cap, idle(g)) {
            if cur < cap {
                f.add(
                    Verdict::Warn,
                    format!("GPU {i} is busy but its link runs at Gen{cur} of Gen{cap}"),
                );
            }
        }
    }
    let links: Vec<String> = {
        let mut seen: Vec<(String, usize)> = Vec::new();
        for g in &host.gpus {
            let d = match (pcie_capability(g), g.pcie_width_max) {
                (Some(c), Some(w)) => format!("Gen{c} x{w}"),
                (Some(c), None) => format!("Gen{c}"),
                (None, Some(w)) => format!("x{w}"),
                (None, None) => continue,
            };
            match seen.iter_mut().find(|(x, _)| *x == d) {
                Some((_, n)) => *n += 1,
                None => seen.push((d, 1)),
            }
        }
        seen.into_iter().map(|(d, n)| format!("{n}x {d}")).collect()
    };
    if f.verdict.is_none() && !split_unknown.is_empty() {
        return check(
            "pcie-link",
            Verdict::Skip,
            format!(
                "links {} at full width; whether a slot is below its card is unknown for GPU {}: only the link's \
                 maximum was reported, not the card's and the slot's apart (`nvidia-smi -q -x` has both)",
                links.join(", "),
                split_unknown.join(", ")
            ),
        );
    }
    f.into_check(
        "pcie-link",
        format!(
            "{known} GPU link{} at what card and slot can run: {} (the current generation drops at idle, which is normal)",
            if known == 1 { "" } else { "s" },
            links.join(", ")
        ),
    )
}

/// The NVLink generation of an architecture, by compute capability: Volta NVLink 2, Ampere
/// 3, Hopper 4, Blackwell 5 (NVIDIA's NVLink page lists each with its architecture).
fn nvlink_generation(major: u32, minor: u32) -> Option<u32> {
    match (major, minor) {
        (7, 0) => Some(2),
        (8, 0) | (8, 6) => Some(3),
        (9, 0) => Some(4),
        (10, _) => Some(5),
        _ => None,
    }
}

/// `gpu-interconnect`: the paths between GPUs, for a box used for multi-GPU training.
pub(super) fn gpu_interconnect(db: &Db, host: &HostReport) -> Check {
    if host.gpus.len() < 2 {
        return check(
            "gpu-interconnect",
            Verdict::Skip,
            "fewer than two GPUs: nothing to link",
        );
    }
    let Some(t) = &host.topology else {
        return check(
            "gpu-interconnect",
            Verdict::Warn,
            "the GPU matrix could not be read (`nvidia-smi topo -m`): the paths between GPUs are unknown",
        );
    };
    let all = pairs(&t.value);
    let mut f = Findings::default();
    let sys: Vec<_> = all
        .iter()
        .copied()
        .filter(|p| matches!(p.link, Link::Sys | Link::Soc))
        .collect();
    let nv: Vec<_> = all.iter().copied().filter(|p| p.link.is_nvlink()).collect();
    if !nv.is_empty() && nv.len() < all.len() {
        let without: Vec<_> = all.iter().copied().filter(|p| !p.link.is_nvlink()).collect();
        f.add(
            Verdict::Warn,
            format!(
                "NVLink on {} of {} GPU pairs ({}); the other {} go over PCIe ({}): collectives across all GPUs run at \
                 the slowest path; if NVLink on every pair was sold, this is not it",
                nv.len(),
                all.len(),
                list_pairs(&t.value, &nv, 4),
                without.len(),
                list_pairs(&t.value, &without, 4)
            ),
        );
    }
    if !sys.is_empty() {
        f.add(
            Verdict::Warn,
            format!(
                "{} of {} GPU pairs have no direct PCIe path ({}: through the CPUs' interconnect between NUMA nodes or \
                 host bridges): multi-GPU training moves every gradient through the CPUs; a box sold for multi-GPU \
                 training should have its GPUs under shared PCIe switches or NVLink",
                sys.len(),
                all.len(),
                list_pairs(&t.value, &sys, 4)
            ),
        );
    }
    // A GPU with some links up, but fewer than its peers, has a link down. One with none up
    // is not bridged at all, which the pairs above already say.
    if let Some(lanes) = &host.nvlink {
        let active: Vec<(u32, usize, usize)> = lanes
            .value
            .iter()
            .map(|g| (g.gpu, g.links.iter().filter(|l| l.active).count(), g.links.len()))
            .collect();
        if let Some(most) = active.iter().map(|(_, a, _)| *a).max().filter(|m| *m > 0) {
            for (gpu, a, total) in &active {
                if *a > 0 && *a < most {
                    f.add(
                        Verdict::Warn,
                        format!(
                            "GPU {gpu} has {a} of {total} NVLinks active where its peers have {most} ({}): a link is down; ask the vendor",
                            lanes.source
                        ),
                    );
                }
            }
        }
    }
    let mut pass = format!("{} ({})", summarize_links(&t.value), t.source);
    if nv.len() == all.len() {
        let speed = host
            .nvlink
            .as_ref()
            .and_then(|l| l.value.iter().flat_map(|g| &g.links).find_map(|l| l.speed_gb_s));
        let generation = host
            .gpus
            .first()
            .and_then(|g| db.gpu_reported(&g.name, g.memory_total_mib).ok())
            .and_then(|r| {
                let cc = r.compute_capability;
                nvlink_generation(u32::from(cc.major), u32::from(cc.minor))
            });
        if let Some(g) = generation {
            pass.push_str(&format!("; NVLink {g}"));
        }
        if let Some(s) = speed {
            pass.push_str(&format!(", {s} GB/s per link"));
        }
        if let Some(n) = &host.nvswitches {
            pass.push_str(&format!("; {} NVSwitch(es) ({})", n.value, n.source));
        }
    } else if let Some(first) = all.first() {
        pass.push_str(&format!(
            "; PCIe paths, no pair crosses NUMA nodes ({})",
            link_word(first.link)
        ));
    }
    f.into_check("gpu-interconnect", pass)
}

/// `gpu-idle`: memory in use and processes, which a fresh delivery has none of.
pub(super) fn gpu_idle(host: &HostReport) -> Check {
    if host.gpus.is_empty() {
        return check("gpu-idle", Verdict::Skip, "no GPU");
    }
    let mut f = Findings::default();
    let mut read = 0;
    for g in &host.gpus {
        let Some(s) = &g.state else { continue };
        read += 1;
        let i = g.index;
        let compute: Vec<_> = s
            .processes
            .iter()
            .flatten()
            .filter(|p| p.kind.as_deref().is_none_or(|k| k.contains('C')))
            .collect();
        if !compute.is_empty() {
            let named: Vec<String> = compute
                .iter()
                .take(3)
                .map(|p| {
                    format!(
                        "{} (pid {}{})",
                        if p.name.is_empty() { "?" } else { &p.name },
                        p.pid,
                        p.used_mib.map(|m| format!(", {m} MiB")).unwrap_or_default()
                    )
                })
                .collect();
            f.add(
                Verdict::Warn,
                format!(
                    "GPU {i} has {} process{} on it: {}: on a fresh delivery someone else is using this GPU",
                    compute.len(),
                    if compute.len() == 1 { "" } else { "es" },
                    named.join(", ")
                ),
            );
        } else if let Some(used) = s.memory_used_mib.filter(|u| *u > IDLE_MEMORY_MIB) {
            f.add(
                Verdict::Warn,
                format!(
                    "GPU {i} has {used} MiB in use and no process this system can see: another container or VM may hold it"
                ),
            );
        } else if let Some(u) = s.utilization_pct.filter(|u| *u > IDLE_UTILIZATION_PCT) {
            f.add(
                Verdict::Warn,
                format!("GPU {i} is {u}% busy with no process this system can see: another container or VM may be using it"),
            );
        }
    }
    if read == 0 {
        return check(
            "gpu-idle",
            Verdict::Skip,
            "the GPUs' memory use and processes were not reported",
        );
    }
    if read < host.gpus.len() {
        f.add(
            Verdict::Skip,
            format!("{} GPU(s) did not report their state", host.gpus.len() - read),
        );
    }
    let sources: Vec<&str> = host
        .gpus
        .iter()
        .filter_map(|g| g.state.as_ref())
        .map(|s| s.source.as_str())
        .collect();
    f.into_check(
        "gpu-idle",
        format!(
            "no process and no memory in use beyond {IDLE_MEMORY_MIB} MiB on {read} GPU{} ({})",
            if read == 1 { "" } else { "s" },
            sources.first().copied().unwrap_or("?")
        ),
    )
}

/// `gpu-throttle`: clocks held down by heat, power or hardware, a hot idle GPU, a power
/// limit set below the board's.
pub(super) fn gpu_throttle(host: &HostReport) -> Check {
    if host.gpus.is_empty() {
        return check("gpu-throttle", Verdict::Skip, "no GPU");
    }
    let mut f = Findings::default();
    let mut read = 0;
    for g in &host.gpus {
        let Some(s) = &g.state else { continue };
        let i = g.index;
        if s.throttle.is_some() || s.temperature_c.is_some() {
            read += 1;
        }
        for t in s.throttle.iter().flatten().filter(|t| t.is_fault()) {
            let (v, what) = match t {
                Throttle::HwPowerBrake => (
                    Verdict::Fail,
                    "the hardware power brake (an external signal, often the power supply)",
                ),
                Throttle::HwSlowdown => (Verdict::Fail, "a hardware slowdown (heat or the power brake)"),
                Throttle::HwThermal => (Verdict::Fail, "a hardware thermal slowdown"),
                _ => (
                    Verdict::Warn,
                    "a software thermal slowdown (over its target temperature)",
                ),
            };
            f.add(
                v,
                format!(
                    "GPU {i} runs slower now because of {what}: ask the vendor to check cooling and power"
                ),
            );
        }
        if let (Some(temp), Some(slow), Some(true)) = (s.temperature_c, s.temperature_slowdown_c, idle(g)) {
            if temp + IDLE_TEMPERATURE_MARGIN_C >= slow {
                f.add(
                    Verdict::Warn,
                    format!(
                        "GPU {i} is at {temp} C while idle, within {IDLE_TEMPERATURE_MARGIN_C} C of the {slow} C where it slows \
                         itself down: under load it will throttle; ask about airflow and fans"
                    ),
                );
            }
        }
        if let (Some(limit), Some(default)) = (s.power_limit_w, s.power_default_limit_w) {
            if limit + 1.0 < default {
                f.add(
                    Verdict::Warn,
                    format!(
                        "GPU {i}'s power limit is {limit:.0} W of the board's {default:.0} W: it runs slower than sold; \
                         `sudo nvidia-smi -i {i} -pl {default:.0}` restores it where the vendor allows"
                    ),
                );
            }
        }
    }
    if read == 0 {
        return check(
            "gpu-throttle",
            Verdict::Skip,
            "the GPUs' clock-event reasons and temperatures were not reported",
        );
    }
    let temps: Vec<String> = host
        .gpus
        .iter()
        .filter_map(|g| g.state.as_ref()?.temperature_c)
        .map(|t| t.to_string())
        .collect();
    f.into_check(
        "gpu-throttle",
        format!(
            "no thermal, power-brake or hardware slowdown active; temperatures {} C; power limits as shipped",
            if temps.is_empty() {
                "unknown".into()
            } else {
                temps.join("/")
            }
        ),
    )
}

/// `persistence-mode`: on, for data-center GPUs.
pub(super) fn persistence_mode(db: &Db, host: &HostReport) -> Check {
    if host.gpus.is_empty() {
        return check("persistence-mode", Verdict::Skip, "no GPU");
    }
    let datacenter = |g: &GpuInfo| {
        db.gpu_reported(&g.name, g.memory_total_mib)
            .ok()
            .map(|r| r.segment == Segment::Datacenter)
    };
    let dc: Vec<&GpuInfo> = host.gpus.iter().filter(|g| datacenter(g) == Some(true)).collect();
    if dc.is_empty() {
        return check(
            "persistence-mode",
            Verdict::Skip,
            "no data-center GPU known to compat-db: persistence mode matters on servers",
        );
    }
    let off: Vec<String> = dc
        .iter()
        .filter(|g| g.state.as_ref().and_then(|s| s.persistence_mode) == Some(false))
        .map(|g| g.index.to_string())
        .collect();
    let unknown = dc
        .iter()
        .filter(|g| g.state.as_ref().and_then(|s| s.persistence_mode).is_none())
        .count();
    if !off.is_empty() {
        check(
            "persistence-mode",
            Verdict::Warn,
            format!(
                "persistence mode is off on GPU {}: the driver tears down between jobs, so every CUDA start waits for it \
                 and settings such as clocks are lost; enable nvidia-persistenced (or `sudo nvidia-smi -pm 1`)",
                off.join(", ")
            ),
        )
    } else if unknown > 0 {
        check(
            "persistence-mode",
            Verdict::Skip,
            format!("persistence mode was not reported for {unknown} data-center GPU(s)"),
        )
    } else {
        check(
            "persistence-mode",
            Verdict::Pass,
            format!("persistence mode on for {} data-center GPU(s)", dc.len()),
        )
    }
}

/// `network-rdma`: RDMA for a box with several GPUs, and GPUDirect RDMA where it has RDMA.
pub(super) fn network_rdma(host: &HostReport) -> Check {
    let Some(n) = &host.network else {
        return check("network-rdma", Verdict::Skip, "the network was not read");
    };
    let up: Vec<String> = n
        .rdma
        .iter()
        .filter(|p| port_up(p))
        .map(|p| {
            format!(
                "{}/{} {}{}",
                p.device,
                p.port,
                p.link_layer.as_deref().unwrap_or("?"),
                p.rate_gbps.map(|r| format!(" {r} Gb/s")).unwrap_or_default()
            )
        })
        .collect();
    if up.is_empty() {
        let why = if n.rdma.is_empty() {
            "no RDMA device (/sys/class/infiniband is empty or absent)".to_string()
        } else {
            format!("{} RDMA port(s), none ACTIVE", n.rdma.len())
        };
        return if host.gpus.len() > 1 {
            check(
                "network-rdma",
                Verdict::Warn,
                format!(
                    "{why}: training across several such nodes would run NCCL over TCP sockets, many times slower than \
                     InfiniBand or RoCE; fine for one node"
                ),
            )
        } else {
            check(
                "network-rdma",
                Verdict::Skip,
                format!("{why}; one GPU or none: RDMA matters for multi-node training"),
            )
        };
    }
    match n.peermem {
        Some(true) => check(
            "network-rdma",
            Verdict::Pass,
            format!(
                "RDMA up: {}; GPUDirect RDMA (nvidia_peermem loaded)",
                up.join(", ")
            ),
        ),
        Some(false) => check(
            "network-rdma",
            Verdict::Warn,
            format!(
                "RDMA up ({}), but nvidia_peermem is not loaded (/proc/modules): without it (or DMA-BUF, which needs the \
                 open kernel modules and Linux 5.12+), NCCL stages GPU data through host memory; `sudo modprobe nvidia_peermem`",
                up.join(", ")
            ),
        ),
        None => check(
            "network-rdma",
            Verdict::Warn,
            format!(
                "RDMA up ({}); whether nvidia_peermem is loaded is unknown (/proc/modules was not read)",
                up.join(", ")
            ),
        ),
    }
}

/// `disk-layout`: a data disk apart from the system disk, and not a rotating one.
pub(super) fn disk_layout(host: &HostReport) -> Check {
    if host.mounts.is_empty() {
        return check("disk-layout", Verdict::Skip, "no filesystem information");
    }
    let root = system_disk(host);
    let Some(data) = separate_data_disk(host) else {
        let network: Vec<&str> = host
            .mounts
            .iter()
            .filter(|m| is_network(m))
            .map(|m| m.mount.as_str())
            .collect();
        return check(
            "disk-layout",
            Verdict::Warn,
            format!(
                "no data disk apart from the system disk ({}){}: datasets and checkpoints share a drive with the OS, \
                 and filling it stops the machine",
                root.map_or("no filesystem at /".into(), describe_mount),
                if network.is_empty() {
                    String::new()
                } else {
                    format!("; network filesystems: {}", network.join(", "))
                }
            ),
        );
    };
    let system = root.map_or("no filesystem at /".into(), describe_mount);
    let virtual_disk = data
        .disk
        .as_deref()
        .is_some_and(|d| d.starts_with("vd") || d.starts_with("xvd"));
    match data.media {
        Some(DiskMedia::Hdd) => check(
            "disk-layout",
            Verdict::Warn,
            format!(
                "the data disk {} is a rotating drive ({}): reading training data at disk-head speed starves the GPUs{}",
                describe_mount(data),
                data.media_source.as_deref().unwrap_or("?"),
                if virtual_disk {
                    "; a virtual disk may say so without being one: ask the vendor what backs it"
                } else {
                    ""
                }
            ),
        ),
        Some(_) => check(
            "disk-layout",
            Verdict::Pass,
            format!("system disk {system}; data disk {}", describe_mount(data)),
        ),
        None => check(
            "disk-layout",
            Verdict::Warn,
            format!(
                "system disk {system}; data disk {}, but what it is stored on is unknown ({})",
                describe_mount(data),
                // Why, where the probe found out (a virtual disk, a network filesystem);
                // otherwise nothing under /sys/block answered for it.
                data.media_source.as_deref().unwrap_or("no /sys/block answer")
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{
        GpuProcess, GpuState, Mount, NetInterface, Network, NvLinkGpu, NvLinkLane, RdmaPort, Sourced,
        Topology,
    };

    fn db() -> &'static Db {
        Db::embedded().unwrap()
    }

    fn gpus(name: &str, n: u32) -> Vec<GpuInfo> {
        (0..n)
            .map(|i| GpuInfo {
                index: i,
                name: name.into(),
                ..GpuInfo::default()
            })
            .collect()
    }

    /// A topology of `n` GPUs where `link(i, j)` links each pair.
    fn topo(n: usize, link: impl Fn(usize, usize) -> Link) -> Option<Sourced<Topology>> {
        let links = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            Link::SelfLink
                        } else {
                            link(i.min(j), i.max(j))
                        }
                    })
                    .collect()
            })
            .collect();
        Some(Sourced::new(
            Topology {
                gpus: (0..n).map(|i| format!("GPU{i}")).collect(),
                links,
                ..Topology::default()
            },
            "nvidia-smi topo -m",
        ))
    }

    fn idle_state() -> GpuState {
        GpuState {
            source: "nvidia-smi -q -x".into(),
            memory_used_mib: Some(2),
            utilization_pct: Some(0),
            pstate: Some("P8".into()),
            temperature_c: Some(34),
            temperature_slowdown_c: Some(87),
            throttle: Some(vec![Throttle::GpuIdle]),
            persistence_mode: Some(true),
            processes: Some(vec![]),
            power_limit_w: Some(700.0),
            power_default_limit_w: Some(700.0),
            ..GpuState::default()
        }
    }

    #[test]
    fn a_gen4_card_in_a_gen3_slot_warns_at_idle_too() {
        let mut host = HostReport {
            gpus: gpus("NVIDIA GeForce RTX 4090", 1),
            ..HostReport::default()
        };
        let g = &mut host.gpus[0];
        (
            g.pcie_gen_device_max,
            g.pcie_gen_host_max,
            g.pcie_gen_max,
            g.pcie_gen_current,
        ) = (Some(4), Some(3), Some(3), Some(1));
        (g.pcie_width_max, g.pcie_width_current) = (Some(16), Some(16));
        g.state = Some(idle_state());
        let c = pcie_link(&host);
        assert_eq!(c.verdict, Verdict::Warn, "{}", c.reason);
        assert!(c.reason.contains("PCIe Gen4 card in a Gen3 slot"), "{}", c.reason);
        // Gen1 at idle is power saving, not a fault.
        assert!(!c.reason.contains("Gen1"), "{}", c.reason);

        // In a Gen4 slot, idle at Gen1: passes, and says why Gen1 is fine.
        host.gpus[0].pcie_gen_host_max = Some(4);
        host.gpus[0].pcie_gen_max = Some(4);
        let c = pcie_link(&host);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        assert!(c.reason.contains("1x Gen4 x16"), "{}", c.reason);
        // Busy at Gen1 is slow.
        let s = host.gpus[0].state.as_mut().unwrap();
        (s.pstate, s.utilization_pct) = (Some("P0".into()), Some(98));
        assert_eq!(pcie_link(&host).verdict, Verdict::Warn);
        // Narrow links warn.
        host.gpus[0].pcie_gen_current = Some(4);
        host.gpus[0].pcie_width_current = Some(8);
        let c = pcie_link(&host);
        assert!(c.reason.contains("x8 of x16"), "{}", c.reason);
        // No facts: not a pass.
        let host = HostReport {
            gpus: gpus("NVIDIA GeForce RTX 4090", 2),
            ..HostReport::default()
        };
        assert_eq!(pcie_link(&host).verdict, Verdict::Skip);
    }

    #[test]
    fn pairs_across_numa_and_partial_nvlink_warn() {
        // Eight RTX 4090s, every pair SYS.
        let host = HostReport {
            gpus: gpus("NVIDIA GeForce RTX 4090", 8),
            topology: topo(8, |_, _| Link::Sys),
            ..HostReport::default()
        };
        let c = gpu_interconnect(db(), &host);
        assert_eq!(c.verdict, Verdict::Warn, "{}", c.reason);
        assert!(
            c.reason
                .starts_with("28 of 28 GPU pairs have no direct PCIe path"),
            "{}",
            c.reason
        );

        // Four A100s, NVLink between GPU0 and GPU1 only.
        let host = HostReport {
            gpus: gpus("NVIDIA A100 80GB PCIe", 4),
            topology: topo(4, |a, b| match (a, b) {
                (0, 1) => Link::NvLink(12),
                (_, 3) => Link::Sys,
                _ => Link::Pxb,
            }),
            ..HostReport::default()
        };
        let c = gpu_interconnect(db(), &host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reason
                .starts_with("NVLink on 1 of 6 GPU pairs (GPU0-GPU1 NV12)"),
            "{}",
            c.reason
        );
        assert!(
            c.reason.contains("3 of 6 GPU pairs have no direct PCIe path"),
            "{}",
            c.reason
        );

        // Eight H100s on NVSwitch, one GPU with a link down.
        let lanes = |active: usize| {
            (0..18)
                .map(|l| NvLinkLane {
                    link: l,
                    active: (l as usize) < active,
                    speed_gb_s: ((l as usize) < active).then_some(26.562),
                })
                .collect()
        };
        let mut host = HostReport {
            gpus: gpus("NVIDIA H100 80GB HBM3", 8),
            topology: topo(8, |_, _| Link::NvLink(18)),
            nvlink: Some(Sourced::new(
                (0..8)
                    .map(|g| NvLinkGpu {
                        gpu: g,
                        links: lanes(18),
                    })
                    .collect(),
                "nvidia-smi nvlink -s",
            )),
            nvswitches: Some(Sourced::new(4, "lspci -n -d 10de:")),
            ..HostReport::default()
        };
        let c = gpu_interconnect(db(), &host);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        assert!(c.reason.contains("NV18 on 28"), "{}", c.reason);
        assert!(
            c.reason
                .contains("NVLink 4, 26.562 GB/s per link; 4 NVSwitch(es)"),
            "{}",
            c.reason
        );
        host.nvlink.as_mut().unwrap().value[3].links = lanes(16);
        let c = gpu_interconnect(db(), &host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reason
                .contains("GPU 3 has 16 of 18 NVLinks active where its peers have 18"),
            "{}",
            c.reason
        );

        // No matrix for several GPUs: a warning, not a pass.
        host.topology = None;
        assert_eq!(gpu_interconnect(db(), &host).verdict, Verdict::Warn);
    }

    #[test]
    fn gpus_in_use_throttled_or_unpersisted_are_named() {
        let mut host = HostReport {
            gpus: gpus("NVIDIA H100 80GB HBM3", 2),
            ..HostReport::default()
        };
        // Nothing reported: no verdict claims a pass.
        for c in [
            gpu_idle(&host),
            gpu_throttle(&host),
            persistence_mode(db(), &host),
        ] {
            assert_eq!(c.verdict, Verdict::Skip, "{}: {}", c.id, c.reason);
        }
        for g in &mut host.gpus {
            g.state = Some(idle_state());
        }
        for c in [
            gpu_idle(&host),
            gpu_throttle(&host),
            persistence_mode(db(), &host),
        ] {
            assert_eq!(c.verdict, Verdict::Pass, "{}: {}", c.id, c.reason);
        }
        {
            let s = host.gpus[1].state.as_mut().unwrap();
            s.processes = Some(vec![GpuProcess {
                pid: 4242,
                name: "python3".into(),
                kind: Some("C".into()),
                used_mib: Some(30_000),
            }]);
            s.memory_used_mib = Some(30_100);
            s.throttle = Some(vec![Throttle::HwPowerBrake]);
            s.persistence_mode = Some(false);
            s.power_limit_w = Some(400.0);
        }
        let c = gpu_idle(&host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reason
                .contains("GPU 1 has 1 process on it: python3 (pid 4242, 30000 MiB)"),
            "{}",
            c.reason
        );
        let c = gpu_throttle(&host);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.reason.contains("hardware power brake"), "{}", c.reason);
        assert!(
            c.reason.contains("power limit is 400 W of the board's 700 W"),
            "{}",
            c.reason
        );
        let c = persistence_mode(db(), &host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reason.starts_with("persistence mode is off on GPU 1"),
            "{}",
            c.reason
        );

        // Hot at idle, near the card's own slowdown point.
        let s = host.gpus[0].state.as_mut().unwrap();
        s.temperature_c = Some(70);
        let c = gpu_throttle(&host);
        assert!(
            c.reason
                .contains("GPU 0 is at 70 C while idle, within 25 C of the 87 C"),
            "{}",
            c.reason
        );
        // Memory held with no process visible.
        host.gpus[1].state = Some(GpuState {
            memory_used_mib: Some(20_000),
            ..idle_state()
        });
        assert!(
            gpu_idle(&host)
                .reason
                .contains("GPU 1 has 20000 MiB in use and no process")
        );
        // A consumer GPU's persistence mode is not judged.
        let consumer = HostReport {
            gpus: gpus("NVIDIA GeForce RTX 4090", 1),
            ..HostReport::default()
        };
        assert_eq!(persistence_mode(db(), &consumer).verdict, Verdict::Skip);
    }

    fn port(state: &str) -> RdmaPort {
        RdmaPort {
            device: "mlx5_0".into(),
            port: 1,
            link_layer: Some("InfiniBand".into()),
            state: Some(state.into()),
            rate_gbps: Some(400.0),
            source: "/sys/class/infiniband/mlx5_0/ports/1".into(),
        }
    }

    #[test]
    fn rdma_for_several_gpus_and_peermem_with_it() {
        let mut host = HostReport {
            gpus: gpus("NVIDIA H100 80GB HBM3", 8),
            ..HostReport::default()
        };
        assert_eq!(network_rdma(&host).verdict, Verdict::Skip);
        host.network = Some(Network {
            interfaces: vec![NetInterface {
                name: "eth0".into(),
                speed_mbps: Some(25_000),
                driver: Some("ice".into()),
                operstate: Some("up".into()),
                source: "/sys/class/net/eth0".into(),
            }],
            peermem: Some(false),
            ..Network::default()
        });
        let c = network_rdma(&host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.reason.starts_with("no RDMA device"), "{}", c.reason);
        host.network.as_mut().unwrap().rdma = vec![port("DOWN")];
        assert!(
            network_rdma(&host)
                .reason
                .starts_with("1 RDMA port(s), none ACTIVE")
        );
        host.network.as_mut().unwrap().rdma = vec![port("ACTIVE")];
        let c = network_rdma(&host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.reason.contains("nvidia_peermem is not loaded"), "{}", c.reason);
        host.network.as_mut().unwrap().peermem = Some(true);
        let c = network_rdma(&host);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        assert!(c.reason.contains("mlx5_0/1 InfiniBand 400 Gb/s"), "{}", c.reason);
    }

    fn mount(device: &str, disk: &str, at: &str, media: Option<DiskMedia>, gb: u64) -> Mount {
        Mount {
            device: device.into(),
            fstype: "ext4".into(),
            size_kib: gb * 1_000_000_000 / 1024,
            avail_kib: gb * 1_000_000_000 / 2048,
            mount: at.into(),
            disk: Some(disk.into()),
            media,
            media_source: media.map(|_| format!("/sys/block/{disk}/queue/rotational")),
        }
    }

    #[test]
    fn a_data_disk_apart_and_not_rotating() {
        let root = mount("/dev/nvme0n1p2", "nvme0n1", "/", Some(DiskMedia::Nvme), 480);
        let mut host = HostReport {
            mounts: vec![root.clone()],
            ..HostReport::default()
        };
        let c = disk_layout(&host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reason
                .starts_with("no data disk apart from the system disk (/ (/dev/nvme0n1p2, 480 GB, nvme))"),
            "{}",
            c.reason
        );
        // Another partition of the same drive is not a data disk.
        host.mounts.push(mount(
            "/dev/nvme0n1p3",
            "nvme0n1",
            "/data",
            Some(DiskMedia::Nvme),
            3000,
        ));
        assert_eq!(disk_layout(&host).verdict, Verdict::Warn);
        host.mounts
            .push(mount("/dev/sdb1", "sdb", "/mnt/bulk", Some(DiskMedia::Hdd), 8000));
        let c = disk_layout(&host);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.reason
                .contains("/mnt/bulk (/dev/sdb1, 8000 GB, hdd) is a rotating drive"),
            "{}",
            c.reason
        );
        host.mounts = vec![
            root,
            mount("/dev/nvme1n1", "nvme1n1", "/data", Some(DiskMedia::Nvme), 3840),
        ];
        let c = disk_layout(&host);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        // Media unknown: a warning, not a pass.
        host.mounts[1].media = None;
        assert_eq!(disk_layout(&host).verdict, Verdict::Warn);
    }
}
