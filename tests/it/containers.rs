//! `gpuenv dockerfile`, `build` and `pull` against the real Docker daemon: generated
//! Dockerfiles built unchanged on stand-in bases, pulls from the loopback registry with
//! verified digests and credentials, and every fault the issue names. See `daemon.rs` for
//! the stand-ins and the failing registry.

use std::path::{Path, PathBuf};

use gpuenv::docker::{Engine, Progress, Reference};

use crate::daemon::{self, Cleanup, Fault, FaultyRegistry, Pushed, StandIns};
use crate::support::{command, gpuenv_env, gpuenv_in, json, root, run, services};

/// Writes files below `dir`.
fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// The images a Dockerfile names in `FROM`.
fn from_images(dockerfile: &str) -> Vec<String> {
    dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("FROM "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// A unique suffix, so that parallel runs on one daemon never share names.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos}", std::process::id())
}

struct Case {
    name: &'static str,
    flags: &'static [&'static str],
    /// Files of the project folder.
    files: &'static [(&'static str, &'static str)],
    /// Send the project folder as the context (else only the requirements travel).
    context: bool,
    base: &'static str,
    /// Lines the stand-ins must have logged, in this order.
    log: &'static [&'static str],
    /// Labels and environment the image must carry.
    labels: &'static [(&'static str, &'static str)],
    require_cuda: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        name: "cu124",
        flags: &[
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "requirements.txt",
        ],
        files: &[
            (
                "requirements.txt",
                "# the project\n-r reqs/base.txt\nnumpy==1.26.4\n",
            ),
            ("reqs/base.txt", "einops==0.8.0\n"),
        ],
        context: false,
        base: "nvidia/cuda:12.4.1-base-ubuntu22.04",
        log: &[
            "useradd app 10001",
            "uv python install 3.11",
            "uv venv --seed --python 3.11 /opt/venv",
            "pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cu124 torch==2.6.0+cu124 torchvision==0.21.0+cu124 torchaudio==2.6.0+cu124",
            "pip-index https://download.pytorch.org/whl/cu124",
            "pip-installed torch==2.6.0+cu124",
            "pip-installed torchvision==0.21.0+cu124",
            "pip-installed torchaudio==2.6.0+cu124",
            "pip install --no-cache-dir -r requirements.txt -c /opt/venv/constraints-torch.txt",
            "pip-read requirements.txt",
            "pip-read ./reqs/base.txt",
            "pip-installed einops==0.8.0",
            "pip-installed numpy==1.26.4",
            "pip-constraints /opt/venv/constraints-torch.txt: torch==2.6.0+cu124 torchvision==0.21.0+cu124 torchaudio==2.6.0+cu124 ",
            "torch-check ok 2.6.0+cu124 as 10001 in /app (writable)",
        ],
        labels: &[
            ("io.gpuenv.torch", "2.6.0+cu124"),
            ("io.gpuenv.cuda", "12.4"),
            ("io.gpuenv.python", "3.11"),
            ("io.gpuenv.extensions", "false"),
        ],
        require_cuda: Some(
            "cuda>=12.4,arch>=5.0 brand=tesla,driver>=535,driver<536,arch>=5.0 brand=nvidia,driver>=535,driver<536,arch>=5.0",
        ),
    },
    Case {
        name: "cu128-extensions",
        flags: &[
            "--torch",
            "2.7.1+cu128",
            "--python",
            "3.12",
            "--gpu",
            "H100 SXM",
            "--extensions",
            "--requirements",
            "requirements.txt",
        ],
        files: &[
            ("requirements.txt", "-e .\neinops==0.8.0\n"),
            (
                "pyproject.toml",
                "[project]\nname = \"trainer\"\nversion = \"0.1.0\"\n",
            ),
            ("src/train.py", "print('training')\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
        ],
        context: true,
        base: "nvidia/cuda:12.8.1-devel-ubuntu24.04",
        log: &[
            "useradd app 10001",
            "apt-get update",
            "apt-get install -y --no-install-recommends g++ ninja-build",
            "uv python install 3.12",
            "uv venv --seed --python 3.12 /opt/venv",
            "pip-installed torch==2.7.1+cu128",
            // `-e .` needs the project: installed after it is copied.
            "pip-editable .",
            "pip-installed einops==0.8.0",
            "torch-check ok 2.7.1+cu128 as 10001 in /app (writable)",
        ],
        labels: &[
            ("io.gpuenv.torch", "2.7.1+cu128"),
            ("io.gpuenv.cuda", "12.8"),
            ("io.gpuenv.extensions", "true"),
        ],
        require_cuda: None,
    },
    Case {
        name: "cpu",
        flags: &[
            "--torch",
            "2.5.1+cpu",
            "--python",
            "3.10",
            "--pyproject",
            "pyproject.toml",
        ],
        files: &[(
            "pyproject.toml",
            "[project]\nname = \"trainer\"\nversion = \"0.1.0\"\nrequires-python = \">=3.10\"\ndependencies = [\n    \"torch>=2.5,<2.6\",\n    \"einops==0.8.0\",\n]\n",
        )],
        context: false,
        base: "ubuntu:24.04",
        log: &[
            "uv python install 3.10",
            "pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.5.1+cpu torchvision==0.20.1+cpu torchaudio==2.5.1+cpu",
            "uv pip install -r pyproject.toml -c /opt/venv/constraints-torch.txt",
            "uv-read pyproject.toml",
            "uv-installed torch>=2.5,<2.6",
            "uv-installed einops==0.8.0",
            "uv-constraints /opt/venv/constraints-torch.txt",
            "torch-check ok 2.5.1+cpu as 10001 in /app (writable)",
        ],
        labels: &[("io.gpuenv.torch", "2.5.1+cpu"), ("io.gpuenv.variant", "cpu")],
        require_cuda: None,
    },
    Case {
        // A requirement that compiles CUDA code at install: a devel base, its build
        // imports first, then the requirements without build isolation.
        name: "flash-attn",
        flags: &[
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "requirements.txt",
        ],
        files: &[("requirements.txt", "einops==0.8.0\nflash-attn==2.6.3\n")],
        context: false,
        base: "nvidia/cuda:12.4.1-devel-ubuntu22.04",
        log: &[
            "apt-get install -y --no-install-recommends g++ ninja-build",
            "uv python install 3.11",
            "pip-installed torch==2.6.0+cu124",
            "pip install --no-cache-dir ninja packaging psutil setuptools wheel",
            "pip install --no-cache-dir --no-build-isolation -r requirements.txt -c /opt/venv/constraints-torch.txt",
            "pip-installed einops==0.8.0",
            "pip-installed flash-attn==2.6.3",
            "torch-check ok 2.6.0+cu124 as 10001 in /app (writable)",
        ],
        labels: &[
            ("io.gpuenv.torch", "2.6.0+cu124"),
            ("io.gpuenv.extensions", "true"),
            ("io.gpuenv.extensions-from", "flash-attn"),
        ],
        require_cuda: None,
    },
];

/// `log` holds `want` in order (other lines may come between).
fn assert_in_order(log: &str, want: &[&str]) {
    let lines: Vec<&str> = log.lines().collect();
    let mut at = 0;
    for w in want {
        match lines[at..].iter().position(|l| l == w) {
            Some(i) => at += i + 1,
            None => panic!("the stand-ins did not log `{w}` (after line {at}); the log:\n{log}"),
        }
    }
}

#[test]
fn generated_dockerfiles_build_unchanged_on_stand_in_bases_for_each_stack() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), case.files);
        let text = gpuenv_in(dir.path(), &[&["dockerfile"], case.flags].concat());
        assert_eq!(text.code, 0, "{}: {}", case.name, text.stderr);
        let bases = from_images(&text.stdout);
        assert_eq!(bases[1], case.base, "{}", case.name);
        let _standins = StandIns::create(&engine, &bases);

        let tag = format!("gpuenv-test/{}:{}", case.name, unique());
        let mut args: Vec<&str> = vec!["build"];
        args.extend(case.flags);
        let ctx = dir.path().to_str().unwrap().to_string();
        if case.context {
            args.extend(["--context", &ctx]);
        }
        args.extend(["--tag", &tag, "--json"]);
        let built = gpuenv_in(dir.path(), &args);
        let _cleanup = Cleanup {
            engine: &engine,
            names: vec![tag.clone()],
        };
        assert_eq!(built.code, 0, "{}: {}{}", case.name, built.stdout, built.stderr);
        // Progress on stderr, the summary on stdout.
        assert!(built.stderr.contains("Step 1/"), "{}", built.stderr);
        assert!(
            built.stderr.contains("torch 2."),
            "the check's output streams: {}",
            built.stderr
        );
        let doc = json(&built);
        assert_eq!(doc["tag"], tag.as_str());
        assert_eq!(doc["base"], case.base);
        assert!(doc["image_id"].as_str().unwrap().starts_with("sha256:"));
        assert!(doc["size"].as_u64().is_some());
        if case.name == CASES[0].name {
            // `build --json` is part of the contract too; what the daemon decides (the id,
            // the size) and the test's own tag are redacted.
            insta::with_settings!({
                snapshot_path => "../snapshots",
                prepend_module_to_snapshot => false,
                omit_expression => true,
            }, {
                insta::assert_json_snapshot!("build", doc, {
                    ".tag" => "[TAG]",
                    ".image_id" => "[ID]",
                    ".size" => "[SIZE]",
                });
            });
        }

        let details = engine.inspect(&tag).unwrap().expect("the image is tagged");
        assert_eq!(details.id, doc["image_id"].as_str().unwrap());
        assert_eq!(
            details.user, "10001:10001",
            "{}: runs as the non-root user",
            case.name
        );
        for (k, v) in case.labels {
            assert_eq!(
                details.labels.get(*k).map(String::as_str),
                Some(*v),
                "{}: label {k}",
                case.name
            );
        }
        assert!(details.labels.contains_key("org.opencontainers.image.title"));
        let require = details
            .env
            .iter()
            .find_map(|e| e.strip_prefix("NVIDIA_REQUIRE_CUDA="));
        match case.require_cuda {
            Some(r) => assert_eq!(
                require,
                Some(r),
                "{}: the stack's need, not the base's",
                case.name
            ),
            None if case.base.starts_with("nvidia/") => {
                assert_ne!(
                    require,
                    Some("cuda>=99.0"),
                    "{}: the base's requirement was replaced",
                    case.name
                )
            }
            None => assert_eq!(require, None),
        }
        let log = daemon::read_text(&engine, &tag, "/opt/standin/log");
        assert_in_order(&log, case.log);
        if case.name == "cu128-extensions" {
            assert!(
                details.env.contains(&"TORCH_CUDA_ARCH_LIST=9.0".to_string()),
                "{:?}",
                details.env
            );
            let train = daemon::read_text(&engine, &tag, "/app/src/train.py");
            assert_eq!(train, "print('training')\n");
            let no_git = engine.read_file(&tag, "/app/.git/HEAD", 1024);
            assert!(no_git.is_err(), ".git must not travel in the context");
        }
    }
}

#[test]
fn a_failing_step_exits_3_with_its_output_and_leaves_no_tag_on_a_half_built_image() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[("requirements.txt", "einops==0.8.0\ngpuenv-standin-fail==1.0\n")],
    );
    let flags = [
        "--torch",
        "2.6.0+cu124",
        "--python",
        "3.11",
        "--requirements",
        "requirements.txt",
    ];
    let text = gpuenv_in(dir.path(), &[&["dockerfile"][..], &flags].concat());
    let bases = from_images(&text.stdout);
    let _standins = StandIns::create(&engine, &bases);

    // One name held by an earlier image keeps pointing at it; a new name is never made.
    let n = unique();
    let held = format!("gpuenv-test/fail-held:{n}");
    let fresh = format!("gpuenv-test/fail-new:{n}");
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![held.clone(), fresh.clone()],
    };
    let earlier = engine.inspect(&bases[1]).unwrap().unwrap().id;
    engine.tag(&earlier, &Reference::parse(&held).unwrap()).unwrap();
    // The step that fails, numbered as the classic builder numbers instructions.
    let mut instructions = Vec::new();
    let mut continued = false;
    for l in text.stdout.lines() {
        if !continued && !l.starts_with('#') && !l.trim().is_empty() {
            instructions.push(l);
        }
        continued = l.ends_with('\\');
    }
    let failing = instructions
        .iter()
        .position(|l| l.starts_with("RUN python -m pip install --no-cache-dir -r"))
        .unwrap();
    let step = format!(
        "step {}/{} `{}`",
        failing + 1,
        instructions.len(),
        instructions[failing]
    );
    let runs: Vec<_> = [&held, &fresh]
        .iter()
        .map(|tag| gpuenv_in(dir.path(), &[&["build"][..], &flags, &["--tag", tag]].concat()))
        .collect();
    // The steps that succeeded stay as untagged build cache (`  |  ---> <id>`): removed here.
    let _intermediates = Cleanup {
        engine: &engine,
        names: runs
            .iter()
            .flat_map(|r| {
                r.stderr.lines().filter_map(|l| {
                    l.strip_prefix(gpuenv::report::BUILD_LINE)?
                        .trim()
                        .strip_prefix("---> ")
                })
            })
            .filter(|id| id.chars().all(|c| c.is_ascii_hexdigit()))
            .map(String::from)
            .collect(),
    };
    for run in &runs {
        assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        let err = &run.stderr;
        assert!(!err.contains('\u{1b}'), "no colour codes: {err}");
        let want = format!(
            "error: the build failed at {step}: The command '/bin/sh -c {}' returned a non-zero code: 1\n\
             output of the failed step:\n  \
             | ERROR: Could not find a version that satisfies the requirement gpuenv-standin-fail==1.0\n  \
             | ERROR: No matching distribution found for gpuenv-standin-fail==1.0\n",
            instructions[failing].trim_start_matches("RUN ")
        );
        assert!(err.ends_with(&want), "want:\n{want}\ngot:\n{err}");
    }
    assert_eq!(
        engine.inspect(&held).unwrap().unwrap().id,
        earlier,
        "the earlier image keeps its name"
    );
    assert!(
        engine.inspect(&fresh).unwrap().is_none(),
        "no name on a half-built image"
    );
}

/// Pushes a tiny unique image as `name` and removes the local copy; returns its digest.
fn push_unique(engine: &gpuenv::docker::Bollard, name: &str) -> String {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    let id = format!("{name} {}\n", unique());
    h.set_size(id.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    b.append_data(&mut h, "id", id.as_bytes()).unwrap();
    let r = Reference::parse(name).unwrap();
    engine.import(b.into_inner().unwrap(), &r, &[]).unwrap();
    let mut events = 0;
    let digest = engine
        .push(&r, None, &mut |_: Progress| events += 1)
        .unwrap_or_else(|e| panic!("push {name}: {e}"))
        .expect("a push reports the digest");
    engine.remove(name, true).unwrap();
    digest
}

#[test]
fn pull_from_the_local_registry_shows_layers_and_verifies_the_digest() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let reg = daemon::registry();
    let name = format!("{reg}/gpuenv-test/pull:{}", unique());
    let digest = push_unique(&engine, &name);
    let mut pushed = Pushed::new(&reg);
    pushed.add(&name, &digest);
    let repo = name.rsplit_once(':').unwrap().0.to_string();
    let by_digest = format!("{repo}@{digest}");
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![name.clone(), by_digest.clone()],
    };
    let run = gpuenv_in(&root(), &["pull", &name, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["image"], name.as_str());
    assert_eq!(doc["digest"], digest.as_str());
    assert_eq!(doc["digest_verified"], true);
    assert_eq!(doc["source"], "name");
    assert_eq!(doc["layers"], 1);
    assert_eq!(doc["downloaded_layers"], 1);
    assert!(
        run.stderr.contains(": Pull complete"),
        "per-layer progress: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("Digest: {digest}")),
        "{}",
        run.stderr
    );
    let details = engine.inspect(&name).unwrap().unwrap();
    assert!(details.repo_digests.iter().any(|d| d.ends_with(&digest)));

    // By digest, in text.
    let run = gpuenv_in(&root(), &["pull", &by_digest]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!("digest   {digest} (verified")),
        "{}",
        run.stdout
    );
}

#[test]
fn pull_takes_the_catalog_image_for_the_stack_through_a_mirror() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let reg = daemon::registry();
    let dry = gpuenv_in(
        &root(),
        &[
            "pull",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let plan = json(&dry);
    assert_eq!(plan["image"], "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime");
    assert_eq!(plan["pulled"], false);

    let mirrored = format!("{reg}/pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime");
    let digest = push_unique(&engine, &mirrored);
    let mut pushed = Pushed::new(&reg);
    pushed.add(&mirrored, &digest);
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![mirrored.clone()],
    };
    let run = gpuenv_in(
        &root(),
        &[
            "pull",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--mirror",
            &reg,
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["image"], mirrored.as_str());
    assert_eq!(doc["digest"], digest.as_str());
    assert_eq!(doc["source"], "catalog");
    assert_eq!(
        doc["catalog"]["image"],
        "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"
    );
    assert_eq!(doc["catalog"]["has_torch"], true);
    assert_eq!(doc["stack"]["torch"], "2.6.0");
}

const PASSWORD: &str = "Sup3r-secret-Passw0rd";

fn assert_no_secret(run: &crate::support::Run, secret: &str) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("gpuenv-ci:{secret}"));
    for text in [&run.stdout, &run.stderr] {
        assert!(
            !text.contains(secret) && !text.contains(&b64),
            "a credential was printed:\n{text}"
        );
    }
}

/// A unique image pushed as `gpuenv-test/private:<tag>` to `reg`, deleted from it when
/// the guard goes: its tag and digest.
fn private_image(engine: &gpuenv::docker::Bollard, reg: &str) -> (String, String, Pushed) {
    let tag = unique();
    let private = format!("{reg}/gpuenv-test/private:{tag}");
    let digest = push_unique(engine, &private);
    let mut pushed = Pushed::new(reg);
    pushed.add(&private, &digest);
    (tag, digest, pushed)
}

#[test]
fn credentials_from_the_environment_or_docker_config_reach_the_registry_and_never_print() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let reg = daemon::registry();
    let (tag, digest, _pushed) = private_image(&engine, &reg);
    let front = FaultyRegistry::start(
        Fault::RequireAuth {
            user: "gpuenv-ci".into(),
            password: PASSWORD.into(),
        },
        reg.clone(),
    );
    let name = format!("{}/gpuenv-test/private:{tag}", front.addr);
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![name.clone()],
    };
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().to_str().unwrap();
    let base_env = [("HOME", home_s), ("DOCKER_CONFIG", home_s)];

    let anon = gpuenv_env(&root(), &["pull", &name], &base_env);
    assert_eq!(anon.code, 3, "{}", anon.stderr);
    assert!(
        anon.stderr
            .contains("authentication required or refused (HTTP 401)"),
        "{}",
        anon.stderr
    );

    let wrong = "Wr0ng-Passw0rd-xyz";
    let env = [
        &base_env[..],
        &[
            ("GPUENV_REGISTRY_USER", "gpuenv-ci"),
            ("GPUENV_REGISTRY_PASSWORD", wrong),
        ],
    ]
    .concat();
    let bad = gpuenv_env(&root(), &["pull", &name], &env);
    assert_eq!(bad.code, 3, "{}", bad.stderr);
    assert!(bad.stderr.contains("HTTP 401"), "{}", bad.stderr);
    assert_no_secret(&bad, wrong);
    assert!(engine.inspect(&name).unwrap().is_none());

    let env = [
        &base_env[..],
        &[
            ("GPUENV_REGISTRY_USER", "gpuenv-ci"),
            ("GPUENV_REGISTRY_PASSWORD", PASSWORD),
        ],
    ]
    .concat();
    let ok = gpuenv_env(&root(), &["pull", &name, "--json"], &env);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(json(&ok)["digest"], digest.as_str());
    assert_no_secret(&ok, PASSWORD);
    engine.remove(&name, true).unwrap();

    // `docker login` writes base64("user:password") under `auths`.
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("gpuenv-ci:{PASSWORD}"));
    let config = serde_json::json!({"auths": {format!("http://{}", front.addr): {"auth": auth}}});
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    let ok = gpuenv_env(&root(), &["pull", &name], &base_env);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_no_secret(&ok, PASSWORD);

    // Half the variables is bad input, found before the daemon is asked.
    let half = gpuenv_env(
        &root(),
        &["pull", &name],
        &[("GPUENV_REGISTRY_USER", "gpuenv-ci")],
    );
    assert_eq!(half.code, 2, "{}", half.stderr);
    assert!(
        half.stderr
            .contains("set both GPUENV_REGISTRY_USER and GPUENV_REGISTRY_PASSWORD")
    );
}

/// A credential helper `docker-credential-<name>` in `dir`: it answers `answer` for the
/// server `server` and "credentials not found" for any other, as the real ones do.
fn credential_helper(dir: &Path, name: &str, server: &str, answer: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 9\nread -r server || true\nif [ \"$server\" = '{server}' ]; then echo '{answer}'; else echo 'credentials not found in native keychain'; exit 1; fi\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn credential_helpers_named_by_the_docker_config_reach_the_daemon_and_the_registry_client() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let reg = daemon::registry();
    let (tag, digest, _pushed) = private_image(&engine, &reg);
    let basic = FaultyRegistry::start(
        Fault::RequireAuth {
            user: "gpuenv-ci".into(),
            password: PASSWORD.into(),
        },
        reg.clone(),
    );
    let refresh = "Refr3sh-identity-token-xyz";
    let bearer = FaultyRegistry::start(
        Fault::RequireBearer {
            refresh_token: refresh.into(),
        },
        reg.clone(),
    );
    let via_basic = format!("{}/gpuenv-test/private:{tag}", basic.addr);
    let via_bearer = format!("{}/gpuenv-test/private:{tag}", bearer.addr);
    let _cleanup = Cleanup {
        engine: &engine,
        names: vec![via_basic.clone(), via_bearer.clone()],
    };
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    credential_helper(
        &bin,
        "gpuenv-store",
        &basic.addr,
        &format!(
            r#"{{"ServerURL":"{}","Username":"gpuenv-ci","Secret":"{PASSWORD}"}}"#,
            basic.addr
        ),
    );
    credential_helper(
        &bin,
        "gpuenv-ecr",
        &bearer.addr,
        &format!(
            r#"{{"ServerURL":"{}","Username":"<token>","Secret":"{refresh}"}}"#,
            bearer.addr
        ),
    );
    let config = serde_json::json!({
        "auths": {},
        "credsStore": "gpuenv-store",
        "credHelpers": {bearer.addr.as_str(): "gpuenv-ecr"},
    });
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let home_s = home.path().to_str().unwrap();
    let env = [
        ("HOME", home_s),
        ("DOCKER_CONFIG", home_s),
        ("PATH", path.as_str()),
    ];

    // credsStore: a user and password, to the daemon and to the registry client.
    let ok = gpuenv_env(&root(), &["pull", &via_basic, "--json"], &env);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(json(&ok)["digest"], digest.as_str());
    assert_no_secret(&ok, PASSWORD);
    let verified = gpuenv_env(
        &root(),
        &["verify", &format!("docker://{via_basic}"), "--json"],
        &env,
    );
    assert!(verified.code <= 1, "{}", verified.stderr);
    assert_eq!(json(&verified)["origin"]["digest"], digest.as_str());
    assert_no_secret(&verified, PASSWORD);

    // credHelpers for the Bearer registry: an identity token, exchanged for an access
    // token by the registry client (OAuth2 refresh grant) and by the daemon.
    let verified = gpuenv_env(
        &root(),
        &["verify", &format!("docker://{via_bearer}"), "--json"],
        &env,
    );
    assert!(verified.code <= 1, "{}", verified.stderr);
    assert_eq!(json(&verified)["origin"]["digest"], digest.as_str());
    assert_no_secret(&verified, refresh);
    let ok = gpuenv_env(&root(), &["pull", &via_bearer, "--json"], &env);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_no_secret(&ok, refresh);

    // Without the helpers the same config fails as bad input, naming the way out.
    let bare = [
        ("HOME", home_s),
        ("DOCKER_CONFIG", home_s),
        ("PATH", "/usr/bin:/bin"),
    ];
    let missing = gpuenv_env(&root(), &["pull", &via_basic], &bare);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("docker-credential-gpuenv-store")
            && missing.stderr.contains("no such program is on PATH"),
        "{}",
        missing.stderr
    );
    let missing = gpuenv_env(&root(), &["verify", &format!("docker://{via_bearer}")], &bare);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("docker-credential-gpuenv-ecr"),
        "{}",
        missing.stderr
    );
}

#[test]
fn registry_faults_before_and_in_the_middle_of_a_pull_exit_3_and_tag_nothing() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let reg = daemon::registry();
    let unknown = gpuenv_in(
        &root(),
        &["pull", &format!("{reg}/gpuenv-test/no-such-image:{}", unique())],
    );
    assert_eq!(unknown.code, 3, "{}", unknown.stderr);
    assert!(
        unknown
            .stderr
            .contains("no such image, tag or layer there (HTTP 404)"),
        "{}",
        unknown.stderr
    );

    for (fault, says) in [
        (
            Fault::ManifestNotFound,
            "no such image, tag or layer there (HTTP 404)",
        ),
        (Fault::ManifestByDigest500, "the registry failed (HTTP 5xx)"),
        (Fault::Blob404, "no such image, tag or layer there (HTTP 404)"),
        (Fault::Blob401, "authentication required or refused (HTTP 401)"),
    ] {
        // A fresh image each time: its layer must not be on the daemon already.
        let tag = unique();
        let pushed_name = format!("{reg}/gpuenv-test/faulty:{tag}");
        let digest = push_unique(&engine, &pushed_name);
        let mut pushed = Pushed::new(&reg);
        pushed.add(&pushed_name, &digest);
        let front = FaultyRegistry::start(fault.clone(), reg.clone());
        let name = format!("{}/gpuenv-test/faulty:{tag}", front.addr);
        let _cleanup = Cleanup {
            engine: &engine,
            names: vec![name.clone()],
        };
        let run = gpuenv_in(&root(), &["pull", &name]);
        assert_eq!(run.code, 3, "{fault:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .contains(&format!("error: cannot pull `{name}`: {says}")),
            "{fault:?}: {}",
            run.stderr
        );
        if matches!(fault, Fault::Blob404 | Fault::Blob401) {
            assert!(
                run.stderr.contains("Pulling fs layer"),
                "{fault:?} fails mid-pull: {}",
                run.stderr
            );
        }
        assert!(
            engine.inspect(&name).unwrap().is_none(),
            "{fault:?}: nothing tagged"
        );
    }
}

#[test]
fn no_daemon_is_exit_3_with_a_clear_message() {
    // A socket file nothing listens on any more, as a stopped daemon leaves it.
    let dir = tempfile::tempdir().unwrap();
    let dead = dir.path().join("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
    let dead = format!("unix://{}", dead.display());
    for host in ["unix:///nonexistent.sock", dead.as_str(), "tcp://127.0.0.1:1"] {
        let env = [("DOCKER_HOST", host)];
        let build = gpuenv_env(
            &root(),
            &[
                "build",
                "--torch",
                "2.6.0+cu124",
                "--python",
                "3.11",
                "--tag",
                "gpuenv-test/none:1",
            ],
            &env,
        );
        assert_eq!(build.code, 3, "{}", build.stderr);
        assert!(
            build
                .stderr
                .starts_with(&format!("error: the Docker daemon is not reachable at `{host}`")),
            "{}",
            build.stderr
        );
        let pull = gpuenv_env(&root(), &["pull", "ubuntu:24.04"], &env);
        assert_eq!(pull.code, 3, "{}", pull.stderr);
        assert!(
            pull.stderr.contains("the Docker daemon is not reachable"),
            "{}",
            pull.stderr
        );
    }
}

/// Whether this process runs as root (whose permission checks a socket's mode never stops).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

#[test]
fn permission_denied_on_the_socket_is_exit_3_with_a_clear_message() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o000)).unwrap();
    let host = format!("unix://{}", sock.display());
    let env = [("DOCKER_HOST", host.as_str()), ("HOME", "/nonexistent")];
    // A copy of the binary in that folder: the checkout may lie where nobody cannot reach.
    let bin = dir.path().join("gpuenv");
    std::fs::copy(env!("CARGO_BIN_EXE_gpuenv"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    for args in [
        &["pull", "ubuntu:24.04"][..],
        &[
            "build",
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--tag",
            "gpuenv-test/perm:1",
        ][..],
    ] {
        let mut cmd = command(&bin, Path::new("/"), args, &env);
        if is_root() {
            // Root passes every mode check: run as nobody, as a user outside `docker` would.
            cmd.uid(65534).gid(65534);
        }
        let r = run(&mut cmd);
        assert_eq!(r.code, 3, "{}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("error: permission denied on the Docker socket `{host}`")),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn bad_input_is_exit_2_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("proj/requirements.txt", "einops==0.8.0\n"),
            ("elsewhere/r.txt", "x==1\n"),
            ("editable/requirements.txt", "einops==0.8.0\n-e .\n"),
        ],
    );
    let d = dir.path();
    for (args, says) in [
        (
            vec!["build", "--torch", "2.6.0", "--tag", "Bad/Name:1"],
            "invalid image name `Bad/Name:1`",
        ),
        (
            vec!["build", "--torch", "2.6.0", "--tag", "a/b:"],
            "invalid image name `a/b:`",
        ),
        (vec!["pull", "UPPER/case"], "invalid image name `UPPER/case`"),
        (
            vec!["pull", "a/b@sha256:zz"],
            "must be `sha256:` and 64 lowercase hex digits",
        ),
        (
            vec!["pull", "--torch", "2.6.0", "--mirror", "no host"],
            "--mirror `no host`",
        ),
        (
            vec!["pull", "ubuntu:24.04", "--torch", "2.6.0"],
            "cannot be used with",
        ),
        (
            vec![
                "build",
                "--torch",
                "2.6.0",
                "--tag",
                "gpuenv-test/x:1",
                "--context",
                "proj",
                "--requirements",
                "elsewhere/r.txt",
            ],
            "lies outside --context",
        ),
        (
            vec!["dockerfile", "--torch", "2.6.0", "--requirements", "nope.txt"],
            "cannot read requirements file `nope.txt`: no such file",
        ),
        (
            vec![
                "build",
                "--torch",
                "2.6.0",
                "--tag",
                "gpuenv-test/x:1",
                "--requirements",
                "editable/requirements.txt",
            ],
            "editable/requirements.txt:2 installs `.` from the project, and without --context",
        ),
        (
            vec!["dockerfile", "--torch", "1.12.1+cu102", "--python", "3.9"],
            "no `nvidia/cuda` base image of CUDA 10.x",
        ),
        (
            vec!["pull", "--torch", "2.6.0+cpu", "--dry-run"],
            "no prebuilt image for a CPU-only torch build",
        ),
    ] {
        let r = gpuenv_env(d, &args, &[("DOCKER_HOST", "unix:///nonexistent.sock")]);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    // No stack runs: the answer's exit code.
    let r = gpuenv_in(
        d,
        &[
            "dockerfile",
            "--torch",
            "2.7.0",
            "--gpu",
            "RTX 5090",
            "--cuda",
            "12.6",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("no stack runs on the machine described"),
        "{}",
        r.stderr
    );
}

#[test]
fn dockerfile_out_writes_atomically_and_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("requirements.txt", "einops==0.8.0\n")]);
    let out = dir.path().join("Dockerfile");
    let flags = [
        "--torch",
        "2.6.0+cu124",
        "--python",
        "3.11",
        "--requirements",
        "requirements.txt",
    ];
    let stdout = gpuenv_in(dir.path(), &[&["dockerfile"][..], &flags].concat());
    assert_eq!(stdout.code, 0);
    let w = gpuenv_in(
        dir.path(),
        &[&["dockerfile"][..], &flags, &["--out", "Dockerfile"]].concat(),
    );
    assert_eq!(w.code, 0, "{}", w.stderr);
    assert!(w.stdout.starts_with("wrote Dockerfile\n"), "{}", w.stdout);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout.stdout);
    std::fs::write(&out, "mine").unwrap();
    let again = gpuenv_in(
        dir.path(),
        &[&["dockerfile"][..], &flags, &["--out", "Dockerfile"]].concat(),
    );
    assert_eq!(again.code, 2);
    assert!(
        again.stderr.contains("exists; give --force to replace it"),
        "{}",
        again.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
    let forced = gpuenv_in(
        dir.path(),
        &[&["dockerfile"][..], &flags, &["--out", "Dockerfile", "--force"]].concat(),
    );
    assert_eq!(forced.code, 0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout.stdout);
    // Writing where it cannot is the environment failing.
    let ro = gpuenv_in(
        dir.path(),
        &[&["dockerfile"][..], &flags, &["--out", "/proc/gpuenv/Dockerfile"]].concat(),
    );
    assert!(ro.code == 2 || ro.code == 3, "{}", ro.stderr);
}

/// hadolint: `GPUENV_HADOLINT`, else on PATH, else where `scripts/test-services` puts it
/// (made ready by [`services`] first, like every service these tests use).
fn hadolint() -> PathBuf {
    services();
    if let Some(p) = std::env::var_os("GPUENV_HADOLINT") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("hadolint"))
        .find(|p| p.is_file())
    {
        return p;
    }
    let local = root().join("target/test-services/venv/bin/hadolint");
    assert!(
        local.is_file(),
        "hadolint is not at {} although `scripts/test-services` succeeded: set GPUENV_HADOLINT to a hadolint binary, \
         or remove target/test-services/venv to have it installed again",
        local.display()
    );
    local
}

#[test]
fn generated_dockerfiles_are_clean_under_hadolint() {
    let hadolint = hadolint();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("requirements.txt", "-r reqs/base.txt\n"),
            ("reqs/base.txt", "einops==0.8.0\n"),
            ("flash-attn.txt", "flash-attn==2.6.3\ndeepspeed\n"),
            (
                "pyproject.toml",
                "[project]\nname = \"x\"\nversion = \"0.1.0\"\ndependencies = [\"mamba-ssm\"]\n",
            ),
        ],
    );
    for flags in [
        &[
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "requirements.txt",
        ][..],
        &[
            "--torch",
            "2.7.1+cu128",
            "--python",
            "3.12",
            "--extensions",
            "--gpu",
            "H100 SXM",
        ][..],
        &[
            "--torch",
            "2.4.1+cu118",
            "--python",
            "3.10",
            "--extensions",
            "--requirements",
            "requirements.txt",
        ][..],
        &["--torch", "2.5.1+cpu", "--python", "3.13"][..],
        &["--torch", "2.9.0", "--python", "3.14"][..],
        &[
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--requirements",
            "flash-attn.txt",
        ][..],
        &[
            "--torch",
            "2.6.0+cu124",
            "--python",
            "3.11",
            "--pyproject",
            "pyproject.toml",
        ][..],
    ] {
        let r = gpuenv_in(dir.path(), &[&["dockerfile"][..], flags].concat());
        assert_eq!(r.code, 0, "{flags:?}: {}", r.stderr);
        let path = dir.path().join("Dockerfile");
        std::fs::write(&path, &r.stdout).unwrap();
        let out = std::process::Command::new(&hadolint)
            .args(["--no-color", "--failure-threshold", "style"])
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", hadolint.display()));
        assert!(
            out.status.success(),
            "{flags:?}: hadolint found problems:\n{}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            r.stdout
        );
        // Every ignore is justified in the comment just above it.
        let lines: Vec<&str> = r.stdout.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if let Some(rule) = l.strip_prefix("# hadolint ignore=") {
                assert!(
                    ["DL3008", "DL3013"].contains(&rule),
                    "an ignore nobody reviewed: {l}"
                );
                assert!(
                    i > 0 && lines[i - 1].starts_with('#') && lines[i - 1].contains(rule),
                    "{l}"
                );
            }
        }
    }
}
