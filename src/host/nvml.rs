//! NVML, loaded at run time. A machine without the library (no driver, or a container
//! without the NVIDIA runtime) is normal: that is "unavailable", and the next source answers.
//! NVML comes first because it is what CUDA itself asks, it is fast, and it reports the
//! driver's CUDA version exactly (nvidia-smi's table only prints it).
//!
//! Besides identity, PCIe link, ECC and MIG, each GPU's state is read ([`GpuState`], source
//! `nvml`). nvml-wrapper 0.11 exposes no call for the card's own maximum PCIe generation
//! (`nvmlDeviceGetGpuMaxPcieLinkGeneration` is in its raw bindings only), so
//! `pcie_gen_device_max` and `pcie_gen_host_max` stay `None` here and the probe fills them
//! from `nvidia-smi -q -x`. NVML knows processes by pid only: their names are left empty,
//! and the probe fills them from the same XML.
//!
//! Must not: read files or run commands (the probe does, through the seam).

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, PerformanceState, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;

use super::system::NvmlProbe;
use super::types::{GpuInfo, GpuProcess, GpuState, Throttle};
use crate::model::ComputeCapability;

/// Reads NVML, or says why it could not.
pub fn read() -> NvmlProbe {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(NvmlError::LibloadingError(e)) => {
            return NvmlProbe::Unavailable {
                reason: format!("libnvidia-ml.so.1 not loadable: {e}"),
            };
        }
        Err(NvmlError::LibraryNotFound) => {
            return NvmlProbe::Unavailable {
                reason: "libnvidia-ml.so.1 not found".into(),
            };
        }
        Err(e) => return NvmlProbe::Failed { error: e.to_string() },
    };
    let driver = match nvml.sys_driver_version() {
        Ok(d) => d,
        Err(e) => return NvmlProbe::Failed { error: e.to_string() },
    };
    let cuda_driver = nvml.sys_cuda_driver_version().ok();
    let count = nvml.device_count().unwrap_or(0);
    let mut gpus = Vec::new();
    for i in 0..count {
        let Ok(d) = nvml.device_by_index(i) else { continue };
        let cc = d.cuda_compute_capability().ok().and_then(|c| {
            ComputeCapability::parse_nvcc(&format!("sm_{}{}", c.major, c.minor))
                .ok()
                .map(|(cc, _)| cc)
        });
        gpus.push(GpuInfo {
            index: i,
            name: d.name().unwrap_or_default(),
            uuid: d.uuid().ok(),
            bus_id: d.pci_info().ok().map(|p| p.bus_id),
            memory_total_mib: d.memory_info().ok().map(|m| m.total / (1024 * 1024)),
            compute_capability: cc,
            brand: d.brand().ok().map(|b| format!("{b:?}")),
            pcie_gen_max: d.max_pcie_link_gen().ok(),
            pcie_gen_current: d.current_pcie_link_gen().ok(),
            pcie_width_max: d.max_pcie_link_width().ok(),
            pcie_width_current: d.current_pcie_link_width().ok(),
            ecc_uncorrected_volatile: d
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                .ok(),
            ecc_uncorrected_aggregate: d
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
                .ok(),
            ecc_enabled: d.is_ecc_enabled().ok().map(|e| e.currently_enabled),
            mig_enabled: d.mig_mode().ok().map(|m| m.current == 1),
            state: Some(state(&d)),
            ..GpuInfo::default()
        });
    }
    NvmlProbe::Read {
        driver,
        cuda_driver,
        gpus,
    }
}

/// The GPU's state as NVML reports it; each reading that fails (not supported, no
/// permission) is `None`.
fn state(d: &Device<'_>) -> GpuState {
    const MIB: u64 = 1024 * 1024;
    let watts = |mw: u32| f64::from(mw) / 1000.0;
    GpuState {
        source: "nvml".to_string(),
        memory_used_mib: d.memory_info().ok().map(|m| m.used / MIB),
        utilization_pct: d.utilization_rates().ok().map(|u| u.gpu),
        pstate: d.performance_state().ok().and_then(pstate),
        power_draw_w: d.power_usage().ok().map(watts),
        power_limit_w: d.enforced_power_limit().ok().map(watts),
        power_default_limit_w: d.power_management_limit_default().ok().map(watts),
        temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
        temperature_slowdown_c: d.temperature_threshold(TemperatureThreshold::Slowdown).ok(),
        throttle: d.current_throttle_reasons().ok().map(throttle),
        persistence_mode: d.is_in_persistent_mode().ok(),
        processes: processes(d),
        // NVML's retirement and remap readings are not asked; the XML fills them.
        repair: None,
    }
}

/// `P8` for state 8; `None` for NVML's "unknown".
fn pstate(p: PerformanceState) -> Option<String> {
    use PerformanceState::*;
    let n = match p {
        Zero => 0,
        One => 1,
        Two => 2,
        Three => 3,
        Four => 4,
        Five => 5,
        Six => 6,
        Seven => 7,
        Eight => 8,
        Nine => 9,
        Ten => 10,
        Eleven => 11,
        Twelve => 12,
        Thirteen => 13,
        Fourteen => 14,
        Fifteen => 15,
        Unknown => return None,
    };
    Some(format!("P{n}"))
}

/// The reasons NVML's bitmask sets, in [`Throttle`]'s order. User-defined clocks is the
/// older name of the applications-clocks bit; `NONE` sets nothing.
fn throttle(r: ThrottleReasons) -> Vec<Throttle> {
    let map = [
        (ThrottleReasons::GPU_IDLE, Throttle::GpuIdle),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            Throttle::ApplicationsClocks,
        ),
        (ThrottleReasons::SW_POWER_CAP, Throttle::SwPowerCap),
        (ThrottleReasons::HW_SLOWDOWN, Throttle::HwSlowdown),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, Throttle::HwThermal),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, Throttle::HwPowerBrake),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, Throttle::SwThermal),
        (ThrottleReasons::SYNC_BOOST, Throttle::SyncBoost),
        (ThrottleReasons::DISPLAY_CLOCK_SETTING, Throttle::DisplayClocks),
    ];
    let mut out: Vec<Throttle> = map
        .iter()
        .filter(|(bit, _)| r.contains(*bit))
        .map(|(_, t)| *t)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Compute and graphics processes, one entry per pid (a process doing both is `C+G`, as
/// nvidia-smi writes it); `None` when neither list could be read.
fn processes(d: &Device<'_>) -> Option<Vec<GpuProcess>> {
    let compute = d.running_compute_processes().ok();
    let graphics = d.running_graphics_processes().ok();
    if compute.is_none() && graphics.is_none() {
        return None;
    }
    let mut out: Vec<GpuProcess> = Vec::new();
    let lists = [(compute, "C"), (graphics, "G")];
    for (list, kind) in lists {
        for p in list.unwrap_or_default() {
            add_process(&mut out, &p, kind);
        }
    }
    Some(out)
}

fn add_process(out: &mut Vec<GpuProcess>, p: &ProcessInfo, kind: &str) {
    let used_mib = match p.used_gpu_memory {
        UsedGpuMemory::Used(bytes) => Some(bytes / (1024 * 1024)),
        // WDDM: the OS, not the driver, owns the memory.
        UsedGpuMemory::Unavailable => None,
    };
    if let Some(seen) = out.iter_mut().find(|s| s.pid == p.pid) {
        if seen.kind.as_deref() != Some(kind) {
            seen.kind = Some("C+G".to_string());
        }
        seen.used_mib = seen.used_mib.or(used_mib);
        return;
    }
    out.push(GpuProcess {
        pid: p.pid,
        // NVML names no process, and `host` reads `/proc` only through the seam; the
        // probe fills the name from nvidia-smi where it can.
        name: String::new(),
        kind: Some(kind.to_string()),
        used_mib,
    });
}
