//! Single values the kernel exposes under `/sys` and `/proc`: NUMA node listings, block
//! device names and their `rotational` flag, network interface speeds and drivers, RDMA
//! port states and rates, and the module list that says whether GPUDirect RDMA is loaded.
//!
//! Each function takes one file's text (or one directory's entry names) as read; walking
//! the tree is the system probe's business ([`mod@crate::host::probe`]).

/// The number of NUMA nodes in a listing of `/sys/devices/system/node`: the entries named
/// `node<digits>` (the directory also holds `online`, `possible`, `has_cpu`...). `None`
/// when there is none, since a kernel that lists the directory has at least `node0`.
pub fn numa_nodes(entries: &[String]) -> Option<u32> {
    let n = entries
        .iter()
        .filter(|e| {
            e.strip_prefix("node")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    (n > 0).then(|| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The whole block device a device path is on, as `/sys/block` names it:
/// `/dev/nvme0n1p2` -> `nvme0n1`, `/dev/sda1` -> `sda`, `/dev/vda` -> `vda`,
/// `/dev/xvda1` -> `xvda`, `/dev/mmcblk0p1` -> `mmcblk0`, `/dev/md0` -> `md0`,
/// `/dev/dm-0` -> `dm-0`.
///
/// `None` for what the name alone cannot say: `/dev/root` (an alias the kernel gives the
/// root device), `/dev/mapper/NAME` (found through `/sys/block/dm-*/dm/name`), names of
/// other schemes, and sources that are not devices (`tmpfs`, `server:/export`). A bare
/// name without `/dev/` (as `slaves/` lists them) is read the same way.
pub fn block_disk(device: &str) -> Option<String> {
    let name = device.strip_prefix("/dev/").unwrap_or(device);
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None; // `mapper/x`, `disk/by-uuid/...`, `host:/path`, `tmpfs` with odd bytes
    }
    if let Some(n) = name.strip_prefix("dm-") {
        return all_digits(n).then(|| name.to_string());
    }
    // Schemes whose partitions add `p<N>` after a number: nvme0n1p2, mmcblk0p1, loop0p1,
    // nbd0p1, rbd0p1, md126p1.
    for scheme in ["nvme", "mmcblk", "loop", "nbd", "rbd", "md", "zram"] {
        let Some(rest) = name.strip_prefix(scheme) else {
            continue;
        };
        let whole = match rest.rsplit_once('p') {
            Some((head, part)) if all_digits(part) && head.ends_with(|c: char| c.is_ascii_digit()) => head,
            _ => rest,
        };
        let valid = match scheme {
            // nvme<ctrl>n<namespace>
            "nvme" => whole
                .split_once('n')
                .is_some_and(|(c, n)| all_digits(c) && all_digits(n)),
            _ => all_digits(whole),
        };
        return valid.then(|| format!("{scheme}{whole}"));
    }
    // Letter-named disks whose partitions append digits: sda1, vdb2, xvda1, hdc3.
    for scheme in ["xvd", "sd", "vd", "hd"] {
        let Some(rest) = name.strip_prefix(scheme) else {
            continue;
        };
        let letters = rest.trim_end_matches(|c: char| c.is_ascii_digit());
        let valid = !letters.is_empty() && letters.bytes().all(|b| b.is_ascii_lowercase());
        return valid.then(|| format!("{scheme}{letters}"));
    }
    None
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `/sys/block/<disk>/queue/rotational`: `1` a spinning disk, `0` not; anything else
/// unknown.
pub fn rotational(text: &str) -> Option<bool> {
    match text.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// `/sys/class/net/<if>/speed` in Mb/s. `None` for the kernel's `-1` (link down, or a
/// driver that does not say, as virtio does), an empty file, or anything not a number.
pub fn net_speed_mbps(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    // Some drivers print the unsigned form of SPEED_UNKNOWN (-1).
    (v != u64::from(u32::MAX)).then_some(v)
}

/// A trimmed one-line sysfs value (`operstate`, `link_layer`, `dm/name`), `None` when
/// empty.
pub fn sysfs_word(text: &str) -> Option<String> {
    let v = text.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// The `DRIVER=` line of a device's `uevent` (`DRIVER=mlx5_core`).
pub fn uevent_driver(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("DRIVER="))
        .and_then(sysfs_word)
}

/// The word of an RDMA port's `state` (`4: ACTIVE` -> `ACTIVE`, `1: DOWN` -> `DOWN`).
pub fn rdma_state(text: &str) -> Option<String> {
    let v = text.trim();
    let word = match v.split_once(':') {
        Some((n, w)) if all_digits(n.trim()) => w.trim(),
        Some(_) => return None,
        None => v,
    };
    (!word.is_empty() && !word.contains(char::is_whitespace)).then(|| word.to_string())
}

/// An RDMA port's `rate` in Gb/s: `200 Gb/sec (4X HDR)` -> 200, `2.5 Gb/sec (1X SDR)` ->
/// 2.5. `None` for any other unit or shape.
pub fn rdma_rate_gbps(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let n: f64 = words.next()?.parse().ok()?;
    (words.next()? == "Gb/sec" && n.is_finite() && n >= 0.0).then_some(n)
}

/// Whether `/proc/modules` lists a GPUDirect RDMA peer-memory module: `nvidia_peermem`
/// (shipped with the driver since R465) or the older Mellanox `nv_peer_mem`.
pub fn peermem_loaded(proc_modules: &str) -> bool {
    proc_modules
        .lines()
        .any(|l| l.starts_with("nvidia_peermem ") || l.starts_with("nv_peer_mem "))
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn numa_node_listings() {
        // Recorded: one node, with the directory's other entries.
        assert_eq!(
            numa_nodes(&lines(fixture!("sysfs/vm-virtio/devices-system-node.txt"))),
            Some(1)
        );
        let two = lines("has_cpu\nnode0\nnode1\nonline\npossible\npower\nuevent");
        assert_eq!(numa_nodes(&two), Some(2));
        assert_eq!(numa_nodes(&lines("node\nnodeX\nnode1a\nonline")), None);
        assert_eq!(numa_nodes(&[]), None);
    }

    #[test]
    fn block_device_names() {
        let d = |s: &str| block_disk(s);
        let some = |s: &str| Some(s.to_string());
        assert_eq!(d("/dev/nvme0n1p2"), some("nvme0n1"));
        assert_eq!(d("/dev/nvme10n1"), some("nvme10n1"));
        assert_eq!(d("/dev/sda1"), some("sda"));
        assert_eq!(d("/dev/sdab12"), some("sdab"));
        assert_eq!(d("/dev/sdb"), some("sdb"));
        assert_eq!(d("/dev/vda1"), some("vda"));
        assert_eq!(d("/dev/vda"), some("vda"));
        assert_eq!(d("/dev/xvda1"), some("xvda"));
        assert_eq!(d("/dev/mmcblk0p1"), some("mmcblk0"));
        assert_eq!(d("/dev/md0"), some("md0"));
        assert_eq!(d("/dev/md126p1"), some("md126"));
        assert_eq!(d("/dev/dm-0"), some("dm-0"));
        assert_eq!(d("/dev/loop3"), some("loop3"));
        assert_eq!(d("nvme1n1p3"), some("nvme1n1"), "as slaves/ lists them");
        for none in [
            "/dev/root",
            "/dev/mapper/vg0-root",
            "/dev/disk/by-uuid/1234",
            "/dev/",
            "/dev/dm-",
            "/dev/dm-x",
            "/dev/nvme0",
            "/dev/nvme0n1p",
            "/dev/sd1",
            "/dev/mdX",
            "/dev/sr0",
            "tmpfs",
            "overlay",
            "server:/export",
            "//host/share",
            "",
        ] {
            assert_eq!(d(none), None, "{none:?}");
        }
    }

    #[test]
    fn rotation() {
        // Recorded: a virtio disk says it rotates; zram does not.
        assert_eq!(
            rotational(fixture!("sysfs/vm-virtio/block-vda-queue-rotational.txt")),
            Some(true)
        );
        assert_eq!(
            rotational(fixture!("sysfs/vm-virtio/block-zram0-queue-rotational.txt")),
            Some(false)
        );
        assert_eq!(rotational(""), None);
        assert_eq!(rotational("2"), None);
    }

    #[test]
    fn interfaces() {
        // Recorded: virtio_net reports no speed (-1), and is up.
        assert_eq!(
            net_speed_mbps(fixture!("sysfs/vm-virtio/class-net-eth0-speed.txt")),
            None
        );
        assert_eq!(
            sysfs_word(fixture!("sysfs/vm-virtio/class-net-eth0-operstate.txt")).as_deref(),
            Some("up")
        );
        assert_eq!(
            uevent_driver(fixture!("sysfs/vm-virtio/class-net-eth0-device-uevent.txt")).as_deref(),
            Some("virtio_net")
        );
        assert_eq!(
            sysfs_word(fixture!("sysfs/vm-virtio/class-net-docker0-operstate.txt")).as_deref(),
            Some("down")
        );
        assert_eq!(net_speed_mbps("100000\n"), Some(100_000));
        assert_eq!(net_speed_mbps("4294967295\n"), None);
        assert_eq!(net_speed_mbps(""), None);
        assert_eq!(net_speed_mbps("fast"), None);
        assert_eq!(uevent_driver("INTERFACE=eth0\nIFINDEX=2\n"), None);
        assert_eq!(uevent_driver("DRIVER=\n"), None);
        assert_eq!(sysfs_word(" \n"), None);
    }

    #[test]
    fn rdma_ports() {
        // From published `ibstatus` output (it prints these sysfs files as they are).
        let hdr = fixture!("sysfs/infiniband-hdr/rate.txt");
        assert_eq!(rdma_rate_gbps(hdr), Some(200.0));
        assert_eq!(
            rdma_state(fixture!("sysfs/infiniband-hdr/state.txt")).as_deref(),
            Some("ACTIVE")
        );
        assert_eq!(
            sysfs_word(fixture!("sysfs/infiniband-hdr/link_layer.txt")).as_deref(),
            Some("InfiniBand")
        );
        assert_eq!(rdma_rate_gbps(fixture!("sysfs/roce-edr/rate.txt")), Some(100.0));
        assert_eq!(
            sysfs_word(fixture!("sysfs/roce-edr/link_layer.txt")).as_deref(),
            Some("Ethernet")
        );
        assert_eq!(rdma_rate_gbps("400 Gb/sec (4X NDR)\n"), Some(400.0));
        assert_eq!(rdma_rate_gbps("2.5 Gb/sec (1X SDR)\n"), Some(2.5));
        assert_eq!(rdma_rate_gbps("100 Mb/sec"), None);
        assert_eq!(rdma_rate_gbps("NaN Gb/sec"), None);
        assert_eq!(rdma_rate_gbps("-5 Gb/sec"), None);
        assert_eq!(rdma_rate_gbps(""), None);
        assert_eq!(rdma_state("1: DOWN\n").as_deref(), Some("DOWN"));
        assert_eq!(rdma_state("ACTIVE").as_deref(), Some("ACTIVE"));
        assert_eq!(rdma_state("4:"), None);
        assert_eq!(rdma_state("x: ACTIVE"), None);
        assert_eq!(rdma_state(""), None);
    }

    #[test]
    fn gpudirect_rdma_module() {
        assert!(peermem_loaded(fixture!("sysfs/proc-modules/peermem.txt")));
        assert!(peermem_loaded(fixture!("sysfs/proc-modules/nv-peer-mem.txt")));
        assert!(!peermem_loaded(fixture!("sysfs/proc-modules/no-peermem.txt")));
        assert!(!peermem_loaded(""));
        // A module whose name merely starts the same is not it.
        assert!(!peermem_loaded("nvidia_peermem_x 16384 0 - Live 0x0\n"));
    }
}
