//! rig-elf: the section index of an ELF file, its symbol table and its relocations, read
//! lazily and checked.
//!
//! Flow: bytes behind a [`ReadSpan`] (a slice, or rig-firmware's file source) →
//! [`ElfIndex::parse`] (header, section header table, section names) → callers ask for one
//! section's [`Span`], or for a symbol table ([`ElfIndex::symbols`]) or a relocation
//! section ([`ElfIndex::relocations`]). rig-firmware reads GSP-RM and FMC images through
//! it, rig-cubin reads CUDA cubins.
//!
//! Invariants: no I/O, no `unsafe`, no allocation sized by a field before the field is
//! checked against the data's length. Every offset is checked before it is read; a
//! malformed file gives an [`ElfError`] naming the field and the file offset where it is
//! stored, never a panic.
//!
//! Reference: System V ABI, "Object Files" (ELF header, section header, symbol table,
//! relocation entries); goblin parses the structures. Not here: what a format makes of the
//! sections (rig-firmware's `gsp`, rig-cubin).
#![forbid(unsafe_code)]

pub mod fixture;
mod index;
mod span;
mod table;

pub use index::{ElfClass, ElfError, ElfIndex, Section, flags_string, type_name};
pub use span::{OutOfRange, ReadSpan, Span};
pub use table::{Rela, Symbol};
