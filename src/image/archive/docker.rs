//! `docker save`'s manifest.json: a list of images, each naming its config and its layers
//! by member path, with its repo tags.
//!
//! Owns: choosing the image of the archive (by name, or the only one), the legacy config's
//! check against its own name, and telling the legacy layout from Docker 25+'s. Must not:
//! read members (they arrive as [`Members`]).

use std::fs::File;

use serde_json::Value;

use super::members::Members;
use super::{Image, Layout, ReadOptions, build, listed, mismatch, tag_matches};
use crate::image::ImageError;
use crate::image::config::ImageConfig;
use crate::image::digest::{Digest, sha256};
use crate::image::layer::{Budget, Select, normalize_path};

/// The image manifest.json lists (the one `opts.name` names, or the only one), its config
/// and its layers taken from the members.
pub(super) fn resolve(
    members: &mut Members,
    opts: &ReadOptions,
    budget: &mut Budget,
    select: &dyn Select,
    file: Option<&File>,
) -> Result<Image, ImageError> {
    let bytes = members
        .docs
        .get(MANIFEST)
        .ok_or_else(|| ImageError::Missing("the archive has no manifest.json".into()))?;
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
    let entries = doc
        .as_array()
        .ok_or_else(|| malformed("expected a list".into()))?;
    let chosen = choose(entries, opts)?;
    let config_path = chosen
        .get("Config")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("an entry without `Config`".into()))?;
    let layer_paths: Vec<String> = chosen
        .get("Layers")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("an entry without `Layers`".into()))?
        .iter()
        .map(|l| {
            l.as_str()
                .map(str::to_string)
                .ok_or_else(|| malformed("a layer that is not a path".into()))
        })
        .collect::<Result<_, _>>()?;
    let config_path = normalize_path(config_path.as_bytes())?.unwrap_or_default();
    let config = config(members, &config_path)?;
    let layout = if config_path.starts_with("blobs/") {
        Layout::DockerOci
    } else {
        Layout::DockerLegacy
    };
    let layer_paths: Vec<String> = layer_paths
        .iter()
        .map(|p| Ok(normalize_path(p.as_bytes())?.unwrap_or_default()))
        .collect::<Result<_, ImageError>>()?;
    let names = tags_of(chosen);
    let layers = members
        .take_layers(&layer_paths, budget, select, file)
        .map_err(|(_, e)| e)?;
    build(
        config,
        layer_paths.into_iter().zip(layers).collect(),
        None,
        names,
        layout,
    )
}

/// The member that lists the images.
const MANIFEST: &str = "manifest.json";

fn malformed(detail: String) -> ImageError {
    ImageError::Malformed {
        what: MANIFEST.into(),
        expected: "docker save manifest",
        detail,
    }
}

/// An entry's `RepoTags`.
fn tags_of(e: &Value) -> Vec<String> {
    e.get("RepoTags")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The entry of the image `opts.name` names, or the only one there is.
fn choose<'a>(entries: &'a [Value], opts: &ReadOptions) -> Result<&'a Value, ImageError> {
    Ok(match (&opts.name, entries) {
        (_, []) => return Err(ImageError::Missing("manifest.json lists no image".into())),
        (Some(name), list) => list
            .iter()
            .find(|e| tags_of(e).iter().any(|t| t == name || tag_matches(t, name)))
            .ok_or_else(|| {
                ImageError::Missing(format!(
                    "no image tagged `{}` in the archive; it holds: {}",
                    crate::text::excerpt(name),
                    listed(list.iter().flat_map(tags_of))
                ))
            })?,
        (None, [one]) => one,
        (None, list) => {
            return Err(ImageError::Missing(format!(
                "the archive holds {} images; name one: {}",
                list.len(),
                listed(list.iter().flat_map(tags_of))
            )));
        }
    })
}

/// The config at `config_path` (as the manifest names it, normalized), parsed.
fn config(members: &Members, config_path: &str) -> Result<ImageConfig, ImageError> {
    let real = members.real(config_path).to_string();
    let bytes = members.docs.get(&real).ok_or_else(|| {
        ImageError::Missing(format!(
            "the manifest names config `{}`, which is not in the archive",
            crate::text::excerpt(config_path)
        ))
    })?;
    // Legacy configs are named `<hex>.json` after their own digest.
    if let Some(d) = real.strip_suffix(".json").and_then(Digest::from_hex) {
        let actual = sha256(bytes);
        if actual != d {
            return Err(mismatch(&real, &d, &actual));
        }
    }
    ImageConfig::parse(bytes, &format!("config `{config_path}`"))
}
