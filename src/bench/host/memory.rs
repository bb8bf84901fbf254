//! Host memory bandwidth: every logical CPU copying a buffer of its own, as STREAM's Copy.
//!
//! Owns: the buffers (allocated and freed here) and the timing. Must not: touch files.
//!
//! What is counted: each copy reads its source and writes its destination, so a copy of
//! `n` bytes counts `2n` bytes, as STREAM counts Copy
//! (<https://www.cs.virginia.edu/stream/ref.html>). The extra read that a cached store
//! makes of the destination's line (write-allocate) is not counted, as STREAM does not.
//! Each thread's buffers are allocated and first written by that thread, so the kernel
//! places them on its NUMA node; one untimed copy first faults every page in. The buffers
//! together are far larger than any CPU's caches at the default sizes, so memory, not a
//! cache, is timed.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::HostBenchError;
use crate::bench::{Engine, Figure, Metric};

/// The most threads: beyond this, more threads add no bandwidth on any host sold today.
pub const MAX_THREADS: usize = 256;

/// What to measure.
#[derive(Debug, Clone)]
pub struct MemoryPlan {
    /// Bytes of source and destination together, over all threads.
    pub total_bytes: u64,
    /// Threads (0: one per logical CPU).
    pub threads: usize,
    /// Timed copies of each buffer.
    pub repeats: u32,
}

/// Measures the copy bandwidth.
pub fn measure(plan: &MemoryPlan) -> Result<Figure, HostBenchError> {
    let threads = match plan.threads {
        0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        n => n,
    }
    .clamp(1, MAX_THREADS);
    let repeats = plan.repeats.max(1);
    // Each thread holds a source and a destination of `half` bytes.
    let half = usize::try_from(plan.total_bytes / 2 / threads as u64).map_err(|_| {
        HostBenchError::Input("the memory test's size does not fit this machine's addresses".into())
    })?;
    if half < 4096 {
        return Err(HostBenchError::Input(format!(
            "the memory test's size of {} is too small for {threads} threads",
            crate::files::bytes(plan.total_bytes)
        )));
    }
    let start_line = Arc::new(Barrier::new(threads + 1));
    let end_line = Arc::new(Barrier::new(threads + 1));
    let mut workers = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (start_line, end_line) = (start_line.clone(), end_line.clone());
        let spawned = std::thread::Builder::new()
            .name("gpuenv-membench".into())
            .spawn(move || {
                let mut src = vec![1u8; half];
                let mut dst = vec![0u8; half];
                // Untimed: faults every destination page in.
                dst.copy_from_slice(&src);
                src[0] = 2;
                start_line.wait();
                for _ in 0..repeats {
                    dst.copy_from_slice(&src);
                    std::hint::black_box(&mut dst);
                }
                end_line.wait();
            });
        match spawned {
            Ok(h) => workers.push(h),
            Err(e) => {
                return Err(HostBenchError::Environment(format!(
                    "cannot start a thread of the memory test: {e}"
                )));
            }
        }
    }
    start_line.wait();
    let start = Instant::now();
    end_line.wait();
    let took = start.elapsed();
    for w in workers {
        if w.join().is_err() {
            return Err(HostBenchError::Environment(
                "a thread of the memory test failed".into(),
            ));
        }
    }
    let moved = 2u64
        .saturating_mul(half as u64)
        .saturating_mul(threads as u64)
        .saturating_mul(u64::from(repeats));
    Ok(Figure::new(
        Metric::HostMemoryBandwidth,
        moved as f64 / took.as_secs_f64().max(1e-9) / 1e9,
        Engine::Gpuenv,
        format!(
            "copy of {} per thread, {threads} threads, {repeats} times; bytes read plus bytes written counted, as STREAM's Copy; {}",
            crate::files::bytes(half as u64),
            super::secs(took.max(Duration::ZERO))
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_positive_rate() {
        let f = measure(&MemoryPlan {
            total_bytes: 16 << 20,
            threads: 2,
            repeats: 2,
        })
        .unwrap();
        assert_eq!(f.metric, Metric::HostMemoryBandwidth);
        assert!(f.value > 0.0 && f.value.is_finite());
        assert!(f.detail.contains("2 threads"), "{}", f.detail);
    }

    #[test]
    fn refuses_a_size_too_small() {
        let e = measure(&MemoryPlan {
            total_bytes: 1024,
            threads: 4,
            repeats: 1,
        });
        assert!(matches!(e, Err(HostBenchError::Input(_))));
    }
}
