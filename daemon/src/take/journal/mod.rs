//! The take-over journal: one file per device rig holds (or has held) under
//! `<state_dir>/devices/<bdf>.journal`, written and synced before each step runs, so
//! that a crash at any point leaves a record that says what was under way.
//!
//! Layout: two slots of equal size, each `magic (8) | seq (u64) | len (u32) | crc32
//! (u32) | record (len bytes of JSON)`, little-endian, the CRC over seq, len and the
//! record. A record goes into the slot that does not hold the latest intact one, with
//! one `fdatasync`: the file keeps its size and its blocks once made, so the sync writes
//! the data block and no metadata (on ext4 no journal commit; 0.4 ms against the 7 ms
//! of the temp file, two fsyncs and a rename this replaces, measured in the disposable
//! machine). A crash tears at most the slot being written: its CRC fails, and the reader
//! takes the other one, which holds the last record whose write returned, so the step
//! the torn record announced had not begun.
//!
//! The file is made (and made again, larger, when a record outgrows its slots) whole
//! under a temporary name, synced, renamed and the directory synced: the only directory
//! syncs. A device given back gets an empty record instead of losing its file, so the
//! next take of it writes in place too. Recovery (`take::recover`) reads these at start.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Read, Write},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

mod record;

pub use record::{
    AttachStep, CONFIG_HEADER_LEN, DetachStep, HexError, Mode, Phase, RawPhase, RawRecord,
    ReclaimStep, Record, RecordError, ResizeStep, SavedConfig, hex, parse_hex,
};

use crate::pci::Bdf;

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("Failed to write the journal in {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to read the journal in {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Journal record {path} is malformed")]
    Malformed {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("Journal record {path} is refused")]
    Invalid {
        path: PathBuf,
        #[source]
        source: RecordError,
    },
    #[error("Journal file {path} holds no intact record")]
    Damaged { path: PathBuf },
    #[error(
        "Journal record {path} is in the format of an older rigd: give the device back by hand, then delete the file"
    )]
    OldFormat { path: PathBuf },
}

/// Identifies a slot (and the file format).
const MAGIC: &[u8; 8] = b"rigjrnl1";
/// Magic, sequence number, length and CRC.
const HEADER: usize = 24;
/// Slots are whole filesystem blocks, so a write in place touches no other slot.
const BLOCK: usize = 4096;
/// The file name's extension; `.tmp` is added while a file is being made.
const EXT: &str = "journal";

/// One slot: its header and record, ready to be written.
fn encode_slot(seq: u64, record: &[u8]) -> Vec<u8> {
    let len = u32::try_from(record.len()).expect("a record is far below 4 GiB");
    let mut out = Vec::with_capacity(HEADER + record.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..20]);
    crc.update(record);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(record);
    out
}

/// A slot's sequence number and record, when the slot is intact.
fn parse_slot(slot: &[u8]) -> Option<(u64, &[u8])> {
    let header = slot.get(..HEADER)?;
    if header.get(..8)? != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(bytes_at(header, 8)?);
    let len = usize::try_from(u32::from_le_bytes(bytes_at(header, 16)?)).ok()?;
    let crc = u32::from_le_bytes(bytes_at(header, 20)?);
    let record = slot.get(HEADER..HEADER.checked_add(len)?)?;
    let mut h = crc32fast::Hasher::new();
    h.update(header.get(8..20)?);
    h.update(record);
    (h.finalize() == crc).then_some((seq, record))
}

/// `N` bytes of `b` from `at`.
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The latest intact slot of a file's bytes: its index, sequence number and record.
/// `None` when neither slot is intact (or the file is not two whole slots).
fn parse_latest(file: &[u8]) -> Option<(usize, u64, &[u8])> {
    let size = file.len() / 2;
    if size == 0 || !size.is_multiple_of(BLOCK) || !file.len().is_multiple_of(2) {
        return None;
    }
    (0..2)
        .filter_map(|i| {
            let (seq, record) = parse_slot(file.get(i * size..(i + 1) * size)?)?;
            Some((i, seq, record))
        })
        .max_by_key(|&(_, seq, _)| seq)
}

/// The journal directory.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// The journal under `state_dir` (created on first write).
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("devices"),
        }
    }

    fn path(&self, bdf: Bdf) -> PathBuf {
        self.dir.join(format!("{bdf}.{EXT}"))
    }

    fn write_error(&self) -> impl Fn(io::Error) -> JournalError + '_ {
        |source| JournalError::Write {
            path: self.dir.clone(),
            source,
        }
    }

    /// Writes `record` durably before the step it names runs.
    ///
    /// # Errors
    /// [`JournalError::Write`]; the caller must not do the step then.
    pub fn write(&self, record: &Record) -> Result<(), JournalError> {
        let text = serde_json::to_vec(&RawRecord::from(record))
            .map_err(|e| self.write_error()(io::Error::other(e)))?;
        self.put(record.bdf, &text, true)
    }

    /// Forgets a device that is back with its driver: an empty record, synced.
    ///
    /// # Errors
    /// [`JournalError::Write`].
    pub fn remove(&self, bdf: Bdf) -> Result<(), JournalError> {
        self.put(bdf, &[], false)
    }

    /// Writes `record` into the slot that does not hold the latest intact record, or
    /// makes the file (when `create`) if it is missing, holds no intact record, or has
    /// slots too small for `record`.
    fn put(&self, bdf: Bdf, record: &[u8], create: bool) -> Result<(), JournalError> {
        let err = self.write_error();
        let path = self.path(bdf);
        let mut f = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.make(&path, 1, record),
            Err(e) => return Err(err(e)),
        };
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).map_err(&err)?;
        let Some((slot, seq, _)) = parse_latest(&bytes) else {
            // Nothing intact to keep: `record` is the device's state now.
            return self.make(&path, 1, record);
        };
        let size = bytes.len() / 2;
        if HEADER + record.len() > size {
            return self.make(&path, seq + 1, record);
        }
        let other = u64::try_from((1 - slot) * size).expect("a slot offset fits in u64");
        f.write_all_at(&encode_slot(seq + 1, record), other)
            .map_err(&err)?;
        f.sync_data().map_err(err)
    }

    /// Makes the file whole under a temporary name, with `record` in slot 0 and room
    /// for one twice its size, then renames it into place; both synced.
    fn make(&self, path: &Path, seq: u64, record: &[u8]) -> Result<(), JournalError> {
        let err = self.write_error();
        fs::create_dir_all(&self.dir).map_err(&err)?;
        let size = (2 * (HEADER + record.len())).div_ceil(BLOCK) * BLOCK;
        // Both slots written (the second with zeros, which is no intact slot), so the
        // blocks are allocated now and later writes in place change no metadata.
        let mut bytes = vec![0u8; 2 * size];
        let slot = encode_slot(seq, record);
        bytes[..slot.len()].copy_from_slice(&slot);
        let tmp = path.with_extension(format!("{EXT}.tmp"));
        let mut f = File::create(&tmp).map_err(&err)?;
        f.write_all(&bytes).map_err(&err)?;
        f.sync_all().map_err(&err)?;
        fs::rename(&tmp, path).map_err(&err)?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(err)
    }

    /// Every record of a device not given back, sorted by address; a file without an
    /// intact record, or with a malformed or untrustworthy one, is an error naming it
    /// (recovery then refuses to guess about that device).
    ///
    /// # Errors
    /// [`JournalError::Read`], [`JournalError::Damaged`], [`JournalError::Malformed`],
    /// [`JournalError::Invalid`] or [`JournalError::OldFormat`], one per bad file.
    pub fn load(&self) -> (Vec<Record>, Vec<JournalError>) {
        let mut records = Vec::new();
        let mut errors = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return (records, errors),
            Err(source) => {
                errors.push(JournalError::Read {
                    path: self.dir.clone(),
                    source,
                });
                return (records, errors);
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some(EXT) => {}
                // One JSON file per record, before the slots.
                Some("json") => {
                    errors.push(JournalError::OldFormat { path });
                    continue;
                }
                _ => continue,
            }
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(source) => {
                    errors.push(JournalError::Read { path, source });
                    continue;
                }
            };
            match decode(&path, &bytes) {
                Ok(Some(r)) => records.push(r),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        records.sort_by_key(|r| r.bdf);
        (records, errors)
    }
}

/// The latest intact record of one journal file's bytes: `None` for a device given
/// back (an empty record). `path` only names the file in errors. Whatever the bytes,
/// this returns (the fuzz target `journal_file` holds it to that).
///
/// # Errors
/// [`JournalError::Damaged`] (no intact slot), [`JournalError::Malformed`] (not a
/// record's JSON), [`JournalError::Invalid`] (a field that does not parse).
pub fn decode(path: &Path, file: &[u8]) -> Result<Option<Record>, JournalError> {
    let path = || path.to_path_buf();
    match parse_latest(file) {
        None => Err(JournalError::Damaged { path: path() }),
        Some((_, _, [])) => Ok(None),
        Some((_, _, text)) => {
            let raw = serde_json::from_slice::<RawRecord>(text).map_err(|source| {
                JournalError::Malformed {
                    path: path(),
                    source,
                }
            })?;
            Record::try_from(raw)
                .map(Some)
                .map_err(|source| JournalError::Invalid {
                    path: path(),
                    source,
                })
        }
    }
}

/// A journal file of one record, as [`Journal::write`] lays it out (both slots, the
/// record in the first): what tests and the fuzz targets feed [`decode`].
pub fn encode(text: &[u8]) -> Vec<u8> {
    let len = (HEADER + text.len()).next_multiple_of(BLOCK);
    let mut file = vec![0; 2 * len];
    file[..HEADER + text.len()].copy_from_slice(&encode_slot(1, text));
    file
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn bdf(s: &str) -> Bdf {
        s.parse().expect("test address")
    }

    fn record(at: &str, phase: Phase) -> Record {
        Record {
            bdf: bdf(at),
            mode: Mode::Vfio,
            original_driver: Some("bochs-drm".to_owned()),
            phase,
            since: 1,
            saved_config: SavedConfig::new(vec![0; 64]).expect("64 bytes"),
            group_members: Vec::new(),
        }
    }

    fn file(dir: &Path, bdf: &str) -> PathBuf {
        dir.join(format!("devices/{bdf}.journal"))
    }

    #[test]
    fn records_round_trip_and_rewrites_replace_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        j.write(&record(
            "0000:00:03.0",
            Phase::Detaching(DetachStep::Unbind),
        ))
        .expect("write");
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("rewrite");
        j.write(&record(
            "0000:00:02.0",
            Phase::Attaching(AttachStep::Probe(bdf("0000:00:02.0"))),
        ))
        .expect("write");
        let (records, errors) = j.load();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records.len(), 2);
        assert_eq!(
            records[0].phase,
            Phase::Attaching(AttachStep::Probe(bdf("0000:00:02.0")))
        );
        assert_eq!(records[1].phase, Phase::Held);
        j.remove(bdf("0000:00:03.0")).expect("remove");
        j.remove(bdf("0000:00:03.0"))
            .expect("removing twice is fine");
        j.remove(bdf("0000:00:09.0"))
            .expect("removing what was never written is fine");
        assert_eq!(j.load().0.len(), 1);
        assert!(!file(dir.path(), "0000:00:09.0").exists());
    }

    #[test]
    fn writes_after_the_first_go_in_place_and_a_given_back_device_keeps_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        let path = file(dir.path(), "0000:00:03.0");
        j.write(&record(
            "0000:00:03.0",
            Phase::Detaching(DetachStep::Unbind),
        ))
        .expect("write");
        let made = fs::metadata(&path).expect("made");

        for phase in [Phase::Held, Phase::Attaching(AttachStep::Stop)] {
            j.write(&record("0000:00:03.0", phase)).expect("write");
        }
        j.remove(bdf("0000:00:03.0")).expect("remove");
        j.write(&record(
            "0000:00:03.0",
            Phase::Detaching(DetachStep::Unbind),
        ))
        .expect("taken again");

        let now = fs::metadata(&path).expect("still there");
        assert_eq!((now.ino(), now.len()), (made.ino(), made.len()));
        assert_eq!(made.len() % (2 * BLOCK as u64), 0);
        assert_eq!(j.load().0[0].phase, Phase::Detaching(DetachStep::Unbind));
    }

    #[test]
    fn a_torn_last_record_leaves_the_one_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        let path = file(dir.path(), "0000:00:03.0");
        j.write(&record(
            "0000:00:03.0",
            Phase::Detaching(DetachStep::Unbind),
        ))
        .expect("write");
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("write");
        // The "held" record went into slot 1: tear its last bytes.
        let mut bytes = fs::read(&path).expect("read");
        let slot1 = bytes.len() / 2;
        let len = u32::from_le_bytes(bytes[slot1 + 16..slot1 + 20].try_into().expect("4"));
        let end = slot1 + HEADER + usize::try_from(len).expect("fits");
        bytes[end - 10..end].fill(0);
        fs::write(&path, &bytes).expect("tear");

        let (records, errors) = j.load();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records[0].phase, Phase::Detaching(DetachStep::Unbind));

        // The next record replaces the torn one, not the intact one.
        j.write(&record(
            "0000:00:03.0",
            Phase::Attaching(AttachStep::Recover),
        ))
        .expect("write");
        assert_eq!(j.load().0[0].phase, Phase::Attaching(AttachStep::Recover));
        let bytes = fs::read(&path).expect("read");
        assert_eq!(
            parse_latest(&bytes).map(|(slot, seq, _)| (slot, seq)),
            Some((1, 2))
        );
    }

    #[test]
    fn a_record_that_outgrows_its_slots_makes_the_file_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("write");
        let mut big = record("0000:00:03.0", Phase::Resizing(ResizeStep::Bar(Some(2))));
        big.saved_config = SavedConfig::new(vec![0xab; 4096]).expect("4 KiB");

        j.write(&big).expect("write");

        assert_eq!(j.load().0, [big]);
        let len = fs::metadata(file(dir.path(), "0000:00:03.0"))
            .expect("file")
            .len();
        assert!(len >= 2 * 8192, "{len}");
    }

    #[test]
    fn damaged_and_old_files_are_reported_with_their_paths_and_others_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("write");
        let devices = dir.path().join("devices");
        fs::write(devices.join("0000:00:04.0.journal"), vec![0x5a; 2 * BLOCK]).expect("write");
        fs::write(devices.join("0000:00:05.0.json"), b"{}").expect("write");
        fs::write(devices.join("0000:00:06.0.journal.tmp"), b"half").expect("write");
        let mut bad_json = vec![0u8; 2 * BLOCK];
        let slot = encode_slot(1, b"{not json");
        bad_json[..slot.len()].copy_from_slice(&slot);
        fs::write(devices.join("0000:00:07.0.journal"), bad_json).expect("write");

        let (records, errors) = j.load();

        assert_eq!(records.len(), 1);
        let mut lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        lines.sort();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].contains("0000:00:04.0.journal holds no intact record"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("0000:00:05.0.json is in the format of an older rigd"),
            "{lines:?}"
        );
        assert!(
            lines[2].contains("0000:00:07.0.journal is malformed"),
            "{lines:?}"
        );
    }

    /// Writes `text` as the one intact record of `<name>.journal`.
    fn plant(dir: &Path, name: &str, text: &str) {
        let devices = dir.join("devices");
        fs::create_dir_all(&devices).expect("dir");
        let mut bytes = vec![0u8; 4 * BLOCK];
        let slot = encode_slot(1, text.as_bytes());
        bytes[..slot.len()].copy_from_slice(&slot);
        fs::write(devices.join(format!("{name}.journal")), bytes).expect("write");
    }

    #[test]
    fn bad_hex_a_short_config_and_a_bad_address_are_refused_by_type_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        let good = RawRecord::from(&record("0000:00:03.0", Phase::Held));
        let with = |f: &dyn Fn(&mut RawRecord)| {
            let mut r = good.clone();
            f(&mut r);
            serde_json::to_string(&r).expect("json")
        };
        // One bad digit in the middle: skipping it would shift every later byte.
        plant(
            dir.path(),
            "0000:00:04.0",
            &with(&|r| {
                r.bdf = "0000:00:04.0".into();
                r.saved_config.replace_range(64..65, "z");
            }),
        );
        plant(
            dir.path(),
            "0000:00:05.0",
            &with(&|r| {
                r.bdf = "0000:00:05.0".into();
                r.saved_config.truncate(2 * 40);
            }),
        );
        plant(
            dir.path(),
            "0000:00:06.0",
            &with(&|r| r.bdf = "0000:00:6.0.1".into()),
        );
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("write");

        let (records, errors) = j.load();

        assert_eq!(
            records.iter().map(|r| r.bdf).collect::<Vec<_>>(),
            [bdf("0000:00:03.0")]
        );
        let mut refused: Vec<(String, RecordError)> = errors
            .into_iter()
            .map(|e| match e {
                JournalError::Invalid { path, source } => (
                    path.file_name()
                        .expect("name")
                        .to_string_lossy()
                        .into_owned(),
                    source,
                ),
                other => panic!("not a refusal: {other}"),
            })
            .collect();
        refused.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(refused[0].0, "0000:00:04.0.journal");
        assert_eq!(
            refused[0].1,
            RecordError::Hex(HexError::Digit { at: 64, found: 'z' })
        );
        assert_eq!(refused[1].0, "0000:00:05.0.journal");
        assert_eq!(refused[1].1, RecordError::ShortConfig { len: 40 });
        assert_eq!(refused[2].0, "0000:00:06.0.journal");
        assert!(
            matches!(refused[2].1, RecordError::Address(_)),
            "{:?}",
            refused[2].1
        );
    }

    #[test]
    fn slots_reject_every_truncation_and_a_flipped_bit() {
        let slot = encode_slot(7, br#"{"bdf":"0000:00:03.0"}"#);
        assert_eq!(parse_slot(&slot).map(|(seq, _)| seq), Some(7));
        for n in 0..slot.len() {
            assert_eq!(parse_slot(&slot[..n]), None, "cut at {n}");
        }
        for bit in 0..8 * slot.len() {
            let mut s = slot.clone();
            s[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(parse_slot(&s), None, "bit {bit}");
        }
    }
}
