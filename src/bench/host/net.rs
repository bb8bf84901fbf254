//! The network between two nodes: TCP throughput over several streams, and round-trip
//! latency, between `gpuenv bench net --listen` on one node and `--peer` on the other.
//!
//! Owns: the protocol both ends speak, the listener and the client, and their bounds.
//! Must not: print (the listener hands what it wants said to a callback), or read or
//! write any file.
//!
//! The protocol, version [`VERSION`]. Every connection opens with one line from the
//! client, `gpuenv-bench-net 1 sink` or `gpuenv-bench-net 1 echo`, of at most
//! [`MAX_LINE`] bytes, within [`HELLO_WAIT`]. The listener answers `gpuenv-bench-net 1 ok`
//! or `gpuenv-bench-net 1 error REASON` and closes. Then:
//! - `sink`: the client sends bytes and shuts its side; the listener answers `done N`,
//!   the bytes it received, which the client checks against what it sent;
//! - `echo`: the client sends messages of [`PING_BYTES`] bytes; the listener sends each
//!   back as it came;
//! - `rdma`: a session that runs perftest's `ib_write_bw` between the two nodes, its
//!   lines and bounds in [`super::rdma`].
//!
//! Anything else is refused: a listener answers garbage with an error line and closes;
//! a client given garbage by its peer says what the peer said (an excerpt, made safe).
//! Bounds: every read and write waits at most [`IO_WAIT`]; a connection lives at most
//! [`MAX_CONNECTION`]; a listener holds at most [`MAX_CONNECTIONS`] at once and serves
//! for the time it was given.
//!
//! Throughput is the bytes the listener confirmed over the time from when every stream is
//! open (its hello answered) to the last stream's confirmation, in decimal GB/s (payload
//! only: TCP/IP headers not counted). Latency is the median round trip of one
//! [`PING_BYTES`]-byte message with Nagle off, after [`PING_WARMUP`] untimed ones.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::HostBenchError;
use crate::bench::{Engine, Figure, Metric};

/// The protocol's version, the second word of every hello.
pub const VERSION: u32 = 1;
/// The protocol's first word.
pub const MAGIC: &str = "gpuenv-bench-net";
/// The port a listener takes when none is given (not NCCL's or torch's default 29500).
pub const DEFAULT_PORT: u16 = 29571;
/// The longest line either side reads.
pub const MAX_LINE: u64 = 128;
/// How long a listener waits for a client's hello.
pub const HELLO_WAIT: Duration = Duration::from_secs(5);
/// The longest any one read or write waits.
pub const IO_WAIT: Duration = Duration::from_secs(10);
/// The longest a connection lives.
pub const MAX_CONNECTION: Duration = Duration::from_secs(300);
/// The most connections a listener serves at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The most streams a client opens.
pub const MAX_STREAMS: u32 = 64;
/// Bytes of one latency message.
pub const PING_BYTES: usize = 64;
/// Untimed round trips before the timed ones.
pub const PING_WARMUP: u32 = 10;
/// Bytes of one write of a throughput stream.
const CHUNK: usize = 128 * 1024;

/// What a client measures.
#[derive(Debug, Clone)]
pub struct PeerPlan {
    /// `HOST` or `HOST:PORT` (port [`DEFAULT_PORT`] when none).
    pub peer: String,
    /// Parallel TCP streams.
    pub streams: u32,
    /// How long the streams send.
    pub duration: Duration,
    /// Timed round trips.
    pub pings: u32,
}

fn env(msg: String) -> HostBenchError {
    HostBenchError::Environment(msg)
}

/// `HOST[:PORT]` to addresses (DNS looked up); a bad port is bad input.
pub fn resolve(peer: &str, default_port: u16) -> Result<Vec<SocketAddr>, HostBenchError> {
    let with_port = if peer.parse::<SocketAddr>().is_ok() {
        peer.to_string()
    } else if let Some((host, port)) = peer.rsplit_once(':').filter(|(h, _)| !h.contains(':')) {
        port.parse::<u16>().map_err(|_| {
            HostBenchError::Input(format!(
                "`{}`: `{}` is not a port; expected HOST or HOST:PORT with a port from 1 to 65535",
                crate::text::excerpt(peer),
                crate::text::excerpt(port)
            ))
        })?;
        format!("{host}:{port}")
    } else if peer.contains(':') {
        // A bare IPv6 address.
        format!("[{peer}]:{default_port}")
    } else {
        format!("{peer}:{default_port}")
    };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| {
            HostBenchError::Input(format!(
                "`{}` does not resolve to an address: {e}",
                crate::text::excerpt(peer)
            ))
        })?
        .collect();
    if addrs.is_empty() {
        return Err(HostBenchError::Input(format!(
            "`{}` resolves to no address",
            crate::text::excerpt(peer)
        )));
    }
    Ok(addrs)
}

/// A listener, bound and ready to serve.
pub struct Listener {
    socket: TcpListener,
    stop: Arc<AtomicBool>,
    rdma: Option<super::rdma::ServerConfig>,
}

impl Listener {
    /// Binds `addr` (`ADDR:PORT`; port 0 takes a free one).
    pub fn bind(addr: &str) -> Result<Listener, HostBenchError> {
        let addrs = resolve(addr, DEFAULT_PORT)?;
        let socket = TcpListener::bind(&addrs[..])
            .map_err(|e| env(format!("cannot listen on `{}`: {e}", crate::text::excerpt(addr))))?;
        socket
            .set_nonblocking(true)
            .map_err(|e| env(format!("cannot listen on `{}`: {e}", crate::text::excerpt(addr))))?;
        Ok(Listener {
            socket,
            stop: Arc::new(AtomicBool::new(false)),
            rdma: None,
        })
    }

    /// The same listener, serving `rdma` sessions with `config` (without it, they are
    /// answered with a skip reason).
    pub fn with_rdma(mut self, config: super::rdma::ServerConfig) -> Listener {
        self.rdma = Some(config);
        self
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, HostBenchError> {
        self.socket
            .local_addr()
            .map_err(|e| env(format!("cannot read the listening address: {e}")))
    }

    /// A flag that ends [`Listener::serve`] when set.
    pub fn stopper(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serves connections for `serve_for` (or until stopped, or SIGINT/SIGTERM once a hold
    /// is taken), each on a thread of its own; `refused` hears of every client turned away
    /// and why. Returns how many connections were served.
    pub fn serve(&self, serve_for: Duration, refused: &(dyn Fn(String) + Sync)) -> usize {
        let start = Instant::now();
        let live = Arc::new(AtomicUsize::new(0));
        let mut served = 0;
        std::thread::scope(|scope| {
            while start.elapsed() < serve_for && !self.stop.load(Ordering::Relaxed) {
                if crate::interrupt::requested().is_some() {
                    break;
                }
                let (stream, from) = match self.socket.accept() {
                    Ok(s) => s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    Err(e) => {
                        refused(format!("accept failed: {e}"));
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                };
                if live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    refused(format!("{from}: more than {MAX_CONNECTIONS} connections at once"));
                    continue;
                }
                live.fetch_add(1, Ordering::Relaxed);
                served += 1;
                let live = live.clone();
                let rdma = self.rdma.as_ref();
                scope.spawn(move || {
                    if let Err(why) = serve_one(stream, rdma) {
                        refused(format!("{from}: {why}"));
                    }
                    live.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        served
    }
}

fn prepare(stream: &TcpStream) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_WAIT))?;
    stream.set_write_timeout(Some(IO_WAIT))?;
    stream.set_nodelay(true)
}

/// Sends `line` and its end in one `write`: `writeln!` on a socket writes each piece of
/// the format apart, and with Nagle off each piece is a segment of its own, so a peer that
/// hangs up after the first one resets the connection before the line is whole.
fn send_line(writer: &mut impl Write, line: &str) -> std::io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    writer.write_all(&bytes)
}

/// A line that did not come whole: what did come of it (an excerpt, made safe; empty when
/// nothing came), and why the reading stopped.
#[derive(Debug)]
struct CutLine {
    came: String,
    why: String,
}

impl std::fmt::Display for CutLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.came.is_empty() {
            f.write_str(&self.why)
        } else {
            write!(f, "`{}`, then {}", self.came, self.why)
        }
    }
}

/// Reads one line of at most [`MAX_LINE`] bytes, without its end. A line cut short keeps
/// what came of it: a peer that speaks another protocol is told apart by its words, not
/// by how it hung up.
fn read_line(reader: &mut impl BufRead) -> Result<String, CutLine> {
    let mut line = Vec::new();
    // On an error, `read_until` leaves in `line` what it read before.
    let read = reader.take(MAX_LINE).read_until(b'\n', &mut line);
    let cut = |why: String| CutLine {
        came: crate::text::excerpt(String::from_utf8_lossy(&line).trim_end()),
        why,
    };
    match read {
        Err(e) => return Err(cut(format!("reading failed: {e}"))),
        Ok(_) if line.is_empty() => return Err(cut("the connection closed before a line".into())),
        Ok(_) if line.last() != Some(&b'\n') => {
            return Err(cut(format!("no line end within {MAX_LINE} bytes")));
        }
        Ok(_) => {}
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn serve_one(stream: TcpStream, rdma: Option<&super::rdma::ServerConfig>) -> Result<(), String> {
    prepare(&stream).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(HELLO_WAIT))
        .map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let hello = match read_line(&mut reader) {
        Ok(l) => l,
        Err(why) => {
            let _ = send_line(
                &mut writer,
                &format!("{MAGIC} {VERSION} error expected a hello line"),
            );
            return Err(why.to_string());
        }
    };
    let mode = match hello.split(' ').collect::<Vec<_>>()[..] {
        [MAGIC, v, mode] if v == VERSION.to_string() && matches!(mode, "sink" | "echo" | "rdma") => {
            mode.to_string()
        }
        [MAGIC, v, _] if v != VERSION.to_string() => {
            let _ = send_line(
                &mut writer,
                &format!("{MAGIC} {VERSION} error version {VERSION} only"),
            );
            return Err(format!(
                "protocol version `{}` asked; only {VERSION} is spoken",
                crate::text::excerpt(v)
            ));
        }
        _ => {
            let _ = send_line(
                &mut writer,
                &format!("{MAGIC} {VERSION} error expected `{MAGIC} {VERSION} sink|echo`"),
            );
            return Err(format!(
                "not a gpuenv bench client: `{}`",
                crate::text::excerpt(&hello)
            ));
        }
    };
    send_line(&mut writer, &format!("{MAGIC} {VERSION} ok")).map_err(|e| e.to_string())?;
    if mode == "rdma" {
        return super::rdma::serve_session(reader, writer, rdma);
    }
    reader
        .get_ref()
        .set_read_timeout(Some(IO_WAIT))
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    if mode == "sink" {
        let mut buf = vec![0u8; CHUNK];
        let mut got: u64 = 0;
        loop {
            if start.elapsed() > MAX_CONNECTION {
                return Err(format!("the stream outlived {} s", MAX_CONNECTION.as_secs()));
            }
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got = got.saturating_add(n as u64),
                Err(e) => return Err(format!("reading the stream: {e}")),
            }
        }
        send_line(&mut writer, &format!("done {got}")).map_err(|e| e.to_string())?;
    } else {
        let mut msg = [0u8; PING_BYTES];
        loop {
            if start.elapsed() > MAX_CONNECTION {
                return Err(format!("the echo outlived {} s", MAX_CONNECTION.as_secs()));
            }
            match reader.read_exact(&mut msg) {
                Ok(()) => writer.write_all(&msg).map_err(|e| e.to_string())?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(format!("reading a ping: {e}")),
            }
        }
    }
    Ok(())
}

/// A connection that passed the hello: its reader and writer.
struct Opened {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

fn open(addrs: &[SocketAddr], peer: &str, mode: &str) -> Result<Opened, HostBenchError> {
    let stream = addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, IO_WAIT).ok())
        .ok_or_else(|| {
            env(format!(
                "cannot connect to the peer `{peer}`: is `gpuenv bench net --listen` running there, and the port open?"
            ))
        })?;
    prepare(&stream).map_err(|e| env(format!("peer `{peer}`: {e}")))?;
    let mut writer = stream
        .try_clone()
        .map_err(|e| env(format!("peer `{peer}`: {e}")))?;
    let sent = send_line(&mut writer, &format!("{MAGIC} {VERSION} {mode}"));
    let mut reader = BufReader::new(stream);
    let not_ours = |said: String| {
        env(format!(
            "the peer `{peer}` did not answer as `gpuenv bench net --listen` (protocol {VERSION}): {said}"
        ))
    };
    if let Err(e) = sent {
        // A server of another protocol may speak first and hang up (SSH's banner, an
        // HTTP 400): its reset when our hello arrives is what the send sees, but what it
        // said before, still readable, names it.
        return Err(match read_line(&mut reader) {
            Ok(said) => not_ours(format!(
                "it said `{}`, then refused the hello ({e})",
                crate::text::excerpt(&said)
            )),
            Err(cut) if !cut.came.is_empty() => not_ours(format!("it said {cut}")),
            Err(_) => env(format!("peer `{peer}`: cannot send the hello: {e}")),
        });
    }
    let answer = read_line(&mut reader).map_err(|cut| not_ours(cut.to_string()))?;
    if answer != format!("{MAGIC} {VERSION} ok") {
        return Err(not_ours(format!("it said `{}`", crate::text::excerpt(&answer))));
    }
    Ok(Opened { reader, writer })
}

/// One throughput stream: opens, waits at `ready` with the other streams and the clock,
/// sends for `duration` (one chunk at least), then reads the listener's count.
fn stream_once(
    addrs: &[SocketAddr],
    peer: &str,
    ready: &Barrier,
    duration: Duration,
) -> Result<u64, HostBenchError> {
    let opened = open(addrs, peer, "sink");
    // Passed by every stream, also one that could not open, so that none waits forever.
    ready.wait();
    let Opened {
        mut reader,
        mut writer,
    } = opened?;
    let until = Instant::now() + duration;
    let chunk = vec![0x5au8; CHUNK];
    let mut sent: u64 = 0;
    loop {
        writer
            .write_all(&chunk)
            .map_err(|e| env(format!("peer `{peer}`: sending failed: {e}")))?;
        sent = sent.saturating_add(CHUNK as u64);
        if Instant::now() >= until || crate::interrupt::requested().is_some() {
            break;
        }
    }
    writer
        .shutdown(Shutdown::Write)
        .map_err(|e| env(format!("peer `{peer}`: {e}")))?;
    let line = read_line(&mut reader).map_err(|why| env(format!("peer `{peer}` sent no count: {why}")))?;
    let got = line
        .strip_prefix("done ")
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| {
            env(format!(
                "the peer `{peer}` answered the stream with `{}`, not `done BYTES`",
                crate::text::excerpt(&line)
            ))
        })?;
    if got != sent {
        return Err(env(format!(
            "the peer `{peer}` received {got} bytes of the {sent} sent"
        )));
    }
    Ok(got)
}

/// Measures throughput and latency to a listening peer.
pub fn measure(plan: &PeerPlan) -> Result<Vec<Figure>, HostBenchError> {
    if plan.streams == 0 || plan.streams > MAX_STREAMS {
        return Err(HostBenchError::Input(format!(
            "--streams {}: expected 1 to {MAX_STREAMS}",
            plan.streams
        )));
    }
    let peer = crate::text::excerpt(&plan.peer);
    let addrs = resolve(&plan.peer, DEFAULT_PORT)?;

    // Latency first, on a quiet link.
    let Opened {
        mut reader,
        mut writer,
    } = open(&addrs, &peer, "echo")?;
    let mut msg = [0u8; PING_BYTES];
    let mut rtts = Vec::with_capacity(plan.pings as usize);
    for i in 0..PING_WARMUP.saturating_add(plan.pings.max(1)) {
        msg[0] = (i % 251) as u8;
        let sent = msg;
        let start = Instant::now();
        writer
            .write_all(&msg)
            .map_err(|e| env(format!("peer `{peer}`: sending a ping failed: {e}")))?;
        reader
            .read_exact(&mut msg)
            .map_err(|e| env(format!("peer `{peer}`: no echo of a ping: {e}")))?;
        let rtt = start.elapsed();
        if msg != sent {
            return Err(env(format!("the peer `{peer}` echoed a ping altered")));
        }
        if i >= PING_WARMUP {
            rtts.push(rtt);
        }
    }
    drop((reader, writer));
    rtts.sort();
    let median = rtts.get(rtts.len() / 2).copied().unwrap_or_default();

    // The clock starts once every stream is open: on a busy machine, or far from the
    // peer, the connections and hellos could otherwise take the time the streams had to
    // send in, down to nothing sent.
    let ready = Barrier::new(plan.streams as usize + 1);
    let (results, took): (Vec<Result<u64, HostBenchError>>, Duration) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..plan.streams)
            .map(|_| scope.spawn(|| stream_once(&addrs, &peer, &ready, plan.duration)))
            .collect();
        ready.wait();
        let start = Instant::now();
        let results = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(env("a stream's thread failed".into())))
            })
            .collect();
        (results, start.elapsed())
    });
    let mut total: u64 = 0;
    for r in results {
        total = total.saturating_add(r?);
    }
    if let Some(sig) = crate::interrupt::requested() {
        return Err(HostBenchError::Interrupted(sig));
    }
    Ok(vec![
        Figure::new(
            Metric::NetworkTcp,
            total as f64 / took.as_secs_f64().max(1e-9) / 1e9,
            Engine::Gpuenv,
            format!(
                "{} streams to {peer}, {:.2} GB confirmed by the peer in {}; payload bytes only",
                plan.streams,
                // Decimal, as the figure's GB/s: a count of KiB in the tens of millions
                // reads as noise.
                total as f64 / 1e9,
                super::secs(took)
            ),
        ),
        Figure::new(
            Metric::NetworkLatency,
            median.as_secs_f64() * 1e6,
            Engine::Gpuenv,
            format!(
                "median TCP round trip of a {PING_BYTES}-byte message to {peer} over {} tries",
                rtts.len()
            ),
        ),
    ])
}

/// Measures the host's own TCP stack: a listener on loopback in this process, and the
/// client against it. Not the network: what a link to a peer could at most carry here.
pub fn measure_loopback(plan: &PeerPlan) -> Result<Vec<Figure>, HostBenchError> {
    let listener = Listener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let stop = listener.stopper();
    let serve_for = plan.duration + Duration::from_secs(60);
    std::thread::scope(|scope| {
        scope.spawn(|| listener.serve(serve_for, &|_| {}));
        let measured = measure(&PeerPlan {
            peer: addr.to_string(),
            ..plan.clone()
        });
        stop.store(true, Ordering::Relaxed);
        measured
    })
    .map(|figures| {
        figures
            .into_iter()
            .map(|mut f| {
                f.detail = format!(
                    "loopback (no --peer given; the host's TCP stack, not its network): {}",
                    f.detail
                );
                f
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(peer: String) -> PeerPlan {
        PeerPlan {
            peer,
            streams: 2,
            duration: Duration::from_millis(300),
            pings: 20,
        }
    }

    #[test]
    fn loopback_measures_both_figures() {
        let figures = measure_loopback(&quick(String::new())).unwrap();
        assert_eq!(figures.len(), 2);
        assert_eq!(figures[0].metric, Metric::NetworkTcp);
        assert!(figures[0].value > 0.0);
        assert_eq!(figures[1].metric, Metric::NetworkLatency);
        assert!(figures[1].value > 0.0);
    }

    #[test]
    fn a_peer_that_speaks_something_else_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\x1b[2J\r\n");
        });
        let e = measure(&quick(addr.to_string())).unwrap_err().to_string();
        t.join().unwrap();
        assert!(e.contains("did not answer as `gpuenv bench net --listen`"), "{e}");
        assert!(!e.contains('\x1b'), "{e}");
    }

    #[test]
    fn a_listener_refuses_garbage_and_keeps_serving() {
        let listener = Listener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = listener.stopper();
        let refusals = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            scope.spawn(|| listener.serve(Duration::from_secs(30), &|r| refusals.lock().unwrap().push(r)));
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).unwrap();
            assert!(answer.starts_with("gpuenv-bench-net 1 error"), "{answer}");
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"gpuenv-bench-net 9 sink\n").unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).unwrap();
            assert!(answer.contains("version 1 only"), "{answer}");
            let figures = measure(&quick(addr.to_string())).unwrap();
            assert_eq!(figures.len(), 2);
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(refusals.lock().unwrap().len(), 2);
    }

    #[test]
    fn bad_ports_are_bad_input() {
        assert!(matches!(resolve("host:99999", 1), Err(HostBenchError::Input(_))));
        assert!(matches!(resolve("host:x", 1), Err(HostBenchError::Input(_))));
        assert_eq!(resolve("127.0.0.1", 7).unwrap()[0].port(), 7);
        assert_eq!(resolve("::1", 7).unwrap()[0].port(), 7);
    }
}
