//! State checkpoints: [`Checkpoint`], whose documentation gives the file format, and the writer's own copy of the
//! state they are written from.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_state::{Height, OrderedKeys, StateKey, Update, UpdateBatch, VersionedValue, WorldState};
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"FFCKPT01";

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// File system error, with the path.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a complete checkpoint.
    #[error("checkpoint {path} is damaged: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The world state after block `number`: a state checkpoint, the whole in-memory world state after one block,
/// written atomically to one file (FastFabric keeps the state in memory, Opt P-I; this makes it survive restarts
/// together with the block store).
///
/// # File format (`<DataDir>/checkpoint`, all integers little-endian)
/// ```text
/// "FFCKPT01"                                 8-byte magic
/// u64 block number                           the state is the one after this block
/// u8 has_commit_hash, [32] commit hash       zeros and 0 when the block has none (block 0)
/// [32] header hash                           SHA-256 of the block's header (Fabric BlockHeaderHash)
/// u64 entry count, then per entry, in key order:
///   u32 len + namespace, u32 len + collection, u32 len + key, u32 len + value,
///   u32 metadata count, then per metadata entry u32 len + name, u32 len + value,
///   u64 version block, u64 version tx
/// [32] SHA-256 of everything above
/// ```
/// Writing: a temporary file in the same directory, `fsync`, rename over the old file, `fsync` of the directory, so
/// a crash leaves either the old or the new checkpoint, never a torn one. Reading checks the trailing hash and every
/// length; a damaged file is an error, never a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The last block whose updates the state includes.
    pub number: u64,
    /// The commit hash after that block (`None` for block 0).
    pub commit_hash: Option<[u8; 32]>,
    /// SHA-256 of that block's header: the checkpoint belongs to exactly this chain.
    pub header_hash: [u8; 32],
    /// Every key present, in key order.
    pub entries: Vec<(StateKey, VersionedValue)>,
}

impl Checkpoint {
    /// The file name inside the data directory.
    pub const FILE_NAME: &'static str = "checkpoint";

    /// Serializes the checkpoint (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let out = Vec::with_capacity(64 + self.entries.len() * 96);
        // Writing to a Vec cannot fail.
        encode_to(out, self.number, self.commit_hash, self.header_hash, self.entries.len(), self.keyed())
            .unwrap_or_default()
    }

    /// Parses [`Checkpoint::encode`]'s output; `path` only names the file in errors.
    ///
    /// Errors: [`CheckpointError::Corrupt`] for a wrong magic, a bad trailing hash, a length running past the end,
    /// non-UTF-8 names or trailing bytes.
    pub fn decode(data: &[u8], path: &Path) -> Result<Checkpoint, CheckpointError> {
        let corrupt = |reason: String| CheckpointError::Corrupt { path: path.to_owned(), reason };
        if data.len() < MAGIC.len() + 32 || &data[..MAGIC.len()] != MAGIC {
            return Err(corrupt("not a checkpoint file (bad magic or too short)".into()));
        }
        let (body, digest) = data.split_at(data.len() - 32);
        if Sha256::digest(body).as_slice() != digest {
            return Err(corrupt("checksum mismatch".into()));
        }
        let mut r = Reader { data: Bytes::copy_from_slice(body), pos: MAGIC.len() };
        let number = r.u64().map_err(corrupt)?;
        let has_hash = r.take(1).map_err(corrupt)?[0];
        let hash: [u8; 32] = r.array().map_err(corrupt)?;
        let commit_hash = match has_hash {
            0 => None,
            1 => Some(hash),
            b => return Err(corrupt(format!("bad commit hash flag {b}"))),
        };
        let header_hash = r.array().map_err(corrupt)?;
        let count = r.u64().map_err(corrupt)?;
        // Every entry takes at least 40 bytes: a count larger than that cannot be honest.
        if count > (body.len() / 40) as u64 {
            return Err(corrupt(format!("entry count {count} exceeds the file size")));
        }
        let mut entries = Vec::with_capacity(count as usize);
        for i in 0..count {
            let entry = (|| -> Result<(StateKey, VersionedValue), String> {
                let namespace = r.string()?;
                let collection = r.string()?;
                let key = r.bytes()?;
                let value = r.bytes()?;
                let n = r.u32()?;
                let mut metadata = Vec::new();
                for _ in 0..n {
                    metadata.push((r.string()?, r.bytes()?));
                }
                let version = Height::new(r.u64()?, r.u64()?);
                Ok((StateKey { namespace, collection, key }, VersionedValue { value, metadata, version }))
            })()
            .map_err(|e| corrupt(format!("entry {i}: {e}")))?;
            entries.push(entry);
        }
        if r.pos != r.data.len() {
            return Err(corrupt(format!("{} bytes after the last entry", r.data.len() - r.pos)));
        }
        Ok(Checkpoint { number, commit_hash, header_hash, entries })
    }

    /// The entries as [`encode_to`] takes them.
    fn keyed(&self) -> impl Iterator<Item = (&str, &str, &[u8], &VersionedValue)> {
        self.entries.iter().map(|(k, v)| (k.namespace.as_str(), k.collection.as_str(), k.key.as_ref(), v))
    }

    /// Writes the checkpoint to `dir/checkpoint` atomically (temporary file, fsync, rename, directory fsync).
    ///
    /// Errors: [`CheckpointError::Io`].
    pub fn write(&self, dir: &Path) -> Result<(), CheckpointError> {
        let count = self.entries.len();
        Staged::write(dir, |out| encode_to(out, self.number, self.commit_hash, self.header_hash, count, self.keyed()))?
            .publish()
    }

    /// Reads `dir/checkpoint`; `Ok(None)` when there is none.
    ///
    /// Errors: [`CheckpointError::Io`] (other than "not found"), [`CheckpointError::Corrupt`].
    pub fn read(dir: &Path) -> Result<Option<Checkpoint>, CheckpointError> {
        let path = dir.join(Self::FILE_NAME);
        match std::fs::read(&path) {
            Ok(data) => Checkpoint::decode(&data, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CheckpointError::Io { action: "reading", path, source }),
        }
    }

    /// A world state holding exactly the checkpoint's entries, at height `number`.
    pub fn to_world_state(&self) -> WorldState {
        let state = WorldState::new();
        let mut batch = UpdateBatch::new();
        for (k, v) in &self.entries {
            batch.put(k.clone(), Update::Put(v.clone()));
        }
        state.apply(self.number, &batch);
        state
    }
}

/// A checkpoint written and synced to its temporary file, not yet in force: the two halves of [`Checkpoint::write`],
/// so that a writer can make the block store durable up to the checkpoint's block in between (a checkpoint must
/// never be ahead of the durable chain).
pub(crate) struct Staged {
    dir: PathBuf,
    tmp: PathBuf,
}

impl Staged {
    /// Encodes a checkpoint with `encode` into a buffered writer on `dir/checkpoint.tmp` and syncs the file.
    ///
    /// Errors: [`CheckpointError::Io`].
    fn write(
        dir: &Path,
        encode: impl FnOnce(BufWriter<File>) -> std::io::Result<BufWriter<File>>,
    ) -> Result<Staged, CheckpointError> {
        let tmp = dir.join(format!("{}.tmp", Checkpoint::FILE_NAME));
        let f = File::create(&tmp).map_err(io_error("creating", &tmp))?;
        let f = encode(BufWriter::with_capacity(1 << 20, f))
            .and_then(|w| w.into_inner().map_err(std::io::IntoInnerError::into_error))
            .map_err(io_error("writing", &tmp))?;
        f.sync_all().map_err(io_error("syncing", &tmp))?;
        Ok(Staged { dir: dir.to_owned(), tmp })
    }

    /// Renames the temporary file over `dir/checkpoint` and syncs the directory: from here on a restart resumes
    /// from this checkpoint.
    ///
    /// Errors: [`CheckpointError::Io`].
    pub(crate) fn publish(self) -> Result<(), CheckpointError> {
        let path = self.dir.join(Checkpoint::FILE_NAME);
        std::fs::rename(&self.tmp, &path).map_err(io_error("renaming to", &path))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io_error("syncing directory", &self.dir))?;
        Ok(())
    }
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError {
    let path = path.to_owned();
    move |source| CheckpointError::Io { action, path, source }
}

/// The world state as of the last block stored, kept by the checkpoint writer from each stored block's updates.
///
/// A checkpoint is then written from this copy on the writer's own thread, so the commit path never stops to
/// snapshot the validator's state (a whole-state copy under the commit gate stalled every `CheckpointInterval`-th
/// block by tens of milliseconds per 100,000 keys). The cost is a second ordered index of the keys; values are
/// shared with the world state (`Bytes`), not copied.
pub(crate) struct StateMirror {
    entries: OrderedKeys<VersionedValue>,
    /// The last block applied.
    number: u64,
}

impl StateMirror {
    /// A copy of `state` (the validator's state at start, after recovery).
    pub(crate) fn new(state: &WorldState) -> StateMirror {
        let view = state.view();
        let mut entries = OrderedKeys::new();
        for (k, v) in view.entries() {
            entries.insert(&k, v);
        }
        StateMirror { number: view.last_block().unwrap_or(0), entries }
    }

    /// Applies block `number`'s updates, as [`WorldState::apply`] does.
    pub(crate) fn apply(&mut self, number: u64, updates: &UpdateBatch) {
        for (key, update) in updates.iter() {
            match update {
                Update::Put(v) => {
                    self.entries.insert(key, v.clone());
                }
                Update::Delete(_) => {
                    self.entries.remove(key);
                }
            }
        }
        self.number = number;
    }

    /// The last block applied.
    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// Writes the checkpoint of this state ([`Checkpoint::write`]'s file) for the block with `header_hash` to its
    /// temporary file, paced (see [`ENCODE_DUTY`]) except while `hurry` says the writer is falling behind;
    /// [`Staged::publish`] puts it in force.
    pub(crate) fn stage(
        &self,
        dir: &Path,
        commit_hash: Option<[u8; 32]>,
        header_hash: [u8; 32],
        hurry: impl Fn() -> bool,
    ) -> Result<Staged, CheckpointError> {
        Staged::write(dir, |out| {
            let paced = Paced::new(out, hurry);
            let entries = self.entries.iter().map(|(ns, coll, k, v)| (ns, coll, k.as_ref(), v));
            encode_to(paced, self.number, commit_hash, header_hash, self.entries.len(), entries).map(|p| p.inner)
        })
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Writes [`Checkpoint::encode`]'s bytes for `entries` (in key order) to `out` as they are made, hashing them on the
/// way: no copy of the state is collected, and a large state needs no buffer of its size.
fn encode_to<'a, W: Write>(
    out: W,
    number: u64,
    commit_hash: Option<[u8; 32]>,
    header_hash: [u8; 32],
    count: usize,
    entries: impl Iterator<Item = (&'a str, &'a str, &'a [u8], &'a VersionedValue)>,
) -> std::io::Result<W> {
    let mut out = Hashing { inner: out, hash: Sha256::new() };
    out.write_all(MAGIC)?;
    out.write_all(&number.to_le_bytes())?;
    out.write_all(&[u8::from(commit_hash.is_some())])?;
    out.write_all(&commit_hash.unwrap_or([0; 32]))?;
    out.write_all(&header_hash)?;
    out.write_all(&(count as u64).to_le_bytes())?;
    fn put(out: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
        out.write_all(&(b.len() as u32).to_le_bytes())?;
        out.write_all(b)
    }
    for (namespace, collection, key, v) in entries {
        put(&mut out, namespace.as_bytes())?;
        put(&mut out, collection.as_bytes())?;
        put(&mut out, key)?;
        put(&mut out, &v.value)?;
        out.write_all(&(v.metadata.len() as u32).to_le_bytes())?;
        for (name, value) in &v.metadata {
            put(&mut out, name.as_bytes())?;
            put(&mut out, value)?;
        }
        out.write_all(&v.version.block_num.to_le_bytes())?;
        out.write_all(&v.version.tx_num.to_le_bytes())?;
    }
    let Hashing { mut inner, hash } = out;
    inner.write_all(&hash.finalize())?;
    Ok(inner)
}

/// The largest share of wall-clock time a checkpoint's encoding takes (see [`Paced`]): a tenth of a core, so that
/// encoding 300,000 keys (≈ 250 ms of CPU) spreads over ≈ 2.5 s, a fifth of the default `CheckpointInterval` at
/// 4,000 tx/s in blocks of 100.
pub(crate) const ENCODE_DUTY: f64 = 0.1;

/// The longest the encoder works before it pauses.
const ENCODE_BURST: Duration = Duration::from_millis(2);

/// Bytes written between two looks at the clock (about half a millisecond of encoding).
const PACE_CHECK_BYTES: usize = 64 << 10;

/// A writer that spreads the work of whoever writes through it: after each [`ENCODE_BURST`] of wall-clock time it
/// sleeps long enough that the work takes at most [`ENCODE_DUTY`] of the time, unless `hurry` returns true (the
/// checkpoint writer has fallen behind the blocks: a paced checkpoint must never hold up the ones after it).
///
/// Encoding a large state is hundreds of milliseconds of CPU every `CheckpointInterval` blocks (about 80 ms per
/// 100,000 keys). Run in one go it takes a core from the validator and, in another process, the orderer: a
/// thread's nice value orders it only against the threads of its own cgroup, so under `node --processes` (one cgroup
/// per component) even a nice-19 encoder competes with the orderer at the committer's full share. Paced, it
/// never holds a CPU for more than a couple of milliseconds, and under contention it backs off further (a burst
/// measured in wall-clock time includes the time it waited for a CPU). The same idea as PostgreSQL's
/// `checkpoint_completion_target`, which spreads a checkpoint's writes over the interval.
struct Paced<W, H> {
    inner: W,
    hurry: H,
    burst_started: Instant,
    unchecked: usize,
}

impl<W, H: Fn() -> bool> Paced<W, H> {
    fn new(inner: W, hurry: H) -> Paced<W, H> {
        Paced { inner, hurry, burst_started: Instant::now(), unchecked: 0 }
    }
}

impl<W: Write, H: Fn() -> bool> Write for Paced<W, H> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.unchecked += n;
        if self.unchecked >= PACE_CHECK_BYTES {
            self.unchecked = 0;
            let busy = self.burst_started.elapsed();
            if busy >= ENCODE_BURST {
                if !(self.hurry)() {
                    std::thread::sleep(busy.mul_f64(1.0 / ENCODE_DUTY - 1.0));
                }
                self.burst_started = Instant::now();
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

struct Reader {
    data: Bytes,
    pos: usize,
}

impl Reader {
    fn take(&mut self, n: usize) -> Result<Bytes, String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.data.len()).ok_or("runs past the end of the file")?;
        let out = self.data.slice(self.pos..end);
        self.pos = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let b = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&b);
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32, String> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, String> {
        self.array().map(u64::from_le_bytes)
    }
    fn bytes(&mut self) -> Result<Bytes, String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String, String> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| "a name is not UTF-8".to_string())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            number: 7,
            commit_hash: Some([7; 32]),
            header_hash: [9; 32],
            entries: vec![
                (
                    StateKey::public("cc", "a"),
                    VersionedValue { value: Bytes::from_static(b"1"), metadata: vec![], version: Height::new(3, 1) },
                ),
                (
                    StateKey::hashed("cc", "coll", vec![0u8; 32]),
                    VersionedValue {
                        value: Bytes::from_static(b"h"),
                        metadata: vec![("VALIDATION_PARAMETER".into(), Bytes::from_static(b"p"))],
                        version: Height::new(5, 0),
                    },
                ),
            ],
        }
    }

    #[test]
    fn mirror_checkpoint_equals_the_checkpoint_of_the_world_state() {
        let state = sample().to_world_state();
        let mut mirror = StateMirror::new(&state);
        let value = |v: &'static [u8], block| VersionedValue {
            value: Bytes::from_static(v),
            metadata: vec![],
            version: Height::new(block, 0),
        };
        let mut b8 = UpdateBatch::new();
        b8.put(StateKey::public("cc", "b"), Update::Put(value(b"2", 8)));
        b8.put(StateKey::public("cc", "a"), Update::Put(value(b"3", 8)));
        let mut b9 = UpdateBatch::new();
        b9.put(StateKey::public("cc", "b"), Update::Delete(Height::new(9, 0)));
        b9.put(StateKey::public("cc", "c"), Update::Put(value(b"4", 9)));
        b9.put(StateKey::public("cc", "never"), Update::Delete(Height::new(9, 1)));
        for (n, b) in [(8, &b8), (9, &b9)] {
            state.apply(n, b);
            mirror.apply(n, b);
        }
        assert_eq!(mirror.number(), 9);
        let dir = tempfile::tempdir().unwrap();
        mirror.stage(dir.path(), Some([1; 32]), [2; 32], || false).unwrap().publish().unwrap();
        let expected =
            Checkpoint { number: 9, commit_hash: Some([1; 32]), header_hash: [2; 32], entries: state.view().entries() };
        assert_eq!(Checkpoint::read(dir.path()).unwrap().unwrap(), expected);
        assert_eq!(mirror.len(), 3);
    }

    #[test]
    fn staging_is_paced_to_the_duty_share_unless_the_writer_is_behind() {
        let mut batch = UpdateBatch::new();
        for i in 0..200_000u32 {
            let value = VersionedValue {
                value: Bytes::from(vec![1u8; 64]),
                metadata: vec![],
                version: Height::new(1, u64::from(i)),
            };
            batch.put(StateKey::public("cc", format!("key{i:08}")), Update::Put(value));
        }
        let state = WorldState::new();
        state.apply(1, &batch);
        let mirror = StateMirror::new(&state);
        let dir = tempfile::tempdir().unwrap();
        let thread_cpu = || rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        let stage = |hurry: bool| {
            let (cpu0, wall0) = (thread_cpu(), Instant::now());
            mirror.stage(dir.path(), None, [0; 32], || hurry).unwrap().publish().unwrap();
            let wall = wall0.elapsed();
            let cpu1 = thread_cpu();
            let cpu = Duration::new(cpu1.tv_sec as u64, cpu1.tv_nsec as u32)
                .saturating_sub(Duration::new(cpu0.tv_sec as u64, cpu0.tv_nsec as u32));
            assert_eq!(Checkpoint::read(dir.path()).unwrap().unwrap().entries.len(), 200_000);
            (cpu, wall)
        };
        let (cpu, wall) = stage(false);
        assert!(cpu > ENCODE_BURST * 4, "the state is too small to need pacing: {cpu:?}");
        // The sleeps are a lower bound on the wall-clock time whatever else runs; the last burst goes unpaced, and the
        // thread's CPU clock and the pacer's own measure of its bursts differ by a few per cent on a busy machine.
        let least = (cpu.saturating_sub(ENCODE_BURST + Duration::from_millis(3))).mul_f64(0.9 / ENCODE_DUTY);
        assert!(wall >= least, "{cpu:?} of CPU in {wall:?}: not paced to {ENCODE_DUTY}");
        // In a hurry it does not sleep at all.
        let (cpu, wall) = stage(true);
        assert!(wall < least, "{cpu:?} of CPU in {wall:?} although in a hurry");
    }

    #[test]
    fn write_then_read_round_trips_and_rebuilds_the_state() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Checkpoint::read(dir.path()).unwrap(), None);
        let c = sample();
        c.write(dir.path()).unwrap();
        let back = Checkpoint::read(dir.path()).unwrap().unwrap();
        assert_eq!(back, c);
        let state = back.to_world_state();
        assert_eq!(state.view().entries(), c.entries);
        assert_eq!(state.view().last_block(), Some(7));
        assert!(!dir.path().join("checkpoint.tmp").exists());
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error_not_a_panic() {
        let bytes = sample().encode();
        let p = Path::new("x");
        for cut in 0..bytes.len() {
            assert!(Checkpoint::decode(&bytes[..cut], p).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(Checkpoint::decode(&b, p).is_err(), "flip at {i}");
        }
    }
}
