//! The archive reader for files (`read_archive_file`: an index of the tar's headers, then
//! the chosen layers read where they lie, several at once) and detection, on arbitrary
//! bytes written to a file.
#![no_main]

use std::io::{Seek, SeekFrom, Write};
use std::sync::Mutex;

use gpuenv::image::archive::{ReadOptions, read_archive_file};
use libfuzzer_sys::fuzz_target;

/// One file per process, rewritten for each input: the reader takes a real file.
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let file = guard.get_or_insert_with(|| {
        let dir = std::env::temp_dir().join(format!("gpuenv-fuzz-{}", std::process::id()));
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir)
            .expect("a scratch file")
    });
    file.set_len(0).expect("truncate the scratch file");
    file.seek(SeekFrom::Start(0)).expect("rewind the scratch file");
    file.write_all(data).expect("write the scratch file");
    if let Ok(image) = read_archive_file(file, &ReadOptions::default()) {
        let _ = image.facts();
    }
});
