//! Temporary signatures; the real parsers land from the parser branch.
#![allow(missing_docs, unused_variables)]
use super::types::*;
use crate::model::*;
pub const SMI_QUERY_FIELDS: &str = "index,name,uuid,pci.bus_id,memory.total,compute_cap,driver_version,pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.max,pcie.link.width.current,ecc.mode.current,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,mig.mode.current";
pub fn smi_xml(text: &str) -> Result<SmiReport, String> {
    Err(String::new())
}
pub fn smi_csv(text: &str) -> Result<SmiReport, String> {
    Err(String::new())
}
pub fn smi_table_cuda(text: &str) -> Option<CudaVersion> {
    None
}
pub fn smi_topo(text: &str) -> Result<Topology, String> {
    Err(String::new())
}
pub fn smi_failure(exit_code: Option<i32>, stdout: &str, stderr: &str) -> SmiFailure {
    SmiFailure::NotFound
}
pub fn proc_driver_version(text: &str) -> Option<KernelModule> {
    None
}
pub fn nvcc_version(text: &str) -> Option<CudaVersion> {
    None
}
pub fn cuda_version_json(text: &str) -> Option<CudaVersion> {
    None
}
pub fn cuda_version_txt(text: &str) -> Option<CudaVersion> {
    None
}
pub fn cudnn_header(text: &str) -> Option<CudnnVersion> {
    None
}
pub fn nccl_header(text: &str) -> Option<NcclVersion> {
    None
}
pub fn ldconfig(text: &str) -> Vec<SharedLib> {
    vec![]
}
pub fn lib_version(file_name: &str, stem: &str) -> Option<String> {
    None
}
pub fn os_release(text: &str) -> OsRelease {
    OsRelease::default()
}
pub fn ldd_version(text: &str) -> Option<GlibcVersion> {
    None
}
pub fn getconf_glibc(text: &str) -> Option<GlibcVersion> {
    None
}
pub fn cpuinfo(text: &str) -> CpuInfo {
    CpuInfo::default()
}
pub fn meminfo_total_kib(text: &str) -> Option<u64> {
    None
}
pub fn df(text: &str) -> Vec<Mount> {
    vec![]
}
pub fn nvidia_ctk_version(text: &str) -> Option<String> {
    None
}
