//! Download speed from a container registry: the largest layer of an image the stack
//! pulls, read through gpuenv's own registry client ([`crate::registry`]) as `docker pull`
//! would fetch it (the manifest for linux/amd64, a token where the registry asks for one,
//! the credentials `pull` uses), over a bounded read.
//!
//! Owns: choosing the layer and the bounded read. Must not: keep what it reads (the bytes
//! are counted and dropped), print, or talk to the Docker Engine (a daemon's pull goes
//! through its own mirrors and cache, so it would not measure the registry).
//!
//! As for a URL ([`super::download`]), the clock starts when the blob's answer has
//! arrived, so the figure is the transfer's rate; the read stops at its byte or time limit.

use std::time::Duration;

use super::HostBenchError;
use crate::bench::{Engine, Figure, Metric};
use crate::deadline::Deadline;
use crate::image::reference::{RegistryRef, TagOrDigest};
use crate::registry::Registry;

/// What to read.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    /// The image, as `pull` takes it (`nvcr.io/nvidia/pytorch:25.01-py3`, a mirror's name).
    pub image: String,
    /// At most this many bytes are read.
    pub max_bytes: u64,
    /// At most this long is spent reading the layer.
    pub max_time: Duration,
    /// Registries that may be spoken to over plain HTTP (`--insecure-registry`).
    pub insecure: Vec<String>,
}

/// The image's reference, checked before anything runs: bad input names the flag.
pub fn check(image: &str) -> Result<RegistryRef, HostBenchError> {
    RegistryRef::parse(image).map_err(|e| {
        HostBenchError::Input(format!(
            "--download-image `{}`: {}; expected an image such as `nvcr.io/nvidia/pytorch:25.01-py3`",
            crate::text::excerpt(image),
            e.reason
        ))
    })
}

/// Reads the image's largest layer up to the plan's bounds and gives the rate.
pub fn measure(plan: &ImagePlan) -> Result<Figure, HostBenchError> {
    let r = check(&plan.image)?;
    let shown = crate::text::excerpt(&plan.image);
    // The manifest and the token may take the idle limit each; the layer gets the plan's
    // time on top.
    let deadline = Deadline::new(plan.max_time + 2 * crate::deadline::IDLE, false);
    let helper_time = crate::credentials::HELPER_TIMEOUT.min(deadline.remaining());
    let creds = crate::credentials::lookup_within(&r.registry, &|k| std::env::var(k).ok(), helper_time)
        .map_err(|e| HostBenchError::Environment(e.to_string()))?;
    // Whatever a server echoes, no credential reaches the output.
    let scrub = |m: String| match &creds {
        Some(c) => c.redact(&m),
        None => m,
    };
    let env = |e: crate::registry::RegistryError| HostBenchError::Environment(scrub(e.to_string()));
    let reg = Registry::new(&r.registry, creds.clone(), deadline.clone(), &plan.insecure).map_err(env)?;
    let reference = match &r.reference {
        TagOrDigest::Tag(t) => t.clone(),
        TagOrDigest::Digest(d) => d.as_str().to_string(),
    };
    let (manifest, _) = reg
        .manifest(&r.repository, &reference, ("linux", "amd64"))
        .map_err(env)?;
    let Some(layer) = manifest.layers.iter().max_by_key(|l| l.size) else {
        return Err(HostBenchError::Environment(format!(
            "`{shown}` has no layer to download"
        )));
    };
    let mut body = reg.blob(&r.repository, layer).map_err(env)?;
    let (read, took) = super::timed_read(&mut body, plan.max_bytes, plan.max_time, &shown)?;
    Ok(Figure::new(
        Metric::Download,
        read as f64 / took.as_secs_f64().max(1e-9) / 1e9,
        Engine::Gpuenv,
        format!(
            "{} of layer {} ({}) of `{shown}` from {} in {} (at most {} or {} s read)",
            crate::files::bytes(read),
            crate::text::excerpt(layer.digest.as_str()),
            crate::files::bytes(layer.size),
            crate::text::excerpt(&r.registry),
            super::secs(took),
            crate::files::bytes(plan.max_bytes),
            plan.max_time.as_secs()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_reference_is_bad_input_naming_the_flag() {
        for bad in ["", "UPPER/Case", "a b", "x:y:z"] {
            let e = check(bad).unwrap_err();
            assert!(matches!(e, HostBenchError::Input(_)), "{bad}");
            assert!(e.to_string().contains("--download-image"), "{e}");
        }
        assert_eq!(
            check("nvcr.io/nvidia/pytorch:25.01-py3").unwrap().registry,
            "nvcr.io"
        );
    }

    #[test]
    fn a_bounded_read_stops_at_its_byte_limit() {
        let data = vec![7u8; 1 << 20];
        let (n, _) = super::super::timed_read(&mut &data[..], 300_000, Duration::from_secs(5), "x").unwrap();
        assert_eq!(n, 300_000);
        let (n, _) = super::super::timed_read(&mut &data[..], u64::MAX, Duration::from_secs(5), "x").unwrap();
        assert_eq!(n, 1 << 20);
        let empty: &[u8] = &[];
        assert!(super::super::timed_read(&mut &empty[..], 10, Duration::from_secs(1), "x").is_err());
    }
}
