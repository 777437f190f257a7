//! NVIDIA NVFW TLV containers (`nvidia/<chip>/gsp/<name>.tlv`), the format meant to replace
//! the ELF packaging of GSP firmware.
//!
//! Layout: magic `NVFW`, then blocks of a 4-byte ASCII tag, a little-endian `u32` value
//! length, and the value padded with zeros to a multiple of 4 bytes. The blocks must cover the
//! rest of the file exactly (no trailing bytes). `VERS` (printable ASCII) is mandatory;
//! `NSIG` (a `u32`, non-zero) and `SIGN` (`NSIG` equal-size signatures) come together or not
//! at all. Duplicate tags are refused.
//!
//! Reference: nova-core `firmware/tlv.rs` (layout and rules; it ignores duplicates, this
//! reader refuses them).

use crate::source::{ReadAt, SourceError, Span};

/// File magic.
pub const MAGIC: &[u8; 4] = b"NVFW";
const BLOCK_HEADER: u64 = 8;

/// One block.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TlvBlock {
    /// The tag, four ASCII characters.
    pub tag: String,
    /// File offset of the block's header.
    pub header_offset: u64,
    /// The value, without padding.
    pub value: Span,
}

/// The signatures of a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TlvSignatures {
    /// `NSIG`.
    pub count: u32,
    /// Size of each signature.
    pub size: u64,
    /// The `SIGN` value.
    pub span: Span,
}

/// A checked TLV container.
#[derive(Clone, Debug)]
pub struct TlvImage {
    /// Blocks in file order.
    pub blocks: Vec<TlvBlock>,
    /// `VERS`.
    pub version: String,
    /// `NSIG`/`SIGN`, if signed.
    pub signatures: Option<TlvSignatures>,
}

/// Errors of the TLV reader.
#[derive(Debug, thiserror::Error)]
pub enum TlvError {
    /// The file does not start with `NVFW`.
    #[error("magic at offset 0x0 is {found:02x?}, expected \"NVFW\"")]
    Magic {
        /// The first bytes.
        found: Vec<u8>,
    },
    /// A block header is cut short by the end of the file.
    #[error(
        "block header at offset {at:#x} is cut short: {left} bytes left, 8 needed (trailing bytes)"
    )]
    Trailing {
        /// File offset of the partial header.
        at: u64,
        /// Bytes left.
        left: u64,
    },
    /// A tag is not ASCII.
    #[error("tag at offset {at:#x} is {found:02x?}, not ASCII")]
    Tag {
        /// File offset of the tag.
        at: u64,
        /// Its bytes.
        found: [u8; 4],
    },
    /// A length runs past the end of the file.
    #[error(
        "length of {tag} at offset {at:#x} is {length:#x}: value and padding run past the end of the file ({len:#x})"
    )]
    Length {
        /// The block's tag.
        tag: String,
        /// File offset of the length field.
        at: u64,
        /// Its value.
        length: u64,
        /// The file's length.
        len: u64,
    },
    /// A tag appears twice.
    #[error("tag {tag} at offset {at:#x} appears a second time")]
    Duplicate {
        /// The tag.
        tag: String,
        /// File offset of the second one.
        at: u64,
    },
    /// A mandatory block is missing.
    #[error("no {tag} block")]
    Missing {
        /// The tag.
        tag: &'static str,
    },
    /// A block's value is malformed.
    #[error("{tag} value at offset {at:#x}: {reason}")]
    Value {
        /// The tag.
        tag: &'static str,
        /// File offset of the value.
        at: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Reading failed.
    #[error("cannot read the container")]
    Read(#[from] SourceError),
}

impl TlvImage {
    /// Walks and checks every block.
    ///
    /// # Errors
    /// [`TlvError`] naming the tag, field and file offset of the first violation.
    pub fn parse<S: ReadAt + ?Sized>(src: &S) -> Result<TlvImage, TlvError> {
        let len = src.len();
        let magic = src.read_span(Span::checked(0, len.min(4), len).unwrap_or_default())?;
        if magic.as_ref() != MAGIC {
            return Err(TlvError::Magic {
                found: magic.to_vec(),
            });
        }
        let mut blocks: Vec<TlvBlock> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut at = 4u64;
        while at < len {
            let left = len.saturating_sub(at);
            let hdr_span =
                Span::checked(at, BLOCK_HEADER, len).ok_or(TlvError::Trailing { at, left })?;
            let hdr = src.read_span(hdr_span)?;
            let short = || TlvError::Trailing { at, left };
            let tag_bytes: [u8; 4] = hdr
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(short)?;
            if !tag_bytes.is_ascii() {
                return Err(TlvError::Tag {
                    at,
                    found: tag_bytes,
                });
            }
            let tag = String::from_utf8_lossy(&tag_bytes).into_owned();
            let length_bytes: [u8; 4] = hdr
                .get(4..8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(short)?;
            let length = u64::from(u32::from_le_bytes(length_bytes));
            let stored = length.next_multiple_of(4);
            let value_at = at.saturating_add(BLOCK_HEADER);
            let length_err = || TlvError::Length {
                tag: tag.clone(),
                at: at.saturating_add(4),
                length,
                len,
            };
            Span::checked(value_at, stored, len).ok_or_else(length_err)?;
            let value = Span::checked(value_at, length, len).ok_or_else(length_err)?;
            if !seen.insert(tag_bytes) {
                return Err(TlvError::Duplicate { tag, at });
            }
            blocks.push(TlvBlock {
                tag,
                header_offset: at,
                value,
            });
            at = value_at.saturating_add(stored);
        }
        let version = read_version(src, &blocks)?;
        let signatures = read_signatures(src, &blocks)?;
        Ok(TlvImage {
            blocks,
            version,
            signatures,
        })
    }

    /// The value of block `tag`.
    pub fn block(&self, tag: &str) -> Option<Span> {
        self.blocks.iter().find(|b| b.tag == tag).map(|b| b.value)
    }

    /// Signature `index` of `SIGN`, or the last one when `index` is `None` (nova-core's rule
    /// for a fuse version of 0).
    pub fn signature(&self, index: Option<u32>) -> Option<Span> {
        let sigs = self.signatures?;
        let i = index.unwrap_or(sigs.count.checked_sub(1)?);
        if i >= sigs.count {
            return None;
        }
        sigs.span
            .sub(u64::from(i).checked_mul(sigs.size)?, sigs.size)
    }
}

fn read_version<S: ReadAt + ?Sized>(src: &S, blocks: &[TlvBlock]) -> Result<String, TlvError> {
    let vers = blocks
        .iter()
        .find(|b| b.tag == "VERS")
        .ok_or(TlvError::Missing { tag: "VERS" })?;
    let bad = |reason| TlvError::Value {
        tag: "VERS",
        at: vers.value.offset(),
        reason,
    };
    if vers.value.size() > 256 {
        return Err(bad("longer than 256 bytes"));
    }
    let bytes = src.read_span(vers.value)?;
    if bytes.is_empty() || !bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Err(bad("not printable ASCII"));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn read_signatures<S: ReadAt + ?Sized>(
    src: &S,
    blocks: &[TlvBlock],
) -> Result<Option<TlvSignatures>, TlvError> {
    let nsig = blocks.iter().find(|b| b.tag == "NSIG");
    let sign = blocks.iter().find(|b| b.tag == "SIGN");
    let (nsig, sign) = match (nsig, sign) {
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(TlvError::Missing { tag: "SIGN" }),
        (None, Some(_)) => return Err(TlvError::Missing { tag: "NSIG" }),
        (Some(n), Some(s)) => (n, s),
    };
    let bad = |tag, at, reason| TlvError::Value { tag, at, reason };
    if nsig.value.size() != 4 {
        return Err(bad("NSIG", nsig.value.offset(), "not a 4-byte u32"));
    }
    let raw = src.read_span(nsig.value)?;
    let word: [u8; 4] = raw
        .as_ref()
        .try_into()
        .map_err(|_| bad("NSIG", nsig.value.offset(), "not a 4-byte u32"))?;
    let count = u32::from_le_bytes(word);
    if count == 0 {
        return Err(bad("NSIG", nsig.value.offset(), "zero signatures"));
    }
    let total = sign.value.size();
    if total == 0 || total % u64::from(count) != 0 {
        return Err(bad(
            "SIGN",
            sign.value.offset(),
            "length is not NSIG equal-size signatures",
        ));
    }
    Ok(Some(TlvSignatures {
        count,
        size: total / u64::from(count),
        span: sign.value,
    }))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture;

    #[test]
    fn signed_container_gives_version_and_signatures() {
        let bytes = fixture::tlv_signed();
        let tlv = TlvImage::parse(&bytes[..]).unwrap();
        assert_eq!(tlv.version, "570.144");
        let sigs = tlv.signatures.unwrap();
        assert_eq!((sigs.count, sigs.size), (2, 32));
        assert_eq!(tlv.signature(None), tlv.signature(Some(1)));
        assert_eq!(tlv.signature(Some(2)), None);
        assert_eq!(tlv.block("IMAG").map(Span::size), Some(5));
    }

    #[test]
    fn trailing_bytes_are_refused_with_their_offset() {
        let mut bytes = fixture::tlv(&[(b"VERS", b"1.0\0")]);
        bytes.extend_from_slice(&[0, 0, 0]);
        assert!(matches!(
            TlvImage::parse(&bytes[..]),
            Err(TlvError::Trailing { at: 16, left: 3 })
        ));
    }

    #[test]
    fn missing_vers_is_refused() {
        let bytes = fixture::tlv(&[(b"IMAG", b"x")]);
        assert!(matches!(
            TlvImage::parse(&bytes[..]),
            Err(TlvError::Missing { tag: "VERS" })
        ));
    }

    #[test]
    fn length_past_end_names_the_length_field() {
        let mut bytes = fixture::tlv(&[(b"VERS", b"1.0")]);
        bytes[8..12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert!(matches!(
            TlvImage::parse(&bytes[..]),
            Err(TlvError::Length { at: 8, .. })
        ));
    }

    #[test]
    fn uneven_signatures_are_refused() {
        let bytes = fixture::tlv(&[
            (b"VERS", b"1"),
            (b"NSIG", &3u32.to_le_bytes()),
            (b"SIGN", &[0; 64]),
        ]);
        assert!(matches!(
            TlvImage::parse(&bytes[..]),
            Err(TlvError::Value { tag: "SIGN", .. })
        ));
    }

    #[test]
    fn duplicate_tag_is_refused() {
        let bytes = fixture::tlv(&[(b"VERS", b"1"), (b"VERS", b"2")]);
        assert!(matches!(
            TlvImage::parse(&bytes[..]),
            Err(TlvError::Duplicate { at: 16, .. })
        ));
    }
}
