//! Packages that pin torch (`framework/` records): a project's `vllm==0.6.3.post1` decides
//! its torch, a conflicting torch pin is incompatible with the fix, an unknown release is
//! said; and `db refresh` proposes framework records from recorded PyPI responses.

use serde_json::Value;

use crate::support::{gpuenv, query};

fn finding<'a>(doc: &'a Value, code: &str) -> &'a Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {:#}", doc["findings"]))
}

/// vLLM 0.6.3.post1's wheel metadata says `torch==2.4.0`: that is the torch, not the newest
/// one that runs on the machine.
#[test]
fn vllm_pin_decides_torch() {
    let (code, doc) = query(&[
        "--require",
        "vllm==0.6.3.post1",
        "--gpu",
        "H100 SXM",
        "--driver",
        "550.54.14",
    ]);
    assert_eq!(code, 0);
    assert_eq!(doc["verdict"], "compatible");
    for s in doc["stacks"].as_array().unwrap() {
        assert_eq!(s["torch"], "2.4.0", "{s:#}");
    }
    let f = finding(&doc, "framework-pins-torch");
    assert_eq!(f["severity"], "info");
    assert_eq!(f["facts"]["torch"], "==2.4.0");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("vllm==0.6.3.post1 (--require) pins torch ==2.4.0"),
        "{msg}"
    );
    assert!(
        f["source"]
            .as_str()
            .unwrap()
            .starts_with("https://files.pythonhosted.org/"),
        "{f:#}"
    );

    // Without the requirement the same machine gets a newer torch: the pin decided.
    let (_, free) = query(&["--gpu", "H100 SXM", "--driver", "550.54.14"]);
    assert_ne!(free["stacks"][0]["torch"], "2.4.0");

    // The text report names the pin as the reason.
    let run = gpuenv(&["query", "--require", "vllm==0.6.3.post1", "--gpu", "H100 SXM"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("best: torch 2.4.0+"), "{}", run.stdout);
    assert!(
        run.stdout.contains("framework-pins-torch: vllm==0.6.3.post1"),
        "{}",
        run.stdout
    );
}

#[test]
fn vllm_pin_in_a_requirements_file() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("requirements.txt");
    std::fs::write(&req, "# serving\nVLLM == 0.6.3.post1\ntransformers>=4.45\n").unwrap();
    let (code, doc) = query(&["--requirements", req.to_str().unwrap(), "--gpu", "H100 SXM"]);
    assert_eq!(code, 0);
    assert_eq!(doc["stacks"][0]["torch"], "2.4.0");
    let msg = finding(&doc, "framework-pins-torch")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("requirements.txt:2"), "{msg}");

    let py = dir.path().join("pyproject.toml");
    std::fs::write(
        &py,
        "[project]\nname = \"x\"\nversion = \"1\"\ndependencies = [\"vllm==0.6.3.post1\"]\n",
    )
    .unwrap();
    let (_, doc) = query(&["--pyproject", py.to_str().unwrap()]);
    assert_eq!(doc["stacks"][0]["torch"], "2.4.0");
}

/// `vllm==0.6.3.post1` with `torch==2.7.1`: pip cannot install both. Incompatible, naming
/// vLLM's pin, with the two smallest fixes: the vLLM release that pins 2.7.1, or torch 2.4.0.
#[test]
fn a_torch_pin_against_vllms_is_incompatible_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("requirements.txt");
    std::fs::write(&req, "vllm==0.6.3.post1\ntorch==2.7.1\n").unwrap();
    let (code, doc) = query(&["--requirements", req.to_str().unwrap(), "--gpu", "H100 SXM"]);
    assert_eq!(code, 1);
    assert_eq!(doc["verdict"], "incompatible");
    let no = finding(&doc, "no-matching-build")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(no.contains("torch ==2.4.0 (vllm==0.6.3.post1 at "), "{no}");
    assert!(no.contains("requirements.txt:1); torch ==2.7.1 ("), "{no}");
    let hints = doc["suggestions"].as_array().unwrap();
    let fw = hints
        .iter()
        .find(|s| s["kind"] == "framework")
        .unwrap_or_else(|| panic!("{hints:#?}"));
    assert!(
        fw["change"]
            .as_str()
            .unwrap()
            .starts_with("vllm==0.10.1.1 (it pins torch==2.7.1)"),
        "{fw:#}"
    );
    assert!(
        fw["gives"].as_str().unwrap().starts_with("torch 2.7.1+"),
        "{fw:#}"
    );
    let torch = hints
        .iter()
        .find(|s| s["kind"] == "torch")
        .unwrap_or_else(|| panic!("{hints:#?}"));
    assert!(
        torch["change"]
            .as_str()
            .unwrap()
            .starts_with("torch==2.4.0 instead of torch==2.7.1"),
        "{torch:#}"
    );
}

/// A release compat-db has not read, and a requirement pinning no release: said, as a
/// warning, never a silent pass.
#[test]
fn an_unknown_vllm_release_is_said() {
    let (_, doc) = query(&["--require", "vllm==0.0.9", "--gpu", "H100 SXM"]);
    let f = finding(&doc, "framework-release-unknown");
    assert_eq!(f["severity"], "warning");
    let msg = f["message"].as_str().unwrap();
    assert!(msg.contains("the torch that vllm 0.0.9 pins is unknown"), "{msg}");
    let (_, doc) = query(&["--require", "vllm>=0.6"]);
    let msg = finding(&doc, "framework-release-unknown")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("pins no single release of vllm"), "{msg}");
    let run = gpuenv(&["query", "--require", "vllm==0.0.9"]);
    assert!(run.stdout.contains("framework-release-unknown"), "{}", run.stdout);
}

#[test]
fn a_require_that_is_not_a_requirement_is_refused() {
    for bad in ["-r other.txt", "vllm===", ""] {
        let run = gpuenv(&["query", &format!("--require={bad}")]);
        assert_eq!(run.code, 2, "{bad:?}: {}", run.stdout);
        assert!(run.stderr.contains("--require"), "{bad:?}: {}", run.stderr);
    }
}

/// `db refresh` against recorded PyPI responses: a database without vLLM's record gets it
/// back as a proposal, each release with the torch its metadata pins, and the release
/// whose metadata PyPI did not serve listed as `unread`.
/// What `db refresh` proposed for a copy of the shipped database without one framework
/// record.
struct Refreshed {
    /// The copy (the proposal, if any, sits beside the removed file as `NAME.toml.proposed`).
    db: tempfile::TempDir,
    /// The framework proposals written, by file name.
    written: Vec<String>,
    /// The proposed record of the removed framework, parsed, and its text.
    proposed: Option<(toml::Value, String)>,
    /// What the refresh printed.
    stdout: String,
}

/// `db refresh` of a copy of the shipped database without `framework/NAME.toml`, against
/// `server`.
fn refresh_without(server: &crate::support::Replay, name: &str) -> Refreshed {
    let file = format!("framework/{name}.toml");
    let db = crate::support::trimmed_db(&[file.as_str()]);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--no-ngc",
        "--no-driver-index",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut written: Vec<String> = std::fs::read_dir(out.join("framework"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    written.sort();
    let proposed = std::fs::read_to_string(out.join(&file)).ok().map(|text| {
        assert!(run.stdout.contains(&format!("  + {file}")), "{}", run.stdout);
        std::fs::write(db.path().join(format!("{file}.proposed")), &text).unwrap();
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        (toml::from_str(&body).unwrap(), text)
    });
    Refreshed {
        db,
        written,
        proposed,
        stdout: run.stdout,
    }
}

#[test]
fn refresh_proposes_a_framework_record_from_recorded_pypi() {
    let server = crate::refresh::replay();
    let Refreshed {
        db,
        written,
        proposed,
        stdout,
    } = refresh_without(&server, "vllm");
    assert!(stdout.contains("packages that pin torch 1"), "{stdout}");
    // Every other framework's recorded releases agree with the shipped records.
    assert_eq!(written, ["vllm.toml"]);
    let (doc, text) = proposed.unwrap();
    let releases = doc["releases"].as_array().unwrap();
    let find = |v: &str| {
        releases
            .iter()
            .find(|r| r["version"].as_str() == Some(v))
            .unwrap_or_else(|| panic!("{v}: {text}"))
    };
    assert_eq!(find("0.6.3.post1")["torch"].as_str(), Some("==2.4.0"));
    assert_eq!(find("0.6.3.post1")["released"].as_str(), Some("2024-10-17"));
    assert_eq!(find("0.10.1.1")["torch"].as_str(), Some("==2.7.1"));
    assert!(
        find("0.6.3.post1")["metadata"]
            .as_str()
            .unwrap()
            .starts_with("https://files.pythonhosted.org/packages/"),
        "{text}"
    );
    assert_eq!(doc["unread"].as_array().unwrap().len(), 1, "{text}");
    assert_eq!(doc["unread"][0].as_str(), Some("0.8.1"));
    // The proposal, moved into the database, lints clean and decides the torch again.
    std::fs::rename(
        db.path().join("framework/vllm.toml.proposed"),
        db.path().join("framework/vllm.toml"),
    )
    .unwrap();
    let run = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let run = gpuenv(&[
        "query",
        "--db",
        db.path().to_str().unwrap(),
        "--require",
        "vllm==0.6.3.post1",
        "--json",
    ]);
    assert_eq!(crate::support::json(&run)["stacks"][0]["torch"], "2.4.0");
}

/// The index recorded served no PEP 658 file for unsloth 2025.3.6's wheel (as for most of
/// the 519 framework releases earlier refreshes left unread): its torch requirement is
/// read from the wheel itself, with range requests for the zip's directory and its
/// `METADATA` member, and the record names the wheel as what was read.
#[test]
fn a_wheel_without_pep658_metadata_is_read_with_range_requests() {
    let server = crate::refresh::replay();
    let r = refresh_without(&server, "unsloth");
    assert_eq!(r.written, ["unsloth.toml"]);
    let (doc, text) = r.proposed.unwrap();
    let release = |v: &str| {
        doc["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["version"].as_str() == Some(v))
            .unwrap_or_else(|| panic!("{v}: {text}"))
            .clone()
    };
    let old = release("2025.3.6");
    assert_eq!(old["torch"].as_str(), Some(">=2.4.0"), "{text}");
    assert_eq!(old["released"].as_str(), Some("2025-03-06"), "{text}");
    assert_eq!(
        old["metadata"].as_str(),
        Some(
            "https://files.pythonhosted.org/packages/5c/3f/21a0186778ad3e481cc709d13bdbb03a3012ea06491be6019d5a6a026a49/unsloth-2025.3.6-py3-none-any.whl"
        ),
        "{text}"
    );
    // The newer release still comes from its PEP 658 file.
    let new = release("2025.10.12");
    assert!(
        new["metadata"].as_str().unwrap().ends_with(".whl.metadata"),
        "{text}"
    );
    assert!(
        doc.get("unread").is_none_or(|u| u.as_array().unwrap().is_empty()),
        "{text}"
    );
}

/// A mirror that ignores `Range` and would send a whole wheel gets nothing read of it:
/// the release stays `unread`, and the refresh does not fail.
#[test]
fn a_server_without_ranges_leaves_the_release_unread() {
    let server = crate::support::Replay::ignoring_ranges(crate::support::fixture("upstream"));
    let r = refresh_without(&server, "unsloth");
    let (doc, text) = r.proposed.unwrap();
    let unread: Vec<&str> = doc["unread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(unread, ["2025.3.6"], "{text}");
}

/// sglang pins torch only through its `srt` extra: `sglang[srt]==0.5.2` gets torch 2.8.0,
/// plain `sglang==0.5.2` no torch pin (said as such).
#[test]
fn an_extra_brings_the_torch_pin() {
    let (_, doc) = query(&["--require", "sglang[srt]==0.5.2"]);
    assert_eq!(doc["stacks"][0]["torch"], "2.8.0");
    let (_, doc) = query(&["--require", "sglang==0.5.2"]);
    let msg = finding(&doc, "framework-pins-torch")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("requires no particular torch"), "{msg}");
    assert!(msg.contains("srt"), "{msg}");
}
