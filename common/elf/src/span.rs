//! Checked byte ranges, and the one trait an index is read through.

use std::borrow::Cow;

/// A range of bytes inside a file: `offset..offset + size`.
///
/// # Invariants
/// A `Span` made by [`Span::checked`] or [`Span::sub`] lies inside the data it was checked
/// against (`offset + size <= len`, without overflow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Span {
    offset: u64,
    size: u64,
}

impl Span {
    /// Returns the span `offset..offset + size` if it lies inside `0..len`.
    pub fn checked(offset: u64, size: u64, len: u64) -> Option<Span> {
        let end = offset.checked_add(size)?;
        (end <= len).then_some(Span { offset, size })
    }

    /// Returns the sub-span `offset..offset + size` relative to the start of `self`, if it fits.
    pub fn sub(self, offset: u64, size: u64) -> Option<Span> {
        let inner = Span::checked(offset, size, self.size)?;
        Some(Span {
            offset: self.offset.checked_add(inner.offset)?,
            size,
        })
    }

    /// First byte.
    pub fn offset(self) -> u64 {
        self.offset
    }

    /// Length in bytes.
    pub fn size(self) -> u64 {
        self.size
    }

    /// One past the last byte. Cannot overflow (see the type's invariant).
    pub fn end(self) -> u64 {
        self.offset.saturating_add(self.size)
    }

    /// Whether the span holds no bytes.
    pub fn is_empty(self) -> bool {
        self.size == 0
    }
}

/// Random access to the bytes an index is read from: a slice, or a file read by position.
pub trait ReadSpan {
    /// What a failed read returns.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Total length of the data in bytes.
    fn len(&self) -> u64;

    /// Whether the data is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the bytes of `span`, borrowed when the data is in memory.
    ///
    /// # Errors
    /// `Self::Error` when the span is not inside the data or the read fails.
    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, Self::Error>;
}

/// A read outside the data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("range {offset:#x}+{len:#x} is outside the data ({data_len:#x} bytes)")]
pub struct OutOfRange {
    /// First byte asked for.
    pub offset: u64,
    /// Bytes asked for.
    pub len: u64,
    /// Length of the data.
    pub data_len: u64,
}

impl ReadSpan for [u8] {
    type Error = OutOfRange;

    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, OutOfRange> {
        let err = || OutOfRange {
            offset: span.offset(),
            len: span.size(),
            data_len: <[u8]>::len(self) as u64,
        };
        let start = usize::try_from(span.offset()).map_err(|_| err())?;
        let end = usize::try_from(span.end()).map_err(|_| err())?;
        self.get(start..end).map(Cow::Borrowed).ok_or_else(err)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn span_checked_rejects_overflow_and_past_end() {
        assert_eq!(Span::checked(u64::MAX, 1, u64::MAX), None);
        assert_eq!(Span::checked(4, 5, 8), None);
        assert_eq!(Span::checked(4, 4, 8).map(Span::end), Some(8));
        assert_eq!(Span::checked(8, 0, 8).map(Span::size), Some(0));
    }

    #[test]
    fn span_sub_is_relative_and_bounded() {
        let outer = Span::checked(0x100, 0x20, 0x1000).unwrap();
        assert_eq!(outer.sub(0x10, 0x10).map(Span::offset), Some(0x110));
        assert_eq!(outer.sub(0x10, 0x11), None);
    }

    #[test]
    fn slice_read_outside_is_an_error_not_a_panic() {
        let data = [1u8, 2, 3];
        let span = Span::checked(2, 5, u64::MAX).unwrap();
        assert_eq!(
            data[..].read_span(span),
            Err(OutOfRange {
                offset: 2,
                len: 5,
                data_len: 3
            })
        );
        let inside = Span::checked(1, 2, 3).unwrap();
        assert_eq!(data[..].read_span(inside).unwrap().as_ref(), &[2, 3]);
    }
}
