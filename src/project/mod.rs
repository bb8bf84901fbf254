//! A Python project's own files: what its requirements files and `pyproject.toml` say
//! about its PyTorch stack ([`grammar`]), and reading them from disk as pip does
//! ([`read`]: `-r`/`-c` includes followed depth first, each file once, within bounds).
//!
//! Owns: the project-file grammars and the reading of project files. Must not: consult the
//! database or decide anything about compatibility (the resolver takes what is read here),
//! or print.

pub mod grammar;
pub mod read;

pub use grammar::*;
pub use read::{ReadError, read_files};
