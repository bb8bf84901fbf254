//! The archive reader (docker save / OCI layout) and detection on arbitrary bytes.
#![no_main]

use gpuenv::image::archive::{ReadOptions, read_archive};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(image) = read_archive(data, &ReadOptions::default()) {
        let _ = image.facts();
    }
});
