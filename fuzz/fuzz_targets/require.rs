//! `NVIDIA_REQUIRE_*` expressions: the strict parser and the libnvidia-container evaluator,
//! against a host made from the first bytes.
#![no_main]

use gpuenv::image::require::{GpuTarget, HostTarget, evaluate, evaluate_expression, parse_expression};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // `cuda|driver|arch|brand|expression`: host facts first, so they vary too.
    let mut parts = text.splitn(5, '|');
    let cuda = parts.next().unwrap_or("");
    let driver = parts.next().unwrap_or("");
    let arch = parts.next().unwrap_or("");
    let brand = parts.next().unwrap_or("");
    let expr = parts.next().unwrap_or(&text);
    let host = HostTarget {
        cuda: cuda.parse().ok(),
        driver: driver.parse().ok(),
        gpus: if arch.is_empty() {
            Vec::new()
        } else {
            vec![GpuTarget {
                arch: arch.parse().ok(),
                brand: (!brand.is_empty()).then(|| brand.to_string()),
            }]
        },
    };
    let _ = parse_expression(expr);
    let _ = evaluate_expression(expr, &host);
    let env = vec![
        ("NVIDIA_REQUIRE_CUDA".to_string(), expr.to_string()),
        ("CUDA_VERSION".to_string(), cuda.to_string()),
    ];
    let _ = evaluate(&env, &host);
});
