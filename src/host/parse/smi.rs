//! `nvidia-smi`: the XML report (`-q -x`), the `--query-gpu` CSV gpuenv runs, the CUDA
//! version in the table header, and what it prints when it fails.
//!
//! From the XML it reads, per GPU, the identity and PCIe link (including which end, card
//! or slot, limits the generation), ECC and MIG, and the state at the time of the report
//! ([`GpuState`]: memory used, utilization, performance state, power, temperature,
//! clock-event reasons, persistence mode, processes). The CSV carries no state. Reading
//! only: what an idle P8 or a power cap means is for the checks.

use roxmltree::{Document, Node, ParsingOptions};

use super::{dotted_prefix, enabled, number_with_unit, present};
use crate::host::types::{
    DriverInfo, GpuInfo, GpuProcess, GpuState, MemoryRepair, SmiFailure, SmiReport, Throttle,
};
use crate::model::{CudaVersion, DriverVersion};

/// The `--query-gpu` fields gpuenv asks for, in the order [`smi_csv`] reads them.
pub const SMI_QUERY_FIELDS: &str = "index,name,uuid,pci.bus_id,memory.total,compute_cap,driver_version,\
pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.max,pcie.link.width.current,ecc.mode.current,\
ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,mig.mode.current";

/// The `--format` that goes with [`SMI_QUERY_FIELDS`].
pub const SMI_QUERY_FORMAT: &str = "csv,noheader,nounits";

/// How many fields [`SMI_QUERY_FIELDS`] names.
const FIELD_COUNT: usize = 15;

/// The first word of a value, parsed as a version: `610.57.04` out of
/// `610.57.04 [Deprecated; ...]` (how 610-series drivers annotate the old fields).
fn version_word<T: std::str::FromStr>(raw: &str) -> Option<T> {
    present(raw)?.split_whitespace().next()?.parse().ok()
}

// ---------------------------------------------------------------------------------------
// XML
// ---------------------------------------------------------------------------------------

/// The first child element of `node` called `name`.
fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

/// The element reached from `node` through direct children named `names`.
///
/// Direct children only: a MIG-enabled GPU nests `fb_memory_usage` and ECC counts inside
/// each `mig_device`, and a descendant search would read a slice's memory as the GPU's.
fn path<'a, 'i>(node: Node<'a, 'i>, names: &[&str]) -> Option<Node<'a, 'i>> {
    names.iter().try_fold(node, |n, name| child(n, name))
}

/// The text at `names` below `node`, or `None` when absent or marked unavailable.
fn text_at<'a>(node: Node<'a, '_>, names: &[&str]) -> Option<&'a str> {
    present(path(node, names)?.text()?)
}

fn u32_at(node: Node<'_, '_>, names: &[&str], units: &[&str]) -> Option<u32> {
    number_with_unit(text_at(node, names)?, units).and_then(|n| u32::try_from(n).ok())
}

/// Parses `nvidia-smi -q -x` (DTD v10 to v13 and the undeclared 418-era documents).
///
/// GPUs are numbered in document order, which is nvidia-smi's own index order. The
/// compute capability is always `None`: no DTD version up to v13 carries it (only
/// `--query-gpu=compute_cap` does), and deriving it from the product name or
/// `product_architecture` would be a guess (`Ampere` is 8.0 or 8.6).
pub fn smi_xml(text: &str) -> Result<SmiReport, String> {
    let text = text.trim_start_matches('\u{feff}').trim_start();
    // Wrappers sometimes print a warning line before the document; skip to it.
    let text = if text.starts_with('<') {
        text
    } else {
        text.find("<?xml")
            .map(|at| &text[at..])
            .ok_or("not nvidia-smi XML: no `<?xml` declaration and no element at the start")?
    };
    let options = ParsingOptions {
        // nvidia-smi declares an external DTD (`nvsmi_device_v12.dtd`); it is not fetched.
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(text, options)
        .map_err(|e| format!("nvidia-smi XML does not parse: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(format!(
            "not nvidia-smi XML: the root element is <{}>, expected <nvidia_smi_log>",
            root.tag_name().name()
        ));
    }
    // 610-series drivers deprecate `driver_version`/`cuda_version` in favour of the KMD
    // and CUDA UMD versions; read the new names when the old ones stop holding a version.
    let driver = DriverInfo {
        version: text_at(root, &["driver_version"])
            .and_then(version_word::<DriverVersion>)
            .or_else(|| text_at(root, &["kmd_version"]).and_then(version_word)),
        cuda: text_at(root, &["cuda_version"])
            .and_then(version_word::<CudaVersion>)
            .or_else(|| text_at(root, &["cuda_umd_version"]).and_then(version_word)),
    };
    let gpus = root
        .children()
        .filter(|c| c.is_element() && c.tag_name().name() == "gpu")
        .enumerate()
        .map(|(i, gpu)| {
            let index = u32::try_from(i).map_err(|_| "more GPUs than a u32 can number".to_string())?;
            xml_gpu(index, gpu)
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(SmiReport { driver, gpus })
}

fn xml_gpu(index: u32, gpu: Node<'_, '_>) -> Result<GpuInfo, String> {
    let name = text_at(gpu, &["product_name"])
        .ok_or_else(|| format!("GPU {index} in nvidia-smi XML has no product_name"))?;
    const LINK: [&str; 2] = ["pci", "pci_gpu_link_info"];
    let link = |group: &str, leaf: &str, units: &[&str]| u32_at(gpu, &[LINK[0], LINK[1], group, leaf], units);
    let ecc = |kind: &str| path(gpu, &["ecc_errors", kind]).and_then(uncorrected);
    Ok(GpuInfo {
        index,
        name: name.to_string(),
        uuid: text_at(gpu, &["uuid"]).map(str::to_string),
        // The `id` attribute holds the same bus id; trimmed documents keep only it.
        bus_id: text_at(gpu, &["pci", "pci_bus_id"])
            .or_else(|| gpu.attribute("id").and_then(present))
            .map(str::to_string),
        memory_total_mib: text_at(gpu, &["fb_memory_usage", "total"])
            .and_then(|v| number_with_unit(v, &["MiB"])),
        compute_capability: None,
        brand: text_at(gpu, &["product_brand"]).map(str::to_string),
        pcie_gen_max: link("pcie_gen", "max_link_gen", &[]),
        pcie_gen_current: link("pcie_gen", "current_link_gen", &[]),
        pcie_width_max: link("link_widths", "max_link_width", &["x"]),
        pcie_width_current: link("link_widths", "current_link_width", &["x"]),
        ecc_uncorrected_volatile: ecc("volatile"),
        ecc_uncorrected_aggregate: ecc("aggregate"),
        ecc_enabled: text_at(gpu, &["ecc_mode", "current_ecc"]).and_then(enabled),
        mig_enabled: text_at(gpu, &["mig_mode", "current_mig"]).and_then(enabled),
        // DTD v12 on: `max_link_gen` is the lesser of the two ends; these say which end
        // holds the link back.
        pcie_gen_device_max: link("pcie_gen", "max_device_link_gen", &[]),
        pcie_gen_host_max: link("pcie_gen", "max_host_link_gen", &[]),
        state: xml_state(gpu),
    })
}

/// The source [`GpuState::source`] names for readings of the XML report.
pub const SMI_XML_SOURCE: &str = "nvidia-smi -q -x";

/// What the GPU was doing when the report was taken; `None` when the document says
/// nothing about it (a trimmed capture).
fn xml_state(gpu: Node<'_, '_>) -> Option<GpuState> {
    // DTD v12 renamed `power_readings` to `gpu_power_readings` (beside new module and
    // memory readings, which are not the GPU's).
    let power = child(gpu, "gpu_power_readings").or_else(|| child(gpu, "power_readings"));
    let power_at =
        |names: &[&str]| power.and_then(|p| names.iter().find_map(|n| text_at(p, &[n]).and_then(watts)));
    let state = GpuState {
        source: SMI_XML_SOURCE.to_string(),
        memory_used_mib: text_at(gpu, &["fb_memory_usage", "used"])
            .and_then(|v| number_with_unit(v, &["MiB"])),
        utilization_pct: u32_at(gpu, &["utilization", "gpu_util"], &["%"]),
        // DTD v13 drivers write "Requested functionality has been deprecated" in
        // `power_state`; only a `P<n>` is a state.
        pstate: text_at(gpu, &["performance_state"])
            .and_then(pstate)
            .or_else(|| power.and_then(|p| text_at(p, &["power_state"])).and_then(pstate)),
        // 590-series drivers drop `power_draw` for an instant and an averaged reading; the
        // instant one is what "now" means.
        power_draw_w: power_at(&["power_draw", "instant_power_draw", "average_power_draw"]),
        // v11's `power_limit` is the one set; `enforced_power_limit` is the one applied
        // (lower when another limit, such as the board's, wins).
        power_limit_w: power_at(&["current_power_limit", "enforced_power_limit", "power_limit"]),
        power_default_limit_w: power_at(&["default_power_limit"]),
        temperature_c: u32_at(gpu, &["temperature", "gpu_temp"], &["C"]),
        // Newer drivers give only `gpu_temp_slow_tlimit_threshold`, relative to a limit
        // they do not print; adding it to anything would be a guess, so it is not read.
        temperature_slowdown_c: u32_at(gpu, &["temperature", "gpu_temp_slow_threshold"], &["C"]),
        throttle: child(gpu, "clocks_event_reasons")
            .or_else(|| child(gpu, "clocks_throttle_reasons"))
            .and_then(throttle_reasons),
        persistence_mode: text_at(gpu, &["persistence_mode"]).and_then(enabled),
        processes: child(gpu, "processes").and_then(processes),
        repair: repair(gpu),
    };
    let empty = GpuState {
        source: state.source.clone(),
        ..GpuState::default()
    };
    (state != empty).then_some(state)
}

/// `retired_pages` and `remapped_rows`, and whether MIG and ECC exist on the GPU.
/// Ampere and later GPUs remap rows instead of retiring pages, so their `retired_pages`
/// reads `N/A`; pre-Ampere GPUs have no `remapped_rows`.
fn repair(gpu: Node<'_, '_>) -> Option<MemoryRepair> {
    let yes_no = |names: &[&str]| {
        text_at(gpu, names).and_then(|v| match v.trim() {
            v if v.eq_ignore_ascii_case("yes") => Some(true),
            v if v.eq_ignore_ascii_case("no") => Some(false),
            _ => None,
        })
    };
    let whole = |names: &[&str]| text_at(gpu, names).and_then(|v| number_with_unit(v, &[]));
    let not_available = |names: &[&str]| {
        path(gpu, names)
            .and_then(|n| n.text())
            .map(|t| t.trim().eq_ignore_ascii_case("N/A"))
    };
    let r = MemoryRepair {
        retired_double_bit: whole(&["retired_pages", "double_bit_retirement", "retired_count"]),
        retired_single_bit: whole(&["retired_pages", "multiple_single_bit_retirement", "retired_count"]),
        // Drivers before the 450 series call it `pending_blacklist`; newer ones write both.
        retirement_pending: yes_no(&["retired_pages", "pending_retirement"])
            .or_else(|| yes_no(&["retired_pages", "pending_blacklist"])),
        remap_pending: yes_no(&["remapped_rows", "remapped_row_pending"]),
        remap_failure: yes_no(&["remapped_rows", "remapped_row_failure"]),
        remapped_uncorrectable: whole(&["remapped_rows", "remapped_row_unc"]),
        mig_supported: not_available(&["mig_mode", "current_mig"]).map(|na| !na),
        ecc_supported: not_available(&["ecc_mode", "current_ecc"]).map(|na| !na),
    };
    (r != MemoryRepair::default()).then_some(r)
}

/// One kernel log line's XID event: `NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has
/// fallen off the bus.` (with any timestamp or prefix before it); `None` for any other line.
pub fn xid_line(line: &str) -> Option<crate::host::XidEvent> {
    let rest = &line[line.find("NVRM: Xid")? + "NVRM: Xid".len()..];
    let rest = rest.trim_start();
    let (device, after) = match rest.strip_prefix('(') {
        Some(r) => {
            let (d, a) = r.split_once(')')?;
            (d.trim().to_string(), a.trim_start_matches(':').trim_start())
        }
        None => (String::new(), rest.trim_start_matches(':').trim_start()),
    };
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let xid = digits.parse().ok()?;
    let text = after[digits.len()..].trim_start_matches(',').trim();
    Some(crate::host::XidEvent {
        xid,
        device,
        text: crate::text::excerpt(text),
    })
}

/// `P8` as written; anything else (`Unknown`, a deprecation notice) is no state.
fn pstate(raw: &str) -> Option<String> {
    let v = present(raw)?;
    let n = v.strip_prefix('P')?;
    (!n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit())).then(|| v.to_string())
}

/// `26.84 W` in watts; a negative or non-finite number is not a reading.
fn watts(raw: &str) -> Option<f64> {
    let v = present(raw)?;
    let number = v.strip_suffix('W').unwrap_or(v).trim();
    number.parse::<f64>().ok().filter(|w| w.is_finite() && *w >= 0.0)
}

/// The active reasons of a `clocks_event_reasons` (or older `clocks_throttle_reasons`)
/// block, sorted; `None` when no reason is readable (all `N/A`).
fn throttle_reasons(block: Node<'_, '_>) -> Option<Vec<Throttle>> {
    let mut read_any = false;
    let mut active = Vec::new();
    for reason in block.children().filter(Node::is_element) {
        let tag = reason.tag_name().name();
        let Some(kind) = tag
            .strip_prefix("clocks_event_reason_")
            .or_else(|| tag.strip_prefix("clocks_throttle_reason_"))
            .and_then(throttle_kind)
        else {
            continue;
        };
        match reason.text().and_then(present) {
            Some(v) if v.eq_ignore_ascii_case("Active") => {
                read_any = true;
                active.push(kind);
            }
            Some(v) if v.eq_ignore_ascii_case("Not Active") => read_any = true,
            _ => {}
        }
    }
    active.sort();
    active.dedup();
    read_any.then_some(active)
}

/// The reason an element names, after its `clocks_event_reason_` prefix. Reasons gpuenv
/// has no name for (`unknown` in old drivers) are skipped, not guessed at.
fn throttle_kind(suffix: &str) -> Option<Throttle> {
    Some(match suffix {
        "gpu_idle" => Throttle::GpuIdle,
        "applications_clocks_setting" => Throttle::ApplicationsClocks,
        "sw_power_cap" => Throttle::SwPowerCap,
        "hw_slowdown" => Throttle::HwSlowdown,
        "hw_thermal_slowdown" => Throttle::HwThermal,
        "hw_power_brake_slowdown" => Throttle::HwPowerBrake,
        "sw_thermal_slowdown" => Throttle::SwThermal,
        "sync_boost" => Throttle::SyncBoost,
        "display_clocks_setting" => Throttle::DisplayClocks,
        _ => return None,
    })
}

/// The `<processes>` block: every `process_info` with a pid. An empty block is a reading
/// (no process); a block that holds only a marker (`N/A`) is not.
fn processes(block: Node<'_, '_>) -> Option<Vec<GpuProcess>> {
    let infos: Vec<Node<'_, '_>> = block
        .children()
        .filter(|c| c.is_element() && c.tag_name().name() == "process_info")
        .collect();
    if infos.is_empty() {
        let text = block.text().unwrap_or("").trim();
        return (text.is_empty() || text.eq_ignore_ascii_case("None")).then(Vec::new);
    }
    let listed = infos.len();
    let read: Vec<GpuProcess> = infos
        .into_iter()
        .filter_map(|p| {
            // A process without a readable pid cannot be named to anyone; skip it.
            let pid = number_with_unit(text_at(p, &["pid"])?, &[]).and_then(|n| u32::try_from(n).ok())?;
            Some(GpuProcess {
                pid,
                name: text_at(p, &["process_name"]).unwrap_or_default().to_string(),
                kind: text_at(p, &["type"]).map(str::to_string),
                // WDDM (Windows) reports `N/A`: the OS, not the driver, owns the memory.
                used_mib: text_at(p, &["used_memory"]).and_then(|v| number_with_unit(v, &["MiB"])),
            })
        })
        .collect();
    // Processes listed but none readable is not "no process".
    (listed == 0 || !read.is_empty()).then_some(read)
}

/// Uncorrected ECC errors in a `<volatile>` or `<aggregate>` block, whatever its layout:
///
/// - Kepler to Volta (`double_bit` with per-location counts and a `total`): the total, or
///   the sum of the locations where the total is unavailable.
/// - Ampere onwards (`sram_uncorrectable`, `dram_uncorrectable`; DTD v13 splits SRAM into
///   `sram_uncorrectable_parity` and `sram_uncorrectable_secded`): the sum of every
///   `*uncorrectable*` count, where a count whose whole is also listed (`sram_uncorrectable`
///   beside `sram_uncorrectable_parity`) is not added twice.
///
/// `None` when no count is available (ECC off, consumer boards), so that "unknown" is not
/// reported as "zero errors".
fn uncorrected(counts: Node<'_, '_>) -> Option<u64> {
    if let Some(double) = child(counts, "double_bit") {
        return child(double, "total")
            .and_then(count)
            .or_else(|| sum_counts(double.children().filter(Node::is_element)));
    }
    let uncorrectable = |n: &Node<'_, '_>| n.is_element() && n.tag_name().name().contains("uncorrectable");
    let wholes: Vec<&str> = counts
        .children()
        .filter(uncorrectable)
        .map(|c| c.tag_name().name())
        .collect();
    let is_part_of_listed_whole = |name: &str| {
        wholes.iter().any(|whole| {
            name.strip_prefix(whole)
                .is_some_and(|rest| rest.len() > 1 && rest.starts_with('_'))
        })
    };
    sum_counts(
        counts
            .children()
            .filter(|c| uncorrectable(c) && !is_part_of_listed_whole(c.tag_name().name())),
    )
}

/// An error count (`0`), or `None` for `N/A`.
fn count(node: Node<'_, '_>) -> Option<u64> {
    number_with_unit(node.text()?, &[])
}

/// The sum of the available counts; `None` when none is available.
fn sum_counts<'a, 'i: 'a>(nodes: impl Iterator<Item = Node<'a, 'i>>) -> Option<u64> {
    nodes
        .filter_map(count)
        .fold(None, |acc, n| Some(acc.unwrap_or(0u64).saturating_add(n)))
}

// ---------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------

/// Parses the output of
/// `nvidia-smi --query-gpu=`[`SMI_QUERY_FIELDS`]` --format=`[`SMI_QUERY_FORMAT`].
///
/// Tolerates a header line, `[N/A]`-style markers, spaces after commas, units left in
/// (`81559 MiB`, when `nounits` was not honoured) and CRLF line ends. A row with too few
/// fields or a non-numeric index is an error (the output is not from this query); a field
/// that is unavailable or unreadable is `None`. The driver version comes from the first
/// row that has one; the CUDA version is always `None`, as no query field reports it
/// (see [`smi_table_cuda`]).
pub fn smi_csv(text: &str) -> Result<SmiReport, String> {
    let mut report = SmiReport::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields = split_row(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        // `--format=csv` without `noheader`: the header names the fields.
        if fields[0].trim().eq_ignore_ascii_case("index") {
            continue;
        }
        let field = |i: usize| fields[i].as_str();
        let index = field(0)
            .parse::<u32>()
            .map_err(|_| format!("line {}: GPU index `{}` is not a number", n + 1, field(0)))?;
        let name = present(field(1)).ok_or_else(|| format!("line {}: GPU {index} has no name", n + 1))?;
        let small =
            |i: usize, units: &[&str]| number_with_unit(field(i), units).and_then(|v| u32::try_from(v).ok());
        if report.driver.version.is_none() {
            report.driver.version = version_word(field(6));
        }
        report.gpus.push(GpuInfo {
            index,
            name: name.to_string(),
            uuid: present(field(2)).map(str::to_string),
            bus_id: present(field(3)).map(str::to_string),
            memory_total_mib: number_with_unit(field(4), &["MiB"]),
            compute_capability: present(field(5)).and_then(|v| v.parse().ok()),
            brand: None,
            pcie_gen_max: small(7, &[]),
            pcie_gen_current: small(8, &[]),
            pcie_width_max: small(9, &["x"]),
            pcie_width_current: small(10, &["x"]),
            ecc_enabled: enabled(field(11)),
            ecc_uncorrected_volatile: number_with_unit(field(12), &[]),
            ecc_uncorrected_aggregate: number_with_unit(field(13), &[]),
            mig_enabled: enabled(field(14)),
            ..GpuInfo::default()
        });
    }
    Ok(report)
}

/// Splits one CSV row into [`FIELD_COUNT`] trimmed fields.
///
/// nvidia-smi neither quotes nor escapes. Only the name is free text, so when a row has
/// more commas than fields the extra ones belong to the name.
fn split_row(line: &str) -> Result<Vec<String>, String> {
    let parts: Vec<&str> = line.split(',').collect();
    if parts.len() < FIELD_COUNT {
        return Err(format!(
            "expected {FIELD_COUNT} comma-separated fields ({SMI_QUERY_FIELDS}), found {}: `{line}`",
            parts.len()
        ));
    }
    let extra = parts.len() - FIELD_COUNT;
    let mut fields = Vec::with_capacity(FIELD_COUNT);
    fields.push(parts[0].trim().to_string());
    fields.push(parts[1..=1 + extra].join(",").trim().to_string());
    fields.extend(parts[2 + extra..].iter().map(|p| p.trim().to_string()));
    Ok(fields)
}

// ---------------------------------------------------------------------------------------
// Table and --version
// ---------------------------------------------------------------------------------------

/// The CUDA version the driver supports, from the header of the plain `nvidia-smi` table
/// (`CUDA Version: 12.2`; `CUDA UMD Version: 13.3` from the 610 series on) or from
/// `nvidia-smi --version` (`CUDA Version : 13.1`, `CUDA UMD version : 13.3`).
///
/// `None` when no label is followed by a version (`CUDA Version: N/A`, or the 610
/// series' `CUDA version : Deprecated, see "CUDA UMD version" instead`).
pub fn smi_table_cuda(text: &str) -> Option<CudaVersion> {
    const LABELS: [&str; 2] = ["cuda umd version", "cuda version"];
    for line in text.lines() {
        // ASCII lowercasing keeps byte offsets, so positions in `lower` index `line`.
        let lower = line.to_ascii_lowercase();
        for label in LABELS {
            let mut from = 0;
            while let Some(at) = lower[from..].find(label) {
                from += at + label.len();
                let Some(value) = line[from..].trim_start().strip_prefix(':') else {
                    continue;
                };
                if let Ok(v) = dotted_prefix(value).parse() {
                    return Some(v);
                }
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Failures
// ---------------------------------------------------------------------------------------

/// Why `nvidia-smi` gave no report, from its exit status and what it printed.
///
/// `exit_code` is `None` when it was stopped by a signal (a timeout). Exit status 127 with
/// a "not found" message (or nothing) is a shell's "command not found": [`SmiFailure::NotFound`].
pub fn smi_failure(exit_code: Option<i32>, stdout: &str, stderr: &str) -> SmiFailure {
    let all = format!("{stderr}\n{stdout}");
    let lower = all.to_ascii_lowercase();
    if lower.contains("driver/library version mismatch") {
        // Newer drivers add the user-space library's version on the next line.
        const LABEL: &str = "nvml library version:";
        let nvml_version = all.lines().find_map(|l| {
            let l = l.trim();
            let head = l.get(..LABEL.len())?;
            if !head.eq_ignore_ascii_case(LABEL) {
                return None;
            }
            present(&l[LABEL.len()..]).map(str::to_string)
        });
        return SmiFailure::DriverLibraryMismatch { nvml_version };
    }
    if lower.contains("couldn't communicate with the nvidia driver")
        || lower.contains("could not communicate with the nvidia driver")
    {
        return SmiFailure::NoDriver;
    }
    if lower.contains("no devices were found") {
        return SmiFailure::NoDevices;
    }
    if exit_code == Some(127) && (lower.contains("not found") || all.trim().is_empty()) {
        return SmiFailure::NotFound;
    }
    let first_line = |s: &str| {
        s.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    };
    let message = first_line(stderr)
        .or_else(|| first_line(stdout))
        .unwrap_or_else(|| match exit_code {
            Some(code) => format!("nvidia-smi exited with status {code} and printed nothing"),
            None => "nvidia-smi was stopped by a signal and printed nothing".to_string(),
        });
    SmiFailure::Other { message }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture, v};
    use super::*;
    use crate::model::ComputeCapability;

    #[test]
    fn query_fields_count() {
        assert_eq!(SMI_QUERY_FIELDS.split(',').count(), FIELD_COUNT);
        assert!(!SMI_QUERY_FIELDS.contains(' '));
    }

    #[test]
    fn xid_lines_as_the_driver_writes_them() {
        let e = xid_line("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1896, GPU has fallen off the bus.")
            .unwrap();
        assert_eq!((e.xid, e.device.as_str()), (79, "PCI:0000:3b:00"));
        assert_eq!(e.text, "pid=1896, GPU has fallen off the bus.");
        let e = xid_line("kernel: NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.").unwrap();
        assert_eq!(e.xid, 63);
        assert_eq!(
            xid_line("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05"),
            None
        );
        assert_eq!(xid_line("NVRM: Xid (PCI:0000:3b:00): not a number"), None);
    }

    /// Memory repairs as each generation reports them: a V100 (page retirement, the old
    /// `pending_blacklist`, two pages retired after double-bit errors), an A100 (row
    /// remapping; `retired_pages` all N/A), a GeForce card (no MIG, no ECC).
    #[test]
    fn memory_repairs_and_features_from_real_captures() {
        let repair = |text: &str| {
            smi_xml(text).unwrap().gpus[0]
                .state
                .clone()
                .unwrap()
                .repair
                .unwrap()
        };
        let v100 = repair(fixture!(
            "nvidia-smi-q-x/tesla-v100-sxm2-driver-418.87.01-dtd-v10.xml"
        ));
        assert_eq!(v100.retired_double_bit, Some(2));
        assert_eq!(v100.retired_single_bit, Some(0));
        assert_eq!(v100.retirement_pending, Some(false));
        assert_eq!((v100.remap_pending, v100.remap_failure), (None, None));
        let a100 = repair(fixture!(
            "nvidia-smi-q-x/a100-sxm4-80gb-driver-535.104.05-dtd-v12.xml"
        ));
        assert_eq!((a100.retired_double_bit, a100.retirement_pending), (None, None));
        assert_eq!(
            (a100.remap_pending, a100.remap_failure),
            (Some(false), Some(false))
        );
        assert_eq!(a100.remapped_uncorrectable, Some(0));
        assert_eq!((a100.mig_supported, a100.ecc_supported), (Some(true), Some(true)));
        let pro = repair(fixture!(
            "nvidia-smi-q-x/rtx-pro-6000-blackwell-maxq-driver-590.44.01-dtd-v13.xml"
        ));
        assert_eq!(pro.mig_supported, Some(false));
        assert_eq!((pro.remap_pending, pro.remap_failure), (Some(false), Some(false)));
        let geforce = repair(fixture!(
            "nvidia-smi-q-x/2x-mixed-rtx-4090-rtx-3090-driver-545.29.06-dtd-v12.xml"
        ));
        assert_eq!(
            (geforce.mig_supported, geforce.ecc_supported),
            (Some(false), Some(false))
        );
    }

    #[test]
    fn xml_8x_h100_sxm() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/8x-h100-sxm5-80gb-driver-550.90.07-dtd-v12.xml"
        ))
        .unwrap();
        assert_eq!(r.driver.version, Some(v("550.90.07")));
        assert_eq!(r.driver.cuda, Some(v("12.4")));
        assert_eq!(r.gpus.len(), 8);
        let buses: Vec<_> = r.gpus.iter().map(|g| g.bus_id.clone().unwrap()).collect();
        assert_eq!(buses[0], "00000000:18:00.0");
        assert_eq!(buses[7], "00000000:DB:00.0");
        for (i, g) in r.gpus.iter().enumerate() {
            assert_eq!(g.index as usize, i);
            assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
            assert_eq!(g.brand.as_deref(), Some("NVIDIA"));
            assert_eq!(g.memory_total_mib, Some(81559));
            assert_eq!(g.compute_capability, None, "the XML has no compute capability");
            assert_eq!((g.pcie_gen_max, g.pcie_gen_current), (Some(5), Some(5)));
            assert_eq!((g.pcie_width_max, g.pcie_width_current), (Some(16), Some(16)));
            assert_eq!(g.ecc_enabled, Some(true));
            assert_eq!(g.mig_enabled, Some(false));
            assert!(g.uuid.as_deref().unwrap().starts_with("GPU-"));
        }
        // GPU 5 has two uncorrectable DRAM errors since the driver loaded, and one more in
        // its lifetime before that (SRAM).
        assert_eq!(r.gpus[5].ecc_uncorrected_volatile, Some(2));
        assert_eq!(r.gpus[5].ecc_uncorrected_aggregate, Some(3));
        assert_eq!(r.gpus[0].ecc_uncorrected_volatile, Some(0));
    }

    #[test]
    fn xml_single_a100() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/a100-sxm4-80gb-driver-535.104.05-dtd-v12.xml"
        ))
        .unwrap();
        assert_eq!(r.driver.version, Some(v("535.104.05")));
        assert_eq!(r.driver.cuda, Some(v("12.2")));
        let [g] = r.gpus.as_slice() else { panic!("one GPU") };
        assert_eq!(g.name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(g.memory_total_mib, Some(81920));
        assert_eq!((g.pcie_gen_max, g.pcie_gen_current), (Some(4), Some(4)));
        assert_eq!(g.ecc_enabled, Some(true));
        assert_eq!(g.ecc_uncorrected_volatile, Some(0));
        assert_eq!(g.ecc_uncorrected_aggregate, Some(0));
        assert_eq!(g.mig_enabled, Some(false));
    }

    #[test]
    fn xml_mixed_consumer_pair() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/2x-mixed-rtx-4090-rtx-3090-driver-545.29.06-dtd-v12.xml"
        ))
        .unwrap();
        assert_eq!(r.gpus.len(), 2);
        let (a, b) = (&r.gpus[0], &r.gpus[1]);
        assert_eq!(a.name, "NVIDIA GeForce RTX 4090");
        assert_eq!(b.name, "NVIDIA GeForce RTX 3090");
        assert_eq!(a.brand.as_deref(), Some("GeForce"));
        assert_eq!(a.memory_total_mib, Some(24564));
        assert_eq!(b.memory_total_mib, Some(24576));
        // Consumer boards: no ECC, no MIG, no counts: unknown, not zero.
        for g in [a, b] {
            assert_eq!(g.ecc_enabled, None);
            assert_eq!(g.ecc_uncorrected_volatile, None);
            assert_eq!(g.ecc_uncorrected_aggregate, None);
            assert_eq!(g.mig_enabled, None);
        }
        // The 3090 sits in an x4 slot that idles at gen 1.
        assert_eq!((b.pcie_gen_max, b.pcie_gen_current), (Some(4), Some(1)));
        assert_eq!((b.pcie_gen_device_max, b.pcie_gen_host_max), (Some(4), Some(4)));
        assert_eq!(a.state.as_ref().unwrap().pstate.as_deref(), Some("P0"));
        assert_eq!((b.pcie_width_max, b.pcie_width_current), (Some(16), Some(4)));
    }

    #[test]
    fn xml_mig_enabled_reads_the_gpu_not_its_slices() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/h100-pcie-mig-enabled-driver-560.35.03-dtd-v13.xml"
        ))
        .unwrap();
        let [g] = r.gpus.as_slice() else { panic!("one GPU") };
        assert_eq!(g.mig_enabled, Some(true));
        assert_eq!(g.memory_total_mib, Some(81559), "not a MIG slice's 9984 MiB");
        // DTD v13 splits SRAM uncorrectable into parity and SEC-DED: 1 + 1 + DRAM 0.
        assert_eq!(g.ecc_uncorrected_volatile, Some(2));
        assert_eq!(g.ecc_uncorrected_aggregate, Some(2));
        assert_eq!(r.driver.cuda, Some(v("12.6")));
    }

    #[test]
    fn xml_v10_double_bit_totals() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/tesla-v100-sxm2-driver-418.87.01-dtd-v10.xml"
        ))
        .unwrap();
        let [g] = r.gpus.as_slice() else { panic!("one GPU") };
        assert_eq!(g.name, "Tesla V100-SXM2-16GB");
        assert_eq!(g.brand.as_deref(), Some("Tesla"));
        assert_eq!(g.ecc_uncorrected_volatile, Some(0));
        assert_eq!(
            g.ecc_uncorrected_aggregate,
            Some(4),
            "the double_bit total, not single_bit"
        );
        assert_eq!(g.mig_enabled, None, "no mig_mode in DTD v10");
        assert_eq!(r.driver.cuda, Some(v("10.1")));
    }

    /// A Gen5 card in a Gen4 slot, idle at Gen1 in P8, one process holding most of its
    /// memory; DTD v13 (instant/average power, relative temperature limits only).
    #[test]
    fn xml_state_v13_gen5_card_in_gen4_slot() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/rtx-pro-6000-blackwell-maxq-driver-590.44.01-dtd-v13.xml"
        ))
        .unwrap();
        let [g] = r.gpus.as_slice() else { panic!("one GPU") };
        assert_eq!((g.pcie_gen_device_max, g.pcie_gen_host_max), (Some(5), Some(4)));
        assert_eq!((g.pcie_gen_max, g.pcie_gen_current), (Some(4), Some(1)));
        let s = g.state.as_ref().unwrap();
        assert_eq!(s.source, "nvidia-smi -q -x");
        assert_eq!(s.pstate.as_deref(), Some("P8"));
        assert_eq!(s.memory_used_mib, Some(65720));
        assert_eq!(s.utilization_pct, Some(0));
        assert_eq!(s.power_draw_w, Some(3.99), "the instant reading");
        assert_eq!(
            (s.power_limit_w, s.power_default_limit_w),
            (Some(300.0), Some(300.0))
        );
        assert_eq!(s.temperature_c, Some(24));
        assert_eq!(s.temperature_slowdown_c, None, "only a relative tlimit is given");
        assert_eq!(s.persistence_mode, Some(true));
        assert_eq!(s.throttle, Some(vec![]), "every reason reads `Not Active`");
        assert_eq!(
            s.processes.as_deref(),
            Some(
                &[GpuProcess {
                    pid: 116860,
                    name: "/root/src/llama.cpp/build/bin/llama-server".into(),
                    kind: Some("C".into()),
                    used_mib: Some(65710),
                }][..]
            )
        );
    }

    /// The software power cap holds the clocks at idle; `power_state` is a deprecation
    /// notice, not a state.
    #[test]
    fn xml_state_v13_active_power_cap() {
        let r = smi_xml(fixture!(
            "nvidia-smi-q-x/geforce-rtx-3090-driver-590.44.01-dtd-v13.xml"
        ))
        .unwrap();
        let [g] = r.gpus.as_slice() else { panic!("one GPU") };
        assert_eq!((g.pcie_gen_device_max, g.pcie_gen_host_max), (Some(4), Some(4)));
        let s = g.state.as_ref().unwrap();
        assert_eq!(s.throttle.as_deref(), Some(&[Throttle::SwPowerCap][..]));
        assert!(!Throttle::SwPowerCap.is_fault());
        assert_eq!(s.pstate.as_deref(), Some("P8"));
        assert_eq!(s.temperature_c, Some(32));
        assert_eq!(s.temperature_slowdown_c, Some(95));
        assert_eq!(s.power_draw_w, Some(35.15));
        assert_eq!(s.power_limit_w, Some(350.0));
        assert_eq!(s.memory_used_mib, Some(7));
        assert_eq!(s.processes, Some(vec![]), "an empty <processes> is no process");
    }

    /// DTD v11: `power_readings`, `clocks_throttle_reasons`, a graphics process.
    #[test]
    fn xml_state_v11() {
        let r = smi_xml(fixture!("nvidia-smi-q-x/a10g-driver-515.105.01-dtd-v11.xml")).unwrap();
        let [g] = r.gpus.as_slice() else { panic!("one GPU") };
        assert_eq!(
            (g.pcie_gen_device_max, g.pcie_gen_host_max),
            (None, None),
            "not in v11"
        );
        let s = g.state.as_ref().unwrap();
        assert_eq!(s.pstate.as_deref(), Some("P8"));
        assert_eq!(s.power_draw_w, Some(25.58));
        assert_eq!(
            (s.power_limit_w, s.power_default_limit_w),
            (Some(300.0), Some(300.0))
        );
        assert_eq!(s.temperature_c, Some(17));
        assert_eq!(s.temperature_slowdown_c, Some(95));
        assert_eq!(s.persistence_mode, Some(false));
        assert_eq!(s.memory_used_mib, Some(22));
        assert_eq!(s.throttle.as_deref(), Some(&[Throttle::GpuIdle][..]));
        let p = s.processes.as_deref().unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].pid, p[0].name.as_str()), (725, "/usr/lib/xorg/Xorg"));
        assert_eq!((p[0].kind.as_deref(), p[0].used_mib), (Some("G"), Some(22)));
    }

    /// Markers are unknowns, trimmed documents have no state, a missing `<processes>` is
    /// not "no process", and odd values are not misread.
    #[test]
    fn xml_state_markers_and_absence() {
        let doc = |gpu: &str| {
            smi_xml(&format!(
                "<nvidia_smi_log><gpu id=\"0\"><product_name>X</product_name>{gpu}</gpu></nvidia_smi_log>"
            ))
            .unwrap()
            .gpus
            .remove(0)
        };
        assert_eq!(doc("").state, None);
        let g = doc(
            "<persistence_mode>N/A</persistence_mode><performance_state>Unknown</performance_state>\
             <fb_memory_usage><used>[N/A]</used></fb_memory_usage>\
             <power_readings><power_state>P2</power_state><power_draw>Not Supported</power_draw>\
             <power_limit>-5.00 W</power_limit><enforced_power_limit>250.00 W</enforced_power_limit></power_readings>\
             <clocks_throttle_reasons><clocks_throttle_reason_gpu_idle>N/A</clocks_throttle_reason_gpu_idle>\
             <clocks_throttle_reason_unknown>Active</clocks_throttle_reason_unknown></clocks_throttle_reasons>\
             <temperature><gpu_temp>N/A</gpu_temp><gpu_temp_slow_threshold>-2 C</gpu_temp_slow_threshold></temperature>\
             <processes>N/A</processes>",
        );
        let s = g.state.unwrap();
        assert_eq!(s.pstate.as_deref(), Some("P2"), "from power_state");
        assert_eq!(s.power_limit_w, Some(250.0));
        assert_eq!(
            (
                s.memory_used_mib,
                s.power_draw_w,
                s.temperature_c,
                s.temperature_slowdown_c
            ),
            (None, None, None, None)
        );
        assert_eq!((s.persistence_mode, s.throttle, s.processes), (None, None, None));
        let g = doc(
            "<processes><process_info><pid>N/A</pid></process_info></processes>\
             <clocks_event_reasons><clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>\
             <clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown></clocks_event_reasons>",
        );
        let s = g.state.unwrap();
        assert_eq!(s.processes, None, "listed but unreadable is not none");
        assert_eq!(s.throttle, Some(vec![Throttle::HwSlowdown, Throttle::HwThermal]));
        assert_eq!(doc("<processes />").state.unwrap().processes, Some(vec![]));
    }

    #[test]
    fn xml_errors_are_clear() {
        assert!(smi_xml("").unwrap_err().contains("not nvidia-smi XML"));
        assert!(
            smi_xml("No devices were found")
                .unwrap_err()
                .contains("not nvidia-smi XML")
        );
        assert!(smi_xml("<foo/>").unwrap_err().contains("<foo>"));
        assert!(
            smi_xml("<nvidia_smi_log><gpu>")
                .unwrap_err()
                .contains("does not parse")
        );
        let e =
            smi_xml("<nvidia_smi_log><gpu id=\"0\"><product_name>N/A</product_name></gpu></nvidia_smi_log>");
        assert!(e.unwrap_err().contains("no product_name"));
        // No GPUs is a report with no GPUs; the caller decides what that means.
        let r = smi_xml("<?xml version=\"1.0\" ?>\n<nvidia_smi_log><driver_version>550.54.15</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>").unwrap();
        assert!(r.gpus.is_empty());
        assert_eq!(r.driver.version, Some(v("550.54.15")));
    }

    #[test]
    fn xml_deprecated_driver_fields_fall_back_to_kmd() {
        let xml = "<nvidia_smi_log><driver_version>Deprecated</driver_version>\
                   <kmd_version>610.57.04</kmd_version><cuda_version>13.3 [Deprecated]</cuda_version></nvidia_smi_log>";
        let r = smi_xml(xml).unwrap();
        assert_eq!(r.driver.version, Some(v("610.57.04")));
        assert_eq!(r.driver.cuda, Some(v("13.3")));
    }

    #[test]
    fn csv_8x_h100() {
        let r = smi_csv(fixture!("nvidia-smi-query-gpu/8x-h100-nounits.csv")).unwrap();
        assert_eq!(r.driver.version, Some(v("550.90.07")));
        assert_eq!(r.driver.cuda, None);
        assert_eq!(r.gpus.len(), 8);
        let g = &r.gpus[3];
        assert_eq!(g.index, 3);
        assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(g.bus_id.as_deref(), Some("00000000:5D:00.0"));
        assert_eq!(g.memory_total_mib, Some(81559));
        assert_eq!(g.compute_capability, Some(ComputeCapability::new(9, 0)));
        assert_eq!(
            (
                g.pcie_gen_max,
                g.pcie_gen_current,
                g.pcie_width_max,
                g.pcie_width_current
            ),
            (Some(5), Some(5), Some(16), Some(16))
        );
        assert_eq!(g.ecc_enabled, Some(true));
        assert_eq!(g.mig_enabled, Some(false));
        assert_eq!(r.gpus[5].ecc_uncorrected_volatile, Some(2));
        assert_eq!(r.gpus[5].ecc_uncorrected_aggregate, Some(3));
    }

    #[test]
    fn csv_markers_units_and_header() {
        let r = smi_csv(fixture!("nvidia-smi-query-gpu/2x-mixed-na-units.csv")).unwrap();
        assert_eq!(r.driver.version, Some(v("545.29.06")));
        assert_eq!(r.gpus.len(), 2);
        let (a, b) = (&r.gpus[0], &r.gpus[1]);
        assert_eq!(a.name, "NVIDIA GeForce RTX 4090");
        assert_eq!(a.memory_total_mib, Some(24564), "units left in are read");
        assert_eq!(a.compute_capability, Some(ComputeCapability::new(8, 9)));
        assert_eq!(b.compute_capability, Some(ComputeCapability::new(8, 6)));
        assert_eq!(b.pcie_width_current, Some(4));
        for g in [a, b] {
            assert_eq!(g.ecc_enabled, None);
            assert_eq!(g.ecc_uncorrected_volatile, None);
            assert_eq!(g.ecc_uncorrected_aggregate, None);
            assert_eq!(g.mig_enabled, None);
        }
    }

    #[test]
    fn csv_name_with_comma_and_bad_rows() {
        let row = "0, Some, Odd GPU, GPU-1, 00000000:01:00.0, 1024, 7.5, 550.54.15, 3, 3, 16, 16, Disabled, [N/A], [N/A], [N/A]";
        let r = smi_csv(row).unwrap();
        assert_eq!(r.gpus[0].name, "Some, Odd GPU");
        assert_eq!(r.gpus[0].uuid.as_deref(), Some("GPU-1"));
        assert_eq!(r.gpus[0].ecc_enabled, Some(false));
        assert!(
            smi_csv("No devices were found")
                .unwrap_err()
                .contains("expected 15")
        );
        let e = smi_csv("x, a, b, c, d, e, f, g, h, i, j, k, l, m, n").unwrap_err();
        assert!(e.contains("index `x`"), "{e}");
        assert_eq!(smi_csv("\n\n").unwrap(), SmiReport::default());
    }

    #[test]
    fn table_cuda() {
        assert_eq!(
            smi_table_cuda(fixture!("nvidia-smi/h100-driver-550.90.07.txt")),
            Some(v("12.4"))
        );
        assert_eq!(
            smi_table_cuda(fixture!("nvidia-smi/rtx-4090-driver-610.43.02-umd.txt")),
            Some(v("13.3"))
        );
        assert_eq!(
            smi_table_cuda(fixture!("nvidia-smi-version/driver-550.90.07.txt")),
            Some(v("12.4"))
        );
        assert_eq!(
            smi_table_cuda("| NVIDIA-SMI 450.51.06    Driver Version: 450.51.06    CUDA Version: N/A |"),
            None
        );
        assert_eq!(
            smi_table_cuda(
                "CUDA version        : Deprecated, see \"CUDA UMD version\" instead\nCUDA UMD version    : 13.3\n"
            ),
            Some(v("13.3"))
        );
        assert_eq!(smi_table_cuda(""), None);
    }

    #[test]
    fn failures() {
        use SmiFailure::*;
        let f = |p: &str| smi_failure(Some(18), p, "");
        assert_eq!(
            f(fixture!("nvidia-smi-errors/nvml-mismatch.txt")),
            DriverLibraryMismatch { nvml_version: None }
        );
        assert_eq!(
            f(fixture!("nvidia-smi-errors/nvml-mismatch-nvml-550.127.txt")),
            DriverLibraryMismatch {
                nvml_version: Some("550.127".into())
            }
        );
        assert_eq!(
            smi_failure(Some(9), "", fixture!("nvidia-smi-errors/no-driver.txt")),
            NoDriver
        );
        assert_eq!(
            smi_failure(Some(6), fixture!("nvidia-smi-errors/no-devices.txt"), ""),
            NoDevices
        );
        assert_eq!(
            smi_failure(
                Some(255),
                fixture!("nvidia-smi-errors/nvml-unknown-error.txt"),
                ""
            ),
            Other {
                message: "Failed to initialize NVML: Unknown Error".into()
            }
        );
        assert_eq!(
            smi_failure(Some(127), "", "sh: 1: nvidia-smi: not found\n"),
            NotFound
        );
        assert_eq!(
            smi_failure(None, "", ""),
            Other {
                message: "nvidia-smi was stopped by a signal and printed nothing".into()
            }
        );
        assert_eq!(
            smi_failure(Some(3), "\n  \n", ""),
            Other {
                message: "nvidia-smi exited with status 3 and printed nothing".into()
            }
        );
    }
}
