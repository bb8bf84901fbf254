//! The prebuilt image `gpuenv pull` takes for a stack, from compat-db's image catalog.
//!
//! In order: a `pytorch/pytorch` tag with the stack's torch release and CUDA major.minor
//! (the `runtime` flavor, or `devel` when extensions are compiled), with the stack's Python
//! where the record knows it; else an NGC PyTorch container whose torch is a build of that
//! release on that CUDA; else the `nvidia/cuda` base a Dockerfile would start from (no torch
//! in it: the summary says so). Stacks are tried in the resolver's rank order, so the best
//! runnable stack that has a prebuilt image wins over a better one that has none.

use crate::db::{Flavor, Image, ImageFamily};
use crate::model::Version;
use crate::resolve::{Stack, Status};

use super::{DockerfileError, choose_base};

/// An image chosen from the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prebuilt {
    /// The reference, as the catalog writes it (`pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime`).
    pub image: String,
    /// Its catalog.
    pub family: ImageFamily,
    /// Whether torch is in it.
    pub has_torch: bool,
    /// The rank of the stack it serves among the stacks given.
    pub stack: usize,
    /// Why it was chosen, in a sentence.
    pub why: String,
}

fn release(v: &Version) -> Vec<u64> {
    v.release().to_vec()
}

fn same_cuda(image: &Image, stack: &Stack) -> bool {
    match (image.cuda.as_ref(), stack.variant.cuda()) {
        (Some(i), Some(s)) => i.major_minor() == s.major_minor(),
        _ => false,
    }
}

fn same_python(image: &Image, stack: &Stack) -> bool {
    image
        .python
        .as_ref()
        .is_none_or(|p| p.to_string() == stack.python)
}

fn same_torch(image: &Image, stack: &Stack) -> bool {
    let Ok(want) = crate::model::parse_version(&stack.torch) else {
        return false;
    };
    image.torch.as_ref().is_some_and(|t| release(t) == release(&want))
}

/// Chooses the image for the runnable stacks of an answer (best first).
pub fn prebuilt(
    stacks: &[Stack],
    images: &[Image],
    extensions: bool,
) -> Result<Option<Prebuilt>, DockerfileError> {
    let runnable: Vec<(usize, &Stack)> = stacks
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status != Status::Incompatible && s.variant.is_cuda())
        .collect();
    let flavors: &[Flavor] = if extensions {
        &[Flavor::Devel]
    } else {
        &[Flavor::Runtime, Flavor::Devel]
    };
    for flavor in flavors {
        for (rank, s) in &runnable {
            let hit = images.iter().find(|i| {
                i.family == ImageFamily::Pytorch
                    && i.flavors.contains(flavor)
                    && same_torch(i, s)
                    && same_cuda(i, s)
                    && same_python(i, s)
            });
            if let Some(i) = hit {
                return Ok(Some(Prebuilt {
                    image: format!("{}:{}", i.repository, i.tag.as_deref().unwrap_or("latest")),
                    family: i.family,
                    has_torch: true,
                    stack: *rank,
                    why: format!(
                        "PyTorch's own image of torch {}+{} on Python {}",
                        s.torch, s.variant, s.python
                    ),
                }));
            }
        }
    }
    for (rank, s) in &runnable {
        let hit = images
            .iter()
            .filter(|i| {
                i.family == ImageFamily::Ngc && same_torch(i, s) && same_cuda(i, s) && same_python(i, s)
            })
            .max_by(|a, b| a.released.cmp(&b.released));
        if let Some(i) = hit {
            return Ok(Some(Prebuilt {
                image: format!("{}:{}", i.repository, i.tag.as_deref().unwrap_or("latest")),
                family: i.family,
                has_torch: true,
                stack: *rank,
                why: format!(
                    "NVIDIA's NGC container with torch {} (a build of {}) on CUDA {}",
                    i.torch.as_ref().map(ToString::to_string).unwrap_or_default(),
                    s.torch,
                    i.cuda.as_ref().map(ToString::to_string).unwrap_or_default()
                ),
            }));
        }
    }
    let Some((rank, s)) = runnable.first() else {
        return Ok(None);
    };
    let base = choose_base(s, images, extensions)?;
    Ok(Some(Prebuilt {
        image: base.image,
        family: ImageFamily::NvidiaCuda,
        has_torch: false,
        stack: *rank,
        why: format!(
            "no catalog image holds torch {}+{}: the CUDA base a Dockerfile would start from (torch is not in it; `gpuenv build` adds it)",
            s.torch, s.variant
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::StackArgs;
    use crate::db::Db;
    use crate::resolve;

    fn stacks(torch: &str, python: Option<&str>) -> Vec<Stack> {
        let db = Db::embedded().unwrap();
        let args = StackArgs {
            torch: Some(torch.into()),
            python: python.map(String::from),
            ..StackArgs::default()
        };
        resolve::resolve(db, &args.to_query(db).unwrap()).unwrap().stacks
    }

    #[test]
    fn pytorch_images_come_first_matching_torch_cuda_and_python() {
        let db = Db::embedded().unwrap();
        let p = prebuilt(&stacks("2.6.0+cu124", None), &db.images, false)
            .unwrap()
            .unwrap();
        assert_eq!(p.image, "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime");
        assert!(p.has_torch);
        let p = prebuilt(&stacks("2.6.0+cu124", None), &db.images, true)
            .unwrap()
            .unwrap();
        assert_eq!(p.image, "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-devel");
    }

    #[test]
    fn without_a_pytorch_image_ngc_then_the_cuda_base() {
        let db = Db::embedded().unwrap();
        // No pytorch/pytorch record of 2.3.0; no NGC image of 2.3.0 on cu121 either.
        let p = prebuilt(&stacks("2.3.0+cu121", Some("3.11")), &db.images, false)
            .unwrap()
            .unwrap();
        assert_eq!(p.family, ImageFamily::NvidiaCuda);
        assert!(!p.has_torch);
        assert_eq!(p.image, "nvidia/cuda:12.1.1-base-ubuntu22.04");
    }

    #[test]
    fn an_ngc_container_serves_a_build_of_the_same_release_and_cuda() {
        let db = Db::embedded().unwrap();
        // No pytorch/pytorch image of 2.4.0 on CUDA 12.4; NGC 24.05 holds 2.4.0a0 on 12.4.1.
        let p = prebuilt(&stacks("2.4.0+cu124", Some("3.10")), &db.images, false)
            .unwrap()
            .unwrap();
        assert_eq!(p.image, "nvcr.io/nvidia/pytorch:24.05-py3");
        assert_eq!(p.family, ImageFamily::Ngc);
        assert!(p.why.contains("a build of 2.4.0"), "{}", p.why);
    }

    #[test]
    fn a_cpu_only_answer_has_no_image() {
        let db = Db::embedded().unwrap();
        assert_eq!(
            prebuilt(&stacks("2.6.0+cpu", None), &db.images, false).unwrap(),
            None
        );
    }
}
