//! `gpuenv plan`: from a model and a training method to the GPU memory it needs, the GPUs
//! and how many, the machine, the stack and the order to accept on delivery.
//!
//! Owns: the model's size (a parameter count as written, a Hugging Face `config.json`, or
//! a compat-db `model` record), the memory estimate per GPU with every assumption and its
//! source, which GPUs fit and how many, the machine's CPU, RAM and disk, the time and cost
//! of a run, ranking offers, and the order it implies. Must not: print, read files or the
//! network (the caller hands over text), or restate a compatibility rule (the stack comes
//! from the resolver).

pub mod estimate;
pub mod fit;
pub mod model;
pub mod offers;
pub mod reference;
pub mod run;
pub mod types;

pub use estimate::estimate;
pub use model::{from_hf_config, parse_params};
pub use types::*;
