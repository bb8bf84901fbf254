//! What upstream publishes, and `gpuenv db refresh`: proposals for the database.
//!
//! Owns: the HTTP client of the refresh (reqwest, through [`crate::net`]), the readers of PyPI's JSON simple API and wheel
//! metadata (PEP 658), the PyTorch wheel index, and turning what they say into proposed
//! records: torch releases (`refresh`), CUDA toolkits and cuDNN releases (`toolkits`,
//! whose unknowable facts are proposed as `pending`, never guessed), the releases of packages
//! that pin torch (`frameworks`), NGC PyTorch releases from the tags of `nvidia/pytorch` on
//! its registry (`ngc`, read through [`crate::registry`]), and driver releases from NVIDIA's
//! download index (`drivers`). Must not: write into `compat-db/` (proposals go to a directory a curator
//! reviews), decide compatibility, or print (the summary is data for `report`).

mod drivers;
mod frameworks;
pub(crate) mod http;
mod lazy_wheel;
mod ngc;
pub mod pypi;
mod refresh;
mod toolkits;

pub use drivers::{
    BranchSeen, DriverListing, MAX_INDEX_ENTRIES, driver_proposals, folder_version, parse_index, parse_latest,
};
pub use frameworks::{FRAMEWORK_PROJECTS, MAX_RELEASES, TorchRequirement, torch_requirement};
pub use http::{Client, Fetched, Ranged};
pub use ngc::{NGC_PENDING, NGC_REPOSITORY, NgcRelease, NgcTags, ngc_candidates, ngc_release, sort_tags};
pub use refresh::{
    Change, Proposal, RefreshOptions, RefreshStep, Summary, compare_torch, refresh, refresh_told,
    torch_facts, torch_facts_told,
};
pub use toolkits::{
    COMPONENT_PROJECTS, CUDNN_PROJECTS, ComponentLines, TOOLKIT_PROJECT, component_pin, toolkit_candidates,
    toolkit_release,
};

/// Why reading upstream failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The network failed: no connection, a server too slow (the deadline) or sending too
    /// much (the cap), a server error.
    #[error("cannot fetch `{url}`: {reason}")]
    Network {
        /// What was asked for.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// A response was not what the API documents.
    #[error("unexpected response from `{url}`: {reason}")]
    Format {
        /// What was asked for.
        url: String,
        /// What was wrong with it.
        reason: String,
    },
    /// Writing proposals or recordings failed.
    #[error("cannot write `{path}`: {reason}")]
    Write {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The output directory is not usable.
    #[error("output directory `{path}` {reason}")]
    OutDir {
        /// The path.
        path: String,
        /// What is wrong.
        reason: String,
    },
}
