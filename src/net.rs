//! HTTP under a deadline, every body read through a cap that is checked while reading.
//!
//! Owns: sending one request that someone else built (the registry client, the upstream
//! client) and handing back its answer so that no wait outlasts the [`Deadline`] (the
//! headers, and each piece of the body, are awaited at most [`Deadline::wait`]) and no
//! body grows past its [`Cap`] (a `Content-Length` above it is refused before a byte is
//! read; every piece read counts against it). The messages of [`NetError`] name the other
//! side, what was being read, and the limit that ran out. Also owns the one HTTP client
//! setup ([`client`]) the registry and upstream clients are built from. Must not: decide
//! what to ask, authenticate, follow anything, or print.
//!
//! Why a thread per request: reqwest's blocking `Response` waits on each read with one
//! fixed timeout (the request's total), so a server that sends a byte a second is never
//! idle to it, and one that goes silent holds a read until the whole total is gone. Here
//! the request runs on a thread of its own that hands over the answer's head, then its
//! body in pieces, through a channel of [`SLOTS`] slots; the caller waits on the channel
//! with the idle limit or what is left of the total, whichever is less. The request also
//! carries reqwest's own total timeout (what is left of the deadline), which ends a read
//! that thread is blocked in once the caller has given up on it; a caller that stops
//! early drops its end, and the thread stops at its next hand-over. Memory: at most
//! [`SLOTS`] pieces of [`PIECE`] bytes wait per request, whatever the server sends.

use std::fmt;
use std::io::{self, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};

use reqwest::StatusCode;
use reqwest::Url;
use reqwest::blocking::RequestBuilder;
use reqwest::header::HeaderMap;

use crate::deadline::{Deadline, Expiry};

/// The most bytes one piece of a body holds.
pub const PIECE: usize = 64 * 1024;

/// How many pieces may wait between the request's thread and the reader.
pub const SLOTS: usize = 4;

/// The most bytes a body may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// Bytes.
    pub bytes: u64,
    /// The body must have exactly this many bytes (a blob of a declared size), not at most.
    pub exact: bool,
    /// What the number is: `a manifest` (a cap gpuenv sets), `its descriptor declares`
    /// (a size a document declared).
    pub of: &'static str,
}

impl Cap {
    /// A cap gpuenv sets on a kind of document (`a manifest`).
    pub const fn at_most(bytes: u64, of: &'static str) -> Cap {
        Cap {
            bytes,
            exact: false,
            of,
        }
    }

    /// A size a document declared (`the manifest declares`): no more, no less.
    pub const fn exactly(bytes: u64, of: &'static str) -> Cap {
        Cap {
            bytes,
            exact: true,
            of,
        }
    }
}

impl fmt::Display for Cap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exact {
            write!(f, "the {} bytes {}", self.bytes, self.of)
        } else {
            write!(f, "the {} gpuenv accepts for {}", size(self.bytes), self.of)
        }
    }
}

/// A size as people read it: `4 MiB`, `64 KiB`, `1000 bytes`.
pub fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes % KIB == 0 {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Why an answer could not be had, naming the other side (`the registry at
/// 127.0.0.1:5555`), what was being read (`the manifest of gpuenv/x:1`) and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// No connection, or the request could not be sent.
    #[error("cannot reach {peer} for {during}: {reason}")]
    Unreachable {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// Why (reqwest's words, without the URL).
        reason: String,
    },
    /// A wait ran out: nothing came for the idle limit, or the whole deadline passed.
    #[error("{}", timed_out(peer, during, limit))]
    TimedOut {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// Which limit.
        limit: Expiry,
    },
    /// The body grew past its cap; reading stopped there.
    #[error("{peer} sent more than {cap} (reading {during}); gpuenv stopped reading it")]
    TooLarge {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// The cap.
        cap: Cap,
    },
    /// The answer's `Content-Length` breaks the cap; nothing was read.
    #[error(
        "{peer} announced {announced} bytes for {during}, {} {cap}; nothing of it was read",
        if cap.exact { "not" } else { "more than" }
    )]
    Announced {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// The `Content-Length`.
        announced: u64,
        /// The cap.
        cap: Cap,
    },
    /// The body ended before the size declared for it.
    #[error("{peer} ended {during} after {got} of {cap}")]
    Short {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// Bytes received.
        got: u64,
        /// The size declared.
        cap: Cap,
    },
    /// Redirects that go nowhere gpuenv follows.
    #[error("{peer} redirected gpuenv away for {during}: {reason}")]
    Redirect {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// Why gpuenv did not follow.
        reason: String,
    },
    /// The connection failed in the middle.
    #[error("the connection to {peer} failed while gpuenv read {during}: {reason}")]
    Broken {
        /// The other side.
        peer: String,
        /// What was being read.
        during: String,
        /// Why.
        reason: String,
    },
}

fn timed_out(peer: &str, during: &str, limit: &Expiry) -> String {
    match limit {
        Expiry::Idle(_) => format!("{peer} sent nothing {limit} while gpuenv read {during}; gave up"),
        Expiry::Total { .. } => format!("{peer} did not finish sending {during} {limit}; gave up"),
    }
}

impl NetError {
    /// The error as an I/O error (for readers), of a kind that says what happened; the
    /// error itself stays inside, see [`NetError::of_io`].
    pub fn into_io(self) -> io::Error {
        let kind = match &self {
            NetError::TimedOut { .. } => io::ErrorKind::TimedOut,
            NetError::TooLarge { .. } | NetError::Announced { .. } => io::ErrorKind::FileTooLarge,
            NetError::Short { .. } => io::ErrorKind::UnexpectedEof,
            NetError::Unreachable { .. } | NetError::Redirect { .. } => io::ErrorKind::ConnectionRefused,
            NetError::Broken { .. } => io::ErrorKind::ConnectionAborted,
        };
        io::Error::new(kind, self)
    }

    /// The [`NetError`] inside an I/O error made by [`NetError::into_io`].
    pub fn of_io(e: &io::Error) -> Option<&NetError> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<NetError>())
    }
}

/// What the request's thread hands over.
enum Piece {
    Head(Box<Head>),
    Data(Vec<u8>),
    End,
    Failed(Failure),
}

struct Head {
    status: StatusCode,
    headers: HeaderMap,
    url: Url,
    content_length: Option<u64>,
}

/// What went wrong on the request's thread.
enum Failure {
    /// reqwest's own total timeout fired.
    Timeout,
    Connect(String),
    Redirect(String),
    Other(String),
}

impl Failure {
    fn of(e: reqwest::Error) -> Failure {
        let (timeout, redirect, connect) = (e.is_timeout(), e.is_redirect(), e.is_connect());
        // Without the URL: a redirect's target is the server's text.
        let text = describe(&e.without_url());
        if timeout {
            Failure::Timeout
        } else if redirect {
            Failure::Redirect(text)
        } else if connect {
            Failure::Connect(text)
        } else {
            Failure::Other(text)
        }
    }
}

/// reqwest's error chain in one line, safe to show: `timed out`, `connection failed:
/// ...: connection refused`, `redirect: ...`. Text a server sent can be part of it (a
/// header it could not parse), so it goes through [`crate::text::excerpt`].
pub fn describe(e: &reqwest::Error) -> String {
    let head = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection failed".to_string()
    } else if e.is_redirect() {
        "redirect".to_string()
    } else {
        e.to_string()
    };
    let rest = std::error::Error::source(e).map(chain).unwrap_or_default();
    let s = if rest.is_empty() || head.contains(&rest) {
        head
    } else {
        format!("{head}: {rest}")
    };
    crate::text::excerpt(&s)
}

/// An error and its sources in one line (`request or response body error: end of file
/// before message length reached`), each sentence once.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = inner.source();
    }
    s
}

/// An answer: its status and headers, and its body to read.
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// Where the answer came from, after any redirect.
    pub url: Url,
    content_length: Option<u64>,
    rx: Receiver<Piece>,
    peer: String,
    during: String,
    deadline: Deadline,
}

impl Answer {
    /// The body as a reader of at most `cap` bytes (exactly `cap` for an exact one); a
    /// `Content-Length` that breaks it is refused here, before a byte is read.
    pub fn body(self, cap: Cap) -> Result<Body, NetError> {
        if let Some(announced) = self.content_length {
            if announced > cap.bytes || (cap.exact && announced != cap.bytes) {
                return Err(NetError::Announced {
                    peer: self.peer,
                    during: self.during,
                    announced,
                    cap,
                });
            }
        }
        Ok(Body {
            rx: self.rx,
            piece: Vec::new(),
            at: 0,
            read: 0,
            cap,
            peer: self.peer,
            during: self.during,
            deadline: self.deadline,
            ended: false,
        })
    }

    /// The whole body, at most `cap` bytes.
    pub fn bytes(self, cap: Cap) -> Result<Vec<u8>, NetError> {
        let mut body = self.body(cap)?;
        let mut out = Vec::new();
        match body.read_to_end(&mut out) {
            Ok(_) => Ok(out),
            Err(e) => Err(NetError::of_io(&e).cloned().unwrap_or_else(|| NetError::Broken {
                peer: body.peer.clone(),
                during: body.during.clone(),
                reason: e.to_string(),
            })),
        }
    }
}

/// A body being read: every piece waited for at most [`Deadline::wait`], every byte
/// counted against the cap.
pub struct Body {
    rx: Receiver<Piece>,
    piece: Vec<u8>,
    at: usize,
    read: u64,
    cap: Cap,
    peer: String,
    during: String,
    deadline: Deadline,
    ended: bool,
}

impl Body {
    fn fail(&self, make: impl FnOnce(String, String) -> NetError) -> io::Error {
        make(self.peer.clone(), self.during.clone()).into_io()
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.piece.len() {
            if self.ended {
                return Ok(0);
            }
            let piece = match self.rx.recv_timeout(self.deadline.wait()) {
                Ok(p) => p,
                Err(RecvTimeoutError::Timeout) => {
                    let limit = self.deadline.expiry();
                    return Err(self.fail(|peer, during| NetError::TimedOut { peer, during, limit }));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.fail(|peer, during| NetError::Broken {
                        peer,
                        during,
                        reason: "the answer stopped without an end".into(),
                    }));
                }
            };
            match piece {
                Piece::Data(data) => {
                    self.read += data.len() as u64;
                    if self.read > self.cap.bytes {
                        let cap = self.cap;
                        return Err(self.fail(|peer, during| NetError::TooLarge { peer, during, cap }));
                    }
                    self.piece = data;
                    self.at = 0;
                }
                Piece::End => {
                    self.ended = true;
                    if self.cap.exact && self.read < self.cap.bytes {
                        let (got, cap) = (self.read, self.cap);
                        return Err(self.fail(|peer, during| NetError::Short {
                            peer,
                            during,
                            got,
                            cap,
                        }));
                    }
                    return Ok(0);
                }
                Piece::Failed(f) => {
                    let deadline = self.deadline.clone();
                    return Err(self.fail(|peer, during| failure(f, peer, during, &deadline)));
                }
                Piece::Head(_) => {}
            }
        }
        let n = buf.len().min(self.piece.len() - self.at);
        buf[..n].copy_from_slice(&self.piece[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn failure(f: Failure, peer: String, during: String, deadline: &Deadline) -> NetError {
    match f {
        Failure::Timeout => NetError::TimedOut {
            peer,
            during,
            limit: deadline.expiry(),
        },
        Failure::Connect(reason) => NetError::Unreachable { peer, during, reason },
        Failure::Redirect(reason) => NetError::Redirect { peer, during, reason },
        Failure::Other(reason) => NetError::Broken { peer, during, reason },
    }
}

/// The HTTP client gpuenv speaks through: connecting waits at most the deadline's idle
/// limit, and reqwest's own total timeout is left off, since [`send`] bounds each request
/// by what is left of the deadline; `redirects` says which redirects it follows (the
/// registry narrows them; plain HTTPS clients take reqwest's default).
pub fn client(
    deadline: &Deadline,
    redirects: Option<reqwest::redirect::Policy>,
) -> Result<reqwest::blocking::Client, reqwest::Error> {
    let mut builder = reqwest::blocking::Client::builder()
        .connect_timeout(deadline.wait())
        .timeout(None)
        .user_agent(concat!("gpuenv/", env!("CARGO_PKG_VERSION")));
    if let Some(policy) = redirects {
        builder = builder.redirect(policy);
    }
    builder.build()
}

/// Sends `req` and waits for its answer's head at most [`Deadline::wait`]. `peer` names
/// the other side (`the registry at nvcr.io`), `during` what is asked (`the manifest of
/// nvidia/pytorch:24.08-py3`); both go into every error about this request and its body.
pub fn send(req: RequestBuilder, deadline: &Deadline, peer: &str, during: &str) -> Result<Answer, NetError> {
    let left = deadline.remaining();
    if left.is_zero() {
        return Err(NetError::TimedOut {
            peer: peer.to_string(),
            during: during.to_string(),
            limit: deadline.expiry(),
        });
    }
    let (tx, rx) = sync_channel::<Piece>(SLOTS);
    let req = req.timeout(left);
    let spawned = std::thread::Builder::new()
        .name("gpuenv-http".into())
        .spawn(move || {
            let mut resp = match req.send() {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Piece::Failed(Failure::of(e)));
                    return;
                }
            };
            let head = Head {
                status: resp.status(),
                headers: resp.headers().clone(),
                url: resp.url().clone(),
                content_length: resp.content_length(),
            };
            if tx.send(Piece::Head(Box::new(head))).is_err() {
                return;
            }
            loop {
                let mut buf = vec![0u8; PIECE];
                match resp.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.send(Piece::End);
                        return;
                    }
                    Ok(n) => {
                        buf.truncate(n);
                        if tx.send(Piece::Data(buf)).is_err() {
                            return; // the reader stopped: drop the connection
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let text = chain(&e);
                        let f = if e.kind() == io::ErrorKind::TimedOut || text.contains("timed out") {
                            Failure::Timeout
                        } else {
                            Failure::Other(crate::text::excerpt(&text))
                        };
                        let _ = tx.send(Piece::Failed(f));
                        return;
                    }
                }
            }
        });
    let named = |f: Failure| failure(f, peer.to_string(), during.to_string(), deadline);
    if let Err(e) = spawned {
        return Err(named(Failure::Other(format!("cannot start a thread: {e}"))));
    }
    match rx.recv_timeout(deadline.wait()) {
        Ok(Piece::Head(head)) => Ok(Answer {
            status: head.status,
            headers: head.headers,
            url: head.url,
            content_length: head.content_length,
            rx,
            peer: peer.to_string(),
            during: during.to_string(),
            deadline: deadline.clone(),
        }),
        Ok(Piece::Failed(f)) => Err(named(f)),
        Ok(Piece::Data(_) | Piece::End) | Err(RecvTimeoutError::Disconnected) => Err(named(Failure::Other(
            "the request ended without an answer".into(),
        ))),
        Err(RecvTimeoutError::Timeout) => Err(NetError::TimedOut {
            peer: peer.to_string(),
            during: during.to_string(),
            limit: deadline.expiry(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    /// A loopback server that answers every connection with `answer(stream)`.
    fn serve(answer: impl Fn(std::net::TcpStream) + Send + Sync + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = std::sync::Arc::new(answer);
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let answer = answer.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = std::io::Read::read(&mut &s, &mut buf);
                    answer(s);
                });
            }
        });
        format!("http://{addr}/")
    }

    fn client() -> reqwest::blocking::Client {
        reqwest::blocking::Client::builder().build().unwrap()
    }

    fn get(url: &str, d: &Deadline) -> Result<Answer, NetError> {
        send(client().get(url), d, "the server", "the page")
    }

    #[test]
    fn a_silent_server_is_given_up_at_the_idle_limit() {
        let url = serve(|s| {
            std::thread::sleep(Duration::from_secs(20));
            drop(s);
        });
        let d = Deadline::with_idle(Duration::from_secs(60), Duration::from_millis(300), true);
        let t = Instant::now();
        let e = get(&url, &d).err().unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(
            e.to_string(),
            "the server sent nothing for 0.3 s while gpuenv read the page; gave up"
        );
    }

    #[test]
    fn a_trickle_is_given_up_at_the_total() {
        let url = serve(|mut s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
            for _ in 0..1000 {
                if s.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let d = Deadline::with_idle(Duration::from_secs(1), Duration::from_millis(500), true);
        let t = Instant::now();
        let e = get(&url, &d)
            .unwrap()
            .bytes(Cap::at_most(1 << 20, "a page"))
            .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        assert_eq!(
            e.to_string(),
            "the server did not finish sending the page within the 1 s of --timeout; gave up"
        );
    }

    #[test]
    fn bodies_stop_at_their_cap_and_exact_sizes_are_held() {
        let endless = serve(|mut s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            let chunk = format!("{:x}\r\n{}\r\n", 8192, "y".repeat(8192));
            while s.write_all(chunk.as_bytes()).is_ok() {}
        });
        let d = Deadline::new(Duration::from_secs(20), false);
        let cap = Cap::at_most(1 << 20, "a page");
        let e = get(&endless, &d).unwrap().bytes(cap).unwrap_err();
        assert!(matches!(e, NetError::TooLarge { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("sent more than the 1 MiB gpuenv accepts for a page (reading the page)"),
            "{e}"
        );

        let announced = serve(|mut s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nabc");
        });
        let e = get(&announced, &d).unwrap().bytes(cap).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server announced 99999999999 bytes for the page, more than the 1 MiB gpuenv accepts for a page; nothing of it was read"
        );

        let short = serve(|mut s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc");
        });
        let exact = Cap::exactly(10, "its descriptor declares");
        let e = get(&short, &d).unwrap().bytes(exact).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server ended the page after 3 of the 10 bytes its descriptor declares"
        );
        let long = serve(|mut s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789AB");
        });
        let e = get(&long, &d).unwrap().bytes(exact).unwrap_err();
        assert!(matches!(e, NetError::TooLarge { .. }), "{e}");
        let fine = serve(|mut s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789");
        });
        assert_eq!(get(&fine, &d).unwrap().bytes(exact).unwrap(), b"0123456789");
    }

    #[test]
    fn io_errors_carry_the_net_error() {
        let e = NetError::Short {
            peer: "p".into(),
            during: "d".into(),
            got: 1,
            cap: Cap::exactly(2, "declared"),
        };
        let io = e.clone().into_io();
        assert_eq!(io.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(NetError::of_io(&io), Some(&e));
        assert_eq!(size(4 << 20), "4 MiB");
        assert_eq!(size(1000), "1000 bytes");
    }
}
