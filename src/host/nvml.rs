//! NVML, loaded at run time. A machine without the library (no driver, or a container
//! without the NVIDIA runtime) is normal: that is "unavailable", and the next source answers.
//! NVML comes first because it is what CUDA itself asks, it is fast, and it reports the
//! driver's CUDA version exactly (nvidia-smi's table only prints it).

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::error::NvmlError;

use super::system::NvmlProbe;
use super::types::GpuInfo;
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
            ..GpuInfo::default()
        });
    }
    NvmlProbe::Read {
        driver,
        cuda_driver,
        gpus,
    }
}
