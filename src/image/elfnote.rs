//! The forward-compatibility note of a `cuda-compat` `libcuda.so`, found while streaming.
//!
//! Owns: finding the `.note.cuda.fwd_compatibility` ELF note in a stream of bytes and
//! reading its JSON. Must not: seek, hold the library in memory, or judge what the note
//! says (whether a host branch may use the package is the judge's business).
//!
//! What the note is: `cuda-compat-X-Y` installs `/usr/local/cuda-X.Y/compat/libcuda.so.<driver
//! version>`, a user-mode driver newer than the host's. Recent builds carry an ELF note
//! section named `.note.cuda.fwd_compatibility`, owner `NVIDIA Corporation`, whose
//! description is JSON: `{"Format": 1, "CUDA Version": "12.9", "Driver": [535, 550, 560,
//! 565, 570, 575], "Device": [1, 2, 7, ...]}`. `Driver` lists the host driver branches the
//! package may run on; NVIDIA Container Toolkit's `enable-cuda-compat` hook reads it
//! (`cmd/nvidia-cdi-hook/cudacompat/cuda-elf-header.go`) to decide whether to put the compat
//! directory first in the linker's path. `Device` is not documented; it is kept as read.
//! Older packages have no note: then the file name (`libcuda.so.570.86.10`) gives the
//! driver version, hence its branch, and nothing gives the list of supported host branches.
//!
//! How it is found without seeking: the section headers sit at the end of the file, so
//! instead of walking them the stream is scanned for the note's owner name preceded by a
//! plausible note header (name size 19, a description of at most [`MAX_DESC`] bytes)
//! and followed by JSON that parses with a `CUDA Version` key. Memory stays at one chunk
//! plus one description, whatever the library's size.

use std::io::{self, Read};

use serde::{Deserialize, Serialize};

/// The note's owner, NUL included, as the ELF note stores it.
const OWNER: &[u8] = b"NVIDIA Corporation\0";
/// The size of an ELF note header (namesz, descsz, type).
const NHDR: usize = 12;
/// The largest description accepted: real ones are about 100 bytes.
pub const MAX_DESC: usize = 16 * 1024;
const CHUNK: usize = 64 * 1024;

/// What a compat library's note says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompatNote {
    /// `Format` (1 so far).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<i64>,
    /// `CUDA Version`: the CUDA version this user-mode driver provides (`12.9`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
    /// `Driver`: the host driver branches the package supports (`[535, 550, 570]`).
    pub driver_branches: Vec<u32>,
    /// `Device`: undocumented numbers, kept as read.
    pub devices: Vec<u32>,
}

/// Parses a note description (JSON); `None` when it is not the compat note.
pub fn parse_note(desc: &[u8]) -> Option<CompatNote> {
    let trimmed = trim_nuls(desc);
    let value: serde_json::Value = serde_json::from_slice(trimmed).ok()?;
    let obj = value.as_object()?;
    obj.get("CUDA Version")?;
    let numbers = |key: &str| -> Vec<u32> {
        obj.get(key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()))
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(CompatNote {
        format: obj.get("Format").and_then(|v| v.as_i64()),
        cuda_version: obj
            .get("CUDA Version")
            .and_then(|v| v.as_str())
            .map(str::to_string),
        driver_branches: numbers("Driver"),
        devices: numbers("Device"),
    })
}

fn trim_nuls(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| c != 0).unwrap_or(b.len());
    let end = b.iter().rposition(|&c| c != 0).map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

fn u32_at(b: &[u8], at: usize, little: bool) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if little {
        u32::from_le_bytes(bytes)
    } else {
        u32::from_be_bytes(bytes)
    })
}

/// Scans an ELF file for the compat note and returns its description bytes (JSON,
/// possibly NUL-padded); `None` when the stream is not ELF or has no such note.
pub fn find_compat_note<R: Read>(mut reader: R) -> io::Result<Option<Vec<u8>>> {
    let mut win: Vec<u8> = Vec::with_capacity(CHUNK * 2);
    let mut chunk = vec![0u8; CHUNK];
    let mut eof = false;
    let mut little = true;
    let mut checked_magic = false;
    loop {
        if !eof {
            let n = loop {
                match reader.read(&mut chunk) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                eof = true;
            } else {
                win.extend_from_slice(&chunk[..n]);
            }
        }
        if !checked_magic {
            if win.len() < 6 && !eof {
                continue;
            }
            if !win.starts_with(b"\x7fELF") {
                // Not ELF: read it to the end anyway, so the caller's stream stays aligned.
                io::copy(&mut reader, &mut io::sink())?;
                return Ok(None);
            }
            // EI_DATA: 1 little-endian, 2 big-endian.
            little = win.get(5) != Some(&2);
            checked_magic = true;
        }
        let mut from = 0;
        let mut keep_from = None;
        while let Some(rel) = find(&win[from..], OWNER) {
            let p = from + rel;
            from = p + 1;
            if p < NHDR {
                continue;
            }
            let start = p - NHDR;
            if u32_at(&win, start, little) != Some(OWNER.len() as u32) {
                continue;
            }
            let Some(desc_len) = u32_at(&win, start + 4, little).map(|d| d as usize) else {
                continue;
            };
            if desc_len == 0 || desc_len > MAX_DESC {
                continue;
            }
            // The description starts at the name's end rounded up to the section's
            // alignment: 4 in practice, 8 allowed.
            let mut found = None;
            let mut short = false;
            for align in [4usize, 8] {
                let at = start + NHDR + OWNER.len().div_ceil(align) * align;
                let end = at + desc_len;
                if end > win.len() {
                    short = true;
                    continue;
                }
                if parse_note(&win[at..end]).is_some() {
                    found = Some(win[at..end].to_vec());
                    break;
                }
            }
            if let Some(desc) = found {
                io::copy(&mut reader, &mut io::sink())?;
                return Ok(Some(desc));
            }
            if short && !eof {
                keep_from = Some(start);
                break;
            }
        }
        if eof {
            return Ok(None);
        }
        // Keep what a match could still straddle: a pending note, or the last bytes.
        let keep = keep_from.unwrap_or_else(|| win.len().saturating_sub(NHDR + OWNER.len()));
        win.drain(..keep);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        let rel = hay[i..=hay.len() - needle.len()]
            .iter()
            .position(|&b| b == first)?;
        let at = i + rel;
        if &hay[at..at + needle.len()] == needle {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// Builds the bytes of an ELF-looking file holding a compat note, for tests: an ELF
/// magic, `pad` filler bytes, then the note.
#[cfg(test)]
pub(crate) fn fake_compat_lib(json: &str, pad: usize) -> Vec<u8> {
    let mut out = b"\x7fELF\x02\x01\x01\0".to_vec();
    out.extend(std::iter::repeat_n(0x90u8, pad));
    out.extend_from_slice(&(OWNER.len() as u32).to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(OWNER);
    out.push(0);
    out.extend_from_slice(json.as_bytes());
    out.extend(std::iter::repeat_n(0u8, 3));
    out.extend(std::iter::repeat_n(0x90u8, 1000));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"{"Format":1,"CUDA Version":"12.9","Driver":[535,550,560,565,570,575],"Device":[1,2,7,8,9,10,11,12,13,14]}"#;

    #[test]
    fn finds_the_note_across_chunks() {
        for pad in [0, 100, CHUNK - 20, CHUNK - 5, CHUNK * 3 + 7] {
            let bytes = fake_compat_lib(JSON, pad);
            let desc = find_compat_note(&bytes[..]).unwrap().expect("note");
            let note = parse_note(&desc).unwrap();
            assert_eq!(note.cuda_version.as_deref(), Some("12.9"));
            assert_eq!(note.driver_branches, vec![535, 550, 560, 565, 570, 575]);
            assert_eq!(note.format, Some(1));
        }
    }

    #[test]
    fn no_note_or_not_elf() {
        assert_eq!(
            find_compat_note(&b"\x7fELF\x02\x01 nothing here"[..]).unwrap(),
            None
        );
        assert_eq!(find_compat_note(&b"#!/bin/sh"[..]).unwrap(), None);
        assert_eq!(find_compat_note(&b""[..]).unwrap(), None);
        // The owner name without a plausible header is not a note.
        let mut b = b"\x7fELF\x02\x01".to_vec();
        b.extend_from_slice(&[0xff; 12]);
        b.extend_from_slice(OWNER);
        b.extend_from_slice(JSON.as_bytes());
        assert_eq!(find_compat_note(&b[..]).unwrap(), None);
        assert_eq!(parse_note(b"{\"Format\":1}"), None);
        assert_eq!(parse_note(b"\0\0not json"), None);
    }
}
