//! `cargo bench --bench doctor`: `doctor` on recorded hosts (probes replayed through the
//! seam, then every check). Prints figures; the target (README) is under 300 ms.

use std::sync::Arc;
use std::time::Instant;

use gpuenv::db::Db;
use gpuenv::host::system::Recording;
use gpuenv::host::{ProbeOptions, probe};
use gpuenv::judge::{DoctorOptions, doctor};

fn main() {
    let db = Db::embedded().expect("the embedded database loads");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        // Each host is a directory; the folder's README is not one.
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    for path in names {
        let record = Recording::load(&path).expect("a host record");
        let runs = 50;
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let report = probe(
                Arc::new(Recording::replay(record.clone())),
                &ProbeOptions::default(),
            );
            let checks = doctor(db, &report, &DoctorOptions { min_free_gb: 100.0 });
            std::hint::black_box(checks);
            samples.push(t.elapsed());
        }
        samples.sort();
        println!(
            "doctor on {:<26} median {:>10?}  max {:>10?}  [target < 300 ms]",
            path.file_name().unwrap_or_default().to_string_lossy(),
            samples[runs / 2],
            samples[runs - 1]
        );
    }
}
