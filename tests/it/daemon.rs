//! What the container tests need of the real Docker daemon: a connection, stand-in base
//! images, the loopback registry, and a registry that fails on purpose.
//!
//! The daemon reaches no public registry and starts with no images, so the tests make their
//! own: a root filesystem of Debian's static busybox plus the stand-in scripts of
//! `tests/fixtures/standin/`, imported under the real base names a generated Dockerfile
//! names (see that folder's README). A stand-in carries the label `io.gpuenv.test-standin`;
//! an image of that name without it is a real one and is never replaced. Everything a test
//! creates is removed when its guard drops. Tests that touch images take [`lock`] first.
//!
//! Each way in here ([`engine`], [`registry`], the root filesystems) first has
//! [`services`] make the daemon, busybox, the registry and hadolint ready, so that
//! `cargo test` needs nothing run before it. Nothing is skipped: where they cannot be made
//! ready the tests fail with `scripts/test-services`' reason and fix.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use gpuenv::docker::{Bollard, Engine, Reference};

use crate::support::{fixture, provision, registry_address, root, services};

/// The label that marks a stand-in.
pub const STANDIN_LABEL: &str = "io.gpuenv.test-standin";

static DAEMON: Mutex<()> = Mutex::new(());

/// Serializes the tests that create, build or remove images, within one process (`cargo
/// test`); `.config/nextest.toml` keeps them apart under nextest's process per test.
pub fn lock() -> MutexGuard<'static, ()> {
    DAEMON.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connection to the daemon, or a failure that says how to get one.
pub fn engine() -> Bollard {
    services();
    Bollard::connect(Duration::from_secs(15)).unwrap_or_else(|e| {
        // `scripts/test-services` found the daemon through the docker CLI, which may follow
        // a context of its own; gpuenv goes by DOCKER_HOST or the default socket.
        panic!(
            "cannot connect to the Docker daemon: {e}\n\
             `scripts/test-services` reached one with the docker CLI; gpuenv reaches it through \
             DOCKER_HOST, else /var/run/docker.sock: set DOCKER_HOST to the daemon the CLI uses \
             (`docker context inspect` shows it)"
        )
    })
}

/// The static busybox the stand-in images run: `GPUENV_BUSYBOX`, else Debian's at
/// `/bin/busybox`, as `scripts/test-services` checks.
fn busybox_path() -> PathBuf {
    std::env::var_os("GPUENV_BUSYBOX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/bin/busybox"))
}

fn busybox() -> Vec<u8> {
    services();
    let path = busybox_path();
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the static busybox at {} that `scripts/test-services` found: {e}",
            path.display()
        )
    })
}

fn applets() -> Vec<String> {
    let path = busybox_path();
    let out = std::process::Command::new(&path)
        .arg("--list")
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{} --list`: {e}", path.display()));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox")
        .map(String::from)
        .collect()
}

fn script(name: &str) -> Vec<u8> {
    std::fs::read(fixture(&format!("standin/{name}"))).unwrap()
}

struct Tar(tar::Builder<Vec<u8>>);

impl Tar {
    fn new() -> Tar {
        Tar(tar::Builder::new(Vec::new()))
    }
    fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h
    }
    fn dir(&mut self, path: &str, mode: u32) {
        let mut h = Tar::header(tar::EntryType::Directory, mode, 0);
        self.0.append_data(&mut h, path, std::io::empty()).unwrap();
    }
    fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        let mut h = Tar::header(tar::EntryType::Regular, mode, data.len() as u64);
        self.0.append_data(&mut h, path, data).unwrap();
    }
    fn link(&mut self, path: &str, target: &str) {
        let mut h = Tar::header(tar::EntryType::Symlink, 0o777, 0);
        self.0.append_link(&mut h, path, target).unwrap();
    }
    fn finish(self) -> Vec<u8> {
        self.0.into_inner().unwrap()
    }
}

/// A root filesystem that runs what a generated Dockerfile runs: busybox as `/bin/sh` and
/// its applets, the stand-in `python`, `pip`, `useradd` and `apt-get`, and a log anyone
/// may append to.
pub fn os_rootfs() -> Vec<u8> {
    let mut t = Tar::new();
    for d in [
        "bin",
        "etc",
        "root",
        "usr",
        "usr/bin",
        "usr/sbin",
        "usr/local",
        "usr/local/bin",
        "opt",
        "opt/standin",
        "var",
        "var/lib",
        "var/lib/apt",
        "var/lib/apt/lists",
        "home",
    ] {
        t.dir(d, 0o755);
    }
    t.dir("tmp", 0o1777);
    t.file("bin/busybox", 0o755, &busybox());
    for a in applets() {
        t.link(&format!("bin/{a}"), "busybox");
    }
    t.file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n");
    t.file("etc/group", 0o644, b"root:x:0:\n");
    t.file("opt/standin/python", 0o755, &script("python"));
    t.file("opt/standin/pip", 0o755, &script("pip"));
    t.file("opt/standin/log", 0o666, b"");
    t.file("usr/sbin/useradd", 0o755, &script("useradd"));
    t.file("usr/bin/apt-get", 0o755, &script("apt-get"));
    t.finish()
}

/// The stand-in of `ghcr.io/astral-sh/uv`: only `/uv` and `/uvx`, as the real one.
pub fn uv_rootfs() -> Vec<u8> {
    let mut t = Tar::new();
    t.file("uv", 0o755, &script("uv"));
    t.file("uvx", 0o755, &script("uv"));
    t.finish()
}

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Stand-in images under real names, removed again on drop.
pub struct StandIns<'a> {
    engine: &'a Bollard,
    names: Vec<String>,
}

impl<'a> StandIns<'a> {
    /// Imports a stand-in for each name (the `nvidia/cuda` ones with the environment the
    /// real ones set, a deliberately wrong `NVIDIA_REQUIRE_CUDA` among it).
    pub fn create(engine: &'a Bollard, names: &[String]) -> StandIns<'a> {
        let mut made = StandIns {
            engine,
            names: Vec::new(),
        };
        for name in names {
            if made.names.contains(name) {
                continue;
            }
            if let Some(existing) = engine.inspect(name).unwrap() {
                assert!(
                    existing.labels.contains_key(STANDIN_LABEL),
                    "refusing to replace the real image `{name}` with a stand-in: remove it or run the tests elsewhere"
                );
            }
            let reference = Reference::parse(name).unwrap();
            let mut changes = vec![format!("LABEL {STANDIN_LABEL}=1")];
            let rootfs = if name.starts_with("ghcr.io/astral-sh/uv:") {
                changes.push("CMD [\"/uv\"]".into());
                uv_rootfs()
            } else {
                if name.starts_with("nvidia/cuda:") {
                    changes.push(format!(
                        "ENV PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:{PATH}"
                    ));
                    changes.push("ENV NVIDIA_VISIBLE_DEVICES=all".into());
                    changes.push("ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility".into());
                    changes.push("ENV NVIDIA_REQUIRE_CUDA=cuda>=99.0".into());
                } else {
                    changes.push(format!("ENV PATH={PATH}"));
                }
                changes.push("CMD [\"/bin/sh\"]".into());
                os_rootfs()
            };
            engine
                .import(rootfs, &reference, &changes)
                .unwrap_or_else(|e| panic!("import the stand-in `{name}`: {e}"));
            made.names.push(name.clone());
        }
        made
    }
}

impl Drop for StandIns<'_> {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = self.engine.remove(n, true);
        }
    }
}

/// Images a test made (built, pulled, pushed), removed on drop.
pub struct Cleanup<'a> {
    pub engine: &'a Bollard,
    pub names: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for n in self.names.iter().rev() {
            let _ = self.engine.remove(n, true);
        }
    }
}

/// Manifests a test pushed to the loopback registry, deleted from it on drop (the registry's
/// config enables deletes; unreferenced layers wait for its garbage collection).
pub struct Pushed {
    registry: String,
    items: Vec<(String, String)>,
}

impl Pushed {
    /// Nothing pushed yet to `registry`.
    pub fn new(registry: &str) -> Pushed {
        Pushed {
            registry: registry.to_string(),
            items: Vec::new(),
        }
    }

    /// Records `registry/repository:tag` pushed with `digest`.
    pub fn add(&mut self, name: &str, digest: &str) {
        let r = Reference::parse(name).unwrap();
        self.items.push((r.repository, digest.to_string()));
    }
}

impl Drop for Pushed {
    fn drop(&mut self) {
        for (repo, digest) in &self.items {
            let Ok(mut s) = TcpStream::connect(&self.registry) else {
                continue;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = write!(
                s,
                "DELETE /v2/{repo}/manifests/{digest} HTTP/1.0\r\nHost: {}\r\n\r\n",
                self.registry
            );
            let mut answer = String::new();
            let _ = BufReader::new(s).read_line(&mut answer);
        }
    }
}

/// The loopback registry's address ([`registry_address`]), made ready by [`services`], and
/// started again with `scripts/test-services registry` when it went down since.
pub fn registry() -> String {
    services();
    let addr = registry_address();
    if registry_up(&addr) {
        return addr;
    }
    let port = addr.rsplit(':').next().unwrap_or("5555").to_string();
    let script = root().join("scripts/test-services");
    let start = provision(&script, &["registry"], &[("GPUENV_TEST_REGISTRY_PORT", &port)]);
    if let Err(why) = start {
        panic!("the test registry at {addr} stopped answering, and starting it again failed: {why}");
    }
    assert!(
        registry_up(&addr),
        "the test registry at {addr} does not answer `GET /v2/` with 200, although `scripts/test-services registry` \
         succeeded: another program may hold the port; stop it, or set GPUENV_TEST_REGISTRY_PORT to a free one"
    );
    addr
}

fn registry_up(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(s, "GET /v2/ HTTP/1.0\r\nHost: {addr}\r\n\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).is_ok() && line.contains(" 200 ")
}

/// How [`FaultyRegistry`] misbehaves; everything it does not fail it passes to the real
/// registry.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Every request without `Authorization: Basic base64(user:password)` gets 401.
    RequireAuth { user: String, password: String },
    /// The token flow of the distribution spec, for identity tokens: every request
    /// without `Authorization: Bearer <access token>` gets a 401 Bearer challenge whose
    /// realm is this front's `/token`, which hands out the access token for a POST of
    /// `grant_type=refresh_token&refresh_token=<refresh_token>` (OAuth2) and 401 else.
    RequireBearer { refresh_token: String },
    /// Manifests are unknown: 404.
    ManifestNotFound,
    /// The manifest fetched by digest, after the tag resolved, fails with 500.
    ManifestByDigest500,
    /// Layers are unknown: 404 in the middle of the pull.
    Blob404,
    /// Layers need credentials the pull does not have: 401 in the middle of the pull.
    Blob401,
}

/// A loopback registry front that fails as told and forwards the rest to the real one.
pub struct FaultyRegistry {
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

fn respond(mut s: &TcpStream, status: &str, extra: &str, body: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nDocker-Distribution-Api-Version: registry/2.0\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

impl FaultyRegistry {
    /// Starts it on a free loopback port, in front of `upstream`.
    pub fn start(fault: Fault, upstream: String) -> FaultyRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let me = addr.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let fault = fault.clone();
                let upstream = upstream.clone();
                let me = me.clone();
                std::thread::spawn(move || serve(stream, &fault, &upstream, &me));
            }
        });
        FaultyRegistry { addr }
    }
}

/// The access token [`Fault::RequireBearer`] hands out.
const ACCESS_TOKEN: &str = "gpuenv-test-access-token";

fn serve(stream: TcpStream, fault: &Fault, upstream: &str, me: &str) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    // The daemon tries TLS first; a plain-HTTP registry refuses it by closing, and the
    // daemon falls back to HTTP (127.0.0.0/8 is an insecure registry by default).
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(1) if first[0] == 0x16 => return,
        Ok(1) => {}
        _ => return,
    }
    let mut reader = BufReader::new(&stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let end = line == "\r\n";
        head.push_str(&line);
        if end || head.len() > 64 * 1024 {
            break;
        }
    }
    let mut lines = head.lines();
    let request = lines.next().unwrap_or_default().to_string();
    let mut parts = request.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let auth = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("authorization")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let unauthorized = || {
        respond(
            &stream,
            "401 Unauthorized",
            "WWW-Authenticate: Basic realm=\"gpuenv-test\"\r\n",
            r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
        )
    };
    if let Fault::RequireBearer { refresh_token } = fault {
        if path.starts_with("/token") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            let mut body = vec![0u8; length.min(64 * 1024)];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let form = String::from_utf8_lossy(&body).to_string();
            let fields: Vec<(&str, &str)> = form.split('&').filter_map(|kv| kv.split_once('=')).collect();
            let has = |k: &str, v: &str| fields.contains(&(k, v));
            if method == "POST" && has("grant_type", "refresh_token") && has("refresh_token", refresh_token) {
                return respond(
                    &stream,
                    "200 OK",
                    "",
                    &format!(r#"{{"access_token":"{ACCESS_TOKEN}","expires_in":300}}"#),
                );
            }
            return respond(
                &stream,
                "401 Unauthorized",
                "",
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"bad grant"}]}"#,
            );
        }
        if auth != format!("Bearer {ACCESS_TOKEN}") {
            return respond(
                &stream,
                "401 Unauthorized",
                &format!("WWW-Authenticate: Bearer realm=\"http://{me}/token\",service=\"gpuenv-test\"\r\n"),
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            );
        }
    }
    match fault {
        Fault::RequireAuth { user, password }
            if auth != format!("Basic {}", base64(format!("{user}:{password}").as_bytes())) =>
        {
            return unauthorized();
        }
        Fault::ManifestNotFound if path.contains("/manifests/") => {
            return respond(
                &stream,
                "404 Not Found",
                "",
                r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
            );
        }
        Fault::ManifestByDigest500 if method == "GET" && path.contains("/manifests/sha256:") => {
            return respond(&stream, "500 Internal Server Error", "", "");
        }
        Fault::Blob404 if path.contains("/blobs/") => {
            return respond(
                &stream,
                "404 Not Found",
                "",
                r#"{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}"#,
            );
        }
        Fault::Blob401 if path.contains("/blobs/") => return unauthorized(),
        _ => {}
    }
    // Forward: the same request (no body: pulls only GET and HEAD), one per connection.
    let Ok(mut up) = TcpStream::connect(upstream) else {
        return respond(&stream, "502 Bad Gateway", "", "");
    };
    let mut forwarded = format!("{request}\r\n");
    for l in head.lines().skip(1) {
        if l.is_empty() || l.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        forwarded.push_str(l);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("Connection: close\r\n\r\n");
    if up.write_all(forwarded.as_bytes()).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = up.read_to_end(&mut answer);
    let _ = (&stream).write_all(&answer);
}

/// The file at `path` in an image, as text.
pub fn read_text(engine: &Bollard, image: &str, path: &str) -> String {
    let data = engine
        .read_file(image, path, 1 << 20)
        .unwrap_or_else(|e| panic!("read {path} from {image}: {e}"));
    String::from_utf8(data).unwrap()
}
