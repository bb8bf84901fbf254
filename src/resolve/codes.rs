//! Every finding code the resolver can emit: part of the JSON contract.
//!
//! A code names one rule outcome and never changes meaning; renaming one is a visible
//! change of the contract (a test snapshots this list and fails on duplicates).

use serde::{Deserialize, Deserializer, Serialize};

/// Declares the finding codes once: the [`Code`] enum (each variant serialized as its
/// kebab-case code), and [`CODES`], the public list with what each means.
macro_rules! codes {
    ($($variant:ident = $code:literal: $meaning:literal,)*) => {
        /// A finding code: one rule outcome, serialized as its stable kebab-case name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        pub enum Code {
            $(
                #[doc = $meaning]
                #[serde(rename = $code)]
                $variant,
            )*
        }

        impl Code {
            /// Every code, in the order of [`CODES`].
            pub const ALL: &[Code] = &[$(Code::$variant,)*];

            /// The code as the JSON contract writes it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }
        }

        /// `(code, what it means)`, grouped by rule.
        pub const CODES: &[(&str, &str)] = &[$(($code, $meaning),)*];
    };
}

codes! {
    // Python and the platform.
    PythonWheel = "python-wheel": "a wheel exists for this CPython (its tag, not Requires-Python, decides)",
    PythonNoWheel = "python-no-wheel": "no wheel for the requested Python: the release ships other cpXY tags",
    PythonEndOfLife = "python-end-of-life": "this Python release line is past its end of security support",
    GlibcTooOld = "glibc-too-old": "the wheels need a newer glibc than the host's: their manylinux tag, or the glibc their libraries need where that is higher",
    CpuBuild = "cpu-build": "a CPU-only build: it runs, but never on the GPU",
    NoCudaWheelForArch = "no-cuda-wheel-for-arch": "the build has no CUDA wheel for the host's CPU architecture (aarch64): pip installs a CPU-only build there",
    CudaWheelForArch = "cuda-wheel-for-arch": "the build has a CUDA wheel for the host's CPU architecture (aarch64), on PyPI or on its own index",
    NoCudaDevice = "no-cuda-device": "the machine was found to have no usable NVIDIA GPU or driver: a CUDA build cannot run there",
    // The GPU and the kernels in the wheel.
    GpuSass = "gpu-sass": "the wheel has SASS (native kernels) for the GPU's architecture",
    GpuPtxJit = "gpu-ptx-jit": "no SASS for the GPU: the driver JIT-compiles the wheel's PTX at first use",
    GpuNoKernels = "gpu-no-kernels": "no SASS and no usable PTX for the GPU: CUDA kernels fail to launch",
    GpuArchListUnknown = "gpu-arch-list-unknown": "the build's arch list is not known, so GPU support is unconfirmed",
    GpuHostAarch64 = "gpu-host-aarch64": "the GPU comes with an aarch64 host: x86_64 wheels do not apply",
    // The driver.
    NeedsDriver = "needs-driver": "no driver given: what this stack needs of it",
    DriverNative = "driver-native": "the driver meets the CUDA toolkit's own minimum",
    DriverMinorVersionCompat = "driver-minor-version-compat": "below the toolkit minimum but within the major family's floor: runs with minor-version compatibility, with its limits",
    DriverForwardCompat = "driver-forward-compat": "older than the CUDA major: runs only with the cuda-compat package, on an eligible GPU and host branch",
    ForwardCompatGpuNotEligible = "forward-compat-gpu-not-eligible": "forward compatibility would be needed, but the GPU is not eligible (error 804)",
    PtxJitNeedsNewerDriver = "ptx-jit-needs-newer-driver": "the GPU needs PTX JIT, which minor-version compatibility cannot do",
    DriverTooOld = "driver-too-old": "the driver is too old for the CUDA of the build by every rule",
    DriverUnsupportedGpu = "driver-unsupported-gpu": "the driver branch does not drive the GPU's architecture: CUDA sees no GPU",
    DriverBranchUnknown = "driver-branch-unknown": "the driver's branch has no record; the nearest older branch was assumed",
    DriverEndOfLife = "driver-end-of-life": "the driver's branch is past its end of life: it runs, but gets no fixes",
    CudaUnknown = "cuda-unknown": "the build's CUDA version has no toolkit record",
    CudaFactsPending = "cuda-facts-pending": "the build's CUDA toolkit record has facts still pending (driver minimum, arch list): the build is not judged",
    // The question as a whole.
    NoMatchingBuild = "no-matching-build": "no torch build matches what was asked (pins, CUDA, index variants)",
    CudaNoBuild = "cuda-no-build": "no build of the torch asked uses the CUDA asked; the CUDA versions that exist are listed",
    // Building CUDA extensions.
    ExtensionsNvcc = "extensions-nvcc": "which nvcc builds extensions for this stack",
    NvccUnavailable = "nvcc-unavailable": "no CUDA toolkit with the build's CUDA version is known",
    NvccMajorMismatch = "nvcc-major-mismatch": "nvcc's CUDA major differs from torch's: extensions fail to build",
    NvccMinorMismatch = "nvcc-minor-mismatch": "nvcc's CUDA minor differs from torch's: torch warns, usually works",
    ExtensionNvccNotExact = "extension-nvcc-not-exact": "nvcc's CUDA minor differs from torch's, and a required package's build refuses that",
    NvccNoGpuArch = "nvcc-no-gpu-arch": "nvcc cannot compile for the GPU's architecture at all",
    NvccPtxOnly = "nvcc-ptx-only": "nvcc cannot compile SASS for the GPU; extensions must ship PTX for JIT",
    // What an image holds (`gpuenv verify`).
    ImageClaimMismatch = "image-claim-mismatch": "the image holds another version than its tag or --expect claims",
    ImageClaimUnchecked = "image-claim-unchecked": "a claim names a component the image shows no trace of",
    ImageNoTorch = "image-no-torch": "no torch installation was found in the image",
    ImageTorchCudaLibsMismatch = "image-torch-cuda-libs-mismatch": "torch's CUDA major differs from every CUDA runtime in the image",
    ImageCudnnShadowing = "image-cudnn-shadowing": "two cuDNNs in the image: a system one can be loaded instead of the wheel's",
    ImageRequireWeaker = "image-require-weaker": "NVIDIA_REQUIRE_CUDA lets the image start on drivers too old for its torch",
    ImageWillNotStart = "image-will-not-start": "the NVIDIA runtime refuses the image on the target host",
    ImageStarts = "image-starts": "the NVIDIA runtime starts the image on the target host",
    ImageClaimsNone = "image-claims-none": "no claim was checked (no --expect, and no tag of a known scheme): a pass covers consistency and the target only",
    ImageTorchWheelMissing = "image-torch-wheel-missing": "torch pins a CUDA library wheel that is not installed, and no copy of its library is where the loader looks: import torch fails",
    ImageTorchWheelStandIn = "image-torch-wheel-stand-in": "a CUDA library wheel torch pins is not installed, and the loader finds another copy of its library: torch loads that one",
    ImageTargetNoGpu = "image-target-no-gpu": "the target has no NVIDIA driver or no GPU: a CUDA build cannot use a GPU there",
    ImageForwardCompat = "image-forward-compat": "the target's driver is too old for the image's CUDA, and the cuda-compat the image ships serves its branch: on data-center GPUs only",
    CatalogFactMissing = "catalog-fact-missing": "an image judged from compat-db's catalog: the record lacks a fact the verdict needs, so that part is not judged",
    ImageTargetGpuUnknown = "image-target-gpu-unknown": "a GPU of the target has no compat-db record: whether the image's torch runs on it is unknown",
    // Packages that pin torch.
    FrameworkPinsTorch = "framework-pins-torch": "a required package (vLLM, SGLang, xformers...) pins torch in its PyPI metadata: that pin constrains the torch release like the project's own",
    FrameworkReleaseUnknown = "framework-release-unknown": "a required package that pins torch names a release compat-db has not read (or no single release): the torch it installs is not checked",
    // The database itself.
    TorchReleaseUnknown = "torch-release-unknown": "the torch asked for is newer than every release compat-db knows: it is not judged; an updated database (`gpuenv db refresh`, `--db DIR`) can",
    DbMayBeStale = "db-may-be-stale": "compat-db is more than 90 days old and the question names a torch or driver newer than any it knows: releases since may change the answer",
}

/// Read back, a code the list lacks is an error that names it.
impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Code, D::Error> {
        let word = crate::model::known::one_of(d, "finding code", CODES.iter().map(|(c, _)| *c))?;
        // CODES and Code::ALL are declared together, so the word always has its variant.
        Code::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == word)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown finding code `{word}`")))
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `code` is a known finding code.
pub fn is_known(code: &str) -> bool {
    CODES.iter().any(|(c, _)| *c == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_is_written_as_its_listed_name_and_reads_back() {
        assert_eq!(Code::ALL.len(), CODES.len());
        for (code, (listed, _)) in Code::ALL.iter().zip(CODES) {
            assert_eq!(code.as_str(), *listed);
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{listed}\""));
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), *code);
        }
        let e = serde_json::from_str::<Code>("\"driver-too-young\"").unwrap_err();
        assert!(e.to_string().contains("driver-too-young"), "{e}");
    }
}
