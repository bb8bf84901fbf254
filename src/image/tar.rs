//! A streaming tar reader with bounds, for layers and for `docker save` archives.
//!
//! Owns: walking a tar stream header by header (ustar, GNU and PAX), exposing each entry's
//! data as a bounded reader and skipping what the caller does not read (by seeking, when
//! the caller hands it a seekable reader: an archive file's members are then passed over
//! without being read). Must not: allocate in proportion to anything the stream declares,
//! or touch the filesystem.
//!
//! Why not the `tar` crate: it reads GNU long names and PAX extension headers into memory
//! whatever size they declare, so a hostile layer could ask for gigabytes before the
//! first entry; it also cannot report a bad header checksum as corruption of a layer. Here
//! every metadata record is capped ([`MAX_META`]), header checksums are verified, and an
//! early end of stream is an error, never a short read taken for the end of a file.
//!
//! What is read: regular files (`0`, NUL, `7`), hard links (`1`), symlinks (`2`), devices
//! and FIFOs (`3`, `4`, `6`), directories (`5`), GNU long names and long link names (`L`,
//! `K`), PAX records (`x`: `path`, `linkpath`, `size`; `g` is read and ignored). GNU sparse
//! files (`S`) are reported as [`Kind::Other`]: their stored bytes are not the file.
//! Two zero blocks, or one followed by the end of the stream, end the archive. A stream
//! that ends exactly on a header boundary without them is, for an archive file or stream
//! ([`TarReader::requiring_end`]: `docker save` and OCI archives, which every writer ends
//! with the marker), truncated: cut between two members, it would otherwise read as a
//! whole archive that lacks what came after the cut. A layer is taken as ended there, as
//! Docker's own reader takes it (some writers omit the marker); its digest catches a cut.

use std::io::{self, Read};

use super::ImageError;

/// The size of a tar block.
const BLOCK: usize = 512;

/// The most bytes one metadata record (a GNU long name, a PAX header) may have. Real
/// ones are a few hundred bytes; Linux paths stop at 4 KiB.
pub const MAX_META: u64 = 64 * 1024;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A hard link to an earlier entry of the same archive.
    HardLink,
    /// A device, FIFO, sparse file or anything else.
    Other,
}

/// One entry's header, with long names and PAX records applied.
#[derive(Debug, Clone)]
pub struct Header {
    /// The path as stored (not normalized).
    pub path: Vec<u8>,
    /// The link target as stored (symlinks and hard links), empty otherwise.
    pub link: Vec<u8>,
    /// What the entry is.
    pub kind: Kind,
    /// The size of its data in the archive.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
}

/// A tar stream read entry by entry.
pub struct TarReader<R> {
    inner: R,
    /// Data (and padding) of the current entry not yet consumed.
    remaining: u64,
    padding: u64,
    /// Offset in the stream, for messages.
    offset: u64,
    done: bool,
    what: String,
    /// How to pass over data nobody reads without reading it, where the reader can.
    seek: Option<fn(&mut R, u64) -> io::Result<()>>,
    /// Whether an end of stream without the end-of-archive marker is a truncation.
    require_end: bool,
}

/// Moves a seekable reader `n` bytes on.
fn seek_on<R: io::Seek>(r: &mut R, n: u64) -> io::Result<()> {
    let n =
        i64::try_from(n).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a skip past 2^63 bytes"))?;
    r.seek(io::SeekFrom::Current(n)).map(drop)
}

impl<R: Read + io::Seek> TarReader<R> {
    /// [`TarReader::new`] over a seekable reader: data the caller does not read is passed
    /// over by seeking. A seek past the end is not an error by itself (the next header
    /// then finds the end of the stream), so the caller checks that each entry's data,
    /// from [`TarReader::position`], lies within the file.
    pub fn seekable(inner: R, what: impl Into<String>) -> Self {
        TarReader {
            seek: Some(seek_on::<R>),
            ..TarReader::new(inner, what)
        }
    }
}

impl<R: Read> TarReader<R> {
    /// Reads `inner` as a tar stream; `what` names it in errors ("layer 2").
    pub fn new(inner: R, what: impl Into<String>) -> Self {
        TarReader {
            inner,
            remaining: 0,
            padding: 0,
            offset: 0,
            done: false,
            what: what.into(),
            seek: None,
            require_end: false,
        }
    }

    /// Requires the end-of-archive marker: a non-empty stream that ends after a member
    /// without it is truncated, not ended. For archives; a layer is read without it.
    pub fn requiring_end(self) -> Self {
        TarReader {
            require_end: true,
            ..self
        }
    }

    /// The offset in the stream of what comes next: the start of an entry's data right
    /// after [`TarReader::next_header`] returned it.
    pub fn position(&self) -> u64 {
        self.offset
    }

    /// The reader underneath, for draining what follows the archive.
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The next entry's header, skipping whatever of the current entry was not read;
    /// `None` at the end of the archive.
    // One loop over the headers that extend the next entry (GNU long names and links, PAX
    // records): what each says is carried to the entry that follows, so they stay together.
    pub fn next_header(&mut self) -> Result<Option<Header>, ImageError> {
        if self.done {
            return Ok(None);
        }
        self.skip_rest()?;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax_path: Option<Vec<u8>> = None;
        let mut pax_link: Option<Vec<u8>> = None;
        let mut pax_size: Option<u64> = None;
        loop {
            // The padding after an extension header's data, on later rounds.
            self.skip_rest()?;
            let at = self.offset;
            let mut block = [0u8; BLOCK];
            if !self.read_block(&mut block)? {
                self.done = true;
                if long_name.is_some() || long_link.is_some() || pax_path.is_some() || pax_size.is_some() {
                    return Err(self.truncated(at, "the archive ends after an extension header"));
                }
                if self.require_end && at > 0 {
                    return Err(self.truncated(
                        at,
                        "the archive ends after a member, without the end-of-archive marker (two zero blocks) that ends a whole one",
                    ));
                }
                return Ok(None);
            }
            if block.iter().all(|&b| b == 0) {
                // The end-of-archive marker: the second zero block is optional in practice.
                self.done = true;
                return Ok(None);
            }
            verify_checksum(&block).map_err(|d| self.corrupt(at, &d))?;
            let typeflag = block[156];
            let size = parse_size(&block[124..136]).map_err(|d| self.corrupt(at, &d))?;
            match typeflag {
                b'L' | b'K' | b'x' | b'g' => {
                    if size > MAX_META {
                        return Err(ImageError::TooLarge {
                            path: format!("<tar metadata at byte {at}>"),
                            size,
                            limit: MAX_META,
                            what: "tar metadata",
                        });
                    }
                    self.start_data(size);
                    let mut data = Vec::with_capacity(size as usize);
                    self.read_data_to_end(&mut data)?;
                    match typeflag {
                        b'L' => long_name = Some(trim_nul(&data).to_vec()),
                        b'K' => long_link = Some(trim_nul(&data).to_vec()),
                        b'x' => {
                            let records = parse_pax(&data).map_err(|d| self.corrupt(at, &d))?;
                            for (key, value) in records {
                                match key {
                                    b"path" => pax_path = Some(value.to_vec()),
                                    b"linkpath" => pax_link = Some(value.to_vec()),
                                    b"size" => {
                                        let text = std::str::from_utf8(value).ok();
                                        let n =
                                            text.and_then(|t| t.parse::<u64>().ok()).ok_or_else(|| {
                                                self.corrupt(at, "a PAX `size` record that is not a number")
                                            })?;
                                        pax_size = Some(n);
                                    }
                                    _ => {}
                                }
                            }
                        }
                        // Global PAX headers carry defaults (mtime, charset) that change
                        // nothing detection reads.
                        _ => {}
                    }
                    continue;
                }
                _ => {}
            }
            let size = pax_size.unwrap_or(size);
            let ustar = &block[257..263] == b"ustar\0";
            let mut path = long_name.take().or(pax_path.take()).unwrap_or_else(|| {
                let name = trim_nul(&block[0..100]);
                let prefix = trim_nul(&block[345..500]);
                if ustar && !prefix.is_empty() {
                    let mut p = prefix.to_vec();
                    p.push(b'/');
                    p.extend_from_slice(name);
                    p
                } else {
                    name.to_vec()
                }
            });
            if path.is_empty() {
                return Err(self.corrupt(at, "an entry with an empty name"));
            }
            let link = long_link
                .take()
                .or(pax_link.take())
                .unwrap_or_else(|| trim_nul(&block[157..257]).to_vec());
            let kind = match typeflag {
                b'0' | 0 | b'7' => Kind::File,
                b'1' => Kind::HardLink,
                b'2' => Kind::Symlink,
                b'5' => Kind::Dir,
                _ => Kind::Other,
            };
            // Old (V7) archives mark directories only by a trailing slash.
            let kind = if kind == Kind::File && path.ends_with(b"/") {
                Kind::Dir
            } else {
                kind
            };
            if kind == Kind::Dir {
                while path.len() > 1 && path.ends_with(b"/") {
                    path.pop();
                }
            }
            let mode = parse_octal(&block[100..108]).unwrap_or(0) as u32;
            // Links and directories carry no data, whatever their size field says.
            let data = match kind {
                Kind::HardLink | Kind::Symlink | Kind::Dir => 0,
                _ => size,
            };
            self.start_data(data);
            return Ok(Some(Header {
                path,
                link,
                kind,
                size: data,
                mode,
            }));
        }
    }

    /// Reads the current entry's data, at most what it declared.
    pub fn read_data(&mut self, buf: &mut [u8]) -> Result<usize, ImageError> {
        if self.remaining == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = loop {
            match self.inner.read(&mut buf[..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ImageError::from_io(&self.what, e)),
            }
        };
        if n == 0 {
            let at = self.offset;
            return Err(self.truncated(at, "the stream ends inside an entry's data"));
        }
        self.remaining -= n as u64;
        self.offset += n as u64;
        Ok(n)
    }

    /// The current entry's data as an [`io::Read`]; errors come back as I/O errors that
    /// the layer reader maps back to image errors.
    pub fn data(&mut self) -> DataReader<'_, R> {
        DataReader {
            tar: self,
            error: None,
        }
    }

    fn read_data_to_end(&mut self, out: &mut Vec<u8>) -> Result<(), ImageError> {
        let mut buf = [0u8; 8192];
        loop {
            let n = self.read_data(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    fn start_data(&mut self, size: u64) {
        self.remaining = size;
        self.padding = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
    }

    /// Skips the unread data and padding of the current entry.
    fn skip_rest(&mut self) -> Result<(), ImageError> {
        let n = self.remaining + self.padding;
        if n == 0 {
            return Ok(());
        }
        if let Some(seek) = self.seek {
            seek(&mut self.inner, n).map_err(|e| ImageError::from_io(&self.what, e))?;
            self.offset = self.offset.saturating_add(n);
            self.remaining = 0;
            self.padding = 0;
            return Ok(());
        }
        let copied = io::copy(&mut (&mut self.inner).take(n), &mut io::sink())
            .map_err(|e| ImageError::from_io(&self.what, e))?;
        self.offset += copied;
        self.remaining = 0;
        self.padding = 0;
        if copied < n {
            let at = self.offset;
            return Err(self.truncated(at, "the stream ends inside an entry's data"));
        }
        Ok(())
    }

    /// Fills a whole block; `false` on a clean end of stream before its first byte.
    fn read_block(&mut self, block: &mut [u8; BLOCK]) -> Result<bool, ImageError> {
        let mut filled = 0;
        while filled < BLOCK {
            match self.inner.read(&mut block[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ImageError::from_io(&self.what, e)),
            }
        }
        self.offset += filled as u64;
        match filled {
            0 => Ok(false),
            BLOCK => Ok(true),
            _ => {
                let at = self.offset;
                Err(self.truncated(at, "the stream ends inside a header"))
            }
        }
    }

    fn truncated(&self, at: u64, detail: &str) -> ImageError {
        ImageError::Truncated {
            what: self.what.clone(),
            detail: format!("{detail} (at byte {at})"),
        }
    }

    fn corrupt(&self, at: u64, detail: &str) -> ImageError {
        ImageError::Corrupt {
            what: self.what.clone(),
            detail: format!("{detail} (tar header at byte {at})"),
        }
    }
}

/// The current entry's data as an [`io::Read`], keeping the first error for the caller.
pub struct DataReader<'a, R> {
    tar: &'a mut TarReader<R>,
    error: Option<ImageError>,
}

impl<R> DataReader<'_, R> {
    /// The error that ended reading, if one did.
    pub fn take_error(&mut self) -> Option<ImageError> {
        self.error.take()
    }
}

impl<R: Read> Read for DataReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.tar.read_data(buf) {
            Ok(n) => Ok(n),
            Err(e) => {
                let message = e.to_string();
                self.error = Some(e);
                Err(io::Error::other(message))
            }
        }
    }
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// The header checksum: the sum of all bytes with the checksum field read as spaces.
/// Both the unsigned sum (POSIX) and the signed one (some old writers) are accepted.
fn verify_checksum(block: &[u8; BLOCK]) -> Result<(), String> {
    let stored = parse_octal(&block[148..156]).ok_or("a header checksum that is not octal")?;
    let mut unsigned: u64 = 0;
    let mut signed: i64 = 0;
    for (i, &b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    if stored == unsigned || i64::try_from(stored).is_ok_and(|s| s == signed) {
        Ok(())
    } else {
        Err(format!(
            "header checksum {stored} does not match the header's bytes ({unsigned})"
        ))
    }
}

/// An octal field: digits, padded with spaces or NULs on either side; empty is 0.
fn parse_octal(field: &[u8]) -> Option<u64> {
    let text = field
        .iter()
        .copied()
        .skip_while(|&b| b == b' ' || b == 0)
        .take_while(|&b| b != b' ' && b != 0)
        .collect::<Vec<u8>>();
    if text.is_empty() {
        return Some(0);
    }
    let mut n: u64 = 0;
    for b in text {
        if !(b'0'..=b'7').contains(&b) {
            return None;
        }
        n = n.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// The size field: octal, or GNU base-256 when the high bit of the first byte is set.
fn parse_size(field: &[u8]) -> Result<u64, String> {
    let first = field.first().copied().unwrap_or(0);
    if first & 0x80 != 0 {
        if first & 0x40 != 0 {
            return Err("a negative size".into());
        }
        let mut n: u64 = u64::from(first & 0x3f);
        for &b in &field[1..] {
            n = n
                .checked_mul(256)
                .and_then(|n| n.checked_add(u64::from(b)))
                .ok_or("a size that does not fit in 64 bits")?;
        }
        return Ok(n);
    }
    parse_octal(field).ok_or_else(|| "a size field that is not octal".to_string())
}

/// One PAX record: key and value.
type PaxRecord<'a> = (&'a [u8], &'a [u8]);

/// PAX records: `<len> <key>=<value>\n`, where `<len>` counts the whole record.
fn parse_pax(data: &[u8]) -> Result<Vec<PaxRecord<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        // Some writers pad the block with NULs after the last record.
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or("a PAX record without a length")?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or("a PAX record length that is not a number")?;
        if len <= space + 1 || len > rest.len() {
            return Err("a PAX record length out of bounds".into());
        }
        let record = &rest[space + 1..len];
        let record = record
            .strip_suffix(b"\n")
            .ok_or("a PAX record not ending in a newline")?;
        let eq = record
            .iter()
            .position(|&b| b == b'=')
            .ok_or("a PAX record without `=`")?;
        out.push((&record[..eq], &record[eq + 1..]));
        rest = &rest[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(bytes: &[u8]) -> Result<Vec<(String, Kind, Vec<u8>)>, ImageError> {
        let mut tar = TarReader::new(bytes, "test");
        let mut out = Vec::new();
        while let Some(h) = tar.next_header()? {
            let mut data = Vec::new();
            tar.read_data_to_end(&mut data)?;
            out.push((String::from_utf8_lossy(&h.path).into_owned(), h.kind, data));
        }
        Ok(out)
    }

    fn build(f: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        f(&mut b);
        b.into_inner().unwrap()
    }

    fn file(b: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]) {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, data).unwrap();
    }

    #[test]
    fn reads_files_dirs_links_and_long_names() {
        let long = format!("{}/version.py", "d".repeat(150));
        let bytes = build(|b| {
            file(b, "a.txt", b"hello");
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            b.append_data(&mut h, "dir/", &[][..]).unwrap();
            file(b, &long, b"x");
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            b.append_link(&mut h, "lnk", "a.txt").unwrap();
        });
        let got = entries(&bytes).unwrap();
        assert_eq!(got[0], ("a.txt".into(), Kind::File, b"hello".to_vec()));
        assert_eq!(got[1].0, "dir");
        assert_eq!(got[1].1, Kind::Dir);
        assert_eq!(got[2].0, long);
        assert_eq!(got[3].1, Kind::Symlink);
    }

    #[test]
    fn pax_records() {
        let recs = parse_pax(b"20 path=a/b/c/d.txt\n11 size=42\n").unwrap();
        assert_eq!(recs[0], (&b"path"[..], &b"a/b/c/d.txt"[..]));
        assert_eq!(recs[1], (&b"size"[..], &b"42"[..]));
        assert!(parse_pax(b"99 path=x\n").is_err());
        assert!(parse_pax(b"x path=x\n").is_err());
        assert!(parse_pax(b"3 \n").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"00000000012\0").unwrap(), 10);
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[11] = 5;
        assert_eq!(parse_size(&big).unwrap(), 5);
        big[4] = 0xff;
        assert!(parse_size(&big).is_ok());
        let mut huge = [0xffu8; 12];
        huge[0] = 0x80;
        assert!(parse_size(&huge).is_err());
        assert!(parse_size(b"0000000001x\0").is_err());
    }

    #[test]
    fn bad_checksum_and_truncation() {
        let mut bytes = build(|b| file(b, "a.txt", b"hello"));
        let good = bytes.clone();
        bytes[0] = b'b';
        let e = entries(&bytes).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        let e = entries(&good[..700]).unwrap_err();
        assert!(matches!(e, ImageError::Truncated { .. }), "{e}");
        let e = entries(&good[..300]).unwrap_err();
        assert!(matches!(e, ImageError::Truncated { .. }), "{e}");
        // Cut exactly after the data and its padding: a layer takes it as its end (its
        // digest catches a cut), an archive calls it truncated.
        assert_eq!(entries(&good[..1024]).unwrap().len(), 1);
        assert!(entries(b"").unwrap().is_empty());
        let strict = |bytes: &[u8]| {
            let mut tar = TarReader::new(bytes, "the archive").requiring_end();
            let mut n = 0;
            while tar.next_header()?.is_some() {
                n += 1;
            }
            Ok::<_, ImageError>(n)
        };
        let e = strict(&good[..1024]).unwrap_err();
        assert!(matches!(e, ImageError::Truncated { .. }), "{e}");
        assert!(e.to_string().contains("without the end-of-archive marker"), "{e}");
        // The whole archive, one zero block of its marker, and an empty stream are ends.
        assert_eq!(strict(&good).unwrap(), 1);
        assert_eq!(strict(&good[..1536]).unwrap(), 1);
        assert_eq!(strict(b"").unwrap(), 0);
    }

    #[test]
    fn oversized_metadata_is_refused() {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        h.set_size(MAX_META + 1);
        h.set_path("././@LongLink").unwrap();
        h.set_cksum();
        let mut bytes = h.as_bytes().to_vec();
        bytes.extend(std::iter::repeat_n(b'a', 2048));
        let e = entries(&bytes).unwrap_err();
        assert!(matches!(e, ImageError::TooLarge { .. }), "{e}");
    }
}
