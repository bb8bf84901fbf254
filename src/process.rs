//! Running another program with a deadline.
//!
//! Owns: starting a program, handing it its standard input, reading what it prints on
//! threads (so a chatty child never blocks on a full pipe while we wait), and killing it
//! at the deadline, or as soon as it prints more than its output cap. Must not: look programs up anywhere but the OS's own way, interpret
//! what they print, or print.

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
    // Each output is read on a thread that hands it over when the pipe closes. A pipe
    // stays open as long as any process holds it, and a program killed at the deadline
    // (a shell script) may leave a child that does: its output is then waited for only
    // [`GRACE`] more, and the thread is left to end when that child does.
    // What was read so far is kept where the caller can take it, pipe closed or not.
    let overflow = Arc::new(AtomicBool::new(false));
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel::<()>();
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let overflow = Arc::clone(&overflow);
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
        (rx, kept)
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
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
    let collect = |(closed, kept): (mpsc::Receiver<()>, Arc<Mutex<Vec<u8>>>)| {
        let _ = closed.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        std::mem::take(&mut *kept.lock().unwrap_or_else(PoisonError::into_inner))
    };
    let (stdout, stderr) = (collect(out), collect(err));
    Ok(Ran {
        status,
        timed_out,
        overflowed: overflow.load(Ordering::SeqCst),
        stdout,
        stderr,
    })
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
    fn a_missing_program_is_not_found() {
        let e = run("gpuenv-no-such-program", &[], None, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
