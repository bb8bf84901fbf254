//! The live host, behind a seam: what the probes find, with where each fact came from.
//!
//! Owns: probing GPUs, driver, toolkits, cuDNN/NCCL, Pythons, the container runtime and
//! the system, in a documented order, concurrently and with timeouts; pure parsers for
//! every tool's output; recording and replaying a host. Must not: decide compatibility
//! (that is `resolve`, fed with these facts), print, or talk to Docker directly (Docker
//! facts come through the seam, from the `docker` module).

mod machine;
mod nvml;
pub mod overrides;
pub mod parse;
pub mod probe;
pub mod system;
pub mod types;

pub use probe::{
    CdiSpec, DockerProbe, HostReport, LibFound, ProbeOptions, PythonEnv, Sourced, TorchProbe, XidEvent, probe,
};
pub use types::*;
// For `bench`, which names the host and the data disk as `doctor` does.
pub use machine::{classify_mounts, hostname, machine_id};
