//! torch's generated `version.py`.
#![no_main]

use gpuenv::image::pyfiles::parse_version_py;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let v = parse_version_py(&text);
    // What detection does next with the values.
    if let Some(version) = &v.version {
        let _ = gpuenv::model::parse_version(version);
    }
    if let Some(cuda) = &v.cuda {
        let _ = cuda.parse::<gpuenv::model::CudaVersion>();
    }
});
