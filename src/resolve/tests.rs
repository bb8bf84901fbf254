//! Resolver tests on small synthetic databases: rules that the shipped data cannot reach
//! (PTX JIT, PTX under minor-version compatibility, arch-specific SASS, nvcc mismatch), and
//! a property test of the whole search against a brute-force oracle.

use proptest::prelude::*;

use super::*;
use crate::db::{BranchType, FormFactor, Nvlink, Segment, Source, TorchVariant};
use crate::model::{Architecture, ComputeCapability, CudaVersion, HostArch, Manylinux, PythonTag, Variant};
use crate::resolve::Code;

fn src() -> Vec<Source> {
    vec![Source {
        url: "https://example.org/test".into(),
        note: None,
    }]
}

fn cuda(version: &str, native: &str, floor: Option<&str>, sass: &[&str]) -> CudaRelease {
    CudaRelease {
        id: version.into(),
        version: version.parse().unwrap(),
        label: version.into(),
        released: None,
        min_driver_linux: Some(native.parse().unwrap()),
        min_driver_windows: None,
        family_min_driver: floor.map(|f| f.parse().unwrap()),
        family_min_driver_windows: None,
        sass: sass.iter().map(|s| s.parse().unwrap()).collect(),
        deprecated: vec![],
        pending: vec![],
        checked: None,
        unverified: vec![],
        notes: None,
        sources: src(),
    }
}

fn branch(b: u32, archs: &[Architecture], fc: &[&str]) -> DriverBranch {
    DriverBranch {
        id: format!("r{b}"),
        branch: b,
        branch_type: BranchType::Ltsb,
        first_version: Some(format!("{b}.10").parse().unwrap()),
        latest_version: None,
        released: None,
        end_of_life: None,
        end_of_life_by: None,
        architectures: archs.to_vec(),
        forward_compat: fc.iter().map(|c| c.parse().unwrap()).collect(),
        checked: None,
        unverified: vec![],
        notes: None,
        sources: src(),
    }
}

fn gpu(name: &str, cc: &str, segment: Segment) -> Gpu {
    let cc: ComputeCapability = cc.parse().unwrap();
    Gpu {
        id: name.to_lowercase(),
        name: name.into(),
        aliases: vec![],
        architecture: cc.architecture().unwrap(),
        compute_capability: cc,
        memory_gib: 80.0,
        usable_memory_mib: None,
        memory_type: None,
        bandwidth_gbs: None,
        form_factor: FormFactor::Pcie,
        interconnect: None,
        nvlink: Nvlink::None,
        nvlink_gbs: None,
        segment,
        forward_compat: segment == Segment::Datacenter,
        tdp_w: None,
        host_arch: None,
        modified: None,
        bf16_tflops: None,
        fp8_tflops: None,
        fp16_tflops: None,
        tf32_tflops: None,
        int8_tops: None,
        bf16_sparse_tflops: None,
        fp16_sparse_tflops: None,
        tf32_sparse_tflops: None,
        fp8_sparse_tflops: None,
        int8_sparse_tops: None,
        checked: None,
        unverified: vec![],
        notes: None,
        sources: src(),
    }
}

fn variant(tag: &str, sass: &[&str], ptx: &[&str]) -> TorchVariant {
    let tag: Variant = tag.parse().unwrap();
    TorchVariant {
        tag,
        cuda: tag.cuda(),
        cudart: None,
        cudnn: None,
        nccl: None,
        sass: sass.iter().map(|s| s.parse().unwrap()).collect(),
        ptx: ptx.iter().map(|s| s.parse().unwrap()).collect(),
        python: None,
        index_url: format!("https://download.pytorch.org/whl/{tag}"),
        platforms: if tag.is_cuda() {
            vec![HostArch::X86_64]
        } else {
            vec![]
        },
        unverified: vec![],
        notes: None,
        sources: vec![],
    }
}

fn torch(version: &str, python: &[&str], variants: Vec<TorchVariant>) -> TorchRelease {
    TorchRelease {
        id: version.into(),
        version: version.parse().unwrap(),
        released: None,
        requires_python: ">=3.8".parse().unwrap(),
        python: python.iter().map(|p| p.parse().unwrap()).collect(),
        manylinux: "manylinux_2_28_x86_64".parse::<Manylinux>().unwrap(),
        pypi_default: variants[0].tag,
        pypi_platforms: vec![HostArch::X86_64],
        manylinux_aarch64: None,
        torchvision: None,
        torchaudio: None,
        triton: None,
        variants,
        checked: None,
        glibc: None,
        glibc_from: None,
        unverified: vec![],
        notes: None,
        sources: src(),
    }
}

/// CUDA lines 11.8, 12.4, 12.8, 13.0 and branches R450..R580.
fn base_db() -> Db {
    use Architecture::*;
    let all = [Maxwell, Pascal, Volta, Turing, Ampere, Ada, Hopper];
    let mut with_bw = all.to_vec();
    with_bw.push(Blackwell);
    let nvcc12 = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "9.0a"];
    let nvcc128 = [
        "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "9.0a", "10.0", "12.0",
    ];
    Db {
        cuda: vec![
            cuda(
                "11.8.0",
                "520.61.05",
                Some("450.80.02"),
                &["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0"],
            ),
            cuda("12.4.0", "550.54.14", Some("525.60.13"), &nvcc12),
            cuda("12.4.1", "550.54.15", Some("525.60.13"), &nvcc12),
            cuda("12.8.0", "570.26", Some("525.60.13"), &nvcc128),
            cuda(
                "13.0.0",
                "580.65.06",
                Some("580.65.06"),
                &["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
            ),
        ],
        drivers: vec![
            branch(450, &all, &[]),
            branch(525, &all, &[]),
            branch(535, &all, &["12.4", "12.8", "13.0"]),
            branch(550, &all, &[]),
            branch(570, &with_bw, &["13.0"]),
            branch(580, &with_bw, &[]),
        ],
        python: ["3.9", "3.10", "3.11", "3.12", "3.13"]
            .iter()
            .map(|v| PythonRelease {
                id: (*v).into(),
                version: v.parse().unwrap(),
                released: "2020".parse().unwrap(),
                end_of_life: "2030".parse().unwrap(),
                free_threaded: false,
                // The database's date: the newest `checked` (see the staleness tests).
                checked: Some("2026-06-01".parse().unwrap()),
                unverified: vec![],
                notes: None,
                sources: src(),
            })
            .collect(),
        ..Db::default()
    }
}

fn ask(g: Gpu) -> GpuAsk {
    GpuAsk { gpu: g, count: 1 }
}

fn codes_of(a: &Answer) -> Vec<Code> {
    a.stacks[0].findings.iter().map(|f| f.code).collect()
}

#[test]
fn ptx_jit_on_a_newer_major() {
    let mut db = base_db();
    db.torch = vec![torch(
        "2.7.0",
        &["cp311"],
        vec![variant("cu128", &["8.0", "9.0"], &["9.0"])],
    )];
    let q = Query {
        gpus: vec![ask(gpu("B200", "10.0", Segment::Datacenter))],
        driver: Some("570.26".parse().unwrap()),
        ..Query::default()
    };
    let a = resolve(&db, &q);
    assert_eq!(a.verdict, Status::Conditional);
    assert!(codes_of(&a).contains(&Code::GpuPtxJit));
}

#[test]
fn ptx_jit_is_not_available_under_minor_version_compatibility() {
    let mut db = base_db();
    db.torch = vec![torch(
        "2.7.0",
        &["cp311"],
        vec![variant("cu128", &["8.0", "9.0"], &["9.0"])],
    )];
    let q = Query {
        gpus: vec![ask(gpu("RTX 4090", "8.9", Segment::Consumer))],
        // 8.9 has SASS through 8.0: no PTX needed, so minor-version compatibility applies.
        driver: Some("550.54.14".parse().unwrap()),
        ..Query::default()
    };
    let a = resolve(&db, &q);
    assert!(
        codes_of(&a).contains(&Code::DriverMinorVersionCompat),
        "{:?}",
        codes_of(&a)
    );
    // A Blackwell GPU needs the PTX, which a 12.4 driver cannot JIT for a 12.8 build; and
    // R550 does not drive Blackwell anyway, so give it a branch that does (R570 record, old patch).
    let mut db2 = db.clone();
    db2.drivers
        .push(branch(560, &[Architecture::Blackwell, Architecture::Hopper], &[]));
    let q = Query {
        gpus: vec![ask(gpu("RTX 5090", "12.0", Segment::Consumer))],
        driver: Some("560.28.03".parse().unwrap()),
        ..Query::default()
    };
    let a = resolve(&db2, &q);
    assert_eq!(a.verdict, Status::Incompatible);
    assert!(
        codes_of(&a).contains(&Code::PtxJitNeedsNewerDriver),
        "{:?}",
        codes_of(&a)
    );
}

#[test]
fn arch_specific_sass_runs_only_on_its_arch() {
    let mut db = base_db();
    db.torch = vec![torch("2.7.0", &["cp311"], vec![variant("cu128", &["9.0a"], &[])])];
    let hopper = Query {
        gpus: vec![ask(gpu("H100", "9.0", Segment::Datacenter))],
        ..Query::default()
    };
    assert_eq!(resolve(&db, &hopper).verdict, Status::Compatible);
    let blackwell = Query {
        gpus: vec![ask(gpu("B200", "10.0", Segment::Datacenter))],
        ..Query::default()
    };
    assert_eq!(resolve(&db, &blackwell).verdict, Status::Incompatible);
}

#[test]
fn nvcc_on_the_host_must_match_the_major() {
    let mut db = base_db();
    db.torch = vec![torch("2.7.0", &["cp311"], vec![variant("cu128", &["9.0"], &[])])];
    let q = Query {
        nvcc: Some("11.8".parse().unwrap()),
        ..Query::default()
    };
    let a = resolve(&db, &q);
    assert!(codes_of(&a).contains(&Code::NvccMajorMismatch));
    let q = Query {
        nvcc: Some("12.4".parse().unwrap()),
        ..Query::default()
    };
    let a = resolve(&db, &q);
    assert_eq!(a.verdict, Status::Compatible);
    assert!(codes_of(&a).contains(&Code::NvccMinorMismatch));
}

#[test]
fn a_package_that_needs_torchs_exact_cuda_refuses_another_minor_on_the_host() {
    let mut db = base_db();
    db.torch = vec![torch("2.7.0", &["cp311"], vec![variant("cu128", &["9.0"], &[])])];
    let apex = |assumed: bool| extensions::ExtensionReq {
        package: "apex".into(),
        origin: "requirements.txt:3".into(),
        compiles: "on-request",
        assumed,
        why: String::new(),
        nvcc_match: crate::db::NvccMatch::MajorMinor,
        needs_torch_at_build: true,
        build_requires: vec![],
        env: vec![],
        pyproject: false,
    };
    let q = Query {
        nvcc: Some("12.4".parse().unwrap()),
        extensions: true,
        extensions_from: vec![apex(true)],
        ..Query::default()
    };
    let a = resolve(&db, &q);
    assert_eq!(a.verdict, Status::Incompatible);
    let f = a.stacks[0]
        .findings
        .iter()
        .find(|f| f.code == Code::ExtensionNvccNotExact)
        .expect("the exact-CUDA finding");
    assert!(
        f.message.contains(
            "nvcc 12.4 is not torch 2.7.0+cu128's CUDA 12.8, and apex (requirements.txt:3) refuses"
        ),
        "{}",
        f.message
    );
    let ix = Index::new(&db);
    assert!(verdicts(&ix, &q).iter().all(|v| v.status == Status::Incompatible));
    // The same nvcc is only a warning when apex compiles nothing (no option asked for it).
    let q = Query {
        extensions_from: vec![apex(false)],
        ..q
    };
    let a = resolve(&db, &q);
    assert_eq!(a.verdict, Status::Compatible);
    assert!(codes_of(&a).contains(&Code::NvccMinorMismatch));
    assert!(verdicts(&ix, &q).iter().all(|v| v.status == Status::Compatible));
    // And torch's own CUDA is accepted.
    let q = Query {
        nvcc: Some("12.8".parse().unwrap()),
        extensions_from: vec![apex(true)],
        ..q
    };
    assert_eq!(resolve(&db, &q).verdict, Status::Compatible);
}

#[test]
fn an_unknown_branch_assumes_the_nearest_older() {
    let mut db = base_db();
    db.torch = vec![torch("2.7.0", &["cp311"], vec![variant("cu128", &["9.0"], &[])])];
    let q = Query {
        gpus: vec![ask(gpu("H100", "9.0", Segment::Datacenter))],
        driver: Some("575.51.03".parse().unwrap()),
        ..Query::default()
    };
    let a = resolve(&db, &q);
    assert!(codes_of(&a).contains(&Code::DriverBranchUnknown));
    assert_eq!(a.verdict, Status::Compatible);
}

// --- The oracle -------------------------------------------------------------------------

/// The verdict of one (build, Python) by the rules as written in domain.md, computed the
/// long way: every threshold read straight from the records, no shared helpers.
fn oracle(db: &Db, q: &Query, v: &TorchVariant) -> Status {
    let mut worst = Status::Compatible;
    let mut bump = |s: Status| worst = worst.max(s);
    let Some(c) = v.tag.cuda() else {
        return Status::Compatible;
    };
    let mm = (c.major(), c.minor());
    let rows: Vec<&CudaRelease> = db
        .cuda
        .iter()
        .filter(|r| (r.version.major(), r.version.minor()) == mm)
        .collect();
    let native = rows
        .iter()
        .filter_map(|r| r.min_driver_linux.clone())
        .min()
        .unwrap();
    let floor = if mm >= (11, 1) {
        rows[0].family_min_driver.clone()
    } else {
        None
    };
    let mut ptx_needed = false;
    for a in &q.gpus {
        let cc = a.gpu.compute_capability;
        let sass = v.sass.iter().any(|s| match s.suffix {
            crate::model::ArchSuffix::Arch => (s.major, s.minor) == (cc.major, cc.minor),
            _ => s.major == cc.major && s.minor <= cc.minor,
        });
        let ptx = v.ptx.iter().any(|p| (p.major, p.minor) <= (cc.major, cc.minor));
        if sass {
        } else if ptx {
            ptx_needed = true;
            bump(Status::Conditional);
        } else if v.sass.is_empty() && v.ptx.is_empty() {
            bump(Status::Conditional);
        } else {
            bump(Status::Incompatible);
        }
        if let Some(d) = &q.driver {
            let b = db
                .drivers
                .iter()
                .filter(|b| b.branch <= d.major())
                .max_by_key(|b| b.branch);
            if let Some(b) = b {
                if !b.architectures.contains(&a.gpu.architecture) {
                    bump(Status::Incompatible);
                }
            }
        }
    }
    if let Some(d) = &q.driver {
        if *d >= native {
        } else if floor.as_ref().is_some_and(|f| d >= f) && !ptx_needed {
            bump(Status::Conditional);
        } else {
            let host = db.drivers.iter().find(|b| b.branch == d.major());
            let fc = host.is_some_and(|b| b.forward_compat.iter().any(|x| (x.major(), x.minor()) == mm));
            if fc && q.gpus.iter().all(|g| g.gpu.forward_compat) {
                bump(Status::Conditional);
            } else {
                bump(Status::Incompatible);
            }
        }
    }
    worst
}

fn arb_db() -> impl Strategy<Value = Db> {
    let archs = prop::sample::subsequence(
        vec![
            "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0", "9.0a", "10.0", "12.0",
        ],
        0..5,
    );
    let ptx = prop::sample::subsequence(vec!["7.0", "8.0", "9.0", "12.0"], 0..2);
    let tags = prop::sample::subsequence(vec!["cu118", "cu124", "cu128", "cu130"], 1..4);
    let pys = prop::sample::subsequence(vec!["cp39", "cp310", "cp311", "cp312", "cp313"], 1..4);
    let release = (tags, prop::collection::vec((archs, ptx), 4), pys);
    prop::collection::vec(release, 1..4).prop_map(|rels| {
        let mut db = base_db();
        for (i, (tags, arch_lists, pys)) in rels.into_iter().enumerate() {
            let variants = tags
                .iter()
                .zip(arch_lists)
                .map(|(t, (s, p))| {
                    // nvcc of each line only targets what it supports: keep the lists honest.
                    let ok = |a: &&str| {
                        let cc: ComputeCapability = a.parse().unwrap();
                        match *t {
                            "cu118" => cc.major < 10 && cc.suffix == crate::model::ArchSuffix::None,
                            "cu124" => cc.major < 10,
                            "cu128" => true,
                            _ => cc >= "7.5".parse().unwrap(),
                        }
                    };
                    let s: Vec<&str> = s.into_iter().filter(ok).collect();
                    let p: Vec<&str> = p.into_iter().filter(ok).collect();
                    variant(t, &s, &p)
                })
                .collect();
            db.torch.push(torch(&format!("2.{i}.0"), &pys, variants));
        }
        db
    })
}

fn arb_query() -> impl Strategy<Value = Query> {
    let gpus = prop::sample::subsequence(
        vec![
            ("V100", "7.0", Segment::Datacenter),
            ("A100", "8.0", Segment::Datacenter),
            ("RTX 3090", "8.6", Segment::Consumer),
            ("H100", "9.0", Segment::Datacenter),
            ("B200", "10.0", Segment::Datacenter),
            ("RTX 5090", "12.0", Segment::Consumer),
        ],
        0..3,
    );
    let driver = prop::option::of(prop::sample::select(vec![
        "450.80.02",
        "470.82.01",
        "520.61.05",
        "525.60.12",
        "525.60.13",
        "535.104.05",
        "550.54.13",
        "550.54.14",
        "570.26",
        "580.65.06",
        "590.44.01",
    ]));
    let python = prop::option::of(prop::sample::select(vec!["==3.9", "==3.11", ">=3.12", "<3.11"]));
    (gpus, driver, python).prop_map(|(gpus, driver, python)| Query {
        gpus: gpus
            .into_iter()
            .map(|(n, cc, seg)| ask(gpu(n, cc, seg)))
            .collect(),
        driver: driver.map(|d| d.parse().unwrap()),
        python: python
            .map(|p| (p.parse().unwrap(), "test".to_string()))
            .into_iter()
            .collect(),
        ..Query::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn search_agrees_with_the_oracle(db in arb_db(), q in arb_query()) {
        let answer = resolve(&db, &q);
        // Every (build, Python) the oracle enumerates, with its verdict.
        let mut expected = Vec::new();
        for rel in &db.torch {
            for v in &rel.variants {
                let status = oracle(&db, &q, v);
                let tags: Vec<PythonTag> = rel.python.clone();
                let fits: Vec<String> = tags
                    .iter()
                    .map(|t| t.version())
                    .filter(|py| q.python.iter().all(|(s, _)| s.contains(&py.parse().unwrap())))
                    .collect();
                if fits.is_empty() {
                    expected.push((rel.version.to_string(), v.tag, "-".to_string(), Status::Incompatible));
                }
                for py in fits {
                    expected.push((rel.version.to_string(), v.tag, py, status));
                }
            }
        }
        let mut got: Vec<(String, Variant, String, Status)> = answer
            .stacks
            .iter()
            .map(|s| {
                let py = if s.findings.iter().any(|f| f.code == Code::PythonNoWheel) { "-".to_string() } else { s.python.clone() };
                (s.torch.to_string(), s.variant, py, s.status)
            })
            .collect();
        got.sort_by(|a, b| (&a.0, a.1, &a.2).cmp(&(&b.0, b.1, &b.2)));
        expected.sort_by(|a, b| (&a.0, a.1, &a.2).cmp(&(&b.0, b.1, &b.2)));
        prop_assert_eq!(&got, &expected);
        let best = expected.iter().map(|e| e.3).min().unwrap();
        prop_assert_eq!(answer.verdict, best);
        // Ranked: no stack before a better one.
        for w in answer.stacks.windows(2) {
            prop_assert!(w[0].status <= w[1].status);
        }
        // The fast path (no findings) gives every build the status its stacks have.
        let ix = Index::new(&db);
        for v in verdicts(&ix, &q) {
            let torch = v.torch.to_string();
            let stacks: Vec<&Stack> = answer.stacks.iter().filter(|s| s.torch.to_string() == torch && s.variant == v.variant).collect();
            prop_assert!(!stacks.is_empty());
            for s in stacks {
                prop_assert_eq!(s.status, v.status, "{}+{}", torch, v.variant);
            }
        }
        // Every finding code is registered.
        for s in &answer.stacks {
            for f in s.findings.iter() {
                prop_assert!(codes::is_known(f.code.as_str()), "{}", f.code);
            }
        }
    }
}

#[test]
fn index_thresholds() {
    let v: CudaVersion = "12.4".parse().unwrap();
    let db = base_db();
    let ix = Index::new(&db);
    let line = ix.line(&v).unwrap();
    // The GA row's minimum, not the update's.
    assert_eq!(line.native.to_string(), "550.54.14");
    // 535 meets 11.8's minimum but not 12.4's, in this small database.
    assert_eq!(
        ix.driver_cuda(&"535.104.05".parse().unwrap()),
        Some("11.8".parse().unwrap())
    );
    assert_eq!(
        ix.branch_of(&"575.51.03".parse().unwrap())
            .map(|(b, exact)| (b.branch, exact)),
        Some((570, false))
    );
}

/// A proposed toolkit whose facts are pending: as if it had no record for the rules, on
/// every driver, and it never moves the thresholds of a curated line.
#[test]
fn a_toolkit_with_pending_facts_is_not_judged() {
    let pending = |version: &str| {
        let mut c = cuda(version, "1.0", Some("580.65.06"), &[]);
        c.min_driver_linux = None;
        c.pending = vec!["min_driver_linux".into(), "sass".into()];
        c
    };
    let mut db = base_db();
    db.cuda.push(pending("13.6.0"));
    // An update of a curated line, pending: the line keeps its curated rows' facts.
    db.cuda.push(pending("12.4.2"));
    let ix = Index::new(&db);
    assert!(ix.line(&"13.6".parse().unwrap()).is_none());
    assert_eq!(
        ix.line(&"12.4".parse().unwrap())
            .unwrap()
            .newest
            .version
            .to_string(),
        "12.4.1"
    );
    assert_eq!(
        ix.driver_cuda(&"999.1".parse().unwrap()),
        Some("13.0".parse().unwrap())
    );
    db.torch = vec![torch("2.16.0", &["cp311"], vec![variant("cu136", &["9.0"], &[])])];
    for driver in ["580.65.06", "620.70.06", "999.99"] {
        let q = Query {
            gpus: vec![ask(gpu("H100", "9.0", Segment::Datacenter))],
            driver: Some(driver.parse().unwrap()),
            ..Query::default()
        };
        let a = resolve(&db, &q);
        assert_ne!(a.verdict, Status::Compatible, "{driver}");
        assert!(
            codes_of(&a).contains(&Code::CudaFactsPending),
            "{:?}",
            codes_of(&a)
        );
        assert!(a.stacks[0].needs.driver_native.is_none());
    }
}

#[test]
fn an_installed_build_is_judged_whatever_its_variant() {
    let db = crate::db::Db::embedded().unwrap();
    let h100 = GpuAsk {
        gpu: db.gpu("H100 SXM").unwrap().clone(),
        count: 1,
    };
    let machine = Query {
        gpus: vec![h100],
        driver: Some("550.54.14".parse().unwrap()),
        ..Query::default()
    };
    let installed = |version: &str, cuda: Option<&str>| Installed {
        version: version.into(),
        cuda: cuda.map(str::to_string),
        arch_list: Vec::new(),
        python: "3.11".into(),
    };
    // A CPU build installed is what there is: judged, not refused as "not asked for".
    let cpu = judge_installed(db, &machine, &installed("2.5.1+cpu", None)).unwrap();
    assert_eq!(cpu.variant, crate::model::Variant::Cpu);
    assert!(cpu.findings.iter().any(|f| f.code == Code::CpuBuild));
    let cuda = judge_installed(db, &machine, &installed("2.5.1+cu124", Some("12.4"))).unwrap();
    assert_eq!(cuda.status, Status::Compatible);
    // On a machine found to have no GPU, the CUDA build fails and the CPU build does not.
    let none = Query {
        no_cuda_device: Some("this machine has no NVIDIA driver or GPU".into()),
        ..Query::default()
    };
    let cuda = judge_installed(db, &none, &installed("2.5.1+cu124", Some("12.4"))).unwrap();
    assert_eq!(cuda.status, Status::Incompatible);
    assert!(cuda.findings.iter().any(|f| f.code == Code::NoCudaDevice));
    let cpu = judge_installed(db, &none, &installed("2.5.1", None)).unwrap();
    assert_eq!(cpu.status, Status::Compatible);
}

fn pin(spec: &str) -> Pin {
    Pin {
        specifiers: spec.parse().unwrap(),
        variant: None,
        marker: None,
        origin: "--torch".into(),
    }
}

fn answer_codes(a: &Answer) -> Vec<Code> {
    a.findings.iter().map(|f| f.code).collect()
}

/// The database of these tests is dated 2026-06-01 and knows torch up to 2.7.0.
fn dated_db() -> Db {
    let mut db = base_db();
    db.torch = vec![torch(
        "2.7.0",
        &["cp311"],
        vec![variant("cu128", &["8.0", "9.0", "10.0", "12.0"], &[])],
    )];
    assert_eq!(db.date(), Some("2026-06-01".parse().unwrap()));
    db
}

#[test]
fn an_unknown_newer_torch_is_not_judged_whatever_the_date() {
    let db = dated_db();
    for today in ["2026-06-15", "2026-12-01"] {
        let q = Query {
            torch: vec![pin("==2.8.*")],
            today: Some(today.parse().unwrap()),
            ..Query::default()
        };
        let a = resolve(&db, &q);
        assert!(a.stacks.is_empty(), "{today}");
        let codes = answer_codes(&a);
        assert!(codes.contains(&Code::TorchReleaseUnknown), "{today}: {codes:?}");
        assert!(codes.contains(&Code::NoMatchingBuild), "{today}: {codes:?}");
        let unknown = a
            .findings
            .iter()
            .find(|f| f.code == Code::TorchReleaseUnknown)
            .unwrap();
        assert_eq!(unknown.severity, Severity::Warning);
        assert!(unknown.message.contains("not judged"), "{}", unknown.message);
        assert!(
            unknown.message.contains("gpuenv db refresh"),
            "{}",
            unknown.message
        );
        assert!(unknown.message.contains("--db DIR"), "{}", unknown.message);
        assert_eq!(unknown.facts["newest_known"], "2.7.0");
        assert_eq!(unknown.facts["db_date"], "2026-06-01");
        assert_eq!(a.db_date, Some("2026-06-01".parse().unwrap()));
    }
}

#[test]
fn a_stale_database_says_so_only_when_asked_past_it() {
    let db = dated_db();
    let q = |torch: &str, driver: Option<&str>, today: &str| Query {
        torch: vec![pin(torch)],
        driver: driver.map(|d| d.parse().unwrap()),
        gpus: vec![ask(gpu("H100", "9.0", Segment::Datacenter))],
        today: Some(today.parse().unwrap()),
        ..Query::default()
    };
    let stale = |a: &Answer| answer_codes(a).contains(&Code::DbMayBeStale);

    // 2026-12-01 is 183 days after the database's date.
    let a = resolve(&db, &q("==2.8.*", None, "2026-12-01"));
    assert!(stale(&a));
    let f = a.findings.iter().find(|f| f.code == Code::DbMayBeStale).unwrap();
    assert_eq!(f.facts["age_days"], "183");
    assert!(
        f.message.contains("gpuenv db refresh") && f.message.contains("--db DIR"),
        "{}",
        f.message
    );

    // A pin that admits a newer release, though it matches a known one: the known builds
    // keep the verdict the rules give, and the answer says the database may be behind.
    let fresh = resolve(&db, &q(">=2.7", Some("570.26"), "2026-06-15"));
    let old = resolve(&db, &q(">=2.7", Some("570.26"), "2026-12-01"));
    assert!(!stale(&fresh), "{:?}", answer_codes(&fresh));
    assert!(stale(&old));
    assert_eq!(fresh.verdict, Status::Compatible);
    assert_eq!(old.verdict, fresh.verdict);
    assert_eq!(old.stacks.len(), fresh.stacks.len());
    assert!(!answer_codes(&old).contains(&Code::TorchReleaseUnknown));

    // A driver of a branch newer than any record.
    assert!(stale(&resolve(&db, &q("==2.7.0", Some("590.10"), "2026-12-01"))));
    assert!(!stale(&resolve(&db, &q("==2.7.0", Some("590.10"), "2026-06-15"))));

    // Nothing past the database asked: no word about its age, however old.
    assert!(!stale(&resolve(&db, &q("==2.7.0", Some("570.26"), "2027-06-01"))));

    // More than 90 days: 2026-08-30 is the 90th day after 2026-06-01, 2026-08-31 the 91st.
    assert!(!stale(&resolve(&db, &q("==2.8.*", None, "2026-08-30"))));
    assert!(stale(&resolve(&db, &q("==2.8.*", None, "2026-08-31"))));

    // No date for today (a library caller that gives none): never stale.
    let mut undated = q("==2.8.*", None, "2026-12-01");
    undated.today = None;
    assert!(!stale(&resolve(&db, &undated)));
}

#[test]
fn a_recorded_glibc_floor_above_the_tag_decides() {
    let mut db = base_db();
    let mut rel = torch("2.5.1", &["cp311"], vec![variant("cu124", &["8.0", "9.0"], &[])]);
    rel.manylinux = "manylinux1_x86_64".parse().unwrap();
    rel.glibc = Some("2.17".parse().unwrap());
    rel.glibc_from = Some(crate::db::GlibcBasis::WheelSymbols);
    assert_eq!(rel.glibc_floor().to_string(), "2.17");
    db.torch = vec![rel];
    let q = |glibc: &str| Query {
        glibc: Some((glibc.parse().unwrap(), "--glibc".into())),
        ..Query::default()
    };
    let a = resolve(&db, &q("2.16"));
    assert_eq!(a.verdict, Status::Incompatible);
    let f = a.stacks[0]
        .findings
        .iter()
        .find(|f| f.code == Code::GlibcTooOld)
        .unwrap();
    assert_eq!(f.facts["needs_glibc"], "2.17");
    assert_eq!(f.facts["needs_glibc_from"], "wheel-symbols");
    assert!(f.message.contains("pip installs them"), "{}", f.message);
    assert_eq!(a.stacks[0].needs.glibc, "2.17");
    // The tag alone (glibc 2.5) would have let it through; the fast path agrees.
    let ix = Index::new(&db);
    assert!(
        verdicts(&ix, &q("2.16"))
            .iter()
            .all(|v| v.status == Status::Incompatible)
    );
    let a = resolve(&db, &q("2.17"));
    assert!(!a.stacks[0].findings.iter().any(|f| f.code == Code::GlibcTooOld));
}

/// The fast path and the findings are two views of the same rule outcomes: across the
/// matrix of the shipped database (every GPU against every driver branch and no driver,
/// with and without extensions, an old glibc, a date for the end-of-life rules), every
/// build's verdict is the status of each of its stacks, which its findings make. A quarter
/// of the cells, spread over every GPU and every branch, keeps it quick in debug builds.
#[test]
fn verdicts_are_the_status_of_the_findings_across_the_matrix() {
    let db = crate::db::Db::embedded().unwrap();
    let ix = Index::new(db);
    let mut drivers: Vec<Option<DriverVersion>> = vec![None];
    drivers.extend(
        db.drivers
            .iter()
            .filter_map(|b| b.first_version.clone())
            .map(Some),
    );
    let mut cells = 0;
    for (i, g) in db.gpus.iter().enumerate() {
        for (j, driver) in drivers.iter().enumerate() {
            if (i + j) % 4 != 0 {
                continue;
            }
            let q = Query {
                gpus: vec![GpuAsk {
                    gpu: g.clone(),
                    count: 1,
                }],
                driver: driver.clone(),
                extensions: j % 3 == 0,
                glibc: (j % 5 == 1).then(|| ("2.17".parse().unwrap(), "--glibc".to_string())),
                today: (i % 2 == 0).then(|| "2025-06-01".parse().unwrap()),
                ..Query::default()
            };
            let stacks = rules::search(&ix, &q, None);
            for v in verdicts(&ix, &q) {
                let torch = v.torch.to_string();
                let of_build: Vec<&Stack> = stacks
                    .iter()
                    .filter(|s| s.torch.to_string() == torch && s.variant == v.variant)
                    .collect();
                assert!(!of_build.is_empty(), "{torch}+{}", v.variant);
                for s in of_build {
                    assert_eq!(s.status, s.findings.status());
                    assert_eq!(
                        s.status, v.status,
                        "{torch}+{} on the {} with driver {driver:?}",
                        v.variant, g.name
                    );
                    cells += 1;
                }
            }
        }
    }
    assert!(cells > 10_000, "{cells} cells");
}

/// A Grace host (the GPU's `host_arch`) gets a CUDA build only where one was published
/// for aarch64: PyPI's default wheel is CPU-only there unless `pypi_platforms` says
/// otherwise, and the install line then names the build's index.
#[test]
fn an_aarch64_host_needs_an_aarch64_cuda_wheel() {
    let mut db = base_db();
    let mut arm = variant("cu128", &["9.0"], &[]);
    arm.platforms = vec![HostArch::X86_64, HostArch::Aarch64];
    db.torch = vec![
        torch("2.4.1", &["cp311"], vec![variant("cu124", &["9.0"], &[])]),
        torch("2.8.0", &["cp311"], vec![arm]),
    ];
    let mut gh200 = gpu("GH200", "9.0", Segment::Datacenter);
    gh200.host_arch = Some("aarch64".into());
    let pinned = |v: &str| Query {
        gpus: vec![ask(gh200.clone())],
        driver: Some("570.26".parse().unwrap()),
        torch: vec![pin(v)],
        ..Query::default()
    };
    let a = resolve(&db, &pinned("==2.4.1"));
    assert_eq!(a.verdict, Status::Incompatible);
    let f = a.stacks[0]
        .findings
        .iter()
        .find(|f| f.code == Code::NoCudaWheelForArch)
        .expect("the missing wheel decides");
    assert!(f.message.contains("installs a CPU-only build"), "{}", f.message);
    assert!(
        f.message
            .contains("the first with aarch64 CUDA wheels is torch 2.8.0+cu128"),
        "{}",
        f.message
    );
    let a = resolve(&db, &pinned("==2.8.0"));
    assert_eq!(a.verdict, Status::Compatible);
    assert!(
        a.stacks[0]
            .install
            .ends_with("--index-url https://download.pytorch.org/whl/cu128"),
        "{}",
        a.stacks[0].install
    );
    // The same on x86_64 (no host_arch, no --arch): PyPI's default, and no arch rule.
    let x86 = Query {
        gpus: vec![ask(gpu("H100", "9.0", Segment::Datacenter))],
        ..pinned("==2.8.0")
    };
    let a = resolve(&db, &x86);
    assert!(
        !a.stacks[0].install.contains("--index-url"),
        "{}",
        a.stacks[0].install
    );
    assert!(!codes_of(&a).contains(&Code::CudaWheelForArch));
    // A fast verdict agrees with the full answer.
    let fast = verdicts(&Index::new(&db), &pinned("==2.4.1"));
    assert!(fast.iter().all(|v| v.status == Status::Incompatible));
}

/// On aarch64 the glibc floor is that of PyPI's aarch64 wheels (`manylinux_2_28_aarch64`
/// while the x86_64 wheels were `manylinux1` or `manylinux_2_17`): a host that installs the
/// x86_64 wheels may refuse the aarch64 ones. The x86_64 wheel's `glibc` symbols say
/// nothing of the other.
#[test]
fn an_aarch64_host_is_held_to_the_aarch64_wheels_glibc() {
    let mut db = base_db();
    let mut v = variant("cu128", &["9.0"], &[]);
    v.platforms = vec![HostArch::X86_64, HostArch::Aarch64];
    let mut rel = torch("2.8.0", &["cp311"], vec![v]);
    rel.manylinux = "manylinux_2_17_x86_64".parse().unwrap();
    rel.manylinux_aarch64 = Some("manylinux_2_28_aarch64".parse().unwrap());
    rel.pypi_platforms = vec![HostArch::X86_64, HostArch::Aarch64];
    db.torch = vec![rel];
    let q = |arch: HostArch| Query {
        glibc: Some(("2.27".parse().unwrap(), "--os ubuntu18.04".into())),
        arch: Some((arch, "--arch".into())),
        ..Query::default()
    };
    let a = resolve(&db, &q(HostArch::Aarch64));
    assert_eq!(a.verdict, Status::Incompatible);
    let f = a.stacks[0]
        .findings
        .iter()
        .find(|f| f.code == Code::GlibcTooOld)
        .expect("the aarch64 tag decides");
    assert_eq!(f.facts["needs_glibc"], "2.28");
    assert_eq!(f.facts["manylinux"], "manylinux_2_28_aarch64");
    assert!(f.message.contains("manylinux_2_28_aarch64"), "{}", f.message);
    assert_eq!(a.stacks[0].needs.glibc, "2.28");
    // The fast path agrees.
    assert!(
        verdicts(&Index::new(&db), &q(HostArch::Aarch64))
            .iter()
            .all(|v| v.status == Status::Incompatible)
    );
    // The same glibc on x86_64 installs the manylinux_2_17 wheels.
    let a = resolve(&db, &q(HostArch::X86_64));
    assert!(!codes_of(&a).contains(&Code::GlibcTooOld), "{:?}", codes_of(&a));
    assert_eq!(a.stacks[0].needs.glibc, "2.17");
    // No aarch64 tag recorded: no glibc judged from the x86_64 one.
    db.torch[0].manylinux_aarch64 = None;
    let a = resolve(&db, &q(HostArch::Aarch64));
    assert!(!codes_of(&a).contains(&Code::GlibcTooOld), "{:?}", codes_of(&a));
}
