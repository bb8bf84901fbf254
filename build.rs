//! Embeds `compat-db/` into the binary so that gpuenv works offline with no files beside it.
//!
//! Writes `$OUT_DIR/embedded_db.rs` with every record file as `(relative path, text)`, in a
//! fixed order so that builds are reproducible: `gpuenv db lint` checks these texts with the
//! same code that reads `--db DIR`.
//!
//! It also writes `$OUT_DIR/embedded_db.json`, the same records as one JSON document
//! (`{kind: {id: record}}`), which a run loads instead of parsing 300 TOML files: a query
//! must start in a few milliseconds. The JSON carries the same values, so a record that
//! does not read from it fails the test that lints the shipped database, and the run falls
//! back to the checked TOML path.

use std::collections::BTreeMap;
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
    out.push_str("/// The same records as `{kind: {id: record}}` JSON.\n");
    out.push_str(
        "pub(crate) static JSON: &str = include_str!(concat!(env!(\"OUT_DIR\"), \"/embedded_db.json\"));\n",
    );

    let mut kinds: BTreeMap<String, serde_json::Map<String, serde_json::Value>> = BTreeMap::new();
    for (rel, abs) in &files {
        let Some((kind, name)) = rel.split_once('/') else {
            continue;
        };
        let text = fs::read_to_string(abs).unwrap_or_default();
        // A broken file is left out here; the checked path reports it.
        let Ok(value) = toml::from_str::<toml::Value>(&text) else {
            continue;
        };
        let Ok(json) = serde_json::to_value(value) else {
            continue;
        };
        let id = name.trim_end_matches(".toml").to_string();
        kinds.entry(kind.to_string()).or_default().insert(id, json);
    }
    let json = serde_json::to_string(&kinds).expect("records serialize to JSON");
    let json_dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded_db.json");
    fs::write(&json_dest, json).expect("write embedded_db.json");
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
