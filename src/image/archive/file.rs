//! An archive that is a file: indexed first, then read where its layers lie.
//!
//! Owns: the index walk (headers alone, seeking over the data), reading a member in place
//! without moving the file's cursor ([`At`]), and reading the chosen image's layers several
//! at once. Must not: read a layer no manifest of the chosen image uses (they are not
//! verified either), or read past the file's end.

use std::fs::File;
use std::io::Read;

use super::members::{Members, Span, blob_digest_of};
use super::stream::scan;
use super::{Image, ReadOptions, in_order, mismatch, threads};
use crate::image::ImageError;
use crate::image::detect;
use crate::image::layer::{self, Budget, Select};
use crate::image::tar::TarReader;

/// Reads an archive that is a file: its members are indexed by walking the headers alone
/// (seeking over the data), then only the layers the chosen image uses are read, each
/// where it lies in the file and several at once (one per core, up to
/// [`MAX_THREADS`](super::MAX_THREADS)), so the time is the largest layer's or the whole image's divided
/// among the cores, whichever is more. Layers of other platforms and blobs no manifest
/// uses are not read at all, so not verified either.
pub fn read_archive_file(file: &File, opts: &ReadOptions) -> Result<Image, ImageError> {
    read_archive_file_with(file, opts, &detect::select)
}

/// [`read_archive_file`] with another selector.
pub fn read_archive_file_with(
    file: &File,
    opts: &ReadOptions,
    select: &dyn Select,
) -> Result<Image, ImageError> {
    let len = file
        .metadata()
        .map_err(|e| ImageError::from_io("the archive", e))?
        .len();
    let mut budget = Budget::new(opts.limits);
    // From the file's start wherever its cursor is, and without moving the cursor.
    let whole = At {
        file,
        pos: 0,
        end: len,
    };
    let mut tar = TarReader::seekable(std::io::BufReader::new(whole), "the archive").requiring_end();
    let members = scan(&mut tar, &mut budget, select, Some(len))?;
    members.resolve(opts, &mut budget, select, Some(file))
}

/// The buffer between a layer member of an archive file and its reader: large enough
/// that positioned reads cost few system calls.
const READ_BUFFER: usize = 256 * 1024;

/// A member of an archive file, read where it lies without moving the file's cursor, so
/// that several threads read one file at once.
struct At<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(self.file, &mut buf[..want], self.pos)?;
        #[cfg(windows)]
        let n = std::os::windows::fs::FileExt::seek_read(self.file, &mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for At<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let pos = match to {
            std::io::SeekFrom::Start(n) => Some(n),
            std::io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            std::io::SeekFrom::End(d) => self.end.checked_add_signed(d),
        };
        // Past the end is allowed, as for a file: reads there find nothing.
        self.pos = pos.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "a seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// Reads the layers at `paths` that the index walk only noted, each once, where it lies
/// in `file`, several at once; they join the layers read. An error comes with the index of
/// the layer in `paths`.
pub(super) fn read_spans(
    members: &mut Members,
    paths: &[String],
    budget: &mut Budget,
    select: &dyn Select,
    file: &File,
) -> Result<(), (usize, ImageError)> {
    let mut todo: Vec<(usize, String, Span)> = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let real = members.real(path);
        if let Some(span) = members.spans.get(real) {
            if !todo.iter().any(|t| t.1 == real) {
                todo.push((i, real.to_string(), *span));
            }
        }
    }
    let shared: &Budget = budget;
    let watch = &members.watch;
    watch.layers(todo.len(), todo.iter().map(|(_, _, span)| span.size).sum());
    let read = in_order(&todo, threads(), |(_, real, span)| {
        let member = At {
            file,
            pos: span.offset,
            end: span.offset + span.size,
        };
        let l = layer::read_layer(
            std::io::BufReader::with_capacity(READ_BUFFER, watch.counted(member)),
            select,
            &mut shared.clone(),
        )
        .map_err(|e| e.within(format!("layer `{real}`")))?;
        match blob_digest_of(real) {
            Some(d) if d != l.blob_digest => Err(mismatch(real, &d, &l.blob_digest)),
            _ => {
                watch.layer_done();
                Ok(l)
            }
        }
    })
    .map_err(|(j, e)| (todo[j].0, e))?;
    for ((_, real, _), l) in todo.into_iter().zip(read) {
        members.spans.remove(&real);
        members.layers.insert(real, l);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_member_is_read_where_it_lies() {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, b"0123456789").unwrap();
        let mut at = At {
            file: &file,
            pos: 3,
            end: 7,
        };
        let mut got = String::new();
        at.read_to_string(&mut got).unwrap();
        assert_eq!(got, "3456");
        use std::io::Seek;
        assert_eq!(at.seek(std::io::SeekFrom::Current(-2)).unwrap(), 5);
        assert!(at.seek(std::io::SeekFrom::Current(-6)).is_err());
        // Past the end: nothing to read, not an error.
        at.seek(std::io::SeekFrom::Start(100)).unwrap();
        assert_eq!(at.read(&mut [0u8; 4]).unwrap(), 0);
    }
}
