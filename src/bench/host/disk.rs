//! The data disk: sequential read and write, and 4 KiB random reads, timed by gpuenv.
//!
//! Owns: the checks made before a byte is written (a directory, not on the system disk
//! unless allowed, enough free space, a size under [`MAX_FILE_BYTES`]), the one test file
//! (created new under the directory, never following a link, removed when the measurement
//! ends, on an error, and on SIGINT or SIGTERM), and the timing. Must not: write anywhere
//! else, or keep anything.
//!
//! Why O_DIRECT: a read the page cache serves measures memory, not the disk. With
//! O_DIRECT every read and write goes to the device, so the file needs not be larger than
//! memory, and its size is the caller's choice below the cap. Where the filesystem refuses
//! O_DIRECT (tmpfs, some FUSE and network filesystems) the test falls back to buffered
//! I/O, says so in every figure's detail, flushes the written file and asks the kernel to
//! drop its cached pages (`posix_fadvise(DONTNEED)`) before reading it back.
//!
//! The method matches the `fio` jobs of [`super::fio::args`], so the two compare: one
//! thread, one request in flight (`psync`), [`SEQ_BLOCK`] blocks for the sequential passes
//! (the write timed up to its `fsync`), 4 KiB blocks at uniformly random aligned offsets
//! for the random reads, timed for a fixed duration.
//!
//! The pages of the buffer are part of what is measured. An O_DIRECT request carries the
//! buffer's pages as segments, one per run of physically adjacent pages; a block queue
//! takes at most `queue/max_segments` of them (254 on the virtio-blk disk measured), and a
//! virtual disk's host may handle each segment apart. Measured there (2026-12, kernel
//! 6.18, ext4, a 256 MiB file; the physical pages read from `/proc/self/pagemap`): 512 KiB
//! reads into a buffer of 1 to 3 segments ran at 2.2-2.7 GB/s, into one of 128 segments
//! at 1.1-1.5 GB/s, with nothing changed on the disk. Where a process's pages lie is luck
//! (what it and the machine freed before): fio, with the buffer its process's allocator
//! gives, went from one speed to the other between runs, 1.1 to 2.4 GB/s. Hence:
//! - the sequential passes' buffer is one transparent huge page where the kernel gives one
//!   (`MADV_HUGEPAGE`, confirmed by `MADV_COLLAPSE`): every request is one segment, and the
//!   figure is the disk's for the block, not the allocator's luck. The figures' details
//!   say which buffer was used. fio given a huge page too (`--mem=mmaphuge`,
//!   [`super::fio::Buffer::HugeTlb`]) measured the same there: 2.3-2.9 GB/s;
//! - 512 KiB blocks, not 1 MiB: without a huge page, 128 ordinary pages fit the queue
//!   whatever their placement, while 256 are split into two requests or not by luck
//!   (`/sys/block/vda/stat`: 256 or 512 reads for 256 MiB of 1 MiB reads).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::HostBenchError;
use crate::bench::{Engine, Figure, Metric};
use crate::files::shown;

/// The largest test file gpuenv writes: a typing slip in `--disk-size` cannot fill a disk.
pub const MAX_FILE_BYTES: u64 = 256 << 30;

/// The smallest test file: below this, the time of a pass is mostly its start.
pub const MIN_FILE_BYTES: u64 = 16 << 20;

/// Free space left over beyond the test file, so the test never fills the filesystem.
pub const FREE_MARGIN: u64 = 1 << 30;

/// The block of the sequential passes (why not larger: the module's doc).
pub const SEQ_BLOCK: usize = 512 << 10;

/// The block of the random reads.
pub const RAND_BLOCK: usize = 4096;

/// What to measure.
#[derive(Debug, Clone)]
pub struct DiskPlan {
    /// The directory the test file is made in.
    pub dir: PathBuf,
    /// The test file's size (rounded down to [`SEQ_BLOCK`]).
    pub file_bytes: u64,
    /// How long the random reads run.
    pub rand_duration: Duration,
    /// Whether a directory on the root filesystem's device may be written.
    pub allow_system_disk: bool,
}

/// Whether the test ran with O_DIRECT, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Io {
    /// Every read and write went to the device.
    Direct,
    /// The filesystem refused O_DIRECT: buffered I/O, with the reason.
    Buffered(String),
}

/// The checked plan: the directory as opened, the size, the test file's path.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The directory.
    pub dir: PathBuf,
    /// The file size, a whole number of [`SEQ_BLOCK`]s.
    pub file_bytes: u64,
    /// Free bytes in the directory's filesystem, before the test.
    pub free_bytes: u64,
}

/// Checks a plan before anything is written: the directory exists and is one, it is not
/// on the system disk (unless allowed), the size is within bounds, and the filesystem has
/// room for the file and [`FREE_MARGIN`].
pub fn check(plan: &DiskPlan) -> Result<Checked, HostBenchError> {
    let name = shown(&plan.dir);
    let meta = std::fs::metadata(&plan.dir).map_err(|e| {
        HostBenchError::Input(format!(
            "--path `{name}`: {}; expected an existing directory on the data disk",
            describe_io(&e)
        ))
    })?;
    if !meta.is_dir() {
        return Err(HostBenchError::Input(format!(
            "--path `{name}` is not a directory; expected a directory on the data disk to write the test file in"
        )));
    }
    let file_bytes = plan.file_bytes - plan.file_bytes % SEQ_BLOCK as u64;
    if !(MIN_FILE_BYTES..=MAX_FILE_BYTES).contains(&file_bytes) {
        return Err(HostBenchError::Input(format!(
            "--disk-size {} is out of range; expected between {} and {}",
            crate::files::bytes(plan.file_bytes),
            crate::files::bytes(MIN_FILE_BYTES),
            crate::files::bytes(MAX_FILE_BYTES)
        )));
    }
    if !plan.allow_system_disk {
        let root = std::fs::metadata("/")
            .map_err(|e| HostBenchError::Environment(format!("cannot read `/`: {}", describe_io(&e))))?;
        if root.dev() == meta.dev() {
            return Err(HostBenchError::Input(format!(
                "--path `{name}` is on the system disk (the filesystem of `/`); give a directory on the data disk, or --allow-system-disk to measure the system disk"
            )));
        }
    }
    let free_bytes = free_bytes(&plan.dir)?;
    enough_room(&name, file_bytes, free_bytes)?;
    Ok(Checked {
        dir: plan.dir.clone(),
        file_bytes,
        free_bytes,
    })
}

/// Whether `free` bytes hold a test file of `file_bytes` and [`FREE_MARGIN`].
pub fn enough_room(dir: &str, file_bytes: u64, free: u64) -> Result<(), HostBenchError> {
    let need = file_bytes.saturating_add(FREE_MARGIN);
    if free < need {
        return Err(HostBenchError::Input(format!(
            "--path `{dir}` has {} free; the test file of {} needs {} with the {} left free; choose a smaller --disk-size or another directory",
            crate::files::bytes(free),
            crate::files::bytes(file_bytes),
            crate::files::bytes(need),
            crate::files::bytes(FREE_MARGIN)
        )));
    }
    Ok(())
}

/// Bytes an unprivileged user may still write in the filesystem of `dir` (`statvfs`'s
/// `f_bavail` blocks of `f_frsize`).
pub fn free_bytes(dir: &Path) -> Result<u64, HostBenchError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| HostBenchError::Input(format!("--path `{}` holds a NUL byte", shown(dir))))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` a writable statvfs, as statvfs(3) asks.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(HostBenchError::Environment(format!(
            "cannot read the free space of `{}`: {}",
            shown(dir),
            describe_io(&e)
        )));
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    // fsblkcnt_t and c_ulong are 32 bits on some targets, so the casts are not always no-ops.
    #[allow(clippy::unnecessary_cast)]
    let (blocks, size) = (st.f_bavail as u64, st.f_frsize as u64);
    Ok(blocks.saturating_mul(size))
}

fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// The test file: removed when dropped, whatever ended the measurement.
struct TestFile {
    path: PathBuf,
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The size of a transparent huge page on x86-64, and on arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// A buffer of `len` bytes for O_DIRECT, on a private anonymous mapping of its own (so
/// its start is page-aligned, as O_DIRECT asks), filled with bytes that neither compress
/// nor deduplicate (some virtual disks do both). One of more than a page starts on a
/// [`HUGE_PAGE`] boundary and is asked to be one transparent huge page: `huge` says
/// whether the kernel gave one. Why: the module's doc.
struct Aligned {
    map: *mut libc::c_void,
    map_len: usize,
    start: *mut u8,
    len: usize,
    huge: bool,
}

impl Aligned {
    fn new(len: usize) -> std::io::Result<Aligned> {
        let wants_huge = len > 4096;
        let span = if wants_huge {
            len.div_ceil(HUGE_PAGE) * HUGE_PAGE
        } else {
            len
        };
        let map_len = if wants_huge { span + HUGE_PAGE } else { span };
        // SAFETY: a fresh private anonymous mapping; no memory of ours is touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let offset = if wants_huge {
            (map as usize).next_multiple_of(HUGE_PAGE) - map as usize
        } else {
            0
        };
        // SAFETY: `offset + span <= map_len`, so the range lies within the mapping.
        let start = unsafe { map.cast::<u8>().add(offset) };
        if wants_huge {
            // Advice only: where the kernel declines, the pages are ordinary ones.
            // SAFETY: the range lies within the mapping made above.
            unsafe { libc::madvise(start.cast(), span, libc::MADV_HUGEPAGE) };
        }
        let mut buf = Aligned {
            map,
            map_len,
            start,
            len,
            huge: false,
        };
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for chunk in buf.get().chunks_mut(8) {
            x = xorshift(x);
            let bytes = x.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        buf.huge = wants_huge && collapsed(start, span);
        Ok(buf)
    }

    fn get(&mut self) -> &mut [u8] {
        // SAFETY: `start..start + len` lies within the mapping, which lives as long as
        // `self`; the borrow of `self` keeps the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.start, self.len) }
    }

    /// What the figures' details say of the buffer.
    fn described(&self) -> &'static str {
        if self.huge {
            "from a buffer in one huge page"
        } else {
            "from a buffer of ordinary pages (the kernel gave no huge page)"
        }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Whether `start..start + span` is backed by huge pages, as `MADV_COLLAPSE` (Linux 6.1)
/// answers: it collapses the range into huge pages where it can, whatever the system's
/// THP setting, and succeeds at once where it already is one. Where it is unknown (an
/// older kernel, a C library without the constant), no huge page is claimed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn collapsed(start: *mut u8, span: usize) -> bool {
    // SAFETY: advice on a range of a mapping this module made.
    unsafe { libc::madvise(start.cast(), span, libc::MADV_COLLAPSE) == 0 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn collapsed(_start: *mut u8, _span: usize) -> bool {
    false
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// The test file's name: new for each run, so that it never meets a file of someone else.
fn test_file_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(".gpuenv-bench-{}-{nanos}.tmp", std::process::id())
}

/// Stops when SIGINT or SIGTERM asked gpuenv to.
fn stop_asked() -> Result<(), HostBenchError> {
    match crate::interrupt::requested() {
        Some(sig) => Err(HostBenchError::Interrupted(sig)),
        None => Ok(()),
    }
}

/// Measures the disk: checks the plan, then writes, reads back and randomly reads one
/// test file, which is removed before this returns.
pub fn measure(plan: &DiskPlan) -> Result<(Vec<Figure>, Io), HostBenchError> {
    let checked = check(plan)?;
    // Held while the test file exists: a signal lets the passes stop and remove it.
    let _hold = crate::interrupt::hold().map_err(HostBenchError::Interrupted)?;
    let path = checked.dir.join(test_file_name());
    let env = |what: &str, e: std::io::Error| {
        HostBenchError::Environment(format!("{what} `{}`: {}", shown(&path), describe_io(&e)))
    };
    let (file, io) = match open_new(&path, true) {
        Ok(f) => (f, Io::Direct),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let f = open_new(&path, false).map_err(|e| env("cannot create the test file", e))?;
            (
                f,
                Io::Buffered(
                    "the filesystem refuses O_DIRECT: buffered I/O, the page cache dropped before each read"
                        .into(),
                ),
            )
        }
        Err(e) => return Err(env("cannot create the test file", e)),
    };
    let guard = TestFile { path: path.clone() };
    let blocks = checked.file_bytes / SEQ_BLOCK as u64;

    // Blocks reserved first, as fio does by default (`fallocate=native`): the write then
    // times the device, not the filesystem's allocation of extents as the file grows. A
    // filesystem that cannot reserve leaves the write to allocate.
    preallocate(&file, checked.file_bytes);
    let (write_time, write_buffer) = {
        let mut file = file;
        let mut buf = Aligned::new(SEQ_BLOCK).map_err(no_buffer)?;
        let start = Instant::now();
        for _ in 0..blocks {
            stop_asked()?;
            file.write_all(buf.get())
                .map_err(|e| env("cannot write the test file", e))?;
        }
        file.sync_all()
            .map_err(|e| env("cannot flush the test file", e))?;
        (start.elapsed(), buf.described())
    };

    let reader = open_read(&guard.path, io == Io::Direct).map_err(|e| env("cannot open the test file", e))?;
    if io != Io::Direct {
        drop_cache(&reader);
    }
    let (read_time, read_buffer) = {
        let mut buf = Aligned::new(SEQ_BLOCK).map_err(no_buffer)?;
        let start = Instant::now();
        for i in 0..blocks {
            stop_asked()?;
            let at = i * SEQ_BLOCK as u64;
            reader
                .read_exact_at(buf.get(), at)
                .map_err(|e| env("cannot read the test file", e))?;
        }
        (start.elapsed(), buf.described())
    };

    if io != Io::Direct {
        drop_cache(&reader);
    }
    let mut small = Aligned::new(RAND_BLOCK).map_err(no_buffer)?;
    let slots = checked.file_bytes / RAND_BLOCK as u64;
    let mut x = 0x2545_F491_4F6C_DD1Du64 ^ u64::from(std::process::id());
    let mut ops: u64 = 0;
    let start = Instant::now();
    let rand_time = loop {
        let elapsed = start.elapsed();
        if elapsed >= plan.rand_duration {
            break elapsed;
        }
        if ops % 256 == 0 {
            stop_asked()?;
        }
        x = xorshift(x);
        let at = (x % slots) * RAND_BLOCK as u64;
        reader
            .read_exact_at(small.get(), at)
            .map_err(|e| env("cannot read the test file", e))?;
        ops += 1;
    };
    drop(reader);
    drop(guard);

    let how = match &io {
        Io::Direct => "O_DIRECT".to_string(),
        Io::Buffered(why) => why.clone(),
    };
    let size = crate::files::bytes(checked.file_bytes);
    let block = crate::files::bytes(SEQ_BLOCK as u64);
    let dir = shown(&checked.dir);
    let figures = vec![
        Figure::new(
            Metric::DiskSeqRead,
            rate(checked.file_bytes, read_time),
            Engine::Gpuenv,
            format!(
                "{size} read in {block} blocks, one at a time, {read_buffer}, {how}, in `{dir}`, {}",
                super::secs(read_time)
            ),
        ),
        Figure::new(
            Metric::DiskSeqWrite,
            rate(checked.file_bytes, write_time),
            Engine::Gpuenv,
            format!(
                "{size} written in {block} blocks, one at a time, {write_buffer}, then fsync, {how}, in `{dir}`, {}",
                super::secs(write_time)
            ),
        ),
        Figure::new(
            Metric::DiskRandRead,
            per_second(ops, rand_time),
            Engine::Gpuenv,
            format!(
                "{ops} reads of 4 KiB at random offsets of a {size} file, one at a time, {how}, in `{dir}`, {}",
                super::secs(rand_time)
            ),
        ),
    ];
    Ok((figures, io))
}

fn no_buffer(e: std::io::Error) -> HostBenchError {
    HostBenchError::Environment(format!("cannot map a buffer for the disk test: {e}"))
}

/// Decimal GB/s.
fn rate(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / took.as_secs_f64().max(1e-9) / 1e9
}

fn per_second(n: u64, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64().max(1e-9)
}

fn open_new(path: &Path, direct: bool) -> std::io::Result<File> {
    let flags = libc::O_NOFOLLOW | if direct { libc::O_DIRECT } else { 0 };
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(flags)
        .open(path)
}

fn open_read(path: &Path, direct: bool) -> std::io::Result<File> {
    let flags = libc::O_NOFOLLOW | if direct { libc::O_DIRECT } else { 0 };
    OpenOptions::new().read(true).custom_flags(flags).open(path)
}

fn preallocate(file: &File, bytes: u64) {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(bytes) else {
        return;
    };
    // SAFETY: a valid open descriptor and a length within off_t.
    unsafe {
        libc::posix_fallocate(file.as_raw_fd(), 0, len);
    }
}

/// Asks the kernel to forget the file's cached pages, so that buffered reads go to the
/// device (where the filesystem keeps its data elsewhere than the page cache).
fn drop_cache(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; the call only advises the kernel.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(dir: &Path, bytes: u64) -> DiskPlan {
        DiskPlan {
            dir: dir.to_path_buf(),
            file_bytes: bytes,
            rand_duration: Duration::from_millis(200),
            allow_system_disk: true,
        }
    }

    #[test]
    fn room_counts_the_margin() {
        assert!(enough_room("d", 1 << 30, (2 << 30) + 1).is_ok());
        let e = enough_room("d", 1 << 30, (2 << 30) - 1).unwrap_err().to_string();
        assert!(e.contains("free"), "{e}");
        assert!(enough_room("d", u64::MAX, u64::MAX - 1).is_err());
    }

    #[test]
    fn refuses_what_is_not_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert!(
            matches!(check(&plan(&f, 32 << 20)), Err(HostBenchError::Input(m)) if m.contains("not a directory"))
        );
        let missing = d.path().join("missing");
        assert!(
            matches!(check(&plan(&missing, 32 << 20)), Err(HostBenchError::Input(m)) if m.contains("does not exist"))
        );
    }

    #[test]
    fn refuses_sizes_out_of_range() {
        let d = tempfile::tempdir().unwrap();
        assert!(
            matches!(check(&plan(d.path(), 1 << 20)), Err(HostBenchError::Input(m)) if m.contains("out of range"))
        );
        assert!(check(&plan(d.path(), MAX_FILE_BYTES + (1 << 20))).is_err());
    }

    #[test]
    fn refuses_the_system_disk_unless_allowed() {
        let mut p = plan(Path::new("/"), 32 << 20);
        p.allow_system_disk = false;
        assert!(matches!(check(&p), Err(HostBenchError::Input(m)) if m.contains("system disk")));
    }

    #[test]
    fn measures_and_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let (figures, _io) = measure(&plan(d.path(), 16 << 20)).unwrap();
        assert_eq!(figures.len(), 3);
        assert!(figures.iter().all(|f| f.value > 0.0 && f.value.is_finite()));
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            0,
            "the test file is removed"
        );
    }
}
