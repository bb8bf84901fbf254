//! Integration tests: one binary, a module per command.

mod db;
mod refresh;
mod show;
mod stats;
mod support;
