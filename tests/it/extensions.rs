//! Requirements on packages that compile CUDA code at install (compat-db's `package`
//! records) make `query` and `dockerfile` treat the project as building extensions, or
//! say why not; `pull --dry-run` says when its catalog image is not `query`'s best. None of
//! these talk to a Docker daemon.

use std::path::Path;

use serde_json::Value;

use crate::support::{gpuenv_in, json};

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), files);
    dir
}

fn codes(stack: &Value) -> Vec<&str> {
    stack["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

#[test]
fn query_assumes_extensions_for_flash_attn_in_any_spelling_through_includes() {
    let dir = project(&[
        ("requirements.txt", "numpy\n-r gpu/requirements.txt\n"),
        (
            "gpu/requirements.txt",
            "# kernels\nflash_attn==2.6.3 ; python_version >= \"3.9\"\n",
        ),
    ]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "query",
            "--torch",
            "2.6.0+cu124",
            "--gpu",
            "H100 SXM",
            "--requirements",
            "requirements.txt",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    let from = doc["extensions_from"].as_array().unwrap();
    assert_eq!(from.len(), 1, "{doc:#}");
    let e = &from[0];
    assert_eq!(e["package"], "flash-attn");
    assert_eq!(e["origin"], "gpu/requirements.txt:2");
    assert_eq!(e["compiles"], "unless-prebuilt");
    assert_eq!(e["assumed"], true);
    assert_eq!(e["nvcc_match"], "major");
    assert_eq!(e["needs_torch_at_build"], true);
    assert!(
        e["why"]
            .as_str()
            .unwrap()
            .starts_with("flash-attn (gpu/requirements.txt:2) compiles CUDA code at install unless"),
        "{e:#}"
    );
    // The same as --extensions: the nvcc rules apply to every stack.
    assert!(
        doc["query"].as_str().unwrap().contains("CUDA extensions"),
        "{}",
        doc["query"]
    );
    assert!(
        codes(&doc["stacks"][0]).contains(&"extensions-nvcc"),
        "{:#}",
        doc["stacks"][0]
    );

    let text = gpuenv_in(
        dir.path(),
        &[
            "query",
            "--torch",
            "2.6.0+cu124",
            "--gpu",
            "H100 SXM",
            "--requirements",
            "requirements.txt",
        ],
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(lines[0].starts_with("query: "), "{}", text.stdout);
    assert!(
        lines[1].starts_with("extensions: flash-attn (gpu/requirements.txt:2) compiles CUDA code at install")
            && lines[1].contains("extensions assumed, nvcc of torch's CUDA major needed"),
        "{}",
        text.stdout
    );
}

#[test]
fn query_without_such_packages_lists_none_and_assumes_nothing() {
    let dir = project(&[("requirements.txt", "numpy\nflash-attention-helper\n")]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "query",
            "--torch",
            "2.6.0+cu124",
            "--requirements",
            "requirements.txt",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["extensions_from"], serde_json::json!([]));
    assert!(!codes(&doc["stacks"][0]).contains(&"extensions-nvcc"));
}

#[test]
fn pyproject_dependencies_and_groups_name_packages_too_and_conditions_are_said() {
    let dir = project(&[(
        "pyproject.toml",
        "[project]\nname = \"trainer\"\nversion = \"0.1.0\"\ndependencies = [\"torch>=2.4\", \"xformers\"]\n\n[dependency-groups]\nfast = [\"Mamba_SSM==2.2.4\"]\n",
    )]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "query",
            "--cuda",
            "12.4",
            "--pyproject",
            "pyproject.toml",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    let from: Vec<(&str, &str, bool)> = doc["extensions_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["package"].as_str().unwrap(),
                e["origin"].as_str().unwrap(),
                e["assumed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        from,
        [
            ("xformers", "pyproject.toml: project.dependencies[1]", false),
            ("mamba-ssm", "pyproject.toml: dependency-groups.fast[0]", true),
        ]
    );
    let xformers = doc["extensions_from"][0]["why"].as_str().unwrap();
    assert!(
        xformers.contains("compiles CUDA code only when built from source: extensions not assumed"),
        "{xformers}"
    );
}

#[test]
fn a_package_that_compiles_only_on_request_is_not_assumed_and_the_report_says_what_asks() {
    let dir = project(&[("requirements.txt", "apex @ git+https://github.com/NVIDIA/apex\n")]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "query",
            "--torch",
            "2.6.0+cu124",
            "--requirements",
            "requirements.txt",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with(
                "extensions: apex (requirements.txt:1) compiles CUDA code only when APEX_CUDA_EXT=1"
            ) && l.ends_with("extensions not assumed (give --extensions when you build them)")),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.lines().next().unwrap().contains("CUDA extensions"),
        "{}",
        run.stdout
    );
}

#[test]
fn dockerfile_takes_the_devel_base_and_says_why_in_a_comment() {
    let dir = project(&[("requirements.txt", "einops==0.8.0\nflash-attn==2.6.3\n")]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "dockerfile",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "requirements.txt",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = &run.stdout;
    assert!(
        text.contains("\nFROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "# Extensions: flash-attn (requirements.txt:2) compiles CUDA code at install unless its"
        ),
        "{text}"
    );
    assert!(
        text.contains("RUN python -m pip install --no-cache-dir --no-build-isolation -r requirements.txt"),
        "{text}"
    );
    assert!(text.contains("io.gpuenv.extensions=\"true\""), "{text}");
    assert!(
        text.contains("io.gpuenv.extensions-from=\"flash-attn\""),
        "{text}"
    );

    // --out: the summary names the requirement too.
    let out = gpuenv_in(
        dir.path(),
        &[
            "dockerfile",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "requirements.txt",
            "--out",
            "Dockerfile",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("  extensions flash-attn (requirements.txt:2) compiles CUDA code")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  base     nvidia/cuda:12.4.1-devel-ubuntu22.04\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn dockerfile_refuses_a_base_whose_nvcc_a_package_rejects() {
    // No nvidia/cuda 11.7 image: a devel base would bring nvcc 11.8, and apex's --cuda_ext
    // build accepts only torch's exact CUDA version.
    let dir = project(&[(
        "requirements.txt",
        "apex @ git+https://github.com/NVIDIA/apex --config-settings \"--build-option=--cuda_ext\"\n",
    )]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "dockerfile",
            "--torch",
            "2.0.1+cu117",
            "--python",
            "3.10",
            "--requirements",
            "requirements.txt",
        ],
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr
            .contains("apex (requirements.txt:1) refuses any nvcc but torch's CUDA 11.7"),
        "{}",
        run.stderr
    );
}

#[test]
fn pull_dry_run_says_when_its_image_is_not_querys_best() {
    let dir = tempfile::tempdir().unwrap();
    let run = gpuenv_in(
        dir.path(),
        &[
            "pull",
            "--gpu",
            "H100 SXM",
            "--driver",
            "550.54.14",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["pulled"], false);
    assert_eq!(doc["query_best_differs"], true);
    let best = &doc["query_best"];
    let taken = &doc["stack"];
    assert_ne!(
        (best["torch"].as_str(), best["variant"].as_str()),
        (taken["torch"].as_str(), taken["variant"].as_str()),
        "{doc:#}"
    );
    // query's best for the same flags is what `query` puts first.
    let q = json(&gpuenv_in(
        dir.path(),
        &["query", "--gpu", "H100 SXM", "--driver", "550.54.14", "--json"],
    ));
    assert_eq!(best["torch"], q["stacks"][0]["torch"]);
    assert_eq!(best["variant"], q["stacks"][0]["variant"]);
    assert_eq!(best["python"], q["stacks"][0]["python"]);
    let why = doc["query_best_why"].as_str().unwrap();
    assert!(
        why.contains("but the catalog has no image of that build"),
        "{why}"
    );

    let text = gpuenv_in(
        dir.path(),
        &["pull", "--gpu", "H100 SXM", "--driver", "550.54.14", "--dry-run"],
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("  differs  query's best stack is torch ")),
        "{}",
        text.stdout
    );

    // The exact stack PyTorch publishes: nothing differs.
    let same = json(&gpuenv_in(
        dir.path(),
        &[
            "pull",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--dry-run",
            "--json",
        ],
    ));
    assert_eq!(same["query_best_differs"], false);
    assert_eq!(same["query_best_why"], Value::Null);
    assert_eq!(same["query_best"]["torch"], "2.6.0");
    let same_text = gpuenv_in(
        dir.path(),
        &["pull", "--torch", "2.6.0+cu124", "--python", "3.11", "--dry-run"],
    );
    assert!(!same_text.stdout.contains("differs"), "{}", same_text.stdout);
}

#[test]
fn pull_dry_run_with_a_package_that_compiles_picks_a_devel_image() {
    let dir = project(&[("requirements.txt", "flash-attn\n")]);
    let run = gpuenv_in(
        dir.path(),
        &[
            "pull",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "requirements.txt",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["image"], "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-devel");
}
