//! Core metadata (METADATA / PKG-INFO) and its PEP 508 pins, and dist-info names.
#![no_main]

use gpuenv::image::pyfiles::{cuda_pins, dist_name, parse_metadata};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let meta = parse_metadata(&text);
    let _ = cuda_pins(&meta);
    let _ = dist_name(&text);
});
