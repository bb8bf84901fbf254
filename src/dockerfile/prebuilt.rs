//! The prebuilt image `gpuenv pull` takes for a stack, from compat-db's image catalog.
//!
//! In order: a `pytorch/pytorch` tag with the stack's torch release and CUDA major.minor
//! (the `runtime` flavor, or `devel` when extensions are compiled), with the stack's Python
//! where the record knows it; else an NGC PyTorch container whose torch is a build of that
//! release on that CUDA; else the `nvidia/cuda` base a Dockerfile would start from (no torch
//! in it: the summary says so). Stacks are tried in the resolver's rank order, so the best
//! runnable stack that has a prebuilt image wins over a better one that has none; the pick
//! then says how it differs from `query`'s best stack for the same flags (another build,
//! another Python, NGC's own torch build, no torch at all), so that `pull` never passes off
//! a second-best image as the answer.

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
    /// The rank of `query`'s best stack among the stacks given: the first that runs.
    pub query_best: usize,
    /// How the image differs from `query`'s best stack for the same flags (another torch
    /// build, another Python, NGC's own torch build, or no torch at all), and why, in a
    /// sentence; `None` when it holds exactly that stack.
    pub differs: Option<String>,
}

fn build_name(s: &Stack) -> String {
    format!("torch {}+{} on Python {}", s.torch, s.variant, s.python)
}

/// Why an image with torch is not `query`'s best stack, when it is not.
fn difference(stacks: &[Stack], best: usize, chosen: usize, image: &Image) -> Option<String> {
    let (b, c) = (stacks.get(best)?, stacks.get(chosen)?);
    let best_name = build_name(b);
    let same_build = b.torch == c.torch && b.variant == c.variant;
    if !same_build {
        return Some(format!(
            "query's best stack is {best_name} ({}), but the catalog has no image of that build; the best stack it has an image of is {} ({}); `gpuenv build` with the same flags makes an image of the best",
            b.status,
            build_name(c),
            c.status
        ));
    }
    if b.python != c.python {
        return Some(format!(
            "query's best stack is {best_name} ({}); the catalog's image of that build has Python {} (`gpuenv build` with the same flags makes one with Python {})",
            b.status, c.python, b.python
        ));
    }
    if image.family == ImageFamily::Ngc {
        let torch = image.torch.as_ref().map(ToString::to_string).unwrap_or_default();
        return Some(format!(
            "query's best stack is {best_name} ({}); NGC's container holds NVIDIA's own build of that release, torch {torch}, not the PyTorch wheel",
            b.status
        ));
    }
    None
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
    image
        .torch
        .as_ref()
        .is_some_and(|t| release(t) == release(&stack.torch))
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
    let query_best = stacks
        .iter()
        .position(|s| s.status != Status::Incompatible)
        .unwrap_or(0);
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
                    query_best,
                    differs: difference(stacks, query_best, *rank, i),
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
                query_best,
                differs: difference(stacks, query_best, *rank, i),
            }));
        }
    }
    let Some((rank, s)) = runnable.first() else {
        return Ok(None);
    };
    let base = choose_base(s, images, extensions)?;
    let differs = stacks.get(query_best).map(|b| {
        format!(
            "query's best stack is {} ({}); the catalog has no image with torch for it or any other stack that runs, so this image holds no torch",
            build_name(b),
            b.status
        )
    });
    Ok(Some(Prebuilt {
        image: base.image,
        family: ImageFamily::NvidiaCuda,
        has_torch: false,
        stack: *rank,
        why: format!(
            "no catalog image holds torch {}+{}: the CUDA base a Dockerfile would start from (torch is not in it; `gpuenv build` adds it)",
            s.torch, s.variant
        ),
        query_best,
        differs,
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
        resolve::resolve(db, &args.to_query(db).unwrap()).stacks
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
    fn the_pick_says_how_it_differs_from_querys_best() {
        let db = Db::embedded().unwrap();
        // The exact stack asked for: nothing to say.
        let p = prebuilt(&stacks("2.6.0+cu124", Some("3.11")), &db.images, false)
            .unwrap()
            .unwrap();
        assert_eq!((p.query_best, p.stack), (0, 0));
        assert_eq!(p.differs, None);
        // Without a Python, query's best runs the newest; PyTorch's image has 3.11.
        let all = stacks("2.6.0+cu124", None);
        let p = prebuilt(&all, &db.images, false).unwrap().unwrap();
        assert_eq!(p.query_best, 0);
        assert_ne!(p.stack, 0);
        assert_eq!(all[p.stack].python, "3.11");
        let d = p.differs.expect("another Python than query's best");
        assert!(
            d.starts_with(&format!(
                "query's best stack is torch 2.6.0+cu124 on Python {} (compatible); the catalog's image of that build has Python 3.11",
                all[0].python
            )),
            "{d}"
        );
        // NGC holds NVIDIA's own build of the release.
        let p = prebuilt(&stacks("2.4.0+cu124", Some("3.10")), &db.images, false)
            .unwrap()
            .unwrap();
        let d = p.differs.expect("NGC's own build");
        assert!(
            d.contains("NVIDIA's own build of that release, torch 2.4.0a0+"),
            "{d}"
        );
        // The CUDA base holds no torch at all.
        let p = prebuilt(&stacks("2.3.0+cu121", Some("3.11")), &db.images, false)
            .unwrap()
            .unwrap();
        let d = p.differs.expect("no torch in the base");
        assert!(d.ends_with("so this image holds no torch"), "{d}");
    }

    #[test]
    fn a_newer_build_without_an_image_is_named_with_the_one_taken_instead() {
        let db = Db::embedded().unwrap();
        let args = StackArgs {
            gpu: vec!["H100 SXM".into()],
            driver: Some("550.54.14".into()),
            ..StackArgs::default()
        };
        let all = resolve::resolve(db, &args.to_query(db).unwrap()).stacks;
        let p = prebuilt(&all, &db.images, false).unwrap().unwrap();
        let (best, taken) = (&all[p.query_best], &all[p.stack]);
        assert!(best.torch != taken.torch || best.variant != taken.variant);
        let d = p.differs.expect("another build than query's best");
        assert!(
            d.starts_with(&format!(
                "query's best stack is torch {}+{} on Python {} (compatible), but the catalog has no image of that build; the best stack it has an image of is torch {}+{}",
                best.torch, best.variant, best.python, taken.torch, taken.variant
            )),
            "{d}"
        );
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
