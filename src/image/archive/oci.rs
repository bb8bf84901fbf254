//! OCI indexes and manifests: index, then manifest, then config and layers, over any
//! store of blobs (an archive's members, an OCI directory, a registry).
//!
//! Owns: descriptors (a size is required, whole and not negative), choosing a manifest of
//! an index by name and platform (attestations left out), nesting bounded, foreign layers
//! refused, and every blob's size checked against its descriptor. Must not: open blobs
//! itself (a [`Store`] does).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Image, Layout, Platform, ReadOptions, build, listed, tag_matches};
use crate::image::ImageError;
use crate::image::config::ImageConfig;
use crate::image::digest::Digest;
use crate::image::layer::{Budget, Layer};

/// How deep image indexes may nest (an index naming an index naming a manifest).
const MAX_INDEX_DEPTH: usize = 4;

/// Where OCI resolution gets its blobs from.
pub(super) trait Store {
    /// A small document of the size its descriptor declares, verified against its digest.
    fn doc(&mut self, d: &Descriptor, what: &str) -> Result<Vec<u8>, ImageError>;
    /// The layers, in order, each read no further than its declared size and verified
    /// against its digest; an error comes with the index of the layer.
    fn layers(
        &mut self,
        wanted: &[Descriptor],
        budget: &mut Budget,
    ) -> Result<Vec<Layer>, (usize, ImageError)>;
}

/// A descriptor: what a manifest or an index says about a blob. The one descriptor type
/// of gpuenv: archives, OCI directories and the registry client read it alike, strictly
/// (a size is required, whole and not negative: it bounds reading the blob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    /// Media type (empty where the document gives none).
    pub media_type: String,
    /// The blob's digest.
    pub digest: Digest,
    /// The blob's length in bytes: required by the OCI image spec and Docker's manifest
    /// schema 2, and what bounds reading the blob.
    pub size: u64,
    /// For index entries.
    pub platform: Option<Platform>,
    annotations: BTreeMap<String, String>,
    urls: bool,
}

impl Descriptor {
    /// A blob known by its digest and size alone (a layer a manifest already named).
    pub fn blob(digest: Digest, size: u64) -> Descriptor {
        Descriptor {
            media_type: String::new(),
            digest,
            size,
            platform: None,
            annotations: BTreeMap::new(),
            urls: false,
        }
    }
}

/// Read from JSON by the same strict reader as an archive's documents.
impl<'de> serde::Deserialize<'de> for Descriptor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Descriptor, D::Error> {
        let v = <Value as serde::Deserialize>::deserialize(d)?;
        descriptor(&v, "descriptor").map_err(|e| serde::de::Error::custom(e.to_string()))
    }
}

fn descriptor(v: &Value, what: &str) -> Result<Descriptor, ImageError> {
    let malformed = |detail: &str| ImageError::Malformed {
        what: what.to_string(),
        expected: "OCI descriptor",
        detail: detail.to_string(),
    };
    let obj = v.as_object().ok_or_else(|| malformed("expected an object"))?;
    let digest = obj
        .get("digest")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("no `digest`"))?;
    let digest = Digest::parse(digest, what)?;
    let size = match obj.get("size") {
        None => return Err(malformed("no `size`; expected the blob's length in bytes")),
        Some(v) => match (v.as_u64(), v.as_i64()) {
            (Some(n), _) => n,
            (None, Some(n)) => {
                return Err(malformed(&format!(
                    "`size` is negative ({n}); expected the blob's length in bytes"
                )));
            }
            _ => {
                return Err(malformed(&format!(
                    "`size` is {}, not a whole number; expected the blob's length in bytes",
                    crate::text::excerpt(&v.to_string())
                )));
            }
        },
    };
    let platform = obj.get("platform").and_then(Value::as_object).map(|p| Platform {
        os: p.get("os").and_then(Value::as_str).unwrap_or("").to_string(),
        architecture: p
            .get("architecture")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        variant: p.get("variant").and_then(Value::as_str).map(str::to_string),
    });
    let annotations = obj
        .get("annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Descriptor {
        media_type: obj
            .get("mediaType")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        digest,
        size,
        platform,
        annotations,
        urls: obj
            .get("urls")
            .is_some_and(|u| u.as_array().is_some_and(|a| !a.is_empty())),
    })
}

fn is_index(doc: &Value, media_type: &str) -> bool {
    media_type.contains("image.index")
        || media_type.contains("manifest.list")
        || doc.get("manifests").is_some()
}

fn platform_matches(have: &Platform, want: &Platform) -> bool {
    have.os == want.os
        && have.architecture == want.architecture
        && match (&want.variant, &have.variant) {
            (Some(w), Some(h)) => w == h,
            (Some(w), None) => want.architecture == "arm64" && w == "v8",
            _ => true,
        }
}

/// Picks the manifest of `opts.platform` from an index document.
fn pick(index: &Value, what: &str, opts: &ReadOptions) -> Result<Descriptor, ImageError> {
    let list = index
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or_else(|| ImageError::Malformed {
            what: what.to_string(),
            expected: "image index",
            detail: "no `manifests` list".into(),
        })?;
    let all: Vec<Descriptor> = list
        .iter()
        .enumerate()
        .map(|(i, d)| descriptor(d, &format!("{what} manifests[{i}]")))
        .collect::<Result<_, _>>()?;
    // Attestations (buildx provenance, SBOMs) ride along as manifests of platform unknown/unknown.
    let images: Vec<&Descriptor> = all
        .iter()
        .filter(|d| {
            d.annotations.get("vnd.docker.reference.type").map(String::as_str) != Some("attestation-manifest")
        })
        .filter(|d| d.platform.as_ref().is_none_or(|p| p.os != "unknown"))
        .collect();
    let named: Vec<&Descriptor> = match &opts.name {
        Some(name) => images
            .iter()
            .copied()
            .filter(|d| {
                d.annotations
                    .get("org.opencontainers.image.ref.name")
                    .is_some_and(|r| r == name)
                    || d.annotations
                        .get("io.containerd.image.name")
                        .is_some_and(|r| r == name || tag_matches(r, name))
            })
            .collect(),
        None => images.clone(),
    };
    let pool = if named.is_empty() && opts.name.is_some() && images.len() == 1 {
        images.clone()
    } else {
        named
    };
    let with_platform: Vec<&Descriptor> = pool
        .iter()
        .copied()
        .filter(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| platform_matches(p, &opts.platform))
        })
        .collect();
    match (with_platform.as_slice(), pool.as_slice()) {
        ([one, ..], _) => Ok((*one).clone()),
        (_, [one]) if one.platform.is_none() => Ok((*one).clone()),
        (_, []) => Err(ImageError::Missing(match &opts.name {
            Some(n) => format!("{what} names no image `{}`", crate::text::excerpt(n)),
            None => format!("{what} lists no image"),
        })),
        (_, list) => {
            let have = list.iter().map(|d| {
                d.platform
                    .as_ref()
                    .map_or_else(|| "unknown platform".to_string(), |p| p.to_string())
            });
            Err(ImageError::Missing(format!(
                "{what} has no image for {}; it has: {}",
                opts.platform,
                listed(have)
            )))
        }
    }
}

pub(super) fn resolve_oci(
    store: &mut dyn Store,
    top: &[u8],
    top_what: &str,
    opts: &ReadOptions,
    budget: &mut Budget,
    layout: Layout,
) -> Result<Image, ImageError> {
    let parse = |bytes: &[u8], what: &str, expected: &'static str| -> Result<Value, ImageError> {
        serde_json::from_slice(bytes).map_err(|e| ImageError::Malformed {
            what: what.to_string(),
            expected,
            detail: e.to_string(),
        })
    };
    let mut doc = parse(top, top_what, "OCI index or manifest")?;
    let mut what = top_what.to_string();
    let mut media = doc
        .get("mediaType")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut manifest_digest = None;
    let mut names = Vec::new();
    for _ in 0..MAX_INDEX_DEPTH {
        if !is_index(&doc, &media) {
            break;
        }
        let d = pick(&doc, &what, opts)?;
        if let Some(n) = d.annotations.get("org.opencontainers.image.ref.name") {
            names.push(n.clone());
        }
        let bytes = store.doc(&d, "manifest")?;
        check_size(&d, bytes.len() as u64, "manifest")?;
        what = format!("manifest {}", d.digest.short());
        doc = parse(&bytes, &what, "OCI manifest")?;
        media = doc
            .get("mediaType")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(d.media_type.clone());
        manifest_digest = Some(d.digest);
    }
    if is_index(&doc, &media) {
        return Err(ImageError::Malformed {
            what,
            expected: "OCI manifest",
            detail: format!("indexes nest deeper than {MAX_INDEX_DEPTH}"),
        });
    }
    let config_desc = descriptor(
        doc.get("config").ok_or_else(|| ImageError::Malformed {
            what: what.clone(),
            expected: "OCI manifest",
            detail: "no `config`".into(),
        })?,
        &format!("{what} config"),
    )?;
    let config_bytes = store.doc(&config_desc, "config")?;
    check_size(&config_desc, config_bytes.len() as u64, "config")?;
    let config = ImageConfig::parse(&config_bytes, &format!("config {}", config_desc.digest.short()))?;
    let layer_descs: Vec<Descriptor> = doc
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| ImageError::Malformed {
            what: what.clone(),
            expected: "OCI manifest",
            detail: "no `layers` list".into(),
        })?
        .iter()
        .enumerate()
        .map(|(i, d)| descriptor(d, &format!("{what} layers[{i}]")))
        .collect::<Result<_, _>>()?;
    if let Some((i, d)) = layer_descs.iter().enumerate().find(|(_, d)| d.urls) {
        return Err(ImageError::Unsupported(format!(
            "layer {} ({}) is a foreign layer fetched from elsewhere; it is not in the image",
            i + 1,
            d.digest
        )));
    }
    let read = store.layers(&layer_descs, budget).map_err(|(i, e)| {
        let short = layer_descs.get(i).map(|d| d.digest.short()).unwrap_or_default();
        e.within(format!("layer {} ({short})", i + 1))
    })?;
    let mut layers = Vec::new();
    for (d, l) in layer_descs.iter().zip(read) {
        check_size(d, l.blob_size, "layer")?;
        layers.push((d.digest.to_string(), l));
    }
    build(config, layers, manifest_digest, names, layout)
}

fn check_size(d: &Descriptor, actual: u64, what: &str) -> Result<(), ImageError> {
    if d.size == actual {
        return Ok(());
    }
    Err(ImageError::Malformed {
        what: format!("{what} {}", d.digest),
        expected: "blob of the size its descriptor gives",
        detail: format!("the descriptor says {} bytes, the blob has {actual}", d.size),
    })
}
