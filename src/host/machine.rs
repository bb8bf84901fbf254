//! The system group's walks of the kernel's files, through the seam: the host name, NUMA
//! nodes, the disk under each mount and what it is stored on, RDMA ports, network
//! interfaces and GPUDirect RDMA.
//!
//! Owns: which files and directories are read, in which order, and how their answers
//! combine (a device-mapper volume followed down to its disks). Every read goes through
//! [`System`], so a recorded host replays it; each value is parsed by
//! [`crate::host::parse::sysfs`]. A file that cannot be read leaves its fact `None`.

use std::collections::BTreeSet;

use super::parse;
use super::system::System;
use super::types::{DiskMedia, Mount, NetInterface, Network, RdmaPort};

/// gpuenv's application ID for [`machine_id`]: a fixed random 128-bit value, so that the
/// ID gpuenv shows cannot be correlated with another application's.
const GPUENV_APP_ID: [u8; 16] = [
    0xc9, 0x26, 0x09, 0x36, 0x78, 0xf2, 0x4b, 0x30, 0xbf, 0x1d, 0x45, 0x6d, 0xbd, 0x8d, 0xd7, 0x7d,
];

/// The machine's ID as gpuenv shows it: `/etc/machine-id` is confidential (machine-id(5)
/// says not to expose it), so what is shown is derived from it as systemd's
/// `sd_id128_get_machine_app_specific()` does: HMAC-SHA256 keyed by the machine ID's 16
/// bytes over gpuenv's application ID, the first 16 bytes of the MAC in hex (32 digits).
/// The same machine gives the same value, and the value does not give the ID back.
/// `None` when the file cannot be read or does not hold 32 hex digits.
pub fn machine_id(sys: &dyn System) -> Option<String> {
    let text = sys.read(MACHINE_ID_FILE)?;
    let text = text.trim();
    match text.strip_prefix(RECORDED_MARK) {
        // A recorded host holds the derived ID, never the raw one (see [`recorded`]).
        Some(derived) if derived.len() == 32 && derived.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(derived.to_string())
        }
        Some(_) => None,
        None => app_specific_id(text, &GPUENV_APP_ID),
    }
}

/// Where the machine ID is read.
pub const MACHINE_ID_FILE: &str = "/etc/machine-id";

/// What a recorded host holds in place of `/etc/machine-id`'s text.
const RECORDED_MARK: &str = "gpuenv-app-specific-id:";

/// What `--record` keeps of `/etc/machine-id`: the derived ID behind a mark, so a recorded
/// host (a fixture, a file sent to a vendor) replays to the same `machine_id` without
/// holding the confidential raw ID; nothing when the file holds no ID.
pub fn recorded(text: Option<String>) -> Option<String> {
    let derived = app_specific_id(text?.trim(), &GPUENV_APP_ID)?;
    Some(format!("{RECORDED_MARK}{derived}"))
}

/// [`machine_id`]'s derivation from the file's text.
fn app_specific_id(machine_id: &str, app_id: &[u8; 16]) -> Option<String> {
    if machine_id.len() != 32 || !machine_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let key: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&machine_id[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let mac = hmac_sha256(&key, app_id);
    Some(mac[..16].iter().map(|b| format!("{b:02x}")).collect())
}

/// HMAC-SHA256 (RFC 2104) over `sha2`: a key of at most one block (64 bytes), as here.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// `/proc/sys/kernel/hostname`, trimmed.
pub fn hostname(sys: &dyn System) -> Option<String> {
    sys.read("/proc/sys/kernel/hostname")
        .and_then(|t| parse::sysfs_word(&t))
}

/// The NUMA nodes in `/sys/devices/system/node`; `None` when it cannot be listed.
pub fn numa_nodes(sys: &dyn System) -> Option<u32> {
    sys.list("/sys/devices/system/node")
        .and_then(|e| parse::numa_nodes(&e))
}

/// Filesystem types whose data lives on another machine. `fuse.*` is a user-space
/// filesystem, nearly always a network or object store (sshfs, s3fs, gcsfuse, juicefs),
/// except the few local ones below.
fn network_fs(fstype: &str) -> bool {
    const NETWORK: [&str; 7] = ["cifs", "smb3", "smbfs", "ceph", "lustre", "gpfs", "9p"];
    const LOCAL_FUSE: [&str; 3] = ["fuse.lxcfs", "fuse.gvfsd-fuse", "fuse.portal"];
    fstype.starts_with("nfs")
        || NETWORK.contains(&fstype)
        || (fstype.starts_with("fuse.") && !LOCAL_FUSE.contains(&fstype))
}

/// How deep stacked devices are followed (LVM on dm-crypt on md on partitions is four);
/// a record that loops is cut off here.
const MAX_STACK: usize = 8;

/// Fills `disk`, `media` and `media_source` of each mount.
///
/// A network filesystem is `Network` whatever its source. Otherwise the device's whole
/// disk: an NVMe drive by its name; any other by `/sys/block/<disk>/queue/rotational`. A
/// device-mapper volume (`/dev/dm-N`, `/dev/mapper/NAME`) is followed through `slaves/`:
/// over one disk it is that disk; over several it keeps its own name. An md array keeps
/// its name (`md0`). Over several disks the media is the worst of them: an HDD if any
/// rotates, unknown if any is unknown.
pub fn classify_mounts(sys: &dyn System, mounts: &mut [Mount]) {
    // The dm devices and their names, read once and only when a mapper path needs them.
    let mut mapper: Option<Vec<(String, String)>> = None;
    for m in mounts.iter_mut() {
        if network_fs(&m.fstype) {
            m.media = Some(DiskMedia::Network);
            m.media_source = Some(format!("filesystem type {}", m.fstype));
            continue;
        }
        let device = match m.device.strip_prefix("/dev/mapper/") {
            Some(name) => {
                let table = mapper.get_or_insert_with(|| dm_names(sys));
                match table.iter().find(|(_, n)| n == name) {
                    Some((dm, _)) => dm.clone(),
                    None => continue,
                }
            }
            None => match parse::block_disk(&m.device) {
                Some(d) => d,
                None => continue,
            },
        };
        let leaves = leaf_disks(sys, &device, 0);
        m.disk = if device.starts_with("dm-") {
            match leaves.as_slice() {
                [one] => Some(one.clone()),
                [] => None, // nothing under it could be read: no guess
                _ => Some(device.clone()),
            }
        } else {
            Some(device.clone())
        };
        if leaves.is_empty() {
            continue;
        }
        let found: Vec<Option<(Option<DiskMedia>, String)>> = leaves.iter().map(|d| media(sys, d)).collect();
        let known: Vec<(DiskMedia, &String)> = found
            .iter()
            .flatten()
            .filter_map(|(k, s)| k.map(|k| (k, s)))
            .collect();
        if known.len() < found.len() && !known.iter().any(|(k, _)| *k == DiskMedia::Hdd) {
            // One disk unknown and none known to rotate: the worst is unknown, and where a
            // disk was found to be unknowable (a virtual one), the source says why.
            let why: Vec<&str> = found
                .iter()
                .flatten()
                .filter(|(k, _)| k.is_none())
                .map(|(_, why)| why.as_str())
                .collect();
            if !why.is_empty() {
                m.media_source = Some(why.join(", "));
            }
            continue;
        }
        let worst = [DiskMedia::Hdd, DiskMedia::Ssd, DiskMedia::Nvme]
            .into_iter()
            .find(|w| known.iter().any(|(k, _)| k == w));
        if let Some(worst) = worst {
            let sources: BTreeSet<&str> = known
                .iter()
                .filter(|(k, _)| *k == worst)
                .map(|(_, s)| s.as_str())
                .collect();
            m.media = Some(worst);
            m.media_source = Some(sources.into_iter().collect::<Vec<_>>().join(", "));
        }
    }
}

/// `(dm-N, name)` for each device-mapper device in `/sys/block`.
fn dm_names(sys: &dyn System) -> Vec<(String, String)> {
    sys.list("/sys/block")
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d.starts_with("dm-"))
        .filter_map(|d| {
            let name = sys
                .read(&format!("/sys/block/{d}/dm/name"))
                .and_then(|t| parse::sysfs_word(&t))?;
            Some((d, name))
        })
        .collect()
}

/// The real disks under a block device: itself, or for md and dm devices the disks their
/// `slaves/` hold, followed down. Empty when a stacked device's slaves cannot be listed.
fn leaf_disks(sys: &dyn System, disk: &str, depth: usize) -> Vec<String> {
    if !(disk.starts_with("dm-") || disk.starts_with("md")) {
        return vec![disk.to_string()];
    }
    if depth >= MAX_STACK {
        return Vec::new();
    }
    let Some(slaves) = sys.list(&format!("/sys/block/{disk}/slaves")) else {
        return Vec::new();
    };
    let mut out = BTreeSet::new();
    for s in slaves {
        // A slave is a partition (nvme0n1p3) or a whole device; an unreadable name leaves
        // the set incomplete, so the whole answer is unknown.
        let Some(whole) = parse::block_disk(&s) else {
            return Vec::new();
        };
        let below = leaf_disks(sys, &whole, depth + 1);
        if below.is_empty() {
            return Vec::new();
        }
        out.extend(below);
    }
    out.into_iter().collect()
}

/// What one real disk is, with where that was read; `Some((None, why))` for a disk whose
/// media cannot be known from inside the machine; `None` when nothing could be read.
///
/// NVMe by its name, unless its controller's transport is not `pcie` (NVMe over fabrics:
/// `tcp`, `rdma`, `fc`, where the drive is across a network). A virtual disk (virtio
/// `vd*`, Xen `xvd*`) is unknown whatever its `rotational` flag says: the guest's driver
/// does not learn what backs it, and virtio-blk leaves the flag at 1 even on SSDs.
/// Any other disk by its `rotational` flag.
fn media(sys: &dyn System, disk: &str) -> Option<(Option<DiskMedia>, String)> {
    if let Some(rest) = disk.strip_prefix("nvme") {
        let ctrl: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let path = format!("/sys/class/nvme/nvme{ctrl}/transport");
        let transport = (!ctrl.is_empty())
            .then(|| sys.read(&path))
            .flatten()
            .and_then(|t| parse::sysfs_word(&t));
        return Some(match transport {
            Some(t) if t == "pcie" => (Some(DiskMedia::Nvme), path),
            Some(t) => (
                None,
                format!(
                    "{disk} is NVMe over fabrics (transport {t}, {path}): what backs it is not known here"
                ),
            ),
            None => (Some(DiskMedia::Nvme), "device name".to_string()),
        });
    }
    let virtual_kind = if disk.starts_with("xvd") {
        Some("a Xen virtual disk")
    } else if disk.starts_with("vd") {
        Some("a virtio disk")
    } else {
        None
    };
    if let Some(kind) = virtual_kind {
        return Some((
            None,
            format!("{disk} is {kind}: its rotational flag does not say what backs it"),
        ));
    }
    let path = format!("/sys/block/{disk}/queue/rotational");
    let rotates = sys.read(&path).and_then(|t| parse::rotational(&t))?;
    Some((Some(if rotates { DiskMedia::Hdd } else { DiskMedia::Ssd }), path))
}

/// RDMA ports, network interfaces and the GPUDirect RDMA module; `None` when none of
/// `/sys/class/infiniband`, `/sys/class/net` and `/proc/modules` could be read.
pub fn network(sys: &dyn System) -> Option<Network> {
    let ib = sys.list("/sys/class/infiniband");
    let net = sys.list("/sys/class/net");
    let modules = sys.read("/proc/modules");
    if ib.is_none() && net.is_none() && modules.is_none() {
        return None;
    }
    let mut rdma = Vec::new();
    for dev in ib.unwrap_or_default() {
        let mut ports: Vec<u32> = sys
            .list(&format!("/sys/class/infiniband/{dev}/ports"))
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        ports.sort_unstable();
        for port in ports {
            let dir = format!("/sys/class/infiniband/{dev}/ports/{port}");
            let read = |f: &str| sys.read(&format!("{dir}/{f}"));
            rdma.push(RdmaPort {
                device: dev.clone(),
                port,
                link_layer: read("link_layer").and_then(|t| parse::sysfs_word(&t)),
                state: read("state").and_then(|t| parse::rdma_state(&t)),
                rate_gbps: read("rate").and_then(|t| parse::rdma_rate_gbps(&t)),
                source: dir,
            });
        }
    }
    let mut interfaces = Vec::new();
    for name in net.unwrap_or_default() {
        let dir = format!("/sys/class/net/{name}");
        // Loopback, bridges, veth pairs, docker0, bonds: no device behind them.
        if name == "lo" || sys.list(&format!("{dir}/device")).is_none() {
            continue;
        }
        interfaces.push(NetInterface {
            speed_mbps: sys
                .read(&format!("{dir}/speed"))
                .and_then(|t| parse::net_speed_mbps(&t)),
            driver: sys
                .read(&format!("{dir}/device/uevent"))
                .and_then(|t| parse::uevent_driver(&t)),
            operstate: sys
                .read(&format!("{dir}/operstate"))
                .and_then(|t| parse::sysfs_word(&t)),
            name,
            source: dir,
        });
    }
    Some(Network {
        rdma,
        interfaces,
        peermem: modules.map(|m| parse::peermem_loaded(&m)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::system::{HostRecord, Recording};

    fn host(files: &[(&str, &str)], dirs: &[(&str, &[&str])]) -> Recording {
        let mut r = HostRecord {
            gpuenv_host_record: 1,
            ..HostRecord::default()
        };
        for (k, v) in files {
            r.files.insert((*k).into(), Some((*v).into()));
        }
        for (k, v) in dirs {
            r.dirs
                .insert((*k).into(), Some(v.iter().map(|s| s.to_string()).collect()));
        }
        Recording::replay(r)
    }

    fn mount(device: &str, fstype: &str) -> Mount {
        Mount {
            device: device.into(),
            fstype: fstype.into(),
            mount: "/x".into(),
            ..Mount::default()
        }
    }

    fn classified(sys: &Recording, device: &str, fstype: &str) -> Mount {
        let mut m = [mount(device, fstype)];
        classify_mounts(sys, &mut m);
        let [m] = m;
        m
    }

    #[test]
    fn plain_disks() {
        let sys = host(
            &[
                ("/sys/block/sdb/queue/rotational", "1\n"),
                ("/sys/block/sda/queue/rotational", "0\n"),
            ],
            &[],
        );
        let m = classified(&sys, "/dev/nvme0n1p2", "ext4");
        assert_eq!(m.disk.as_deref(), Some("nvme0n1"));
        assert_eq!(m.media, Some(DiskMedia::Nvme));
        assert_eq!(m.media_source.as_deref(), Some("device name"));
        let m = classified(&sys, "/dev/sdb1", "xfs");
        assert_eq!((m.disk.as_deref(), m.media), (Some("sdb"), Some(DiskMedia::Hdd)));
        assert_eq!(m.media_source.as_deref(), Some("/sys/block/sdb/queue/rotational"));
        let m = classified(&sys, "/dev/sda", "ext4");
        assert_eq!(m.media, Some(DiskMedia::Ssd));
        // Not recorded: the disk is known, its media is not.
        let m = classified(&sys, "/dev/sdc1", "ext4");
        assert_eq!(
            (m.disk.as_deref(), m.media, m.media_source),
            (Some("sdc"), None, None)
        );
        for (dev, fs) in [("tmpfs", "tmpfs"), ("overlay", "overlay"), ("/dev/root", "ext4")] {
            assert_eq!(classified(&sys, dev, fs), mount(dev, fs), "{dev}");
        }
    }

    #[test]
    fn network_filesystems() {
        let sys = host(&[], &[]);
        for fs in ["nfs4", "nfs", "cifs", "lustre", "fuse.sshfs", "9p"] {
            let m = classified(&sys, "server:/export", fs);
            assert_eq!(m.media, Some(DiskMedia::Network), "{fs}");
            assert_eq!(m.disk, None);
        }
        assert_eq!(classified(&sys, "lxcfs", "fuse.lxcfs").media, None);
    }

    #[test]
    fn mapped_and_raid_devices() {
        let sys = host(
            &[
                ("/sys/block/dm-0/dm/name", "vg0-root\n"),
                ("/sys/block/dm-1/dm/name", "vg1-data\n"),
                ("/sys/block/sda/queue/rotational", "0\n"),
                ("/sys/block/sdb/queue/rotational", "1\n"),
            ],
            &[
                ("/sys/block", &["dm-0", "dm-1", "md0", "nvme0n1", "sda", "sdb"]),
                ("/sys/block/dm-0/slaves", &["nvme0n1p3"]),
                ("/sys/block/dm-1/slaves", &["md0"]),
                ("/sys/block/md0/slaves", &["sda1", "sdb1"]),
                ("/sys/block/md1/slaves", &["sda2", "sdc2"]),
            ],
        );
        // LVM on one NVMe partition: that disk.
        let m = classified(&sys, "/dev/mapper/vg0-root", "ext4");
        assert_eq!(
            (m.disk.as_deref(), m.media),
            (Some("nvme0n1"), Some(DiskMedia::Nvme))
        );
        let m = classified(&sys, "/dev/dm-0", "ext4");
        assert_eq!(m.disk.as_deref(), Some("nvme0n1"));
        // md over an SSD and an HDD: the HDD wins.
        let m = classified(&sys, "/dev/md0", "xfs");
        assert_eq!((m.disk.as_deref(), m.media), (Some("md0"), Some(DiskMedia::Hdd)));
        assert_eq!(m.media_source.as_deref(), Some("/sys/block/sdb/queue/rotational"));
        // LVM on that array: several disks, the volume keeps its name.
        let m = classified(&sys, "/dev/mapper/vg1-data", "xfs");
        assert_eq!((m.disk.as_deref(), m.media), (Some("dm-1"), Some(DiskMedia::Hdd)));
        // One SSD and one disk not recorded: unknown, not SSD.
        let m = classified(&sys, "/dev/md1", "xfs");
        assert_eq!((m.disk.as_deref(), m.media), (Some("md1"), None));
        // Unknown mapper name, unlisted slaves.
        assert_eq!(classified(&sys, "/dev/mapper/nope", "ext4").disk, None);
        let m = classified(&sys, "/dev/dm-7", "ext4");
        assert_eq!((m.disk, m.media), (None, None));
    }

    #[test]
    fn a_looping_record_ends() {
        let sys = host(&[], &[("/sys/block/dm-0/slaves", &["dm-0"])]);
        let m = classified(&sys, "/dev/dm-0", "ext4");
        assert_eq!((m.disk, m.media), (None, None));
    }

    #[test]
    fn virtual_disks_are_unknown_whatever_rotational_says() {
        use crate::host::parse::fixture;
        let rotational = fixture!("sysfs/vm-virtio/block-vda-queue-rotational.txt");
        let sys = host(
            &[
                ("/sys/block/xvda/queue/rotational", rotational),
                ("/sys/block/vdb/queue/rotational", "0\n"),
                ("/sys/block/sda/queue/rotational", rotational),
            ],
            &[("/sys/block/md0/slaves", &["vdb", "sda"])],
        );
        let m = classified(&sys, "/dev/xvda1", "ext4");
        assert_eq!((m.disk.as_deref(), m.media), (Some("xvda"), None));
        assert!(m.media_source.unwrap().contains("a Xen virtual disk"));
        let m = classified(&sys, "/dev/vdb", "xfs");
        assert_eq!(
            (m.disk.as_deref(), m.media),
            (Some("vdb"), None),
            "not even an SSD"
        );
        // Beside a disk known to rotate, the array is still an HDD.
        let m = classified(&sys, "/dev/md0", "ext4");
        assert_eq!(m.media, Some(DiskMedia::Hdd));
        assert_eq!(m.media_source.as_deref(), Some("/sys/block/sda/queue/rotational"));
    }

    #[test]
    fn nvme_over_fabrics_is_unknown_local_nvme_is_nvme() {
        use crate::host::parse::fixture;
        let sys = host(
            &[
                (
                    "/sys/class/nvme/nvme0/transport",
                    fixture!("sysfs/nvme-transport/pcie.txt"),
                ),
                (
                    "/sys/class/nvme/nvme1/transport",
                    fixture!("sysfs/nvme-transport/tcp.txt"),
                ),
            ],
            &[],
        );
        let m = classified(&sys, "/dev/nvme0n1p1", "ext4");
        assert_eq!(m.media, Some(DiskMedia::Nvme));
        assert_eq!(m.media_source.as_deref(), Some("/sys/class/nvme/nvme0/transport"));
        let m = classified(&sys, "/dev/nvme1n1", "xfs");
        assert_eq!((m.disk.as_deref(), m.media), (Some("nvme1n1"), None));
        assert_eq!(
            m.media_source.as_deref(),
            Some(
                "nvme1n1 is NVMe over fabrics (transport tcp, /sys/class/nvme/nvme1/transport): what backs it is not known here"
            )
        );
        // No transport recorded: NVMe by its name, as before.
        let m = classified(&sys, "/dev/nvme2n1", "ext4");
        assert_eq!(m.media, Some(DiskMedia::Nvme));
        assert_eq!(m.media_source.as_deref(), Some("device name"));
    }

    #[test]
    fn the_recorded_vm() {
        // This VM's real answers: a virtio disk that says it rotates, eth0 on virtio_net
        // with no speed, docker0 without a device, no InfiniBand, no /proc/modules.
        use crate::host::parse::fixture;
        let lines = |t: &'static str| t.lines().collect::<Vec<_>>();
        let net = lines(fixture!("sysfs/vm-virtio/class-net.txt"));
        let node = lines(fixture!("sysfs/vm-virtio/devices-system-node.txt"));
        let eth0 = lines(fixture!("sysfs/vm-virtio/class-net-eth0-device.txt"));
        let sys = host(
            &[
                (
                    "/proc/sys/kernel/hostname",
                    fixture!("sysfs/vm-virtio/proc-sys-kernel-hostname.txt"),
                ),
                (
                    "/sys/block/vda/queue/rotational",
                    fixture!("sysfs/vm-virtio/block-vda-queue-rotational.txt"),
                ),
                (
                    "/sys/class/net/eth0/speed",
                    fixture!("sysfs/vm-virtio/class-net-eth0-speed.txt"),
                ),
                (
                    "/sys/class/net/eth0/operstate",
                    fixture!("sysfs/vm-virtio/class-net-eth0-operstate.txt"),
                ),
                (
                    "/sys/class/net/eth0/device/uevent",
                    fixture!("sysfs/vm-virtio/class-net-eth0-device-uevent.txt"),
                ),
                (
                    "/sys/class/net/docker0/operstate",
                    fixture!("sysfs/vm-virtio/class-net-docker0-operstate.txt"),
                ),
            ],
            &[
                ("/sys/class/net", &net),
                ("/sys/devices/system/node", &node),
                ("/sys/class/net/eth0/device", &eth0),
            ],
        );
        assert_eq!(hostname(&sys).as_deref(), Some("vm"));
        assert_eq!(numa_nodes(&sys), Some(1));
        let mut mounts = parse::df(fixture!("sysfs/vm-virtio/df-PkT.txt"));
        classify_mounts(&sys, &mut mounts);
        let root = mounts.iter().find(|m| m.mount == "/").unwrap();
        // The virtio disk says it rotates; it is unknown, and the source says why.
        assert_eq!((root.disk.as_deref(), root.media), (Some("vda"), None));
        assert_eq!(
            root.media_source.as_deref(),
            Some("vda is a virtio disk: its rotational flag does not say what backs it")
        );
        assert!(
            mounts
                .iter()
                .filter(|m| m.mount != "/")
                .all(|m| m.disk.is_none() && m.media.is_none())
        );
        let n = network(&sys).unwrap();
        assert!(n.rdma.is_empty());
        assert_eq!(n.peermem, None);
        assert_eq!(
            n.interfaces,
            vec![NetInterface {
                name: "eth0".into(),
                speed_mbps: None,
                driver: Some("virtio_net".into()),
                operstate: Some("up".into()),
                source: "/sys/class/net/eth0".into(),
            }]
        );
    }

    #[test]
    fn rdma_ports_and_peermem() {
        let sys = host(
            &[
                (
                    "/sys/class/infiniband/mlx5_0/ports/1/rate",
                    "400 Gb/sec (4X NDR)\n",
                ),
                ("/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n"),
                ("/sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n"),
                ("/sys/class/infiniband/mlx5_0/ports/2/state", "1: DOWN\n"),
                ("/proc/modules", "nvidia_peermem 16384 0 - Live 0x0\n"),
            ],
            &[
                ("/sys/class/infiniband", &["mlx5_0"]),
                ("/sys/class/infiniband/mlx5_0/ports", &["2", "1", "x"]),
            ],
        );
        let n = network(&sys).unwrap();
        assert_eq!(n.peermem, Some(true));
        assert!(n.interfaces.is_empty());
        assert_eq!(n.rdma.len(), 2);
        let p = &n.rdma[0];
        assert_eq!(
            (p.port, p.rate_gbps, p.state.as_deref()),
            (1, Some(400.0), Some("ACTIVE"))
        );
        assert_eq!(p.link_layer.as_deref(), Some("InfiniBand"));
        assert_eq!(p.source, "/sys/class/infiniband/mlx5_0/ports/1");
        let p = &n.rdma[1];
        assert_eq!((p.port, p.rate_gbps, p.link_layer.as_deref()), (2, None, None));
        assert_eq!(p.state.as_deref(), Some("DOWN"));
        // Nothing readable: no network fact at all.
        assert_eq!(network(&host(&[], &[])), None);
        let only_modules = host(&[("/proc/modules", "nvidia 1 0 - Live 0x0\n")], &[]);
        assert_eq!(network(&only_modules).unwrap().peermem, Some(false));
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_machine_id_shown_is_derived_not_the_raw_one() {
        let a = app_specific_id("0123456789abcdef0123456789abcdef", &GPUENV_APP_ID).unwrap();
        let again = app_specific_id("0123456789abcdef0123456789abcdef", &GPUENV_APP_ID).unwrap();
        let b = app_specific_id("fedcba9876543210fedcba9876543210", &GPUENV_APP_ID).unwrap();
        assert_eq!(a, again);
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert_ne!(a, "0123456789abcdef0123456789abcdef");
        assert_eq!(app_specific_id("not-an-id", &GPUENV_APP_ID), None);
    }

    /// `--record` keeps the derived ID, not the raw one, and the recorded host replays to
    /// the same `machine_id` as the machine it was recorded on.
    #[test]
    fn a_recording_holds_the_derived_id_and_replays_to_it() {
        use crate::host::system::{HostRecord, Recording};
        let raw = "0123456789abcdef0123456789abcdef";
        let mut live = HostRecord::default();
        live.files
            .insert(MACHINE_ID_FILE.into(), Some(format!("{raw}\n")));
        let live = Recording::replay(live);
        let expected = machine_id(&live);
        assert!(expected.is_some());
        let rec = Recording::capture(Box::new(live), "test".into());
        assert_eq!(machine_id(&rec), expected, "the live answer is derived as before");
        let record = rec.record();
        let kept = record.files[MACHINE_ID_FILE].clone().unwrap();
        assert!(!kept.contains(raw), "{kept}");
        assert!(serde_json::to_string(&record).unwrap().find(raw).is_none());
        assert_eq!(machine_id(&Recording::replay(record)), expected);
        // A mark followed by anything but an ID gives none.
        let mut bad = HostRecord::default();
        bad.files
            .insert(MACHINE_ID_FILE.into(), Some(format!("{RECORDED_MARK}zz")));
        assert_eq!(machine_id(&Recording::replay(bad)), None);
    }
}
