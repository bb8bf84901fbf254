//! Pure parsers: the text a host tool printed, turned into typed facts.
//!
//! Owns: reading the output of `nvidia-smi` (XML, `--query-gpu` CSV, the table, `topo -m`,
//! `nvlink -s` and its failure messages), `lspci -n` (NVSwitches), `/proc/driver/nvidia/version`, `nvcc --version`, the CUDA
//! toolkit's `version.json`/`version.txt`, cuDNN and NCCL headers, `ldconfig -p`,
//! `/etc/os-release`, `ldd --version`, `getconf GNU_LIBC_VERSION`, `/proc/cpuinfo`,
//! `/proc/meminfo`, `df -PkT`, `nvidia-ctk --version`, CDI specs, and single sysfs/procfs
//! values (NUMA nodes, block device names and rotation, network speeds and drivers, RDMA
//! port states and rates, `/proc/modules`) into the types of [`crate::host::types`].
//!
//! Must not: run commands, read files or the environment, print, or judge what it read
//! (whether a driver is new enough is `resolve`'s business). Every function takes the
//! text as given and never panics, whatever the text: a fact that is absent, marked
//! unavailable (`N/A`, `[Not Supported]`) or unreadable becomes `None` rather than a
//! guess, because `doctor` would otherwise report a made-up value as a finding.
//!
//! The functions are grouped by tool: [`smi`] (nvidia-smi reports and failures),
//! [`topo`] (`nvidia-smi topo -m`), [`fabric`] (`nvidia-smi nvlink -s`, NVSwitches in
//! `lspci`), [`toolkit`] (driver module, CUDA, cuDNN, NCCL, libraries, container toolkit),
//! [`system`] (OS, glibc, CPU, memory, disks) and [`sysfs`] (kernel files: NUMA, block
//! devices, network, RDMA); all are re-exported here.

pub mod fabric;
pub mod smi;
pub mod sysfs;
pub mod system;
pub mod toolkit;
pub mod topo;

#[cfg(test)]
mod proptests;

pub(crate) use crate::formats::dotted_prefix;
pub use crate::formats::{
    cuda_version_json, cuda_version_txt, cudnn_header, lib_version, nccl_header, os_release,
};
pub use fabric::{lspci_nvswitches, smi_nvlink_status};
pub use smi::{SMI_QUERY_FIELDS, SMI_QUERY_FORMAT, smi_csv, smi_failure, smi_table_cuda, smi_xml, xid_line};
pub use sysfs::{
    block_disk, net_speed_mbps, numa_nodes, peermem_loaded, rdma_rate_gbps, rdma_state, rotational,
    sysfs_word, uevent_driver,
};
pub use system::{cpuinfo, df, getconf_glibc, ldd_version, meminfo_total_kib};
pub use toolkit::{cdi_spec_kind, ldconfig, nvcc_version, nvidia_ctk_version, proc_driver_version};
pub use topo::smi_topo;

/// A reported value, or `None` where the tool says it has none.
///
/// nvidia-smi writes `N/A`, `Not Supported`, `Unknown Error`... in XML and the table, and
/// the same words in brackets in CSV (`[N/A]`, `[Not Supported]`, `[Insufficient
/// Permissions]`, `[GPU is lost]`). Any fully bracketed CSV value is one of these markers:
/// no real value (name, UUID, bus id, number) is ever bracketed.
pub(crate) fn present(raw: &str) -> Option<&str> {
    let v = raw.trim();
    if v.len() >= 2 && v.starts_with('[') && v.ends_with(']') {
        return None;
    }
    const ABSENT: [&str; 7] = [
        "",
        "N/A",
        "Not Supported",
        "Unknown Error",
        "Insufficient Permissions",
        "Not Available",
        "Unknown",
    ];
    if ABSENT.iter().any(|a| v.eq_ignore_ascii_case(a)) {
        None
    } else {
        Some(v)
    }
}

/// `Enabled` / `Disabled` as nvidia-smi writes modes; anything else (`N/A`) is unknown.
pub(crate) fn enabled(raw: &str) -> Option<bool> {
    match present(raw)? {
        v if v.eq_ignore_ascii_case("Enabled") => Some(true),
        v if v.eq_ignore_ascii_case("Disabled") => Some(false),
        _ => None,
    }
}

/// A whole number, optionally followed by a unit nvidia-smi appends (`81559 MiB`, `16x`).
///
/// `units` lists the suffixes accepted; a different unit gives `None` rather than a number
/// in the wrong unit.
pub(crate) fn number_with_unit(raw: &str, units: &[&str]) -> Option<u64> {
    let v = present(raw)?;
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, rest) = v.split_at(digits_end);
    let rest = rest.trim();
    if !rest.is_empty() && !units.iter().any(|u| rest.eq_ignore_ascii_case(u)) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
pub(crate) use crate::formats::{fixture, v};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_markers() {
        for v in [
            "N/A",
            "[N/A]",
            " [Not Supported] ",
            "Not Supported",
            "Unknown Error",
            "[GPU is lost]",
            "",
        ] {
            assert_eq!(present(v), None, "{v:?}");
        }
        assert_eq!(present(" 535.104.05 "), Some("535.104.05"));
        assert_eq!(present("["), Some("["));
    }

    #[test]
    fn numbers_with_units() {
        assert_eq!(number_with_unit("81559 MiB", &["MiB"]), Some(81559));
        assert_eq!(number_with_unit("81559", &["MiB"]), Some(81559));
        assert_eq!(number_with_unit("80 GiB", &["MiB"]), None);
        assert_eq!(number_with_unit("16x", &["x"]), Some(16));
        assert_eq!(number_with_unit("[N/A]", &["x"]), None);
        assert_eq!(number_with_unit("x", &["x"]), None);
        assert_eq!(number_with_unit("99999999999999999999999", &[]), None);
    }

    #[test]
    fn modes() {
        assert_eq!(enabled("Enabled"), Some(true));
        assert_eq!(enabled("[N/A]"), None);
        assert_eq!(enabled("Disabled"), Some(false));
        assert_eq!(enabled("Pending"), None);
    }

    #[test]
    fn dotted_prefixes() {
        assert_eq!(dotted_prefix("12.5, V12.5.82"), "12.5");
        assert_eq!(dotted_prefix(" 2.35."), "2.35");
        assert_eq!(dotted_prefix("abc"), "");
    }
}
