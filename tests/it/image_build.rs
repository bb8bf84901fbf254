//! Builds test images in memory: layer tars, `docker save` archives (legacy and Docker 25+
//! layouts), OCI-layout archives and directories. No binary fixture is committed: every
//! image a test reads is made here, with the `tar` crate as an independent writer.

use std::io::Write;

use gpuenv::image::digest::sha256;
use serde_json::json;

/// One entry of a layer.
pub enum E<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    /// Deletes `path` (writes `dir/.wh.name`).
    Whiteout(&'a str),
    /// Makes `dir` opaque (writes `dir/.wh..wh..opq`).
    Opaque(&'a str),
}

fn header(kind: tar::EntryType, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(if kind == tar::EntryType::Directory {
        0o755
    } else {
        0o644
    });
    h.set_mtime(1_700_000_000);
    h
}

/// An uncompressed layer tar.
pub fn layer(entries: &[E]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        match e {
            E::File(p, data) => {
                let mut h = header(tar::EntryType::Regular, data.len() as u64);
                b.append_data(&mut h, p, *data).unwrap();
            }
            E::Dir(p) => {
                let mut h = header(tar::EntryType::Directory, 0);
                b.append_data(&mut h, format!("{p}/"), &[][..]).unwrap();
            }
            E::Symlink(p, t) => {
                let mut h = header(tar::EntryType::Symlink, 0);
                b.append_link(&mut h, p, t).unwrap();
            }
            E::HardLink(p, t) => {
                let mut h = header(tar::EntryType::Link, 0);
                b.append_link(&mut h, p, t).unwrap();
            }
            E::Whiteout(p) => {
                let (dir, name) = p.rsplit_once('/').unwrap_or(("", p));
                let path = if dir.is_empty() {
                    format!(".wh.{name}")
                } else {
                    format!("{dir}/.wh.{name}")
                };
                let mut h = header(tar::EntryType::Regular, 0);
                b.append_data(&mut h, path, &[][..]).unwrap();
            }
            E::Opaque(dir) => {
                let mut h = header(tar::EntryType::Regular, 0);
                b.append_data(&mut h, format!("{dir}/.wh..wh..opq"), &[][..])
                    .unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

pub fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::stream::encode_all(bytes, 3).unwrap()
}

/// What goes into an image config.
#[derive(Default, Clone)]
pub struct Config<'a> {
    pub env: Vec<&'a str>,
    pub labels: Vec<(&'a str, &'a str)>,
    pub entrypoint: Option<Vec<&'a str>>,
    pub user: Option<&'a str>,
    pub architecture: Option<&'a str>,
}

/// The config JSON for `layers` (uncompressed tars, for the diff_ids).
pub fn config_json(c: &Config, uncompressed: &[Vec<u8>]) -> Vec<u8> {
    let labels: serde_json::Map<String, serde_json::Value> =
        c.labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    serde_json::to_vec(&json!({
        "architecture": c.architecture.unwrap_or("amd64"),
        "os": "linux",
        "config": {
            "Env": c.env,
            "Labels": labels,
            "Entrypoint": c.entrypoint,
            "User": c.user.unwrap_or(""),
        },
        "rootfs": {
            "type": "layers",
            "diff_ids": uncompressed.iter().map(|l| sha256(l).to_string()).collect::<Vec<_>>(),
        },
    }))
    .unwrap()
}

/// An outer archive: members in the given order.
pub fn archive(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in members {
        let mut h = header(tar::EntryType::Regular, data.len() as u64);
        b.append_data(&mut h, path, &data[..]).unwrap();
    }
    b.into_inner().unwrap()
}

fn hex(bytes: &[u8]) -> String {
    sha256(bytes).hex().to_string()
}

/// A legacy `docker save` (before Docker 25): `<id>/layer.tar`, `<hex>.json`, with
/// manifest.json written first or last.
pub fn docker_save_legacy(tag: &str, c: &Config, layers: &[Vec<u8>], manifest_last: bool) -> Vec<u8> {
    let config = config_json(c, layers);
    let config_name = format!("{}.json", hex(&config));
    let mut members = Vec::new();
    let mut layer_paths = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        // Legacy ids are not content digests.
        let id = format!("{:064x}", i + 1);
        members.push((format!("{id}/VERSION"), b"1.0".to_vec()));
        members.push((format!("{id}/json"), b"{}".to_vec()));
        members.push((format!("{id}/layer.tar"), l.clone()));
        layer_paths.push(format!("{id}/layer.tar"));
    }
    let manifest = serde_json::to_vec(&json!([{
        "Config": config_name,
        "RepoTags": [tag],
        "Layers": layer_paths,
    }]))
    .unwrap();
    members.push((config_name, config));
    if manifest_last {
        members.push(("manifest.json".into(), manifest));
    } else {
        members.insert(0, ("manifest.json".into(), manifest));
    }
    archive(&members)
}

/// Blobs and the manifest of an OCI image (layers as given: compressed or not).
pub struct Oci {
    pub members: Vec<(String, Vec<u8>)>,
    pub manifest: Vec<u8>,
    pub config: Vec<u8>,
}

pub fn oci_image(c: &Config, uncompressed: &[Vec<u8>], stored: &[Vec<u8>]) -> Oci {
    let config = config_json(c, uncompressed);
    let mut members = vec![(format!("blobs/sha256/{}", hex(&config)), config.clone())];
    let mut descs = Vec::new();
    for s in stored {
        members.push((format!("blobs/sha256/{}", hex(s)), s.clone()));
        let media = if s.starts_with(&[0x1f, 0x8b]) {
            "application/vnd.oci.image.layer.v1.tar+gzip"
        } else if s.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            "application/vnd.oci.image.layer.v1.tar+zstd"
        } else {
            "application/vnd.oci.image.layer.v1.tar"
        };
        descs.push(json!({"mediaType": media, "digest": sha256(s).to_string(), "size": s.len()}));
    }
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(&config).to_string(), "size": config.len()},
        "layers": descs,
    }))
    .unwrap();
    members.push((format!("blobs/sha256/{}", hex(&manifest)), manifest.clone()));
    Oci {
        members,
        manifest,
        config,
    }
}

pub fn manifest_descriptor(
    manifest: &[u8],
    platform: Option<(&str, &str)>,
    name: Option<&str>,
) -> serde_json::Value {
    let mut d = json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": sha256(manifest).to_string(),
        "size": manifest.len(),
    });
    if let Some((os, arch)) = platform {
        d["platform"] = json!({"os": os, "architecture": arch});
    }
    if let Some(n) = name {
        d["annotations"] = json!({"org.opencontainers.image.ref.name": n});
    }
    d
}

/// An OCI-layout tar (`oci-archive:`) with index.json listing `descriptors`; index.json
/// comes first unless `index_last`.
pub fn oci_archive(images: &[Oci], descriptors: Vec<serde_json::Value>, index_last: bool) -> Vec<u8> {
    let index = serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": descriptors})).unwrap();
    let mut members = vec![(
        "oci-layout".to_string(),
        br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
    )];
    if !index_last {
        members.push(("index.json".into(), index.clone()));
    }
    for img in images {
        members.extend(img.members.iter().cloned());
    }
    if index_last {
        members.push(("index.json".into(), index));
    }
    archive(&members)
}

/// A Docker 25+ `docker save`: an OCI layout plus manifest.json naming blob paths.
pub fn docker_save_oci(tag: &str, c: &Config, layers: &[Vec<u8>]) -> Vec<u8> {
    let img = oci_image(c, layers, layers);
    let manifest_json = serde_json::to_vec(&json!([{
        "Config": format!("blobs/sha256/{}", hex(&img.config)),
        "RepoTags": [tag],
        "Layers": layers.iter().map(|l| format!("blobs/sha256/{}", hex(l))).collect::<Vec<_>>(),
    }]))
    .unwrap();
    let index = serde_json::to_vec(
        &json!({"schemaVersion": 2, "manifests": [manifest_descriptor(&img.manifest, None, Some(tag))]}),
    )
    .unwrap();
    let mut members = img.members;
    members.push(("index.json".into(), index));
    members.push(("manifest.json".into(), manifest_json));
    members.push(("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()));
    archive(&members)
}
