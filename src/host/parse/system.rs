//! glibc, CPUs, memory and filesystems (`/etc/os-release`, which images hold too, is read
//! by [`crate::formats`]).

use std::collections::BTreeSet;

use super::dotted_prefix;
use crate::host::types::{CpuInfo, Mount};
use crate::model::GlibcVersion;

/// The glibc version from `ldd --version`: the last word of the first line,
/// `ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35` -> `2.35`. `None` for musl (Alpine), whose
/// `ldd` prints `musl libc` and no glibc version.
pub fn ldd_version(text: &str) -> Option<GlibcVersion> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if !first.starts_with("ldd") {
        return None;
    }
    first.split_whitespace().last()?.parse().ok()
}

/// The glibc version from `getconf GNU_LIBC_VERSION`: `glibc 2.35`.
pub fn getconf_glibc(text: &str) -> Option<GlibcVersion> {
    let rest = text.trim().strip_prefix("glibc")?;
    let rest = rest.trim();
    let version = dotted_prefix(rest);
    (version.len() == rest.len()).then_some(())?;
    version.parse().ok()
}

/// Parses `/proc/cpuinfo`.
///
/// - `model`: x86's `model name`; on Arm, which has none, the `Hardware` line where the
///   kernel gives one, else `CPU implementer`/`CPU part` as written (`implementer 0x41
///   part 0xd4f`); empty when there is nothing.
/// - `logical`: the number of `processor` entries.
/// - `physical`: distinct (`physical id`, `core id`) pairs, where cpuinfo lists them.
/// - `sockets`: distinct `physical id`s, where cpuinfo lists them.
///
/// Arm kernels list neither `physical id` nor `core id`: `physical` and `sockets` are then
/// `None` rather than a guess from the logical count.
pub fn cpuinfo(text: &str) -> CpuInfo {
    let mut logical = 0u32;
    let mut model_name = None;
    let mut hardware = None;
    let mut implementer = None;
    let mut part = None;
    let mut cores = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    // The physical and core ids of the processor entry being read.
    let mut physical_id: Option<&str> = None;
    let mut core_id: Option<&str> = None;
    let mut finish = |physical_id: &mut Option<&str>, core_id: &mut Option<&str>| {
        if let Some(p) = physical_id.take() {
            sockets.insert(p.to_string());
            if let Some(c) = core_id.take() {
                cores.insert((p.to_string(), c.to_string()));
            }
        }
        *core_id = None;
    };
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            if line.trim().is_empty() {
                finish(&mut physical_id, &mut core_id);
            }
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "processor" => {
                finish(&mut physical_id, &mut core_id);
                logical = logical.saturating_add(1);
            }
            "model name" if model_name.is_none() && !value.is_empty() => model_name = Some(value),
            "Hardware" if hardware.is_none() && !value.is_empty() => hardware = Some(value),
            "CPU implementer" if implementer.is_none() => implementer = Some(value),
            "CPU part" if part.is_none() => part = Some(value),
            "physical id" => physical_id = Some(value),
            "core id" => core_id = Some(value),
            _ => {}
        }
    }
    finish(&mut physical_id, &mut core_id);
    let model = match (model_name, hardware, implementer, part) {
        (Some(m), _, _, _) | (None, Some(m), _, _) => m.to_string(),
        (None, None, Some(i), Some(p)) => format!("implementer {i} part {p}"),
        (None, None, None, Some(p)) => format!("part {p}"),
        _ => String::new(),
    };
    let count = |n: usize| (n > 0).then(|| u32::try_from(n).unwrap_or(u32::MAX));
    CpuInfo {
        model,
        logical,
        physical: count(cores.len()),
        sockets: count(sockets.len()),
        numa_nodes: None,
    }
}

/// `MemTotal` from `/proc/meminfo`, in KiB (`MemTotal:  263842732 kB`).
pub fn meminfo_total_kib(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let mut words = rest.split_whitespace();
        let n = words.next()?.parse().ok()?;
        match words.next() {
            None | Some("kB") => Some(n),
            Some(_) => None,
        }
    })
}

/// Parses `df -PkT`: device, type, 1024-blocks, used, available, capacity, mount point.
///
/// The mount point is everything after the sixth field, so mount points with spaces are
/// kept whole. The header and rows whose sizes are not numbers (`-` for some pseudo
/// filesystems) are skipped.
pub fn df(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut rest = line.trim_start();
            let mut fields = [""; 6];
            for field in &mut fields {
                let end = rest.find(char::is_whitespace)?;
                *field = &rest[..end];
                rest = rest[end..].trim_start();
            }
            let mount = rest.trim_end();
            if mount.is_empty() {
                return None;
            }
            let [device, fstype, size, _used, avail, _capacity] = fields;
            Some(Mount {
                device: device.to_string(),
                fstype: fstype.to_string(),
                size_kib: size.parse().ok()?,
                avail_kib: avail.parse().ok()?,
                mount: mount.to_string(),
                ..Mount::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn glibc() {
        let v = |s: &str| s.parse::<GlibcVersion>().unwrap();
        assert_eq!(ldd_version(fixture!("ldd/ubuntu-22.04.txt")), Some(v("2.35")));
        assert_eq!(ldd_version(fixture!("ldd/rocky-9.txt")), Some(v("2.34")));
        assert_eq!(ldd_version(fixture!("ldd/alpine-musl.txt")), None);
        assert_eq!(getconf_glibc(fixture!("getconf/glibc-2.35.txt")), Some(v("2.35")));
        assert_eq!(
            getconf_glibc("getconf: Unrecognized variable `GNU_LIBC_VERSION'"),
            None
        );
        assert_eq!(getconf_glibc("glibc 2.35 extra"), None);
    }

    #[test]
    fn cpus_x86_two_sockets() {
        let c = cpuinfo(fixture!("cpuinfo/x86_64-2s-8c-smt.txt"));
        assert_eq!(c.model, "AMD EPYC 72F3 8-Core Processor");
        assert_eq!(c.logical, 32);
        assert_eq!(c.physical, Some(16));
        assert_eq!(c.sockets, Some(2));
    }

    #[test]
    fn cpus_aarch64() {
        let c = cpuinfo(fixture!("cpuinfo/aarch64-neoverse-v2-4c.txt"));
        assert_eq!(c.model, "implementer 0x41 part 0xd4f");
        assert_eq!(c.logical, 4);
        assert_eq!(c.physical, None);
        assert_eq!(c.sockets, None);
        let c = cpuinfo("processor\t: 0\nHardware\t: NVIDIA Jetson\nCPU part\t: 0xd42\n");
        assert_eq!(c.model, "NVIDIA Jetson");
        assert_eq!(cpuinfo(""), CpuInfo::default());
    }

    #[test]
    fn memory() {
        assert_eq!(
            meminfo_total_kib(fixture!("meminfo/meminfo-2tb.txt")),
            Some(2_113_470_536)
        );
        assert_eq!(meminfo_total_kib("MemTotal: 12 MB"), None);
        assert_eq!(meminfo_total_kib("MemFree: 12 kB"), None);
    }

    #[test]
    fn filesystems() {
        let m = df(fixture!("df/df-PkT.txt"));
        let root = m.iter().find(|m| m.mount == "/").unwrap();
        assert_eq!(root.device, "/dev/nvme0n1p2");
        assert_eq!(root.fstype, "ext4");
        assert_eq!(root.size_kib, 1_921_724_676);
        assert_eq!(root.avail_kib, 1_410_287_504);
        let spaced = m.iter().find(|m| m.mount.starts_with("/mnt/shared")).unwrap();
        assert_eq!(spaced.mount, "/mnt/shared data/run 1");
        assert!(m.iter().all(|m| m.device != "Filesystem"), "header skipped");
        assert!(df("").is_empty());
    }
}
