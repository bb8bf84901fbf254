//! Acceptance: the delivered host against what was ordered, one item at a time.
//!
//! Owns: each item's comparison, the tolerance or unit conversion it applies (said in its
//! `rule`), and which `GPUENV_*` override can decide it ([`override_for`]). An item decided
//! from an overridden fact is `overridden`, never `pass`: an override says what someone
//! typed, not what the vendor delivered, so an order with such an item is not accepted.
//! The measured items (`bench`, the floors) are [`super::bench`]'s; every function here that
//! judges an order includes them, so that an order asking for figures is never accepted on
//! the host's facts alone. Must not: probe, print, or read the order (that is
//! [`super::order`]).

use serde::{Deserialize, Serialize};

use super::bench::Measured;
use super::order::{Expect, Item, Size};
use crate::bench::BenchDoc;
use crate::db::Db;
use crate::host::HostReport;
use crate::model::DriverReq;

/// The share of a size ordered that must be there. The driver reserves some GPU memory (an
/// 80 GB H100 shows 79.6 GiB), the kernel some system memory (a 1 TB server shows about
/// 1007 GiB), and filesystems their metadata; 5% covers each on any size sold.
pub(super) const TOLERANCE: f64 = 0.95;

/// How an acceptance item came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AcceptVerdict {
    /// The host has what was ordered.
    Pass,
    /// It does not, or the fact is unknown.
    Fail,
    /// The fact that would decide it was replaced by a `GPUENV_*` override: no evidence.
    Overridden,
}

fn item_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::model::known::one_of(
        d,
        "acceptance item",
        Item::ALL
            .map(Item::key)
            .into_iter()
            .chain(super::health::Health::ALL.map(super::health::Health::key)),
    )
}

fn override_var<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
    crate::model::known::maybe_one_of(d, "override variable", crate::host::overrides::VARIABLES)
}

/// One acceptance item.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Acceptance {
    /// `gpu`, `gpus`, `gpu_memory`, `driver`, `cpus`, `memory`, `disk`..., and the health
    /// items every acceptance holds (`health-ecc`, `health-mig`...).
    #[serde(deserialize_with = "item_key")]
    pub item: crate::model::known::Word,
    /// What was ordered.
    pub expected: String,
    /// What the host has.
    pub found: String,
    /// Whether it matches on evidence: `verdict` is `pass`.
    pub pass: bool,
    /// `pass`, `fail` or `overridden`.
    pub verdict: AcceptVerdict,
    /// The variable that replaced the deciding fact, when `verdict` is `overridden`.
    #[serde(
        default,
        deserialize_with = "override_var",
        skip_serializing_if = "Option::is_none"
    )]
    pub overridden_by: Option<crate::model::known::Word>,
    /// Where the order relaxed a health item that does not hold or is unknown
    /// (`order.toml allows \`mig\``); such an item passes, and says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed_by: Option<String>,
    /// How it is judged: the comparison, its tolerance and any unit conversion.
    pub rule: String,
}

/// How many items failed, and how many were decided by an override: what stands between
/// the order and "accepted".
pub fn tally(items: &[Acceptance]) -> (usize, usize) {
    let count = |v: AcceptVerdict| items.iter().filter(|x| x.verdict == v).count();
    (count(AcceptVerdict::Fail), count(AcceptVerdict::Overridden))
}

/// The `GPUENV_*` variable whose value can decide `item`, if any.
pub fn override_for(item: Item) -> Option<&'static str> {
    match item {
        // The GPU list replaced, its links and PCIe facts describe other GPUs.
        Item::Gpu | Item::Gpus | Item::GpuMemory | Item::PcieGen | Item::Nvlink | Item::Topology => {
            Some("GPUENV_GPUS")
        }
        // The driver's CUDA follows the driver.
        Item::Driver | Item::Cuda => Some("GPUENV_DRIVER"),
        Item::Cpus => Some("GPUENV_CPUS"),
        Item::Memory => Some("GPUENV_MEMORY_GIB"),
        Item::Disk
        | Item::CpuModel
        | Item::Sockets
        | Item::SystemDisk
        | Item::DataDisk
        | Item::DataDiskType
        | Item::Rdma
        | Item::NicSpeed
        | Item::ContainerRuntime => None,
        // Measured, never overridable.
        Item::Bench
        | Item::MinMatmulTflops
        | Item::MinMemoryBandwidth
        | Item::MinNcclBusbw
        | Item::MinP2pBandwidth
        | Item::MinDiskRead
        | Item::MinDiskWrite
        | Item::MinNetwork => None,
    }
}

pub(super) fn item(
    host: &HostReport,
    which: Item,
    expected: String,
    found: String,
    holds: bool,
    rule: String,
) -> Acceptance {
    let overridden_by = override_for(which).filter(|var| host.overridden(var));
    let verdict = match (overridden_by, holds) {
        (Some(_), _) => AcceptVerdict::Overridden,
        (None, true) => AcceptVerdict::Pass,
        (None, false) => AcceptVerdict::Fail,
    };
    Acceptance {
        item: which.key(),
        expected,
        found,
        pass: verdict == AcceptVerdict::Pass,
        verdict,
        overridden_by,
        relaxed_by: None,
        rule,
    }
}

/// A number with at most `places` decimals and no trailing zeros: `80`, `1979.12`.
fn num_to(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

pub(super) fn num(v: f64) -> String {
    num_to(v, 2)
}

/// `"1TB" read as 1024 GiB; ` when the order wrote a unit.
pub(super) fn conversion(size: &Size, unit: &str) -> String {
    match &size.written {
        Some(w) => format!("\"{w}\" read as {} {unit}; ", num(size.value)),
        None => String::new(),
    }
}

pub(super) fn kib_to_gb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e9
}

/// Filesystems that hold data (not memory-backed, not views of others).
fn real_filesystem(fstype: &str) -> bool {
    !matches!(
        fstype,
        "tmpfs" | "devtmpfs" | "overlay" | "squashfs" | "proc" | "sysfs" | "efivarfs"
    )
}

/// Checks the host against the order. An unknown fact fails its item; a fact replaced by
/// an override makes its item `overridden`. An order that asks for measured figures gets
/// the item saying none were given ([`accept_measured`] takes them). The error is a GPU
/// name or a driver requirement that cannot be read, naming where it was written.
pub fn accept(db: &Db, host: &HostReport, e: &Expect) -> Result<Vec<Acceptance>, String> {
    order_items(db, host, e, None)
}

/// The order's items: the host's facts, then the measured items against `measured`.
fn order_items(
    db: &Db,
    host: &HostReport,
    e: &Expect,
    measured: Option<&Measured>,
) -> Result<Vec<Acceptance>, String> {
    let mut out = Vec::new();
    if let Some(want) = &e.gpu {
        out.push(accept_gpu(db, host, e, want)?);
    }
    if let Some(n) = e.gpus {
        out.push(accept_gpus(host, n));
    }
    if let Some(size) = &e.gpu_memory {
        out.push(accept_gpu_memory(host, size));
    }
    if let Some(spec) = &e.driver {
        out.push(accept_driver(host, e, spec)?);
    }
    if let Some(n) = e.cpus {
        out.push(accept_cpus(host, n));
    }
    if let Some(size) = &e.memory {
        out.push(accept_memory(host, size));
    }
    if let Some(size) = &e.disk {
        out.push(accept_disk(host, size));
    }
    out.extend(super::layout::accept_layout(host, e));
    out.extend(super::bench::items(e, measured, host.gpus.len()));
    out.sort_by_key(|a| Item::ALL.iter().position(|i| i.key() == a.item));
    Ok(out)
}

/// [`accept`], then the health items every order holds implicitly (a sick GPU is not what
/// was bought), relaxed where the order's `health_allow` says. No order, no acceptance.
pub fn accept_with_health(db: &Db, host: &HostReport, e: &Expect) -> Result<Vec<Acceptance>, String> {
    accept_measured(db, host, e, None).map(|a| a.items)
}

/// What `check` decides: every item, and the bench results judged when there are any.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The order's items (the host's facts, then the measured items), then the health
    /// items.
    pub items: Vec<Acceptance>,
    /// The bench results, each figure against its datasheet and its peers; they decide
    /// the measured items when the order asks for figures, and are only shown otherwise.
    pub bench: Option<Measured>,
}

/// [`accept_with_health`] with the machine's bench results, when there are any: the order's
/// measured items (`bench = true`, the floors) are judged on them, and without them an
/// order that asks for figures is not accepted. The results must be this machine's (see
/// [`super::bench::same_machine`]); judging them takes each GPU's PCIe link from `host`.
pub fn accept_measured(
    db: &Db,
    host: &HostReport,
    e: &Expect,
    bench: Option<&BenchDoc>,
) -> Result<Accepted, String> {
    let links = crate::bench::links_from_host(&host.gpus);
    let measured = bench.map(|d| Measured::judge(db, d, &links, e.wants_bench()));
    let mut items = order_items(db, host, e, measured.as_ref())?;
    if !e.is_empty() {
        items.extend(super::health::health_items(
            host,
            &db.xids,
            &e.health_allow,
            &e.health_allow_origin(),
        ));
    }
    Ok(Accepted {
        items,
        bench: measured,
    })
}

/// The GPU model ordered: every GPU one the name covers, as many of each as counted.
fn accept_gpu(db: &Db, host: &HostReport, e: &Expect, want: &str) -> Result<Acceptance, String> {
    let names: Vec<&str> = host.gpus.iter().map(|g| g.name.as_str()).collect();
    // Read as `--gpu` is: a name may cover several records (`A100`: 40 and 80 GB, SXM
    // and PCIe), and any of them is what was ordered; a count (`8x H100`) must be there.
    let wanted = db
        .gpus_written(want)
        .map_err(|err| format!("{}: {err}", e.origin(Item::Gpu)))?;
    // The reported memory tells boards of one name apart (a 16 GB RTX 4060 Ti ordered, an
    // 8 GB one delivered: nvidia-smi names both alike).
    let covered_by = |g: &crate::host::GpuInfo| {
        db.gpu_reported(&g.name, g.memory_total_mib)
            .ok()
            .and_then(|rec| wanted.iter().position(|(m, _)| m.covers(&rec.id)))
    };
    let mut per_entry = vec![0u32; wanted.len()];
    let mut all_covered = !host.gpus.is_empty();
    for g in &host.gpus {
        match covered_by(g) {
            Some(i) => per_entry[i] += 1,
            None => all_covered = false,
        }
    }
    let counts_met = wanted.iter().zip(&per_entry).all(|((_, n), got)| got >= n);
    let found = if names.is_empty() {
        "no GPU".to_string()
    } else {
        summarize(&names)
    };
    let covers: Vec<String> = wanted
        .iter()
        .map(|(m, n)| {
            let names: Vec<&str> = m.records.iter().map(|g| g.name.as_str()).collect();
            let count = if *n > 1 { format!("{n}x ") } else { String::new() };
            if names.len() == 1 {
                format!("{count}{}", names[0])
            } else {
                format!("{count}any of {}", names.join(", "))
            }
        })
        .collect();
    Ok(item(
        host,
        Item::Gpu,
        want.trim().to_string(),
        found,
        all_covered && counts_met,
        format!(
            "every GPU must be a model the name covers in compat-db ({}), names read by their words",
            covers.join("; ")
        ),
    ))
}

/// The number of GPUs.
fn accept_gpus(host: &HostReport, n: u32) -> Acceptance {
    item(
        host,
        Item::Gpus,
        n.to_string(),
        host.gpus.len().to_string(),
        host.gpus.len() as u64 >= u64::from(n),
        "at least the number ordered".into(),
    )
}

/// Memory per GPU, on the smallest.
fn accept_gpu_memory(host: &HostReport, size: &Size) -> Acceptance {
    let min = host.gpus.iter().map(|g| g.memory_total_mib).min().flatten();
    let found_gib = min.map(|m| m as f64 / 1024.0);
    let floor = size.value * TOLERANCE;
    item(
        host,
        Item::GpuMemory,
        format!("{} GB per GPU", num(size.value)),
        found_gib.map_or("unknown".to_string(), |g| format!("{g:.1} GiB (smallest GPU)")),
        found_gib.is_some_and(|g| g >= floor),
        format!(
            "{}at least 95% of {} GiB ({floor:.1} GiB) on the smallest GPU: GPU memory is sold in binary \
             sizes (80 GB = 80 GiB) and the driver reserves some",
            conversion(size, "GB"),
            num(size.value)
        ),
    )
}

/// The driver, against a branch or a version requirement.
fn accept_driver(host: &HostReport, e: &Expect, spec: &str) -> Result<Acceptance, String> {
    let req: DriverReq = spec
        .parse()
        .map_err(|err| format!("{}: {err}", e.origin(Item::Driver)))?;
    let found = host.driver.as_ref().map(|d| &d.value);
    Ok(item(
        host,
        Item::Driver,
        req.to_string(),
        found.map_or_else(|| "no driver".into(), |d| d.to_string()),
        found.is_some_and(|d| req.contains(d)),
        format!(
            "the driver must be {}: a branch (535) admits any of its releases, versions compare by their numbers",
            req.describe()
        ),
    ))
}

/// Logical CPUs.
fn accept_cpus(host: &HostReport, n: u32) -> Acceptance {
    let found = host.cpu.as_ref().map(|c| c.logical).filter(|&c| c > 0);
    item(
        host,
        Item::Cpus,
        n.to_string(),
        found.map_or("unknown".into(), |c| c.to_string()),
        found.is_some_and(|c| c >= n),
        "at least the number ordered, in logical CPUs as nproc counts them".into(),
    )
}

/// System memory.
fn accept_memory(host: &HostReport, size: &Size) -> Acceptance {
    let found = host.memory_kib.map(|k| k as f64 / (1024.0 * 1024.0));
    let floor = size.value * TOLERANCE;
    item(
        host,
        Item::Memory,
        format!("{} GiB", num(size.value)),
        found.map_or("unknown".into(), |g| format!("{} GiB", num_to(g, 1))),
        found.is_some_and(|g| g >= floor),
        format!(
            "{}at least 95% of {} GiB ({} GiB): memory is sold in binary sizes (1 TB = 1024 GiB) \
             and the kernel keeps some for itself",
            conversion(size, "GiB"),
            num(size.value),
            num_to(floor, 1)
        ),
    )
}

/// Disk, over all real filesystems.
fn accept_disk(host: &HostReport, size: &Size) -> Acceptance {
    let real: Vec<_> = host
        .mounts
        .iter()
        .filter(|m| real_filesystem(&m.fstype))
        .collect();
    let found = (!real.is_empty()).then(|| kib_to_gb(real.iter().map(|m| m.size_kib).sum()));
    let floor = size.value * TOLERANCE;
    item(
        host,
        Item::Disk,
        format!("{} GB", num(size.value)),
        found.map_or("unknown (no filesystem information)".into(), |g| {
            format!("{g:.0} GB")
        }),
        found.is_some_and(|g| g >= floor),
        format!(
            "{}at least 95% of {} GB ({floor:.0} GB) over all real filesystems: disks are sold in \
             decimal sizes (1 TB = 1000 GB), df's KiB are converted",
            conversion(size, "GB"),
            num(size.value)
        ),
    )
}

fn summarize(names: &[&str]) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    for n in names {
        match out.iter_mut().find(|(x, _)| x == n) {
            Some((_, c)) => *c += 1,
            None => out.push((n.to_string(), 1)),
        }
    }
    out.iter()
        .map(|(n, c)| format!("{c}x {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{CpuInfo, GpuInfo, Mount, Sourced};
    use crate::judge::order::parse_order;

    fn h100_host(n: u32) -> HostReport {
        HostReport {
            gpus: (0..n)
                .map(|i| GpuInfo {
                    index: i,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    memory_total_mib: Some(81559),
                    ..GpuInfo::default()
                })
                .collect(),
            gpus_source: Some("nvml".into()),
            driver: Some(Sourced::new("550.90.07".parse().unwrap(), "nvml")),
            cpu: Some(CpuInfo {
                logical: 64,
                ..CpuInfo::default()
            }),
            // What a "1 TB" server shows: 1007 GiB.
            memory_kib: Some(1007 * 1024 * 1024),
            mounts: vec![
                Mount {
                    device: "/dev/nvme0n1p2".into(),
                    fstype: "ext4".into(),
                    size_kib: 468_750_000,
                    avail_kib: 400_000_000,
                    mount: "/".into(),
                    ..Mount::default()
                },
                Mount {
                    device: "tmpfs".into(),
                    fstype: "tmpfs".into(),
                    size_kib: 500_000_000,
                    avail_kib: 500_000_000,
                    mount: "/dev/shm".into(),
                    ..Mount::default()
                },
            ],
            ..HostReport::default()
        }
    }

    /// `GPUENV_GPUS` read as the command line reads it.
    fn gpus_read(text: &str) -> Result<Vec<(String, u32)>, String> {
        Db::embedded()
            .unwrap()
            .gpus_written(text)
            .map(|v| v.into_iter().map(|(m, n)| (m.chosen.name.clone(), n)).collect())
            .map_err(|e| e.to_string())
    }

    fn run(host: &HostReport, order: &str) -> Vec<Acceptance> {
        let e = parse_order("order.toml", order).unwrap();
        accept(Db::embedded().unwrap(), host, &e).unwrap()
    }

    fn by<'a>(items: &'a [Acceptance], key: &str) -> &'a Acceptance {
        items.iter().find(|a| a.item == key).unwrap()
    }

    #[test]
    fn tolerances_and_conversions_are_said() {
        let host = h100_host(8);
        let items = run(
            &host,
            "gpu_memory = \"80GB\"\nmemory = \"1TB\"\ndisk = \"0.5TB\"\ncpus = 64\n",
        );
        let mem = by(&items, "memory");
        assert_eq!(mem.verdict, AcceptVerdict::Pass);
        assert_eq!(mem.expected, "1024 GiB");
        assert_eq!(mem.found, "1007 GiB");
        assert_eq!(
            mem.rule,
            "\"1TB\" read as 1024 GiB; at least 95% of 1024 GiB (972.8 GiB): memory is sold in binary sizes \
             (1 TB = 1024 GiB) and the kernel keeps some for itself"
        );
        let gm = by(&items, "gpu_memory");
        assert_eq!(gm.verdict, AcceptVerdict::Pass);
        assert_eq!(gm.found, "79.6 GiB (smallest GPU)");
        assert!(
            gm.rule
                .starts_with("\"80GB\" read as 80 GB; at least 95% of 80 GiB (76.0 GiB)"),
            "{}",
            gm.rule
        );
        // 480 GB of real disk against 500 GB ordered: within 5%.
        let disk = by(&items, "disk");
        assert_eq!(disk.verdict, AcceptVerdict::Pass, "{disk:?}");
        assert_eq!(disk.found, "480 GB");
        assert!(
            disk.rule.contains("(475 GB) over all real filesystems"),
            "{}",
            disk.rule
        );
        assert!(!by(&items, "cpus").rule.is_empty());

        // Just outside the tolerance fails.
        let items = run(&host, "memory = 1061\ndisk = 506\n");
        assert_eq!(by(&items, "memory").verdict, AcceptVerdict::Fail);
        assert_eq!(by(&items, "disk").verdict, AcceptVerdict::Fail);
        let mem = by(&items, "memory");
        assert!(
            mem.rule.starts_with("at least 95% of 1061 GiB (1007.9 GiB)"),
            "{}",
            mem.rule
        );
    }

    #[test]
    fn an_unknown_fact_fails() {
        let host = HostReport::default();
        let items = run(
            &host,
            "gpus = 1\ngpu_memory = 24\ncpus = 8\nmemory = 64\ndisk = 100\n",
        );
        for a in &items {
            assert_eq!(a.verdict, AcceptVerdict::Fail, "{a:?}");
            assert!(!a.pass);
        }
        assert_eq!(by(&items, "gpu_memory").found, "unknown");
        assert_eq!(by(&items, "disk").found, "unknown (no filesystem information)");
        assert_eq!(by(&items, "cpus").found, "unknown");
    }

    #[test]
    fn overridden_facts_are_not_evidence() {
        let mut host = h100_host(0);
        crate::host::overrides::apply(
            &mut host,
            |k| match k {
                "GPUENV_GPUS" => Some("H100 SXMx8".into()),
                "GPUENV_CPUS" => Some("64".into()),
                "GPUENV_DRIVER" => Some("550.54.14".into()),
                _ => None,
            },
            &gpus_read,
        )
        .unwrap();
        let items = run(
            &host,
            "gpu = \"H100 SXM\"\ngpus = 8\ngpu_memory = 80\ndriver = \">=535\"\ncpus = 64\nmemory = 512\ndisk = 400\n",
        );
        let verdicts: Vec<(&str, AcceptVerdict, Option<&str>)> = items
            .iter()
            .map(|a| (a.item, a.verdict, a.overridden_by))
            .collect();
        use AcceptVerdict::*;
        assert_eq!(
            verdicts,
            [
                ("gpu", Overridden, Some("GPUENV_GPUS")),
                ("gpus", Overridden, Some("GPUENV_GPUS")),
                ("gpu_memory", Overridden, Some("GPUENV_GPUS")),
                ("driver", Overridden, Some("GPUENV_DRIVER")),
                ("cpus", Overridden, Some("GPUENV_CPUS")),
                ("memory", Pass, None),
                ("disk", Pass, None),
            ]
        );
        assert!(items.iter().filter(|a| a.verdict == Overridden).all(|a| !a.pass));
        // Memory by override too.
        crate::host::overrides::apply(
            &mut host,
            |k| (k == "GPUENV_MEMORY_GIB").then(|| "2048".into()),
            &gpus_read,
        )
        .unwrap();
        let items = run(&host, "memory = \"2TB\"\n");
        assert_eq!(items[0].verdict, Overridden);
        assert_eq!(items[0].overridden_by, Some("GPUENV_MEMORY_GIB"));
    }

    #[test]
    fn every_override_named_is_one_gpuenv_reads() {
        for i in Item::ALL {
            if let Some(var) = override_for(i) {
                assert!(crate::host::overrides::VARIABLES.contains(&var), "{var}");
            }
        }
    }

    #[test]
    fn a_bad_gpu_or_driver_names_where_it_was_written() {
        let host = h100_host(1);
        let e = parse_order("o.toml", "\ngpu = \"Z9000\"\n").unwrap();
        let err = accept(Db::embedded().unwrap(), &host, &e).unwrap_err();
        assert!(err.starts_with("order `o.toml` line 2, key `gpu`: "), "{err}");
        let mut e = Expect::default();
        e.set_flag(Item::Driver, "~~535").unwrap();
        let err = accept(Db::embedded().unwrap(), &host, &e).unwrap_err();
        assert!(err.starts_with("--expect-driver: "), "{err}");
    }
}
