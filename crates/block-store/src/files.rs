//! Block files: names, positional reads and directory listing.
//!
//! Each file `blocks/blockfile_NNNNNN` holds records `[8-byte LE length][marshaled common.Block]`, the format of
//! `ferrofabric_protoutil::records` (Fabric's `blockfile_rw.go` uses a varint length instead).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::StoreError;

const PREFIX: &str = "blockfile_";

/// `dir/blockfile_NNNNNN` (at least 6 digits, as Fabric's `deriveBlockfilePath`).
pub(crate) fn file_path(dir: &Path, num: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{num:06}"))
}

/// Numbers of the block files present in `dir`, ascending. Other names are ignored.
pub(crate) fn list(dir: &Path) -> Result<Vec<u32>, StoreError> {
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::io("listing", dir, e))?;
    let mut nums = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| StoreError::io("listing", dir, e))?;
        let name = entry.file_name();
        let Some(digits) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else { continue };
        if digits.len() >= 6 && digits.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = digits.parse::<u32>() {
                nums.push(n);
            }
        }
    }
    nums.sort_unstable();
    Ok(nums)
}

/// Reads exactly `buf.len()` bytes at `offset` without moving any shared cursor (pread), so readers need no lock.
#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Reads exactly `buf.len()` bytes at `offset` (Windows `seek_read`, looped).
#[cfg(windows)]
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Makes a file creation or rename in `dir` durable (POSIX needs the directory itself synced; elsewhere a no-op).
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("syncing directory", dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
