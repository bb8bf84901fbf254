//! Integration tests: one binary, a module per command.

mod accept;
mod catalog;
mod codes;
mod containers;
mod currency;
mod daemon;
mod db;
mod doctor;
mod extensions;
mod files;
mod hostile;
mod hostile_net;
mod image;
mod image_build;
mod processes;
mod query;
mod reading;
mod refresh;
mod services;
mod show;
mod snapshots;
mod stats;
mod support;
mod terminal;
mod verify;
mod verify_trust;
