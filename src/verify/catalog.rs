//! An image judged from compat-db's catalog, without pulling it: `show image NAME
//! --driver D --gpu G`.
//!
//! Owns: turning an image record into the facts `verify` would read from the image (its
//! torch and CUDA, `NVIDIA_REQUIRE_CUDA`, the `cuda-compat` of an NGC release), and the
//! judgement of them on a target, by the same rules as [`super::judge`]'s target part.
//! Must not: read an image, or judge anything the record does not say: a fact the record
//! lacks is named as not judged, never taken as met.

use super::{ForwardCompat, Origin, Target, Verification, judge_target};
use crate::db::{Db, Image, ImageFamily};
use crate::image::detect::{ImageFacts, OsFacts, PythonFacts, TorchFacts};
use crate::model::Sourced;
use crate::resolve::Code;
use crate::resolve::{Finding, Index, Severity, Status};

/// The facts a record gives, each sourced to it (`compat-db image/ngc-24.08`), and the
/// `cuda-compat` an NGC release ships, from its release notes.
fn facts(db: &Db, rec: &Image) -> (ImageFacts, Vec<ForwardCompat>) {
    let source = format!("compat-db image/{}", rec.id);
    let marked = |key: &str| {
        if rec.unverified.iter().any(|u| u == key) {
            format!("{source}, unverified")
        } else {
            source.clone()
        }
    };
    let mut f = ImageFacts {
        platform: "linux/amd64".into(),
        ..ImageFacts::default()
    };
    if let Some(os) = rec.os.first() {
        let split = os.find(|c: char| c.is_ascii_digit()).unwrap_or(os.len());
        f.os = Some(OsFacts {
            id: os[..split].to_string(),
            version_id: os[split..].to_string(),
            pretty_name: String::new(),
            source: marked("os"),
        });
    }
    if let Some(p) = &rec.python {
        f.pythons.push(PythonFacts {
            version: p.to_string(),
            free_threaded: false,
            exact: None,
            prefix: String::new(),
            executables: Vec::new(),
            site_packages: Vec::new(),
            source: marked("python"),
        });
    }
    if let Some(c) = &rec.cuda {
        f.env.cuda_version = Some(Sourced::new(c.clone(), marked("cuda")));
    }
    if let Some(t) = &rec.torch {
        let cuda = rec
            .cuda
            .as_ref()
            .map(|c| Sourced::new(format!("{}.{}", c.major(), c.minor()), marked("cuda")));
        f.torch.push(TorchFacts::declared(
            String::new(),
            rec.python.as_ref().map(|p| p.to_string()),
            Sourced::new(t.to_string(), marked("torch")),
            cuda,
        ));
    }
    if let Some(r) = &rec.require_cuda {
        let var = "NVIDIA_REQUIRE_CUDA".to_string();
        f.env
            .require
            .push(Sourced::new(r.clone(), marked("require_cuda")));
        f.env.all.push((var, r.clone()));
    }
    // An NGC release ships the cuda-compat of its own CUDA: the driver it provides is at
    // least that CUDA's minimum, which is what the record's `min_driver` says.
    let mut shipped = Vec::new();
    if rec.family == ImageFamily::Ngc && !rec.forward_compat.is_empty() {
        let provides = rec.min_driver.clone().or_else(|| {
            let c = rec.cuda.as_ref()?;
            db.cuda
                .iter()
                .filter(|k| k.version.major_minor() == c.major_minor())
                .filter_map(|k| k.min_driver_linux.clone())
                .min()
        });
        if let Some(provides) = provides {
            shipped.push(ForwardCompat {
                provides,
                cuda: rec.cuda.clone(),
                hosts: rec.forward_compat.clone(),
                source: format!("{source}, from the release notes"),
                unverified: rec.unverified.iter().any(|u| u == "forward_compat"),
            });
        }
    }
    (f, shipped)
}

/// Judges an image record on a target, as `verify` would judge the image there, from the
/// facts the record gives. `written` is the name as the user wrote it.
pub fn judge(db: &Db, rec: &Image, written: &str, target: &Target) -> Verification {
    let (facts, shipped) = facts(db, rec);
    let ix = Index::new(db);
    let mut findings = Vec::new();
    let (require, torch_on_target) = judge_target(
        db,
        &ix,
        &facts,
        &shipped,
        rec.require_cuda.is_some(),
        target,
        &mut findings,
    );
    if rec.require_cuda.is_none() {
        findings.push(Finding::new(
            Code::CatalogFactMissing,
            Severity::Warning,
            format!(
                "compat-db's record image/{} does not say what NVIDIA_REQUIRE_CUDA the image sets, so whether the NVIDIA runtime starts it on {} is not judged; `gpuenv verify` reads it from the image",
                rec.id, target.source
            ),
        ));
    }
    if rec.family == ImageFamily::Ngc && rec.forward_compat.is_empty() {
        findings.push(Finding::new(
            Code::CatalogFactMissing,
            Severity::Warning,
            format!(
                "compat-db's record image/{} does not say which driver branches its cuda-compat serves, so forward compatibility is not counted",
                rec.id
            ),
        ));
    }
    let failed = findings.iter().any(|f| f.severity == Severity::Incompatible)
        || require.as_ref().is_some_and(|r| !r.satisfied && !r.disabled)
        || torch_on_target.iter().any(|s| s.status == Status::Incompatible);
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let reference = match &rec.tag {
        Some(tag) => format!("{}:{tag}", rec.repository),
        None => written.trim().to_string(),
    };
    Verification {
        origin: Origin {
            transport: "catalog",
            reference,
            digest: None,
            index_digest: None,
            names: vec![written.trim().to_string()],
            read: "catalog",
            paths_asked: None,
            layers_because: None,
        },
        facts,
        claims: Vec::new(),
        claims_source: Vec::new(),
        claims_checked: 0,
        covers: vec!["catalog", "target"],
        findings,
        target: Some(target.clone()),
        require,
        torch_on_target,
        failed,
    }
}
