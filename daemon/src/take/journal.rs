//! The take-over journal: one record per held device under `<state_dir>/devices/`,
//! rewritten atomically (temp file, fsync, rename, fsync of the directory) before each
//! step runs, so a crash at any point leaves a record that says what was under way.
//!
//! Recovery (`take::recover`) reads these at start.

use std::{
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::pci::Bdf;

/// How a device is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Bound to vfio-pci; DMA confined by the IOMMU.
    Vfio,
    /// Left driverless and driven through sysfs `resourceN`; DMA is unconfined.
    Sysfs,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Vfio => "vfio",
            Self::Sysfs => "sysfs",
        })
    }
}

/// Where a device is in its life with rig. The step names say what is about to be
/// done (written before it is done).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "phase", content = "step")]
pub enum Phase {
    Detaching(String),
    Held,
    Resizing(String),
    Resetting(String),
    Attaching(String),
}

/// One device's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub bdf: String,
    pub mode: Mode,
    /// The driver to give the device back to; `None` if it had none.
    pub original_driver: Option<String>,
    pub phase: Phase,
    /// Seconds since the epoch when rig took it.
    pub since: u64,
    /// The config space as it was before rig touched it (hex), for restores.
    pub saved_config: String,
    /// Other functions of its IOMMU group taken with it (`--entire-group`), with
    /// their drivers.
    pub group_members: Vec<(String, Option<String>)>,
}

impl Record {
    /// The device's address.
    ///
    /// # Errors
    /// When the record was edited into something that is not an address.
    pub fn address(&self) -> Result<Bdf, crate::pci::BdfError> {
        self.bdf.parse()
    }
}

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

    fn path(&self, bdf: &str) -> PathBuf {
        self.dir.join(format!("{bdf}.json"))
    }

    /// Writes `record` durably before the step it names runs.
    ///
    /// # Errors
    /// [`JournalError::Write`]; the caller must not do the step then.
    pub fn write(&self, record: &Record) -> Result<(), JournalError> {
        let err = |source| JournalError::Write {
            path: self.dir.clone(),
            source,
        };
        fs::create_dir_all(&self.dir).map_err(err)?;
        let path = self.path(&record.bdf);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(record).map_err(|e| err(io::Error::other(e)))?;
        let mut f = File::create(&tmp).map_err(err)?;
        f.write_all(&text).map_err(err)?;
        f.sync_all().map_err(err)?;
        fs::rename(&tmp, &path).map_err(err)?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(err)
    }

    /// Forgets a device that is back with its driver.
    ///
    /// # Errors
    /// [`JournalError::Write`].
    pub fn remove(&self, bdf: &str) -> Result<(), JournalError> {
        let err = |source| JournalError::Write {
            path: self.dir.clone(),
            source,
        };
        match fs::remove_file(self.path(bdf)) {
            Ok(()) => File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(err),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err(e)),
        }
    }

    /// Every record, sorted by address; a malformed one is an error naming its file
    /// (recovery then refuses to guess about that device).
    ///
    /// # Errors
    /// [`JournalError::Read`] or [`JournalError::Malformed`], one per bad file.
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
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match fs::read(&path) {
                Ok(bytes) => match serde_json::from_slice::<Record>(&bytes) {
                    Ok(r) => records.push(r),
                    Err(source) => errors.push(JournalError::Malformed { path, source }),
                },
                Err(source) => errors.push(JournalError::Read { path, source }),
            }
        }
        records.sort_by(|a, b| a.bdf.cmp(&b.bdf));
        (records, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(bdf: &str, phase: Phase) -> Record {
        Record {
            bdf: bdf.to_owned(),
            mode: Mode::Vfio,
            original_driver: Some("bochs-drm".to_owned()),
            phase,
            since: 1,
            saved_config: "00".repeat(64),
            group_members: Vec::new(),
        }
    }

    #[test]
    fn records_round_trip_and_rewrites_replace_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        j.write(&record("0000:00:03.0", Phase::Detaching("unbind".into())))
            .expect("write");
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("rewrite");
        j.write(&record("0000:00:02.0", Phase::Attaching("probe".into())))
            .expect("write");
        let (records, errors) = j.load();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].phase, Phase::Attaching("probe".into()));
        assert_eq!(records[1].phase, Phase::Held);
        j.remove("0000:00:03.0").expect("remove");
        j.remove("0000:00:03.0").expect("removing twice is fine");
        assert_eq!(j.load().0.len(), 1);
    }

    #[test]
    fn a_malformed_record_is_reported_with_its_path_and_others_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::new(dir.path());
        j.write(&record("0000:00:03.0", Phase::Held))
            .expect("write");
        fs::write(dir.path().join("devices/0000:00:04.0.json"), b"{not json").expect("write");
        fs::write(dir.path().join("devices/0000:00:05.0.json.tmp"), b"half").expect("write");
        let (records, errors) = j.load();
        assert_eq!(records.len(), 1);
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains("0000:00:04.0.json"),
            "{}",
            errors[0]
        );
    }
}
