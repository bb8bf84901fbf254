//! A host-side bench, start to end: which measurements run, at which sizes, in which
//! order, and what is listed as skipped and why.
//!
//! Owns: the sizes of `--quick` and `--full` ([`Sizing::sizes`]), checking every input
//! before anything is measured, and the order of the parts (memory, disk by gpuenv, disk
//! by fio, network over TCP, network over RDMA by `ib_write_bw`, downloads). Must not: print, probe the host for anything but what it
//! is told to measure, or turn a failed measurement into a figure (a failure is a line of
//! `skipped`).
//!
//! Bad input (a `--path` that cannot be used, a peer that is not `HOST[:PORT]`) stops the
//! run before anything is written. A measurement that fails on the machine (fio exits
//! with an error, a download is refused) is listed in `skipped` with its reason, and the
//! rest still runs: a bench on delivery is worth its other figures.

use std::path::PathBuf;
use std::time::Duration;

use super::Figure;
use super::host::{HostBenchError, disk, download, fio, memory, net, rdma, registry};
use crate::host::system::System;

/// How long and how large.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sizing {
    /// Minutes in all: the default.
    #[default]
    Quick,
    /// Larger files, longer runs: steadier figures.
    Full,
}

/// The sizes of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes {
    /// The disk test file.
    pub disk_bytes: u64,
    /// How long the random reads run.
    pub rand_seconds: u64,
    /// Source and destination of the memory copy, all threads together.
    pub memory_bytes: u64,
    /// Timed copies of the memory test.
    pub memory_repeats: u32,
    /// How long the TCP streams send.
    pub net_seconds: u64,
    /// TCP streams.
    pub streams: u32,
    /// Timed round trips.
    pub pings: u32,
    /// Bytes read from each download URL, at most.
    pub download_bytes: u64,
    /// Seconds spent reading each download URL, at most.
    pub download_seconds: u64,
}

impl Sizing {
    /// `--quick`: a 1 GiB disk file (O_DIRECT, so the page cache serves none of it) and
    /// 5 s of random reads; 2 GiB of memory copied 5 times; 4 streams for 5 s; 256 MiB or
    /// 20 s of each download. `--full`: 8 GiB, 20 s; 8 GiB copied 10 times; 8 streams for
    /// 15 s; 2 GiB or 60 s.
    pub fn sizes(self) -> Sizes {
        match self {
            Sizing::Quick => Sizes {
                disk_bytes: 1 << 30,
                rand_seconds: 5,
                memory_bytes: 2 << 30,
                memory_repeats: 5,
                net_seconds: 5,
                streams: 4,
                pings: 200,
                download_bytes: 256 << 20,
                download_seconds: 20,
            },
            Sizing::Full => Sizes {
                disk_bytes: 8 << 30,
                rand_seconds: 20,
                memory_bytes: 8 << 30,
                memory_repeats: 10,
                net_seconds: 15,
                streams: 8,
                pings: 1000,
                download_bytes: 2 << 30,
                download_seconds: 60,
            },
        }
    }
}

/// What a host bench measures.
#[derive(Debug, Clone)]
pub struct HostPlan {
    /// Sizes and durations.
    pub sizes: Sizes,
    /// The directory of the disk test, and where it came from (`--path`, or the data disk
    /// `doctor` names); `None` with the reason when there is none.
    pub disk: Result<(PathBuf, String), String>,
    /// Whether the disk test may write to the system disk.
    pub allow_system_disk: bool,
    /// The peer of the network test (`None`: loopback).
    pub peer: Option<String>,
    /// Images whose largest layer's download speed is measured, from their registries.
    pub images: Vec<String>,
    /// Registries spoken to over plain HTTP (`--insecure-registry`).
    pub insecure: Vec<String>,
    /// `--rdma-device DEV[:PORT]` for `ib_write_bw` to the peer (`None`: the first active
    /// port under `/sys/class/infiniband`).
    pub rdma_device: Option<String>,
    /// URLs whose download speed is measured.
    pub downloads: Vec<String>,
}

/// What a host bench gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostOutcome {
    /// Every figure measured.
    pub figures: Vec<Figure>,
    /// What was not measured, and why.
    pub skipped: Vec<String>,
}

/// Runs a host bench; `system` runs the engines (fio), so a recording captures their raw
/// output. Bad input is refused before anything runs.
pub fn run_host(plan: &HostPlan, system: &dyn System) -> Result<HostOutcome, HostBenchError> {
    let s = &plan.sizes;
    let mut out = HostOutcome::default();
    let disk_plan = match &plan.disk {
        Ok((dir, _)) => {
            let p = disk::DiskPlan {
                dir: dir.clone(),
                file_bytes: s.disk_bytes,
                rand_duration: Duration::from_secs(s.rand_seconds),
                allow_system_disk: plan.allow_system_disk,
            };
            disk::check(&p)?;
            Some(p)
        }
        Err(why) => {
            out.skipped.push(format!("disk: {why}"));
            None
        }
    };
    if let Some(peer) = &plan.peer {
        net::resolve(peer, net::DEFAULT_PORT)?;
    }
    for image in &plan.images {
        registry::check(image)?;
    }
    if let Some(dev) = &plan.rdma_device {
        rdma::parse_device(dev).map_err(HostBenchError::Input)?;
    }

    let keep = |out: &mut HostOutcome, what: &str, r: Result<Vec<Figure>, HostBenchError>| match r {
        Ok(f) => {
            out.figures.extend(f);
            Ok(())
        }
        Err(HostBenchError::Interrupted(sig)) => Err(HostBenchError::Interrupted(sig)),
        Err(e) => {
            out.skipped.push(format!("{what}: {e}"));
            Ok(())
        }
    };

    let mem = memory::measure(&memory::MemoryPlan {
        total_bytes: s.memory_bytes,
        threads: 0,
        repeats: s.memory_repeats,
    })
    .map(|f| vec![f]);
    keep(&mut out, "host memory", mem)?;

    if let Some(p) = &disk_plan {
        let measured = disk::measure(p).map(|(f, _)| f);
        keep(&mut out, "disk (gpuenv)", measured)?;
        // fio's file is the same size; the free space was checked for one file at a time.
        match fio::measure(system, &p.dir, s.disk_bytes, s.rand_seconds) {
            Ok(f) => out.figures.extend(f),
            Err(fio::FioSkip::NotInstalled) => out
                .skipped
                .push("disk (fio): fio is not installed; gpuenv's own figures stand".into()),
            Err(fio::FioSkip::Failed(why)) => out.skipped.push(format!("disk (fio): {why}")),
        }
        if let Some(sig) = crate::interrupt::requested() {
            return Err(HostBenchError::Interrupted(sig));
        }
    }

    let peer_plan = net::PeerPlan {
        peer: plan.peer.clone().unwrap_or_default(),
        streams: s.streams,
        duration: Duration::from_secs(s.net_seconds),
        pings: s.pings,
    };
    let measured = match &plan.peer {
        Some(_) => net::measure(&peer_plan),
        None => net::measure_loopback(&peer_plan),
    };
    keep(&mut out, "network", measured)?;
    match &plan.peer {
        // Between two nodes: the listener starts the server side, this side the client.
        Some(peer) => {
            let measured = rdma::measure(
                system,
                &rdma::ClientPlan {
                    peer: peer.clone(),
                    seconds: s.net_seconds,
                    device: plan.rdma_device.clone(),
                    program: rdma::PROGRAM.into(),
                },
            );
            if let Some(sig) = crate::interrupt::requested() {
                return Err(HostBenchError::Interrupted(sig));
            }
            match measured {
                Ok(f) => out.figures.push(f),
                Err(why) => out.skipped.push(format!("network (RDMA): {why}")),
            }
        }
        None => out.skipped.push(
            "network (RDMA): ib_write_bw measures between two nodes; give --peer HOST where `gpuenv bench net --listen` runs"
                .into(),
        ),
    }

    for url in &plan.downloads {
        let measured = download::measure(&download::DownloadPlan {
            url: url.clone(),
            max_bytes: s.download_bytes,
            max_time: Duration::from_secs(s.download_seconds),
        })
        .map(|f| vec![f]);
        keep(&mut out, "download", measured)?;
    }
    for image in &plan.images {
        let measured = registry::measure(&registry::ImagePlan {
            image: image.clone(),
            max_bytes: s.download_bytes,
            max_time: Duration::from_secs(s.download_seconds),
            insecure: plan.insecure.clone(),
        })
        .map(|f| vec![f]);
        keep(&mut out, "download (registry)", measured)?;
    }
    Ok(out)
}
