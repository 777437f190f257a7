//! The ELF section index of GSP-RM and FMC images: rig-elf's, read through this crate's
//! [`ReadAt`] sources.
//!
//! Flow: [`ReadAt`] → [`parse`] → `gsp` (GSP-RM and FMC semantics). The index itself
//! (header, section table, names, every bound checked) lives in rig-elf, which rig-cubin
//! shares without this crate's decompressors; this module only lets a [`ReadAt`] source
//! (a mapped, positional or decompressed file) be read by it.

use std::borrow::Cow;

pub use rig_elf::{ElfClass, ElfError, ElfIndex, Section, flags_string, type_name};

use crate::source::{ReadAt, SourceError, Span};

/// A [`ReadAt`] source seen as rig-elf's [`rig_elf::ReadSpan`].
struct Source<'a, S: ?Sized>(&'a S);

impl<S: ReadAt + ?Sized> rig_elf::ReadSpan for Source<'_, S> {
    type Error = SourceError;

    fn len(&self) -> u64 {
        self.0.len()
    }

    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, SourceError> {
        self.0.read_span(span)
    }
}

/// Reads the header, the section header table and the section names of `src`.
///
/// # Errors
/// [`ElfError`] naming the field and file offset of the first thing out of bounds or
/// unsupported (big-endian files, extended section numbering); [`ElfError::Read`] (with
/// the [`SourceError`] as its source) when reading the file fails.
pub fn parse<S: ReadAt + ?Sized>(src: &S) -> Result<ElfIndex, ElfError> {
    ElfIndex::parse(&Source(src))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture;
    use crate::source::Source as FileSource;

    #[test]
    fn a_file_source_indexes_like_its_bytes() {
        let bytes = fixture::gsp_elf(64, "1.2.3", &["gh100"]);
        let from_bytes = parse(&bytes[..]).unwrap();
        let from_source = parse(&FileSource::from_bytes(bytes.clone())).unwrap();
        assert_eq!(from_bytes.sections, from_source.sections);
        assert_eq!(from_bytes.section(".fwimage").map(|s| s.size), Some(64));
    }

    /// Serves the ELF header and fails every read past it.
    struct FailsPastHeader(Vec<u8>);

    impl ReadAt for FailsPastHeader {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }

        fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, SourceError> {
            if span.end() > 64 {
                return Err(SourceError::Read {
                    offset: span.offset(),
                    len: span.size(),
                    source: std::io::Error::other("injected"),
                });
            }
            self.0[..].read_span(span)
        }
    }

    #[test]
    fn a_read_failure_keeps_the_source_error_as_its_cause() {
        let bytes = fixture::gsp_elf(64, "1.2.3", &["gh100"]);
        let err = parse(&FailsPastHeader(bytes)).unwrap_err();
        let ElfError::Read(cause) = &err else {
            panic!("expected a read error, got {err}");
        };
        assert!(
            matches!(
                cause.downcast_ref::<SourceError>(),
                Some(SourceError::Read { .. })
            ),
            "{cause}"
        );
    }
}
