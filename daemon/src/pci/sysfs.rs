//! Reading PCI functions from sysfs, rooted anywhere (tests use trees in a temp dir).
//!
//! Kernel ABI: Documentation/ABI/testing/sysfs-bus-pci. Every path is built from
//! [`SysfsRoot`]; nothing here writes.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use std::os::unix::fs::FileExt;

use super::{Bdf, PciError, caps, regs};

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_fully_at(f: &fs::File, buf: &mut [u8], mut offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The root that `bus/pci/devices` hangs from: `/sys` on a real machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsRoot(PathBuf);

/// One line of sysfs `resource`: start, end, flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Resource {
    pub start: u64,
    pub end: u64,
    pub flags: u64,
}

impl Resource {
    /// The region's size, 0 when the kernel gave it none.
    pub fn size(&self) -> u64 {
        if self.end > self.start || (self.end == self.start && self.start != 0) {
            self.end - self.start + 1
        } else {
            0
        }
    }
}

impl SysfsRoot {
    /// A root at `path` (`/sys` in production).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The root path itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `<root>/bus/pci/devices`.
    pub fn devices_dir(&self) -> PathBuf {
        self.0.join("bus/pci/devices")
    }

    /// `<root>/bus/pci/devices/<bdf>`.
    pub fn device_dir(&self, bdf: Bdf) -> PathBuf {
        self.devices_dir().join(bdf.to_string())
    }

    /// Every PCI function, sorted by address. Entries whose names are not addresses
    /// are skipped: sysfs has none, and a fake tree's strays should not stop a listing.
    ///
    /// # Errors
    /// [`PciError::Enumerate`] when the devices directory cannot be read.
    pub fn list(&self) -> Result<Vec<Bdf>, PciError> {
        let dir = self.devices_dir();
        let enumerate = |source| PciError::Enumerate {
            path: dir.clone(),
            source,
        };
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(enumerate)? {
            let entry = entry.map_err(enumerate)?;
            if let Some(bdf) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                out.push(bdf);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Whether the function exists.
    pub fn exists(&self, bdf: Bdf) -> bool {
        self.device_dir(bdf).exists()
    }

    /// An attribute's contents, trimmed; `Ok(None)` when the file does not exist.
    ///
    /// # Errors
    /// Any other I/O error, with the path.
    pub fn read_attr(&self, bdf: Bdf, name: &str) -> Result<Option<String>, PciError> {
        let path = self.device_dir(bdf).join(name);
        match fs::read_to_string(&path) {
            Ok(s) => Ok(Some(s.trim().to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(PciError::Read { path, source }),
        }
    }

    /// The last path component a symlink attribute points at (`driver`, `iommu_group`).
    pub fn link_name(&self, bdf: Bdf, name: &str) -> Option<String> {
        let target = fs::read_link(self.device_dir(bdf).join(name)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// The bytes of `config` this process may read, and the file's full size.
    /// Unprivileged readers get only the first 64 bytes (`pci_read_config`).
    ///
    /// # Errors
    /// [`PciError::Read`] when the file cannot be opened or read.
    pub fn read_config(&self, bdf: Bdf) -> Result<(Vec<u8>, usize), PciError> {
        let path = self.device_dir(bdf).join("config");
        let read = |source| PciError::Read {
            path: path.clone(),
            source,
        };
        let bytes = fs::read(&path).map_err(read)?;
        let size = fs::metadata(&path).map_err(read)?.len();
        let size = usize::try_from(size).unwrap_or(usize::MAX).max(bytes.len());
        Ok((bytes, size))
    }

    /// Reads config bytes at `offset` into `buf`; returns how many the file gave.
    ///
    /// # Errors
    /// [`PciError::Read`] when the file cannot be opened or read.
    pub fn read_config_at(&self, bdf: Bdf, offset: u64, buf: &mut [u8]) -> Result<usize, PciError> {
        let path = self.device_dir(bdf).join("config");
        let read = |source| PciError::Read {
            path: path.clone(),
            source,
        };
        let f = fs::File::open(&path).map_err(read)?;
        read_fully_at(&f, buf, offset).map_err(read)
    }

    /// The config bytes the decoders use, read sparsely: the first 256 bytes, then only
    /// the header and registers of each extended capability, the rest left zero.
    /// Returns the buffer (the function's full size), how many bytes a full read would
    /// give, and the size.
    ///
    /// Each config dword a read covers is a separate config access in the kernel (and an
    /// exit to the hypervisor in a VM: ~20 µs on the H200 guest), so a listing that read
    /// all 4 KiB of every function spent most of its time here (docs/BENCHMARKS.md).
    ///
    /// # Errors
    /// [`PciError::Read`] when the file cannot be opened or read.
    pub fn read_config_sparse(&self, bdf: Bdf) -> Result<(Vec<u8>, usize, usize), PciError> {
        let path = self.device_dir(bdf).join("config");
        let read = |source| PciError::Read {
            path: path.clone(),
            source,
        };
        let f = fs::File::open(&path).map_err(read)?;
        let size = usize::try_from(f.metadata().map_err(read)?.len()).unwrap_or(usize::MAX);
        let mut buf = vec![0u8; size.min(regs::PCI_CFG_SPACE_EXP_SIZE)];
        let head = buf.len().min(regs::PCI_CFG_SPACE_SIZE);
        let n = read_fully_at(&f, &mut buf[..head], 0).map_err(read)?;
        if n < head {
            buf.truncate(n);
            return Ok((buf, n, size));
        }
        let mut at = regs::PCI_CFG_SPACE_SIZE;
        for _ in 0..caps::MAX_CAPS {
            if at + 4 > buf.len()
                || read_fully_at(&f, &mut buf[at..at + 4], at as u64).map_err(read)? < 4
            {
                break;
            }
            let header = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
            if header == 0 || header == u32::MAX {
                break;
            }
            let body = caps::ext_body_len((header & 0xffff) as u16).min(buf.len() - at);
            if body > 4 {
                read_fully_at(&f, &mut buf[at + 4..at + body], at as u64 + 4).map_err(read)?;
            }
            let next = ((header >> 20) & 0xffc) as usize;
            if next <= at {
                break; // the decoder reports loops and backward pointers
            }
            at = next;
        }
        let readable = buf.len();
        Ok((buf, readable, size))
    }

    /// Parses `resource`: one line per region (BARs 0–5, the ROM, then bridge windows
    /// or SR-IOV BARs); a missing file gives an empty list.
    ///
    /// # Errors
    /// [`PciError::Resource`] naming the line that is not three hex numbers.
    pub fn read_resources(&self, bdf: Bdf) -> Result<Vec<Resource>, PciError> {
        let path = self.device_dir(bdf).join("resource");
        let Some(text) = self.read_attr(bdf, "resource")? else {
            return Ok(Vec::new());
        };
        parse_resources(&text).map_err(|line| PciError::Resource { path, line })
    }

    /// `N` for every `resourceN_resize` file.
    pub fn resize_files(&self, bdf: Bdf) -> Vec<u8> {
        let Ok(dir) = fs::read_dir(self.device_dir(bdf)) else {
            return Vec::new();
        };
        let mut out: Vec<u8> = dir
            .filter_map(|e| {
                let name = e.ok()?.file_name();
                let n = name
                    .to_str()?
                    .strip_prefix("resource")?
                    .strip_suffix("_resize")?;
                n.parse().ok()
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The members of the function's IOMMU group, this one included, sorted.
    pub fn iommu_group_members(&self, bdf: Bdf) -> Vec<Bdf> {
        let Ok(dir) = fs::read_dir(self.device_dir(bdf).join("iommu_group/devices")) else {
            return Vec::new();
        };
        let mut out: Vec<Bdf> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        out.sort_unstable();
        out
    }

    /// The bridges above the function, nearest first, up to the root port: read from
    /// the directory the `bus/pci/devices/<bdf>` link resolves to
    /// (`devices/pci0000:00/0000:00:01.0/0000:01:00.0`).
    pub fn upstream(&self, bdf: Bdf) -> Vec<Bdf> {
        let Ok(real) = fs::canonicalize(self.device_dir(bdf)) else {
            return Vec::new();
        };
        let mut chain: Vec<Bdf> = real
            .components()
            .filter_map(|c| c.as_os_str().to_str()?.parse().ok())
            .filter(|b| *b != bdf)
            .collect();
        chain.reverse();
        chain
    }
}

/// Parses the text of a `resource` file; `Err(line number)` (1-based) on a bad line.
pub fn parse_resources(text: &str) -> Result<Vec<Resource>, usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let mut it = line.split_whitespace().map(|f| {
                let f = f.strip_prefix("0x").unwrap_or(f);
                u64::from_str_radix(f, 16)
            });
            match (it.next(), it.next(), it.next(), it.next()) {
                (Some(Ok(start)), Some(Ok(end)), Some(Ok(flags)), None) => {
                    Ok(Resource { start, end, flags })
                }
                _ => Err(i + 1),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_lines_parse_with_sizes() {
        let text = "0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
        let r = parse_resources(text).expect("well formed");
        assert_eq!(r[0].size(), 16 << 20);
        assert_eq!(r[1].size(), 0);
    }

    #[test]
    fn malformed_resource_line_names_its_number() {
        assert_eq!(parse_resources("0x0 0x0 0x0\nnot hex at all\n"), Err(2));
        assert_eq!(parse_resources("0x0 0x0\n"), Err(1));
        assert_eq!(parse_resources("0x0 0x0 0x0 0x0\n"), Err(1));
    }
}
