//! The kernel's 2 MiB hugepage pool: how many pages are free, and raising
//! `vm.nr_hugepages` when the config lets rigd reserve what its pools need.
//!
//! Read from `<sysfs>/kernel/mm/hugepages/hugepages-2048kB/` (the same counter as
//! `/proc/sys/vm/nr_hugepages` for the default size), so tests point it at a fake
//! tree. Changes are relative — add N, later take N back — because other programs
//! (and other tests) use the same counter at the same time.

use std::{
    fs, io,
    path::{Path, PathBuf},
    sync::Mutex,
};

/// Why the hugepage pool could not give what was asked.
#[derive(Debug, thiserror::Error)]
pub enum HugepageError {
    #[error("Failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} does not hold a number")]
    Parse { path: PathBuf },
    #[error(
        "DMA pools need {needed} free 2 MiB hugepages but {available} are available: raise vm.nr_hugepages by {missing} (sysctl -w vm.nr_hugepages={want}), or set dma.reserve_hugepages = true"
    )]
    Short {
        needed: u64,
        available: u64,
        missing: u64,
        want: u64,
    },
    #[error(
        "Raised vm.nr_hugepages to {total}, but only {available} of the {needed} 2 MiB hugepages DMA pools need are available: the kernel found {missing} too few (memory too small or fragmented; reserve them at boot with hugepages= on the kernel command line)"
    )]
    ReserveShort {
        needed: u64,
        available: u64,
        missing: u64,
        total: u64,
    },
}

/// One hugepage size's counters.
#[derive(Debug, Clone)]
pub struct Hugepages {
    dir: PathBuf,
}

/// Serialises read-modify-write of `nr_hugepages` within this process.
static ADJUST: Mutex<()> = Mutex::new(());

impl Hugepages {
    /// The 2 MiB counters under a sysfs root.
    pub fn new(sysfs: &Path) -> Self {
        Self {
            dir: sysfs.join("kernel/mm/hugepages/hugepages-2048kB"),
        }
    }

    fn read(&self, name: &str) -> Result<u64, HugepageError> {
        let path = self.dir.join(name);
        let text = fs::read_to_string(&path).map_err(|source| HugepageError::Read {
            path: path.clone(),
            source,
        })?;
        text.trim()
            .parse()
            .map_err(|_| HugepageError::Parse { path })
    }

    /// `nr_hugepages`: the pool's size.
    ///
    /// # Errors
    /// [`HugepageError::Read`], [`HugepageError::Parse`].
    pub fn read_total(&self) -> Result<u64, HugepageError> {
        self.read("nr_hugepages")
    }

    /// Pages free and not promised to a mapping: `free_hugepages - resv_hugepages`.
    ///
    /// # Errors
    /// [`HugepageError::Read`], [`HugepageError::Parse`].
    pub fn read_available(&self) -> Result<u64, HugepageError> {
        let free = self.read("free_hugepages")?;
        let reserved = self.read("resv_hugepages")?;
        Ok(free.saturating_sub(reserved))
    }

    fn write_total(&self, n: u64) -> Result<(), HugepageError> {
        let path = self.dir.join("nr_hugepages");
        fs::write(&path, n.to_string()).map_err(|source| HugepageError::Write { path, source })
    }

    /// Makes sure `needed` pages are available. With `reserve`, raises
    /// `nr_hugepages` by what is missing and returns how many pages it added (give them
    /// back with [`Hugepages::give_back`]); without, a shortfall is an error that says
    /// how many are missing.
    ///
    /// # Errors
    /// [`HugepageError::Short`] without `reserve`, [`HugepageError::ReserveShort`]
    /// when the kernel could not find the pages, and I/O errors.
    pub fn ensure(&self, needed: u64, reserve: bool) -> Result<u64, HugepageError> {
        if needed == 0 {
            return Ok(0);
        }
        let _serial = ADJUST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let available = self.read_available()?;
        if available >= needed {
            return Ok(0);
        }
        let missing = needed - available;
        let total = self.read_total()?;
        if !reserve {
            return Err(HugepageError::Short {
                needed,
                available,
                missing,
                want: total + missing,
            });
        }
        self.write_total(total + missing)?;
        let now = self.read_available()?;
        if now < needed {
            // Give back what the kernel did find; the start fails.
            let reached = self.read_total()?;
            self.write_total(reached.saturating_sub(missing))?;
            return Err(HugepageError::ReserveShort {
                needed,
                available: now,
                missing: needed - now,
                total: total + missing,
            });
        }
        Ok(missing)
    }

    /// Lowers `nr_hugepages` by `added` pages (the kernel keeps pages still in use as
    /// surplus and frees them when their last user goes).
    ///
    /// # Errors
    /// I/O errors on the counter.
    pub fn give_back(&self, added: u64) -> Result<(), HugepageError> {
        if added == 0 {
            return Ok(());
        }
        let _serial = ADJUST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let total = self.read_total()?;
        self.write_total(total.saturating_sub(added))
    }
}

/// Pages added to the kernel's pool for as long as this lives (tests and benches).
#[derive(Debug)]
pub struct Reservation {
    pages: Hugepages,
    added: u64,
}

impl Reservation {
    /// Makes `n` more pages available than now, by raising `nr_hugepages`.
    ///
    /// # Errors
    /// As [`Hugepages::ensure`].
    pub fn add(pages: Hugepages, n: u64) -> Result<Self, HugepageError> {
        let needed = pages.read_available()? + n;
        let added = pages.ensure(needed, true)?;
        Ok(Self { pages, added })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Err(e) = self.pages.give_back(self.added) {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(total: u64, free: u64, resv: u64) -> (tempfile::TempDir, Hugepages) {
        let dir = tempfile::tempdir().expect("tempdir");
        let h = Hugepages::new(dir.path());
        fs::create_dir_all(&h.dir).expect("mkdir");
        for (name, v) in [
            ("nr_hugepages", total),
            ("free_hugepages", free),
            ("resv_hugepages", resv),
        ] {
            fs::write(h.dir.join(name), format!("{v}\n")).expect("write");
        }
        (dir, h)
    }

    #[test]
    fn a_shortfall_names_vm_nr_hugepages_and_how_many_are_missing() {
        let (_d, h) = fake(10, 6, 2);
        let e = h.ensure(8, false).expect_err("4 available, 8 needed");
        let msg = e.to_string();
        assert!(msg.contains("vm.nr_hugepages by 4"), "{msg}");
        assert!(msg.contains("vm.nr_hugepages=14"), "{msg}");
        assert_eq!(h.read_total().expect("total"), 10, "nothing written");
    }

    #[test]
    fn enough_available_pages_need_no_change() {
        let (_d, h) = fake(10, 10, 2);
        assert_eq!(h.ensure(8, true).expect("8 available"), 0);
        assert_eq!(h.read_total().expect("total"), 10);
    }

    #[test]
    fn reserving_raises_the_counter_by_the_shortfall_and_gives_it_back() {
        // A fake file does not grow free_hugepages, so the kernel "finds" none.
        let (_d, h) = fake(10, 6, 2);
        let e = h
            .ensure(8, true)
            .expect_err("the fake kernel finds nothing");
        assert!(
            matches!(e, HugepageError::ReserveShort { missing: 4, .. }),
            "{e}"
        );
        assert_eq!(h.read_total().expect("total"), 10, "given back");
    }

    #[test]
    fn malformed_counters_are_errors_not_zero() {
        let (_d, h) = fake(1, 1, 0);
        fs::write(h.dir.join("free_hugepages"), "lots").expect("write");
        assert!(matches!(
            h.read_available(),
            Err(HugepageError::Parse { .. })
        ));
    }
}
