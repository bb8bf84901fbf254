//! Reading an image for `verify`, from whichever source it is in: the daemon (by paths,
//! or its export stream), a registry, a `docker save` or OCI archive file, an OCI
//! directory.
//!
//! Owns: choosing the reader for an [`ImageRef`], what a registry read may do with
//! credentials (scrubbed from every error), and the registry as a blob source for
//! `image::archive`. Must not: parse layers or manifests (that is `image`), judge what
//! was read (that is [`super::judge`](super::judge())), or print.

use std::io::Read;

use super::{Origin, VerifyError, paths};
use crate::deadline::Deadline;
use crate::docker::{self, Engine};
use crate::image::{ImageError, ImageRef, ReadOptions, archive, detect};
use crate::registry::{Registry, RegistryError};

/// Reads an image from its source.
///
/// A local image is read by paths (see [`paths`]) unless `full`, or unless what those
/// paths show calls for every layer; every other source is read layer by layer. A
/// registry is read under `deadline` (every request and every read of a body; a
/// credential helper gets at most [`crate::credentials::HELPER_TIMEOUT`] of it), with plain
/// HTTP only where [`crate::registry::plain_http`] allows it (`insecure`: the hosts the
/// user listed); the daemon is connected to within the deadline's idle limit. `progress`
/// is told how reading the layers goes, from a registry, an archive file or an OCI
/// directory.
pub fn read(
    reference: &ImageRef,
    given: &str,
    deadline: &Deadline,
    insecure: &[String],
    full: bool,
    progress: &crate::image::Watch,
) -> Result<(archive::Image, Origin), VerifyError> {
    let mut paths_asked = None;
    let mut layers_because = None;
    let mut opts = ReadOptions {
        progress: progress.clone(),
        ..ReadOptions::default()
    };
    // An archive is a regular file, read where its layers lie, several at once, each
    // member within the file's size. A FIFO, a socket or a device (`/dev/zero`) is
    // refused before it is read: it could be read forever, or wait forever.
    let read_file = |path: &std::path::Path, opts: &ReadOptions| -> Result<archive::Image, VerifyError> {
        let (file, _) = crate::files::open_regular(path, "archive").map_err(|e| {
            if e.is_bad_input() {
                VerifyError::Input(e.to_string())
            } else {
                VerifyError::Environment(e.to_string())
            }
        })?;
        Ok(archive::read_archive_file(&file, opts)?)
    };
    let mut index_digest = None;
    let (image, transport) = match reference {
        ImageRef::DockerArchive { path, image } => {
            opts.name = image.clone();
            (read_file(path, &opts)?, "docker-archive")
        }
        ImageRef::OciArchive { path, image } => {
            opts.name = image.clone();
            (read_file(path, &opts)?, "oci-archive")
        }
        ImageRef::OciDir { path, image } => {
            opts.name = image.clone();
            (archive::read_oci_dir(path, &opts)?, "oci")
        }
        ImageRef::Daemon(name) => 'daemon: {
            let engine = docker::Bollard::connect(deadline.wait())?;
            if !full {
                match paths::read(&engine, name)? {
                    paths::Outcome::Read(image, asked) => {
                        paths_asked = Some(asked);
                        break 'daemon (*image, "daemon");
                    }
                    paths::Outcome::NeedsLayers(why) => layers_because = Some(why),
                }
            }
            let stream = engine.export(name)?;
            opts.name = Some(name.clone()).filter(|n| !n.starts_with("sha256:"));
            let mut image = match archive::read_archive(stream, &opts) {
                // An id, or a name the archive spells differently: the only image it holds.
                Err(ImageError::Missing(_)) if opts.name.is_some() => {
                    opts.name = None;
                    archive::read_archive(engine.export(name)?, &opts)?
                }
                other => other?,
            };
            if image.names.is_empty() {
                image.names.push(name.clone());
            }
            (image, "daemon")
        }
        ImageRef::Registry(r) => {
            let (image, index) = read_registry(r, deadline, insecure, &opts)?;
            index_digest = index;
            (image, "registry")
        }
    };
    let origin = Origin {
        transport,
        reference: given.to_string(),
        digest: image.manifest_digest.as_ref().map(|d| d.as_str().to_string()),
        index_digest,
        names: image.names.clone(),
        read: if paths_asked.is_some() { "paths" } else { "layers" },
        paths_asked,
        layers_because,
    };
    Ok((image, origin))
}

/// An image from a registry (`docker://`), with the digest of the index its manifest was
/// chosen from when the reference named one. Every error that reaches the user has the
/// credentials scrubbed from it (and every base64 form of them), whatever a server echoed.
fn read_registry(
    r: &crate::image::reference::RegistryRef,
    deadline: &Deadline,
    insecure: &[String],
    opts: &ReadOptions,
) -> Result<(archive::Image, Option<String>), VerifyError> {
    let helper_time = crate::credentials::HELPER_TIMEOUT.min(deadline.remaining());
    let creds = crate::credentials::lookup_within(&r.registry, &|k| std::env::var(k).ok(), helper_time)
        .map_err(|e| {
            if e.is_environment() {
                VerifyError::Environment(e.to_string())
            } else {
                VerifyError::Input(e.to_string())
            }
        })?;
    let scrub = |e: VerifyError| match &creds {
        None => e,
        Some(c) => match e {
            VerifyError::Input(m) => VerifyError::Input(c.redact(&m)),
            other => VerifyError::Environment(c.redact(&other.to_string())),
        },
    };
    let read = || -> Result<(archive::Image, Option<String>), VerifyError> {
        let reg = Registry::new(&r.registry, creds.clone(), deadline.clone(), insecure)?;
        let reference = match &r.reference {
            crate::image::reference::TagOrDigest::Tag(t) => t.clone(),
            crate::image::reference::TagOrDigest::Digest(d) => d.as_str().to_string(),
        };
        let (top, digest, index) = reg.platform_manifest(&r.repository, &reference, ("linux", "amd64"))?;
        let source = RegistryBlobs {
            reg: &reg,
            repo: &r.repository,
        };
        let mut image = archive::read_from_blobs(&source, &top, opts, &detect::select)?;
        image.manifest_digest = crate::image::digest::Digest::parse(&digest, "the manifest").ok();
        image.names.push(match r.tag() {
            Some(tag) => format!("{}:{tag}", r.familiar_name()),
            None => r.familiar_name(),
        });
        Ok((image, index))
    };
    read().map_err(scrub)
}

/// Blobs of one repository of a registry, for the image reader (which verifies them).
/// Each is read up to exactly the size its descriptor declares (the reader passes it).
struct RegistryBlobs<'a> {
    reg: &'a Registry,
    repo: &'a str,
}

impl archive::BlobSource for RegistryBlobs<'_> {
    /// Docker's own default (`max-concurrent-downloads`): a registry is not hit harder
    /// than `docker pull` hits it.
    fn parallelism(&self) -> usize {
        3
    }

    fn open(
        &self,
        digest: &crate::image::digest::Digest,
        size: u64,
    ) -> Result<Box<dyn Read + '_>, ImageError> {
        let desc = crate::registry::Descriptor::blob(digest.clone(), size);
        let reader = self.reg.blob(self.repo, &desc).map_err(|e| match e {
            RegistryError::Net(n) => ImageError::Io {
                what: format!("blob {digest}"),
                source: n.into_io(),
            },
            other => ImageError::Missing(other.to_string()),
        })?;
        Ok(Box::new(reader))
    }
}
