//! Loopback HTTP servers that misbehave on purpose, for the network hardening tests: each
//! is a `TcpListener` on 127.0.0.1 with a thread per connection and one request per
//! connection, answering through a handler the test writes (hang, trickle, flood, lie,
//! redirect, challenge). Every request is recorded (method, path, headers, body) and every
//! byte written is counted, so a test can say what gpuenv sent and when it stopped reading.
//!
//! A TLS hello (the daemon tries HTTPS first on an insecure registry) is refused by
//! closing, as a plain-HTTP registry does; the daemon then falls back to HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuenv::image::digest::sha256;

use super::image_build::{Config, E, gzip, layer, oci_image};

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answering end of one connection; every byte written is counted.
pub struct Conn {
    stream: TcpStream,
    sent: Arc<AtomicU64>,
}

impl Conn {
    /// Writes `bytes`; `false` once the other side has gone.
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        match self.stream.write_all(bytes) {
            Ok(()) => {
                self.sent.fetch_add(bytes.len() as u64, Ordering::SeqCst);
                true
            }
            Err(_) => false,
        }
    }

    /// A whole answer with its `Content-Length`, the connection closed after it.
    pub fn respond(&mut self, status: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut head = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if self.write(head.as_bytes()) {
            self.write(body);
        }
    }

    /// The status line and `headers` only (the handler writes the body, if any, after).
    pub fn head(&mut self, status: &str, headers: &[(&str, &str)]) -> bool {
        let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        self.write(head.as_bytes())
    }

    /// A chunked body that never ends: `piece` again and again until the other side goes
    /// (or `limit` bytes, a guard for the test machine).
    pub fn endless_chunks(&mut self, piece: &[u8], limit: u64) {
        let chunk = [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat();
        let mut sent = 0u64;
        while sent < limit && self.write(&chunk) {
            sent += chunk.len() as u64;
        }
    }

    /// `bytes` one at a time, `every` apart, until the other side goes.
    pub fn trickle(&mut self, bytes: &[u8], every: Duration) {
        for b in bytes {
            if !self.write(std::slice::from_ref(b)) {
                return;
            }
            std::thread::sleep(every);
        }
    }

    /// Holds the connection open, answering nothing, until the other side goes (or a
    /// minute passes).
    pub fn hang(&mut self) {
        let _ = self.stream.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 1024];
        for _ in 0..300 {
            match self.stream.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return,
            }
        }
    }
}

type Handler = dyn Fn(&Request, &mut Conn) + Send + Sync;

/// A misbehaving server.
pub struct Server {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    log: Arc<Mutex<Vec<Request>>>,
    sent: Arc<AtomicU64>,
}

impl Server {
    /// Starts a server answering each request with `handler`.
    pub fn start(handler: impl Fn(&Request, &mut Conn) + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap().to_string();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(AtomicU64::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (l, s) = (Arc::clone(&log), Arc::clone(&sent));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (handler, log, sent) = (Arc::clone(&handler), Arc::clone(&l), Arc::clone(&s));
                std::thread::spawn(move || serve(stream, &*handler, &log, sent));
            }
        });
        Server { addr, log, sent }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Bytes written so far, over every connection.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

fn serve(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Request>>, sent: Arc<AtomicU64>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(1) if first[0] == 0x16 => return,
        Ok(1) => {}
        _ => return,
    }
    let Ok(clone) = stream.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line == "\r\n" || head.len() > 200 {
            break;
        }
        head.push(line.trim_end().to_string());
    }
    let request_line = head.first().cloned().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = head
        .iter()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length.min(1 << 20)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request = Request {
        method,
        path,
        headers,
        body,
    };
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(request.clone());
    let mut conn = Conn { stream, sent };
    handler(&request, &mut conn);
}

/// A small image as a registry serves it: an OCI manifest, its config and one gzip layer
/// holding a file unique to `id` (so that a daemon never has the layer already).
pub struct TestImage {
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
    pub config: Vec<u8>,
    pub config_digest: String,
    pub layer: Vec<u8>,
    pub layer_digest: String,
}

impl TestImage {
    pub fn new(id: &str) -> TestImage {
        let tree = layer(&[
            E::Dir("etc"),
            E::File("etc/os-release", b"ID=ubuntu\nVERSION_ID=\"22.04\"\n"),
            E::File("gpuenv-net-id", id.as_bytes()),
        ]);
        let stored = gzip(&tree);
        let img = oci_image(&Config::default(), &[tree], std::slice::from_ref(&stored));
        TestImage {
            manifest_digest: sha256(&img.manifest).to_string(),
            config_digest: sha256(&img.config).to_string(),
            layer_digest: sha256(&stored).to_string(),
            manifest: img.manifest,
            config: img.config,
            layer: stored,
        }
    }

    /// What a well-behaved registry answers to `req` for this image under any
    /// repository: the manifest for any tag or its digest, the two blobs, `/v2/`.
    pub fn serve(&self, req: &Request, conn: &mut Conn) {
        let path = req.path.split('?').next().unwrap_or_default();
        let head_only = req.method == "HEAD";
        let answer = |conn: &mut Conn, ctype: &str, digest: &str, body: &[u8]| {
            let headers = [("Content-Type", ctype), ("Docker-Content-Digest", digest)];
            if head_only {
                let len = body.len().to_string();
                let mut h = headers.to_vec();
                h.push(("Content-Length", &len));
                conn.head("200 OK", &h);
            } else {
                conn.respond("200 OK", &headers, body);
            }
        };
        if path == "/v2/" {
            conn.respond(
                "200 OK",
                &[("Docker-Distribution-Api-Version", "registry/2.0")],
                b"{}",
            );
        } else if path.contains("/manifests/") {
            answer(
                conn,
                "application/vnd.oci.image.manifest.v1+json",
                &self.manifest_digest,
                &self.manifest,
            );
        } else if path.ends_with(&format!("/blobs/{}", self.config_digest)) {
            answer(
                conn,
                "application/octet-stream",
                &self.config_digest,
                &self.config,
            );
        } else if path.ends_with(&format!("/blobs/{}", self.layer_digest)) {
            answer(conn, "application/octet-stream", &self.layer_digest, &self.layer);
        } else {
            conn.respond(
                "404 Not Found",
                &[("Content-Type", "application/json")],
                br#"{"errors":[{"code":"NAME_UNKNOWN","message":"unknown"}]}"#,
            );
        }
    }
}
