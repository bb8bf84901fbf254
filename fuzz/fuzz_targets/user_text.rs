//! Text users type and files they name: every lookup of the database (GPU names by their
//! words, counts, driver branches, versions of every kind), the readers of values as people
//! write them (series, driver requirements), `--expect` claims, image references, order
//! files, and the terminal-safe form of outside text.
#![no_main]

use gpuenv::db::{Db, Kind};
use gpuenv::model::{DriverInput, DriverReq, SeriesOf, count_candidates, read_series};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(db) = Db::embedded() else { return };
    let _ = db.gpus_written(&text);
    let _ = db.gpu_match(&text);
    let _ = db.driver_written(&text);
    for kind in [
        Kind::Gpu,
        Kind::Cuda,
        Kind::Cudnn,
        Kind::Torch,
        Kind::Driver,
        Kind::Python,
        Kind::Image,
        Kind::Package,
    ] {
        let _ = db.find(kind, &text);
    }
    let _ = count_candidates(&text);
    let _ = text.parse::<DriverInput>();
    let _ = text.parse::<DriverReq>();
    for of in [SeriesOf::Torch, SeriesOf::Python, SeriesOf::Cuda] {
        let _ = read_series(of, &text);
    }
    let _ = gpuenv::image::parse_expect(&text);
    let _ = gpuenv::image::ImageRef::parse(&text);
    let _ = gpuenv::judge::parse_order("order.toml", &text);
    let safe = gpuenv::text::terminal_safe(&text);
    assert!(!safe.chars().any(|c| c.is_control() && c != '\t'), "{safe:?}");
    let _ = gpuenv::text::excerpt(&text);
});
