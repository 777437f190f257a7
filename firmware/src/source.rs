//! Where a firmware file's bytes come from, and the one place in the crate that does I/O.
//!
//! Flow: `Firmware::open` → [`Source::open`] → parsers, which only ever see the [`ReadAt`]
//! trait. A parser asks for a [`Span`] it has already checked against [`ReadAt::len`]; it never
//! asks for more than it needs, so indexing a 38 MB GSP-RM image reads a few hundred bytes.
//!
//! Backings, chosen by [`Source::open`]:
//! - **mapped**: a `memmap2::Mmap`, zero-copy. The crate is `#![forbid(unsafe_code)]`, so it maps
//!   only what memmap2 can prove immutable (`Mmap::map_if_safe`: a sealed memfd or an fs-verity
//!   file), or a map its caller made and vouched for ([`Source::from_mmap`]; the daemon's `sys/`
//!   layer owns that `unsafe`).
//! - **file**: positional reads (`pread`) of exactly the ranges asked for. This is what an
//!   ordinary file under /lib/firmware gets: still no copy of data nobody reads, and no SIGBUS
//!   or undefined behaviour if a package upgrade rewrites the file while it is open.
//! - **owned**: bytes in memory. Compressed files (`.zst`, `.xz`, recognised by their magic)
//!   cannot be read in place, so they are decompressed once into an owned buffer, capped at
//!   [`MAX_DECOMPRESSED`].
//!
//! Not here: what the bytes mean (the format modules).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::Serialize;

/// Largest output a compressed file may decompress to (firmware files are at most tens of MB).
pub const MAX_DECOMPRESSED: u64 = 1 << 30;

/// Chunk size for streaming over a span (hashing, CRC, copies from a file).
const CHUNK: usize = 1 << 20;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const XZ_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0x00];

/// A range of bytes inside a firmware file (rig-elf's, shared with the ELF index).
pub use rig_elf::Span;

/// How a file was stored on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Read as is.
    None,
    /// Zstandard (`.zst`), decompressed into memory.
    Zstd,
    /// XZ (`.xz`), decompressed into memory.
    Xz,
}

/// Random access to firmware bytes. Implemented by `[u8]` (zero-copy) and by [`Source`].
pub trait ReadAt {
    /// Total length of the data in bytes.
    fn len(&self) -> u64;

    /// Whether the data is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the bytes of `span`, borrowed when the data is in memory.
    ///
    /// # Errors
    /// [`SourceError::OutOfRange`] when the span is not inside the data; [`SourceError::Read`]
    /// when a positional read fails.
    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, SourceError>;

    /// Copies the bytes starting at `offset` into all of `dst`.
    ///
    /// # Errors
    /// As [`ReadAt::read_span`].
    fn copy_to(&self, offset: u64, dst: &mut [u8]) -> Result<(), SourceError> {
        let span = span_of(offset, dst.len(), self.len())?;
        let bytes = self.read_span(span)?;
        if bytes.len() != dst.len() {
            return Err(SourceError::OutOfRange {
                offset,
                len: span.size(),
                data_len: self.len(),
            });
        }
        dst.copy_from_slice(&bytes);
        Ok(())
    }

    /// Calls `f` on consecutive chunks covering `span`, in order.
    ///
    /// # Errors
    /// As [`ReadAt::read_span`].
    fn for_each_chunk(&self, span: Span, f: &mut dyn FnMut(&[u8])) -> Result<(), SourceError> {
        let mut at = span.offset();
        while at < span.end() {
            let left = span.end().saturating_sub(at);
            let n = left.min(CHUNK as u64);
            let part = self.read_span(Span::checked(at, n, self.len()).ok_or(
                SourceError::OutOfRange {
                    offset: at,
                    len: n,
                    data_len: self.len(),
                },
            )?)?;
            f(&part);
            at = at.saturating_add(n);
        }
        Ok(())
    }
}

fn span_of(offset: u64, len: usize, data_len: u64) -> Result<Span, SourceError> {
    let len = u64::try_from(len).map_err(|_| SourceError::OutOfRange {
        offset,
        len: u64::MAX,
        data_len,
    })?;
    Span::checked(offset, len, data_len).ok_or(SourceError::OutOfRange {
        offset,
        len,
        data_len,
    })
}

/// Converts an in-range span of an in-memory slice to a `Range<usize>`.
fn slice_range(span: Span, data_len: usize) -> Result<std::ops::Range<usize>, SourceError> {
    let err = || SourceError::OutOfRange {
        offset: span.offset(),
        len: span.size(),
        data_len: data_len as u64,
    };
    let start = usize::try_from(span.offset()).map_err(|_| err())?;
    let end = usize::try_from(span.end()).map_err(|_| err())?;
    if end > data_len || span.end() < span.offset() {
        return Err(err());
    }
    Ok(start..end)
}

impl ReadAt for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, SourceError> {
        let range = slice_range(span, <[u8]>::len(self))?;
        self.get(range)
            .map(Cow::Borrowed)
            .ok_or(SourceError::OutOfRange {
                offset: span.offset(),
                len: span.size(),
                data_len: <[u8]>::len(self) as u64,
            })
    }

    fn for_each_chunk(&self, span: Span, f: &mut dyn FnMut(&[u8])) -> Result<(), SourceError> {
        let bytes = self.read_span(span)?;
        f(&bytes);
        Ok(())
    }
}

/// Errors of the byte source: opening, reading, decompressing.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be opened or its metadata read.
    #[error("cannot open {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The path is not a regular file.
    #[error("{path} is not a regular file")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A positional read failed.
    #[error("cannot read {len} bytes at offset {offset:#x}")]
    Read {
        /// First byte asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A read outside the data was asked for (a parser bug: spans are checked first).
    #[error("range {offset:#x}+{len:#x} is outside the data ({data_len:#x} bytes)")]
    OutOfRange {
        /// First byte asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// Length of the data.
        data_len: u64,
    },
    /// A compressed file is corrupt.
    #[error("{path}: {format} stream is corrupt: {reason}")]
    Decompress {
        /// The file.
        path: PathBuf,
        /// `zstd` or `xz`.
        format: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// A compressed file decompresses to more than [`MAX_DECOMPRESSED`] bytes.
    #[error("{path} decompresses to more than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
}

#[derive(Debug)]
enum Backing {
    Mapped(Mmap),
    Owned(Vec<u8>),
    File { file: File, len: u64 },
}

/// The bytes of one firmware file, wherever they live. See the module docs.
#[derive(Debug)]
pub struct Source {
    backing: Backing,
}

/// What [`Source::open`] found on disk.
#[derive(Debug)]
pub struct Opened {
    /// The bytes (decompressed if needed).
    pub source: Source,
    /// How the file was stored.
    pub compression: Compression,
    /// The file's size on disk.
    pub file_size: u64,
}

impl Source {
    /// Opens `path`, decompressing `.zst`/`.xz` content (recognised by magic) into memory.
    ///
    /// # Errors
    /// [`SourceError::Open`], [`SourceError::NotAFile`], [`SourceError::Read`], and for
    /// compressed files [`SourceError::Decompress`] or [`SourceError::TooLarge`].
    pub fn open(path: &Path) -> Result<Opened, SourceError> {
        let open_err = |source| SourceError::Open {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        if !meta.is_file() {
            return Err(SourceError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        let file_size = meta.len();
        let mut magic = [0u8; 6];
        let got = read_prefix(&file, &mut magic)?;
        let compression = if got >= 4 && magic[..4] == ZSTD_MAGIC {
            Compression::Zstd
        } else if got >= 6 && magic == XZ_MAGIC {
            Compression::Xz
        } else {
            Compression::None
        };
        let source = match compression {
            Compression::None => match Mmap::map_if_safe(&file) {
                Ok(map) => Source {
                    backing: Backing::Mapped(map),
                },
                Err(_) => Source {
                    backing: Backing::File {
                        file,
                        len: file_size,
                    },
                },
            },
            Compression::Zstd | Compression::Xz => {
                Source::from_bytes(decompress(path, file, compression)?)
            }
        };
        Ok(Opened {
            source,
            compression,
            file_size,
        })
    }

    /// Wraps bytes already in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Source {
        Source {
            backing: Backing::Owned(bytes),
        }
    }

    /// Wraps a map made by the caller, who vouches that the file will not change while the
    /// map lives (the reason `memmap2::Mmap::map` is `unsafe`).
    pub fn from_mmap(map: Mmap) -> Source {
        Source {
            backing: Backing::Mapped(map),
        }
    }

    /// The bytes as one slice, when they are in memory (mapped or owned).
    pub fn as_slice(&self) -> Option<&[u8]> {
        match &self.backing {
            Backing::Mapped(map) => Some(map),
            Backing::Owned(bytes) => Some(bytes),
            Backing::File { .. } => None,
        }
    }

    /// A short word for the backing: `mapped`, `owned` or `file`.
    pub fn kind(&self) -> &'static str {
        match self.backing {
            Backing::Mapped(_) => "mapped",
            Backing::Owned(_) => "owned",
            Backing::File { .. } => "file",
        }
    }
}

impl ReadAt for Source {
    fn len(&self) -> u64 {
        match &self.backing {
            Backing::Mapped(map) => map.len() as u64,
            Backing::Owned(bytes) => bytes.len() as u64,
            Backing::File { len, .. } => *len,
        }
    }

    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, SourceError> {
        match &self.backing {
            Backing::Mapped(map) => map[..].read_span(span),
            Backing::Owned(bytes) => bytes[..].read_span(span),
            Backing::File { file, len } => {
                let checked = Span::checked(span.offset(), span.size(), *len).ok_or(
                    SourceError::OutOfRange {
                        offset: span.offset(),
                        len: span.size(),
                        data_len: *len,
                    },
                )?;
                // The allocation is bounded by the file's length (checked just above).
                let n = usize::try_from(checked.size()).map_err(|_| SourceError::OutOfRange {
                    offset: span.offset(),
                    len: span.size(),
                    data_len: *len,
                })?;
                let mut buf = vec![0u8; n];
                pread(file, checked.offset(), &mut buf)?;
                Ok(Cow::Owned(buf))
            }
        }
    }

    fn copy_to(&self, offset: u64, dst: &mut [u8]) -> Result<(), SourceError> {
        match &self.backing {
            Backing::Mapped(map) => map[..].copy_to(offset, dst),
            Backing::Owned(bytes) => bytes[..].copy_to(offset, dst),
            Backing::File { file, len } => {
                span_of(offset, dst.len(), *len)?;
                pread(file, offset, dst)
            }
        }
    }

    fn for_each_chunk(&self, span: Span, f: &mut dyn FnMut(&[u8])) -> Result<(), SourceError> {
        match &self.backing {
            Backing::Mapped(map) => map[..].for_each_chunk(span, f),
            Backing::Owned(bytes) => bytes[..].for_each_chunk(span, f),
            Backing::File { file, len } => {
                Span::checked(span.offset(), span.size(), *len).ok_or(SourceError::OutOfRange {
                    offset: span.offset(),
                    len: span.size(),
                    data_len: *len,
                })?;
                let mut buf = vec![0u8; CHUNK];
                let mut at = span.offset();
                while at < span.end() {
                    let left = span.end().saturating_sub(at);
                    let n = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
                    let part = &mut buf[..n];
                    pread(file, at, part)?;
                    f(part);
                    at = at.saturating_add(n as u64);
                }
                Ok(())
            }
        }
    }
}

fn pread(file: &File, offset: u64, dst: &mut [u8]) -> Result<(), SourceError> {
    file.read_exact_at(dst, offset)
        .map_err(|source| SourceError::Read {
            offset,
            len: dst.len() as u64,
            source,
        })
}

fn read_prefix(file: &File, dst: &mut [u8]) -> Result<usize, SourceError> {
    let mut got = 0;
    while got < dst.len() {
        let rest = &mut dst[got..];
        match file.read_at(rest, got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(SourceError::Read {
                    offset: got as u64,
                    len: rest.len() as u64,
                    source,
                });
            }
        }
    }
    Ok(got)
}

/// A writer that refuses to grow past a limit, so a corrupt or hostile stream cannot make an
/// allocation larger than [`MAX_DECOMPRESSED`].
struct Capped {
    out: Vec<u8>,
    limit: u64,
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let next = (self.out.len() as u64).saturating_add(buf.len() as u64);
        if next > self.limit {
            self.over = true;
            return Err(io::Error::other("decompressed size limit reached"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn decompress(path: &Path, file: File, compression: Compression) -> Result<Vec<u8>, SourceError> {
    decompress_reader(path, BufReader::new(file), compression, MAX_DECOMPRESSED)
}

/// Decompresses a whole stream into memory, refusing output beyond `limit` bytes.
pub(crate) fn decompress_reader<R: io::BufRead>(
    path: &Path,
    mut input: R,
    compression: Compression,
    limit: u64,
) -> Result<Vec<u8>, SourceError> {
    let mut out = Capped {
        out: Vec::new(),
        limit,
        over: false,
    };
    let (format, result) = match compression {
        Compression::None => ("none", io::copy(&mut input, &mut out).map(|_| ())),
        Compression::Zstd => ("zstd", zstd_frames(&mut input, &mut out)),
        Compression::Xz => (
            "xz",
            lzma_rs::xz_decompress(&mut input, &mut out).map_err(|e| match e {
                lzma_rs::error::Error::IoError(io) | lzma_rs::error::Error::HeaderTooShort(io) => {
                    io
                }
                other => io::Error::other(format!("{other:?}")),
            }),
        ),
    };
    if out.over {
        return Err(SourceError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    result.map_err(|e| SourceError::Decompress {
        path: path.to_path_buf(),
        format,
        reason: e.to_string(),
    })?;
    Ok(out.out)
}

/// Decodes every zstd frame of `input` in turn (a file may hold several).
fn zstd_frames<R: io::BufRead>(input: &mut R, out: &mut Capped) -> io::Result<()> {
    loop {
        if input.fill_buf()?.is_empty() {
            return Ok(());
        }
        let mut frame = ruzstd::decoding::StreamingDecoder::new(&mut *input)
            .map_err(|e| io::Error::other(e.to_string()))?;
        io::copy(&mut frame, out)?;
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slice_read_outside_is_an_error_not_a_panic() {
        let data = [1u8, 2, 3];
        let span = Span::checked(2, 5, u64::MAX).unwrap();
        assert!(matches!(
            data[..].read_span(span),
            Err(SourceError::OutOfRange { .. })
        ));
    }

    #[test]
    fn capped_decompression_refuses_output_past_the_limit() {
        let raw = vec![0u8; 4096];
        let packed = ruzstd::encoding::compress_to_vec(
            &raw[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let err = decompress_reader(Path::new("x.zst"), &packed[..], Compression::Zstd, 1000)
            .unwrap_err();
        assert!(matches!(err, SourceError::TooLarge { .. }));
        let ok =
            decompress_reader(Path::new("x.zst"), &packed[..], Compression::Zstd, 4096).unwrap();
        assert_eq!(ok, raw);
    }

    #[test]
    fn xz_round_trip_decompresses() {
        let raw: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut packed = Vec::new();
        lzma_rs::xz_compress(&mut &raw[..], &mut packed).unwrap();
        let out =
            decompress_reader(Path::new("x.xz"), &packed[..], Compression::Xz, 1 << 20).unwrap();
        assert_eq!(out, raw);
    }

    #[test]
    fn file_backing_reads_only_the_span() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(&(0..=255u8).collect::<Vec<_>>()).unwrap();
        let opened = Source::open(tmp.path()).unwrap();
        assert_eq!(opened.compression, Compression::None);
        let span = Span::checked(16, 4, 256).unwrap();
        assert_eq!(&*opened.source.read_span(span).unwrap(), &[16, 17, 18, 19]);
        let mut seen = Vec::new();
        opened
            .source
            .for_each_chunk(Span::checked(250, 6, 256).unwrap(), &mut |c| {
                seen.extend_from_slice(c)
            })
            .unwrap();
        assert_eq!(seen, vec![250, 251, 252, 253, 254, 255]);
    }
}
