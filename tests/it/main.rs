//! Integration tests: one binary, a module per command.

mod db;
mod show;
mod support;
