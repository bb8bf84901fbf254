//! `gpuenv db lint` and the database loader.

use gpuenv::db::{self, Db, Kind, ProblemKind};

use crate::support::{fixture, gpuenv, json, root};

#[test]
fn shipped_database_is_clean() {
    let files = db::read_dir(&root().join("compat-db")).unwrap();
    let problems = db::lint(&files);
    let listed: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert!(
        problems.is_empty(),
        "compat-db has problems:\n{}",
        listed.join("\n")
    );
    let run = gpuenv(&["db", "lint"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("ok: "), "{}", run.stdout);
}

#[test]
fn embedded_database_equals_the_directory() {
    let embedded = Db::embedded().unwrap();
    let dir = Db::from_dir(&root().join("compat-db")).unwrap();
    for kind in Kind::ALL {
        assert_eq!(embedded.count(kind), dir.count(kind), "{kind}");
        assert!(embedded.count(kind) > 0, "no {kind} records");
    }
}

#[test]
fn cuda_rows_from_11_0_to_the_newest_are_all_there() {
    let db = Db::embedded().unwrap();
    let have: Vec<String> = db.cuda.iter().map(|c| c.version.to_string()).collect();
    for v in [
        "11.0.1", "11.0.2", "11.0.3", "11.1.0", "11.1.1", "11.2.0", "11.2.1", "11.2.2", "11.3.0", "11.3.1",
        "11.4.0", "11.4.1", "11.4.2", "11.4.3", "11.4.4", "11.5.0", "11.5.1", "11.5.2", "11.6.0", "11.6.1",
        "11.6.2", "11.7.0", "11.7.1", "11.8.0", "12.0.0", "12.0.1", "12.1.0", "12.1.1", "12.2.0", "12.2.1",
        "12.2.2", "12.3.0", "12.3.1", "12.4.0", "12.4.1", "12.5.0", "12.5.1", "12.6.0", "12.6.1", "12.6.2",
        "12.6.3", "12.8.0", "12.8.1", "12.9.0", "12.9.1", "13.0.0", "13.0.1", "13.0.2", "13.1.0", "13.1.1",
        "13.2.0", "13.2.1", "13.2.2",
    ] {
        assert!(have.iter().any(|h| h == v), "no record for CUDA {v}");
    }
}

#[test]
fn templates_are_valid_records() {
    // Each template, copied into an otherwise empty database, must read without problems
    // other than references to records the copy lacks.
    let dir = root().join("compat-db/templates");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let kind = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = match kind.as_str() {
            "python" => "3.12",
            "cuda" => "12.4.0",
            "cudnn" => "9.1.0.70",
            "driver" => "r535",
            "gpu" => "h100-sxm",
            "torch" => "2.4.1",
            "image" => "ngc-25.12",
            "package" => "flash-attn",
            "framework" => "vllm",
            "model" => "llama-2-70b",
            "xid" => "79",
            "efficiency" => "matmul-bf16",
            "foreign-gpu" => "amd-instinct-mi300x",
            other => panic!("unexpected template {other}"),
        };
        let files = vec![db::SourceFile {
            path: format!("{kind}/{stem}.toml"),
            text: Some(text.into()),
        }];
        let problems: Vec<_> = db::lint(&files)
            .into_iter()
            .filter(|p| p.kind != ProblemKind::DanglingReference)
            .collect();
        assert!(problems.is_empty(), "template {kind}: {problems:#?}");
    }
}

#[test]
fn lint_reports_every_planted_problem() {
    let dir = fixture("broken-db");
    let run = gpuenv(&["db", "lint", "--json", "--db", dir.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["clean"], false);
    let problems: Vec<(String, String, String)> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_string(),
                p["kind"].as_str().unwrap().to_string(),
                p["key"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let planted = [
        ("cuda/12.3.0.toml", "bad-value", "checked"),
        ("cuda/12.4.0.toml", "unknown-key", "colour"),
        ("cuda/12.4.0.toml", "bad-value", "min_driver_linux"),
        ("cuda/12.5.0.toml", "overlapping-range", "min_driver_linux"),
        ("cuda/12.5.0.toml", "inconsistent", "family_min_driver"),
        ("cudnn/9.1.0.70.toml", "bad-value", "cuda_majors"),
        ("gpu/h100-sxm.toml", "missing-sources", "sources"),
        ("gpu/h100-sxm.toml", "duplicate-alias", "aliases[0]"),
        ("gpu/h100-pcie.toml", "inconsistent", "architecture"),
        ("gpu/h100-pcie.toml", "bad-value", "unverified[0]"),
        ("gpu/h100-pcie.toml", "duplicate-alias", "aliases[1]"),
        ("torch/2.13.0.toml", "missing-key", "glibc"),
        ("torch/2.13.0.toml", "dangling-reference", "variants[0].cudart"),
        ("torch/2.4.1.toml", "dangling-reference", "variants[0].cuda"),
        ("torch/2.4.1.toml", "dangling-reference", "variants[0].cudnn"),
        ("torch/2.4.1.toml", "dangling-reference", "pypi_default"),
        ("torch/2.4.1.toml", "inconsistent", "variants[1].cudnn"),
        ("driver/r545.toml", "inconsistent", "latest_version"),
        ("driver/r550.toml", "overlapping-range", "first_version"),
        ("driver/r550.toml", "missing-key", "checked"),
        ("python/3.12.toml", "syntax", ""),
        ("python/3-11.toml", "layout", ""),
        ("python/3.11.toml", "duplicate-id", "version"),
        ("image/pytorch-broken.toml", "missing-key", "tag"),
        ("image/pytorch-broken.toml", "dangling-reference", "torch"),
        ("image/pytorch-broken.toml", "dangling-reference", "min_driver"),
        ("misc/stray.toml", "layout", ""),
        ("model/llama-2-7b.toml", "inconsistent", "params"),
        ("gpu/h100-sxm.toml", "bad-value", "bf16_tflops"),
    ];
    for (file, kind, key) in planted {
        assert!(
            problems.contains(&(file.to_string(), kind.to_string(), key.to_string())),
            "not reported: {file} {kind} {key}\nreported: {problems:#?}"
        );
    }
    assert_eq!(
        problems.len(),
        planted.len(),
        "unexpected extra problems: {problems:#?}"
    );
}

#[test]
fn human_lint_names_file_line_and_key() {
    let dir = fixture("broken-db");
    let run = gpuenv(&["db", "lint", "--db", dir.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.lines().any(|l| l
            == "cuda/12.4.0.toml:4: bad-value: `min_driver_linux`: invalid driver version `550.x`: \
                expected a digit or `.`, found `x` at character 5"),
        "{}",
        run.stdout
    );
    // The dangling cudart is named by file, line and key, as every problem is.
    assert!(
        run.stdout.lines().any(|l| l
            == "torch/2.13.0.toml:14: dangling-reference: `variants[0].cudart`: cudart 12.3.2 names \
                CUDA toolkit release 12.3.2, which has no `cuda/12.3.2.toml` record"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.trim_end().ends_with("problems in 16 record files"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_broken_db_refuses_to_load_with_exit_2() {
    let dir = fixture("broken-db");
    let run = gpuenv(&["show", "gpu", "h100", "--db", dir.to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("the database has 28 problems"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("cuda/12.4.0.toml:3: unknown-key"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
}

#[test]
fn a_missing_db_dir_is_bad_input() {
    let run = gpuenv(&["db", "lint", "--db", "/nonexistent/gpuenv-db"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot read database directory `/nonexistent/gpuenv-db`: no such directory"),
        "{}",
        run.stderr
    );
}

#[test]
fn non_utf8_record_is_a_syntax_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("gpu")).unwrap();
    std::fs::write(dir.path().join("gpu/bad.toml"), b"name = \"\xff\"\n").unwrap();
    let run = gpuenv(&["db", "lint", "--db", dir.path().to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("gpu/bad.toml: syntax: not UTF-8 text"),
        "{}",
        run.stdout
    );
}

#[test]
fn lint_reports_every_planted_package_problem_with_file_line_and_key() {
    let dir = fixture("broken-packages");
    let run = gpuenv(&["db", "lint", "--json", "--db", dir.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = json(&run);
    let problems: Vec<(String, Option<u64>, String, String)> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_string(),
                p["line"].as_u64(),
                p["kind"].as_str().unwrap().to_string(),
                p["key"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let planted: &[(&str, Option<u64>, &str, &str)] = &[
        ("package/apex.toml", Some(4), "bad-value", "build_options[0]"),
        ("package/apex.toml", Some(5), "bad-value", "build_requires[0]"),
        ("package/apex.toml", Some(14), "bad-value", "env[1].name"),
        ("package/apex.toml", Some(19), "duplicate-id", "env[2].name"),
        ("package/causal.conv1d.toml", None, "layout", ""),
        ("package/causal.conv1d.toml", Some(1), "duplicate-id", "name"),
        ("package/deepspeed.toml", Some(2), "inconsistent", "compiles"),
        ("package/deepspeed.toml", Some(5), "bad-value", "unverified[0]"),
        (
            "package/deepspeed.toml",
            Some(15),
            "missing-sources",
            "sources[0].url",
        ),
        ("package/example.toml", Some(2), "bad-value", "compiles"),
        ("package/example.toml", Some(3), "bad-value", "nvcc_match"),
        ("package/example.toml", Some(4), "unknown-key", "colour"),
        ("package/example.toml", Some(9), "bad-value", "env[0].role"),
        (
            "package/example-missing.toml",
            Some(1),
            "missing-key",
            "needs_torch_at_build",
        ),
        ("package/flash_attn.toml", None, "layout", ""),
        ("package/flash_attn.toml", Some(1), "bad-value", "name"),
        ("package/mamba-ssm.toml", None, "missing-key", "prebuilt"),
        ("package/xformers.toml", None, "missing-sources", "sources"),
        ("package/xformers.toml", Some(3), "inconsistent", "prebuilt"),
        ("package/xformers.toml", Some(4), "inconsistent", "jit"),
    ];
    for (file, line, kind, key) in planted {
        assert!(
            problems.contains(&(file.to_string(), *line, kind.to_string(), key.to_string())),
            "not reported: {file}:{line:?} {kind} {key}\nreported: {problems:#?}"
        );
    }
    assert_eq!(
        problems.len(),
        planted.len(),
        "unexpected extra problems: {problems:#?}"
    );
    // Every spelling of a name is the same project: the message names the normalized one.
    let human = gpuenv(&["db", "lint", "--db", dir.to_str().unwrap()]);
    assert!(
        human.stdout.lines().any(|l| l
            == "package/flash_attn.toml:1: bad-value: `name`: write the name PEP 503 normalized, \
                `flash-attn`: every spelling of it is matched"),
        "{}",
        human.stdout
    );
}

#[test]
fn package_records_are_found_by_any_spelling_of_the_name() {
    for name in ["flash-attn", "flash_attn", "Flash.Attn", "FLASH-ATTN"] {
        let run = gpuenv(&["show", "package", name, "--json"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let doc = json(&run);
        assert_eq!(doc["kind"], "package");
        assert_eq!(doc["name"], "flash-attn");
        assert_eq!(doc["compiles"], "unless-prebuilt");
        assert_eq!(doc["needs_torch_at_build"], true);
        assert!(doc["sources"].as_array().is_some_and(|s| !s.is_empty()));
    }
    let run = gpuenv(&["show", "package", "flash-atn"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("no package record named `flash-atn`; did you mean `flash-attn`?"),
        "{}",
        run.stderr
    );
    let list = gpuenv(&["db", "list", "package"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    for name in [
        "apex",
        "causal-conv1d",
        "deepspeed",
        "flash-attn",
        "mamba-ssm",
        "xformers",
    ] {
        assert!(
            list.stdout.lines().any(|l| l.starts_with(name)),
            "{name} not listed:\n{}",
            list.stdout
        );
    }
}

#[test]
fn model_records_are_found_as_people_write_their_names() {
    for name in [
        "meta-llama/Llama-2-70b-hf",
        "llama-2-70b",
        "Llama 2 70B",
        "Llama-2-70B",
        "llama2-70b",
        "LLAMA_2_70B",
        "some-org/Llama-2-70B",
    ] {
        let run = gpuenv(&["show", "model", name, "--json"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let doc = json(&run);
        assert_eq!(doc["kind"], "model", "{name}");
        assert_eq!(doc["name"], "Llama-2-70B", "{name}");
        assert!(doc["params"].is_u64(), "params is an integer: {}", doc["params"]);
        assert_eq!(doc["params"].as_u64(), Some(68_976_648_192));
        assert_eq!(doc["config"]["num_key_value_heads"].as_u64(), Some(8));
        assert_eq!(doc["config"]["tie_word_embeddings"], false);
        assert!(doc["sources"].as_array().is_some_and(|s| !s.is_empty()));
    }
    // A mixture of experts carries its active count, an integer too.
    let run = gpuenv(&["show", "model", "mistralai/Mixtral-8x7B-v0.1", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["params"].as_u64(), Some(46_702_792_704));
    assert_eq!(doc["active_params"].as_u64(), Some(12_879_925_248));
    assert_eq!(doc["config"]["num_local_experts"].as_u64(), Some(8));

    let run = gpuenv(&["show", "model", "Llama-3-70B"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("no model record named `Llama-3-70B`; did you mean `Llama-3.1-70B`"),
        "{}",
        run.stderr
    );
    let list = gpuenv(&["db", "list", "model"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.lines().any(|l| l.starts_with("llama-2-70b ")),
        "{}",
        list.stdout
    );
}

#[test]
fn gpu_compute_figures_are_dense_numbers() {
    let run = gpuenv(&["show", "gpu", "H100 SXM", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["bf16_tflops"].as_f64(), Some(989.5));
    assert_eq!(doc["fp8_tflops"].as_f64(), Some(1979.0));
    // A GPU without a sourced figure has none, not zero.
    let run = gpuenv(&["show", "gpu", "V100 SXM2 32GB", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(json(&run).get("bf16_tflops").is_none());
}

/// `end_of_life_by` is a reading of a list of supported branches: a day, not in the future,
/// not before an exact end of life, not on a branch the forward-compatibility table lists,
/// and with the list named in a source.
#[test]
fn lint_holds_end_of_life_by_to_what_a_reading_can_say() {
    let db = crate::support::trimmed_db(&[]);
    let edit = |file: &str, from: &str, to: &str| {
        let path = db.path().join("driver").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}: {from}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    };
    // A month, not the day it was read.
    edit(
        "r525.toml",
        "end_of_life_by = \"2026-12-01\"",
        "end_of_life_by = \"2026-12\"",
    );
    // A day after today.
    edit(
        "r470.toml",
        "end_of_life_by = \"2026-12-01\"",
        "end_of_life_by = \"9999-01-01\"",
    );
    // Past its end of life by a day on which its exact end of life had not come.
    edit(
        "r535.toml",
        "end_of_life = \"2026-06\"",
        "end_of_life = \"2026-06\"\nend_of_life_by = \"2026-01-05\"",
    );
    // No source names the list read.
    edit("r550.toml", "note = \"end_of_life_by: ", "note = \"");
    let run = gpuenv(&["db", "lint", "--json", "--db", db.path().to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let problems: Vec<(String, String, String)> = json(&run)["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_string(),
                p["kind"].as_str().unwrap().to_string(),
                p["key"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected = [
        ("driver/r525.toml", "bad-value", "end_of_life_by"),
        ("driver/r470.toml", "bad-value", "end_of_life_by"),
        // r535: its exact end of life is later, the table lists it as a host, and no
        // source of it names the key.
        ("driver/r535.toml", "inconsistent", "end_of_life_by"),
        ("driver/r535.toml", "inconsistent", "end_of_life_by"),
        ("driver/r535.toml", "missing-sources", "sources"),
        ("driver/r550.toml", "missing-sources", "sources"),
    ];
    let mut got = problems.clone();
    got.sort();
    let mut want: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    want.sort();
    assert_eq!(got, want, "{problems:#?}");
}
