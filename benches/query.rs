//! `cargo bench --bench query`: the resolver's speed on the shipped database and on a
//! synthetic one ten times larger. Prints figures; asserts nothing (targets are in the README).
//!
//! - one query: the question of a user before an order (torch 2.7.0, RTX 5090, driver 535);
//! - an open query (only a GPU and a driver): every build and Python evaluated;
//! - the full matrix: every GPU x every driver branch, each an open query over every torch
//!   build x Python.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gpuenv::db::Db;
use gpuenv::resolve::{GpuAsk, Index, Query, resolve, resolve_with, verdicts};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut()>(runs: usize, mut f: F) -> (Duration, Duration) {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    let min = *samples.iter().min().expect("runs > 0");
    (median(samples), min)
}

/// The full matrix: the verdict of every torch build x Python x GPU x driver branch.
/// Returns the number of (build, Python, GPU, branch) cells.
fn matrix(db: &Db) -> usize {
    let ix = Index::new(db);
    let mut cells = 0;
    for g in &db.gpus {
        for b in &db.drivers {
            let Some(driver) = b.first_version.clone() else {
                continue;
            };
            let q = Query {
                gpus: vec![GpuAsk {
                    gpu: g.clone(),
                    count: 1,
                }],
                driver: Some(driver),
                ..Query::default()
            };
            cells += verdicts(&ix, &q)
                .iter()
                .map(|v| v.pythons.max(1) as usize)
                .sum::<usize>();
        }
    }
    cells
}

/// The shipped database with its torch releases repeated `factor` times under new versions.
fn scaled(db: &Db, factor: usize) -> Db {
    let mut big = db.clone();
    for i in 1..factor {
        for t in &db.torch {
            let mut copy = t.clone();
            let release = t.version.release();
            let v = format!(
                "{}.{}.{}",
                release[0] + 10 * i as u64,
                release.get(1).copied().unwrap_or(0),
                release.get(2).copied().unwrap_or(0)
            );
            copy.version = v.parse().expect("a version");
            copy.id = v;
            big.torch.push(copy);
        }
    }
    big.torch.sort_by(|a, b| a.version.cmp(&b.version));
    big
}

fn main() {
    let t = Instant::now();
    let db = Db::embedded().expect("the embedded database loads");
    println!("load embedded database (first use, JSON form): {:?}", t.elapsed());

    let rtx5090 = db.gpu("RTX 5090").expect("RTX 5090 record").clone();
    let user_q = Query {
        torch: vec![gpuenv::resolve::Pin {
            specifiers: "==2.7.0".parse().expect("spec"),
            variant: None,
            marker: None,
            origin: "--torch".into(),
        }],
        gpus: vec![GpuAsk {
            gpu: rtx5090.clone(),
            count: 1,
        }],
        driver: Some("535.104.05".parse().expect("driver")),
        ..Query::default()
    };
    let (med, min) = time(2000, || {
        black_box(resolve(db, black_box(&user_q)));
    });
    let ix = Index::new(db);
    let (imed, imin) = time(2000, || {
        black_box(resolve_with(&ix, black_box(&user_q)));
    });
    println!(
        "one query (torch 2.7.0, RTX 5090, driver 535.104.05, with suggestions): median {med:?}, min {min:?}  [target < 1 ms]"
    );
    println!("  the same on a prebuilt index: median {imed:?}, min {imin:?}");

    let open_q = Query {
        gpus: vec![GpuAsk {
            gpu: db.gpu("H100 SXM").expect("H100").clone(),
            count: 8,
        }],
        driver: Some("550.54.14".parse().expect("driver")),
        ..Query::default()
    };
    let stacks = resolve(db, &open_q).stacks.len();
    let (med, min) = time(500, || {
        black_box(resolve(db, black_box(&open_q)));
    });
    println!("open query (8x H100 SXM, driver 550.54.14): {stacks} stacks, median {med:?}, min {min:?}");

    let cells = matrix(db);
    let (m1, min1) = time(5, || {
        black_box(matrix(db));
    });
    println!(
        "full matrix, shipped DB ({} GPUs x {} driver branches, {} torch releases): {cells} stacks, median {m1:?}, min {min1:?}  [target < 100 ms]",
        db.gpus.len(),
        db.drivers.len(),
        db.torch.len()
    );

    let big = scaled(db, 10);
    let cells10 = matrix(&big);
    let (m10, min10) = time(3, || {
        black_box(matrix(&big));
    });
    println!("full matrix, 10x torch releases: {cells10} stacks, median {m10:?}, min {min10:?}");
    let per1 = m1.as_secs_f64() / cells as f64;
    let per10 = m10.as_secs_f64() / cells10 as f64;
    println!(
        "growth: {:.1}x the stacks took {:.1}x the time ({:.2} us per stack vs {:.2} us): {}",
        cells10 as f64 / cells as f64,
        m10.as_secs_f64() / m1.as_secs_f64(),
        per1 * 1e6,
        per10 * 1e6,
        if per10 < per1 * 1.5 {
            "linear"
        } else {
            "worse than linear"
        }
    );
}
