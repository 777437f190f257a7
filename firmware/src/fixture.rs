//! Builders of small, synthetic firmware files in every format this crate reads.
//!
//! They exist for tests, fuzz seeds and documentation: hand-made files for the cases the
//! distributions do not ship (FMC ELF, NVFW TLV, malformed variants), without committing
//! binaries. Layouts follow the format modules; nothing here is read back by the crate itself.
//! Builders index and cast freely: they make files of a few KiB and panic on nonsense input,
//! which only a test can give them.
#![expect(
    clippy::cast_possible_truncation,
    reason = "fixture files are a few KiB, every size fits the field it is written to"
)]

pub use rig_elf::fixture::{Class, ElfBuilder};

/// A GSP-RM-shaped ELF64: `.fwimage` of `image_len` bytes (allocated, the only such section),
/// `.fwversion`, and a 16-byte `.fwsignature_<family>` per family.
pub fn gsp_elf(image_len: usize, version: &str, families: &[&str]) -> Vec<u8> {
    let image: Vec<u8> = (0..image_len).map(|i| (i % 251) as u8).collect();
    let mut b = ElfBuilder::new(Class::Elf64, 243)
        .section(".fwimage", 1, 0x3, &image)
        .section(".fwversion", 1, 0, format!("{version}\0").as_bytes());
    for f in families {
        let sig: Vec<u8> = f.bytes().cycle().take(16).collect();
        b = b.section(&format!(".fwsignature_{f}"), 1, 0, &sig);
    }
    b.build()
}

/// A Blackwell FMC-shaped ELF32 with sections `image`, `hash`, `signature`, `publickey`.
pub fn fmc_elf() -> Vec<u8> {
    ElfBuilder::new(Class::Elf32, 243)
        .section("image", 1, 0, &[0xa5; 256])
        .section("hash", 1, 0, &[0x11; 48])
        .section("signature", 1, 0, &[0x22; 384])
        .section("publickey", 1, 0, &[0x33; 384])
        .build()
}

/// An NVFW TLV container holding `blocks` (tag, value), values padded to 4 bytes.
pub fn tlv(blocks: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
    let mut out = b"NVFW".to_vec();
    for (tag, value) in blocks {
        out.extend_from_slice(*tag);
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(value);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }
    out
}

/// A well-formed TLV: `VERS`, two 32-byte signatures in `NSIG`/`SIGN`, and an `IMAG` block.
pub fn tlv_signed() -> Vec<u8> {
    tlv(&[
        (b"VERS", b"570.144"),
        (b"NSIG", &2u32.to_le_bytes()),
        (b"SIGN", &[0x5a; 64]),
        (b"IMAG", &[1, 2, 3, 4, 5]),
    ])
}

/// A falcon binary with an HS header (booter-shaped): `sigs` signatures of `sig_size` bytes
/// (at most 0x500), one app, 0x800 bytes of ucode.
pub fn falcon_hs(sigs: u32, sig_size: u32) -> Vec<u8> {
    let data_len = 0x800u32;
    let hs_at = 0x18u32; // HS header: 9 u32
    let load_at = hs_at + 36; // load header (5 u32) + 1 app (2 u32)
    let meta_at = load_at + 28; // 3 u32
    let patch_loc_at = meta_at + 12;
    let patch_sig_at = patch_loc_at + 4;
    let num_sig_at = patch_sig_at + 4;
    let sig_at = num_sig_at + 4;
    let data_at = (sig_at + sigs * sig_size + 0xff) & !0xff;
    let mut out = vec![0u8; (data_at + data_len) as usize];
    let words = [0x10de, 1, data_at + data_len, hs_at, data_at, data_len];
    for (i, w) in words.iter().enumerate() {
        put32(&mut out, i * 4, *w);
    }
    let hs = [
        sig_at,
        sigs * sig_size,
        patch_loc_at,
        patch_sig_at,
        meta_at,
        12,
        num_sig_at,
        load_at,
        28,
    ];
    for (i, w) in hs.iter().enumerate() {
        put32(&mut out, hs_at as usize + i * 4, *w);
    }
    let load = [0u32, 0x100, 0x300, 0x100, 1, 0, 0x300];
    for (i, w) in load.iter().enumerate() {
        put32(&mut out, load_at as usize + i * 4, *w);
    }
    for (i, w) in [1u32, 1, 3].iter().enumerate() {
        put32(&mut out, meta_at as usize + i * 4, *w);
    }
    put32(&mut out, patch_loc_at as usize, 0x300);
    put32(&mut out, patch_sig_at as usize, 0);
    put32(&mut out, num_sig_at as usize, sigs);
    for i in 0..(sigs * sig_size) {
        out[(sig_at + i) as usize] = (i % 7) as u8;
    }
    out
}

/// A falcon binary with a RISC-V ucode descriptor (bootloader-shaped, descriptor version 5).
pub fn falcon_riscv() -> Vec<u8> {
    let data_at = 0x6cu32;
    let data_len = 0x1000u32;
    let mut out = vec![0u8; (data_at + data_len) as usize];
    for (i, w) in [0x10de, 1, data_at + data_len, 0x18, data_at, data_len]
        .iter()
        .enumerate()
    {
        put32(&mut out, i * 4, *w);
    }
    let desc = [
        5u32, 0x800, 0x100, 0x900, 0x10, 0, 0, 7, 0, 0x200, 0x200, 0x200, 0x400, 0x400,
    ];
    for (i, w) in desc.iter().enumerate() {
        put32(&mut out, 0x18 + i * 4, *w);
    }
    out
}

/// An amdgpu `common_firmware_header` file: header of `header_size` bytes (the common part
/// filled in, `extra` u32 fields after it), then `payload` at offset 0x100.
pub fn amd(major: u16, minor: u16, ip: (u16, u16), extra: &[u32], payload: &[u8]) -> Vec<u8> {
    let array = 0x100usize;
    let header_size = 32 + 4 * extra.len();
    let mut out = vec![0u8; array + payload.len()];
    let total = out.len() as u32;
    put32(&mut out, 0, total);
    put32(&mut out, 4, header_size as u32);
    put16(&mut out, 8, major);
    put16(&mut out, 10, minor);
    put16(&mut out, 12, ip.0);
    put16(&mut out, 14, ip.1);
    put32(&mut out, 16, 0x0102_0304);
    put32(&mut out, 20, payload.len() as u32);
    put32(&mut out, 24, array as u32);
    let mut h = crc32fast::Hasher::new();
    h.update(payload);
    put32(&mut out, 28, h.finalize());
    for (i, w) in extra.iter().enumerate() {
        put32(&mut out, 32 + 4 * i, *w);
    }
    out[array..].copy_from_slice(payload);
    out
}

/// A PSP SOS v2.0 file with `(fw_type, size)` components packed back to back.
pub fn amd_psp_v2(components: &[(u32, u32)]) -> Vec<u8> {
    let mut extra = vec![components.len() as u32];
    let mut offset = 0u32;
    for (fw_type, size) in components {
        extra.extend_from_slice(&[*fw_type, 0x100 + fw_type, offset, *size]);
        offset += size;
    }
    let payload: Vec<u8> = (0..offset).map(|i| (i % 253) as u8).collect();
    amd(2, 0, (13, 0), &extra, &payload)
}

fn put16(out: &mut [u8], at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
