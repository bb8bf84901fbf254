//! The generator on real stacks of the shipped database: the base chosen, the pins, the
//! requirement, the order of the steps, and the whole text of one stack (a snapshot).

use super::*;
use crate::cli::StackArgs;
use crate::db::Db;
use crate::resolve::{self, Status};

/// The best runnable stack for the flags, with its torch release.
fn stack(torch: &str, python: &str, gpu: Option<&str>) -> (Stack, TorchRelease) {
    let db = Db::embedded().unwrap();
    let args = StackArgs {
        torch: Some(torch.into()),
        python: Some(python.into()),
        gpu: gpu.into_iter().map(String::from).collect(),
        ..StackArgs::default()
    };
    let q = args.to_query(db).unwrap();
    let answer = resolve::resolve(db, &q);
    let s = answer
        .stacks
        .into_iter()
        .find(|s| s.status != Status::Incompatible)
        .unwrap_or_else(|| panic!("no stack runs for torch {torch}, Python {python}"));
    let rel = db.torch.iter().find(|r| r.version == s.torch).unwrap().clone();
    (s, rel)
}

fn request_for(
    torch: &str,
    python: &str,
    gpu: Option<&str>,
    extensions: bool,
    reqs: &[&str],
) -> Result<Dockerfile, DockerfileError> {
    request_with(torch, python, gpu, extensions, reqs, None, &[])
}

fn request_with(
    torch: &str,
    python: &str,
    gpu: Option<&str>,
    extensions: bool,
    reqs: &[&str],
    pyproject: Option<&str>,
    from_project: &[&str],
) -> Result<Dockerfile, DockerfileError> {
    let db = Db::embedded().unwrap();
    let (s, rel) = stack(torch, python, gpu);
    let gpus = gpu
        .map(|g| vec![db.gpu(g).unwrap().compute_capability])
        .unwrap_or_default();
    generate(&Request {
        stack: &s,
        release: &rel,
        images: &db.images,
        cuda: &db.cuda,
        extensions,
        extensions_from: &[],
        gpus,
        requirements: reqs.iter().map(|r| r.to_string()).collect(),
        pyproject: pyproject.map(str::to_string),
        pyproject_extras: Vec::new(),
        requirements_from_project: from_project.iter().map(|p| p.to_string()).collect(),
        generator: "gpuenv test".into(),
    })
}

fn make(torch: &str, python: &str, extensions: bool, reqs: &[&str]) -> Dockerfile {
    request_for(torch, python, None, extensions, reqs).unwrap()
}

/// The instruction lines (no comments, continuation lines joined).
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (body, cont) = match line.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        cur.push_str(body.trim());
        cur.push(' ');
        if !cont {
            out.push(cur.trim().to_string());
            cur.clear();
        }
    }
    out
}

fn position(instrs: &[String], prefix: &str) -> usize {
    instrs
        .iter()
        .position(|i| i.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in\n{}", instrs.join("\n")))
}

#[test]
fn a_wheel_with_its_own_cuda_gets_the_small_base_of_its_minor() {
    let d = make("2.6.0+cu124", "3.11", false, &[]);
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-base-ubuntu22.04");
    assert!(d.base.exact);
    assert_eq!(
        d.from,
        [
            "ghcr.io/astral-sh/uv:0.11.7",
            "nvidia/cuda:12.4.1-base-ubuntu22.04"
        ]
    );
    // Newer CUDA lines are published on Ubuntu 24.04, which is preferred.
    let d = make("2.7.1+cu128", "3.12", false, &[]);
    assert_eq!(d.base.image, "nvidia/cuda:12.8.1-base-ubuntu24.04");
}

#[test]
fn extensions_get_the_devel_image_with_nvcc_of_torchs_cuda() {
    let d = make("2.6.0+cu124", "3.11", true, &[]);
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-devel-ubuntu22.04");
    assert!(
        d.text
            .contains("apt-get install -y --no-install-recommends g++ ninja-build")
    );
    assert!(
        d.text
            .contains("ENV TORCH_CUDA_ARCH_LIST=\"5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX\""),
        "{}",
        d.text
    );
    let d = make("2.4.1+cu118", "3.10", true, &[]);
    assert_eq!(d.base.image, "nvidia/cuda:11.8.0-devel-ubuntu22.04");
    // Without extensions nothing is compiled: no compiler, no arch list.
    let d = make("2.6.0+cu124", "3.11", false, &[]);
    assert!(!d.text.contains("apt-get") && !d.text.contains("TORCH_CUDA_ARCH_LIST"));
}

#[test]
fn extensions_are_compiled_for_the_gpus_given() {
    let d = request_for("2.6.0+cu124", "3.11", Some("H100 SXM"), true, &[]).unwrap();
    assert!(d.text.contains("ENV TORCH_CUDA_ARCH_LIST=\"9.0\""), "{}", d.text);
}

#[test]
fn no_base_of_the_minor_falls_back_to_the_closest_of_the_major_without_forward_compat() {
    // No nvidia/cuda 11.7 record: 11.8 is the closest 11.x.
    let d = make("2.0.1+cu117", "3.10", false, &[]);
    assert_eq!(d.base.image, "nvidia/cuda:11.8.0-base-ubuntu22.04");
    assert!(!d.base.exact);
    // cuda-compat of 11.8 is not what a cu117 build was checked against: no brand terms.
    assert_eq!(d.require_cuda.as_deref(), Some("cuda>=11.7,arch>=3.7"));
}

#[test]
fn a_cuda_major_without_images_is_an_error_naming_it() {
    let e = request_for("1.12.1+cu102", "3.9", None, false, &[]).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("no `nvidia/cuda` base image of CUDA 10.x"), "{msg}");
}

#[test]
fn a_cpu_build_gets_plain_ubuntu_and_no_nvidia_requirement() {
    let d = make("2.6.0+cpu", "3.12", false, &[]);
    assert_eq!(d.base.image, CPU_BASE);
    assert!(d.require_cuda.is_none());
    assert!(!d.text.contains("NVIDIA_"));
    assert_eq!(d.index_url, "https://download.pytorch.org/whl/cpu");
    assert!(d.text.contains("assert c is None, 'expected a CPU build'"));
}

#[test]
fn require_cuda_is_what_the_build_needs_with_forward_compat_terms_per_branch() {
    let d = make("2.6.0+cu124", "3.11", false, &[]);
    assert_eq!(
        d.require_cuda.as_deref(),
        Some(
            "cuda>=12.4,arch>=5.0 brand=tesla,driver>=535,driver<536,arch>=5.0 \
             brand=nvidia,driver>=535,driver<536,arch>=5.0"
        )
    );
    assert!(d.text.contains(&format!(
        "NVIDIA_REQUIRE_CUDA=\"{}\"",
        d.require_cuda.as_ref().unwrap()
    )));
    assert!(d.text.contains("NVIDIA_VISIBLE_DEVICES=all"));
    assert!(d.text.contains("NVIDIA_DRIVER_CAPABILITIES=compute,utility"));
}

#[test]
fn torch_vision_and_audio_are_pinned_to_the_build_on_its_index() {
    let d = make("2.6.0+cu124", "3.11", false, &[]);
    assert_eq!(
        d.pins,
        [
            "torch==2.6.0+cu124",
            "torchvision==0.21.0+cu124",
            "torchaudio==2.6.0+cu124"
        ]
    );
    assert_eq!(d.index_url, "https://download.pytorch.org/whl/cu124");
    let i = instructions(&d.text);
    let install = &i[position(&i, "RUN python -m pip install --no-cache-dir --index-url")];
    assert!(
        install.contains(
            "--index-url https://download.pytorch.org/whl/cu124 torch==2.6.0+cu124 \
             torchvision==0.21.0+cu124 torchaudio==2.6.0+cu124"
        ),
        "{install}"
    );
    assert!(install.contains("> /opt/venv/constraints-torch.txt"));
    assert!(d.text.contains(
        "assert v.split('+')[0] == '2.6.0', 'expected torch 2.6.0'; assert c == '12.4', 'expected a CUDA 12.4 build'"
    ));
}

#[test]
fn steps_are_in_cache_friendly_order_and_end_as_a_non_root_user() {
    let d = make("2.6.0+cu124", "3.11", false, &["requirements.txt"]);
    let i = instructions(&d.text);
    let python = position(&i, "RUN uv python install 3.11");
    let torch = position(&i, "RUN python -m pip install --no-cache-dir --index-url");
    let copy_reqs = position(&i, "COPY requirements.txt ./");
    let reqs = position(
        &i,
        "RUN python -m pip install --no-cache-dir -r requirements.txt -c /opt/venv/constraints-torch.txt",
    );
    let copy_all = position(&i, "COPY --chown=10001:10001 . .");
    let user = position(&i, "USER 10001:10001");
    let check = position(&i, "RUN python -c \"import torch;");
    assert!(python < torch && torch < copy_reqs && copy_reqs < reqs && reqs < copy_all);
    assert!(copy_all < user && user < check);
    assert!(
        i.iter()
            .any(|l| l.starts_with("RUN useradd") && l.contains("--uid 10001"))
    );
    assert_eq!(
        i.iter().rfind(|l| l.starts_with("USER ")).unwrap(),
        "USER 10001:10001"
    );
    // hadolint's DL3059 asks for no two RUN in a row; each is separated on purpose.
    for pair in i.windows(2) {
        assert!(
            !(pair[0].starts_with("RUN ") && pair[1].starts_with("RUN ")),
            "consecutive RUN:\n{}\n{}",
            pair[0],
            pair[1]
        );
    }
    // Without requirements, no step for them.
    let d = make("2.6.0+cu124", "3.11", false, &[]);
    assert!(!d.text.contains(" -r "));
}

#[test]
fn requirements_in_folders_keep_their_paths() {
    let d = make(
        "2.6.0+cu124",
        "3.11",
        false,
        &["requirements.txt", "reqs/gpu.txt", "reqs/base.txt", "c.txt"],
    );
    let i = instructions(&d.text);
    assert!(
        i.contains(&"COPY requirements.txt c.txt ./".to_string()),
        "{}",
        i.join("\n")
    );
    assert!(i.contains(&"COPY reqs/gpu.txt reqs/base.txt reqs/".to_string()));
    assert!(i.iter().any(|l| l.contains("-r requirements.txt -c")));
}

#[test]
fn pyproject_dependencies_come_after_the_requirements_and_before_the_project() {
    let d = request_with(
        "2.6.0+cu124",
        "3.11",
        None,
        false,
        &["requirements.txt"],
        Some("svc/pyproject.toml"),
        &[],
    )
    .unwrap();
    let i = instructions(&d.text);
    let at = |needle: &str| {
        i.iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in\n{}", i.join("\n")))
    };
    assert!(
        i.contains(&"COPY svc/pyproject.toml svc/".to_string()),
        "{}",
        i.join("\n")
    );
    assert!(i.contains(
        &"RUN uv pip install -r svc/pyproject.toml -c /opt/venv/constraints-torch.txt".to_string()
    ));
    assert!(at("-r requirements.txt") < at("uv pip install -r svc/pyproject.toml"));
    assert!(at("uv pip install") < at("COPY --chown=10001:10001 . ."));
    let e = request_with(
        "2.6.0+cu124",
        "3.11",
        None,
        false,
        &[],
        Some("../pyproject.toml"),
        &[],
    )
    .unwrap_err();
    assert!(e.to_string().contains("../pyproject.toml"), "{e}");
}

#[test]
fn requirements_that_install_the_project_itself_come_after_it() {
    let d = request_with(
        "2.6.0+cu124",
        "3.11",
        None,
        false,
        &["requirements.txt", "reqs/base.txt"],
        None,
        &[".", "./libs/tok"],
    )
    .unwrap();
    let i = instructions(&d.text);
    let copy = i
        .iter()
        .position(|l| l == "COPY --chown=10001:10001 . .")
        .unwrap();
    let install = i
        .iter()
        .position(|l| l.contains("-r requirements.txt -c /opt/venv/constraints-torch.txt"))
        .unwrap();
    assert!(copy < install, "{}", i.join("\n"));
    assert!(install < i.iter().position(|l| l.starts_with("USER ")).unwrap());
    // The project's copy brings the requirements files: no COPY of their own.
    assert!(
        !i.iter()
            .any(|l| l.starts_with("COPY requirements.txt") || l.starts_with("COPY reqs/"))
    );
    assert!(d.text.contains("(`.`, `./libs/tok`)"), "{}", d.text);
}

#[test]
fn paths_a_dockerfile_cannot_hold_are_refused() {
    for bad in [
        "/etc/passwd",
        "../up.txt",
        "a b.txt",
        "x$(id).txt",
        "",
        "a//b.txt",
        "q\".txt",
    ] {
        let e = request_for("2.6.0+cu124", "3.11", None, false, &[bad]).unwrap_err();
        assert!(matches!(e, DockerfileError::BadPath { .. }), "{bad}: {e}");
    }
}

#[test]
fn labels_name_the_stack() {
    let d = make("2.6.0+cu124", "3.11", false, &[]);
    let get = |k: &str| d.labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("io.gpuenv.torch"), Some("2.6.0+cu124"));
    assert_eq!(get("io.gpuenv.cuda"), Some("12.4"));
    assert_eq!(get("io.gpuenv.python"), Some("3.11"));
    assert_eq!(get("io.gpuenv.cudnn"), Some("9.1.0.70"));
    assert_eq!(get("io.gpuenv.variant"), Some("cu124"));
    assert_eq!(
        get("org.opencontainers.image.base.name"),
        Some("docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04")
    );
    assert!(get("org.opencontainers.image.title").is_some());
    assert!(d.text.contains("io.gpuenv.torch=\"2.6.0+cu124\" \\"));
}

#[test]
fn label_values_are_quoted() {
    assert_eq!(quoted("a \"b\" $c \\"), "\"a \\\"b\\\" \\$c \\\\\"");
    assert_eq!(qualified("ubuntu:24.04"), "docker.io/library/ubuntu:24.04");
    assert_eq!(
        qualified("nvcr.io/nvidia/pytorch:24.08-py3"),
        "nvcr.io/nvidia/pytorch:24.08-py3"
    );
}

/// The whole text of one stack, so that any change to the output is a visible diff.
/// `GPUENV_BLESS=1 cargo test` rewrites the snapshot.
#[test]
fn snapshot_of_a_devel_stack_with_requirements() {
    let d = make("2.6.0+cu124", "3.11", true, &["requirements.txt"]);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots/dockerfile-2.6.0-cu124-py3.11-extensions.txt");
    if std::env::var_os("GPUENV_BLESS").is_some() {
        std::fs::write(&path, &d.text).unwrap();
    }
    let snapshot = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        d.text, snapshot,
        "the Dockerfile changed; if intended, run with GPUENV_BLESS=1"
    );
}

/// A request whose requirements file (or pyproject.toml) says `text`, with what the
/// package records make of it.
fn request_from_project(
    torch: &str,
    python: &str,
    text: &str,
    pyproject: bool,
) -> Result<Dockerfile, DockerfileError> {
    request_with_extras(torch, python, text, pyproject, &[])
}

/// [`request_from_project`] with the pyproject.toml's optional dependency groups `extras`
/// installed, as `dockerfile --extra` asks.
fn request_with_extras(
    torch: &str,
    python: &str,
    text: &str,
    pyproject: bool,
    extras: &[&str],
) -> Result<Dockerfile, DockerfileError> {
    let db = Db::embedded().unwrap();
    let (s, rel) = stack(torch, python, None);
    let mut needs = if pyproject {
        crate::project::parse_pyproject("pyproject.toml", text).unwrap()
    } else {
        crate::project::parse_requirements("requirements.txt", text).unwrap()
    };
    let choice = crate::project::ExtrasChoice {
        names: extras.iter().map(|e| e.to_string()).collect(),
        all: false,
    };
    let chosen = needs.choose_extras(&choice, false).unwrap();
    let from = crate::resolve::extensions::implied(&db.packages, &db.python, &needs.requirements);
    generate(&Request {
        stack: &s,
        release: &rel,
        images: &db.images,
        cuda: &db.cuda,
        extensions: from.iter().any(|e| e.assumed),
        extensions_from: &from,
        gpus: Vec::new(),
        requirements: if pyproject {
            Vec::new()
        } else {
            vec!["requirements.txt".into()]
        },
        pyproject: pyproject.then(|| "pyproject.toml".to_string()),
        pyproject_extras: chosen,
        requirements_from_project: Vec::new(),
        generator: "gpuenv test".into(),
    })
}

/// An optional dependency group is installed only when chosen, and the base follows what
/// is installed: flash-attn in `[project.optional-dependencies] train` makes the devel base
/// only with `--extra train`, whose install line then names it.
#[test]
fn optional_dependencies_are_installed_when_chosen_and_decide_the_base() {
    let pyproject = "[project]\nname = \"p\"\nversion = \"0\"\ndependencies = [\"numpy\"]\n\n\
                     [project.optional-dependencies]\ntrain = [\"flash-attn==2.7.4.post1\"]\nDocs = [\"sphinx\"]\n";
    let d = request_with_extras("2.6.0+cu124", "3.11", pyproject, true, &[]).unwrap();
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-base-ubuntu22.04");
    assert!(
        d.text
            .contains("RUN uv pip install -r pyproject.toml -c /opt/venv/constraints-torch.txt"),
        "{}",
        d.text
    );
    let d = request_with_extras("2.6.0+cu124", "3.11", pyproject, true, &["train", "docs"]).unwrap();
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-devel-ubuntu22.04");
    assert!(
        d.text
            .contains("-r pyproject.toml --extra train --extra docs -c /opt/venv/constraints-torch.txt"),
        "{}",
        d.text
    );
    assert!(
        d.text
            .contains("With its optional dependency groups train, docs (--extra)."),
        "{}",
        d.text
    );
    // A group the file does not have is named with those it has.
    let mut needs = crate::project::parse_pyproject("pyproject.toml", pyproject).unwrap();
    let e = needs
        .choose_extras(
            &crate::project::ExtrasChoice {
                names: vec!["gpu".into()],
                all: false,
            },
            false,
        )
        .unwrap_err();
    assert!(e.contains("it has train, docs"), "{e}");
    // A name that would not survive an install line is refused, not written.
    let hostile = "[project]\nname = \"p\"\nversion = \"0\"\n[project.optional-dependencies]\n\"a;curl x|sh\" = [\"numpy\"]\n";
    let mut needs = crate::project::parse_pyproject("pyproject.toml", hostile).unwrap();
    let all = crate::project::ExtrasChoice {
        names: Vec::new(),
        all: true,
    };
    assert!(needs.choose_extras(&all, false).is_err());
}

#[test]
fn a_requirement_that_compiles_at_install_gets_the_devel_base_and_says_why() {
    let d = request_from_project("2.6.0+cu124", "3.11", "numpy\nflash-attn==2.7.4.post1\n", false).unwrap();
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-devel-ubuntu22.04");
    let header: String = d
        .text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        header.contains(
            "Extensions: flash-attn (requirements.txt:2) compiles CUDA code at install unless its build finds a prebuilt wheel"
        ),
        "{header}"
    );
    assert!(
        header.contains("extensions assumed, nvcc of torch's CUDA major needed"),
        "{header}"
    );
    let instrs = instructions(&d.text);
    let tools = position(
        &instrs,
        "RUN python -m pip install --no-cache-dir ninja packaging psutil setuptools wheel",
    );
    let reqs = position(
        &instrs,
        "RUN python -m pip install --no-cache-dir --no-build-isolation -r requirements.txt -c /opt/venv/constraints-torch.txt",
    );
    let torch = position(&instrs, "RUN python -m pip install --no-cache-dir --index-url");
    assert!(torch < tools && tools < reqs, "{instrs:#?}");
    assert!(
        d.text
            .contains("# hadolint ignore=DL3013\nRUN python -m pip install --no-cache-dir ninja")
    );
    assert!(
        d.labels
            .contains(&("io.gpuenv.extensions-from".to_string(), "flash-attn".to_string()))
    );
    assert!(
        d.labels
            .contains(&("io.gpuenv.extensions".to_string(), "true".to_string()))
    );
    // flash-attn passes its own -gencode flags: the arch list comment says so.
    let comment: String = d
        .text
        .lines()
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        comment.contains("flash-attn chooses its own with FLASH_ATTN_CUDA_ARCHS and ignores this list."),
        "{}",
        d.text
    );
}

#[test]
fn pyproject_packages_build_without_isolation_through_uv() {
    let d = request_from_project(
        "2.6.0+cu124",
        "3.11",
        "[project]\nname = \"x\"\nversion = \"0.1\"\ndependencies = [\"mamba_ssm\", \"causal-conv1d>=1.4\"]\n",
        true,
    )
    .unwrap();
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-devel-ubuntu22.04");
    let instrs = instructions(&d.text);
    position(
        &instrs,
        "RUN uv pip install --no-build-isolation-package mamba-ssm --no-build-isolation-package causal-conv1d -r pyproject.toml",
    );
    assert!(!d.text.contains("--no-build-isolation -r"), "{}", d.text);
}

#[test]
fn a_package_that_compiles_only_on_request_keeps_the_small_base_and_says_so() {
    let d = request_from_project("2.6.0+cu124", "3.11", "xformers==0.0.29.post3\n", false).unwrap();
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-base-ubuntu22.04");
    assert!(
        d.text
            .contains("# Extensions: xformers (requirements.txt:1) installs a prebuilt wheel"),
        "{}",
        d.text
    );
    assert!(!d.text.contains("--no-build-isolation"), "{}", d.text);
    assert!(!d.labels.iter().any(|(k, _)| k == "io.gpuenv.extensions-from"));
}

#[test]
fn a_package_that_needs_torchs_exact_cuda_gets_no_base_of_another_minor() {
    // No nvidia/cuda 11.7 record: a devel base would bring nvcc 11.8, which apex refuses.
    let e = request_from_project(
        "2.0.1+cu117",
        "3.10",
        "apex @ git+https://github.com/NVIDIA/apex --config-settings \"--build-option=--cuda_ext\"\n",
        false,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("apex (requirements.txt:1) refuses any nvcc but torch's CUDA 11.7"),
        "{e}"
    );
    // On a CUDA minor the catalog has, it builds.
    let d = request_from_project(
        "2.6.0+cu124",
        "3.11",
        "apex @ git+https://github.com/NVIDIA/apex --config-settings \"--build-option=--cuda_ext\"\n",
        false,
    )
    .unwrap();
    assert_eq!(d.base.image, "nvidia/cuda:12.4.1-devel-ubuntu22.04");
}
