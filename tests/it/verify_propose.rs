//! `gpuenv verify --propose DIR`: an image built here in NGC's layout, served by the
//! loopback registry (or read from an archive), turned into a proposed compat-db record:
//! matching facts leave `unverified`, a planted difference is a correction, the source
//! cites the digest read, the proposal lints among the shipped records, and compat-db and
//! bad input write nothing.

use std::collections::BTreeMap;
use std::path::Path;

use gpuenv::docker::{Engine, Reference};
use serde_json::Value;

use super::daemon;
use super::image::version_py;
use super::image_build::*;
use crate::support::{gpuenv, json, root, trimmed_db};

const UBUNTU_2404: &[u8] = b"PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nVERSION_ID=\"24.04\"\nID=ubuntu\n";

/// What differs between the NGC-like images the tests build.
struct Ngc<'a> {
    torch: &'a str,
    cuda: &'a str,
    /// MAJOR, MINOR, PATCHLEVEL of `cudnn_version.h`, and the config's `CUDNN_VERSION`.
    cudnn: (u32, u32, u32, &'a str),
    nccl: &'a str,
}

/// An image laid out as NGC's PyTorch containers are (Ubuntu 24.04, Python 3.12, the
/// toolkit under /usr/local/cuda-X.Y, cuDNN and NCCL as system libraries, torch in the
/// system Python's dist-packages), as a Docker 25+ `docker save` named `name`.
fn ngc_like(name: &str, n: &Ngc<'_>) -> Vec<u8> {
    let (env, layers) = ngc_parts(n);
    let c = Config {
        env: env.iter().map(String::as_str).collect(),
        ..Default::default()
    };
    docker_save_oci(name, &c, &layers)
}

/// [`ngc_like`] as an OCI-layout archive whose index names the image `name`.
fn ngc_like_oci(name: &str, n: &Ngc<'_>) -> Vec<u8> {
    let (env, layers) = ngc_parts(n);
    let c = Config {
        env: env.iter().map(String::as_str).collect(),
        ..Default::default()
    };
    let img = oci_image(&c, &layers, &layers);
    let desc = manifest_descriptor(&img.manifest, Some(("linux", "amd64")), Some(name));
    oci_archive(&[img], vec![desc], false)
}

/// The config's environment and the layers of [`ngc_like`].
fn ngc_parts(n: &Ngc<'_>) -> (Vec<String>, Vec<Vec<u8>>) {
    let sp = "usr/local/lib/python3.12/dist-packages";
    let line: Vec<&str> = n.cuda.split('.').take(2).collect();
    let root = format!("usr/local/cuda-{}", line.join("."));
    let (ma, mi, pa, cudnn_env) = n.cudnn;
    let cudnn_h =
        format!("#define CUDNN_MAJOR {ma}\n#define CUDNN_MINOR {mi}\n#define CUDNN_PATCHLEVEL {pa}\n");
    let nccl: Vec<&str> = n.nccl.split('.').collect();
    let nccl_h = format!(
        "#define NCCL_MAJOR {}\n#define NCCL_MINOR {}\n#define NCCL_PATCH {}\n",
        nccl[0], nccl[1], nccl[2]
    );
    let version_json = format!(r#"{{"cuda": {{"name": "CUDA SDK", "version": "{}"}}}}"#, n.cuda);
    let base = layer(&[
        E::File("usr/lib/os-release", UBUNTU_2404),
        E::Symlink("etc/os-release", "../usr/lib/os-release"),
        E::File("usr/bin/python3.12", b"\x7fELF"),
        E::File("usr/lib/python3.12/os.py", b""),
    ]);
    let cuda = layer(&[
        E::Dir(&root),
        E::Symlink("usr/local/cuda", root.trim_start_matches("usr/local/")),
        E::File(&format!("{root}/version.json"), version_json.as_bytes()),
        E::File(&format!("{root}/bin/nvcc"), b"\x7fELF"),
        E::File(
            "usr/include/x86_64-linux-gnu/cudnn_version_v9.h",
            cudnn_h.as_bytes(),
        ),
        E::File(
            &format!("usr/lib/x86_64-linux-gnu/libcudnn.so.{ma}.{mi}.{pa}"),
            b"\x7fELF",
        ),
        E::File("usr/include/nccl.h", nccl_h.as_bytes()),
        E::File(
            &format!("usr/lib/x86_64-linux-gnu/libnccl.so.{}", n.nccl),
            b"\x7fELF",
        ),
    ]);
    let torch = layer(&[E::File(
        &format!("{sp}/torch/version.py"),
        &version_py(n.torch, Some(&line.join("."))),
    )]);
    let env = vec![
        format!("CUDA_VERSION={}", n.cuda),
        format!("CUDNN_VERSION={cudnn_env}"),
        "NVIDIA_REQUIRE_CUDA=cuda>=9.0".to_string(),
        "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
    ];
    (env, vec![base, cuda, torch])
}

/// NGC 25.01 as compat-db records it, but with NCCL 2.26.3 where the record says 2.25.1.
const NGC_25_01_OTHER_NCCL: Ngc<'static> = Ngc {
    torch: "2.6.0a0+ecf3bae40a.nv25.1",
    cuda: "12.8.0",
    cudnn: (9, 7, 0, "9.7.0.66"),
    nccl: "2.26.3",
};

/// Every file of compat-db/ and its bytes.
fn compat_db() -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    let db = root().join("compat-db");
    walk(&db, &db, &mut out);
    out
}

fn fact<'a>(doc: &'a Value, key: &str) -> &'a Value {
    doc["proposal"]["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == key)
        .unwrap_or_else(|| panic!("no fact {key}: {:#}", doc["proposal"]))
}

/// The proposal copied over its record in a copy of compat-db: the database's own checker
/// (the library's lint and load, and `gpuenv db lint`) accepts it.
fn lints_in_place(file: &str, text: &str) {
    let db = trimmed_db(&[]);
    std::fs::write(db.path().join(file), text).unwrap();
    let files = gpuenv::db::read_dir(db.path()).unwrap();
    let problems = gpuenv::db::lint(&files);
    assert!(problems.is_empty(), "{problems:#?}\n{text}");
    let loaded = gpuenv::db::Db::load(&files).unwrap();
    let id = file.trim_start_matches("image/").trim_end_matches(".toml");
    assert!(loaded.images.iter().any(|i| i.id == id));
    let run = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

#[test]
fn a_registry_image_confirms_and_corrects_its_ngc_record() {
    let before = compat_db();
    let _guard = daemon::lock();
    let engine = daemon::engine();
    let registry = daemon::registry();
    // A mirror's namespace: the release is read from the tag, the source names this registry.
    let repo = format!("{registry}/gpuenv-test-propose-{}/pytorch", std::process::id());
    let name = format!("{repo}:25.01-py3");
    engine.load(ngc_like(&name, &NGC_25_01_OTHER_NCCL)).unwrap();
    let remote = Reference::parse(&name).unwrap();
    let digest = engine
        .push(&remote, None, &mut |_| {})
        .unwrap()
        .unwrap_or_default();
    let mut pushed = daemon::Pushed::new(&registry);
    pushed.add(&name, &digest);
    assert!(digest.starts_with("sha256:"), "{digest}");

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("proposals");
    let run = gpuenv(&[
        "verify",
        &format!("docker://{name}"),
        "--propose",
        out.to_str().unwrap(),
        "--json",
    ]);
    let _ = engine.remove(&name, true);
    assert!(
        run.code == 0 || run.code == 1,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    let doc = json(&run);
    assert_eq!(doc["origin"]["digest"], digest.as_str());
    let p = &doc["proposal"];
    assert_eq!(p["file"], "image/ngc-25.01.toml");
    assert_eq!(p["new"], false);
    assert_eq!(p["changed"], true);

    // Matching facts leave `unverified`.
    for (key, read) in [
        ("torch", "2.6.0a0+ecf3bae40a.nv25.1"),
        ("cuda", "12.8.0"),
        ("cudnn", "9.7.0.66"),
        ("python", "3.12"),
        ("os", "ubuntu24.04"),
    ] {
        let f = fact(&doc, key);
        assert_eq!(f["outcome"], "confirmed", "{f:#}");
        assert_eq!(f["read"], read, "{f:#}");
        assert_eq!(
            (&f["was_unverified"], &f["unverified"]),
            (&Value::Bool(true), &Value::Bool(false))
        );
    }
    assert_eq!(
        fact(&doc, "torch")["read_from"][0],
        "/usr/local/lib/python3.12/dist-packages/torch/version.py"
    );
    assert_eq!(fact(&doc, "python")["read_from"][0], "/usr/bin/python3.12");
    let cudnn_from = fact(&doc, "cudnn")["read_from"].to_string();
    assert!(cudnn_from.contains("cudnn_version_v9.h") && cudnn_from.contains("env CUDNN_VERSION=9.7.0.66"));
    // The planted difference is a correction, with both values.
    let nccl = fact(&doc, "nccl");
    assert_eq!(nccl["outcome"], "corrected");
    assert_eq!(
        (&nccl["record"], &nccl["read"]),
        (&Value::from("2.25.1"), &Value::from("2.26.3"))
    );
    assert_eq!(nccl["applied"], true);
    assert_eq!(nccl["read_from"][0], "/usr/include/nccl.h");
    // What the record lacks is added; what no image shows stays as it was, and is said.
    assert_eq!(fact(&doc, "require_cuda")["outcome"], "added");
    for key in ["min_driver", "forward_compat"] {
        let f = fact(&doc, key);
        assert_eq!(
            (&f["outcome"], &f["unverified"]),
            (&Value::from("unread"), &Value::Bool(true))
        );
        assert!(f["why"].as_str().unwrap().contains("release notes"), "{f:#}");
    }
    assert_eq!(
        p["unverified"],
        serde_json::json!(["min_driver", "forward_compat"])
    );

    // The source cites the exact manifest the registry served, and the files read.
    let url = format!("docker://{repo}@{digest}");
    assert_eq!(p["source"]["url"], url.as_str());
    let note = p["source"]["note"].as_str().unwrap();
    assert!(
        note.contains("from the registry") && note.contains("/usr/include/nccl.h"),
        "{note}"
    );

    // The file written: the curated text, only the changed lines rewritten, and the source.
    let file = out.join("image/ngc-25.01.toml");
    assert_eq!(p["written"], file.to_str().unwrap());
    let text = std::fs::read_to_string(&file).unwrap();
    let curated = std::fs::read_to_string(root().join("compat-db/image/ngc-25.01.toml")).unwrap();
    assert!(
        text.contains("#   corrected nccl: compat-db 2.25.1, image 2.26.3"),
        "{text}"
    );
    assert!(text.contains("\nnccl = \"2.26.3\"\n"), "{text}");
    assert!(
        text.contains("\nunverified = [\"min_driver\", \"forward_compat\"]\n"),
        "{text}"
    );
    assert!(text.contains(&format!("url = \"{url}\"")), "{text}");
    let notes = curated.lines().find(|l| l.starts_with("notes = ")).unwrap();
    assert!(text.contains(notes), "the notes are the curator's to change");
    let record: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        record["torch"].as_str(),
        Some("2.6.0a0+ecf3bae40a"),
        "a confirmed value keeps its spelling"
    );
    assert_eq!(record["sources"].as_array().unwrap().len(), 4);
    lints_in_place("image/ngc-25.01.toml", &text);
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "only image/ is written"
    );

    // The human report says the same.
    let again = tmp.path().join("again");
    let run = gpuenv(&[
        "verify",
        &format!("docker://{name}"),
        "--propose",
        again.to_str().unwrap(),
    ]);
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
    for line in [
        "proposal for compat-db/image/ngc-25.01.toml:",
        "corrected  nccl: compat-db 2.25.1, image 2.26.3  [/usr/include/nccl.h",
        "confirmed  torch: 2.6.0a0+ecf3bae40a.nv25.1  [/usr/local/lib/python3.12/dist-packages/torch/version.py]",
        "unread     min_driver: 570.26, stays unverified",
    ] {
        assert!(run.stdout.contains(line), "{line}\n{}", run.stdout);
    }
    assert!(
        run.stdout.contains(&format!("source:    {url}")),
        "{}",
        run.stdout
    );
    assert_eq!(
        std::fs::read_to_string(again.join("image/ngc-25.01.toml")).unwrap(),
        text
    );

    assert_eq!(compat_db(), before, "compat-db/ is never changed");
}

#[test]
fn an_unrecorded_release_is_proposed_from_what_was_read() {
    let before = compat_db();
    let tmp = tempfile::tempdir().unwrap();
    // compat-db has no 25.04 record, nor a cuDNN 9.9.0.52 one.
    let archive = tmp.path().join("ngc.tar");
    std::fs::write(
        &archive,
        ngc_like_oci(
            "nvcr.io/nvidia/pytorch:25.04-py3",
            &Ngc {
                torch: "2.7.0a0+79aa17489c.nv25.4",
                cuda: "12.9.0",
                cudnn: (9, 9, 0, "9.9.0.52"),
                nccl: "2.26.3",
            },
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let run = gpuenv(&[
        "verify",
        &format!("oci-archive:{}", archive.display()),
        "--propose",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        run.code == 0 || run.code == 1,
        "exit {}: {}",
        run.code,
        run.stderr
    );
    let doc = json(&run);
    let p = &doc["proposal"];
    assert_eq!(
        (&p["file"], &p["new"]),
        (&Value::from("image/ngc-25.04.toml"), &Value::Bool(true))
    );
    let digest = doc["origin"]["digest"].as_str().unwrap();
    assert_eq!(
        p["source"]["url"],
        format!("docker://nvcr.io/nvidia/pytorch@{digest}").as_str()
    );
    assert!(p["source"]["note"].as_str().unwrap().contains("oci-archive copy"));
    for key in ["torch", "cuda", "nccl", "python", "os", "require_cuda"] {
        let f = fact(&doc, key);
        assert_eq!(
            (&f["outcome"], &f["applied"]),
            (&Value::from("added"), &Value::Bool(true)),
            "{f:#}"
        );
    }
    // A cuDNN compat-db has no record of would not lint: left out, and said why.
    let cudnn = fact(&doc, "cudnn");
    assert_eq!(
        (&cudnn["outcome"], &cudnn["applied"]),
        (&Value::from("added"), &Value::Bool(false))
    );
    assert!(
        cudnn["why"]
            .as_str()
            .unwrap()
            .contains("no cuDNN 9.9.0.52 record"),
        "{cudnn:#}"
    );
    let text = std::fs::read_to_string(out.join("image/ngc-25.04.toml")).unwrap();
    let record: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(record["tag"].as_str(), Some("25.04-py3"));
    assert_eq!(record["nccl"].as_str(), Some("2.26.3"));
    assert!(!record.contains_key("cudnn"), "{text}");
    lints_in_place("image/ngc-25.04.toml", &text);
    assert_eq!(compat_db(), before);
}

#[test]
fn bad_arguments_write_nothing() {
    let before = compat_db();
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("ngc.tar");
    std::fs::write(
        &archive,
        ngc_like("nvcr.io/nvidia/pytorch:25.01-py3", &NGC_25_01_OTHER_NCCL),
    )
    .unwrap();
    let source = format!("docker-archive:{}", archive.display());
    let entries = |p: &Path| std::fs::read_dir(p).map(|d| d.count()).unwrap_or(0);

    // A folder that is not empty.
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), "mine").unwrap();
    let run = gpuenv(&["verify", &source, "--propose", full.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
    assert_eq!(entries(&full), 1);
    assert_eq!(run.stdout, "");

    // Inside the database.
    let inside = root().join("compat-db/proposals-test");
    let run = gpuenv(&["verify", &source, "--propose", inside.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("inside the database"), "{}", run.stderr);
    assert!(!inside.exists());

    // A local image has no manifest digest to cite: refused before it is read.
    let out = tmp.path().join("out");
    let run = gpuenv(&[
        "verify",
        "docker-daemon:nvcr.io/nvidia/pytorch:25.01-py3",
        "--propose",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("digest"), "{}", run.stderr);
    // Nor has a legacy `docker save`.
    let legacy = tmp.path().join("legacy.tar");
    std::fs::write(
        &legacy,
        docker_save_legacy(
            "nvcr.io/nvidia/pytorch:25.01-py3",
            &Config::default(),
            &[layer(&[])],
            false,
        ),
    )
    .unwrap();
    let run = gpuenv(&[
        "verify",
        &format!("docker-archive:{}", legacy.display()),
        "--propose",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("digest of its manifest"), "{}", run.stderr);

    // An image that is no record's.
    let other = tmp.path().join("other.tar");
    std::fs::write(
        &other,
        ngc_like("example.com/team/train:1", &NGC_25_01_OTHER_NCCL),
    )
    .unwrap();
    let run = gpuenv(&[
        "verify",
        &format!("docker-archive:{}", other.display()),
        "--propose",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no compat-db image record"), "{}", run.stderr);

    // No folder given.
    let run = gpuenv(&["verify", &source, "--propose"]);
    assert_eq!(run.code, 2);

    assert!(!out.exists(), "nothing was written");
    assert_eq!(compat_db(), before);
}
