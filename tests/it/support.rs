//! Running the real `gpuenv` binary, and making ready what the container and bench tests
//! need of the machine ([`services`], or one [`tool`] alone).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A path below `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

/// What a run of `gpuenv` gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `gpuenv ARGS` in `dir` with a clean `GPUENV_*` environment.
pub fn gpuenv_in(dir: &Path, args: &[&str]) -> Run {
    gpuenv_env(dir, args, &[])
}

/// Runs `gpuenv ARGS` in `dir` with a clean `GPUENV_*` environment plus `env`.
pub fn gpuenv_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = gpuenv_command(dir, args, env);
    run(&mut cmd)
}

/// The command [`gpuenv_env`] runs, for callers that change it further.
pub fn gpuenv_command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    command(Path::new(env!("CARGO_BIN_EXE_gpuenv")), dir, args, env)
}

/// [`gpuenv_command`] with another copy of the binary.
pub fn command(bin: &Path, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(args).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("GPUENV_") {
            cmd.env_remove(k);
        }
    }
    // Colour only where a test asks for it: piped output is what every test reads.
    cmd.env_remove("CLICOLOR_FORCE").env_remove("NO_COLOR");
    cmd.envs(env.iter().copied());
    cmd
}

/// Runs a command and collects what it printed.
pub fn run(cmd: &mut Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run gpuenv");
    Run {
        code: status.code().expect("gpuenv exits with a code"),
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

/// A run that must end within a deadline and a memory bound: what it printed, how long it
/// took and the most memory it held.
pub struct BoundedRun {
    /// Exit code; 128 + the signal when killed (137 when the deadline's kill ended it).
    pub run: Run,
    /// Wall time from start to exit.
    pub elapsed: std::time::Duration,
    /// The child's peak resident set (`ru_maxrss`, KiB), measured by the kernel.
    pub max_rss_kib: u64,
}

/// Runs `cmd`, killing it when it runs past `kill_after`, and measures its wall time and
/// its own peak memory (`wait4`'s rusage of that one child, so parallel tests do not mix).
// The child is reaped by `wait4` below, which also gives its rusage; std's `wait` cannot.
#[allow(clippy::zombie_processes)]
pub fn run_bounded(cmd: &mut Command, kill_after: std::time::Duration) -> BoundedRun {
    use std::io::Read;
    let start = std::time::Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout")));
    let err = read(Box::new(child.stderr.take().expect("stderr")));
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data the kernel fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut killed = false;
    loop {
        // SAFETY: `pid` is our own child, reaped only here (std's `wait` is never called).
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if !killed && start.elapsed() > kill_after {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let elapsed = start.elapsed();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    BoundedRun {
        run: Run {
            code,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        },
        elapsed,
        max_rss_kib: usage.ru_maxrss as u64,
    }
}

/// The memory bound every hostile-input run must stay under.
pub const MEMORY_BOUND_KIB: u64 = 256 * 1024;

/// Asserts that a bounded run ended by itself within `deadline` (plus a small slack for
/// start-up and clean-up), with one of the exit codes allowed, under [`MEMORY_BOUND_KIB`].
pub fn assert_bounded(b: &BoundedRun, deadline: std::time::Duration, codes: &[i32], what: &str) {
    let slack = std::time::Duration::from_secs(3);
    assert!(
        b.elapsed <= deadline + slack,
        "{what}: took {:?}, deadline {deadline:?} (+{slack:?}); stderr: {}",
        b.elapsed,
        b.run.stderr
    );
    assert!(
        codes.contains(&b.run.code),
        "{what}: exit {} (expected one of {codes:?}); stderr: {}",
        b.run.code,
        b.run.stderr
    );
    assert!(b.max_rss_kib > 0, "{what}: no memory figure was measured");
    assert!(
        b.max_rss_kib <= MEMORY_BOUND_KIB,
        "{what}: peak memory {} MiB over the bound of {} MiB",
        b.max_rss_kib / 1024,
        MEMORY_BOUND_KIB / 1024
    );
}

/// Runs `gpuenv ARGS` from the repository root.
pub fn gpuenv(args: &[&str]) -> Run {
    gpuenv_in(&root(), args)
}

/// Runs `gpuenv query ARGS --json --all`, which must answer (exit 0 or 1): the exit code
/// and the document.
pub fn query(args: &[&str]) -> (i32, serde_json::Value) {
    let mut a = vec!["query"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--json", "--all"]);
    let run = gpuenv(&a);
    assert!(
        run.code == 0 || run.code == 1,
        "{args:?}: exit {}: {}",
        run.code,
        run.stderr
    );
    (run.code, json(&run))
}

/// Parses stdout as JSON.
pub fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", run.stdout))
}

/// A loopback HTTP server replaying recorded upstream responses from a directory:
/// `GET /a/b/` serves `DIR/a/b/index`, `GET /a/b` serves `DIR/a/b`, anything else is 404.
/// Requests whose path contains `fail_on` get `500 Internal Server Error` instead. A
/// `Range` request gets its bytes (206), as PyPI's CDN serves them.
pub struct Replay {
    pub url: String,
}

impl Replay {
    pub fn start(dir: PathBuf, fail_on: Option<&'static str>) -> Replay {
        Replay::serve(dir, fail_on, true)
    }

    /// A replay that answers every `Range` request with the whole file (200), as some
    /// mirrors do.
    pub fn ignoring_ranges(dir: PathBuf) -> Replay {
        Replay::serve(dir, None, false)
    }

    fn serve(dir: PathBuf, fail_on: Option<&'static str>, ranges: bool) -> Replay {
        use std::io::{BufRead, BufReader, Write};
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut request = String::new();
                    if reader.read_line(&mut request).is_err() {
                        return;
                    }
                    let mut line = String::new();
                    let mut range = None;
                    while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                        if let Some((k, v)) = line.split_once(':') {
                            if k.eq_ignore_ascii_case("range") {
                                range = Some(v.trim().to_string());
                            }
                        }
                        line.clear();
                    }
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let mut file = dir.clone();
                    for seg in path
                        .split('?')
                        .next()
                        .unwrap()
                        .split('/')
                        .filter(|s| !s.is_empty() && *s != "..")
                    {
                        file.push(seg);
                    }
                    if path.ends_with('/') {
                        file.push("index");
                    }
                    let (status, body) = if fail_on.is_some_and(|f| path.contains(f)) {
                        ("500 Internal Server Error", b"boom".to_vec())
                    } else {
                        match std::fs::read(&file) {
                            Ok(b) => ("200 OK", b),
                            Err(_) => ("404 Not Found", b"not found".to_vec()),
                        }
                    };
                    // Ranges as PyPI's CDN serves them (RFC 9110): `bytes=A-B`, `bytes=A-`,
                    // `bytes=-N`, answered 206 with the span and the whole length.
                    let mut extra = String::new();
                    let (status, body) = match (
                        status,
                        range
                            .as_deref()
                            .filter(|_| ranges)
                            .and_then(|r| byte_range(r, body.len())),
                    ) {
                        ("200 OK", Some((a, b))) => {
                            extra = format!("Content-Range: bytes {a}-{b}/{}\r\n", body.len());
                            ("206 Partial Content", body[a..=b].to_vec())
                        }
                        other => (other.0, body),
                    };
                    let mut out = stream;
                    let _ = write!(
                        out,
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = out.write_all(&body);
                });
            }
        });
        Replay {
            url: format!("http://{addr}/"),
        }
    }
}

/// The first and last byte a `Range: bytes=...` header asks of a body of `len` bytes.
fn byte_range(header: &str, len: usize) -> Option<(usize, usize)> {
    let spec = header.strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let last = len.checked_sub(1)?;
    match (a.trim(), b.trim()) {
        ("", n) => Some((len.saturating_sub(n.parse().ok()?), last)),
        (a, "") => Some((a.parse().ok().filter(|a| *a <= last)?, last)),
        (a, b) => {
            let a: usize = a.parse().ok()?;
            Some((a, b.parse::<usize>().ok()?.min(last))).filter(|(a, b)| a <= b)
        }
    }
}

/// A copy of the shipped database without the named files, in a temporary directory.
pub fn trimmed_db(remove: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&root().join("compat-db"), tmp.path());
    for r in remove {
        std::fs::remove_file(tmp.path().join(r)).unwrap_or_else(|e| panic!("remove {r}: {e}"));
    }
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A recorded host changed by `edit`, written to a temporary directory: the variants of a
/// fixture a test needs, with the change written out in the test itself.
pub fn derived_host(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let text = std::fs::read_to_string(fixture(&format!("hosts/{name}/host.json"))).unwrap();
    let mut record: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut record);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("host.json"),
        serde_json::to_string_pretty(&record).unwrap(),
    )
    .unwrap();
    dir
}

/// A command's recorded output in a host record: exit 0 and `stdout`.
pub fn ran(stdout: &str) -> serde_json::Value {
    serde_json::json!({"outcome": "exited", "status": 0, "stdout": stdout, "stderr": ""})
}

/// The loopback registry the container tests push to and pull from: `GPUENV_TEST_REGISTRY`
/// (`HOST:PORT`), else 127.0.0.1 on `GPUENV_TEST_REGISTRY_PORT` (default 5555), the port
/// `scripts/test-services` starts it on.
pub fn registry_address() -> String {
    if let Ok(addr) = std::env::var("GPUENV_TEST_REGISTRY") {
        return addr;
    }
    let port = std::env::var("GPUENV_TEST_REGISTRY_PORT").unwrap_or_else(|_| "5555".into());
    format!("127.0.0.1:{port}")
}

/// Makes ready what the container tests need of this machine: the Docker daemon (checked),
/// Debian's busybox-static and docker-registry, hadolint, and the loopback registry started,
/// by running `scripts/test-services` (idempotent, quick once done) the first time a test of
/// this process asks. Every test that uses the daemon, the registry, busybox or hadolint
/// calls it first (through `daemon` and `containers::hadolint`), so that `cargo test` needs
/// nothing run before it.
///
/// When the script cannot make them ready (no daemon, no root for apt, no network), every
/// such test panics with the script's own account of what failed and how to fix it: they
/// never pass or skip without what they test.
pub fn services() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let port = registry_address()
            .rsplit(':')
            .next()
            .unwrap_or("5555")
            .to_string();
        provision(
            &root().join("scripts/test-services"),
            &[],
            &[("GPUENV_TEST_REGISTRY_PORT", &port)],
        )
    });
    if let Err(why) = ready {
        panic!("{why}");
    }
}

/// One tool of `scripts/test-services`, made ready alone: `fio` (the bench's disk tests),
/// `hugepages` (free pages in the hugetlb pool, for fio's buffer in the disk comparison),
/// `busybox` (a stand-in image that needs the daemon but none of the services
/// [`services`] starts). Installed with apt-get (or, for huge pages, reserved) when
/// missing, once per test process; like [`services`], a test that needs it panics with the script's account when it cannot
/// be had, and never passes or skips without it.
pub fn tool(name: &'static str) {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static READY: Mutex<BTreeMap<&'static str, Result<(), String>>> = Mutex::new(BTreeMap::new());
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    let result = ready
        .entry(name)
        .or_insert_with(|| provision(&root().join("scripts/test-services"), &[name], &[]));
    if let Err(why) = result {
        panic!("{why}");
    }
}

/// Runs the provisioning `script` with `args` and `env`, holding an exclusive lock on
/// `target/test-services/lock` meanwhile: nextest runs each test in a process of its own,
/// and two processes installing or starting the registry at once would trip over each
/// other. What it printed is passed on to stderr; a failure comes back as a message for
/// people: its own lines (the reason and the fix) and how it ended.
pub fn provision(script: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let lock = root().join("target/test-services/lock");
    let _held = lock_exclusive(&lock)?;
    let out = Command::new(script)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "these tests need what `{}` makes ready, but it could not be run: {e}",
                script.display()
            )
        })?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprint!("{said}");
    if out.status.success() {
        return Ok(());
    }
    let said = said.trim_end();
    let said = if said.is_empty() {
        "  (it printed nothing)".to_string()
    } else {
        said.lines()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let again = std::iter::once(
        script
            .strip_prefix(root())
            .unwrap_or(script)
            .display()
            .to_string(),
    )
    .chain(args.iter().map(|a| a.to_string()))
    .collect::<Vec<_>>()
    .join(" ");
    Err(format!(
        "these tests need what `{}` could not make ready (it {}):\n{said}\n\
         These tests do not skip: fix what it says, then run them again (`{again}` alone repeats the check).",
        script.display(),
        exit_described(out.status),
    ))
}

/// How a process ended, in words: `exited with status 1`, `was killed by signal 9`.
pub fn exit_described(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended without an exit status".to_string(),
    }
}

/// `path` opened and locked for this process alone (`flock`), until the file is dropped.
fn lock_exclusive(path: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let failed = |e: std::io::Error| format!("cannot lock {}: {e}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(failed)?;
    loop {
        // SAFETY: flock on a descriptor this function owns; the lock goes with the file.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(file);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(failed(e));
        }
    }
}
