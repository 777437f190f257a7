//! The ELF header fields and section header table of a file, read lazily: header, section
//! header table and the section-name string table, nothing else.
//!
//! Section data is never read here; callers get a checked [`Span`] per section.
//!
//! Every offset is checked before it is read: `e_shoff + e_shnum * e_shentsize`, each section's
//! `sh_offset + sh_size` (except `SHT_NOBITS`/`SHT_NULL`), each name's `sh_name`. Errors name
//! the field and the file offset where it is stored.
//!
//! Reference: System V ABI, "Object Files" (ELF header, section header); goblin parses the
//! structures (nova-core `firmware/gsp.rs` checks the same bounds by hand).

use goblin::container::{Container, Ctx};
use goblin::elf::section_header::{self, SectionHeader};
use goblin::elf::{Elf, header};
use goblin::strtab::Strtab;

use crate::span::{ReadSpan, Span};

/// Size of an ELF64 header, the larger of the two classes.
const EHDR64_SIZE: u64 = 64;

/// `e_ident` class byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ElfClass {
    /// ELFCLASS32.
    Elf32,
    /// ELFCLASS64.
    Elf64,
}

/// One section header, with its name resolved and its file range checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Index in the section header table.
    pub index: usize,
    /// Name from the section-name string table.
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr`.
    pub addr: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size`.
    pub size: u64,
    /// `sh_entsize`.
    pub entsize: u64,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info`.
    pub info: u32,
    /// `sh_addralign`.
    pub align: u64,
    /// File bytes of the section; empty for `SHT_NULL` and `SHT_NOBITS`.
    pub span: Span,
}

impl Section {
    /// Whether the section occupies memory at run time (`SHF_ALLOC`).
    pub fn is_alloc(&self) -> bool {
        self.flags & u64::from(section_header::SHF_ALLOC) != 0
    }

    /// `sh_type` as readelf prints it (`PROGBITS`, `STRTAB`, …).
    pub fn type_name(&self) -> String {
        type_name(self.sh_type)
    }

    /// `sh_flags` as the letters readelf prints (`WA`, `AX`, …).
    pub fn flags_string(&self) -> String {
        flags_string(self.flags)
    }
}

/// The header fields and section table of an ELF file.
#[derive(Clone, Debug)]
pub struct ElfIndex {
    /// 32- or 64-bit.
    pub class: ElfClass,
    /// Data encoding: little-endian.
    pub little_endian: bool,
    /// `e_ident[EI_OSABI]`.
    pub os_abi: u8,
    /// `e_ident[EI_ABIVERSION]`.
    pub abi_version: u8,
    /// `e_type` (`ET_REL` = 1 for GSP-RM).
    pub e_type: u16,
    /// `e_machine` (`EM_RISCV` = 243 for GSP-RM).
    pub machine: u16,
    /// `e_flags` (machine-specific).
    pub flags: u32,
    /// `e_shoff`.
    pub shoff: u64,
    /// Sections in table order, index 0 included.
    pub sections: Vec<Section>,
}

/// Errors of the ELF section index.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// Not an ELF file, or its header is cut short.
    #[error("no ELF header: {reason}")]
    Header {
        /// What is wrong.
        reason: String,
    },
    /// A header field holds a value this reader cannot use.
    #[error("ELF header field {field} at offset {at:#x} is {value:#x}: {reason}")]
    HeaderField {
        /// The field's name in the ELF specification.
        field: &'static str,
        /// File offset of the field.
        at: u64,
        /// Its value.
        value: u64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A range named by a field lies outside the file.
    #[error(
        "{field} at offset {at:#x} places {size:#x} bytes at {offset:#x}, past the end of the file ({len:#x})"
    )]
    OutOfBounds {
        /// The field's name.
        field: &'static str,
        /// File offset of the field.
        at: u64,
        /// The range's start.
        offset: u64,
        /// The range's size.
        size: u64,
        /// The file's length.
        len: u64,
    },
    /// A section header could not be decoded.
    #[error("section header table at offset {at:#x} is malformed: {reason}")]
    SectionTable {
        /// File offset of the table.
        at: u64,
        /// goblin's message.
        reason: String,
    },
    /// A section's name cannot be resolved.
    #[error(
        "section {index}: sh_name at offset {at:#x} ({value:#x}) is not a name in the string table"
    )]
    Name {
        /// Section index.
        index: usize,
        /// File offset of `sh_name`.
        at: u64,
        /// Its value.
        value: u64,
    },
    /// The section-name string table is malformed.
    #[error("section-name string table at offset {at:#x} is malformed: {reason}")]
    Strtab {
        /// File offset of the table's data.
        at: u64,
        /// goblin's message.
        reason: String,
    },
    /// A symbol table or relocation section cannot be read as one.
    #[error("section {index} ({name}) {reason}")]
    Table {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A symbol's name cannot be resolved.
    #[error(
        "symbol {index} of section {table}: st_name ({value:#x}) is not a name in its string table"
    )]
    SymbolName {
        /// The symbol table's section index.
        table: usize,
        /// The symbol's index.
        index: usize,
        /// Its `st_name`.
        value: u32,
    },
    /// Reading the file failed.
    #[error("cannot read the ELF structures")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Field offsets inside the ELF header, by class: (e_shoff, e_shentsize, e_shnum, e_shstrndx).
fn header_field_offsets(class: ElfClass) -> (u64, u64, u64, u64) {
    match class {
        ElfClass::Elf64 => (0x28, 0x3a, 0x3c, 0x3e),
        ElfClass::Elf32 => (0x20, 0x2e, 0x30, 0x32),
    }
}

/// Field offsets inside one section header, by class: (sh_name, sh_offset, sh_size).
fn shdr_field_offsets(class: ElfClass) -> (u64, u64, u64) {
    match class {
        ElfClass::Elf64 => (0, 24, 32),
        ElfClass::Elf32 => (0, 16, 20),
    }
}

impl ElfIndex {
    /// Reads the header, the section header table and the section names of `src`.
    ///
    /// # Errors
    /// [`ElfError`] naming the field and file offset of the first thing out of bounds or
    /// unsupported (big-endian files, extended section numbering).
    pub fn parse<S: ReadSpan + ?Sized>(src: &S) -> Result<ElfIndex, ElfError> {
        let len = src.len();
        let head = read(
            src,
            Span::checked(0, len.min(EHDR64_SIZE), len).unwrap_or_default(),
        )?;
        let hdr = Elf::parse_header(&head).map_err(|e| ElfError::Header {
            reason: e.to_string(),
        })?;
        let class = match hdr.container() {
            Ok(Container::Big) => ElfClass::Elf64,
            Ok(Container::Little) => ElfClass::Elf32,
            Err(e) => {
                return Err(ElfError::Header {
                    reason: e.to_string(),
                });
            }
        };
        let little_endian = hdr.e_ident[header::EI_DATA] == header::ELFDATA2LSB;
        if !little_endian {
            return Err(ElfError::HeaderField {
                field: "e_ident[EI_DATA]",
                at: header::EI_DATA as u64,
                value: u64::from(hdr.e_ident[header::EI_DATA]),
                reason: "only little-endian files are read",
            });
        }
        let ctx = Ctx::new(
            hdr.container().unwrap_or(Container::Big),
            goblin::container::Endian::Little,
        );
        let (at_shoff, at_shentsize, at_shnum, at_shstrndx) = header_field_offsets(class);
        let sections = if hdr.e_shoff == 0 {
            Vec::new()
        } else {
            let entsize = SectionHeader::size(ctx) as u64;
            if u64::from(hdr.e_shentsize) != entsize {
                return Err(ElfError::HeaderField {
                    field: "e_shentsize",
                    at: at_shentsize,
                    value: u64::from(hdr.e_shentsize),
                    reason: "does not match the class's section header size",
                });
            }
            if hdr.e_shnum == 0 {
                return Err(ElfError::HeaderField {
                    field: "e_shnum",
                    at: at_shnum,
                    value: 0,
                    reason: "extended section numbering is not supported",
                });
            }
            let table_size = u64::from(hdr.e_shnum).saturating_mul(entsize);
            let table =
                Span::checked(hdr.e_shoff, table_size, len).ok_or(ElfError::OutOfBounds {
                    field: "e_shoff",
                    at: at_shoff,
                    offset: hdr.e_shoff,
                    size: table_size,
                    len,
                })?;
            if hdr.e_shstrndx >= hdr.e_shnum {
                return Err(ElfError::HeaderField {
                    field: "e_shstrndx",
                    at: at_shstrndx,
                    value: u64::from(hdr.e_shstrndx),
                    reason: "is not a section index",
                });
            }
            let bytes = read(src, table)?;
            let headers = SectionHeader::parse_from(&bytes, 0, usize::from(hdr.e_shnum), ctx)
                .map_err(|e| ElfError::SectionTable {
                    at: hdr.e_shoff,
                    reason: e.to_string(),
                })?;
            resolve(src, class, table, &headers, usize::from(hdr.e_shstrndx))?
        };
        Ok(ElfIndex {
            class,
            little_endian,
            os_abi: hdr.e_ident[header::EI_OSABI],
            abi_version: hdr.e_ident[header::EI_ABIVERSION],
            e_type: hdr.e_type,
            machine: hdr.e_machine,
            flags: hdr.e_flags,
            shoff: hdr.e_shoff,
            sections,
        })
    }

    /// The first section called `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }
}

/// Reads `span` of `src`, boxing the reader's own error.
pub(crate) fn read<S: ReadSpan + ?Sized>(
    src: &S,
    span: Span,
) -> Result<std::borrow::Cow<'_, [u8]>, ElfError> {
    src.read_span(span).map_err(|e| ElfError::Read(Box::new(e)))
}

/// Checks every section's range and resolves its name.
fn resolve<S: ReadSpan + ?Sized>(
    src: &S,
    class: ElfClass,
    table: Span,
    headers: &[SectionHeader],
    shstrndx: usize,
) -> Result<Vec<Section>, ElfError> {
    let len = src.len();
    let entsize = table.size() / headers.len().max(1) as u64;
    let (at_name, at_offset, _at_size) = shdr_field_offsets(class);
    let field_at = |index: usize, field: u64| {
        table
            .offset()
            .saturating_add((index as u64).saturating_mul(entsize))
            .saturating_add(field)
    };
    let spans = headers
        .iter()
        .enumerate()
        .map(|(index, sh)| {
            if sh.sh_type == section_header::SHT_NOBITS || sh.sh_type == section_header::SHT_NULL {
                return Ok(Span::default());
            }
            Span::checked(sh.sh_offset, sh.sh_size, len).ok_or(ElfError::OutOfBounds {
                field: "sh_offset",
                at: field_at(index, at_offset),
                offset: sh.sh_offset,
                size: sh.sh_size,
                len,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // PANIC: shstrndx < headers.len() was checked by the caller against e_shnum, and
    // parse_from returned exactly e_shnum headers.
    let str_span = spans[shstrndx];
    let str_bytes = read(src, str_span)?;
    let strtab =
        Strtab::parse(&str_bytes, 0, str_bytes.len(), 0).map_err(|e| ElfError::Strtab {
            at: str_span.offset(),
            reason: e.to_string(),
        })?;
    headers
        .iter()
        .zip(spans)
        .enumerate()
        .map(|(index, (sh, span))| {
            let name_err = || ElfError::Name {
                index,
                at: field_at(index, at_name),
                value: sh.sh_name as u64,
            };
            let name = if index == 0 && sh.sh_name == 0 {
                String::new()
            } else {
                strtab.get_at(sh.sh_name).ok_or_else(name_err)?.to_owned()
            };
            Ok(Section {
                index,
                name,
                sh_type: sh.sh_type,
                flags: sh.sh_flags,
                addr: sh.sh_addr,
                offset: sh.sh_offset,
                size: sh.sh_size,
                entsize: sh.sh_entsize,
                link: sh.sh_link,
                info: sh.sh_info,
                align: sh.sh_addralign,
                span,
            })
        })
        .collect()
}

/// `sh_type` the way `readelf -S` prints it.
pub fn type_name(sh_type: u32) -> String {
    match sh_type {
        section_header::SHT_NULL => "NULL".into(),
        section_header::SHT_PROGBITS => "PROGBITS".into(),
        section_header::SHT_SYMTAB => "SYMTAB".into(),
        section_header::SHT_STRTAB => "STRTAB".into(),
        section_header::SHT_RELA => "RELA".into(),
        section_header::SHT_HASH => "HASH".into(),
        section_header::SHT_DYNAMIC => "DYNAMIC".into(),
        section_header::SHT_NOTE => "NOTE".into(),
        section_header::SHT_NOBITS => "NOBITS".into(),
        section_header::SHT_REL => "REL".into(),
        section_header::SHT_DYNSYM => "DYNSYM".into(),
        section_header::SHT_INIT_ARRAY => "INIT_ARRAY".into(),
        section_header::SHT_FINI_ARRAY => "FINI_ARRAY".into(),
        section_header::SHT_PREINIT_ARRAY => "PREINIT_ARRAY".into(),
        section_header::SHT_GROUP => "GROUP".into(),
        section_header::SHT_SYMTAB_SHNDX => "SYMTAB SECTION INDICES".into(),
        other => format!("{other:08x}"),
    }
}

/// `sh_flags` as the flag letters of `readelf -S` (see its "Key to Flags").
pub fn flags_string(flags: u64) -> String {
    const LETTERS: [(u64, char); 12] = [
        (0x1, 'W'),
        (0x2, 'A'),
        (0x4, 'X'),
        (0x10, 'M'),
        (0x20, 'S'),
        (0x40, 'I'),
        (0x80, 'L'),
        (0x100, 'O'),
        (0x200, 'G'),
        (0x400, 'T'),
        (0x800, 'C'),
        (0x8000_0000, 'E'),
    ];
    LETTERS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]
    use super::*;
    use crate::fixture::{Class, ElfBuilder};

    #[test]
    fn index_of_built_elf64_lists_sections_in_order() {
        let bytes = ElfBuilder::new(Class::Elf64, 243)
            .section(".fwimage", 1, 0x3, b"image")
            .section(".fwversion", 1, 0, b"1.2.3\0")
            .build();
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let names: Vec<_> = idx.sections.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["", ".fwimage", ".fwversion", ".shstrtab"]);
        let img = idx.section(".fwimage").unwrap();
        assert_eq!(
            &bytes[img.span.offset() as usize..img.span.end() as usize],
            b"image"
        );
        assert_eq!(img.flags_string(), "WA");
    }

    #[test]
    fn section_past_end_names_sh_offset_and_its_file_offset() {
        let mut bytes = ElfBuilder::new(Class::Elf64, 243)
            .section(".fwimage", 1, 0x2, b"image")
            .build();
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let shoff = idx.shoff as usize;
        // Section 1's sh_size field: entry 1, offset 32 within it.
        let at = shoff + 64 + 32;
        bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        match ElfIndex::parse(&bytes[..]) {
            Err(ElfError::OutOfBounds { field, at: got, .. }) => {
                assert_eq!(field, "sh_offset");
                assert_eq!(got, (shoff + 64 + 24) as u64);
            }
            other => panic!("expected OutOfBounds, got {other:?}"),
        }
    }

    #[test]
    fn truncated_header_is_an_error() {
        let bytes = ElfBuilder::new(Class::Elf32, 0).build();
        assert!(matches!(
            ElfIndex::parse(&bytes[..20]),
            Err(ElfError::Header { .. })
        ));
    }

    #[test]
    fn header_keeps_os_abi_abi_version_type_and_flags() {
        let bytes = ElfBuilder::new(Class::Elf64, 190)
            .header(2, 0x41, 8, 0x0600_5a04)
            .section(".text", 1, 0x6, b"code")
            .build();
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        assert_eq!((idx.os_abi, idx.abi_version), (0x41, 8));
        assert_eq!((idx.e_type, idx.machine, idx.flags), (2, 190, 0x0600_5a04));
    }

    #[test]
    fn flags_string_matches_readelf_letters() {
        assert_eq!(flags_string(0x6), "AX");
        assert_eq!(flags_string(0x32), "AMS");
        assert_eq!(flags_string(0), "");
    }
}
