//! The typed records of each kind, one per file under `compat-db/<kind>/`.
//!
//! The schema is documented for curators in `compat-db/README.md`; keep the two in step
//! (a test parses every template in `compat-db/templates/` with these types). Records carry
//! their `sources`, the names of facts that are `unverified`, and free `notes`. `id` is not
//! written in the file: it is the file's stem, set by the loader.

use serde::{Deserialize, Serialize};

use crate::model::{
    Architecture, ComputeCapability, CudaVersion, CudnnVersion, DriverVersion, GlibcVersion, HostArch,
    Manylinux, NcclVersion, PartialDate, PythonTag, Variant, Version, VersionSpecifiers,
};

/// Where a fact comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// The page or file, as an `https://` address.
    pub url: String,
    /// What it says, or which part of the page (e.g. "Table 3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A CPython minor release line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonRelease {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// `3.12`: major and minor only.
    pub version: Version,
    /// When X.Y.0 was released.
    pub released: PartialDate,
    /// End of security support (planned or past).
    pub end_of_life: PartialDate,
    /// A free-threaded (PEP 703) build of this line exists.
    #[serde(default)]
    pub free_threaded: bool,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// A CUDA toolkit release (GA or update).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CudaRelease {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// `12.4.0`.
    pub version: CudaVersion,
    /// NVIDIA's name for it: "CUDA 12.4 Update 1".
    pub label: String,
    /// Release date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<PartialDate>,
    /// "Toolkit Driver Version" for Linux x86_64: the native minimum. Required unless
    /// listed in `pending` (a proposed record whose minimum no source has given yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_driver_linux: Option<DriverVersion>,
    /// The same for Windows; absent when the toolkit no longer bundles a Windows driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_driver_windows: Option<DriverVersion>,
    /// Minor-version compatibility floor of the family (Linux); absent before CUDA 11,
    /// which had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_min_driver: Option<DriverVersion>,
    /// Minor-version compatibility floor of the family (Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_min_driver_windows: Option<DriverVersion>,
    /// Real architectures nvcc compiles for offline (`sm_XY`), as compute capabilities.
    /// Required (non-empty) unless listed in `pending`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sass: Vec<ComputeCapability>,
    /// Targets nvcc still accepts but warns will be removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deprecated: Vec<ComputeCapability>,
    /// Keys whose facts are still to be found (one of [`CudaRelease::PENDABLE`]): absent
    /// from the record, and not to be read as "none". The resolver treats a toolkit with
    /// any pending fact as unknown, so a proposed record can be linted and reviewed in
    /// place without any answer resting on a fact nobody has checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// A cuDNN release.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CudnnRelease {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// `9.1.0.70`.
    pub version: CudnnVersion,
    /// The CUDA majors it is built for (`[11, 12]`). Required (non-empty) unless listed in
    /// `pending`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_majors: Vec<u32>,
    /// Keys whose facts are still to be found (one of [`CudnnRelease::PENDABLE`]): absent
    /// from the record until a source gives them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// Release date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<PartialDate>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

impl CudaRelease {
    /// The keys a toolkit record may list in `pending`: the facts NVIDIA publishes only in
    /// release notes and the nvcc binary, never on PyPI, each of which some rule reads
    /// (an absent optional one would otherwise read as "none").
    pub const PENDABLE: &'static [&'static str] = &[
        "min_driver_linux",
        "min_driver_windows",
        "family_min_driver",
        "family_min_driver_windows",
        "sass",
        "deprecated",
    ];

    /// Whether `key` is listed in `pending`.
    pub fn is_pending(&self, key: &str) -> bool {
        self.pending.iter().any(|k| k == key)
    }
}

impl CudnnRelease {
    /// The keys a cuDNN record may list in `pending`: which CUDA majors it supports is
    /// NVIDIA's support matrix, and PyPI's `-cuXX` projects show only the wheels built.
    pub const PENDABLE: &'static [&'static str] = &["cuda_majors"];
}

/// How NVIDIA supports a driver branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BranchType {
    /// Long-term support branch (R470, R535, R580).
    Ltsb,
    /// Production branch (R550, R570).
    Production,
    /// New feature branch: short-lived, no end of life, not a forward-compatibility host.
    NewFeature,
    /// Developer / evaluation branch bundled with a toolkit.
    Developer,
    /// Not established from a primary source.
    Unknown,
}

/// An NVIDIA driver branch (`R535`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriverBranch {
    /// Set by the loader: the file stem (`r535`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// The branch number: the major of every driver version in it.
    pub branch: u32,
    /// LTSB, production, new feature...
    #[serde(rename = "type")]
    pub branch_type: BranchType,
    /// The first release of the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_version: Option<DriverVersion>,
    /// The newest release known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_version: Option<DriverVersion>,
    /// When the branch first shipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<PartialDate>,
    /// End of support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_life: Option<PartialDate>,
    /// Past its end of life no later than this day (`YYYY-MM-DD`): the day a list of
    /// NVIDIA's that names every supported branch (the forward-compatibility table: "Branches
    /// not listed in the table above are end of life") was read and did not name this one.
    /// For branches whose exact end of life no source gives; never later than `end_of_life`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_life_by: Option<PartialDate>,
    /// The GPU architectures the branch drives.
    pub architectures: Vec<Architecture>,
    /// CUDA releases (major.minor) whose `cuda-compat` package supports this branch as host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_compat: Vec<CudaVersion>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// Who a GPU is sold to; decides forward-compatibility eligibility among other things.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Segment {
    /// Data-center GPUs (Tesla, A/H/B/L series).
    Datacenter,
    /// Professional workstation boards (RTX A6000, RTX 6000 Ada).
    Workstation,
    /// GeForce.
    Consumer,
}

/// Physical form of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormFactor {
    /// PCIe card.
    Pcie,
    /// SXM2 module (P100, V100).
    Sxm2,
    /// SXM3 module (V100 in DGX-2).
    Sxm3,
    /// SXM4 module (A100).
    Sxm4,
    /// SXM5 module (H100, H200).
    Sxm5,
    /// SXM6 module (B300).
    Sxm6,
    /// SXM module of unspecified generation (HGX B200, H800, H20).
    Sxm,
    /// CPU + GPU superchip (GH200, GB200).
    Superchip,
}

/// What NVLink a GPU can have to the other GPUs of its node: it decides whether
/// tensor-parallel traffic among more than two GPUs of a server crosses NVLink or PCIe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Nvlink {
    /// No GPU-to-GPU NVLink at all: every peer transfer crosses PCIe (RTX 4090, L40S, L4).
    None,
    /// A PCIe card that takes an NVLink bridge joining two (at most four) cards, never
    /// every GPU of an 8-GPU server (A100 PCIe, RTX 3090, H100 NVL).
    Bridge,
    /// Modules on a baseboard (SXM, superchip) whose NVLink or NVSwitch joins every GPU of
    /// the node (HGX H100, V100 SXM2, GB200).
    Board,
}

/// A GPU model people rent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Gpu {
    /// Set by the loader: the file stem (`h100-sxm`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// Canonical name: "H100 SXM".
    pub name: String,
    /// Other names people and `nvidia-smi` use: "NVIDIA H100 80GB HBM3".
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Architecture.
    pub architecture: Architecture,
    /// Compute capability.
    pub compute_capability: ComputeCapability,
    /// Memory per GPU as sold, in GiB (80 for an "80GB" H100).
    pub memory_gib: f64,
    /// The memory total `nvidia-smi` reports for the GPU, in MiB (`memory.total`, or
    /// `FB Memory Usage: Total` of `nvidia-smi -q`): 81559 for an H100 80GB HBM3, not
    /// 81920. Taken only from captured outputs, each cited; absent where none was found.
    /// Drivers differ by a few hundred MiB (an A100 80GB read 81252 under R450 and 81920
    /// later), and the figure still includes what the driver reserves for itself
    /// (`nvidia-smi -q` prints that part as `Reserved`), so CUDA can allocate a little less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_memory_mib: Option<u32>,
    /// HBM3, GDDR6X...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<String>,
    /// Memory bandwidth in GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbs: Option<u32>,
    /// PCIe, SXM...
    pub form_factor: FormFactor,
    /// NVLink generation and bandwidth, or "PCIe only".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<String>,
    /// What NVLink the GPU can have to its peers (required).
    pub nvlink: Nvlink,
    /// Total NVLink bandwidth per GPU in GB/s as the datasheet prints it (both directions
    /// of all its links), where it has one; never with `nvlink = "none"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_gbs: Option<u32>,
    /// Data center, workstation or consumer.
    pub segment: Segment,
    /// Eligible for CUDA forward compatibility (`cuda-compat`).
    pub forward_compat: bool,
    /// Board power in watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tdp_w: Option<u32>,
    /// The host CPU architecture when the GPU comes with its own CPU (GH200: `aarch64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_arch: Option<String>,
    /// A board rebuilt after sale by third parties (an RTX 4090 with 48 GB): what was
    /// changed, that it is not an NVIDIA product, and what that risks, in words shown
    /// wherever the record is used. Such a record answers only to a name that writes its
    /// memory size, and `plan` never proposes it unless asked for it by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    /// Dense BF16 Tensor Core throughput in TFLOPS, without sparsity (datasheets often
    /// print the 2:4-sparse figure, twice this). For GeForce boards, the architecture
    /// whitepaper's "Peak BF16 Tensor TFLOPS with FP32 Accumulate"; the record's notes say
    /// which figure it is. Absent where no source gives it (or the GPU has no BF16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16_tflops: Option<f64>,
    /// Dense FP8 Tensor Core throughput in TFLOPS, without sparsity; absent where no
    /// source gives it or the GPU has no FP8 Tensor Cores (before Ada and Hopper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    /// Dense FP16 throughput in TFLOPS, without sparsity: the Tensor Core figure (for
    /// GeForce boards the whitepaper's "with FP32 Accumulate" one, the accumulation torch's
    /// half-precision matmul asks cuBLAS for); on a GPU without Tensor Cores whose CUDA
    /// cores run FP16 at twice FP32 (P100), that rate, said so in the notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_tflops: Option<f64>,
    /// Dense TF32 Tensor Core throughput in TFLOPS, without sparsity (Ampere and later):
    /// what float32 matmuls reach when torch allows TF32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32_tflops: Option<f64>,
    /// Dense INT8 Tensor Core throughput in TOPS, without sparsity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8_tops: Option<f64>,
    /// The 2:4 structured-sparsity figures datasheets print (marked `*` "with sparsity"),
    /// kept apart so that they are never read as dense: twice the dense figure on every
    /// datasheet that prints both. Only for the record; plan and bench use the dense ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16_sparse_tflops: Option<f64>,
    /// FP16 with sparsity; see [`Gpu::bf16_sparse_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_sparse_tflops: Option<f64>,
    /// TF32 with sparsity; see [`Gpu::bf16_sparse_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32_sparse_tflops: Option<f64>,
    /// FP8 with sparsity; see [`Gpu::bf16_sparse_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_sparse_tflops: Option<f64>,
    /// INT8 with sparsity, TOPS; see [`Gpu::bf16_sparse_tflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int8_sparse_tops: Option<f64>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

impl Gpu {
    /// The memory `nvidia-smi` reports as the GPU's total, in bytes, where a capture gave
    /// it (`usable_memory_mib`); `None` leaves the caller to estimate from `memory_gib`.
    pub fn usable_bytes(&self) -> Option<u64> {
        self.usable_memory_mib.map(|mib| u64::from(mib) * 1024 * 1024)
    }
}

/// A PyTorch release and the builds published for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TorchRelease {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// `2.4.1`.
    pub version: Version,
    /// Release date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<PartialDate>,
    /// `Requires-Python` of the wheels (the tags decide, this informs).
    pub requires_python: VersionSpecifiers,
    /// CPython tags of the Linux x86_64 wheels.
    pub python: Vec<PythonTag>,
    /// Platform tag of the Linux x86_64 wheels: the glibc pip requires to install them.
    pub manylinux: Manylinux,
    /// The glibc the wheels' libraries really need, where it is known and the tag says
    /// less (`manylinux1` wheels whose libraries need `GLIBC_2.17`): the floor is the
    /// higher of the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc: Option<GlibcVersion>,
    /// Which fact `glibc` comes from; required with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glibc_from: Option<GlibcBasis>,
    /// The variant `pip install torch` gets from PyPI.
    pub pypi_default: Variant,
    /// The architectures on which PyPI's Linux wheel is that variant, a CUDA build. On the
    /// others (aarch64 up to 2.10) PyPI's wheel is a CPU-only build and the CUDA build, where
    /// there is one, comes from its variant's index. Empty only in records made at run time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pypi_platforms: Vec<HostArch>,
    /// Platform tag of PyPI's Linux aarch64 wheels (`manylinux_2_28_aarch64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manylinux_aarch64: Option<Manylinux>,
    /// Matching torchvision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torchvision: Option<Version>,
    /// Matching torchaudio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torchaudio: Option<Version>,
    /// Triton pinned by the CUDA wheels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton: Option<Version>,
    /// The builds.
    pub variants: Vec<TorchVariant>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// Where a torch release's `glibc` floor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlibcBasis {
    /// The `GLIBC_x.y` symbol versions that the ELF files of the Linux x86_64 wheel need
    /// (their `.gnu.version_r` sections), read from the wheel itself.
    WheelSymbols,
    /// PyTorch's release notes or RELEASE.md, where the wheel was not read.
    ReleaseNotes,
}

impl GlibcBasis {
    /// The schema's word for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            GlibcBasis::WheelSymbols => "wheel-symbols",
            GlibcBasis::ReleaseNotes => "release-notes",
        }
    }
}

impl TorchRelease {
    /// The platform tag of PyPI's Linux wheels for `arch`; `None` for aarch64 where no
    /// aarch64 tag is recorded.
    pub fn manylinux_on(&self, arch: HostArch) -> Option<&Manylinux> {
        match arch {
            HostArch::X86_64 => Some(&self.manylinux),
            HostArch::Aarch64 => self.manylinux_aarch64.as_ref(),
        }
    }

    /// The oldest glibc the Linux wheels for `arch` install and run on. On x86_64, that is
    /// [`TorchRelease::glibc_floor`]; on aarch64, the aarch64 tag's floor, since the recorded
    /// `glibc` was read from the x86_64 wheel and says nothing of the other. `None` where
    /// no aarch64 tag is recorded.
    pub fn glibc_floor_on(&self, arch: HostArch) -> Option<GlibcVersion> {
        match arch {
            HostArch::X86_64 => Some(self.glibc_floor()),
            HostArch::Aarch64 => self.manylinux_aarch64.as_ref().map(Manylinux::glibc),
        }
    }

    /// The oldest glibc the Linux x86_64 wheels install and run on: the higher of the
    /// platform tag's floor and the recorded `glibc`.
    pub fn glibc_floor(&self) -> GlibcVersion {
        let tag = self.manylinux.glibc();
        match &self.glibc {
            Some(g) if *g > tag => g.clone(),
            _ => tag,
        }
    }
}

/// One build of a torch release (`2.4.1+cu121`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TorchVariant {
    /// `cu121` or `cpu`.
    pub tag: Variant,
    /// CUDA of the build (major.minor); absent for `cpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaVersion>,
    /// The exact cudart the wheel ships or pins (`12.1.105`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudart: Option<CudaVersion>,
    /// cuDNN bundled or pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<CudnnVersion>,
    /// NCCL bundled or pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<NcclVersion>,
    /// Architectures with SASS in the wheel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sass: Vec<ComputeCapability>,
    /// Architectures with PTX in the wheel (JIT-compiled forward on newer GPUs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ptx: Vec<ComputeCapability>,
    /// CPython tags, where they differ from the release's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<Vec<PythonTag>>,
    /// The pip index that serves this build.
    pub index_url: String,
    /// The architectures whose Linux wheels of this build `index_url` serves (required for
    /// CUDA builds; a CUDA build without `aarch64` has no CUDA wheel for Grace hosts there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<HostArch>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts of this build come from, beyond the release's sources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
}

impl TorchRelease {
    /// The build with this tag.
    pub fn variant(&self, tag: Variant) -> Option<&TorchVariant> {
        self.variants.iter().find(|v| v.tag == tag)
    }
}

/// Which catalog an image record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageFamily {
    /// `nvidia/cuda:<cuda>-[cudnn-]<flavor>-<os>`: one record per CUDA version.
    NvidiaCuda,
    /// `pytorch/pytorch:<torch>-cuda<x.y>-cudnn<n>-<flavor>`: one record per tag.
    Pytorch,
    /// `nvcr.io/nvidia/pytorch:<YY.MM>-py3`: one record per release.
    Ngc,
}

/// `base` (CUDA runtime only), `runtime` (+ libraries), `devel` (+ nvcc and headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flavor {
    /// cudart and the compat package.
    Base,
    /// CUDA math libraries, NCCL.
    Runtime,
    /// nvcc, headers: what building extensions needs.
    Devel,
}

/// A container image, or for `nvidia/cuda` a family of tags of one CUDA version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Image {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// The catalog.
    pub family: ImageFamily,
    /// `nvidia/cuda`, `pytorch/pytorch`, `nvcr.io/nvidia/pytorch`.
    pub repository: String,
    /// The tag (`24.08-py3`); absent for an `nvidia/cuda` family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Release date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<PartialDate>,
    /// Flavors published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<Flavor>,
    /// Operating systems (`ubuntu22.04`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// CUDA toolkit in the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaVersion>,
    /// cuDNN in the image (or in its cuDNN variant, for `nvidia/cuda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<CudnnVersion>,
    /// How the cuDNN variant is spelled in `nvidia/cuda` tags: `cudnn8` or `cudnn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn_tag: Option<String>,
    /// NCCL in the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<NcclVersion>,
    /// torch in the image (`2.5.0a0+872d972e41` for NGC builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<Version>,
    /// Python in the image (`3.10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<Version>,
    /// The driver the vendor says the image needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_driver: Option<DriverVersion>,
    /// `NVIDIA_REQUIRE_CUDA` as set in the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_cuda: Option<String>,
    /// The driver branches an NGC release runs on with data-center GPUs through the
    /// `cuda-compat` libraries it ships, each as the earliest release NVIDIA names for it
    /// (`535.86` for "535.86 or later R535"). A driver of another branch older than
    /// `min_driver`, or any such driver on a GeForce or workstation board, fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_compat: Vec<DriverVersion>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

impl Image {
    /// A record of an image known only by where it is: every fact left out, for a caller
    /// that fills in the ones it read (a draft from a registry listing or from the image).
    pub fn named(id: String, family: ImageFamily, repository: &str, tag: String) -> Image {
        Image {
            id,
            family,
            repository: repository.into(),
            tag: Some(tag),
            released: None,
            flavors: Vec::new(),
            os: Vec::new(),
            cuda: None,
            cudnn: None,
            cudnn_tag: None,
            nccl: None,
            torch: None,
            python: None,
            min_driver: None,
            require_cuda: None,
            forward_compat: Vec::new(),
            checked: None,
            unverified: Vec::new(),
            notes: None,
            sources: Vec::new(),
        }
    }
}

/// When installing a package compiles CUDA code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compiles {
    /// Every install compiles: nothing prebuilt is published.
    Always,
    /// Only a source distribution is on the index; its build fetches a prebuilt binary
    /// matching torch, CUDA and Python from the project's releases when one exists, and
    /// compiles otherwise.
    UnlessPrebuilt,
    /// The index has prebuilt wheels; only a build from source (a VCS, URL or path
    /// requirement, or no wheel for the platform) compiles.
    FromSource,
    /// Installs without compiling unless an environment variable or a build option asks.
    OnRequest,
}

impl Compiles {
    /// The schema's word for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Compiles::Always => "always",
            Compiles::UnlessPrebuilt => "unless-prebuilt",
            Compiles::FromSource => "from-source",
            Compiles::OnRequest => "on-request",
        }
    }
}

/// How the nvcc that compiles a package must match torch's CUDA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NvccMatch {
    /// The major must be torch's (torch's own check); a minor mismatch warns.
    #[default]
    Major,
    /// The package's build refuses any other major.minor than torch's.
    MajorMinor,
}

/// What an environment variable does to a package's build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvRole {
    /// Set as documented, the install compiles (or compiles instead of fetching a binary).
    Build,
    /// Set as documented, the install compiles nothing.
    NoBuild,
    /// Names the GPU architectures compiled for.
    Arch,
    /// Limits parallel compile jobs (memory).
    Jobs,
    /// Anything else that matters to the build.
    Other,
}

/// An environment variable a package's build reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildEnv {
    /// `FLASH_ATTENTION_FORCE_BUILD`.
    pub name: String,
    /// The value that has the effect (`TRUE`, `1`), where it takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What it does, by role.
    pub role: EnvRole,
    /// What it does, in a sentence.
    pub effect: String,
}

/// A Python package whose installation compiles CUDA code (a PyTorch C++/CUDA extension):
/// what decides whether it compiles, and what compiling needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Package {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// The PyPI project name, PEP 503 normalized (`flash-attn`; `flash_attn` and
    /// `Flash-Attn` name the same project).
    pub name: String,
    /// The releases whose sources were read; absent when the facts hold for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<VersionSpecifiers>,
    /// When installing it compiles CUDA code.
    pub compiles: Compiles,
    /// Where prebuilt binaries come from and what they must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prebuilt: Option<String>,
    /// Options of its build (`--cuda_ext`) that ask for compiling, given to pip with
    /// `--config-settings "--build-option=..."` or `--global-option`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_options: Vec<String>,
    /// What is not compiled at install is compiled at first use (JIT), which needs nvcc
    /// where it runs.
    #[serde(default)]
    pub jit: bool,
    /// How nvcc must match torch's CUDA.
    #[serde(default)]
    pub nvcc_match: NvccMatch,
    /// Its build imports the installed torch: install it after torch with
    /// `--no-build-isolation`, or it builds against another torch (or none).
    pub needs_torch_at_build: bool,
    /// Python packages its build imports besides torch: with `--no-build-isolation` they
    /// must be installed before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_requires: Vec<String>,
    /// Environment variables its build reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<BuildEnv>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one);
    /// absent only for records made at run time (an installed torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// A Python package that pins torch (vLLM, SGLang, xformers...): per release, the torch
/// requirement its wheel metadata states, so that a project pinning the package gets the
/// torch the package needs. Read from PyPI (PEP 658 metadata) by `gpuenv db refresh`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Framework {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// The PyPI project name, PEP 503 normalized (`tensorrt-llm`).
    pub name: String,
    /// The releases whose metadata was read, oldest first.
    #[serde(default)]
    pub releases: Vec<FrameworkRelease>,
    /// Releases PyPI lists in the range read whose metadata it did not serve: their
    /// torch requirement is unknown (not "none").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<Version>,
    /// The day the releases were last read from their sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator or user should know (what the range read is, what is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; each release also names its metadata file).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// One release of a [`Framework`], as its wheel metadata states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameworkRelease {
    /// The release (`0.6.3.post1`).
    pub version: Version,
    /// Day of its first upload to PyPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<PartialDate>,
    /// `Requires-Python`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<VersionSpecifiers>,
    /// The torch requirement of every install (`==2.4.0`, `>=2.1,<2.5`), as the metadata
    /// writes it for Linux x86_64; absent when the metadata requires no torch without an
    /// extra.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<VersionSpecifiers>,
    /// Torch requirements only an extra brings (`sglang[srt]`), by extra.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub torch_extras: std::collections::BTreeMap<String, VersionSpecifiers>,
    /// The CUDA build its wheels are for, where they name one (a `+cu121` local version,
    /// or a local version on the torch pin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<Variant>,
    /// The PEP 658 metadata file read.
    pub metadata: String,
}

impl FrameworkRelease {
    /// The torch requirement an install with `extras` makes: every applicable one.
    pub fn torch_for(&self, extras: &[String]) -> Vec<VersionSpecifiers> {
        let mut out: Vec<VersionSpecifiers> = self.torch.iter().cloned().collect();
        for e in extras {
            let e = crate::model::pep508::normalize_name(e);
            if let Some(s) = self.torch_extras.get(&e) {
                out.push(s.clone());
            }
        }
        out
    }
}

/// An open model people train or serve, with the keys of its Hugging Face `config.json`
/// that size it: what a memory or time estimate needs without downloading anything.
///
/// `params` is the exact count of the checkpoint's weights; the linter recounts it from
/// `config` with [`crate::model::hf_config::count`], the function `plan --model
/// config.json` uses, and reports a record whose count differs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Model {
    /// Set by the loader: the file stem (`llama-2-70b`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// Canonical name: "Llama-2-70B".
    pub name: String,
    /// Other names people use: the Hub repositories (`meta-llama/Llama-2-70b-hf`), short
    /// forms (`llama2-70b`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// `model_type` of the config (`llama`, `qwen3_moe`, `deepseek_v3`, `gemma3`): decides
    /// which weights the architecture has (one of [`Model::MODEL_TYPES`]).
    pub model_type: String,
    /// Total number of parameters, exact: every weight the checkpoint holds.
    pub params: u64,
    /// Parameters used per token, for a mixture of experts (required with experts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params: Option<u64>,
    /// The config.json keys the count reads, as the Hub's file gives them (without
    /// `model_type`, which is the record's): `num_hidden_layers`, `hidden_size`,
    /// `num_key_value_heads`, the experts', the sliding window's; nested tables for a
    /// multimodal config's `text_config` and `vision_config`. A key left out takes the
    /// default of the architecture's configuration class in transformers, as a config.json
    /// that leaves it out does. Kept with its keys sorted at every level, so the record
    /// reads the same from the TOML files and from the build's JSON form.
    #[serde(deserialize_with = "sorted_config")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// `max_position_embeddings`: the longest context the config allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_position: Option<u64>,
    /// The license the weights are published under (`llama2`, `apache-2.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// The date this record's facts were last checked against their sources
    /// (`YYYY-MM-DD`). Required in every record file (the linter reports a missing one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// A `[config]` table with its keys sorted at every level.
fn sorted_config<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<serde_json::Map<String, serde_json::Value>, D::Error> {
    fn sort(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => serde_json::Value::Object(sort_map(m)),
            other => other,
        }
    }
    fn sort_map(m: serde_json::Map<String, serde_json::Value>) -> serde_json::Map<String, serde_json::Value> {
        let sorted: std::collections::BTreeMap<String, serde_json::Value> = m.into_iter().collect();
        sorted.into_iter().map(|(k, v)| (k, sort(v))).collect()
    }
    let m = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    Ok(sort_map(m))
}

impl Model {
    /// The `model_type`s whose weights [`Model::count`] knows.
    pub const MODEL_TYPES: &'static [&'static str] = crate::model::hf_config::MODEL_TYPES;

    /// The count of the record's config: the parameters and the shape, or what in the
    /// config keeps it from being counted.
    pub fn count(&self) -> Result<crate::model::hf_config::Counted, String> {
        if let Some(t) = self.config.get("model_type") {
            if t.as_str() != Some(self.model_type.as_str()) {
                return Err(format!(
                    "`config.model_type` is {t}, not the record's `model_type` `{}`",
                    self.model_type
                ));
            }
        }
        let mut config = self.config.clone();
        config.insert(
            "model_type".into(),
            serde_json::Value::String(self.model_type.clone()),
        );
        crate::model::hf_config::count(&config)
    }

    /// The total count of parameters the config gives; `None` when it cannot be counted.
    pub fn params_from_shape(&self) -> Option<u64> {
        self.count().ok().map(|c| c.params)
    }

    /// The parameters one token uses, for a mixture of experts; `None` for a dense model
    /// or a config that cannot be counted.
    pub fn active_params_from_shape(&self) -> Option<u64> {
        let c = self.count().ok()?;
        c.experts.map(|_| c.active_params)
    }
}

/// Whose fault an XID is, as NVIDIA's Xid catalog files it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XidFault {
    /// The GPU, its memory or its bus: a delivered machine that logged it since boot is not
    /// accepted.
    Gpu,
    /// The application (an illegal address, a bad push buffer): listed, not a fault of the
    /// GPU.
    Application,
    /// A record of an event whose fault, if any, another item or Xid says (a row remap
    /// recorded, a recovery action changed): listed.
    Informational,
}

impl XidFault {
    /// The word in the record.
    pub fn as_str(self) -> &'static str {
        match self {
            XidFault::Gpu => "gpu",
            XidFault::Application => "application",
            XidFault::Informational => "informational",
        }
    }
}

/// An XID: an error the NVIDIA driver writes to the kernel log (`NVRM: Xid (PCI:...): 79,
/// ...`), what NVIDIA says it means and what to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Xid {
    /// Set by the loader: the file stem, which is the code (`79`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// The XID number.
    pub code: u32,
    /// The driver's name for it (`ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`).
    pub mnemonic: String,
    /// NVIDIA's description (`GPU has fallen off the bus`).
    pub description: String,
    /// Whose fault it is.
    pub fault: XidFault,
    /// What NVIDIA's catalog says to do at once, then to investigate (its resolution
    /// buckets, `RESET_GPU`, `CONTACT_SUPPORT`), in words.
    pub action: String,
    /// The date this record's facts were last checked against their sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required).
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// The datasheet fact an [`Efficiency`] measures a figure against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EfficiencyBasis {
    /// The GPU record's dense BF16 Tensor Core TFLOPS.
    Bf16Tflops,
    /// The GPU record's dense FP8 Tensor Core TFLOPS.
    Fp8Tflops,
    /// The GPU record's dense FP16 TFLOPS.
    Fp16Tflops,
    /// The GPU record's dense TF32 Tensor Core TFLOPS.
    Tf32Tflops,
    /// The GPU record's memory bandwidth, GB/s.
    BandwidthGbs,
    /// The GPU record's NVLink bandwidth, GB/s, both directions added (as NVIDIA sells it).
    NvlinkGbs,
    /// The theoretical rate of the GPU's PCIe link, one direction, from the generation and
    /// width the machine reports (PCI-SIG's per-lane rates and encodings).
    PcieLink,
}

impl EfficiencyBasis {
    /// The key of the fact, as records and messages name it.
    pub fn key(self) -> &'static str {
        match self {
            EfficiencyBasis::Bf16Tflops => "bf16_tflops",
            EfficiencyBasis::Fp8Tflops => "fp8_tflops",
            EfficiencyBasis::Fp16Tflops => "fp16_tflops",
            EfficiencyBasis::Tf32Tflops => "tf32_tflops",
            EfficiencyBasis::BandwidthGbs => "bandwidth_gbs",
            EfficiencyBasis::NvlinkGbs => "nvlink_gbs",
            EfficiencyBasis::PcieLink => "pcie_link",
        }
    }
}

/// How much of a datasheet figure a measurement should reach, from published measurements:
/// what `gpuenv bench` judges a figure by (`compat-db/efficiency/<id>.toml`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Efficiency {
    /// Set by the loader: the file stem.
    #[serde(skip_deserializing)]
    pub id: String,
    /// The bench metric judged (`matmul-bf16`, `memory-bandwidth`, one of
    /// [`Efficiency::METRICS`]).
    pub metric: String,
    /// The datasheet fact the figure is divided by.
    pub basis: EfficiencyBasis,
    /// What the fact is multiplied by before dividing (`0.5` for one direction of NVLink's
    /// both-directions figure, or TF32's half of the BF16 rate); 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis_factor: Option<f64>,
    /// The architectures it holds for; empty: every GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<Architecture>,
    /// Only GPUs with this NVLink (`board`: every GPU of the node joined, so peer copies go
    /// over NVLink; `none`: they cross PCIe); absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<Nvlink>,
    /// At or above this share of the (factored) datasheet figure: pass.
    pub pass_min: f64,
    /// At or above this share, below `pass_min`: warn; below it: fail.
    pub warn_min: f64,
    /// The published measurement the range rests on, in words (machine, figure, share).
    pub measured: String,
    /// The date this record's facts were last checked against their sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required; the checker reports an empty list).
    #[serde(default)]
    pub sources: Vec<Source>,
}

impl Efficiency {
    /// The bench metrics a record may judge: those with a datasheet fact to compare with
    /// (the names of `bench::Metric` in `bench --json`; a test keeps the two in step).
    pub const METRICS: &'static [&'static str] = &[
        "matmul-bf16",
        "matmul-fp16",
        "matmul-tf32",
        "matmul-fp8",
        "memory-bandwidth",
        "host-to-device",
        "device-to-host",
        "peer-to-peer",
        "nccl-busbw",
    ];

    /// The factor applied to the basis (1 when the record gives none).
    pub fn factor(&self) -> f64 {
        self.basis_factor.unwrap_or(1.0)
    }

    /// Whether the record holds for a GPU of `arch` with `nvlink`.
    pub fn applies(&self, arch: Architecture, nvlink: Nvlink) -> bool {
        (self.architectures.is_empty() || self.architectures.contains(&arch))
            && self.nvlink.is_none_or(|n| n == nvlink)
    }
}

/// A GPU (or accelerator) that listings offer beside NVIDIA's and that gpuenv does not
/// serve: its names, so that a question naming it is refused for what it is (not an
/// NVIDIA GPU) rather than answered with the nearest NVIDIA name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForeignGpu {
    /// Set by the loader: the file stem (`amd-instinct-mi300x`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// The vendor's name for it: `AMD Instinct MI300X`.
    pub name: String,
    /// The vendor: `AMD`, `Huawei`.
    pub vendor: String,
    /// Other names listings write (`MI300X`, `昇腾910B`), compared as GPU names are.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The software stack it runs instead of CUDA: `ROCm`, `CANN`.
    pub stack: String,
    /// The date this record's facts were last checked against their sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<PartialDate>,
    /// Facts not checked against a primary source, by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unverified: Vec<String>,
    /// Anything a curator should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Where the facts come from (required).
    #[serde(default)]
    pub sources: Vec<Source>,
}

impl ForeignGpu {
    /// What any command that takes a GPU name answers for it.
    pub fn refusal(&self) -> String {
        format!(
            "{}: not an NVIDIA GPU; gpuenv judges CUDA stacks only ({} builds are not covered)",
            self.name, self.stack
        )
    }
}
