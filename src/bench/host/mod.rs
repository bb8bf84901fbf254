//! The host measured by gpuenv itself, and by `fio` and perftest's `ib_write_bw` where
//! they are installed: the data disk, host memory, the network to a peer (TCP, and RDMA),
//! downloads from the registries and indexes a stack pulls from.
//!
//! Owns: each measurement's method and its bounds (sizes, durations, caps), and turning
//! what it timed into [`Figure`](super::Figure)s whose `detail` says how they were made.
//! Must not: print (that is `report`), judge a figure (that is the bench's judging), or
//! write anywhere but the test file under the directory it was given.

pub mod disk;
pub mod download;
pub mod fio;
pub mod memory;
pub mod net;
pub mod rdma;
pub mod registry;

use std::time::{Duration, Instant};

use crate::interrupt::Signal;

/// Why a host measurement could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HostBenchError {
    /// What the user gave is unusable (a path that is not a directory, a size over the
    /// cap, too little free space): nothing was written.
    #[error("{0}")]
    Input(String),
    /// The machine or the other side failed (a write error, a peer that does not answer).
    #[error("{0}")]
    Environment(String),
    /// SIGINT or SIGTERM stopped the measurement, after its test file was removed.
    #[error("stopped by {0}; the test file was removed")]
    Interrupted(Signal),
}

/// Seconds, as a figure's detail writes them.
fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Reads `body` until `max_bytes` or `max_time`, dropping what it reads: the bytes read
/// and the time taken. Stops on SIGINT or SIGTERM; an error names `shown`.
fn timed_read(
    body: &mut dyn std::io::Read,
    max_bytes: u64,
    max_time: Duration,
    shown: &str,
) -> Result<(u64, Duration), HostBenchError> {
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let mut read: u64 = 0;
    while read < max_bytes && start.elapsed() < max_time {
        if let Some(sig) = crate::interrupt::requested() {
            return Err(HostBenchError::Interrupted(sig));
        }
        let want = buf
            .len()
            .min(usize::try_from(max_bytes - read).unwrap_or(buf.len()));
        match body.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => read = read.saturating_add(n as u64),
            Err(e) => {
                return Err(HostBenchError::Environment(format!(
                    "reading `{shown}` failed after {}: {e}",
                    crate::files::bytes(read)
                )));
            }
        }
    }
    if read == 0 {
        return Err(HostBenchError::Environment(format!("`{shown}` sent no bytes")));
    }
    Ok((read, start.elapsed()))
}
