//! RDMA write bandwidth between two nodes, measured by perftest's `ib_write_bw` where it
//! is installed on both: the reader of its report, the choice of the RDMA device, and the
//! session over gpuenv's own bench protocol ([`super::net`]) that starts the server side
//! on the listening node.
//!
//! Owns: [`parse`] and the figure it gives, [`pick_device`], the arguments both sides run
//! ([`server_args`], [`client_args`]), the client's [`measure`] and the listener's
//! [`serve_session`], with their bounds. Must not: print, write any file, or leave an
//! `ib_write_bw` running once a session has ended (the server is a
//! [`Background`], killed when its handle is dropped).
//!
//! ## The session
//!
//! The client opens a connection to `gpuenv bench net --listen` with the hello
//! `gpuenv-bench-net 1 rdma`; the listener answers `gpuenv-bench-net 1 ok`. Then, one line
//! each, at most [`MAX_REPLY`] bytes:
//! - client: `start SECONDS` (1 to [`MAX_SECONDS`]);
//! - listener: `ready PORT DEVICE` once its `ib_write_bw` server listens on TCP port
//!   `PORT` (perftest exchanges its queue-pair numbers over it), or `skip REASON` (not
//!   installed there, no active RDMA port, another session running, the server failed);
//! - the client runs `ib_write_bw` against that port, then sends `done`, or `abort` when
//!   its run failed (the server may then wait for a client that never comes);
//! - listener: `ended HOW`, how its server ended (waited for [`SERVER_GRACE`] after
//!   `done`, stopped at once after `abort`), and closes.
//!
//! A listener that predates the `rdma` hello answers it with its `error` line and closes:
//! the client names that as the reason, so an old gpuenv on the other node gives a skip
//! line, not a hang. Every wait is bounded: the hello and `start` by the net protocol's
//! [`IO_WAIT`], the server's start by [`READY_WAIT`], the run by its length plus
//! [`RUN_MARGIN`]. A client that goes away, or a listener stopped by SIGINT/SIGTERM,
//! kills the server at once.
//!
//! ## Units
//!
//! perftest computes bandwidth as bytes over time divided by a `format_factor` of
//! `0x100000` (MiB, 2^20 bytes) by default and `125000000` (10^9 bits) with
//! `--report_gbits` (`print_report_bw` in `src/perftest_parameters.c`,
//! <https://github.com/linux-rdma/perftest/blob/00b55b6660d0170dabe2c1b49193e8fbe265086e/src/perftest_parameters.c#L4766>;
//! the same line since 2013). Its header said `MB/sec` for the MiB case until commit
//! 1d202bb (March 2024, release 24.07) renamed it `MiB/sec`, the numbers unchanged. So a
//! `MB/sec` or `MiB/sec` figure is x 2^20 / 10^9 in decimal GB/s, a `Gb/sec` one / 8.
//! gpuenv runs it with `--report_gbits`, the unit links are sold in, and reads both.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use super::net::{DEFAULT_PORT, IO_WAIT, MAGIC, VERSION, resolve};
use crate::bench::engines::{EngineError, check_size, malformed, measured};
use crate::bench::{Engine, Figure, Metric};
use crate::host::system::{CmdOutput, Outcome, System};
use crate::process::Background;
use crate::text::excerpt;

/// The program, as both sides look for it on `PATH`.
pub const PROGRAM: &str = "ib_write_bw";
/// Bytes of one RDMA write: 1 MiB, as Azure's node health checks run `ib_write_bw`
/// (`-s $(( 1 * 1024 * 1024 ))`, Azure/azurehpc-health-checks
/// `customTests/azure_ib_write_bw_non_gdr.nhc`); messages this large keep the link busy
/// with one queue pair, where perftest's default of 64 KiB may not on 400 Gb/s links.
pub const MESSAGE_BYTES: u64 = 1 << 20;
/// Queue pairs (perftest's default, written out so that the detail can say it).
pub const QUEUE_PAIRS: u32 = 1;
/// The longest run a client may ask for.
pub const MAX_SECONDS: u64 = 3600;
/// How long a listener waits for its server to listen.
pub const READY_WAIT: Duration = Duration::from_secs(10);
/// What a run may take beyond its seconds: starting, exchanging queue pairs, reporting.
pub const RUN_MARGIN: Duration = Duration::from_secs(60);
/// How long a listener waits for its server to end once the client's run is done.
pub const SERVER_GRACE: Duration = Duration::from_secs(10);
/// The longest line of the session either side reads (a `skip` reason quotes at most
/// [`crate::text::EXCERPT_CHARS`] characters, made safe).
pub const MAX_REPLY: u64 = 4096;
/// The most bytes of each of `ib_write_bw`'s outputs kept: its report is a few KiB, with
/// a line a queue pair.
pub const MAX_OUTPUT: u64 = 1 << 20;

// ---------------------------------------------------------------------------------------
// The report.

/// The unit of a report's bandwidth columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BwUnit {
    /// `MB/sec` (before March 2024) or `MiB/sec`: 2^20 bytes a second.
    Mebibytes,
    /// `Gb/sec` (`--report_gbits`): 10^9 bits a second.
    Gigabits,
}

impl BwUnit {
    fn from_header(unit: &str) -> Option<BwUnit> {
        match unit {
            "MB/sec" | "MiB/sec" => Some(BwUnit::Mebibytes),
            "Gb/sec" => Some(BwUnit::Gigabits),
            _ => None,
        }
    }

    /// `value` of this unit in decimal GB/s (see the module's "Units").
    pub fn to_gb_per_s(self, value: f64) -> f64 {
        match self {
            BwUnit::Mebibytes => value * 1_048_576.0 / 1e9,
            BwUnit::Gigabits => value / 8.0,
        }
    }

    /// The unit as perftest's current header writes it.
    pub fn label(self) -> &'static str {
        match self {
            BwUnit::Mebibytes => "MiB/s",
            BwUnit::Gigabits => "Gb/s",
        }
    }
}

/// One row of the results table: one message size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RdmaRow {
    /// `#bytes`: the message size.
    pub bytes: u64,
    /// `#iterations`: writes completed.
    pub iterations: u64,
    /// `BW peak`, in the report's unit; 0 in a timed run (`-D`), where perftest does not
    /// measure it.
    pub peak: f64,
    /// `BW average`, in the report's unit.
    pub average: f64,
    /// `MsgRate[Mpps]`.
    pub msg_rate_mpps: f64,
}

/// An `ib_write_bw` report, from either side.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmaRun {
    /// `Device`, terminal-safe.
    pub device: Option<String>,
    /// `Number of qps`.
    pub queue_pairs: Option<u32>,
    /// `Link type` (`IB`, `Ethernet` for RoCE), terminal-safe.
    pub link_type: Option<String>,
    /// The unit of the bandwidth columns.
    pub unit: BwUnit,
    /// The table, in printed order.
    pub rows: Vec<RdmaRow>,
}

impl RdmaRun {
    /// The row of the largest message: where the link, not the per-message cost, limits.
    pub fn largest(&self) -> Option<&RdmaRow> {
        self.rows.iter().max_by_key(|r| r.bytes)
    }

    /// The bandwidth figure: the average at the largest message, in GB/s; `context` says
    /// to whom and how it ran, the rest of the detail what the report says.
    pub fn figure(&self, context: &str) -> Option<Figure> {
        let row = self.largest()?;
        let qps = self
            .queue_pairs
            .map(|q| format!("{q} queue pair{}", if q == 1 { "" } else { "s" }))
            .unwrap_or_else(|| "queue pairs not listed".into());
        let link = self
            .link_type
            .as_deref()
            .map(|l| format!(", link type {l}"))
            .unwrap_or_default();
        let device = self.device.as_deref().unwrap_or("not named");
        Some(Figure::new(
            Metric::NetworkRdma,
            self.unit.to_gb_per_s(row.average),
            Engine::Perftest,
            format!(
                "{context}: RDMA writes of {} bytes, {qps}, device {device}{link}; {} writes, \
                 BW average {} {} as ib_write_bw reported it",
                row.bytes,
                row.iterations,
                row.average,
                self.unit.label()
            ),
        ))
    }
}

const READER: &str = PROGRAM;

/// The value of `key` in a header line, which holds one or two `Key : value` pairs
/// (` Dual-port       : OFF\t\tDevice         : mlx5_0`). perftest separates the pairs
/// with tabs; a copy from a terminal or a page may have turned them into spaces, so a
/// value ends at a tab, at two spaces, or at the line's end.
fn header_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(at) = line[from..].find(key).map(|i| i + from) {
        from = at + key.len();
        let starts_word = line[..at].chars().next_back().is_none_or(char::is_whitespace);
        let rest = line[from..].trim_start_matches(' ');
        if let (true, Some(value)) = (starts_word, rest.strip_prefix(':')) {
            let value = value.trim_start();
            let end = value
                .find('\t')
                .into_iter()
                .chain(value.find("  "))
                .min()
                .unwrap_or(value.len());
            return Some(value[..end].trim_end());
        }
    }
    None
}

/// The column of `BW average` in a results header, counting `BW peak[...]` as one column,
/// and the unit in its brackets.
fn average_column(header: &str) -> Result<(usize, BwUnit), EngineError> {
    let mut columns = 0;
    let mut words = header.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if w == "BW" {
            let Some(next) = words.next() else { break };
            if let Some(unit) = next.strip_prefix("average[").and_then(|u| u.strip_suffix(']')) {
                let unit = BwUnit::from_header(unit).ok_or_else(|| {
                    malformed(
                        READER,
                        format!(
                            "the bandwidth unit `{}` is not one ib_write_bw prints",
                            excerpt(unit)
                        ),
                    )
                })?;
                return Ok((columns, unit));
            }
        }
        columns += 1;
    }
    Err(malformed(
        READER,
        "the results header has no `BW average[...]` column",
    ))
}

fn row(line: &str, column: usize) -> Result<RdmaRow, EngineError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < column + 2 || column < 3 {
        return Err(malformed(
            READER,
            format!("the result row `{}` has too few columns", excerpt(line.trim())),
        ));
    }
    let count = |what: &str, raw: &str| {
        raw.parse::<u64>()
            .map_err(|_| malformed(READER, format!("{what} `{}` is not a whole number", excerpt(raw))))
    };
    Ok(RdmaRow {
        bytes: count("#bytes", fields[0])?,
        iterations: count("#iterations", fields[column - 2])?,
        peak: measured(READER, "BW peak", fields[column - 1])?,
        average: measured(READER, "BW average", fields[column])?,
        msg_rate_mpps: measured(READER, "MsgRate", fields[column + 1])?,
    })
}

/// Reads an `ib_write_bw` report, the client's or the server's (which prints the client's
/// figures): the header (`RDMA_Write BW Test`, `Device`, `Number of qps`, `Link type`),
/// then the results table between its header (`#bytes #iterations BW peak[U] BW
/// average[U] MsgRate[Mpps]`) and the dashed line that closes it. Lines inside the table
/// that are not rows (perftest's `Conflicting CPU frequency values detected` warning) are
/// passed over. Refused, with the reason: an output over
/// [`crate::bench::engines::MAX_OUTPUT_BYTES`], a report of another test (a
/// bidirectional one counts both directions), no table, a table without rows or not
/// closed (the run was cut short), two tables, a unit or a number that is not one.
pub fn parse(text: &str) -> Result<RdmaRun, EngineError> {
    check_size(READER, text)?;
    let mut title = None;
    let mut device = None;
    let mut queue_pairs = None;
    let mut link_type = None;
    let mut table: Option<(usize, BwUnit)> = None;
    let mut rows = Vec::new();
    let mut closed = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("#bytes") {
            if table.is_some() {
                return Err(malformed(
                    READER,
                    "two results tables: not the report of one unidirectional run",
                ));
            }
            table = Some(average_column(t)?);
            continue;
        }
        if let Some((column, _)) = table {
            if closed {
                continue;
            }
            if t.starts_with("---") {
                closed = true;
            } else if t
                .split_whitespace()
                .next()
                .is_some_and(|w| w.bytes().all(|b| b.is_ascii_digit()))
            {
                rows.push(row(t, column)?);
            }
            continue;
        }
        if t.ends_with(" Test") && title.is_none() {
            title = Some(t.to_string());
            continue;
        }
        if let Some(v) = header_value(line, "Device") {
            device = Some(crate::text::terminal_safe(v));
        }
        if let Some(v) = header_value(line, "Number of qps") {
            queue_pairs = Some(v.parse::<u32>().map_err(|_| {
                malformed(
                    READER,
                    format!("`Number of qps` `{}` is not a number", excerpt(v)),
                )
            })?);
        }
        if let Some(v) = header_value(line, "Link type") {
            link_type = Some(crate::text::terminal_safe(v));
        }
    }
    match title.as_deref() {
        Some("RDMA_Write BW Test") => {}
        Some(other) => {
            return Err(malformed(
                READER,
                format!(
                    "the report is of `{}`, not `RDMA_Write BW Test` (ib_write_bw, one direction)",
                    excerpt(other)
                ),
            ));
        }
        None => return Err(malformed(READER, "no `RDMA_Write BW Test` header")),
    }
    let Some((_, unit)) = table else {
        return Err(malformed(
            READER,
            "no results table (`#bytes #iterations BW peak ... BW average ...`): the run did not report",
        ));
    };
    if rows.is_empty() {
        return Err(malformed(
            READER,
            "the results table has no row: the run was cut short",
        ));
    }
    if !closed {
        return Err(malformed(
            READER,
            "the results table is not closed by its dashed line: the output was cut short",
        ));
    }
    Ok(RdmaRun {
        device,
        queue_pairs,
        link_type,
        unit,
        rows,
    })
}

// ---------------------------------------------------------------------------------------
// The device.

/// An RDMA device and port to run on.
#[derive(Debug, Clone, PartialEq)]
pub struct RdmaDevice {
    /// The device (`mlx5_0`), as `ib_write_bw -d` takes it.
    pub name: String,
    /// The port (`ib_write_bw -i`); `None`: perftest's default, port 1.
    pub port: Option<u32>,
    /// `InfiniBand` or `Ethernet` (RoCE), from sysfs.
    pub link_layer: Option<String>,
    /// The port's rate in Gb/s, from sysfs.
    pub rate_gbps: Option<f64>,
}

impl RdmaDevice {
    /// `mlx5_0 port 1 (InfiniBand, 200 Gb/s)`.
    pub fn describe(&self) -> String {
        let port = self.port.map(|p| format!(" port {p}")).unwrap_or_default();
        let facts: Vec<String> = self
            .link_layer
            .iter()
            .cloned()
            .chain(self.rate_gbps.map(|r| format!("{r} Gb/s")))
            .collect();
        let facts = if facts.is_empty() {
            String::new()
        } else {
            format!(" ({})", facts.join(", "))
        };
        format!("{}{port}{facts}", self.name)
    }
}

/// The longest device name the kernel gives (`IB_DEVICE_NAME_MAX`).
const MAX_DEVICE_NAME: usize = 64;

/// Whether `name` can be an RDMA device's name: what the kernel names them (`mlx5_0`,
/// `rocep1s0f1`, `ibp5`), and nothing a command line or the session's lines would read
/// otherwise (no space, no leading `-`).
fn device_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_DEVICE_NAME
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// `--rdma-device DEV[:PORT]` read: a device name and a port from 1 to 255.
pub fn parse_device(text: &str) -> Result<(String, Option<u32>), String> {
    let (name, port) = match text.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (text, None),
    };
    let bad = || {
        format!(
            "--rdma-device `{}`: expected DEVICE or DEVICE:PORT, as /sys/class/infiniband names them (`mlx5_0`, `mlx5_0:1`)",
            excerpt(text)
        )
    };
    if !device_name_ok(name) {
        return Err(bad());
    }
    let port = match port {
        Some(p) => Some(
            p.parse::<u32>()
                .ok()
                .filter(|p| (1..=255).contains(p))
                .ok_or_else(bad)?,
        ),
        None => None,
    };
    Ok((name.to_string(), port))
}

/// Every RDMA port sysfs lists, in order of device and port, with its state.
fn sysfs_ports(sys: &dyn System) -> Vec<(RdmaDevice, Option<String>)> {
    let mut ports = Vec::new();
    for dev in sys.list("/sys/class/infiniband").unwrap_or_default() {
        if !device_name_ok(&dev) {
            continue;
        }
        let mut numbers: Vec<u32> = sys
            .list(&format!("/sys/class/infiniband/{dev}/ports"))
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        numbers.sort_unstable();
        for port in numbers {
            let dir = format!("/sys/class/infiniband/{dev}/ports/{port}");
            let read = |f: &str| sys.read(&format!("{dir}/{f}"));
            ports.push((
                RdmaDevice {
                    name: dev.clone(),
                    port: Some(port),
                    link_layer: read("link_layer").and_then(|t| crate::host::parse::sysfs_word(&t)),
                    rate_gbps: read("rate").and_then(|t| crate::host::parse::rdma_rate_gbps(&t)),
                },
                read("state").and_then(|t| crate::host::parse::rdma_state(&t)),
            ));
        }
    }
    ports
}

/// The device to run on: `wanted` (`--rdma-device DEV[:PORT]`; its port, or the device's
/// first active one), else the first port whose state is `ACTIVE` under
/// `/sys/class/infiniband`. A wanted device sysfs does not list is used as given, so that
/// `ib_write_bw` says itself what is wrong with it. `Err` says why there is none.
pub fn pick_device(sys: &dyn System, wanted: Option<&str>) -> Result<RdmaDevice, String> {
    let ports = sysfs_ports(sys);
    let active = |name: Option<&str>| {
        ports
            .iter()
            .find(|(d, state)| state.as_deref() == Some("ACTIVE") && name.is_none_or(|n| n == d.name))
            .map(|(d, _)| d.clone())
    };
    match wanted {
        Some(text) => {
            let (name, port) = parse_device(text)?;
            let listed = match port {
                Some(p) => ports
                    .iter()
                    .find(|(d, _)| d.name == name && d.port == Some(p))
                    .map(|(d, _)| d.clone()),
                None => active(Some(&name)),
            };
            Ok(listed.unwrap_or(RdmaDevice {
                name,
                port,
                link_layer: None,
                rate_gbps: None,
            }))
        }
        None => active(None).ok_or_else(|| {
            if ports.is_empty() {
                "no RDMA device under /sys/class/infiniband".to_string()
            } else {
                format!(
                    "no RDMA port is ACTIVE under /sys/class/infiniband ({} port{} listed); give --rdma-device DEV[:PORT]",
                    ports.len(),
                    if ports.len() == 1 { "" } else { "s" }
                )
            }
        }),
    }
}

// ---------------------------------------------------------------------------------------
// The command lines.

fn common_args(dev: &RdmaDevice, port: u16, seconds: u64) -> Vec<String> {
    let mut a = vec!["-d".to_string(), dev.name.clone()];
    if let Some(p) = dev.port {
        a.extend(["-i".to_string(), p.to_string()]);
    }
    a.extend([
        "-p".to_string(),
        port.to_string(),
        "-s".to_string(),
        MESSAGE_BYTES.to_string(),
        "-q".to_string(),
        QUEUE_PAIRS.to_string(),
        "-D".to_string(),
        seconds.to_string(),
        // "Do not fail even if cpufreq_ondemand module is loaded" (perftest's README): a
        // rented host's governor is not ours to change; Azure's health checks and
        // SuperBench run it with `-F` too.
        "-F".to_string(),
        "--report_gbits".to_string(),
    ]);
    a
}

/// The listener's side: `ib_write_bw -d DEV [-i PORT] -p TCP_PORT -s 1048576 -q 1 -D
/// SECONDS -F --report_gbits`. Both sides take the same options; perftest requires it of
/// the message size, the queue pairs and the unit.
pub fn server_args(dev: &RdmaDevice, tcp_port: u16, seconds: u64) -> Vec<String> {
    common_args(dev, tcp_port, seconds)
}

/// The client's side: the server's options and the listener's address.
pub fn client_args(dev: &RdmaDevice, tcp_port: u16, seconds: u64, host: &str) -> Vec<String> {
    let mut a = common_args(dev, tcp_port, seconds);
    a.push(host.to_string());
    a
}

// ---------------------------------------------------------------------------------------
// The session: shared pieces.

/// Reads one line of at most [`MAX_REPLY`] bytes, waiting at most until `until`, checking
/// for SIGINT/SIGTERM each second. Partial reads across timeouts are kept (`read_until`
/// leaves what it read in the buffer when it fails).
fn read_line_until(reader: &mut BufReader<TcpStream>, until: Instant) -> Result<String, String> {
    let mut line = Vec::new();
    loop {
        if crate::interrupt::requested().is_some() {
            return Err("stopped by a signal".into());
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no answer in time".into());
        }
        reader
            .get_ref()
            .set_read_timeout(Some(left.min(Duration::from_secs(1))))
            .map_err(|e| e.to_string())?;
        let room = MAX_REPLY.saturating_sub(line.len() as u64);
        match reader.by_ref().take(room).read_until(b'\n', &mut line) {
            Ok(0) if line.is_empty() => return Err("the connection closed".into()),
            Ok(_) if line.last() == Some(&b'\n') => break,
            Ok(_) if line.len() as u64 >= MAX_REPLY => {
                return Err(format!("no line end within {MAX_REPLY} bytes"));
            }
            Ok(0) => return Err("the connection closed inside a line".into()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading: {e}")),
        }
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// `: WHAT IT SAID` from a program's standard error, made safe; empty when it said nothing.
fn said(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {}", excerpt(text))
    }
}

/// How a program ended, in a few words, with an excerpt of its standard error.
fn how_it_ended(status: Option<i32>, timed_out: bool, stderr: &[u8], limit: Duration) -> String {
    let said = said(stderr);
    match (status, timed_out) {
        (Some(0), _) => "ended normally".into(),
        (Some(n), _) => format!("exited with status {n}{said}"),
        (None, true) => format!("was killed after {} s{said}", limit.as_secs()),
        (None, false) => format!("was stopped{said}"),
    }
}

fn cmd_ended(out: &CmdOutput, limit: Duration) -> String {
    match &out.outcome {
        Outcome::Exited => how_it_ended(out.status, false, out.stderr.as_bytes(), limit),
        Outcome::TimedOut => how_it_ended(None, true, out.stderr.as_bytes(), limit),
        Outcome::NotFound => "is not installed here".into(),
        Outcome::Failed(e) => format!("could not be started: {}", excerpt(e)),
    }
}

// ---------------------------------------------------------------------------------------
// The listener's side.

/// What a listener needs to serve RDMA sessions.
pub struct ServerConfig {
    /// The program to run (`ib_write_bw`, or a path).
    pub program: String,
    /// `--rdma-device` on the listener.
    pub device: Option<String>,
    /// Reads sysfs (the devices) and `/proc/net/tcp` (whether the server listens).
    pub system: Arc<dyn System>,
    /// How long the server is waited for once the client's run is done.
    pub grace: Duration,
    /// Held while a session runs: one RDMA test at a time shares the link with no other.
    busy: Mutex<()>,
}

impl ServerConfig {
    /// A listener's configuration: `ib_write_bw` from `PATH`, [`SERVER_GRACE`].
    pub fn new(system: Arc<dyn System>, device: Option<String>) -> ServerConfig {
        ServerConfig {
            program: PROGRAM.into(),
            device,
            system,
            grace: SERVER_GRACE,
            busy: Mutex::new(()),
        }
    }
}

/// Whether `/proc/net/tcp` (or `tcp6`) text lists a socket in state LISTEN (`0A`) on
/// `port`: the columns are `sl local_address rem_address st ...`, the local address
/// `HEXADDR:HEXPORT` (the kernel's `tcp4_seq_show`).
pub fn proc_net_tcp_listens(text: &str, port: u16) -> bool {
    text.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 3
            && fields[3] == "0A"
            && fields[1]
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                == Some(port)
    })
}

/// Whether something listens on TCP `port` here. perftest's server prints that it waits
/// for a client with `printf`, which a pipe buffers until it exits, so its output cannot
/// say when it is ready; the kernel's socket table can. The table lists listening sockets
/// first, so the bounded read of [`System::read`] holds them.
fn listening(sys: &dyn System, port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|f| sys.read(f).is_some_and(|t| proc_net_tcp_listens(&t, port)))
}

/// The TCP port the server takes: the listener's own port + 1 where free (one rule to
/// open in a firewall), else one the system picks.
fn server_port(control: u16) -> Result<u16, String> {
    if let Some(next) = control.checked_add(1) {
        if TcpListener::bind(("0.0.0.0", next)).is_ok() {
            return Ok(next);
        }
    }
    TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free TCP port for ib_write_bw: {e}"))
}

/// Serves one RDMA session on a connection that passed the hello (see the module doc);
/// `config` is `None` on a listener started without RDMA. `Err` says what went wrong
/// with the client, for the listener to report; the server is never left running.
pub fn serve_session(
    mut reader: BufReader<TcpStream>,
    mut writer: TcpStream,
    config: Option<&ServerConfig>,
) -> Result<(), String> {
    let start = read_line_until(&mut reader, Instant::now() + IO_WAIT)?;
    let seconds = match start.strip_prefix("start ").map(|n| n.parse::<u64>()) {
        Some(Ok(n)) if (1..=MAX_SECONDS).contains(&n) => n,
        _ => {
            let _ = writeln!(writer, "error expected `start SECONDS` (1 to {MAX_SECONDS})");
            return Err(format!("not an RDMA session start: `{}`", excerpt(&start)));
        }
    };
    let skip = |writer: &mut TcpStream, why: &str| {
        let _ = writeln!(writer, "skip {why}");
    };
    let Some(config) = config else {
        skip(&mut writer, "this listener was started without RDMA");
        return Ok(());
    };
    let _busy = match config.busy.try_lock() {
        Ok(guard) => guard,
        // A session that panicked held it; the server it started was killed on unwinding.
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            skip(
                &mut writer,
                "it is measuring RDMA with another node now; run again when that is done",
            );
            return Ok(());
        }
    };
    if config
        .system
        .run_for(&config.program, &["--version"], IO_WAIT)
        .outcome
        == Outcome::NotFound
    {
        skip(&mut writer, "perftest's ib_write_bw is not installed there");
        return Ok(());
    }
    let device = match pick_device(config.system.as_ref(), config.device.as_deref()) {
        Ok(d) => d,
        Err(why) => {
            skip(&mut writer, &excerpt(&why));
            return Ok(());
        }
    };
    let control = writer.local_addr().map(|a| a.port()).unwrap_or(DEFAULT_PORT);
    let port = match server_port(control) {
        Ok(p) => p,
        Err(why) => {
            skip(&mut writer, &excerpt(&why));
            return Ok(());
        }
    };
    let args = server_args(&device, port, seconds);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let limit = Duration::from_secs(seconds) + RUN_MARGIN;
    let mut server = match Background::spawn(&config.program, &args, limit, MAX_OUTPUT) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skip(&mut writer, "perftest's ib_write_bw is not installed there");
            return Ok(());
        }
        Err(e) => {
            skip(
                &mut writer,
                &format!("ib_write_bw could not be started: {}", excerpt(&e.to_string())),
            );
            return Ok(());
        }
    };
    let waiting = Instant::now();
    loop {
        if !server.running() {
            let ran = server.finish(Duration::ZERO);
            skip(
                &mut writer,
                &format!(
                    "its ib_write_bw server {} before it listened",
                    how_it_ended(ran.status, ran.timed_out, &ran.stderr, limit)
                ),
            );
            return Ok(());
        }
        if listening(config.system.as_ref(), port) {
            break;
        }
        if waiting.elapsed() >= READY_WAIT || crate::interrupt::requested().is_some() {
            let stderr = server.stderr_so_far();
            drop(server);
            skip(
                &mut writer,
                &format!(
                    "its ib_write_bw server did not listen on TCP port {port} within {} s and was stopped{}",
                    READY_WAIT.as_secs(),
                    said(&stderr)
                ),
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    writeln!(writer, "ready {port} {}", device.name).map_err(|e| e.to_string())?;
    // The client runs for its seconds and may take RUN_MARGIN more to start and report.
    let done = read_line_until(&mut reader, Instant::now() + limit + IO_WAIT);
    match done.as_deref() {
        Ok(word @ ("done" | "abort")) => {
            // After a failed run the server may wait for a client that never comes.
            let wait = if word == "done" {
                config.grace
            } else {
                Duration::ZERO
            };
            let ran = server.finish(wait);
            let _ = writeln!(
                writer,
                "ended {}",
                how_it_ended(ran.status, ran.timed_out, &ran.stderr, limit)
            );
            Ok(())
        }
        Ok(other) => Err(format!(
            "expected `done` or `abort` after the RDMA run, got `{}`; its ib_write_bw server was stopped",
            excerpt(other)
        )),
        Err(why) => Err(format!(
            "the RDMA session ended before the client said `done` ({why}); its ib_write_bw server was stopped"
        )),
    }
}

// ---------------------------------------------------------------------------------------
// The client's side.

/// What a client measures.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    /// `HOST` or `HOST:PORT` of `gpuenv bench net --listen`.
    pub peer: String,
    /// Seconds of the run (`ib_write_bw -D`).
    pub seconds: u64,
    /// `--rdma-device` here.
    pub device: Option<String>,
    /// The program to run (`ib_write_bw`, or a path).
    pub program: String,
}

/// Opens the session: connects, says the `rdma` hello and reads the answer.
fn open(peer: &str) -> Result<(BufReader<TcpStream>, TcpStream, IpAddr), String> {
    let addrs: Vec<SocketAddr> = resolve(peer, DEFAULT_PORT).map_err(|e| e.to_string())?;
    let stream = addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, IO_WAIT).ok())
        .ok_or_else(|| format!("cannot connect to `{}`", excerpt(peer)))?;
    let ip = stream.peer_addr().map_err(|e| e.to_string())?.ip();
    stream
        .set_write_timeout(Some(IO_WAIT))
        .map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    writeln!(writer, "{MAGIC} {VERSION} rdma").map_err(|e| format!("cannot send the hello: {e}"))?;
    let mut reader = BufReader::new(stream);
    let answer = read_line_until(&mut reader, Instant::now() + IO_WAIT)
        .map_err(|why| format!("no answer to the RDMA hello: {why}"))?;
    if answer == format!("{MAGIC} {VERSION} ok") {
        return Ok((reader, writer, ip));
    }
    if answer.starts_with(&format!("{MAGIC} {VERSION} error")) {
        return Err(format!(
            "the gpuenv listening there does not measure RDMA (it answered `{}`); run a gpuenv that does on both nodes",
            excerpt(&answer)
        ));
    }
    Err(format!(
        "the peer did not answer as `gpuenv bench net --listen`; it said `{}`",
        excerpt(&answer)
    ))
}

/// Measures RDMA write bandwidth to the listener at `plan.peer`: asks it to start its
/// `ib_write_bw` server, runs the client through `sys` (so that a recorded bench keeps its
/// output) and reads the client's report. `Err` is the reason it was not measured, for a
/// bench's `skipped`: never an error of the whole bench.
pub fn measure(sys: &dyn System, plan: &ClientPlan) -> Result<Figure, String> {
    if !(1..=MAX_SECONDS).contains(&plan.seconds) {
        return Err(format!("{} s: expected 1 to {MAX_SECONDS}", plan.seconds));
    }
    let probe = sys.run_for(&plan.program, &["--version"], IO_WAIT);
    if probe.outcome == Outcome::NotFound {
        return Err("perftest's ib_write_bw is not installed here".into());
    }
    let device = pick_device(sys, plan.device.as_deref())?;
    let peer = excerpt(&plan.peer);
    let (mut reader, mut writer, ip) = open(&plan.peer).map_err(|why| format!("peer `{peer}`: {why}"))?;
    if ip.is_ipv6() {
        // perftest exchanges its queue pairs over IPv4 unless both sides are given
        // `--ipv6`; an IPv6 peer address would be refused by the server.
        return Err(format!(
            "peer `{peer}` was reached over IPv6 ({ip}); ib_write_bw's exchange runs over IPv4: give the peer's IPv4 address"
        ));
    }
    writeln!(writer, "start {}", plan.seconds).map_err(|e| format!("peer `{peer}`: {e}"))?;
    let ready = read_line_until(&mut reader, Instant::now() + READY_WAIT + IO_WAIT)
        .map_err(|why| format!("peer `{peer}` did not start its ib_write_bw server: {why}"))?;
    let (port, remote) = match ready.split_once(' ') {
        Some(("ready", rest)) => {
            let (port, name) = rest.split_once(' ').unwrap_or((rest, ""));
            match (port.parse::<u16>(), device_name_ok(name)) {
                (Ok(p), true) if p > 0 => (p, name.to_string()),
                _ => {
                    return Err(format!(
                        "peer `{peer}` answered `{}`, not `ready PORT DEVICE`",
                        excerpt(&ready)
                    ));
                }
            }
        }
        Some(("skip", why)) => return Err(format!("peer `{peer}`: {}", excerpt(why))),
        _ => {
            return Err(format!(
                "peer `{peer}` answered `{}`, not `ready PORT DEVICE`",
                excerpt(&ready)
            ));
        }
    };
    let args = client_args(&device, port, plan.seconds, &ip.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let limit = Duration::from_secs(plan.seconds) + RUN_MARGIN;
    let out = sys.run_for(&plan.program, &args, limit);
    // Whatever the run gave, the listener is told, so that it stops its server now.
    let server = writeln!(writer, "{}", if out.ok() { "done" } else { "abort" })
        .map_err(|e| e.to_string())
        .and_then(|()| read_line_until(&mut reader, Instant::now() + SERVER_GRACE + IO_WAIT))
        .map(|l| {
            let how = l.strip_prefix("ended ").unwrap_or(&l);
            format!("its server {}", excerpt(how))
        })
        .unwrap_or_else(|why| format!("its server's end unknown ({why})"));
    if let Some(sig) = crate::interrupt::requested() {
        return Err(format!("stopped by {sig}"));
    }
    if !out.ok() {
        return Err(format!(
            "ib_write_bw to {ip} port {port} {}; on peer `{peer}` {server}",
            cmd_ended(&out, limit)
        ));
    }
    let run = parse(&out.stdout).map_err(|e| e.to_string())?;
    let context = format!(
        "to peer `{peer}` ({ip}) for {} s, from {} to its {remote}",
        plan.seconds,
        device.describe()
    );
    run.figure(&context)
        .ok_or_else(|| "ib_write_bw reported no result row".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::system::{HostRecord, Recording};

    const A40_CLIENT: &str =
        include_str!("../../../tests/fixtures/bench/perftest/rocev2-a40-16qp-D60-gbits-client.txt");
    const A40_SERVER: &str =
        include_str!("../../../tests/fixtures/bench/perftest/rocev2-a40-16qp-D60-gbits-server.txt");
    const FDR_CLIENT: &str = include_str!("../../../tests/fixtures/bench/perftest/fdr-mlx4-mbsec-client.txt");
    const FDR_SERVER: &str = include_str!("../../../tests/fixtures/bench/perftest/fdr-mlx4-mbsec-server.txt");
    const CX5_CLIENT: &str =
        include_str!("../../../tests/fixtures/bench/perftest/roce-100g-rdmacm-gbits-client.txt");

    const CAPTURES: [&str; 5] = [A40_CLIENT, A40_SERVER, FDR_CLIENT, FDR_SERVER, CX5_CLIENT];

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn a_timed_run_in_gigabits_from_both_sides() {
        for text in [A40_CLIENT, A40_SERVER] {
            let run = parse(text).unwrap();
            assert_eq!(run.device.as_deref(), Some("mlx5_1"));
            assert_eq!(run.queue_pairs, Some(16));
            assert_eq!(run.link_type.as_deref(), Some("Ethernet"));
            assert_eq!(run.unit, BwUnit::Gigabits);
            assert_eq!(
                run.rows,
                vec![RdmaRow {
                    bytes: 65536,
                    iterations: 10_384_867,
                    peak: 0.0,
                    average: 181.46,
                    msg_rate_mpps: 0.3461,
                }]
            );
            // 181.46 Gb/s is 22.6825 GB/s: Gb is 10^9 bits (perftest's 125000000-byte
            // format factor).
            let f = run.figure("to peer `x`").unwrap();
            assert_eq!(f.metric, Metric::NetworkRdma);
            assert_eq!(f.engine, Engine::Perftest);
            assert_eq!(f.unit, "GB/s");
            assert!(close(f.value, 22.6825), "{}", f.value);
            assert!(f.detail.contains("16 queue pairs"), "{}", f.detail);
            assert!(f.detail.contains("device mlx5_1"), "{}", f.detail);
            assert!(f.detail.contains("65536 bytes"), "{}", f.detail);
            assert!(f.detail.contains("181.46 Gb/s"), "{}", f.detail);
        }
    }

    #[test]
    fn the_old_mb_per_sec_label_is_mebibytes() {
        // 6033.76 "MB/sec" on 4x FDR: perftest divided by 0x100000, so 6.3269 GB/s
        // decimal; read as 10^6 bytes it would be 6.0338, 5% low.
        for text in [FDR_CLIENT, FDR_SERVER] {
            let run = parse(text).unwrap();
            assert_eq!(run.unit, BwUnit::Mebibytes);
            assert_eq!(run.device.as_deref(), Some("mlx4_0"));
            assert_eq!(run.link_type.as_deref(), Some("IB"));
            let row = run.largest().unwrap();
            assert_eq!((row.bytes, row.iterations), (65536, 5000));
            assert_eq!((row.peak, row.average), (6034.72, 6033.76));
            let f = run.figure("x").unwrap();
            assert!(close(f.value, 6033.76 * 1_048_576.0 / 1e9), "{}", f.value);
            assert!(f.detail.contains("6033.76 MiB/s"), "{}", f.detail);
        }
        let relabelled = FDR_CLIENT.replace("[MB/sec]", "[MiB/sec]");
        assert_eq!(parse(&relabelled).unwrap().unit, BwUnit::Mebibytes);
    }

    #[test]
    fn a_warning_inside_the_table_is_passed_over() {
        // DeepOps' 100 Gb/s RoCE run, "92.40Gb/s out of a 100Gbps NIC" as its text says.
        let run = parse(CX5_CLIENT).unwrap();
        assert_eq!(run.rows.len(), 1);
        assert_eq!(run.rows[0].average, 92.40);
        assert_eq!(run.rows[0].peak, 92.42);
        let f = run.figure("x").unwrap();
        assert!(close(f.value, 11.55), "{}", f.value);
        assert_eq!(run.queue_pairs, Some(1));
    }

    #[test]
    fn a_sweep_is_read_at_its_largest_message() {
        let sweep = FDR_CLIENT.replace(
            " 65536      5000             6034.72            6033.76\t\t   0.096540\n",
            " 2          5000           0.086643            0.086198            5.387353\n \
             65536      5000             6034.72            6033.76\t\t   0.096540\n \
             4096       5000             157.04             156.59 \t\t   4.778655\n",
        );
        let run = parse(&sweep).unwrap();
        assert_eq!(run.rows.len(), 3);
        assert_eq!(run.largest().unwrap().bytes, 65536);
    }

    #[test]
    fn cut_short_anywhere_is_refused_or_read_whole() {
        for text in CAPTURES {
            let whole = parse(text).unwrap();
            for (cut, _) in text.char_indices() {
                match parse(&text[..cut]) {
                    // A cut after the table's closing line reads the same run.
                    Ok(run) => assert_eq!(run.rows, whole.rows, "cut at {cut}"),
                    Err(e) => assert!(e.to_string().contains("ib_write_bw"), "{e}"),
                }
            }
            let table_end = text.find("#bytes").unwrap();
            let closing = text[table_end..].find("---").unwrap() + table_end;
            let e = parse(&text[..closing]).unwrap_err().to_string();
            assert!(e.contains("cut short"), "{e}");
        }
    }

    #[test]
    fn garbage_and_hostile_text_is_refused_with_the_reason() {
        for (text, want) in [
            ("", "no `RDMA_Write BW Test` header"),
            ("\u{1b}[2J\u{1b}]0;owned\u{7}", "no `RDMA_Write BW Test` header"),
            ("RDMA_Write BW Test\n", "no results table"),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n---\n",
                "no row",
            ),
            (
                "Send BW Test\n #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]\n 65536 5 1 1 1\n---\n",
                "not `RDMA_Write BW Test`",
            ),
            (
                "RDMA_Write Bidirectional BW Test\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5 1 1 1\n---\n",
                "one direction",
            ),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[TB/sec] BW average[TB/sec] MsgRate[Mpps]\n 65536 5 1 1 1\n---\n",
                "unit `TB/sec`",
            ),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5 1 NaN 1\n---\n",
                "BW average `NaN`",
            ),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5 1 -3 1\n---\n",
                "BW average `-3`",
            ),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5 1\n---\n",
                "too few columns",
            ),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 99999999999999999999 1 1 1\n---\n",
                "not a whole number",
            ),
            (
                "RDMA_Write BW Test\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5 1 1 1\n---\n #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n",
                "two results tables",
            ),
            (
                "RDMA_Write BW Test\n Number of qps   : \u{1b}[31mmany\n",
                "`Number of qps`",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.contains("`ib_write_bw`"), "{e}");
            assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "{e}");
        }
        // Escapes in a header value are made safe before they reach a detail.
        let hostile = FDR_CLIENT.replace(
            "Device         : mlx4_0",
            "Device         : mlx4_0\u{1b}]0;owned\u{7}",
        );
        let run = parse(&hostile).unwrap();
        let d = run.device.unwrap();
        assert!(!d.contains('\u{1b}') && !d.contains('\u{7}'), "{d:?}");
        let huge = "x".repeat(crate::bench::engines::MAX_OUTPUT_BYTES + 1);
        assert!(matches!(parse(&huge), Err(EngineError::TooLarge { .. })));
    }

    #[test]
    fn units_convert_as_perftest_computes_them() {
        // perftest: MiB = bytes / 0x100000, Gb = bytes / 125000000.
        let bytes_a_second = 25e9;
        assert!(close(
            BwUnit::Mebibytes.to_gb_per_s(bytes_a_second / 1_048_576.0),
            25.0
        ));
        assert!(close(
            BwUnit::Gigabits.to_gb_per_s(bytes_a_second / 125_000_000.0),
            25.0
        ));
    }

    fn sysfs(dirs: &[(&str, &[&str])], files: &[(&str, &str)]) -> Recording {
        let mut r = HostRecord {
            gpuenv_host_record: 1,
            ..HostRecord::default()
        };
        for (d, names) in dirs {
            r.dirs
                .insert(d.to_string(), Some(names.iter().map(|n| n.to_string()).collect()));
        }
        for (f, t) in files {
            r.files.insert(f.to_string(), Some(t.to_string()));
        }
        Recording::replay(r)
    }

    #[test]
    fn the_first_active_port_is_picked() {
        let sys = sysfs(
            &[
                ("/sys/class/infiniband", &["mlx5_0", "mlx5_1", "bad name"]),
                ("/sys/class/infiniband/mlx5_0/ports", &["1"]),
                ("/sys/class/infiniband/mlx5_1/ports", &["2", "1"]),
            ],
            &[
                ("/sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n"),
                ("/sys/class/infiniband/mlx5_1/ports/1/state", "2: INIT\n"),
                ("/sys/class/infiniband/mlx5_1/ports/2/state", "4: ACTIVE\n"),
                ("/sys/class/infiniband/mlx5_1/ports/2/link_layer", "InfiniBand\n"),
                (
                    "/sys/class/infiniband/mlx5_1/ports/2/rate",
                    "200 Gb/sec (4X HDR)\n",
                ),
            ],
        );
        let d = pick_device(&sys, None).unwrap();
        assert_eq!(d.describe(), "mlx5_1 port 2 (InfiniBand, 200 Gb/s)");
        assert_eq!(
            server_args(&d, 29572, 5),
            [
                "-d",
                "mlx5_1",
                "-i",
                "2",
                "-p",
                "29572",
                "-s",
                "1048576",
                "-q",
                "1",
                "-D",
                "5",
                "-F",
                "--report_gbits"
            ]
        );
        assert_eq!(client_args(&d, 29572, 5, "10.0.0.2").last().unwrap(), "10.0.0.2");
        // Asked for by name: that device, its active port; a port given is kept.
        assert_eq!(pick_device(&sys, Some("mlx5_1")).unwrap().port, Some(2));
        assert_eq!(pick_device(&sys, Some("mlx5_0:1")).unwrap().port, Some(1));
        // One sysfs does not list is taken as given, for ib_write_bw to judge.
        let given = pick_device(&sys, Some("rxe0")).unwrap();
        assert_eq!((given.name.as_str(), given.port), ("rxe0", None));
        assert!(!server_args(&given, 1, 1).contains(&"-i".to_string()));
        // None active, none at all: the reason.
        let down = sysfs(
            &[
                ("/sys/class/infiniband", &["mlx5_0"]),
                ("/sys/class/infiniband/mlx5_0/ports", &["1"]),
            ],
            &[("/sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n")],
        );
        assert!(
            pick_device(&down, None)
                .unwrap_err()
                .contains("no RDMA port is ACTIVE")
        );
        let none = sysfs(&[], &[]);
        assert!(pick_device(&none, None).unwrap_err().contains("no RDMA device"));
    }

    #[test]
    fn device_flags_that_are_not_devices_are_refused() {
        assert_eq!(parse_device("mlx5_0:1").unwrap(), ("mlx5_0".into(), Some(1)));
        assert_eq!(parse_device("rocep1s0f1").unwrap(), ("rocep1s0f1".into(), None));
        for bad in [
            "",
            "-d",
            "mlx5_0:0",
            "mlx5_0:x",
            "a b",
            "mlx5_0;rm",
            "x\u{1b}[2J",
            &"m".repeat(65),
        ] {
            let e = parse_device(bad).unwrap_err();
            assert!(e.contains("--rdma-device"), "{bad:?}: {e}");
            assert!(!e.contains('\u{1b}'), "{e}");
        }
    }

    /// `dir/ib_write_bw`: the stand-in of `tests/fixtures/bench/perftest/stand-in.sh`,
    /// expecting `-d mlx5_1`, its server or client failing with `server_fail` or
    /// `client_fail` (printf `%b` text) where not empty.
    fn stand_in(dir: &std::path::Path, server_fail: &str, client_fail: &str) -> String {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/bench/perftest/stand-in.sh"
        );
        let wrapper = format!(
            "#!/bin/sh\nexport STANDIN_DEVICE=mlx5_1 STANDIN_SERVER_FAIL='{server_fail}' STANDIN_CLIENT_FAIL='{client_fail}'\nexec sh {script} \"$@\"\n"
        );
        let path = dir.join("ib_write_bw");
        std::fs::write(&path, wrapper).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn real() -> Arc<dyn System> {
        Arc::new(crate::host::system::RealSystem {
            timeout: Duration::from_secs(120),
            docker: Box::new(|| Err("not used".into())),
        })
    }

    /// Serves `config` on loopback while `client` runs against its address; what the
    /// listener reported about its clients.
    fn with_listener<T>(config: Option<ServerConfig>, client: impl FnOnce(String) -> T) -> (T, Vec<String>) {
        let mut listener = super::super::net::Listener::bind("127.0.0.1:0").unwrap();
        if let Some(c) = config {
            listener = listener.with_rdma(c);
        }
        let addr = listener.local_addr().unwrap().to_string();
        let stop = listener.stopper();
        let refusals = Mutex::new(Vec::new());
        let got = std::thread::scope(|scope| {
            scope.spawn(|| listener.serve(Duration::from_secs(120), &|r| refusals.lock().unwrap().push(r)));
            let got = client(addr);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            got
        });
        (got, refusals.into_inner().unwrap())
    }

    fn plan(peer: String, program: &str) -> ClientPlan {
        ClientPlan {
            peer,
            seconds: 2,
            device: Some("mlx5_1".into()),
            program: program.into(),
        }
    }

    fn config(program: &str) -> ServerConfig {
        let mut c = ServerConfig::new(real(), Some("mlx5_1".into()));
        c.program = program.into();
        c.grace = Duration::from_secs(5);
        c
    }

    #[test]
    fn a_whole_session_runs_the_server_there_and_the_client_here() {
        let dir = tempfile::tempdir().unwrap();
        let program = stand_in(dir.path(), "", "");
        let (measured, refusals) = with_listener(Some(config(&program)), |addr| {
            measure(real().as_ref(), &plan(addr, &program))
        });
        let f = measured.unwrap();
        assert_eq!(f.metric, Metric::NetworkRdma);
        assert_eq!(f.engine, Engine::Perftest);
        assert!(close(f.value, 22.6825), "{}", f.value);
        assert!(f.detail.contains("to peer `127.0.0.1:"), "{}", f.detail);
        assert!(
            f.detail.contains("for 2 s, from mlx5_1 to its mlx5_1"),
            "{}",
            f.detail
        );
        assert!(refusals.is_empty(), "{refusals:?}");
        // A second session after the first: the lock was let go, the port is free again.
        let (again, _) = with_listener(Some(config(&program)), |addr| {
            measure(real().as_ref(), &plan(addr, &program))
        });
        assert!(again.is_ok(), "{again:?}");
    }

    #[test]
    fn what_fails_on_either_side_is_a_reason_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        // The server refuses to start, as perftest does when its port is taken.
        let failing = stand_in(dir.path(), " Couldn\\047t listen to port 18515", "");
        let (e, _) = with_listener(Some(config(&failing)), |addr| {
            measure(real().as_ref(), &plan(addr, &failing))
        });
        let e = e.unwrap_err();
        assert!(e.contains("exited with status 1: Couldn't listen to port"), "{e}");
        assert!(e.contains("before it listened"), "{e}");
        // The client fails after the server started: the server is stopped at once.
        let sub = dir.path().join("client-fails");
        std::fs::create_dir(&sub).unwrap();
        let client_fails = stand_in(&sub, "", " Unable to init the socket connection\\033[2J");
        let t = Instant::now();
        let (e, refusals) = with_listener(Some(config(&client_fails)), |addr| {
            measure(real().as_ref(), &plan(addr, &client_fails))
        });
        let e = e.unwrap_err();
        assert!(
            e.contains("exited with status 1: Unable to init the socket connection"),
            "{e}"
        );
        assert!(e.contains("its server was stopped"), "{e}");
        assert!(!e.contains('\u{1b}'), "{e}");
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        assert!(refusals.is_empty(), "{refusals:?}");
        // Not installed here, or there; a listener started without RDMA.
        let missing = dir.path().join("nothing-here").to_string_lossy().into_owned();
        let program = stand_in(dir.path(), "", "");
        let (e, _) = with_listener(Some(config(&program)), |addr| {
            measure(real().as_ref(), &plan(addr, &missing))
        });
        assert_eq!(e.unwrap_err(), "perftest's ib_write_bw is not installed here");
        let (e, _) = with_listener(Some(config(&missing)), |addr| {
            measure(real().as_ref(), &plan(addr, &program))
        });
        assert!(
            e.unwrap_err()
                .ends_with("perftest's ib_write_bw is not installed there")
        );
        let (e, _) = with_listener(None, |addr| measure(real().as_ref(), &plan(addr, &program)));
        assert!(e.unwrap_err().contains("started without RDMA"));
    }

    /// A fake listener: answers the hello with `hello`, then, after `start`, with `ready`.
    fn fake_peer(
        hello: &'static [u8],
        ready: &'static [u8],
    ) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut heard = Vec::new();
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            heard.push(std::mem::take(&mut line));
            let _ = w.write_all(hello);
            if r.read_line(&mut line).unwrap_or(0) > 0 {
                heard.push(std::mem::take(&mut line));
                let _ = w.write_all(ready);
            }
            heard
        });
        (addr, t)
    }

    #[test]
    fn an_old_listener_and_hostile_answers_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let program = stand_in(dir.path(), "", "");
        // What a listener without the `rdma` hello answers it (protocol 1 before it).
        let (addr, t) = fake_peer(
            b"gpuenv-bench-net 1 error expected `gpuenv-bench-net 1 sink|echo`\n",
            b"",
        );
        let e = measure(real().as_ref(), &plan(addr, &program)).unwrap_err();
        assert_eq!(t.join().unwrap(), ["gpuenv-bench-net 1 rdma\n"]);
        assert!(e.contains("does not measure RDMA"), "{e}");
        for (hello, ready, want) in [
            (
                &b"SSH-2.0-OpenSSH_9.2\x1b[2J\r\n"[..],
                &b""[..],
                "did not answer as `gpuenv bench net --listen`",
            ),
            (
                b"gpuenv-bench-net 1 ok\n",
                b"ready 0 mlx5_1\n",
                "not `ready PORT DEVICE`",
            ),
            (
                b"gpuenv-bench-net 1 ok\n",
                b"ready 99999 mlx5_1\n",
                "not `ready PORT DEVICE`",
            ),
            (
                b"gpuenv-bench-net 1 ok\n",
                b"ready 4000 mlx5_1;rm\n",
                "not `ready PORT DEVICE`",
            ),
            (
                b"gpuenv-bench-net 1 ok\n",
                b"ready 4000 \x1b]0;owned\x07\n",
                "not `ready PORT DEVICE`",
            ),
            (
                b"gpuenv-bench-net 1 ok\n",
                b"skip no \x1b[31mdevice\x07 here\n",
                "no device\\u{7} here",
            ),
            (
                b"gpuenv-bench-net 1 ok\n",
                b"",
                "did not start its ib_write_bw server",
            ),
        ] {
            let (addr, t) = fake_peer(hello, ready);
            let e = measure(real().as_ref(), &plan(addr, &program)).unwrap_err();
            t.join().unwrap();
            assert!(e.contains(want), "{ready:?}: {e}");
            assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "{e}");
        }
        // A peer that floods one line is cut at MAX_REPLY.
        let (addr, t) = fake_peer(
            b"gpuenv-bench-net 1 ok\n",
            Box::leak(vec![b'x'; 100_000].into_boxed_slice()),
        );
        let e = measure(real().as_ref(), &plan(addr, &program)).unwrap_err();
        let _ = t.join();
        assert!(e.contains("no line end within 4096 bytes"), "{e}");
    }

    #[test]
    fn a_listener_refuses_a_session_that_does_not_start() {
        let dir = tempfile::tempdir().unwrap();
        let program = stand_in(dir.path(), "", "");
        let (answer, refusals) = with_listener(Some(config(&program)), |addr| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"gpuenv-bench-net 1 rdma\nstart 99999\n").unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).unwrap();
            answer
        });
        assert_eq!(
            answer,
            "gpuenv-bench-net 1 ok\nerror expected `start SECONDS` (1 to 3600)\n"
        );
        assert!(
            refusals[0].contains("not an RDMA session start: `start 99999`"),
            "{refusals:?}"
        );
        // A client that leaves after `ready` stops the server; escapes it sends are made
        // safe in what the listener reports.
        let (answer, refusals) = with_listener(Some(config(&program)), |addr| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"gpuenv-bench-net 1 rdma\nstart 5\n").unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut lines = String::new();
            r.read_line(&mut lines).unwrap();
            r.read_line(&mut lines).unwrap();
            s.write_all(b"\x1b]0;owned\x07\n").unwrap();
            let _ = r.read_to_string(&mut lines);
            lines
        });
        assert!(answer.contains("\nready "), "{answer}");
        assert!(refusals[0].contains("expected `done` or `abort`"), "{refusals:?}");
        assert!(refusals[0].contains("server was stopped"), "{refusals:?}");
        assert!(
            !refusals[0].contains('\u{1b}') && !refusals[0].contains('\u{7}'),
            "{refusals:?}"
        );
    }

    /// Lines in the vocabulary of the report, so that generated text reaches the reader's
    /// inner branches rather than stopping at the first line.
    fn report_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("                    RDMA_Write BW Test".to_string()),
            Just(" Dual-port       : OFF\t\tDevice         : mlx5_0".to_string()),
            Just(" Number of qps   : 16            Transport type : IB".to_string()),
            Just(" Link type       : Ethernet".to_string()),
            Just(
                "---------------------------------------------------------------------------------------"
                    .to_string()
            ),
            Just(
                " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
                    .to_string()
            ),
            Just(
                " #bytes    #sl      #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
                    .to_string()
            ),
            Just(" 65536      10384867         0.00               181.46 \t\t     0.346100".to_string()),
            Just(String::new()),
            "[0-9a-zA-Z#:./ \\[\\]\t-]{0,40}",
            (0u64..u64::MAX, -1e300f64..1e300).prop_map(|(a, b)| format!(" {a} {a} {b} {b} {b}")),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        #[test]
        fn arbitrary_text_is_read_or_refused(text in ".{0,600}") {
            if let Ok(run) = parse(&text) {
                let _ = run.figure("x");
            }
        }

        #[test]
        fn report_shaped_text_is_read_or_refused(lines in proptest::collection::vec(report_line(), 0..40)) {
            if let Ok(run) = parse(&lines.join("\n")) {
                let f = run.figure("x").unwrap();
                proptest::prop_assert!(f.value.is_finite() && f.value >= 0.0);
            }
        }
    }

    #[test]
    fn the_socket_table_says_who_listens() {
        // /proc/net/tcp as Linux prints it: port 0x7383 = 29571 listening, 0x7384 connected.
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
            0: 00000000:7383 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   \
            1: 0100007F:7384 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n";
        assert!(proc_net_tcp_listens(table, 29571));
        assert!(!proc_net_tcp_listens(table, 29572));
        assert!(!proc_net_tcp_listens("garbage\n0: zz:zz zz 0A\n", 29571));
    }
}
