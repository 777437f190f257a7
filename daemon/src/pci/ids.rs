//! Human-readable names for PCI ids, from the `pci.ids` database that pciutils (`lspci`) reads.
//!
//! Flow: `rigd` start-up → [`PciIds::load`] once → shared read-only with the rest of `pci`,
//! which asks it for names when it describes a device. Names are decoration only: when the
//! file is missing the daemon uses [`PciIds::empty`], every lookup answers `None`, and nothing
//! else changes.
//!
//! State: the file's text and six tables of name spans into it, sorted by id. Immutable after
//! construction, so it needs no lock. A lookup is one binary search and never allocates.
//! Cost, measured on the 2-core dev VM with Debian bookworm's file (version 2023.04.10:
//! 1.36 MB, 36,179 lines, 35,598 entries): `load` takes 2.1 ms in a release build (parsing
//! alone 1.8 ms; a debug build needs 25 ms); the tables take 0.49 MB beside the text; a lookup
//! takes about 30 ns.
//!
//! Reference: the header comment of `pci.ids` itself, and pciutils `lib/names-parse.c`
//! (`id_parse_list`), whose rules this parser follows — see "Syntax" below.
//! Not here: chip identity from ids (`pci::gpu`), reading sysfs (`pci`).
//!
//! # Syntax, as pciutils parses it
//!
//! `id_parse_list` (pciutils 3.x) takes the file line by line:
//! - It cuts a line at the first `\n` or `\r`, then drops *one* trailing space or tab.
//! - It skips a line that is empty, all blanks, or whose first non-blank is `#`.
//! - Leading tabs give the nesting level; a leading space does not nest and fails the id parse.
//! - Level 0: `C cc  name` opens a class; `S vvvv` opens a generic-subsystem block; any other
//!   capital letter plus a space opens a block reserved for future use, whose nested lines are
//!   skipped; anything else must be a vendor, `vvvv  name`.
//! - Level 1: `dddd  name` under a vendor, `ss  name` under a class.
//! - Level 2: `ssss ssss  name` under a device; `pp  name` under a subclass, or directly under
//!   a class, where pciutils files it under subclass 00.
//! - An id is exactly 4 (or 2) hex digits of either case followed by a space or tab. After
//!   further blanks comes the name, which must not be empty.
//! - Any other line is "Parse error", and so is a duplicate entry ("Duplicate entry"). Examples:
//!   a device line before any vendor, a subsystem line directly under a vendor, three tabs, a
//!   bad hex digit, a missing name. lspci then refuses the whole file.
//!
//! This parser skips and rejects the same lines. It reports a rejection as [`IdsError::Parse`]
//! with the 1-based line number and a specific reason. It differs from pciutils in three ways:
//! - There is no 1024-byte line limit (pciutils: "Line too long").
//! - `S` blocks are skipped like reserved blocks. pciutils stores them as fallback subsystem
//!   names, and fails if the vendor is unknown. No released `pci.ids` has one.
//! - [`PciIds::load`] turns bytes that are not UTF-8 into U+FFFD; pciutils copies bytes.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where distributions install the database: Debian's `pci.ids` package, then `hwdata`.
pub const DEFAULT_PATHS: [&str; 2] = ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

/// Failure to build a [`PciIds`]. The daemon treats either as "no names" (see module docs).
#[derive(Debug, thiserror::Error)]
pub enum IdsError {
    /// The file could not be read.
    #[error("Failed to read PCI id database {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A line breaks the file's structure; pciutils refuses such a file too.
    #[error("Malformed PCI id database {}, line {line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        /// 1-based, as pciutils counts.
        line: usize,
        reason: &'static str,
    },
}

/// Byte range of a name in [`PciIds::text`]. `u32` halves the tables; texts of 4 GiB or more
/// are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

/// Names by id, sorted by id.
#[derive(Debug)]
struct Table<K> {
    entries: Vec<(K, Span)>,
}

impl<K: Ord + Copy> Table<K> {
    const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    fn get(&self, key: K) -> Option<Span> {
        let i = self.entries.binary_search_by(|(k, _)| k.cmp(&key)).ok()?;
        self.entries.get(i).map(|&(_, span)| span)
    }

    /// Sorts by id, drops spare capacity, and returns the span of a repeated id, if any. The
    /// sort is stable, so the span is that of the later line; it is linear on the file, which
    /// is already sorted.
    fn finish(&mut self) -> Option<Span> {
        self.entries.sort_by_key(|&(k, _)| k);
        self.entries.shrink_to_fit();
        self.entries.windows(2).find_map(|w| match w {
            [(a, _), (b, span)] if a == b => Some(*span),
            _ => None,
        })
    }
}

/// Names from `pci.ids`: vendors, devices, subsystems, classes, subclasses, programming
/// interfaces. Built once per daemon start; every query is a binary search.
pub struct PciIds {
    /// The whole file; the tables point into it.
    text: Box<str>,
    /// The `Version:` line of the header comment, if any.
    version: Option<Span>,
    tables: Tables,
}

/// One table per kind of entry, keyed by the ids that lead to it.
#[derive(Debug)]
struct Tables {
    vendors: Table<u16>,
    /// (vendor, device).
    devices: Table<(u16, u16)>,
    /// (vendor, device, subsystem vendor, subsystem device).
    subsystems: Table<(u16, u16, u16, u16)>,
    classes: Table<u8>,
    /// (class, subclass).
    subclasses: Table<(u8, u8)>,
    /// (class, subclass, prog-if).
    prog_ifs: Table<(u8, u8, u8)>,
}

impl Tables {
    const fn new() -> Self {
        Self {
            vendors: Table::new(),
            devices: Table::new(),
            subsystems: Table::new(),
            classes: Table::new(),
            subclasses: Table::new(),
            prog_ifs: Table::new(),
        }
    }

    fn insert(&mut self, entry: Entry, name: Span) {
        match entry {
            Entry::Vendor(v) => self.vendors.entries.push((v, name)),
            Entry::Device(v, d) => self.devices.entries.push(((v, d), name)),
            Entry::Subsystem(v, d, sv, sd) => self.subsystems.entries.push(((v, d, sv, sd), name)),
            Entry::Class(c) => self.classes.entries.push((c, name)),
            Entry::Subclass(c, s) => self.subclasses.entries.push(((c, s), name)),
            Entry::ProgIf(c, s, p) => self.prog_ifs.entries.push(((c, s, p), name)),
        }
    }

    /// Sorts every table; returns the earliest repeated entry's span and a reason.
    fn finish(&mut self) -> Option<(Span, &'static str)> {
        [
            (self.vendors.finish(), "duplicate vendor"),
            (self.devices.finish(), "duplicate device"),
            (self.subsystems.finish(), "duplicate subsystem"),
            (self.classes.finish(), "duplicate class"),
            (self.subclasses.finish(), "duplicate subclass"),
            (self.prog_ifs.finish(), "duplicate prog-if"),
        ]
        .into_iter()
        .filter_map(|(span, reason)| Some((span?, reason)))
        .min_by_key(|(span, _)| span.start)
    }
}

/// Counts instead of 1.4 MB of text.
impl fmt::Debug for PciIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PciIds")
            .field("version", &self.version())
            .field("vendors", &self.tables.vendors.entries.len())
            .field("devices", &self.tables.devices.entries.len())
            .field("subsystems", &self.tables.subsystems.entries.len())
            .field("classes", &self.tables.classes.entries.len())
            .field("subclasses", &self.tables.subclasses.entries.len())
            .field("prog_ifs", &self.tables.prog_ifs.entries.len())
            .finish()
    }
}

impl PciIds {
    /// Reads and parses the whole file at `path` (see [`DEFAULT_PATHS`]).
    ///
    /// # Errors
    /// [`IdsError::Read`] if the file cannot be read, [`IdsError::Parse`] for the first line
    /// that pciutils would reject too.
    pub fn load(path: &Path) -> Result<Self, IdsError> {
        let bytes = std::fs::read(path).map_err(|source| IdsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        Self::parse_owned(text, path)
    }

    /// Parses `text` in `pci.ids` format; `path_for_errors` only labels errors. No I/O.
    ///
    /// # Errors
    /// [`IdsError::Parse`] for the first line that pciutils would reject too.
    pub fn parse(text: &str, path_for_errors: &Path) -> Result<Self, IdsError> {
        Self::parse_owned(text.to_owned(), path_for_errors)
    }

    /// No names at all: every lookup answers `None`. For when the file is missing.
    pub fn empty() -> Self {
        Self {
            text: Box::default(),
            version: None,
            tables: Tables::new(),
        }
    }

    /// True when the database names nothing, as [`PciIds::empty`].
    pub const fn is_empty(&self) -> bool {
        self.tables.vendors.entries.is_empty() && self.tables.classes.entries.is_empty()
    }

    /// The database's `Version:` header line, e.g. `2023.04.10`, worth logging at start.
    pub fn version(&self) -> Option<&str> {
        self.version.and_then(|span| self.name(span))
    }

    pub fn vendor(&self, vendor: u16) -> Option<&str> {
        self.lookup(&self.tables.vendors, vendor)
    }

    pub fn device(&self, vendor: u16, device: u16) -> Option<&str> {
        self.lookup(&self.tables.devices, (vendor, device))
    }

    /// The name listed for exactly this subsystem of this device. Unlike lspci, this does not
    /// fall back to the device's name when the subsystem ids equal the device ids.
    pub fn subsystem(
        &self,
        vendor: u16,
        device: u16,
        sub_vendor: u16,
        sub_device: u16,
    ) -> Option<&str> {
        self.lookup(
            &self.tables.subsystems,
            (vendor, device, sub_vendor, sub_device),
        )
    }

    pub fn class(&self, class: u8) -> Option<&str> {
        self.lookup(&self.tables.classes, class)
    }

    pub fn subclass(&self, class: u8, subclass: u8) -> Option<&str> {
        self.lookup(&self.tables.subclasses, (class, subclass))
    }

    pub fn prog_if(&self, class: u8, subclass: u8, prog_if: u8) -> Option<&str> {
        self.lookup(&self.tables.prog_ifs, (class, subclass, prog_if))
    }

    /// Every device listed under `vendor`, by ascending device id.
    pub fn devices(&self, vendor: u16) -> impl Iterator<Item = (u16, &str)> {
        let entries = &self.tables.devices.entries;
        let first = entries.partition_point(|&((v, _), _)| v < vendor);
        let end = entries.partition_point(|&((v, _), _)| v <= vendor);
        entries
            .get(first..end)
            .unwrap_or_default()
            .iter()
            .filter_map(|&((_, device), span)| Some((device, self.name(span)?)))
    }

    fn lookup<K: Ord + Copy>(&self, table: &Table<K>, key: K) -> Option<&str> {
        self.name(table.get(key)?)
    }

    fn name(&self, span: Span) -> Option<&str> {
        let start = usize::try_from(span.start).ok()?;
        let end = usize::try_from(span.end).ok()?;
        self.text.get(start..end)
    }

    fn parse_owned(text: String, path: &Path) -> Result<Self, IdsError> {
        let error = |line, reason| IdsError::Parse {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let (version, mut tables) = parse_lines(&text).map_err(|(line, why)| error(line, why))?;
        if let Some((span, reason)) = tables.finish() {
            return Err(error(line_of(&text, span), reason));
        }
        let text = text.into_boxed_str();
        Ok(Self {
            text,
            version,
            tables,
        })
    }
}

/// 1-based number of the line holding `span`; only for error reports.
fn line_of(text: &str, span: Span) -> usize {
    let end = usize::try_from(span.start).unwrap_or(usize::MAX);
    let before = text.get(..end).unwrap_or(text);
    before.bytes().filter(|&b| b == b'\n').count() + 1
}

/// Fills unsorted tables from `text`, and finds the header's version. On error: the 1-based
/// line number and the reason.
fn parse_lines(text: &str) -> Result<(Option<Span>, Tables), (usize, &'static str)> {
    const TOO_LARGE: &str = "file of 4 GiB or more";
    if u32::try_from(text.len()).is_err() {
        return Err((0, TOO_LARGE));
    }
    let mut tables = Tables::new();
    let mut block = Block::None;
    let mut version = None;
    let mut line_start = 0;
    for (index, raw) in text.split('\n').enumerate() {
        let number = index + 1;
        let line = trim_line(raw);
        let name_at =
            |offset| span(line_start + offset, line_start + line.len()).ok_or((number, TOO_LARGE));
        let first = line.trim_start_matches([' ', '\t']);
        if first.is_empty() || first.starts_with('#') {
            if let (Block::None, Some(v)) = (block, version_in_comment(first)) {
                // `v` is a suffix of `line`.
                version = Some(name_at(line.len() - v.len())?);
            }
        } else if let Some((entry, name_offset)) =
            parse_line(line, &mut block).map_err(|reason| (number, reason))?
        {
            tables.insert(entry, name_at(name_offset)?);
        }
        line_start += raw.len() + 1;
    }
    Ok((version, tables))
}

/// The block that nested lines belong to: pciutils' `cat` plus the ids above the line.
/// A subsystem line leaves `Device` in place, and a prog-if line leaves `Subclass`, since the
/// next line parses the same either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// Before the first top-level line.
    None,
    /// Generic-subsystem (`S`) or reserved block: nested lines are ignored.
    Skipped,
    Vendor(u16),
    Device(u16, u16),
    Class(u8),
    Subclass(u8, u8),
}

/// One named line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Vendor(u16),
    Device(u16, u16),
    Subsystem(u16, u16, u16, u16),
    Class(u8),
    Subclass(u8, u8),
    ProgIf(u8, u8, u8),
}

impl Entry {
    /// The block opened by this entry for the lines nested under it.
    const fn block(self) -> Block {
        match self {
            Self::Vendor(v) => Block::Vendor(v),
            Self::Device(v, d) | Self::Subsystem(v, d, _, _) => Block::Device(v, d),
            Self::Class(c) => Block::Class(c),
            Self::Subclass(c, s) | Self::ProgIf(c, s, _) => Block::Subclass(c, s),
        }
    }
}

/// Parses one line that is neither blank nor a comment, updating `block`. Returns the entry and
/// the byte offset of its name in `line`, or `None` for a line that opens or sits in a skipped
/// block. The error is the reason, for [`IdsError::Parse`].
fn parse_line(line: &str, block: &mut Block) -> Result<Option<(Entry, usize)>, &'static str> {
    let bytes = line.as_bytes();
    let nest = bytes.iter().take_while(|&&b| b == b'\t').count();
    let rest = bytes.get(nest..).unwrap_or_default();
    if nest > 0 && *block == Block::Skipped {
        return Ok(None);
    }
    let (entry, id_end) = match (nest, *block) {
        (0, _) => match rest {
            [b'C', b' ', ..] => {
                let class = hex_u8(rest.get(2..)).ok_or("invalid class id")?;
                (Entry::Class(class), 4)
            }
            [b'A'..=b'Z', b' ', ..] => {
                *block = Block::Skipped;
                return Ok(None);
            }
            _ => (Entry::Vendor(hex_u16(rest).ok_or("invalid vendor id")?), 4),
        },
        (1, Block::Vendor(v) | Block::Device(v, _)) => (
            Entry::Device(v, hex_u16(rest).ok_or("invalid device id")?),
            4,
        ),
        (1, Block::Class(c) | Block::Subclass(c, _)) => (
            Entry::Subclass(c, hex_u8(Some(rest)).ok_or("invalid subclass id")?),
            2,
        ),
        (1, _) => return Err("device or subclass line outside a vendor or class block"),
        (2, Block::Device(v, d)) => {
            let sub_vendor = hex_u16(rest).filter(|_| is_blank(rest.get(4)));
            let sub_device = rest.get(5..).and_then(hex_u16);
            match (sub_vendor, sub_device) {
                (Some(sv), Some(sd)) => (Entry::Subsystem(v, d, sv, sd), 9),
                _ => return Err("invalid subsystem ids"),
            }
        }
        // pciutils files a prog-if directly under a class under subclass 00.
        (2, Block::Class(c)) => (
            Entry::ProgIf(c, 0, hex_u8(Some(rest)).ok_or("invalid prog-if id")?),
            2,
        ),
        (2, Block::Subclass(c, s)) => (
            Entry::ProgIf(c, s, hex_u8(Some(rest)).ok_or("invalid prog-if id")?),
            2,
        ),
        (2, _) => return Err("subsystem or prog-if line outside a device or subclass block"),
        _ => return Err("line nested deeper than two tabs"),
    };
    if !is_blank(rest.get(id_end)) {
        return Err("id not followed by a space or tab");
    }
    let blanks = rest
        .get(id_end..)
        .unwrap_or_default()
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let name_offset = id_end + blanks;
    if name_offset >= rest.len() {
        return Err("entry without a name");
    }
    *block = entry.block();
    Ok(Some((entry, nest + name_offset)))
}

/// Cuts at the first `\r` and drops one trailing blank, as pciutils does.
fn trim_line(raw: &str) -> &str {
    let line = raw.split('\r').next().unwrap_or_default();
    line.strip_suffix([' ', '\t']).unwrap_or(line)
}

/// `Version: 2023.04.10` in a header comment (`first` starts at the `#`) → `2023.04.10`.
fn version_in_comment(first: &str) -> Option<&str> {
    let body = first.strip_prefix('#')?.trim_start_matches([' ', '\t']);
    let version = body
        .strip_prefix("Version:")?
        .trim_start_matches([' ', '\t']);
    (!version.is_empty()).then_some(version)
}

fn span(start: usize, end: usize) -> Option<Span> {
    Some(Span {
        start: u32::try_from(start).ok()?,
        end: u32::try_from(end).ok()?,
    })
}

const fn is_blank(byte: Option<&u8>) -> bool {
    matches!(byte, Some(b' ' | b'\t'))
}

/// Exactly `digits` hex digits of either case at the start of `bytes`, like pciutils `id_hex`
/// (no sign, no `0x`, unlike `from_str_radix`).
fn hex_id(bytes: &[u8], digits: usize) -> Option<u16> {
    bytes.get(..digits)?.iter().try_fold(0u16, |acc, &b| {
        let digit = u16::try_from(char::from(b).to_digit(16)?).ok()?;
        Some(acc << 4 | digit)
    })
}

fn hex_u16(bytes: &[u8]) -> Option<u16> {
    hex_id(bytes, 4)
}

fn hex_u8(bytes: Option<&[u8]>) -> Option<u8> {
    u8::try_from(hex_id(bytes?, 2)?).ok()
}

#[cfg(test)]
mod tests;
