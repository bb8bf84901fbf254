//! Integration tests: one binary, a module per command.

mod codes;
mod containers;
mod daemon;
mod db;
mod doctor;
mod extensions;
mod image;
mod image_build;
mod query;
mod refresh;
mod show;
mod stats;
mod support;
mod verify;
