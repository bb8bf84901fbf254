//! What is inside an image, read without running it.

pub mod digest;
pub mod elfnote;
mod error;
pub mod fs;
pub mod layer;
pub mod tar;

pub use error::ImageError;
pub mod archive;
pub mod config;
pub mod detect;
pub mod pyfiles;
pub mod reference;
pub mod require;
