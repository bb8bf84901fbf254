//! Embeds `compat-db/` into the binary so that gpuenv works offline with no files beside it.
//!
//! Writes `$OUT_DIR/embedded_db.rs` with every record file as `(relative path, text)`, in a
//! fixed order so that builds are reproducible. The text is parsed and checked at run time
//! by the same code that reads `--db DIR`, so the two can never disagree.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let db = root.join("compat-db");
    println!("cargo:rerun-if-changed=compat-db");

    let mut files = Vec::new();
    collect(&db, &db, &mut files);
    files.sort();

    let mut out = String::from("/// Every record file of `compat-db/`, as (path relative to it, text).\n");
    out.push_str("pub(crate) static FILES: &[(&str, &str)] = &[\n");
    for (rel, abs) in &files {
        writeln!(out, "    ({rel:?}, include_str!({abs:?})),").expect("writing to a String");
    }
    out.push_str("];\n");
    let dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded_db.rs");
    fs::write(&dest, out).expect("write embedded_db.rs");
}

/// Collects `*.toml` below the kind directories; `templates/` holds copy-me examples, not data.
fn collect(db: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(db)
            .expect("entries are below the db root")
            .to_string_lossy()
            .replace('\\', "/");
        if path.is_dir() {
            if rel != "templates" {
                collect(db, &path, files);
            }
        } else if rel.contains('/') && rel.ends_with(".toml") {
            files.push((rel, path.to_string_lossy().into_owned()));
        }
    }
}
