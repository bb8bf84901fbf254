//! gpuenv: will this Python + PyTorch + CUDA + cuDNN + driver + GPU stack run?
//!
//! The library behind the `gpuenv` command. It knows the rules and the facts of the
//! NVIDIA/PyTorch stack (a curated, sourced database compiled into the binary) and
//! answers before the order, on the host and inside an image.
//!
//! Modules, and what may call what (`cli` calls everything):
//! - [`model`]: domain types and parsers; pure.
//! - [`db`]: the compat database: load (embedded or a directory), validate, lint, look up.
//! - [`dockerfile`]: Dockerfiles for a resolved stack; pure text.
//! - [`docker`]: the only module that talks to the Docker Engine.
//! - [`image`]: what is inside an image (config, layers, files), read without running it;
//!   pure readers over byte streams.
//! - [`resolve`]: the rules and the search: which stacks run, why, and what to change.
//! - [`upstream`]: PyPI and the PyTorch index, read for `db refresh`.
//! - [`host`]: probes of the live host behind a seam that records and replays.
//! - [`judge`]: doctor's checks and the host against the project and the order.
//! - [`registry`]: the OCI distribution API, without a daemon.
//! - [`verify`]: an image from any source, judged against its claims and a host.
//! - [`text`]: cleaning other programs' output; making text from outside safe to show.
//! - [`files`]: files users name: regular files only, within caps; output written atomically.
//! - [`interrupt`]: SIGINT and SIGTERM while gpuenv holds something in the daemon.
//! - [`deadline`]: the total and idle limits of one command's work with the outside.
//! - [`net`]: HTTP under a deadline, bodies read through caps (the registry and upstream
//!   clients send through it).
//! - [`bench`](mod@bench): figures measured on the delivered machine (engines, gpuenv's own, burn-in)
//!   and how each is judged against the datasheet and the machine's peers.
//! - [`fleet`]: `doctor --json` reports of many nodes merged: a summary each, the drift.
//! - [`report`]: the only module that prints.
//! - [`cli`]: argument parsing and dispatch.

pub mod bench;
pub mod cli;
pub mod credentials;
pub mod db;
pub mod deadline;
pub mod docker;
pub mod dockerfile;
pub mod files;
pub mod fleet;
pub mod formats;
pub mod host;
pub mod image;
pub mod interrupt;
pub mod judge;
pub mod model;
pub mod net;
pub mod plan;
pub mod process;
pub mod project;
pub mod registry;
pub mod report;
pub mod resolve;
pub mod text;
pub mod upstream;
pub mod verify;
