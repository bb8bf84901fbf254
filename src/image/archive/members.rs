//! What one walk over an archive's members collected: its JSON documents, the layers read
//! on the way (or where they lie in a file), the links between members and the layers
//! that failed to read.
//!
//! Owns: member names (`blobs/sha256/<hex>`, legacy `<id>/layer.tar`), following member
//! links, handing out each layer a manifest lists, and telling which manifest format the
//! archive is in. Must not: parse a manifest (that is `docker.rs` and `oci.rs`).

use std::collections::HashMap;
use std::fs::File;

use super::oci::{Descriptor, Store, resolve_oci};
use super::{Image, Layout, ReadOptions, Watch};
use crate::image::ImageError;
use crate::image::digest::Digest;
use crate::image::layer::{self, Budget, Layer, Select};

/// `blobs/sha256/<hex>` → its digest.
pub(super) fn blob_digest_of(path: &str) -> Option<Digest> {
    Digest::from_hex(path.strip_prefix("blobs/sha256/")?)
}

/// Members read whole: the archive's own documents and legacy configs.
pub(super) fn is_doc_name(path: &str) -> bool {
    matches!(
        path,
        "manifest.json" | "index.json" | "oci-layout" | "repositories"
    ) || (!path.contains('/') && path.ends_with(".json"))
}

pub(super) fn looks_like_layer_name(path: &str) -> bool {
    path.ends_with("layer.tar")
        || path.ends_with(".tar")
        || path.ends_with(".tar.gz")
        || path.ends_with(".tar.zst")
}

/// Where a member's data lies in an archive file.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) offset: u64,
    pub(super) size: u64,
}

/// What one pass over an archive collected.
#[derive(Default)]
pub(super) struct Members {
    pub(super) docs: HashMap<String, Vec<u8>>,
    pub(super) layers: HashMap<String, Layer>,
    pub(super) failed: HashMap<String, ImageError>,
    pub(super) aliases: HashMap<String, String>,
    /// Layers not read in the pass (an archive file): where they lie.
    pub(super) spans: HashMap<String, Span>,
    /// Who is told how reading the layers of an archive file goes.
    pub(super) watch: Watch,
}

impl Members {
    /// Follows member links (bounded).
    pub(super) fn real<'a>(&'a self, mut path: &'a str) -> &'a str {
        for _ in 0..8 {
            match self.aliases.get(path) {
                Some(t) => path = t,
                None => break,
            }
        }
        path
    }

    /// The image the archive holds, by its manifest format: manifest.json (`docker save`)
    /// first, else index.json (an OCI layout).
    pub(super) fn resolve(
        mut self,
        opts: &ReadOptions,
        budget: &mut Budget,
        select: &dyn Select,
        file: Option<&File>,
    ) -> Result<Image, ImageError> {
        self.watch = opts.progress.clone();
        if self.docs.contains_key("manifest.json") {
            return super::docker::resolve(&mut self, opts, budget, select, file);
        }
        if let Some(index) = self.docs.get("index.json").cloned() {
            let mut store = MemberStore {
                members: &mut self,
                select,
                file,
            };
            return resolve_oci(&mut store, &index, "index.json", opts, budget, Layout::Oci);
        }
        Err(ImageError::Missing(
            "the archive has neither manifest.json (`docker save`) nor index.json (OCI layout): not an image archive"
                .into(),
        ))
    }

    /// The layers at `paths`, in order. Those of an archive file not read yet are read
    /// now, each once, several at once. An error comes with the index of the layer.
    pub(super) fn take_layers(
        &mut self,
        paths: &[String],
        budget: &mut Budget,
        select: &dyn Select,
        file: Option<&File>,
    ) -> Result<Vec<Layer>, (usize, ImageError)> {
        if let Some(file) = file {
            super::file::read_spans(self, paths, budget, select, file)?;
        }
        paths
            .iter()
            .enumerate()
            .map(|(i, p)| self.take_layer(p, budget, select).map_err(|e| (i, e)))
            .collect()
    }

    fn take_layer(
        &mut self,
        path: &str,
        budget: &mut Budget,
        select: &dyn Select,
    ) -> Result<Layer, ImageError> {
        let real = self.real(path).to_string();
        if let Some(e) = self.failed.remove(&real) {
            return Err(e.within(format!("layer `{path}`")));
        }
        if let Some(l) = self.layers.get(&real) {
            // Cloned: one layer may be listed twice (an empty layer shared by two steps).
            return Ok(l.clone());
        }
        if let Some(bytes) = self.docs.get(&real) {
            // A small layer that looked like JSON from its first byte.
            return layer::read_layer(&bytes[..], select, budget)
                .map_err(|e| e.within(format!("layer `{path}`")));
        }
        Err(ImageError::Missing(format!(
            "the manifest lists layer `{}`, which is not in the archive",
            crate::text::excerpt(path)
        )))
    }
}

struct MemberStore<'a> {
    members: &'a mut Members,
    select: &'a dyn Select,
    file: Option<&'a File>,
}

impl Store for MemberStore<'_> {
    fn doc(&mut self, d: &Descriptor, what: &str) -> Result<Vec<u8>, ImageError> {
        let digest = &d.digest;
        let path = format!("blobs/sha256/{}", digest.hex());
        let real = self.members.real(&path).to_string();
        // Verified when it was read (its name is its digest).
        self.members
            .docs
            .get(&real)
            .cloned()
            .ok_or_else(|| ImageError::Missing(format!("{what} `{digest}` is not in the archive")))
    }

    fn layers(
        &mut self,
        wanted: &[Descriptor],
        budget: &mut Budget,
    ) -> Result<Vec<Layer>, (usize, ImageError)> {
        // A member's size is its tar header's; the descriptor's is checked after.
        let paths: Vec<String> = wanted
            .iter()
            .map(|d| format!("blobs/sha256/{}", d.digest.hex()))
            .collect();
        self.members.take_layers(&paths, budget, self.select, self.file)
    }
}
