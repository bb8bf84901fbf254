//! The machine's layout as delivered: how the GPUs are linked (PCIe, NVLink, NVSwitch), the
//! network (RDMA, NICs), the disks (system apart from data, and what they are), the CPU's
//! model and sockets, the driver's CUDA and the container runtime; the facts read the same
//! way for acceptance items (here) and for `doctor`'s checks (`judge::delivery`).
//!
//! Owns: which mount is the system disk and which the data disk, a GPU's PCIe capability,
//! the GPU pairs of a topology, how Docker hands GPUs to containers, and the acceptance
//! items of the layout keys (`cuda`, `pcie_gen`, `nvlink`, `topology`, `cpu_model`,
//! `sockets`, `system_disk`, `data_disk`, `data_disk_type`, `rdma`, `nic_speed`,
//! `container_runtime`). Must not: probe, print, or read the order (that is
//! [`super::order`]).

use super::accept::{Acceptance, TOLERANCE, conversion, item, kib_to_gb, num};
use super::order::{DiskKind, Expect, Item, NvlinkWant, Rate, Size, TopologyWant};
use crate::host::{DiskMedia, DockerProbe, GpuInfo, HostReport, Link, Mount, Topology};

/// A filesystem that holds data of its own (not memory-backed, a view of another, the
/// firmware's partition or the boot partition).
pub fn holds_data(m: &Mount) -> bool {
    !matches!(
        m.fstype.as_str(),
        "tmpfs" | "devtmpfs" | "overlay" | "squashfs" | "proc" | "sysfs" | "efivarfs" | "vfat" | "ramfs"
    ) && !m.mount.starts_with("/boot")
        && !m.mount.starts_with("/snap")
}

/// A filesystem served over the network.
pub fn is_network(m: &Mount) -> bool {
    m.media == Some(DiskMedia::Network)
        || m.fstype.starts_with("nfs")
        || m.fstype.starts_with("fuse")
        || matches!(
            m.fstype.as_str(),
            "cifs" | "smb3" | "ceph" | "lustre" | "gpfs" | "9p"
        )
}

/// The system disk: the filesystem mounted at `/`.
pub fn system_disk(host: &HostReport) -> Option<&Mount> {
    host.mounts.iter().find(|m| m.mount == "/")
}

/// The data disk: the largest local filesystem on another drive than the system disk's.
/// Another partition of the system drive is not a data disk (they share the drive, and
/// its failure), so drives are compared where both are known, devices otherwise.
pub fn separate_data_disk(host: &HostReport) -> Option<&Mount> {
    let root = system_disk(host);
    host.mounts
        .iter()
        .filter(|m| holds_data(m) && !is_network(m) && m.mount != "/")
        .filter(|m| match root {
            None => true,
            Some(r) => match (&r.disk, &m.disk) {
                (Some(a), Some(b)) => a != b,
                _ => r.device != m.device,
            },
        })
        .max_by_key(|m| m.size_kib)
}

/// What a mount is stored on, in the words of an order; `None` when unknown or networked.
pub fn disk_kind(m: &Mount) -> Option<DiskKind> {
    match m.media? {
        DiskMedia::Nvme => Some(DiskKind::Nvme),
        DiskMedia::Ssd => Some(DiskKind::Ssd),
        DiskMedia::Hdd => Some(DiskKind::Hdd),
        DiskMedia::Network => None,
    }
}

/// `/data (/dev/sdb1, 7500 GB, hdd)`.
pub fn describe_mount(m: &Mount) -> String {
    let media = match m.media {
        Some(DiskMedia::Nvme) => "nvme",
        Some(DiskMedia::Ssd) => "ssd",
        Some(DiskMedia::Hdd) => "hdd",
        Some(DiskMedia::Network) => "network",
        None => "media unknown",
    };
    format!(
        "{} ({}, {:.0} GB, {media})",
        m.mount,
        m.device,
        kib_to_gb(m.size_kib)
    )
}

/// The PCIe generation a GPU's link can run at: the lower of the card's and the slot's
/// maxima where both are known (a Gen4 card in a Gen3 slot runs Gen3), else the link's
/// maximum as reported. The current generation is not it: GPUs drop to Gen1 at idle.
pub fn pcie_capability(g: &GpuInfo) -> Option<u32> {
    match (g.pcie_gen_device_max, g.pcie_gen_host_max) {
        (Some(d), Some(h)) => Some(d.min(h)),
        _ => g.pcie_gen_max,
    }
}

/// One pair of GPUs and their link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// The lower index.
    pub a: usize,
    /// The higher.
    pub b: usize,
    /// How they are linked.
    pub link: Link,
}

/// Every pair of a topology's GPUs (the upper triangle; a missing cell is skipped).
pub fn pairs(t: &Topology) -> Vec<Pair> {
    let n = t.gpus.len();
    let mut out = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if let Some(link) = t.links.get(a).and_then(|r| r.get(b)) {
                out.push(Pair { a, b, link: *link });
            }
        }
    }
    out
}

/// The matrix's name for a link (`NV12`, `SYS`).
pub fn link_word(l: Link) -> String {
    match l {
        Link::SelfLink => "X".into(),
        Link::NvLink(n) => format!("NV{n}"),
        Link::Pix => "PIX".into(),
        Link::Pxb => "PXB".into(),
        Link::Phb => "PHB".into(),
        Link::Node => "NODE".into(),
        Link::Sys => "SYS".into(),
        Link::Soc => "SOC".into(),
    }
}

/// `GPU0-GPU1 NV12, GPU2-GPU3 SYS`, the first few.
pub fn list_pairs(t: &Topology, pairs: &[Pair], at_most: usize) -> String {
    let label = |i: usize| t.gpus.get(i).cloned().unwrap_or_else(|| format!("GPU{i}"));
    let mut shown: Vec<String> = pairs
        .iter()
        .take(at_most)
        .map(|p| format!("{}-{} {}", label(p.a), label(p.b), link_word(p.link)))
        .collect();
    if pairs.len() > at_most {
        shown.push(format!("and {} more", pairs.len() - at_most));
    }
    shown.join(", ")
}

/// How the links of a topology's pairs count up: `NVLink on 1 of 6 pairs; SYS on 3`.
pub fn summarize_links(t: &Topology) -> String {
    let all = pairs(t);
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for p in &all {
        let w = link_word(p.link);
        match kinds.iter_mut().find(|(k, _)| *k == w) {
            Some((_, n)) => *n += 1,
            None => kinds.push((w, 1)),
        }
    }
    let parts: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} on {n}")).collect();
    format!("{} pairs: {}", all.len(), parts.join(", "))
}

/// How Docker hands GPUs to containers, or why it does not: through the registered
/// `nvidia` runtime (`docker run --gpus all`), or CDI (`--device nvidia.com/gpu=all`).
pub fn gpu_containers(host: &HostReport) -> Result<String, String> {
    let engine = match &host.docker {
        None => return Err("the Docker probe did not run".into()),
        Some(DockerProbe::Error { error }) => return Err(format!("no Docker Engine: {error}")),
        Some(DockerProbe::Ok { engine }) => engine,
    };
    let docker = format!("Docker {}", engine.server_version.as_deref().unwrap_or("?"));
    if engine.runtimes.iter().any(|r| r.contains("nvidia")) {
        return Ok(format!(
            "{docker} with the nvidia runtime registered: `docker run --gpus all` can work"
        ));
    }
    let cdi_spec = host
        .cdi_specs
        .iter()
        .any(|s| s.kind.as_deref() == Some("nvidia.com/gpu"))
        || engine
            .cdi_devices
            .iter()
            .any(|d| d.starts_with("nvidia.com/gpu="));
    if !engine.cdi_spec_dirs.is_empty() && cdi_spec {
        return Ok(format!(
            "{docker} with CDI devices nvidia.com/gpu: `docker run --device nvidia.com/gpu=all` can work"
        ));
    }
    Err(format!(
        "{docker} has no nvidia runtime (runtimes: {}) and no CDI spec for nvidia.com/gpu",
        engine.runtimes.join(", ")
    ))
}

/// An RDMA port's rate and state: `mlx5_0/1 InfiniBand 400 Gb/s ACTIVE`.
fn describe_port(p: &crate::host::RdmaPort) -> String {
    format!(
        "{}/{} {} {} {}",
        p.device,
        p.port,
        p.link_layer.as_deref().unwrap_or("link layer unknown"),
        p.rate_gbps
            .map_or("rate unknown".to_string(), |r| format!("{} Gb/s", num(r))),
        p.state.as_deref().unwrap_or("state unknown")
    )
}

/// Whether an RDMA port is up.
pub fn port_up(p: &crate::host::RdmaPort) -> bool {
    p.state.as_deref() == Some("ACTIVE")
}

/// The layout items of the order that `e` asks for.
pub(super) fn accept_layout(host: &HostReport, e: &Expect) -> Vec<Acceptance> {
    let mut out = Vec::new();
    if let Some(want) = &e.cuda {
        out.push(accept_cuda(host, want));
    }
    if let Some(n) = e.pcie_gen {
        out.push(accept_pcie_gen(host, n));
    }
    if let Some(want) = e.nvlink {
        out.push(accept_nvlink(host, want));
    }
    if let Some(want) = e.topology {
        out.push(accept_topology(host, want));
    }
    if let Some(words) = &e.cpu_model {
        out.push(accept_cpu_model(host, words));
    }
    if let Some(n) = e.sockets {
        out.push(accept_sockets(host, n));
    }
    if let Some(size) = &e.system_disk {
        out.push(accept_disk_size(host, Item::SystemDisk, system_disk(host), size));
    }
    if let Some(size) = &e.data_disk {
        out.push(accept_disk_size(
            host,
            Item::DataDisk,
            separate_data_disk(host),
            size,
        ));
    }
    if let Some(kind) = e.data_disk_type {
        out.push(accept_data_disk_type(host, kind));
    }
    if let Some(rate) = &e.rdma {
        out.push(accept_rdma(host, rate.as_ref()));
    }
    if let Some(rate) = &e.nic_speed {
        out.push(accept_nic_speed(host, rate));
    }
    if e.container_runtime {
        out.push(accept_container_runtime(host));
    }
    out
}

fn accept_cuda(host: &HostReport, want: &crate::model::CudaVersion) -> Acceptance {
    let found = host.driver_cuda.as_ref();
    item(
        host,
        Item::Cuda,
        want.to_string(),
        found.map_or("unknown".into(), |c| format!("{} ({})", c.value, c.source)),
        found.is_some_and(|c| c.value >= *want),
        format!(
            "the driver must support CUDA {want} or later: the \"CUDA Version\" nvidia-smi prints is the newest CUDA \
             the driver runs, not an installed toolkit"
        ),
    )
}

fn accept_pcie_gen(host: &HostReport, n: u32) -> Acceptance {
    let per_gpu: Vec<(u32, Option<u32>)> = host.gpus.iter().map(|g| (g.index, pcie_capability(g))).collect();
    let lowest = per_gpu.iter().filter_map(|(_, c)| *c).min();
    let unknown: Vec<String> = per_gpu
        .iter()
        .filter(|(_, c)| c.is_none())
        .map(|(i, _)| i.to_string())
        .collect();
    let found = if host.gpus.is_empty() {
        "no GPU".to_string()
    } else if !unknown.is_empty() {
        format!("unknown for GPU {}", unknown.join(", "))
    } else {
        let slots: Vec<String> = host
            .gpus
            .iter()
            .filter(|g| pcie_capability(g) == lowest)
            .map(|g| match (g.pcie_gen_device_max, g.pcie_gen_host_max) {
                (Some(d), Some(h)) => format!("GPU {} (card Gen{d}, slot Gen{h})", g.index),
                _ => format!("GPU {}", g.index),
            })
            .take(4)
            .collect();
        format!("Gen{} at most on {}", lowest.unwrap_or(0), slots.join(", "))
    };
    item(
        host,
        Item::PcieGen,
        format!("Gen{n}"),
        found,
        !host.gpus.is_empty() && unknown.is_empty() && lowest.is_some_and(|l| l >= n),
        format!(
            "every GPU's link must reach PCIe Gen{n}: the lower of what the card and its slot can run (a Gen4 card \
             in a Gen3 slot runs Gen3); the current generation drops at idle to save power and is not compared"
        ),
    )
}

fn accept_nvlink(host: &HostReport, want: NvlinkWant) -> Acceptance {
    let expected = match want {
        NvlinkWant::All => "NVLink between every GPU pair".to_string(),
        NvlinkWant::AtLeast(n) => format!("at least {n} NVLinks between every GPU pair"),
    };
    let holds = |l: Link| match (want, l) {
        (NvlinkWant::All, Link::NvLink(_)) => true,
        (NvlinkWant::AtLeast(n), Link::NvLink(k)) => k >= n,
        _ => false,
    };
    let (found, ok) = match (&host.topology, host.gpus.len()) {
        (_, 0) => ("no GPU".to_string(), false),
        (_, 1) => ("one GPU: no pair to link".to_string(), false),
        (None, _) => ("unknown (no topology read)".to_string(), false),
        (Some(t), _) => {
            let all = pairs(&t.value);
            let short: Vec<Pair> = all.iter().copied().filter(|p| !holds(p.link)).collect();
            let text = if short.is_empty() {
                format!("{} ({})", summarize_links(&t.value), t.source)
            } else {
                format!(
                    "{} of {} pairs short: {} ({})",
                    short.len(),
                    all.len(),
                    list_pairs(&t.value, &short, 4),
                    t.source
                )
            };
            (text, !all.is_empty() && short.is_empty())
        }
    };
    item(
        host,
        Item::Nvlink,
        expected,
        found,
        ok,
        "every pair of GPUs in `nvidia-smi topo -m` must be NV# (a bonded set of # NVLinks), with at least the \
         links ordered; PIX, PXB, PHB, NODE and SYS are PCIe paths"
            .into(),
    )
}

fn accept_topology(host: &HostReport, want: TopologyWant) -> Acceptance {
    let t = host.topology.as_ref();
    let all = t.map(|t| pairs(&t.value)).unwrap_or_default();
    let summary = t.map(|t| summarize_links(&t.value));
    let (expected, found, ok, rule) = match want {
        TopologyWant::Nvswitch => {
            let every_nvlink = !all.is_empty() && all.iter().all(|p| p.link.is_nvlink());
            let switches = host.nvswitches.as_ref();
            let found = match (switches, &summary) {
                (None, _) => "NVSwitches unknown (lspci gave no answer)".to_string(),
                (Some(s), Some(sum)) => format!("{} NVSwitch(es) ({}); {sum}", s.value, s.source),
                (Some(s), None) => format!("{} NVSwitch(es) ({}); no topology read", s.value, s.source),
            };
            (
                "GPUs on an NVSwitch fabric",
                found,
                switches.is_some_and(|s| s.value > 0) && every_nvlink,
                "at least one NVSwitch on the PCI bus (an NVIDIA bridge device, class 0680) and NVLink between every \
                 GPU pair",
            )
        }
        TopologyWant::Pcie => (
            "GPUs on PCIe",
            summary.unwrap_or_else(|| "unknown (no topology read)".into()),
            !all.is_empty(),
            "the GPU matrix is read and every pair has a path: PCIe, or better (NVLink)",
        ),
    };
    item(host, Item::Topology, expected.into(), found, ok, rule.into())
}

fn accept_cpu_model(host: &HostReport, words: &str) -> Acceptance {
    let model = host
        .cpu
        .as_ref()
        .map(|c| c.model.as_str())
        .filter(|m| !m.is_empty());
    // Spacing differs between listings and /proc/cpuinfo ("EPYC  7T83"); case too.
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let holds = model.is_some_and(|m| {
        let (m, w) = (squash(m), squash(words));
        if w.contains('*') || w.contains('?') {
            // Anywhere in the name, as plain words are: `Xeon*8480` finds
            // "Intel(R) Xeon(R) Platinum 8480+".
            wildmatch::WildMatch::new_case_insensitive(&format!("*{w}*")).matches(&m)
        } else {
            m.to_lowercase().contains(&w.to_lowercase())
        }
    });
    item(
        host,
        Item::CpuModel,
        words.to_string(),
        model.map_or("unknown".into(), |m| format!("{m} (/proc/cpuinfo)")),
        holds,
        "the CPU's model name must contain the words ordered, case and spacing aside; `*` and `?` are wildcards (any \
         text, one character)"
            .into(),
    )
}

fn accept_sockets(host: &HostReport, n: u32) -> Acceptance {
    let found = host.cpu.as_ref().and_then(|c| c.sockets);
    item(
        host,
        Item::Sockets,
        n.to_string(),
        found.map_or("unknown".into(), |s| s.to_string()),
        found.is_some_and(|s| s >= n),
        "at least the number ordered, counted as distinct `physical id`s in /proc/cpuinfo".into(),
    )
}

fn accept_disk_size(host: &HostReport, which: Item, m: Option<&Mount>, size: &Size) -> Acceptance {
    let floor = size.value * TOLERANCE;
    let found = m.map(|m| kib_to_gb(m.size_kib));
    let what = if which == Item::SystemDisk {
        "the filesystem mounted at /"
    } else {
        "the largest local filesystem on a drive other than the system disk's"
    };
    item(
        host,
        which,
        format!("{} GB", num(size.value)),
        m.map_or_else(
            || {
                if which == Item::DataDisk {
                    "no data disk apart from the system disk".to_string()
                } else {
                    "unknown (no filesystem mounted at /)".to_string()
                }
            },
            describe_mount,
        ),
        found.is_some_and(|g| g >= floor),
        format!(
            "{}{what} must hold at least 95% of {} GB ({floor:.0} GB): disks are sold in decimal sizes, df's KiB \
             are converted",
            conversion(size, "GB"),
            num(size.value)
        ),
    )
}

fn accept_data_disk_type(host: &HostReport, kind: DiskKind) -> Acceptance {
    let m = separate_data_disk(host);
    let found_kind = m.and_then(disk_kind);
    let found = match m {
        None => "no data disk apart from the system disk".to_string(),
        Some(m) => match &m.media_source {
            Some(src) => format!("{} (from {src})", describe_mount(m)),
            None => describe_mount(m),
        },
    };
    item(
        host,
        Item::DataDiskType,
        kind.word().into(),
        found,
        found_kind.is_some_and(|k| k >= kind),
        "the data disk must be the kind ordered or faster (nvme > ssd > hdd), as the kernel reports its drive: \
         NVMe by name, otherwise /sys/block/<drive>/queue/rotational"
            .into(),
    )
}

fn accept_rdma(host: &HostReport, rate: Option<&Rate>) -> Acceptance {
    let expected = match rate {
        None => "an RDMA port up".to_string(),
        Some(r) => format!("an RDMA port up at {} Gb/s or more", num(r.gbps)),
    };
    let (found, ok) = match &host.network {
        None => ("unknown (the network was not read)".to_string(), false),
        Some(n) if n.rdma.is_empty() => ("no RDMA device (/sys/class/infiniband)".to_string(), false),
        Some(n) => {
            let ok = n
                .rdma
                .iter()
                .any(|p| port_up(p) && rate.is_none_or(|r| p.rate_gbps.is_some_and(|g| g >= r.gbps)));
            let ports: Vec<String> = n.rdma.iter().map(describe_port).collect();
            (ports.join("; "), ok)
        }
    };
    let written = rate
        .and_then(|r| r.written.as_ref())
        .map(|w| format!("\"{w}\" read as Gb/s; "))
        .unwrap_or_default();
    item(
        host,
        Item::Rdma,
        expected,
        found,
        ok,
        format!(
            "{written}at least one RDMA port (InfiniBand or RoCE) in state ACTIVE{}, from /sys/class/infiniband",
            if rate.is_some() {
                " at the rate ordered or faster"
            } else {
                ""
            }
        ),
    )
}

fn accept_nic_speed(host: &HostReport, rate: &Rate) -> Acceptance {
    let (found, ok) = match &host.network {
        None => ("unknown (the network was not read)".to_string(), false),
        Some(n) if n.interfaces.is_empty() => ("no network interface with a device".to_string(), false),
        Some(n) => {
            let fastest = n
                .interfaces
                .iter()
                .filter_map(|i| i.speed_mbps.map(|s| (s, i)))
                .max_by_key(|(s, _)| *s);
            match fastest {
                None => ("no interface reports a speed".to_string(), false),
                Some((mbps, i)) => (
                    format!(
                        "{} Gb/s at most ({}{})",
                        num(mbps as f64 / 1000.0),
                        i.name,
                        i.driver.as_deref().map(|d| format!(", {d}")).unwrap_or_default()
                    ),
                    mbps as f64 >= rate.gbps * 1000.0,
                ),
            }
        }
    };
    let written = rate
        .written
        .as_ref()
        .map(|w| format!("\"{w}\" read as {} Gb/s; ", num(rate.gbps)))
        .unwrap_or_default();
    item(
        host,
        Item::NicSpeed,
        format!("{} Gb/s", num(rate.gbps)),
        found,
        ok,
        format!(
            "{written}at least one network interface with a device behind it must report the speed ordered or \
             faster in /sys/class/net/<if>/speed (links that are down report none)"
        ),
    )
}

fn accept_container_runtime(host: &HostReport) -> Acceptance {
    let (found, ok) = match gpu_containers(host) {
        Ok(how) => (how, true),
        Err(why) => (why, false),
    };
    item(
        host,
        Item::ContainerRuntime,
        "containers get the GPUs".into(),
        found,
        ok,
        "the Docker Engine answers and has the nvidia runtime registered, or CDI enabled with a spec for \
         nvidia.com/gpu"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::host::{CpuInfo, NetInterface, Network, RdmaPort, Sourced};
    use crate::judge::{AcceptVerdict, accept, parse_order};
    use crate::model::EngineInfo;

    fn host() -> HostReport {
        let mut h = HostReport {
            gpus: (0..4)
                .map(|i| GpuInfo {
                    index: i,
                    name: "NVIDIA A100 80GB PCIe".into(),
                    pcie_gen_max: Some(4),
                    pcie_gen_device_max: Some(4),
                    pcie_gen_host_max: Some(if i == 2 { 3 } else { 4 }),
                    ..GpuInfo::default()
                })
                .collect(),
            driver_cuda: Some(Sourced::new("12.2".parse().unwrap(), "nvml")),
            cpu: Some(CpuInfo {
                model: "AMD EPYC  7T83 64-Core Processor".into(),
                logical: 256,
                physical: Some(128),
                sockets: Some(2),
                numa_nodes: Some(2),
            }),
            mounts: vec![
                Mount {
                    device: "/dev/nvme0n1p2".into(),
                    fstype: "ext4".into(),
                    size_kib: 468_750_000,
                    mount: "/".into(),
                    disk: Some("nvme0n1".into()),
                    media: Some(DiskMedia::Nvme),
                    ..Mount::default()
                },
                Mount {
                    device: "/dev/sdb1".into(),
                    fstype: "xfs".into(),
                    size_kib: 3_750_000_000,
                    mount: "/data".into(),
                    disk: Some("sdb".into()),
                    media: Some(DiskMedia::Ssd),
                    media_source: Some("/sys/block/sdb/queue/rotational".into()),
                    ..Mount::default()
                },
            ],
            network: Some(Network {
                rdma: vec![RdmaPort {
                    device: "mlx5_0".into(),
                    port: 1,
                    link_layer: Some("InfiniBand".into()),
                    state: Some("ACTIVE".into()),
                    rate_gbps: Some(200.0),
                    source: "/sys/class/infiniband/mlx5_0/ports/1".into(),
                }],
                interfaces: vec![NetInterface {
                    name: "ens1f0".into(),
                    speed_mbps: Some(25_000),
                    driver: Some("mlx5_core".into()),
                    operstate: Some("up".into()),
                    source: "/sys/class/net/ens1f0".into(),
                }],
                peermem: Some(true),
            }),
            docker: Some(DockerProbe::Ok {
                engine: EngineInfo {
                    server_version: Some("28.2.2".into()),
                    runtimes: vec!["runc".into(), "nvidia".into()],
                    ..EngineInfo::default()
                },
            }),
            ..HostReport::default()
        };
        let n = h.gpus.len();
        h.topology = Some(Sourced::new(
            Topology {
                gpus: (0..n).map(|i| format!("GPU{i}")).collect(),
                links: (0..n)
                    .map(|i| {
                        (0..n)
                            .map(|j| match (i.min(j), i.max(j)) {
                                (a, b) if a == b => Link::SelfLink,
                                (0, 1) => Link::NvLink(12),
                                _ => Link::Pxb,
                            })
                            .collect()
                    })
                    .collect(),
                ..Topology::default()
            },
            "nvidia-smi topo -m",
        ));
        h
    }

    fn verdicts(host: &HostReport, order: &str) -> Vec<(&'static str, AcceptVerdict, String)> {
        let e = parse_order("order.toml", order).unwrap();
        accept(Db::embedded().unwrap(), host, &e)
            .unwrap()
            .into_iter()
            .map(|a| (a.item, a.verdict, a.found))
            .collect()
    }

    #[test]
    fn each_layout_item_passes_on_the_fact_and_fails_without_it() {
        use AcceptVerdict::*;
        let h = host();
        let order = "cuda = \"12.2\"\npcie_gen = 3\nnvlink = true\ntopology = \"pcie\"\ncpu_model = \"2x EPYC 7T83\"\n\
                     system_disk = 480\ndata_disk = \"3.84TB\"\ndata_disk_type = \"ssd\"\nrdma = \"200G\"\nnic_speed = \"25G\"\n\
                     container_runtime = true\n";
        let got = verdicts(&h, order);
        let keys: Vec<&str> = got.iter().map(|(k, _, _)| *k).collect();
        // In the order acceptance reports them, the sockets read from "2x".
        assert_eq!(
            keys,
            [
                "cuda",
                "pcie_gen",
                "nvlink",
                "topology",
                "cpu_model",
                "sockets",
                "system_disk",
                "data_disk",
                "data_disk_type",
                "rdma",
                "nic_speed",
                "container_runtime"
            ]
        );
        let failed: Vec<_> = got.iter().filter(|(_, v, _)| *v != Pass).collect();
        // NVLink on one pair of six is not NVLink between the GPUs.
        assert_eq!(failed.len(), 1, "{got:#?}");
        assert_eq!(failed[0].0, "nvlink");
        assert!(
            failed[0].2.starts_with("5 of 6 pairs short: GPU0-GPU2 PXB"),
            "{}",
            failed[0].2
        );

        // One step past each fact fails.
        let order = "cuda = \"12.4\"\npcie_gen = 4\ntopology = \"nvswitch\"\ncpu_model = \"EPYC 7763\"\nsockets = 4\n\
                     system_disk = 1000\ndata_disk = \"8TB\"\ndata_disk_type = \"nvme\"\nrdma = \"400G\"\nnic_speed = \"100G\"\n";
        let got = verdicts(&h, order);
        assert!(got.iter().all(|(_, v, _)| *v == Fail), "{got:#?}");
        let found = |k: &str| got.iter().find(|(x, _, _)| *x == k).unwrap().2.clone();
        assert_eq!(found("pcie_gen"), "Gen3 at most on GPU 2 (card Gen4, slot Gen3)");
        assert_eq!(found("cuda"), "12.2 (nvml)");
        assert_eq!(found("topology"), "NVSwitches unknown (lspci gave no answer)");
        assert_eq!(
            found("data_disk_type"),
            "/data (/dev/sdb1, 3840 GB, ssd) (from /sys/block/sdb/queue/rotational)"
        );
        assert_eq!(found("nic_speed"), "25 Gb/s at most (ens1f0, mlx5_core)");

        // A host that says nothing fails every item, "unknown" where it is.
        let got = verdicts(
            &HostReport::default(),
            "cuda = \"12.2\"\npcie_gen = 3\nnvlink = 2\ntopology = \"pcie\"\ncpu_model = \"EPYC\"\nsockets = 1\n\
             system_disk = 1\ndata_disk = 1\ndata_disk_type = \"hdd\"\nrdma = true\nnic_speed = 1\ncontainer_runtime = true\n",
        );
        assert!(got.iter().all(|(_, v, _)| *v == Fail), "{got:#?}");
    }

    #[test]
    fn cpu_models_match_by_words_or_pattern() {
        let h = host();
        for (words, ok) in [
            ("EPYC 7T83", true),
            ("epyc   7t83", true),
            ("AMD EPYC*64-Core*", true),
            ("Xeon", false),
            ("EPYC 7T8", true),
            ("*7763*", false),
            ("EPYC*", true),
            ("epyc 7?83", true),
        ] {
            let got = verdicts(&h, &format!("cpu_model = \"{words}\"\n"));
            assert_eq!(got[0].1 == AcceptVerdict::Pass, ok, "{words}: {got:?}");
        }
    }

    #[test]
    fn the_data_disk_is_another_drive() {
        let mut h = host();
        // The same drive as the system, partitioned: no data disk.
        h.mounts[1].disk = Some("nvme0n1".into());
        let got = verdicts(&h, "data_disk = 100\n");
        assert_eq!(got[0].1, AcceptVerdict::Fail);
        assert_eq!(got[0].2, "no data disk apart from the system disk");
    }
}
