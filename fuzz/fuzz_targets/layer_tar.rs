//! The layer reader (compression detection, the tar reader, whiteouts, path rules) on
//! arbitrary bytes: it must return a layer or an error, never panic or allocate wildly.
#![no_main]

use gpuenv::image::layer::{Budget, Interest, Limits, read_layer};
use gpuenv::image::tar::Kind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Keep everything, so every code path that reads contents runs.
    let select = |_: &str, kind: Kind| match kind {
        Kind::File => Interest::Capture,
        _ => Interest::Record,
    };
    let limits = Limits {
        max_capture_total: 1 << 20,
        ..Limits::default()
    };
    let mut budget = Budget::new(limits);
    if let Ok(layer) = read_layer(data, &select, &mut budget) {
        let mut fs = gpuenv::image::fs::MergedFs::new();
        fs.apply(layer);
        let _ = fs.glob("**/version.py");
        for p in fs.paths().map(str::to_string).collect::<Vec<_>>() {
            let _ = fs.read(&p);
        }
    }
    // The detection selector too, over the same bytes.
    let mut budget = Budget::new(limits);
    let _ = read_layer(data, &gpuenv::image::detect::select, &mut budget);
});
