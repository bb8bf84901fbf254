//! Hostile registries, token services, upstreams and credential helpers (issue 12): every
//! run against a server that hangs, trickles, floods, redirects, or serves oversized or
//! lying answers ends within its deadline plus a small slack, with exit 3 (or 2 for bad
//! input), under the memory bound, measured here ([`assert_bounded`]); credentials go only
//! where they belong; and no secret appears in any output.
//!
//! The servers are written here ([`super::hostile`]); the pulls go through the real daemon
//! (under [`daemon::lock`], with `gpuenv-net-` names).

use std::path::Path;
use std::time::Duration;

use gpuenv::docker::Engine as _;

use super::daemon;
use super::hostile::{Conn, Request, Server, TestImage};
use crate::support::{BoundedRun, assert_bounded, gpuenv_command, root, run_bounded};

/// The `--timeout` of the runs that end on their total.
const T: u64 = 4;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A unique suffix for names this test makes.
fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// An environment without the machine's Docker config: HOME and DOCKER_CONFIG in `dir`.
fn home(dir: &Path) -> Vec<(String, String)> {
    let d = dir.to_str().unwrap().to_string();
    vec![("HOME".into(), d.clone()), ("DOCKER_CONFIG".into(), d)]
}

fn run(args: &[&str], env: &[(String, String)], deadline: u64) -> BoundedRun {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut cmd = gpuenv_command(&root(), args, &env);
    run_bounded(&mut cmd, secs(deadline + 30))
}

/// `gpuenv verify docker://REG/gpuenv-net-test/hostile:1 --timeout T` with `env`.
fn verify(reg: &str, env: &[(String, String)]) -> BoundedRun {
    let image = format!("docker://{reg}/gpuenv-net-test/hostile:1");
    run(&["verify", &image, "--timeout", &T.to_string()], env, T)
}

/// Asserts a run ended in time, under the memory bound, with exit 3 and a message that
/// holds every one of `says`.
fn assert_env_failure(b: &BoundedRun, deadline: u64, says: &[&str], what: &str) {
    assert_bounded(b, secs(deadline), &[3], what);
    for s in says {
        assert!(
            b.run.stderr.contains(s),
            "{what}: expected `{s}` in: {}",
            b.run.stderr
        );
    }
}

fn is_manifest(req: &Request) -> bool {
    req.path.contains("/manifests/")
}

fn is_blob(req: &Request, digest: &str) -> bool {
    req.path.ends_with(&format!("/blobs/{digest}"))
}

/// A registry serving `image`, except where `fault` answers first (it returns `true`).
fn registry(
    image: TestImage,
    fault: impl Fn(&TestImage, &Request, &mut Conn) -> bool + Send + Sync + 'static,
) -> Server {
    Server::start(move |req, conn| {
        if !fault(&image, req, conn) {
            image.serve(req, conn);
        }
    })
}

#[test]
fn a_registry_that_accepts_and_never_answers_is_given_up_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(|_, c| c.hang());
    let b = verify(&s.addr, &home(dir.path()));
    assert_env_failure(
        &b,
        T,
        &[
            &format!("the registry at {}", s.addr),
            "the manifest of gpuenv-net-test/hostile:1",
            "within the 4 s of --timeout",
        ],
        "hang",
    );
}

#[test]
fn a_silent_registry_is_given_up_at_the_idle_limit_long_before_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(|_, c| c.hang());
    let image = format!("docker://{}/gpuenv-net-test/idle:1", s.addr);
    let b = run(&["verify", &image, "--timeout", "600"], &home(dir.path()), 30);
    assert_env_failure(
        &b,
        30,
        &[&format!(
            "the registry at {} sent nothing for 30 s while gpuenv read",
            s.addr
        )],
        "idle",
    );
    assert!(b.elapsed >= secs(29), "{:?}", b.elapsed);
}

#[test]
fn trickled_headers_and_bodies_end_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    // Headers, one byte every 100 ms, forever.
    let s = Server::start(|_, c| {
        if c.write(b"HTTP/1.1 200 OK\r\nX-Slow: ") {
            c.trickle(&[b'a'; 100_000], Duration::from_millis(100));
        }
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &["the manifest of", "did not finish sending"],
        "trickled headers",
    );

    // The manifest's body, one byte every 100 ms: never idle, still bounded.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_manifest(req) {
            return false;
        }
        let len = img.manifest.len().to_string();
        c.head("200 OK", &[("Content-Length", &len)]);
        c.trickle(&img.manifest, Duration::from_millis(100));
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &["did not finish sending `the manifest of"],
        "trickled manifest",
    );

    // A layer that trickles.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_blob(req, &img.layer_digest) {
            return false;
        }
        let len = img.layer.len().to_string();
        c.head("200 OK", &[("Content-Length", &len)]);
        c.trickle(&img.layer, Duration::from_millis(100));
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(&b, T, &["did not finish sending `blob sha256:"], "trickled layer");
}

#[test]
fn endless_and_oversized_documents_are_refused_while_reading() {
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    // A manifest that never ends (chunked): refused at 4 MiB, not after.
    let s = registry(TestImage::new(&unique()), |_, req, c| {
        if !is_manifest(req) {
            return false;
        }
        c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
        c.endless_chunks(&[b' '; 65536], 64 << 30);
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &["sent more than the 4 MiB gpuenv accepts for a manifest"],
        "endless manifest",
    );
    assert!(
        s.sent() < 64 << 20,
        "gpuenv stopped reading: {} bytes sent",
        s.sent()
    );

    // A manifest announced larger than the cap: nothing of it is read.
    let s = registry(TestImage::new(&unique()), |_, req, c| {
        if !is_manifest(req) {
            return false;
        }
        c.head("200 OK", &[("Content-Length", "5368709120")]);
        c.endless_chunks(b"x", 1 << 20);
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &["announced 5368709120 bytes for `the manifest of gpuenv-net-test/hostile:1`, more than the 4 MiB"],
        "huge manifest",
    );

    // A `Content-Length` that lies: the body ends early.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_manifest(req) {
            return false;
        }
        c.head("200 OK", &[("Content-Length", "100000")]);
        c.write(&img.manifest);
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(&b, T, &["the connection to the registry at"], "short manifest");

    // A token service that floods its answer.
    let s = registry(TestImage::new(&unique()), |_, req, c| {
        let addr = req.header("host").unwrap_or_default().to_string();
        if req.path.starts_with("/token") {
            c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
            c.write(b"8\r\n{\"token\"\r\n");
            c.endless_chunks(&[b' '; 65536], 64 << 30);
            return true;
        }
        if req.header("authorization").is_none() {
            let challenge = format!("Bearer realm=\"http://{addr}/token\",service=\"gpuenv-net\"");
            c.respond("401 Unauthorized", &[("WWW-Authenticate", &challenge)], b"{}");
            return true;
        }
        false
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &[
            &format!("the token service at {}", s.addr),
            "sent more than the 1 MiB gpuenv accepts for a token service's answer",
        ],
        "token flood",
    );
}

#[test]
fn a_blob_may_not_grow_past_its_declared_size() {
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    // Announced longer than the manifest declares: refused before a byte.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_blob(req, &img.layer_digest) {
            return false;
        }
        let body = [img.layer.clone(), vec![0u8; 100]].concat();
        c.respond("200 OK", &[], &body);
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &["announced", "not the", "bytes its descriptor declares"],
        "long blob",
    );

    // Sent longer, without a length: stopped at the declared size.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_blob(req, &img.layer_digest) {
            return false;
        }
        c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
        c.endless_chunks(&img.layer, 64 << 30);
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &[
            "sent more than the",
            "bytes its descriptor declares (reading `blob sha256:",
        ],
        "endless blob",
    );
    assert!(
        s.sent() < 64 << 20,
        "gpuenv stopped reading: {} bytes sent",
        s.sent()
    );
}

#[test]
fn redirects_are_bounded_and_never_carry_credentials_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    // To itself, again and again.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_blob(req, &img.layer_digest) {
            return false;
        }
        c.respond("302 Found", &[("Location", &req.path)], b"");
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(&b, T, &["redirected gpuenv away", "loop"], "redirect loop");

    // Down an endless chain.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if is_blob(req, &img.layer_digest) || req.path.starts_with("/hop/") {
            let n: u64 = req
                .path
                .rsplit('/')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            c.respond("302 Found", &[("Location", &format!("/hop/{}", n + 1))], b"");
            return true;
        }
        false
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(&b, T, &["stopped after 10 redirects"], "redirect chain");
    assert!(s.requests().len() < 30, "{} requests", s.requests().len());

    // To plain HTTP on a name that only looks local: not followed at all.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_blob(req, &img.layer_digest) {
            return false;
        }
        c.respond(
            "307 Temporary Redirect",
            &[("Location", "http://localhost.attacker.example:1/blob")],
            b"",
        );
        true
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &[
            "to plain HTTP on `localhost.attacker.example:1`, which is neither loopback nor listed as insecure",
        ],
        "redirect to plain HTTP",
    );

    // To another host, with credentials: the blob is read there, the credentials stay.
    let image = TestImage::new(&unique());
    let layer_digest = image.layer_digest.clone();
    let cdn = {
        let blob = image.layer.clone();
        Server::start(move |_, c| c.respond("200 OK", &[], &blob))
    };
    let cdn_addr = cdn.addr.clone();
    let s = registry(image, move |img, req, c| {
        let expected = format!("Basic {}", b64(&format!("gpuenv-net:{PASSWORD}")));
        if req.header("authorization") != Some(expected.as_str()) {
            c.respond(
                "401 Unauthorized",
                &[("WWW-Authenticate", "Basic realm=\"gpuenv-net\"")],
                b"{}",
            );
            return true;
        }
        if is_blob(req, &img.layer_digest) {
            let to = format!("http://{cdn_addr}/cdn/{}", img.layer_digest);
            c.respond("307 Temporary Redirect", &[("Location", &to)], b"");
            return true;
        }
        false
    });
    let mut with_creds = env.clone();
    with_creds.push(("GPUENV_REGISTRY_USER".into(), "gpuenv-net".into()));
    with_creds.push(("GPUENV_REGISTRY_PASSWORD".into(), PASSWORD.into()));
    let b = verify(&s.addr, &with_creds);
    assert_bounded(&b, secs(T), &[0, 1], "redirect to another host");
    assert_no_secret(&b, &[PASSWORD]);
    let asked = s.requests();
    assert!(
        asked[0].header("authorization").is_none(),
        "nothing is sent before the registry asks: {:?}",
        asked[0]
    );
    assert!(asked.iter().skip(1).all(|r| r.header("authorization").is_some()));
    let at_cdn = cdn.requests();
    assert_eq!(at_cdn.len(), 1, "{at_cdn:?}");
    assert!(at_cdn[0].path.ends_with(&layer_digest));
    assert!(
        at_cdn[0].header("authorization").is_none(),
        "credentials followed a redirect to another host: {:?}",
        at_cdn[0]
    );
}

const PASSWORD: &str = "Net-S3cret-Passw0rd-4242";
const IDENTITY: &str = "Net-Identity-T0ken-4242";

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// No secret, nor its base64 forms, in what a run printed.
fn assert_no_secret(b: &BoundedRun, secrets: &[&str]) {
    for secret in secrets {
        let forms = [
            secret.to_string(),
            b64(secret),
            b64(&format!("gpuenv-net:{secret}")),
            b64(&format!("<token>:{secret}")),
        ];
        for text in [&b.run.stdout, &b.run.stderr] {
            for f in &forms {
                assert!(!text.contains(f.as_str()), "a secret was printed ({f}):\n{text}");
            }
        }
    }
}

#[test]
fn credentials_go_only_to_the_registry_that_asked_and_its_token_service() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = home(dir.path());
    env.push(("GPUENV_REGISTRY_USER".into(), "gpuenv-net".into()));
    env.push(("GPUENV_REGISTRY_PASSWORD".into(), PASSWORD.into()));

    // A token service over plain HTTP on a host that is not loopback gets nothing: gpuenv
    // refuses before connecting anywhere.
    let s = registry(TestImage::new(&unique()), |_, req, c| {
        if req.header("authorization").is_none() {
            c.respond(
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    "Bearer realm=\"http://localhost.attacker.example:1/token\",service=\"x\"",
                )],
                b"{}",
            );
            return true;
        }
        false
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(
        &b,
        T,
        &[
            "gpuenv sends no credentials there in clear text",
            "localhost.attacker.example:1/token",
        ],
        "plain realm",
    );
    assert_no_secret(&b, &[PASSWORD]);

    // A 401 from where a redirect led is not the registry asking: nothing goes to it or
    // to the realm it names.
    let other = Server::start(|req, c| {
        let me = req.header("host").unwrap_or_default().to_string();
        let challenge = format!("Bearer realm=\"http://{me}/token\",service=\"elsewhere\"");
        if req.path.starts_with("/token") {
            c.respond("200 OK", &[], br#"{"token":"stolen"}"#);
        } else {
            c.respond("401 Unauthorized", &[("WWW-Authenticate", &challenge)], b"{}");
        }
    });
    let other_addr = other.addr.clone();
    let s = registry(TestImage::new(&unique()), move |img, req, c| {
        let expected = format!("Basic {}", b64(&format!("gpuenv-net:{PASSWORD}")));
        if req.header("authorization") != Some(expected.as_str()) {
            c.respond(
                "401 Unauthorized",
                &[("WWW-Authenticate", "Basic realm=\"r\"")],
                b"{}",
            );
            return true;
        }
        if is_blob(req, &img.layer_digest) {
            c.respond(
                "302 Found",
                &[("Location", &format!("http://{other_addr}/elsewhere"))],
                b"",
            );
            return true;
        }
        false
    });
    let b = verify(&s.addr, &env);
    assert_env_failure(&b, T, &["refused access", "HTTP 401"], "401 elsewhere");
    let there = other.requests();
    assert!(!there.is_empty());
    assert!(
        there
            .iter()
            .all(|r| r.header("authorization").is_none() && !r.path.starts_with("/token")),
        "{there:?}"
    );
    assert_no_secret(&b, &[PASSWORD]);

    // A token service that redirects elsewhere: the token request, whose POST body holds
    // the identity token, is not re-sent there.
    let thief = Server::start(|_, c| c.respond("200 OK", &[], br#"{"token":"t"}"#));
    let thief_addr = thief.addr.clone();
    let s = registry(TestImage::new(&unique()), move |_, req, c| {
        let me = req.header("host").unwrap_or_default().to_string();
        if req.path.starts_with("/token") {
            let to = format!("http://{thief_addr}/token");
            c.respond("307 Temporary Redirect", &[("Location", &to)], b"");
            return true;
        }
        if req.header("authorization").is_none() {
            let challenge = format!("Bearer realm=\"http://{me}/token\",service=\"x\"");
            c.respond("401 Unauthorized", &[("WWW-Authenticate", &challenge)], b"{}");
            return true;
        }
        false
    });
    let config = serde_json::json!({"auths": {s.addr.clone(): {"identitytoken": IDENTITY}}});
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    let b = verify(&s.addr, &home(dir.path()));
    assert_env_failure(&b, T, &["to another host"], "token redirect");
    assert!(thief.requests().is_empty(), "{:?}", thief.requests());
    assert!(
        s.requests()
            .iter()
            .any(|r| r.path.starts_with("/token") && String::from_utf8_lossy(&r.body).contains(IDENTITY)),
        "the identity token went to the realm the registry named"
    );
    assert_no_secret(&b, &[IDENTITY]);
}

/// A registry that echoes whatever credentials it gets into every place a message might
/// quote: the challenge, the redirect target, the error body, the token. After the token,
/// it fails as `mode` says.
fn echo_server(mode: &'static str) -> Server {
    Server::start(move |req, c| {
        let me = req.header("host").unwrap_or_default().to_string();
        let auth = req
            .header("authorization")
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&req.body).to_string());
        let challenge = format!("Bearer realm=\"http://{me}/token\",service=\"{auth}\"");
        if req.path.starts_with("/token") {
            match mode {
                "token-hang" => c.hang(),
                "token-flood" => {
                    c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
                    c.endless_chunks(auth.as_bytes(), 64 << 30);
                }
                _ => c.respond("200 OK", &[], format!(r#"{{"token":"{auth}"}}"#).as_bytes()),
            }
            return;
        }
        if !req
            .header("authorization")
            .is_some_and(|a| a.starts_with("Bearer"))
        {
            c.respond(
                "401 Unauthorized",
                &[("WWW-Authenticate", &challenge)],
                auth.as_bytes(),
            );
            return;
        }
        match mode {
            "redirect" => c.respond(
                "302 Found",
                &[(
                    "Location",
                    &format!("/echo/{}/{}", b64(&auth), auth.replace(' ', "_")),
                )],
                b"",
            ),
            "denied" => c.respond("403 Forbidden", &[("X-Echo", &auth)], auth.as_bytes()),
            "huge" => {
                c.head("200 OK", &[("Content-Length", "99999999999"), ("X-Echo", &auth)]);
            }
            _ => c.hang(),
        }
    })
}

#[test]
fn no_secret_is_printed_on_any_error_path() {
    let dir = tempfile::tempdir().unwrap();
    let base = home(dir.path());
    let mut by_env = base.clone();
    by_env.push(("GPUENV_REGISTRY_USER".into(), "gpuenv-net".into()));
    by_env.push(("GPUENV_REGISTRY_PASSWORD".into(), PASSWORD.into()));

    for mode in ["token-hang", "token-flood", "redirect", "denied", "huge", "hang"] {
        let s = echo_server(mode);
        let b = verify(&s.addr, &by_env);
        assert_bounded(&b, secs(T), &[3], mode);
        assert_no_secret(&b, &[PASSWORD]);
    }

    // A Docker config with an `auths` password and an identity token (refresh token).
    for mode in ["token-hang", "token-flood", "redirect", "denied", "huge"] {
        let s = echo_server(mode);
        let cfg = serde_json::json!({"auths": {
            s.addr.clone(): {"auth": b64(&format!("gpuenv-net:{PASSWORD}")), "identitytoken": IDENTITY},
        }});
        std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
        let b = verify(&s.addr, &base);
        assert_bounded(&b, secs(T), &[3], mode);
        assert_no_secret(&b, &[PASSWORD, IDENTITY]);
        let asked = s.requests();
        assert!(
            asked
                .iter()
                .any(|r| r.path.starts_with("/token") && String::from_utf8_lossy(&r.body).contains(IDENTITY)),
            "{mode}: the identity token went to the token service: {asked:?}"
        );
    }
    std::fs::remove_file(dir.path().join("config.json")).unwrap();

    // A credential helper that fails saying the secret, or floods it.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    helper(
        &bin,
        "net-says",
        &format!("echo '{PASSWORD}' >&2; echo '{PASSWORD}'; exit 1"),
    );
    helper(&bin, "net-floods", &format!("yes '{PASSWORD}'"));
    helper(
        &bin,
        "net-lies",
        &format!("echo '{{\"Username\": \"{PASSWORD}\"'"),
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let s = registry(TestImage::new(&unique()), |_, _, _| false);
    for name in ["net-says", "net-floods", "net-lies"] {
        std::fs::write(
            dir.path().join("config.json"),
            serde_json::json!({"credsStore": name}).to_string(),
        )
        .unwrap();
        let mut env = base.clone();
        env.push(("PATH".into(), path.clone()));
        let b = verify(&s.addr, &env);
        assert_env_failure(&b, T, &[&format!("docker-credential-{name}")], name);
        assert_no_secret(&b, &[PASSWORD]);
    }
}

/// A credential helper `docker-credential-<name>` in `dir` running `body`.
fn helper(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(&path, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn credential_helpers_that_flood_or_trickle_are_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    helper(&bin, "net-flood", "yes '{\"Username\": \"x\"}'");
    helper(&bin, "net-trickle", "while true; do printf '{'; sleep 0.1; done");
    let s = registry(TestImage::new(&unique()), |_, _, _| false);
    let mut env = home(dir.path());
    env.push(("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())));
    for (name, says) in [
        ("net-flood", "printed more than 1 MiB"),
        ("net-trickle", "did not answer within 4 s"),
    ] {
        std::fs::write(
            dir.path().join("config.json"),
            serde_json::json!({"credsStore": name}).to_string(),
        )
        .unwrap();
        let b = verify(&s.addr, &env);
        assert_env_failure(&b, T, &[&format!("docker-credential-{name}"), says], name);
    }
    assert!(
        s.requests().is_empty(),
        "the registry is not asked without the credentials"
    );
}

#[test]
fn localhost_lookalikes_get_https_and_bad_network_flags_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    // Not localhost: HTTPS, to a name that does not resolve here; never plain HTTP.
    let b = run(
        &[
            "verify",
            "docker://localhost.attacker.example:5000/gpuenv-net-test/x:1",
            "--timeout",
            "4",
        ],
        &env,
        T,
    );
    assert_env_failure(&b, T, &["localhost.attacker.example:5000"], "lookalike");
    for args in [
        vec!["verify", "docker://127.0.0.1:1/x:1", "--timeout", "0"],
        vec![
            "verify",
            "docker://127.0.0.1:1/x:1",
            "--insecure-registry",
            "http://reg.lan/",
        ],
        vec!["pull", "127.0.0.1:1/x:1", "--timeout", "0"],
        vec!["db", "refresh", "--timeout", "0"],
    ] {
        let b = run(&args, &env, 5);
        assert_bounded(&b, secs(5), &[2], &format!("{args:?}"));
        assert!(b.run.stderr.contains("expected"), "{args:?}: {}", b.run.stderr);
    }
}

/// `gpuenv db refresh` against `server` with `--timeout T`, writing into a fresh folder.
fn refresh(server: &Server, out: &Path) -> BoundedRun {
    let url = format!("http://{}/", server.addr);
    run(
        &[
            "db",
            "refresh",
            "--pypi",
            &url,
            "--no-pytorch-index",
            "--timeout",
            &T.to_string(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
        T,
    )
}

#[test]
fn db_refresh_gives_up_on_hostile_upstreams_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Server, &str)> = vec![
        (
            "hang",
            Server::start(|_, c| c.hang()),
            "within the 4 s of --timeout",
        ),
        (
            "trickle",
            Server::start(|_, c| {
                c.head("200 OK", &[("Content-Length", "1000000")]);
                c.trickle(&[b' '; 1_000_000], Duration::from_millis(50));
            }),
            "did not finish sending",
        ),
        (
            "endless",
            Server::start(|_, c| {
                c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
                c.endless_chunks(&[b' '; 65536], 64 << 30);
            }),
            "sent more than the 32 MiB gpuenv accepts for an upstream document",
        ),
        (
            "huge",
            Server::start(|_, c| {
                c.head("200 OK", &[("Content-Length", "8589934592")]);
                c.hang();
            }),
            "announced 8589934592 bytes",
        ),
    ];
    for (what, server, says) in &cases {
        let out = dir.path().join(format!("out-{what}"));
        let b = refresh(server, &out);
        let url = format!(
            "cannot fetch `http://{}/simple/torch/`: upstream at {}",
            server.addr, server.addr
        );
        assert_env_failure(&b, T, &[&url, says], what);
        let written = std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0);
        assert_eq!(written, 0, "{what}: nothing written");
    }
}

// --- pull, through the daemon ---------------------------------------------------------

/// `gpuenv pull IMAGE --timeout SECONDS`.
fn pull(image: &str, timeout: u64, env: &[(String, String)]) -> BoundedRun {
    run(&["pull", image, "--timeout", &timeout.to_string()], env, timeout)
}

/// Waits until `server` has sent nothing more for a second (the daemon's download was
/// cancelled), at most `within`; returns whether it went quiet.
fn goes_quiet(server: &Server, within: Duration) -> bool {
    let start = std::time::Instant::now();
    let mut last = server.sent();
    while start.elapsed() < within {
        std::thread::sleep(Duration::from_secs(1));
        let now = server.sent();
        if now == last {
            return true;
        }
        last = now;
    }
    false
}

#[test]
fn a_pull_that_gets_more_than_the_manifest_declares_is_stopped_and_cancelled() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_closed = std::sync::Arc::clone(&closed);
    let s = registry(TestImage::new(&unique()), move |img, req, c| {
        if !is_blob(req, &img.layer_digest) || req.method == "HEAD" {
            return false;
        }
        // The declared layer, then endless bytes after it, without a length.
        c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
        let mut body = img.layer.clone();
        body.resize(64 * 1024, 0);
        c.endless_chunks(&body, 8 << 30);
        // Only a write that failed ends that: the daemon closed the connection.
        closed.store(true, std::sync::atomic::Ordering::SeqCst);
        true
    });
    let name = format!("{}/gpuenv-net-test/oversized:{}", s.addr, unique());
    let _cleanup = daemon::Cleanup {
        engine: &engine,
        names: vec![name.clone()],
    };
    let b = pull(&name, 60, &env);
    assert_env_failure(
        &b,
        60,
        &[
            "more than the",
            "bytes the manifest declares",
            "the daemon's pull was cancelled",
        ],
        "oversized layer",
    );
    assert!(engine.inspect(&name).unwrap().is_none(), "nothing tagged");
    assert!(
        goes_quiet(&s, secs(15)) && seen_closed.load(std::sync::atomic::Ordering::SeqCst),
        "the daemon kept the download open after gpuenv stopped: {} bytes sent",
        s.sent()
    );
    assert!(s.sent() < 2 << 30, "{} bytes sent", s.sent());
}

#[test]
fn a_pull_that_stalls_or_trickles_ends_at_its_deadline() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let dir = tempfile::tempdir().unwrap();
    let env = home(dir.path());
    // The layer trickles, a byte every 200 ms: never idle, bounded by --timeout.
    let s = registry(TestImage::new(&unique()), |img, req, c| {
        if !is_blob(req, &img.layer_digest) || req.method == "HEAD" {
            return false;
        }
        let len = img.layer.len().to_string();
        c.head("200 OK", &[("Content-Length", &len)]);
        c.trickle(&img.layer, Duration::from_millis(200));
        true
    });
    let name = format!("{}/gpuenv-net-test/slow:{}", s.addr, unique());
    let _cleanup = daemon::Cleanup {
        engine: &engine,
        names: vec![name.clone()],
    };
    let b = pull(&name, 8, &env);
    assert_env_failure(
        &b,
        8,
        &[
            &format!("stopped pulling `{name}`"),
            "within the 8 s of --timeout",
        ],
        "trickled layer",
    );
    assert!(engine.inspect(&name).unwrap().is_none(), "nothing tagged");

    // The manifest never ends: gpuenv's own read of it stops at the cap, before the
    // daemon is asked to pull.
    let s = registry(TestImage::new(&unique()), |_, req, c| {
        if !is_manifest(req) || req.method == "HEAD" {
            return false;
        }
        c.head("200 OK", &[("Transfer-Encoding", "chunked")]);
        c.endless_chunks(&[b' '; 65536], 64 << 30);
        true
    });
    let name = format!("{}/gpuenv-net-test/endless:{}", s.addr, unique());
    let b = pull(&name, 8, &env);
    assert_env_failure(
        &b,
        8,
        &["sent more than the 4 MiB gpuenv accepts for a manifest"],
        "endless manifest",
    );

    // The registry hangs on the daemon's manifest request after gpuenv read it: the
    // daemon is waited for at most --timeout.
    let gpuenv_read = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&gpuenv_read);
    let s = registry(TestImage::new(&unique()), move |_, req, c| {
        if !is_manifest(req) {
            return false;
        }
        let gpuenv = req.header("user-agent").is_some_and(|a| a.starts_with("gpuenv/"));
        if gpuenv {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            return false;
        }
        c.hang();
        true
    });
    let name = format!("{}/gpuenv-net-test/hang:{}", s.addr, unique());
    let b = pull(&name, 6, &env);
    assert_env_failure(
        &b,
        6,
        &[&format!("stopped pulling `{name}`")],
        "daemon waits on a hung registry",
    );
    assert!(gpuenv_read.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn no_secret_is_printed_by_pull_on_any_error_path() {
    let _lock = daemon::lock();
    let engine = daemon::engine();
    let dir = tempfile::tempdir().unwrap();
    let mut env = home(dir.path());
    env.push(("GPUENV_REGISTRY_USER".into(), "gpuenv-net".into()));
    env.push(("GPUENV_REGISTRY_PASSWORD".into(), PASSWORD.into()));
    for mode in ["token-hang", "token-flood", "redirect", "denied", "huge", "hang"] {
        let s = echo_server(mode);
        let name = format!("{}/gpuenv-net-test/echo:{}", s.addr, unique());
        let _cleanup = daemon::Cleanup {
            engine: &engine,
            names: vec![name.clone()],
        };
        let b = pull(&name, T, &env);
        assert_bounded(&b, secs(T), &[3], &format!("pull, {mode}"));
        assert_no_secret(&b, &[PASSWORD]);
    }
}
