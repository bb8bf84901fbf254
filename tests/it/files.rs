//! Files users name (issue 12, "Files" and "Credentials"): every input is a regular file
//! within its cap, refused at once otherwise; no output ever replaces what it must not;
//! no file's contents (a secret among them) reach a message beyond an excerpt. Every run
//! that could read forever or wait is bounded in time and memory.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::image_build::{Config, E, layer, manifest_descriptor, oci_image};
use crate::support::{Run, assert_bounded, fixture, gpuenv_command, run_bounded};

/// A registry password in the environment of every run: it must never be printed.
const SECRET: &str = "s3cret-registry-password-4417";

/// How long a refusal may take (plus the slack `assert_bounded` allows); a run still going
/// after twice that is killed.
const DEADLINE: Duration = Duration::from_secs(5);

/// Runs `gpuenv ARGS` in `dir` with the secret in its environment, bounded; asserts it
/// ended in time, under the memory bound, with one of `codes`, and printed no secret.
fn bounded(dir: &Path, args: &[&str], codes: &[i32], what: &str) -> Run {
    let mut cmd = gpuenv_command(dir, args, &[("GPUENV_REGISTRY_PASSWORD", SECRET)]);
    let b = run_bounded(&mut cmd, DEADLINE * 2);
    assert_bounded(&b, DEADLINE, codes, what);
    let run = b.run;
    assert!(
        !run.stdout.contains(SECRET) && !run.stderr.contains(SECRET),
        "{what}: the secret was printed:\n{}{}",
        run.stdout,
        run.stderr
    );
    run
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// What stands where a file should be, and what the refusal must call it.
struct Hostile {
    name: &'static str,
    path: PathBuf,
    says: &'static str,
}

/// Things that are not a file to read: devices, a FIFO (nothing ever writes to it), a
/// live socket, a link to a device, a directory, and a sparse file of 1 TiB. They live in
/// `dir`, which the caller keeps (with the socket's listener) for as long as they are used.
fn hostiles(dir: &Path) -> (Vec<Hostile>, std::os::unix::net::UnixListener) {
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let sock = dir.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let to_zero = dir.join("to-zero");
    symlink("/dev/zero", &to_zero).unwrap();
    let folder = dir.join("folder");
    std::fs::create_dir(&folder).unwrap();
    let sparse = dir.join("sparse");
    std::fs::File::create(&sparse).unwrap().set_len(1 << 40).unwrap();
    let h = |name, path: PathBuf, says| Hostile { name, path, says };
    (
        vec![
            h("/dev/zero", "/dev/zero".into(), "it is a character device"),
            h("/dev/urandom", "/dev/urandom".into(), "it is a character device"),
            h("a FIFO", fifo, "it is a FIFO"),
            h("a socket", sock, "it is a socket"),
            h("a link to /dev/zero", to_zero, "it is a character device"),
            h("a directory", folder, "it is a directory"),
            h("a sparse file of 1 TiB", sparse, "it is larger than"),
        ],
        listener,
    )
}

fn host_facts() -> String {
    fixture("hosts/single-a100/host.json").display().to_string()
}

/// A valid OCI image layout of one layer in `dir`; the layer blob's path.
fn oci_dir(dir: &Path) -> PathBuf {
    let l = layer(&[E::File("etc/os-release", b"ID=ubuntu\nVERSION_ID=\"22.04\"\n")]);
    let img = oci_image(
        &Config::default(),
        std::slice::from_ref(&l),
        std::slice::from_ref(&l),
    );
    std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    for (path, data) in &img.members {
        std::fs::write(dir.join(path), data).unwrap();
    }
    let index = json!({"schemaVersion": 2, "manifests": [manifest_descriptor(&img.manifest, None, None)]});
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    dir.join(format!(
        "blobs/sha256/{}",
        gpuenv::image::digest::sha256(&l).hex()
    ))
}

#[test]
fn regression_12_files_that_are_not_regular_are_refused_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let (bad, _listener) = hostiles(scratch.path());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let facts = host_facts();
    for h in &bad {
        let p = h.path.to_str().unwrap();
        // A requirements file that includes it.
        std::fs::write(w.join("includes.txt"), format!("numpy\n-r {p}\n")).unwrap();
        // A database whose one record is it.
        let db = w.join("db");
        let _ = std::fs::remove_dir_all(&db);
        std::fs::create_dir_all(db.join("gpu")).unwrap();
        symlink(&h.path, db.join("gpu/x.toml")).unwrap();
        // An OCI layout whose index.json is it, and one whose layer blob is it.
        let index_dir = w.join("oci-index");
        let _ = std::fs::remove_dir_all(&index_dir);
        std::fs::create_dir_all(&index_dir).unwrap();
        symlink(&h.path, index_dir.join("index.json")).unwrap();
        let blob_dir = w.join("oci-blob");
        let _ = std::fs::remove_dir_all(&blob_dir);
        let blob = oci_dir(&blob_dir);
        std::fs::remove_file(&blob).unwrap();
        symlink(&h.path, &blob).unwrap();
        let sparse = h.name.starts_with("a sparse");
        let cases: Vec<(String, Vec<String>, Option<&str>)> = vec![
            (
                "--requirements".into(),
                vec!["query".into(), "--requirements".into(), p.into()],
                Some(h.says),
            ),
            (
                "-r include".into(),
                vec!["query".into(), "--requirements".into(), "includes.txt".into()],
                Some(h.says),
            ),
            (
                "--pyproject".into(),
                vec!["query".into(), "--pyproject".into(), p.into()],
                Some(h.says),
            ),
            (
                "--order".into(),
                vec![
                    "check".into(),
                    "--order".into(),
                    p.into(),
                    "--host-facts".into(),
                    facts.clone(),
                ],
                Some(h.says),
            ),
            (
                "--host-facts".into(),
                vec!["doctor".into(), "--host-facts".into(), p.into()],
                // A directory is read as a recording's folder: its host.json is missing.
                Some(if h.name == "a directory" {
                    "host.json`: no such file"
                } else {
                    h.says
                }),
            ),
            (
                "--db record".into(),
                vec!["--db".into(), "db".into(), "db".into(), "stats".into()],
                Some(h.says),
            ),
            (
                "docker-archive:".into(),
                vec!["verify".into(), format!("docker-archive:{p}")],
                // A sparse file is a regular file: read as an archive (of zero blocks).
                (!sparse).then_some(h.says),
            ),
            (
                "oci-archive:".into(),
                vec!["verify".into(), format!("oci-archive:{p}")],
                (!sparse).then_some(h.says),
            ),
            (
                "oci: index.json".into(),
                vec!["verify".into(), "oci:oci-index".into()],
                Some(h.says),
            ),
            (
                "oci: blob".into(),
                vec!["verify".into(), "oci:oci-blob".into()],
                Some(if sparse { "the descriptor says" } else { h.says }),
            ),
        ];
        for (input, args, says) in cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let what = format!("{input} as {}", h.name);
            let run = bounded(w, &args, &[2], &what);
            if let Some(says) = says {
                assert!(run.stderr.contains(says), "{what}: {}", run.stderr);
            }
        }
    }
}

#[test]
fn regression_12_a_file_of_secrets_named_by_mistake_is_never_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("req.txt"), "numpy==2.0.0\n-r /proc/self/environ\n").unwrap();
    let facts = host_facts();
    let environ = "/proc/self/environ";
    for args in [
        vec!["query", "--requirements", "req.txt"],
        vec!["query", "--requirements", environ],
        vec!["query", "--pyproject", environ],
        vec!["check", "--order", environ, "--host-facts", &facts],
        vec!["doctor", "--host-facts", environ],
    ] {
        let run = bounded(d, &args, &[2], &format!("{args:?}"));
        assert!(
            run.stderr.contains("it holds a NUL byte"),
            "{args:?}: {}",
            run.stderr
        );
    }
    // Read as an archive it is a regular file that is no image; nothing of it is shown.
    bounded(
        d,
        &["verify", &format!("docker-archive:{environ}")],
        &[2],
        "docker-archive of the environment",
    );

    // A text file whose first line holds a secret past the excerpt of it an error quotes
    // (a `.env`-like line): the error quotes the line's start, never the secret.
    let line = format!("API_TOKEN={}{SECRET}", "x".repeat(300));
    std::fs::write(d.join("shadow-like"), format!("{line}\nOTHER=1\n")).unwrap();
    for args in [
        vec!["query", "--requirements", "shadow-like"],
        vec!["check", "--order", "shadow-like", "--host-facts", &facts],
    ] {
        let run = bounded(d, &args, &[2], &format!("{args:?}"));
        assert!(run.stderr.len() < 2000, "{args:?}: {}", run.stderr);
    }
    let run = bounded(
        d,
        &["query", "--requirements", "shadow-like"],
        &[2],
        "shadow-like",
    );
    assert!(
        run.stderr
            .contains("shadow-like:1: invalid requirement `API_TOKEN=xxx"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("more characters)"), "{}", run.stderr);
}

#[test]
fn regression_12_requirements_includes_are_capped_in_depth_count_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Depth: a chain of 20 includes.
    for i in 0..20 {
        std::fs::write(
            d.join(format!("chain{i}.txt")),
            format!("-r chain{}.txt\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(d.join("chain20.txt"), "numpy\n").unwrap();
    let run = bounded(d, &["query", "--requirements", "chain0.txt"], &[2], "depth");
    assert!(run.stderr.contains("nest deeper than 16"), "{}", run.stderr);
    // Count: one file including 300 others.
    let mut many = String::new();
    for i in 0..300 {
        std::fs::write(d.join(format!("one{i}.txt")), "numpy\n").unwrap();
        many.push_str(&format!("-r one{i}.txt\n"));
    }
    std::fs::write(d.join("many.txt"), many).unwrap();
    let run = bounded(d, &["query", "--requirements", "many.txt"], &[2], "count");
    assert!(run.stderr.contains("at most 256 files"), "{}", run.stderr);
    // Bytes: five includes of 3.5 MiB each, each under the cap of one file.
    let comment = format!("# {}\n", "c".repeat(1 << 20));
    let mut big = String::new();
    for _ in 0..3 {
        big.push_str(&comment);
    }
    big.push_str(&"# pad\n".repeat(80_000));
    let mut top = String::new();
    for i in 0..5 {
        std::fs::write(d.join(format!("big{i}.txt")), &big).unwrap();
        top.push_str(&format!("-r big{i}.txt\n"));
    }
    std::fs::write(d.join("top.txt"), top).unwrap();
    let run = bounded(d, &["query", "--requirements", "top.txt"], &[2], "bytes");
    assert!(
        run.stderr.contains("together are larger than 16 MiB"),
        "{}",
        run.stderr
    );
    // One file over its own cap.
    std::fs::write(d.join("huge.txt"), "#".repeat((4 << 20) + 1)).unwrap();
    let run = bounded(d, &["query", "--requirements", "huge.txt"], &[2], "one file");
    assert!(run.stderr.contains("larger than 4 MiB"), "{}", run.stderr);
}

#[test]
fn regression_12_oci_sizes_are_whole_and_bound_what_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A layer blob that is a 1 TiB sparse file where its descriptor says a few hundred
    // bytes: refused from its size, before a byte is read.
    let blob = oci_dir(&d.join("sparse"));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&blob)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let run = bounded(d, &["verify", "oci:sparse"], &[2], "sparse blob");
    assert!(run.stderr.contains("the descriptor says"), "{}", run.stderr);
    // A negative size is a malformed image, naming the field.
    for (size, says) in [
        (json!(-1), "`size` is negative (-1)"),
        (json!(1.5), "`size` is 1.5, not a whole number"),
        (json!("12"), "not a whole number"),
    ] {
        let oci = d.join("negative");
        let _ = std::fs::remove_dir_all(&oci);
        oci_dir(&oci);
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(oci.join("index.json")).unwrap()).unwrap();
        let mut index = index;
        index["manifests"][0]["size"] = size;
        std::fs::write(oci.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
        let run = bounded(d, &["verify", "oci:negative"], &[2], says);
        assert!(run.stderr.contains(says), "{says}: {}", run.stderr);
        assert!(
            run.stderr.contains("is not a valid OCI descriptor"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn regression_12_an_archive_cut_at_a_member_boundary_is_truncated() {
    let whole = super::image::lying_pytorch_image(true);
    let mut archive = tar::Archive::new(&whole[..]);
    let last = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().raw_header_position())
        .last()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.tar");
    std::fs::write(&cut, &whole[..last as usize]).unwrap();
    let run = bounded(
        dir.path(),
        &["verify", "docker-archive:cut.tar"],
        &[2],
        "cut archive",
    );
    assert!(run.stderr.contains("the archive is truncated"), "{}", run.stderr);
    assert!(
        run.stderr.contains("without the end-of-archive marker"),
        "{}",
        run.stderr
    );
}

#[test]
fn regression_12_an_empty_db_holds_no_records() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("gpu")).unwrap();
    std::fs::write(dir.path().join("README.md"), "not a record").unwrap();
    for args in [
        vec!["--db", ".", "query", "--gpu", "H100"],
        vec!["--db", ".", "db", "lint"],
        vec!["--db", ".", "db", "stats"],
    ] {
        let run = bounded(dir.path(), &args, &[2], &format!("{args:?}"));
        assert!(
            run.stderr.contains("holds no records"),
            "{args:?}: {}",
            run.stderr
        );
    }
}

/// Every name in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

#[test]
fn regression_12_dockerfile_out_replaces_only_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    let planted = outside.path().join("planted");
    symlink(&planted, d.join("dangling")).unwrap();
    std::fs::write(outside.path().join("theirs"), "theirs").unwrap();
    symlink(outside.path().join("theirs"), d.join("linked")).unwrap();
    mkfifo(&d.join("fifo"));
    std::fs::create_dir(d.join("folder")).unwrap();
    let flags = [
        "dockerfile",
        "--torch",
        "2.6.0+cu124",
        "--python",
        "3.11",
        "--out",
    ];
    for target in ["dangling", "linked", "fifo", "folder"] {
        for force in [false, true] {
            let mut args = flags.to_vec();
            args.push(target);
            if force {
                args.push("--force");
            }
            let run = bounded(d, &args, &[2], &format!("{target} (force: {force})"));
            assert!(run.stderr.contains(&format!("`{target}` is a")), "{}", run.stderr);
        }
    }
    assert!(!planted.exists(), "written through a dangling link");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("theirs")).unwrap(),
        "theirs"
    );
    assert_eq!(
        names(d),
        ["dangling", "fifo", "folder", "linked"],
        "nothing was added"
    );
    // A regular file: only with --force; and no temporary file is left either way.
    std::fs::write(d.join("Dockerfile"), "mine").unwrap();
    let mut args = flags.to_vec();
    args.push("Dockerfile");
    let run = bounded(d, &args, &[2], "existing file");
    assert!(run.stderr.contains("exists; give --force"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(d.join("Dockerfile")).unwrap(), "mine");
    args.push("--force");
    bounded(d, &args, &[0], "existing file, --force");
    assert!(
        std::fs::read_to_string(d.join("Dockerfile"))
            .unwrap()
            .starts_with("# ")
    );
    assert_eq!(names(d), ["Dockerfile", "dangling", "fifo", "folder", "linked"]);
    // A folder that does not exist: the write cannot be done (3).
    let mut args = flags.to_vec();
    args.push("no/such/folder/Dockerfile");
    bounded(d, &args, &[3], "missing folder");
}

#[test]
fn regression_12_doctor_record_refuses_before_probing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outside = tempfile::tempdir().unwrap();
    let cases = [
        ("fifo", "is a FIFO"),
        ("dangling", "is a symbolic link"),
        ("folder", "is a directory"),
    ];
    for (name, says) in cases {
        let rec = d.join(name);
        std::fs::create_dir(&rec).unwrap();
        let target = rec.join("host.json");
        match name {
            "fifo" => mkfifo(&target),
            "dangling" => symlink(outside.path().join("planted"), &target).unwrap(),
            _ => std::fs::create_dir(&target).unwrap(),
        }
        let run = bounded(d, &["doctor", "--record", name], &[2], name);
        assert!(run.stderr.contains(says), "{name}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{name}: nothing was probed or reported");
    }
    assert!(
        names(outside.path()).is_empty(),
        "written through a dangling link"
    );
    std::fs::write(d.join("a-file"), "mine").unwrap();
    let run = bounded(d, &["doctor", "--record", "a-file"], &[2], "a file as DIR");
    assert!(run.stderr.contains("it is not a directory"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(d.join("a-file")).unwrap(), "mine");
}

#[test]
fn regression_12_refresh_out_is_a_new_or_empty_real_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("empty")).unwrap();
    symlink(d.join("empty"), d.join("link")).unwrap();
    mkfifo(&d.join("fifo"));
    for (out, says) in [("link", "is a symbolic link"), ("fifo", "is not a directory")] {
        // Refused before upstream is asked (nothing listens on port 9).
        let run = bounded(
            d,
            &["db", "refresh", "--pypi", "http://127.0.0.1:9/", "--out", out],
            &[2],
            out,
        );
        assert!(run.stderr.contains(says), "{out}: {}", run.stderr);
    }
    assert!(names(&d.join("empty")).is_empty());
}
