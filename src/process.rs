//! Running another program with a deadline.
//!
//! Owns: starting a program, handing it its standard input, reading what it prints on
//! threads (so a chatty child never blocks on a full pipe while we wait), and killing it
//! at the deadline, or as soon as it prints more than its output cap; and a program left
//! running in the background ([`Background`]) that is killed at its deadline, when asked,
//! or when its handle is dropped. Must not: look programs up anywhere but the OS's own
//! way, interpret what they print, or print.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

/// How long output is waited for once a program was killed (five times this once it
/// exited), when something it started still holds its pipes.
pub const GRACE: Duration = Duration::from_millis(200);

/// The most bytes kept of each of a program's outputs.
pub const MAX_OUTPUT: u64 = 16 << 20;

/// How a program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Its exit status; `None` when it was killed (by us at the deadline, or a signal).
    pub status: Option<i32>,
    /// Killed at the deadline.
    pub timed_out: bool,
    /// Killed because it printed more than its output cap (on either output).
    pub overflowed: bool,
    /// Standard output, at most [`MAX_OUTPUT`] bytes.
    pub stdout: Vec<u8>,
    /// Standard error, at most [`MAX_OUTPUT`] bytes.
    pub stderr: Vec<u8>,
}

/// Runs `program` with `args`, writing `stdin` to it (or giving it none), and kills it
/// after `timeout`. Errors are those of starting it (`NotFound` when there is no such
/// program).
pub fn run(
    program: impl AsRef<OsStr>,
    args: &[&str],
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> std::io::Result<Ran> {
    run_capped(program, args, stdin, timeout, MAX_OUTPUT)
}

/// [`run`], killing the program as soon as either of its outputs passes `cap` bytes (what
/// was read up to the cap is kept): a program whose answer is small (a credential helper)
/// is not let fill memory, nor waited for until the deadline while it floods.
pub fn run_capped(
    program: impl AsRef<OsStr>,
    args: &[&str],
    stdin: Option<&[u8]>,
    timeout: Duration,
    cap: u64,
) -> std::io::Result<Ran> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(mut pipe), Some(bytes)) = (child.stdin.take(), stdin) {
        let bytes = bytes.to_vec();
        // A program that does not read its input must not hold us up: written on a
        // thread, and the pipe closed when done so the program sees the end.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    let overflow = Arc::new(AtomicBool::new(false));
    let out = read_pipe(
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
        cap,
        &overflow,
    );
    let err = read_pipe(
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
        cap,
        &overflow,
    );
    let start = Instant::now();
    let (status, timed_out) = loop {
        match child.try_wait() {
            Ok(Some(s)) => break (s.code(), false),
            Ok(None) if overflow.load(Ordering::SeqCst) => {
                let _ = child.kill();
                let _ = child.wait();
                break (None, false);
            }
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break (None, true);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break (None, false),
        }
    };
    let deadline = Instant::now() + if timed_out { GRACE } else { GRACE * 5 };
    let (stdout, stderr) = (out.collect(deadline), err.collect(deadline));
    Ok(Ran {
        status,
        timed_out,
        overflowed: overflow.load(Ordering::SeqCst),
        stdout,
        stderr,
    })
}

/// One output of a program, read on a thread of its own.
struct Pipe {
    /// Hears once when the pipe closed (or the cap was reached).
    closed: mpsc::Receiver<()>,
    /// What was read so far.
    kept: Arc<Mutex<Vec<u8>>>,
}

impl Pipe {
    /// What was read, once the pipe closed or `deadline` passed, whichever comes first.
    fn collect(self, deadline: Instant) -> Vec<u8> {
        let _ = self
            .closed
            .recv_timeout(deadline.saturating_duration_since(Instant::now()));
        std::mem::take(&mut *self.kept.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A copy of what was read so far.
    fn so_far(&self) -> Vec<u8> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Reads `pipe` on a thread up to `cap` bytes, setting `overflow` past it.
///
/// A pipe stays open as long as any process holds it, and a program killed at the deadline
/// (a shell script) may leave a child that does: its output is then waited for only
/// [`GRACE`] more, and the thread is left to end when that child does. What was read so
/// far is kept where the caller can take it, pipe closed or not.
fn read_pipe(pipe: Option<Box<dyn Read + Send>>, cap: u64, overflow: &Arc<AtomicBool>) -> Pipe {
    let (tx, rx) = mpsc::channel::<()>();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&kept);
    let overflow = Arc::clone(overflow);
    std::thread::spawn(move || {
        if let Some(p) = pipe {
            let mut p = p.take(cap.saturating_add(1));
            let mut chunk = [0u8; 8192];
            loop {
                match p.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut kept = sink.lock().unwrap_or_else(PoisonError::into_inner);
                        kept.extend_from_slice(&chunk[..n]);
                        if kept.len() as u64 > cap {
                            kept.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
                            overflow.store(true, Ordering::SeqCst);
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        let _ = tx.send(());
    });
    Pipe { closed: rx, kept }
}

/// A program left running while the caller does other work (a server another machine
/// talks to): no standard input, its outputs read up to a cap, and killed at its deadline
/// ([`Background::running`] checks), by [`Background::finish`], or when the handle is
/// dropped, so that no path out of the caller leaves it behind.
pub struct Background {
    child: std::process::Child,
    deadline: Instant,
    out: Option<Pipe>,
    err: Option<Pipe>,
    overflow: Arc<AtomicBool>,
    /// How it ended, once it did: the exit status, and whether the deadline killed it.
    ended: Option<(Option<i32>, bool)>,
}

impl Background {
    /// Starts `program` with `args`, to be killed after `timeout` or once either output
    /// passes `cap` bytes. Errors are those of starting it (`NotFound` when there is no
    /// such program).
    pub fn spawn(
        program: impl AsRef<OsStr>,
        args: &[&str],
        timeout: Duration,
        cap: u64,
    ) -> std::io::Result<Background> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let overflow = Arc::new(AtomicBool::new(false));
        let out = read_pipe(
            child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
            cap,
            &overflow,
        );
        let err = read_pipe(
            child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
            cap,
            &overflow,
        );
        Ok(Background {
            child,
            deadline: Instant::now() + timeout,
            out: Some(out),
            err: Some(err),
            overflow,
            ended: None,
        })
    }

    /// Whether it still runs; past its deadline or its output cap it is killed here.
    pub fn running(&mut self) -> bool {
        if self.ended.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(s)) => {
                self.ended = Some((s.code(), false));
                false
            }
            Ok(None) if Instant::now() >= self.deadline => {
                self.kill(true);
                false
            }
            Ok(None) if self.overflow.load(Ordering::SeqCst) => {
                self.kill(false);
                false
            }
            Ok(None) => true,
            Err(_) => {
                self.kill(false);
                false
            }
        }
    }

    fn kill(&mut self, timed_out: bool) {
        let _ = self.child.kill();
        let status = self.child.wait().ok().and_then(|s| s.code());
        self.ended = Some((status, timed_out));
    }

    /// What its standard error holds so far (a server's complaint while it still runs).
    pub fn stderr_so_far(&self) -> Vec<u8> {
        self.err.as_ref().map(Pipe::so_far).unwrap_or_default()
    }

    /// Waits at most `wait` (and never past its deadline) for it to end, kills it if it
    /// has not, and gives what it printed. `timed_out` says the deadline killed it; a
    /// program this call killed before its deadline has neither a status nor `timed_out`.
    pub fn finish(mut self, wait: Duration) -> Ran {
        let until = (Instant::now() + wait).min(self.deadline);
        while self.running() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if self.ended.is_none() {
            self.kill(false);
        }
        let (status, timed_out) = self.ended.unwrap_or((None, false));
        let deadline = Instant::now() + GRACE;
        let stdout = self.out.take().map(|p| p.collect(deadline)).unwrap_or_default();
        let stderr = self.err.take().map(|p| p.collect(deadline)).unwrap_or_default();
        Ran {
            status,
            timed_out,
            overflowed: self.overflow.load(Ordering::SeqCst),
            stdout,
            stderr,
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if self.ended.is_none() {
            self.kill(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_in_output_out() {
        let ran = run(
            "sh",
            &["-c", "read x; echo \"got $x\"; echo oops >&2; exit 3"],
            Some(b"hello\n"),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!((ran.status, ran.timed_out), (Some(3), false));
        assert_eq!(ran.stdout, b"got hello\n");
        assert_eq!(ran.stderr, b"oops\n");
    }

    #[test]
    fn a_program_that_hangs_is_killed_at_the_deadline() {
        let t = Instant::now();
        let ran = run("sleep", &["30"], None, Duration::from_millis(200)).unwrap();
        assert!(ran.timed_out && ran.status.is_none());
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_child_left_holding_the_pipes_does_not_hold_us_up() {
        let t = Instant::now();
        let ran = run(
            "sh",
            &["-c", "echo started; sleep 30"],
            None,
            Duration::from_millis(300),
        )
        .unwrap();
        assert!(ran.timed_out);
        assert_eq!(ran.stdout, b"started\n");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // Exited, but a background child keeps stdout open.
        let t = Instant::now();
        let ran = run(
            "sh",
            &["-c", "sleep 30 & echo done"],
            None,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(ran.status, Some(0));
        assert_eq!(ran.stdout, b"done\n");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_flood_is_cut_at_the_cap_and_the_program_killed() {
        let t = Instant::now();
        let ran = run_capped("sh", &["-c", "yes flood"], None, Duration::from_secs(30), 4096).unwrap();
        // Killed, or ended by the pipe closing under it (SIGPIPE: 141 through the shell).
        assert!(
            ran.overflowed && !ran.timed_out && ran.status != Some(0),
            "{:?}",
            ran.status
        );
        assert_eq!(ran.stdout.len(), 4096);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let ran = run_capped("sh", &["-c", "echo small"], None, Duration::from_secs(30), 4096).unwrap();
        assert!(!ran.overflowed);
        assert_eq!(ran.stdout, b"small\n");
    }

    #[test]
    fn a_background_program_is_killed_when_dropped_or_at_its_deadline() {
        let mut bg = Background::spawn(
            "sh",
            &["-c", "echo up; echo warn >&2; exec sleep 30"],
            Duration::from_secs(30),
            4096,
        )
        .unwrap();
        assert!(bg.running());
        let pid = bg.child.id();
        let t = Instant::now();
        while bg.stderr_so_far().is_empty() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(bg.stderr_so_far(), b"warn\n");
        drop(bg);
        // The process is gone once the handle is: kill(pid, 0) finds no such process.
        assert_ne!(unsafe { libc::kill(pid as i32, 0) }, 0, "pid {pid} still runs");

        let mut bg = Background::spawn("sleep", &["30"], Duration::from_millis(200), 4096).unwrap();
        let t = Instant::now();
        while bg.running() {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(t.elapsed() < Duration::from_secs(10));
        let ran = bg.finish(Duration::from_secs(1));
        assert!(ran.timed_out && ran.status.is_none());

        let bg =
            Background::spawn("sh", &["-c", "echo done; exit 4"], Duration::from_secs(30), 4096).unwrap();
        let ran = bg.finish(Duration::from_secs(10));
        assert_eq!((ran.status, ran.timed_out), (Some(4), false));
        assert_eq!(ran.stdout, b"done\n");

        // Asked to finish before it does: killed then, not waited for until its deadline.
        let t = Instant::now();
        let ran = Background::spawn("sleep", &["30"], Duration::from_secs(30), 4096)
            .unwrap()
            .finish(Duration::from_millis(100));
        assert!(!ran.timed_out && ran.status.is_none());
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(
            Background::spawn("gpuenv-no-such-program", &[], Duration::from_secs(1), 1)
                .err()
                .map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let e = run("gpuenv-no-such-program", &[], None, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
