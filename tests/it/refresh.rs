//! `gpuenv db refresh` against recorded upstream responses served on loopback, and the
//! comparison of the shipped torch records with PyPI.

use std::time::Duration;

use gpuenv::db::Db;
use gpuenv::upstream::{Client, RefreshOptions, compare_torch, torch_facts};

use crate::support::{Replay, fixture, gpuenv, trimmed_db};

pub(crate) fn replay() -> Replay {
    Replay::start(fixture("upstream"), None)
}

#[test]
fn shipped_torch_records_agree_with_recorded_pypi() {
    let server = replay();
    let client = Client::new(None, Duration::from_secs(10)).unwrap();
    let opts = RefreshOptions {
        pypi: server.url.parse().unwrap(),
        pytorch_index: None,
        ..RefreshOptions::default()
    };
    let (facts, _) = torch_facts(&client, &opts).unwrap();
    let db = Db::embedded().unwrap();
    let mut with_metadata = 0;
    for rec in &db.torch {
        let f = facts
            .iter()
            .find(|f| f.version == rec.version)
            .unwrap_or_else(|| panic!("torch {} is not on the recorded PyPI", rec.version));
        let changes = compare_torch(rec, f);
        assert!(
            changes.is_empty(),
            "torch {} disagrees with PyPI: {changes:#?}",
            rec.version
        );
        // Python tags are always compared; pins where PyPI served metadata.
        assert!(!f.python.is_empty(), "{}", rec.version);
        if let Some(b) = &f.default {
            with_metadata += 1;
            if let Some(tag) = b.variant() {
                assert_eq!(rec.pypi_default, tag, "{}", rec.version);
            }
        }
    }
    // Every release PyPI lists since 1.12.0 has a record, and all but the two whose
    // metadata no mirror serves (2.14.1, 2.15.0) were checked on their pins.
    assert_eq!(facts.len(), db.torch.len());
    assert_eq!(with_metadata, db.torch.len() - 2);
}

#[test]
fn refresh_proposes_exactly_the_missing_records() {
    let server = replay();
    let removed = ["torch/2.15.0.toml", "torch/2.12.1.toml", "torch/2.1.2.toml"];
    // The images of a removed release go too: a database that names a torch it has no
    // record of is refused before anything is read.
    let images: Vec<String> = std::fs::read_dir(crate::support::root().join("compat-db/image"))
        .unwrap()
        .map(|e| format!("image/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|f| {
            ["2.15.0", "2.12.1", "2.1.2"]
                .iter()
                .any(|v| f.starts_with(&format!("image/pytorch-{v}-")))
        })
        .collect();
    let mut gone: Vec<&str> = removed.to_vec();
    gone.extend(images.iter().map(String::as_str));
    let db = trimmed_db(&gone);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &server.url,
        "--pytorch-index",
        &format!("{}whl/", server.url),
        "--no-ngc",
        "--no-driver-index",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut written: Vec<String> = std::fs::read_dir(out.join("torch"))
        .unwrap()
        .map(|e| format!("torch/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    written.sort();
    let mut expected: Vec<String> = removed.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(written, expected);
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "only torch/ is written"
    );
    assert!(run.stdout.contains("new records proposed: 3"), "{}", run.stdout);
    assert!(
        run.stdout.contains("changed records proposed: 0"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("PyTorch wheel index: unreachable"),
        "{}",
        run.stdout
    );

    // The proposals are records: copied back, the database lints clean.
    for f in &removed {
        std::fs::copy(out.join(f), db.path().join(f)).unwrap();
    }
    let lint = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(lint.code, 0, "{}", lint.stdout);

    // What PyPI states is in the proposal: pins of 2.1.2, tags of 2.15.0.
    let p = std::fs::read_to_string(out.join("torch/2.1.2.toml")).unwrap();
    assert!(p.contains("pypi_default = \"cu121\""), "{p}");
    assert!(p.contains("cudnn = \"8.9.2.26\""), "{p}");
    assert!(p.contains("nccl = \"2.18.1\""), "{p}");
    let p = std::fs::read_to_string(out.join("torch/2.15.0.toml")).unwrap();
    assert!(p.contains("\"cp315t\""), "{p}");
    assert!(
        p.contains("\"pypi_default\""),
        "the assumed default is marked unverified: {p}"
    );
}

#[test]
fn nothing_to_propose_writes_nothing() {
    let server = replay();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--no-ngc",
        "--no-driver-index",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["proposals"].as_array().unwrap().len(), 0);
    assert_eq!(doc["pytorch_index"], "not asked");
    assert_eq!(doc["ngc_registry"], "not asked");
    assert_eq!(doc["driver_index"], "not asked");
    assert!(!out.exists());
}

#[test]
fn network_failure_exits_3_and_writes_nothing() {
    // Nothing listens on a port we just bound and released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = trimmed_db(&["torch/2.15.0.toml"]);
    let out = db.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &format!("http://127.0.0.1:{port}"),
        "--no-pytorch-index",
        "--timeout",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("cannot fetch `http://127.0.0.1:{port}/simple/torch/`")),
        "{}",
        run.stderr
    );
    assert!(!out.exists());
}

#[test]
fn server_error_mid_run_exits_3_and_leaves_nothing_half_written() {
    let server = Replay::start(fixture("upstream"), Some("torchaudio"));
    let db = trimmed_db(&["torch/2.15.0.toml"]);
    let out = db.path().join("proposals");
    let run = gpuenv(&[
        "db",
        "refresh",
        "--db",
        db.path().to_str().unwrap(),
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("HTTP 500"), "{}", run.stderr);
    assert!(!out.exists());
    let leftovers: Vec<_> = std::fs::read_dir(db.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_non_empty_out_dir_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("keep.txt"), "mine").unwrap();
    let run = gpuenv(&[
        "db",
        "refresh",
        "--pypi",
        "http://127.0.0.1:9/",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("is not empty"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_bad_url_is_bad_input() {
    let run = gpuenv(&["db", "refresh", "--pypi", "ftp://example.org"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("invalid --pypi `ftp://example.org`: expected an http(s) URL"),
        "{}",
        run.stderr
    );
}

/// The CUDA toolkits and cuDNN releases of a copy of compat-db that the recorded PyPI has
/// and it lacks: records removed here are proposed back, and nothing else.
pub(crate) const TOOLKITS_REMOVED: [&str; 4] = [
    "cuda/13.4.2.toml",
    "cuda/13.5.0.toml",
    "cudnn/9.28.0.42.toml",
    "cudnn/9.28.1.4.toml",
];

pub(crate) fn refresh_into(
    db: &std::path::Path,
    out: &std::path::Path,
    server: &Replay,
    json: bool,
) -> crate::support::Run {
    let mut args = vec![
        "db",
        "refresh",
        "--db",
        db.to_str().unwrap(),
        "--pypi",
        &server.url,
        "--no-pytorch-index",
        "--no-ngc",
        "--no-driver-index",
        "--out",
        out.to_str().unwrap(),
    ];
    if json {
        args.push("--json");
    }
    gpuenv(&args)
}

fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for kind in std::fs::read_dir(dir).unwrap() {
        let kind = kind.unwrap();
        for f in std::fs::read_dir(kind.path()).unwrap() {
            out.push(format!(
                "{}/{}",
                kind.file_name().to_string_lossy(),
                f.unwrap().file_name().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn refresh_proposes_exactly_the_missing_toolkits_and_cudnn_releases() {
    let server = replay();
    let db = trimmed_db(&TOOLKITS_REMOVED);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, false);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Exactly the removed records: not 12.9.1, 13.0.2, 13.0.3 or 13.4.1, which compat-db
    // has; not 13.4.0rc1 (a pre-release), the 11.7 line (components only, but recorded),
    // cuDNN 9.4.0.58 (older than the newest record) or 9.1.0.70.post1.
    assert_eq!(files_under(&out), TOOLKITS_REMOVED.map(String::from).to_vec());
    assert!(
        run.stdout
            .contains("new records proposed: 4 (torch 0, CUDA 2, cuDNN 2)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("  + cuda/13.5.0.toml (pending: min_driver_linux, sass)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("  + cudnn/9.28.1.4.toml (pending: cuda_majors)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("CUDA toolkit releases read from PyPI: 6 (cuda-toolkit); cuDNN releases: 6"),
        "{}",
        run.stdout
    );

    // What PyPI states is in the proposal; what it cannot state is pending, not guessed.
    let p = std::fs::read_to_string(out.join("cuda/13.4.2.toml")).unwrap();
    assert!(p.contains("label = \"CUDA 13.4 Update 2\""), "{p}");
    assert!(p.contains("released = \"2026-09-16\""), "{p}");
    assert!(p.contains("pending = [\"min_driver_linux\", \"sass\"]"), "{p}");
    assert!(
        p.contains("nvidia-cuda-nvcc==13.4.92.*"),
        "the meta-package's pins: {p}"
    );
    assert!(!p.contains("min_driver_linux ="), "{p}");
    assert!(!p.contains("sass ="), "{p}");
    let p = std::fs::read_to_string(out.join("cuda/13.5.0.toml")).unwrap();
    assert!(p.contains("no PEP 658 metadata was served"), "{p}");
    let p = std::fs::read_to_string(out.join("cudnn/9.28.0.42.toml")).unwrap();
    assert!(p.contains("pending = [\"cuda_majors\"]"), "{p}");
    assert!(!p.contains("cuda_majors ="), "{p}");
    assert!(p.contains("nvidia-cudnn-cu13, nvidia-cudnn-cu12"), "{p}");

    // The proposals are records: moved into the copy, it lints clean.
    for f in &TOOLKITS_REMOVED {
        std::fs::copy(out.join(f), db.path().join(f)).unwrap();
    }
    let lint = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);

    // ... and then there is nothing left to propose.
    let again = scratch.path().join("again");
    let run = refresh_into(db.path(), &again, &server, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("new records proposed: 0"), "{}", run.stdout);
    assert!(!again.exists());
}

#[test]
fn the_json_summary_lists_toolkit_and_cudnn_proposals_beside_torch() {
    let server = replay();
    let db = trimmed_db(&["torch/2.15.0.toml", "cuda/13.5.0.toml", "cudnn/9.28.1.4.toml"]);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, true);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let got: Vec<(String, String, Vec<String>)> = doc["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["file"].as_str().unwrap().to_string(),
                p["kind"].as_str().unwrap().to_string(),
                p["pending"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (
                "cuda/13.5.0.toml".into(),
                "cuda".into(),
                s(&["min_driver_linux", "sass"])
            ),
            ("cudnn/9.28.1.4.toml".into(), "cudnn".into(), s(&["cuda_majors"])),
            ("torch/2.15.0.toml".into(), "torch".into(), vec![]),
        ]
    );
    assert_eq!(doc["cuda_releases"], 6);
    assert_eq!(doc["cudnn_releases"], 6);
    assert_eq!(doc["cudnn_older_unrecorded"], 1);
}

/// A proposed toolkit moved into the database lints clean, yet `query` does not answer as
/// if its pending facts were known: a torch build on its CUDA line is not judged
/// compatible on any driver, and the answer says why (`cuda-facts-pending`).
#[test]
fn a_proposed_toolkit_with_pending_facts_is_never_judged_compatible() {
    let server = replay();
    let db = trimmed_db(&["cuda/13.5.0.toml"]);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_into(db.path(), &out, &server, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::copy(out.join("cuda/13.5.0.toml"), db.path().join("cuda/13.5.0.toml")).unwrap();
    // A torch build on CUDA 13.5, as a curator would add it once such wheels appear.
    let torch = db.path().join("torch/2.15.0.toml");
    let mut text = std::fs::read_to_string(&torch).unwrap();
    text.push_str(
        "\n[[variants]]\ntag = \"cu135\"\ncuda = \"13.5\"\nsass = [\"7.5\", \"8.0\", \"8.6\", \"9.0\", \"10.0\", \"12.0\"]\n\
         ptx = []\nindex_url = \"https://download.pytorch.org/whl/cu135\"\nplatforms = [\"x86_64\"]\n",
    );
    std::fs::write(&torch, text).unwrap();
    let dir = db.path().to_str().unwrap();
    let lint = gpuenv(&["db", "lint", "--db", dir]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);

    for driver in ["580.65.06", "620.70.06", "999.99"] {
        let run = gpuenv(&[
            "query", "--db", dir, "--torch", "2.15.0", "--cuda", "13.5", "--gpu", "H100 SXM", "--driver",
            driver, "--json",
        ]);
        let doc: serde_json::Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
        let stacks = doc["stacks"].as_array().unwrap();
        let cu135: Vec<&serde_json::Value> = stacks.iter().filter(|s| s["variant"] == "cu135").collect();
        assert!(!cu135.is_empty(), "{}", run.stdout);
        for s in &cu135 {
            assert_ne!(s["status"], "compatible", "driver {driver}: {s}");
            let codes: Vec<&str> = s["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f["code"].as_str())
                .collect();
            assert!(
                codes.contains(&"cuda-facts-pending"),
                "driver {driver}: {codes:?}"
            );
            assert!(s["needs"].get("driver_native").is_none(), "{s}");
        }
        assert_ne!(doc["verdict"], "compatible", "driver {driver}: {}", run.stdout);
    }
    // The human answer names the pending facts.
    let run = gpuenv(&[
        "query",
        "--db",
        dir,
        "--torch",
        "2.15.0",
        "--cuda",
        "13.5",
        "--gpu",
        "H100 SXM",
        "--driver",
        "620.70.06",
    ]);
    assert!(
        run.stdout.contains("min_driver_linux, sass pending"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

// --- NGC releases: the tags of nvidia/pytorch on a registry ---------------------------

/// How [`TagRegistry`] behaves beyond the honest registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagFault {
    /// The token flow and the pagination of the distribution spec, as nvcr.io serves them.
    None,
    /// The token service refuses anonymous requests (401).
    TokenRefused,
    /// Every page links to the first page again.
    LinkLoop,
    /// Every page links to one more, for ever.
    Endless,
    /// The next page is on another host, where the token must not go.
    ForeignLink,
}

/// A loopback registry serving the tags of `nvidia/pytorch` as a real one does: a request
/// without the access token gets `401` with a `WWW-Authenticate: Bearer realm=...` challenge,
/// the realm (`/token` on the same server) hands an anonymous token for the scope asked,
/// and `GET /v2/nvidia/pytorch/tags/list` answers pages of at most [`TAGS_PER_PAGE`] tags in
/// lexical order, from after `last`, each but the last with a `Link: <...>; rel="next"`
/// header (distribution/distribution's `registry/handlers/tags.go`). Requests are kept,
/// with their `Authorization` header, for the tests to look at.
struct TagRegistry {
    host: String,
    requests: Requests,
}

/// Each request's target and `Authorization` header, in the order they came.
type Requests = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// The page size the registry caps `n` at: small, so that a list of ~50 tags takes pages.
const TAGS_PER_PAGE: usize = 7;

const NGC_TOKEN: &str = "anonymous-pull-token-nvidia-pytorch";

fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl TagRegistry {
    fn start(tags: Vec<String>, fault: TagFault) -> TagRegistry {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let requests: Requests = Default::default();
        let mut sorted = tags;
        sorted.sort();
        let (me, log) = (host.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (tags, me, log) = (sorted.clone(), me.clone(), log.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut request = String::new();
                    if reader.read_line(&mut request).is_err() {
                        return;
                    }
                    let mut auth = None;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) <= 2 {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':') {
                            if k.eq_ignore_ascii_case("authorization") {
                                auth = Some(v.trim().to_string());
                            }
                        }
                    }
                    let target = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    log.lock().unwrap().push((target.clone(), auth.clone()));
                    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                    let params: Vec<(String, String)> = query
                        .split('&')
                        .filter_map(|kv| kv.split_once('='))
                        .map(|(k, v)| (k.to_string(), percent_decoded(v)))
                        .collect();
                    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                    let respond = |status: &str, extra: &str, body: &str| {
                        let mut out = &stream;
                        let _ = write!(
                            out,
                            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                             Docker-Distribution-Api-Version: registry/2.0\r\n{extra}\
                             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    };
                    if path == "/token" {
                        let anonymous = auth.is_none();
                        let scoped = param("scope").as_deref() == Some("repository:nvidia/pytorch:pull")
                            && param("service").as_deref() == Some("registry.test");
                        if fault == TagFault::TokenRefused || !anonymous || !scoped {
                            return respond("401 Unauthorized", "", r#"{"details":"no"}"#);
                        }
                        return respond(
                            "200 OK",
                            "",
                            &format!(r#"{{"token":"{NGC_TOKEN}","expires_in":300}}"#),
                        );
                    }
                    if auth.as_deref() != Some(&format!("Bearer {NGC_TOKEN}")) {
                        return respond(
                            "401 Unauthorized",
                            &format!(
                                "WWW-Authenticate: Bearer realm=\"http://{me}/token\",service=\"registry.test\",\
                                 scope=\"repository:nvidia/pytorch:pull\"\r\n"
                            ),
                            r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
                        );
                    }
                    if path != "/v2/nvidia/pytorch/tags/list" {
                        return respond("404 Not Found", "", r#"{"errors":[{"code":"NAME_UNKNOWN"}]}"#);
                    }
                    let n = param("n")
                        .and_then(|n| n.parse::<usize>().ok())
                        .unwrap_or(TAGS_PER_PAGE)
                        .min(TAGS_PER_PAGE);
                    let after: Vec<&String> = match param("last") {
                        Some(last) => tags.iter().filter(|t| **t > last).collect(),
                        None => tags.iter().collect(),
                    };
                    let page: Vec<&String> = after.iter().take(n).copied().collect();
                    let link = match (page.last(), after.len() > n, fault) {
                        (Some(last), true, TagFault::ForeignLink) => format!(
                            "Link: <http://127.0.0.2:9/v2/nvidia/pytorch/tags/list?last={last}&n={n}>; rel=\"next\"\r\n"
                        ),
                        (_, _, TagFault::Endless) => {
                            let last = param("last").unwrap_or_default();
                            format!(
                                "Link: </v2/nvidia/pytorch/tags/list?last={last}z&n={n}>; rel=\"next\"\r\n"
                            )
                        }
                        (Some(_), true, TagFault::LinkLoop) => {
                            format!("Link: </v2/nvidia/pytorch/tags/list?n={n}>; rel=\"next\"\r\n")
                        }
                        (Some(last), true, _) => {
                            format!(
                                "Link: </v2/nvidia/pytorch/tags/list?last={last}&n={n}>; rel=\"next\"\r\n"
                            )
                        }
                        _ => String::new(),
                    };
                    let body = serde_json::json!({"name": "nvidia/pytorch", "tags": page}).to_string();
                    respond("200 OK", &link, &body)
                });
            }
        });
        TagRegistry { host, requests }
    }

    fn requests(&self) -> Vec<(String, Option<String>)> {
        self.requests.lock().unwrap().clone()
    }
}

/// The tags nvcr.io would list for the shipped NGC records, with three releases compat-db
/// lacks (24.12 and 25.04, gaps, and 26.10, newer), one older than its oldest (22.12),
/// and tags that are not a release's main image.
fn ngc_tags() -> Vec<String> {
    let mut tags: Vec<String> = std::fs::read_dir(crate::support::root().join("compat-db/image"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let release = name.strip_prefix("ngc-")?.strip_suffix(".toml")?.to_string();
            Some(format!("{release}-py3"))
        })
        .collect();
    assert!(tags.len() > 30, "the shipped NGC records: {tags:?}");
    for extra in [
        "24.12-py3",
        "25.04-py3",
        "26.10-py3",
        "22.12-py3",
        "25.01-py3-igpu",
        "24.12-igpu",
        "19.01-py2",
        "17.12",
    ] {
        tags.push(extra.to_string());
    }
    tags
}

/// `db refresh` against the replayed PyPI, the PyTorch index left out, with `sources`
/// naming the one other upstream a test reads (and leaving the rest out).
fn refresh_with(pypi: &Replay, sources: &[&str], out: &std::path::Path, json: bool) -> crate::support::Run {
    let mut args = vec!["db", "refresh", "--pypi", &pypi.url, "--no-pytorch-index"];
    args.extend_from_slice(sources);
    args.extend(["--out", out.to_str().unwrap()]);
    if json {
        args.push("--json");
    }
    gpuenv(&args)
}

fn refresh_ngc(out: &std::path::Path, pypi: &Replay, host: &str, json: bool) -> crate::support::Run {
    refresh_with(pypi, &["--no-driver-index", "--ngc-registry", host], out, json)
}

/// The tags are read anonymously through the token flow and every page of the list; the
/// releases compat-db lacks from its oldest NGC record on are proposed, each a draft that
/// names the tag and leaves out what the tag does not say; the other tags are counted.
#[test]
fn refresh_proposes_the_ngc_releases_the_registry_lists_and_compat_db_lacks() {
    let pypi = replay();
    let tags = ngc_tags();
    let registry = TagRegistry::start(tags.clone(), TagFault::None);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_ngc(&out, &pypi, &registry.host, false);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        files_under(&out),
        [
            "image/ngc-24.12.toml",
            "image/ngc-25.04.toml",
            "image/ngc-26.10.toml"
        ]
    );
    let releases = tags.len() - 4;
    for line in [
        "NGC registry: read".to_string(),
        format!("  NGC PyTorch releases listed: {releases} (YY.MM-py3 tags); other tags ignored: 4"),
        "  NGC releases older than compat-db's oldest without a record: 1 (not proposed)".to_string(),
        "new records proposed: 3 (torch 0, CUDA 0, cuDNN 0, NGC releases 3)".to_string(),
        "  + image/ngc-26.10.toml (pending: torch, cuda, cudnn, nccl, python, min_driver, forward_compat)"
            .to_string(),
    ] {
        assert!(run.stdout.contains(&line), "no `{line}` in:\n{}", run.stdout);
    }

    // Anonymous: the first request carries nothing, the token request no credentials, and
    // every page after the challenge the token; the list took several pages.
    let requests = registry.requests();
    assert_eq!(requests[0].1, None, "{requests:?}");
    let token: Vec<_> = requests.iter().filter(|(p, _)| p.starts_with("/token")).collect();
    assert_eq!(token.len(), 1, "{requests:?}");
    assert_eq!(token[0].1, None, "no credentials to the realm: {requests:?}");
    let pages: Vec<_> = requests
        .iter()
        .filter(|(p, a)| p.starts_with("/v2/nvidia/pytorch/tags/list") && a.is_some())
        .collect();
    assert_eq!(pages.len(), tags.len().div_ceil(TAGS_PER_PAGE), "{requests:?}");
    assert!(
        pages
            .iter()
            .all(|(_, a)| a.as_deref() == Some(&format!("Bearer {NGC_TOKEN}"))),
        "{requests:?}"
    );
    assert!(
        pages[1].0.contains("last="),
        "the next page follows the Link: {requests:?}"
    );

    // The draft says the tag exists; the facts the tag does not give are left out.
    let p = std::fs::read_to_string(out.join("image/ngc-26.10.toml")).unwrap();
    assert!(p.contains("tag = \"26.10-py3\""), "{p}");
    assert!(p.contains("family = \"ngc\""), "{p}");
    assert!(p.contains("repository = \"nvcr.io/nvidia/pytorch\""), "{p}");
    assert!(
        p.contains(&format!("http://{}/v2/nvidia/pytorch/tags/list", registry.host)),
        "{p}"
    );
    for key in [
        "torch",
        "cuda",
        "cudnn",
        "nccl",
        "python",
        "min_driver",
        "forward_compat",
    ] {
        assert!(!p.contains(&format!("\n{key} =")), "{key} is not guessed: {p}");
    }

    // Moved into compat-db as it is, the draft is refused for what it lacks; with its torch
    // and CUDA filled in from the release notes, it is a record that lints clean.
    let db = trimmed_db(&[]);
    let dir = db.path().to_str().unwrap();
    let target = db.path().join("image/ngc-26.10.toml");
    std::fs::copy(out.join("image/ngc-26.10.toml"), &target).unwrap();
    let lint = gpuenv(&["db", "lint", "--db", dir]);
    assert_ne!(lint.code, 0, "{}", lint.stdout);
    assert!(
        lint.stdout.contains("ngc-26.10"),
        "{}{}",
        lint.stdout,
        lint.stderr
    );
    let filled = p.replacen(
        "family = ",
        "torch = \"2.10.0a0+b558c986e8\"\ncuda = \"13.0\"\nfamily = ",
        1,
    );
    std::fs::write(&target, filled).unwrap();
    let lint = gpuenv(&["db", "lint", "--db", dir]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);

    // --json: the same proposals, and the counts.
    let out = scratch.path().join("json");
    let run = refresh_ngc(&out, &pypi, &registry.host, true);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ngc_registry"], "read");
    assert_eq!(doc["ngc_releases"], releases);
    assert_eq!(doc["ngc_tags_ignored"], 4);
    assert_eq!(doc["ngc_older_unrecorded"], 1);
    assert_eq!(doc["driver_index"], "not asked");
    let p = &doc["proposals"][0];
    assert_eq!(p["file"], "image/ngc-24.12.toml");
    assert_eq!(p["kind"], "image");
    assert_eq!(p["new"], true);
    assert_eq!(p["pending"].as_array().unwrap().len(), 7);
}

/// A registry that cannot be read (its token service refuses, its pages link in a loop)
/// costs the NGC proposals, said in the summary, and nothing else: PyPI's part stands.
#[test]
fn an_ngc_registry_that_cannot_be_read_is_reported_not_fatal() {
    let pypi = replay();
    for (fault, says) in [
        (TagFault::TokenRefused, "refused access to `a token` (HTTP 401)"),
        (TagFault::LinkLoop, "its pages link back to a page already read"),
        (
            TagFault::Endless,
            "it goes on past 100 pages; gpuenv reads no more",
        ),
        (TagFault::ForeignLink, "is on another host"),
    ] {
        let registry = TagRegistry::start(ngc_tags(), fault);
        let scratch = tempfile::tempdir().unwrap();
        let out = scratch.path().join("proposals");
        let run = refresh_ngc(&out, &pypi, &registry.host, true);
        assert_eq!(run.code, 0, "{fault:?}: {}", run.stderr);
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let status = doc["ngc_registry"].as_str().unwrap();
        assert!(status.starts_with("not read ("), "{fault:?}: {status}");
        assert!(status.contains(says), "{fault:?}: {status}");
        assert!(status.ends_with("no NGC release proposed"), "{status}");
        assert_eq!(doc["proposals"].as_array().unwrap().len(), 0);
        assert!(!out.exists());
    }
    // Nothing listens: the same, within the deadline.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let scratch = tempfile::tempdir().unwrap();
    let run = refresh_ngc(
        &scratch.path().join("p"),
        &pypi,
        &format!("127.0.0.1:{port}"),
        true,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        doc["ngc_registry"].as_str().unwrap().starts_with("not read ("),
        "{}",
        run.stdout
    );
}

#[test]
fn a_bad_ngc_registry_is_bad_input() {
    for bad in ["https://nvcr.io", "nvcr.io/nvidia", "", "a b"] {
        let run = gpuenv(&["db", "refresh", "--ngc-registry", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("invalid --ngc-registry"),
            "{bad}: {}",
            run.stderr
        );
    }
}

// --- driver releases: NVIDIA's download index ------------------------------------------

fn refresh_drivers(
    db: &std::path::Path,
    out: &std::path::Path,
    pypi: &Replay,
    index: &Replay,
    json: bool,
) -> crate::support::Run {
    let url = format!("{}XFree86/Linux-x86_64/", index.url);
    let db = db.to_str().unwrap();
    refresh_with(pypi, &["--db", db, "--no-ngc", "--driver-index", &url], out, json)
}

/// The index's folders, by branch, against the driver records: a branch without a record
/// (R625) is proposed with its first and latest releases; recorded branches whose latest
/// release is behind the index (R580), or absent (R535, R620), get a changed record; those
/// that agree (R470, R590) none; branches older than the oldest record are counted.
#[test]
fn refresh_proposes_driver_branches_and_releases_from_the_index() {
    let pypi = replay();
    let index = Replay::start(fixture("driver-index"), None);
    let db = trimmed_db(&[]);
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("proposals");
    let run = refresh_drivers(db.path(), &out, &pypi, &index, false);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        files_under(&out),
        [
            "driver/r535.toml",
            "driver/r580.toml",
            "driver/r620.toml",
            "driver/r625.toml"
        ]
    );
    for line in [
        "NVIDIA driver index: read",
        "  driver releases listed: 14 in 8 branches (latest.txt: 580.159.04); other entries ignored: 7",
        "  driver branches older than compat-db's oldest without a record: 2 (not proposed)",
        "new records proposed: 1 (torch 0, CUDA 0, cuDNN 0, driver branches 1)",
        "  + driver/r625.toml",
        "changed records proposed: 3",
        "  ~ driver/r580.toml",
        "      latest_version: curated 580.142 / upstream 580.159.04",
        "      latest_version: curated - / upstream 535.288.01",
        "      first_version: curated - / upstream 620.36.04",
    ] {
        assert!(run.stdout.contains(line), "no `{line}` in:\n{}", run.stdout);
    }

    let p = std::fs::read_to_string(out.join("driver/r625.toml")).unwrap();
    assert!(p.contains("type = \"unknown\""), "{p}");
    assert!(p.contains("first_version = \"625.18\""), "{p}");
    assert!(p.contains("latest_version = \"625.18\""), "{p}");
    assert!(
        p.contains("\"architectures\""),
        "copied architectures are unverified: {p}"
    );
    assert!(!p.contains("end_of_life"), "{p}");
    let p = std::fs::read_to_string(out.join("driver/r580.toml")).unwrap();
    assert!(p.contains("latest_version = \"580.159.04\""), "{p}");
    assert!(
        p.contains("first_version = \"580.65.06\""),
        "the curated facts stay: {p}"
    );
    assert!(p.contains("end_of_life = \"2028-06\""), "{p}");

    // The proposals are records: moved in, the database lints clean, and has nothing more
    // to propose from the same index.
    for f in files_under(&out) {
        std::fs::copy(out.join(&f), db.path().join(&f)).unwrap();
    }
    let lint = gpuenv(&["db", "lint", "--db", db.path().to_str().unwrap()]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);
    let again = scratch.path().join("again");
    let run = refresh_drivers(db.path(), &again, &pypi, &index, true);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["proposals"].as_array().unwrap().len(), 0, "{}", run.stdout);
    assert_eq!(doc["driver_index"], "read");
    assert_eq!(doc["driver_releases"], 14);
    assert_eq!(doc["driver_branches"], 8);
    assert_eq!(doc["driver_entries_ignored"], 7);
    assert_eq!(doc["driver_latest"], "580.159.04");
    assert_eq!(doc["driver_older_unrecorded"], 2);
    assert!(!again.exists());
}

/// An index that is missing is reported in the summary, as an unreachable PyTorch index is.
#[test]
fn a_driver_index_that_cannot_be_read_is_reported_not_fatal() {
    let pypi = replay();
    let empty = tempfile::tempdir().unwrap();
    let index = Replay::start(empty.path().to_path_buf(), None);
    let scratch = tempfile::tempdir().unwrap();
    let run = refresh_drivers(
        &crate::support::root().join("compat-db"),
        &scratch.path().join("p"),
        &pypi,
        &index,
        true,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let status = doc["driver_index"].as_str().unwrap();
    assert!(status.starts_with("not read ("), "{status}");
    assert!(status.contains("no index (404)"), "{status}");
}
