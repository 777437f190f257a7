//! Symbol tables and relocation sections: fixed-size records, decoded by hand with checked
//! reads (goblin's table readers unwrap internally on some malformed inputs, and these
//! tables are read from untrusted files).
//!
//! Reference: System V ABI, "Object Files": "Symbol Table" (`Elf32_Sym`, `Elf64_Sym`) and
//! "Relocation" (`Elf32_Rela`, `Elf64_Rela`, `ELF64_R_SYM`/`ELF64_R_TYPE`).

use goblin::elf::section_header::{SHT_DYNSYM, SHT_RELA, SHT_STRTAB, SHT_SYMTAB};
use goblin::strtab::Strtab;

use crate::index::{ElfClass, ElfError, ElfIndex, Section, read};
use crate::span::ReadSpan;

/// One symbol-table entry, its name resolved from the table's string table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Index in the symbol table (0 is the null symbol).
    pub index: usize,
    /// Name; empty for unnamed symbols.
    pub name: String,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `st_info`: binding in bits 7:4, type in bits 3:0.
    pub info: u8,
    /// `st_other`: visibility in bits 1:0; the rest is machine-specific.
    pub other: u8,
    /// `st_shndx`: the section the symbol is defined in (0 = undefined).
    pub shndx: u16,
}

impl Symbol {
    /// `ELF_ST_BIND(st_info)`: `STB_LOCAL` 0, `STB_GLOBAL` 1, `STB_WEAK` 2.
    pub fn binding(&self) -> u8 {
        self.info >> 4
    }

    /// `ELF_ST_TYPE(st_info)`: `STT_OBJECT` 1, `STT_FUNC` 2, `STT_SECTION` 3, ….
    pub fn kind(&self) -> u8 {
        self.info & 0xf
    }
}

/// One entry of a `SHT_RELA` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rela {
    /// `r_offset`: where in the target section (`sh_info`) the value goes.
    pub offset: u64,
    /// The symbol index from `r_info`.
    pub sym: u32,
    /// The relocation type from `r_info` (machine-specific).
    pub kind: u32,
    /// `r_addend`.
    pub addend: i64,
}

fn entry_size(class: ElfClass, sym: bool) -> u64 {
    match (class, sym) {
        (ElfClass::Elf64, _) => 24,
        (ElfClass::Elf32, true) => 16,
        (ElfClass::Elf32, false) => 12,
    }
}

fn le<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    le(b, at).map(u16::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    le(b, at).map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    le(b, at).map(u64::from_le_bytes)
}

impl ElfIndex {
    /// Checks that `section` holds whole entries of this class's `sym`bol or relocation
    /// size, and returns the entry size.
    fn entries(&self, section: &Section, sym: bool) -> Result<u64, ElfError> {
        let size = entry_size(self.class, sym);
        if section.entsize != size || !section.size.is_multiple_of(size) {
            return Err(ElfError::Table {
                index: section.index,
                name: section.name.clone(),
                reason: "sh_entsize is not the class's entry size, or sh_size not a multiple of it",
            });
        }
        Ok(size)
    }

    /// The entries of symbol table `symtab` (a `SHT_SYMTAB` or `SHT_DYNSYM` section of this
    /// index), null symbol included, names read from the string table its `sh_link` names.
    ///
    /// # Errors
    /// [`ElfError::Table`] for a section that is not a symbol table, a wrong entry size, or
    /// an `sh_link` that is not a string table; [`ElfError::SymbolName`] for a name outside
    /// the string table; [`ElfError::Read`] when the reader fails.
    pub fn symbols<S: ReadSpan + ?Sized>(
        &self,
        src: &S,
        symtab: &Section,
    ) -> Result<Vec<Symbol>, ElfError> {
        let table_err = |reason| ElfError::Table {
            index: symtab.index,
            name: symtab.name.clone(),
            reason,
        };
        if symtab.sh_type != SHT_SYMTAB && symtab.sh_type != SHT_DYNSYM {
            return Err(table_err("is not a symbol table"));
        }
        let entsize = self.entries(symtab, true)?;
        let strtab = usize::try_from(symtab.link)
            .ok()
            .and_then(|i| self.sections.get(i))
            .filter(|s| s.sh_type == SHT_STRTAB)
            .ok_or_else(|| table_err("sh_link does not name a string table"))?;
        let str_bytes = read(src, strtab.span)?;
        let names =
            Strtab::parse(&str_bytes, 0, str_bytes.len(), 0).map_err(|e| ElfError::Strtab {
                at: strtab.span.offset(),
                reason: e.to_string(),
            })?;
        let bytes = read(src, symtab.span)?;
        let step = usize::try_from(entsize).unwrap_or(usize::MAX);
        bytes
            .chunks_exact(step)
            .enumerate()
            .map(|(index, e)| {
                let short = || table_err("an entry is cut short");
                let (name, value, size, info, other, shndx) = match self.class {
                    ElfClass::Elf64 => (
                        u32_at(e, 0).ok_or_else(short)?,
                        u64_at(e, 8).ok_or_else(short)?,
                        u64_at(e, 16).ok_or_else(short)?,
                        *e.get(4).ok_or_else(short)?,
                        *e.get(5).ok_or_else(short)?,
                        u16_at(e, 6).ok_or_else(short)?,
                    ),
                    ElfClass::Elf32 => (
                        u32_at(e, 0).ok_or_else(short)?,
                        u64::from(u32_at(e, 4).ok_or_else(short)?),
                        u64::from(u32_at(e, 8).ok_or_else(short)?),
                        *e.get(12).ok_or_else(short)?,
                        *e.get(13).ok_or_else(short)?,
                        u16_at(e, 14).ok_or_else(short)?,
                    ),
                };
                let name = if name == 0 {
                    String::new()
                } else {
                    usize::try_from(name)
                        .ok()
                        .and_then(|n| names.get_at(n))
                        .ok_or(ElfError::SymbolName {
                            table: symtab.index,
                            index,
                            value: name,
                        })?
                        .to_owned()
                };
                Ok(Symbol {
                    index,
                    name,
                    value,
                    size,
                    info,
                    other,
                    shndx,
                })
            })
            .collect()
    }

    /// The entries of relocation section `rela` (a `SHT_RELA` section of this index).
    ///
    /// # Errors
    /// [`ElfError::Table`] for a section that is not `SHT_RELA` or has the wrong entry
    /// size; [`ElfError::Read`] when the reader fails.
    pub fn relocations<S: ReadSpan + ?Sized>(
        &self,
        src: &S,
        rela: &Section,
    ) -> Result<Vec<Rela>, ElfError> {
        let table_err = |reason| ElfError::Table {
            index: rela.index,
            name: rela.name.clone(),
            reason,
        };
        if rela.sh_type != SHT_RELA {
            return Err(table_err("is not a SHT_RELA section"));
        }
        let entsize = self.entries(rela, false)?;
        let bytes = read(src, rela.span)?;
        let step = usize::try_from(entsize).unwrap_or(usize::MAX);
        bytes
            .chunks_exact(step)
            .map(|e| {
                let short = || table_err("an entry is cut short");
                Ok(match self.class {
                    ElfClass::Elf64 => {
                        let info = u64_at(e, 8).ok_or_else(short)?;
                        Rela {
                            offset: u64_at(e, 0).ok_or_else(short)?,
                            sym: u32::try_from(info >> 32).map_err(|_| short())?,
                            kind: u32::try_from(info & 0xffff_ffff).map_err(|_| short())?,
                            addend: i64::from_le_bytes(le(e, 16).ok_or_else(short)?),
                        }
                    }
                    ElfClass::Elf32 => {
                        let info = u32_at(e, 4).ok_or_else(short)?;
                        Rela {
                            offset: u64::from(u32_at(e, 0).ok_or_else(short)?),
                            sym: info >> 8,
                            kind: info & 0xff,
                            addend: i64::from(i32::from_le_bytes(le(e, 8).ok_or_else(short)?)),
                        }
                    }
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture::{Class, ElfBuilder};

    fn sym64(name: u32, info: u8, other: u8, shndx: u16, value: u64, size: u64) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend_from_slice(&name.to_le_bytes());
        e.push(info);
        e.push(other);
        e.extend_from_slice(&shndx.to_le_bytes());
        e.extend_from_slice(&value.to_le_bytes());
        e.extend_from_slice(&size.to_le_bytes());
        e
    }

    fn rela64(offset: u64, sym: u32, kind: u32, addend: i64) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend_from_slice(&offset.to_le_bytes());
        e.extend_from_slice(&((u64::from(sym) << 32) | u64::from(kind)).to_le_bytes());
        e.extend_from_slice(&addend.to_le_bytes());
        e
    }

    /// Sections: 1 `.strtab`, 2 `.symtab` (null, `f`), 3 `.rela.text` (one entry).
    fn built(symtab_link: u32, symtab_entsize: u64) -> Vec<u8> {
        let mut symtab = sym64(0, 0, 0, 0, 0, 0);
        symtab.extend(sym64(1, 0x12, 0x10, 4, 0x40, 0x80));
        ElfBuilder::new(Class::Elf64, 190)
            .section(".strtab", SHT_STRTAB, 0, b"\0f\0")
            .section(".symtab", SHT_SYMTAB, 0, &symtab)
            .link(symtab_link, 1, symtab_entsize)
            .section(".rela.text", SHT_RELA, 0, &rela64(0x10, 1, 0x38, -4))
            .link(2, 4, 24)
            .build()
    }

    #[test]
    fn symbols_resolve_names_and_fields() {
        let bytes = built(1, 24);
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let syms = idx
            .symbols(&bytes[..], idx.section(".symtab").unwrap())
            .unwrap();
        assert_eq!(syms.len(), 2);
        let f = &syms[1];
        assert_eq!((f.index, f.name.as_str()), (1, "f"));
        assert_eq!((f.binding(), f.kind(), f.other), (1, 2, 0x10));
        assert_eq!((f.shndx, f.value, f.size), (4, 0x40, 0x80));
    }

    #[test]
    fn relocations_split_r_info_into_symbol_and_type() {
        let bytes = built(1, 24);
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let relas = idx
            .relocations(&bytes[..], idx.section(".rela.text").unwrap())
            .unwrap();
        assert_eq!(
            relas,
            [Rela {
                offset: 0x10,
                sym: 1,
                kind: 0x38,
                addend: -4
            }]
        );
    }

    #[test]
    fn a_symtab_linked_to_a_non_string_table_is_refused() {
        let bytes = built(3, 24);
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let err = idx
            .symbols(&bytes[..], idx.section(".symtab").unwrap())
            .unwrap_err();
        assert!(matches!(err, ElfError::Table { index: 2, .. }), "{err}");
    }

    #[test]
    fn a_wrong_entry_size_is_refused() {
        let bytes = built(1, 16);
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let err = idx
            .symbols(&bytes[..], idx.section(".symtab").unwrap())
            .unwrap_err();
        assert!(matches!(err, ElfError::Table { .. }), "{err}");
        let err = idx
            .relocations(&bytes[..], idx.section(".symtab").unwrap())
            .unwrap_err();
        assert!(matches!(err, ElfError::Table { .. }), "{err}");
    }

    #[test]
    fn a_name_past_the_string_table_is_refused() {
        let mut bytes = built(1, 24);
        let idx = ElfIndex::parse(&bytes[..]).unwrap();
        let at = usize::try_from(idx.section(".symtab").unwrap().offset).unwrap() + 24;
        bytes[at..at + 4].copy_from_slice(&100u32.to_le_bytes());
        let err = idx
            .symbols(&bytes[..], idx.section(".symtab").unwrap())
            .unwrap_err();
        assert!(
            matches!(
                err,
                ElfError::SymbolName {
                    table: 2,
                    index: 1,
                    value: 100
                }
            ),
            "{err}"
        );
    }
}
