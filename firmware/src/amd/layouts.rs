//! The version-specific headers after `common_firmware_header`, one function per family.
//!
//! Each family is a run of little-endian `u32` words after the common header (read as a
//! zerocopy `[U32]` view). Components are `(offset, size)` pairs; whether the offset counts
//! from the start of the file or from the ucode array follows amdgpu, checked against the
//! Debian files: PSP, TA, IMU, DMCU and DMCUB offsets count from the array; gfx v2, RLC v2.x
//! lists, SDMA v2/v3, MES, SMC v2 tables and MC debug arrays from the file's start; jump tables
//! are in dwords from the start of their ucode.

use std::borrow::Cow;

use zerocopy::FromBytes;
use zerocopy::little_endian::U32;

use super::{AmdComponent, AmdError, Block, COMMON_HEADER_SIZE, CommonHeader, MAX_PSP_PACKAGING};
use crate::source::{ReadAt, Span};

/// `enum psp_fw_type` of amdgpu_ucode.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PspFwType {
    /// 0.
    Unknown,
    /// 1: secure OS.
    Sos,
    /// 2: system driver.
    SysDrv,
    /// 3: key database.
    Kdb,
    /// 4: table of contents.
    Toc,
    /// 5: security policy.
    Spl,
    /// 6: register list.
    Rl,
    /// 7: SOC driver.
    SocDrv,
    /// 8: interface driver.
    IntfDrv,
    /// 9: debug driver.
    DbgDrv,
    /// 10: RAS driver.
    RasDrv,
    /// 11: IP key manager driver.
    IpkeymgrDrv,
    /// 12: SPDM driver.
    SpdmDrv,
    /// Any other value.
    Other(u32),
}

impl PspFwType {
    /// Decodes a descriptor's `fw_type`.
    pub fn from_u32(v: u32) -> PspFwType {
        match v {
            0 => PspFwType::Unknown,
            1 => PspFwType::Sos,
            2 => PspFwType::SysDrv,
            3 => PspFwType::Kdb,
            4 => PspFwType::Toc,
            5 => PspFwType::Spl,
            6 => PspFwType::Rl,
            7 => PspFwType::SocDrv,
            8 => PspFwType::IntfDrv,
            9 => PspFwType::DbgDrv,
            10 => PspFwType::RasDrv,
            11 => PspFwType::IpkeymgrDrv,
            12 => PspFwType::SpdmDrv,
            other => PspFwType::Other(other),
        }
    }

    /// The name amdgpu uses, without its `PSP_FW_TYPE_PSP_` prefix.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            PspFwType::Unknown => "UNKNOWN",
            PspFwType::Sos => "SOS",
            PspFwType::SysDrv => "SYS_DRV",
            PspFwType::Kdb => "KDB",
            PspFwType::Toc => "TOC",
            PspFwType::Spl => "SPL",
            PspFwType::Rl => "RL",
            PspFwType::SocDrv => "SOC_DRV",
            PspFwType::IntfDrv => "INTF_DRV",
            PspFwType::DbgDrv => "DBG_DRV",
            PspFwType::RasDrv => "RAS_DRV",
            PspFwType::IpkeymgrDrv => "IPKEYMGR_DRV",
            PspFwType::SpdmDrv => "SPDM_DRV",
            PspFwType::Other(v) => return Cow::Owned(format!("TYPE_{v}")),
        })
    }
}

/// `enum ta_fw_type` of amdgpu_ucode.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TaFwType(pub u32);

impl TaFwType {
    /// The name amdgpu uses, without its `TA_FW_TYPE_PSP_` prefix.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self.0 {
            0 => "UNKNOWN",
            1 => "ASD",
            2 => "XGMI",
            3 => "RAS",
            4 => "HDCP",
            5 => "DTM",
            6 => "RAP",
            7 => "SECUREDISPLAY",
            8 => "XGMI_AUX",
            v => return Cow::Owned(format!("TYPE_{v}")),
        })
    }
}

/// Where a component's offset counts from.
#[derive(Clone, Copy)]
enum Base {
    File,
    Array,
}

/// The words after the common header, and the components found so far.
struct Reader<'a> {
    words: Vec<u32>,
    payload: Span,
    len: u64,
    header: &'a CommonHeader,
    out: Vec<AmdComponent>,
}

impl Reader<'_> {
    /// Word `i` after the common header.
    fn w(&self, i: usize) -> u64 {
        // PANIC: callers ask only for words below the count `read_words` checked.
        u64::from(self.words[i])
    }

    /// File offset of word `i`.
    fn at(i: usize) -> u64 {
        COMMON_HEADER_SIZE + 4 * i as u64
    }

    /// Adds a component; its offset is word `off` (or `off_value` when `off` is None).
    fn add(
        &mut self,
        name: &str,
        base: Base,
        off: (u64, u64),
        size: (u64, u64),
    ) -> Result<(), AmdError> {
        let (offset, off_at) = off;
        let (size, size_at) = size;
        let start = match base {
            Base::File => Some(offset),
            Base::Array => self.payload.offset().checked_add(offset),
        };
        let err = |field, at| AmdError::Component {
            component: name.to_owned(),
            field,
            at,
            offset: start.unwrap_or(u64::MAX),
            size,
            len: self.len,
        };
        let start = start.ok_or_else(|| err("offset", off_at))?;
        let span = match Span::checked(start, size, self.len) {
            Some(s) => s,
            None if start > self.len => return Err(err("offset", off_at)),
            None => return Err(err("size", size_at)),
        };
        self.out.push(AmdComponent {
            name: name.to_owned(),
            fw_type: None,
            version: None,
            aux: false,
            span,
        });
        Ok(())
    }

    /// Adds `(offset word, size word)` as a component.
    fn pair(&mut self, name: &str, base: Base, off: usize, size: usize) -> Result<(), AmdError> {
        self.add(
            name,
            base,
            (self.w(off), Self::at(off)),
            (self.w(size), Self::at(size)),
        )
    }

    /// Adds the payload as component `name`.
    fn ucode(&mut self, name: &str) {
        self.out.push(AmdComponent {
            name: name.to_owned(),
            fw_type: None,
            version: Some(self.header.ucode_version),
            aux: false,
            span: self.payload,
        });
    }

    /// Adds a jump table at words (`off`, `size`), counted in `unit` bytes from the start of
    /// `ucode`, which must contain it.
    fn jump_table(
        &mut self,
        name: &str,
        ucode: Span,
        off: usize,
        size: usize,
        unit: u64,
    ) -> Result<(), AmdError> {
        let offset = self.w(off).saturating_mul(unit);
        let bytes = self.w(size).saturating_mul(unit);
        if bytes == 0 {
            return Ok(());
        }
        let span = ucode
            .sub(offset, bytes)
            .ok_or_else(|| AmdError::Component {
                component: name.to_owned(),
                field: if offset > ucode.size() {
                    "offset"
                } else {
                    "size"
                },
                at: if offset > ucode.size() {
                    Self::at(off)
                } else {
                    Self::at(size)
                },
                offset: ucode.offset().saturating_add(offset),
                size: bytes,
                len: ucode.end(),
            })?;
        self.out.push(AmdComponent {
            name: name.to_owned(),
            fw_type: None,
            version: None,
            aux: false,
            span,
        });
        Ok(())
    }

    /// The span of the last component added.
    fn last_span(&self) -> Span {
        self.out.last().map(|c| c.span).unwrap_or_default()
    }
}

/// Reads the family's words and lists its components.
pub(super) fn read<S: ReadAt + ?Sized>(
    src: &S,
    block: Block,
    header: &CommonHeader,
    payload: Span,
) -> Result<(String, Vec<AmdComponent>), AmdError> {
    let v = (header.header_version_major, header.header_version_minor);
    let (family, words): (&'static str, usize) = match (block, v) {
        (Block::PspSos, (1, 0)) => ("psp_v1_0", 3),
        (Block::PspSos, (1, 1)) => ("psp_v1_1", 9),
        (Block::PspSos, (1, 2)) => ("psp_v1_2", 9),
        (Block::PspSos, (1, 3)) => ("psp_v1_3", 21),
        (Block::PspSos, (2, 0)) => ("psp_v2_0", 1),
        (Block::PspSos, (2, 1)) => ("psp_v2_1", 2),
        (Block::PspTa, (1, 0)) => ("ta_v1_0", 15),
        (Block::PspTa, (2, 0)) => ("ta_v2_0", 1),
        (Block::PspToc, (1, _)) => ("psp_toc_v1", 0),
        (Block::PspAsd, (1, _)) => ("psp_asd_v1", 0),
        (Block::PspCap, (1, _)) => ("psp_cap_v1", 0),
        (Block::RlcToc, (1, _)) => ("rlc_toc_v1", 0),
        (Block::Gfx, (1, 0)) => ("gfx_v1_0", 3),
        (Block::Gfx, (2, 0)) => ("gfx_v2_0", 7),
        (Block::Rlc, (1, 0)) => ("rlc_v1_0", 5),
        (Block::Rlc, (2, 0)) => ("rlc_v2_0", 18),
        (Block::Rlc, (2, 1)) => ("rlc_v2_1", 31),
        (Block::Rlc, (2, 2)) => ("rlc_v2_2", 35),
        (Block::Rlc, (2, 3)) => ("rlc_v2_3", 43),
        (Block::Rlc, (2, 4)) => ("rlc_v2_4", 53),
        (Block::Sdma, (1, 0)) => ("sdma_v1_0", 4),
        (Block::Sdma, (1, 1)) => ("sdma_v1_1", 5),
        (Block::Sdma, (2, 0)) => ("sdma_v2_0", 8),
        (Block::Sdma, (3, 0)) => ("sdma_v3_0", 3),
        (Block::Vpe, (1, 0)) => ("vpe_v1_0", 8),
        (Block::Mes, (1, 0)) => ("mes_v1_0", 10),
        (Block::Umsch, (1, 0)) => ("umsch_mm_v1_0", 12),
        (Block::Imu, (1, 0)) => ("imu_v1_0", 4),
        (Block::Smc, (1, 0)) => ("smc_v1_0", 1),
        (Block::Smc, (2, 0)) => ("smc_v2_0", 3),
        (Block::Smc, (2, 1)) => ("smc_v2_1", 3),
        (Block::Mc, (1, 0)) => ("mc_v1_0", 2),
        (Block::Dmcu, (1, 0)) => ("dmcu_v1_0", 2),
        (Block::Dmcub, (1, 0)) => ("dmcub_v1_0", 2),
        (Block::GpuInfo, (1, 0)) => ("gpu_info_v1_0", 1),
        (Block::Media | Block::Unknown, (1, 0)) => ("common_v1_0", 0),
        _ => {
            return Err(AmdError::UnsupportedVersion {
                block,
                major: v.0,
                minor: v.1,
            });
        }
    };
    let mut r = Reader {
        words: read_words(src, family, words)?,
        payload,
        len: src.len(),
        header,
        out: Vec::new(),
    };
    match family {
        "psp_v1_0" | "psp_v1_1" | "psp_v1_2" | "psp_v1_3" => psp_v1(&mut r, family)?,
        "psp_v2_0" | "psp_v2_1" => psp_v2(src, &mut r, family == "psp_v2_1")?,
        "ta_v1_0" => ta_v1(&mut r)?,
        "ta_v2_0" => ta_v2(src, &mut r)?,
        "gfx_v1_0" => {
            r.ucode("ucode");
            r.jump_table("jump_table", payload, 1, 2, 4)?;
        }
        "gfx_v2_0" => {
            r.pair("ucode", Base::File, 2, 1)?;
            r.pair("data", Base::File, 4, 3)?;
        }
        "rlc_v2_0" | "rlc_v2_1" | "rlc_v2_2" | "rlc_v2_3" | "rlc_v2_4" => rlc_v2(&mut r, words)?,
        "sdma_v1_0" | "sdma_v1_1" => {
            r.ucode("ucode");
            r.jump_table("jump_table", payload, 2, 3, 4)?;
        }
        "sdma_v2_0" | "vpe_v1_0" => {
            // SDMA counts its jump tables in dwords (sdma_v6_0_load_microcode loads
            // jt_offset + jt_size dwords); VPE's fields only fit Debian's files as bytes.
            let unit = if family == "sdma_v2_0" { 4 } else { 1 };
            r.add("ctx_ucode", Base::Array, (0, 0x18), (r.w(1), Reader::at(1)))?;
            let ctx = r.last_span();
            r.jump_table("ctx_jump_table", ctx, 2, 3, unit)?;
            r.pair("ctl_ucode", Base::File, 4, 5)?;
            let ctl = r
                .out
                .iter()
                .rev()
                .find(|c| c.name == "ctl_ucode")
                .map(|c| c.span)
                .unwrap_or_default();
            r.jump_table("ctl_jump_table", ctl, 6, 7, unit)?;
        }
        "sdma_v3_0" => r.pair("ucode", Base::File, 1, 2)?,
        "mes_v1_0" | "umsch_mm_v1_0" => {
            r.pair("ucode", Base::File, 2, 1)?;
            r.pair("data", Base::File, 5, 4)?;
        }
        "imu_v1_0" => {
            r.pair("iram", Base::Array, 1, 0)?;
            r.pair("dram", Base::Array, 3, 2)?;
        }
        "smc_v2_0" => {
            r.ucode("ucode");
            if r.w(2) != 0 {
                r.pair("soft_pptable", Base::File, 1, 2)?;
            }
        }
        "smc_v2_1" => smc_v2_1(src, &mut r)?,
        "mc_v1_0" => {
            r.ucode("ucode");
            r.pair("io_debug", Base::File, 1, 0)?;
        }
        "dmcu_v1_0" => {
            r.ucode("ucode");
            r.pair("intv", Base::Array, 0, 1)?;
        }
        "dmcub_v1_0" => {
            r.add(
                "inst_const",
                Base::Array,
                (0, 0x18),
                (r.w(0), Reader::at(0)),
            )?;
            r.add(
                "bss_data",
                Base::Array,
                (r.w(0), Reader::at(0)),
                (r.w(1), Reader::at(1)),
            )?;
        }
        _ => r.ucode("ucode"),
    }
    Ok((family.to_owned(), r.out))
}

/// Reads `n` words after the common header.
fn read_words<S: ReadAt + ?Sized>(
    src: &S,
    family: &'static str,
    n: usize,
) -> Result<Vec<u32>, AmdError> {
    let need = COMMON_HEADER_SIZE + 4 * n as u64;
    let span =
        Span::checked(COMMON_HEADER_SIZE, 4 * n as u64, src.len()).ok_or(AmdError::Truncated {
            family,
            need,
            len: src.len(),
        })?;
    let bytes = src.read_span(span)?;
    let words = <[U32]>::ref_from_bytes(&bytes).map_err(|_| AmdError::Truncated {
        family,
        need,
        len: src.len(),
    })?;
    Ok(words.iter().map(|w| w.get()).collect())
}

/// `psp_fw_legacy_bin_desc` at word `i`: (fw_version, offset_bytes, size_bytes); absent when
/// its size is 0. `fw_type` is the `psp_fw_type` it plays, if it has one.
fn legacy(r: &mut Reader<'_>, name: &str, fw_type: Option<u32>, i: usize) -> Result<(), AmdError> {
    if r.w(i + 2) == 0 {
        return Ok(());
    }
    r.pair(name, Base::Array, i + 1, i + 2)?;
    let version = r.words.get(i).copied();
    if let Some(last) = r.out.last_mut() {
        last.version = version;
        last.fw_type = fw_type;
        last.aux = name.ends_with("_AUX");
    }
    Ok(())
}

/// PSP v1.x: the system driver runs from the array start up to the SOS offset.
fn psp_v1(r: &mut Reader<'_>, family: &str) -> Result<(), AmdError> {
    let sys_size = r.w(1);
    r.add("SYS_DRV", Base::Array, (0, 0x18), (sys_size, Reader::at(1)))?;
    if let Some(last) = r.out.last_mut() {
        last.fw_type = Some(2);
        last.version = Some(r.header.ucode_version);
    }
    legacy(r, "SOS", Some(1), 0)?;
    match family {
        "psp_v1_1" | "psp_v1_3" => {
            legacy(r, "TOC", Some(4), 3)?;
            legacy(r, "KDB", Some(3), 6)?;
        }
        "psp_v1_2" => legacy(r, "KDB", Some(3), 6)?,
        _ => {}
    }
    if family == "psp_v1_3" {
        legacy(r, "SPL", Some(5), 9)?;
        legacy(r, "RL", Some(6), 12)?;
        legacy(r, "SYS_DRV_AUX", Some(2), 15)?;
        legacy(r, "SOS_AUX", Some(1), 18)?;
    }
    Ok(())
}

/// Reads `count` `psp_fw_bin_desc` entries at byte `at` (count already bounded). They live in
/// the header, before the ucode array.
fn descriptors<S: ReadAt + ?Sized>(
    src: &S,
    r: &Reader<'_>,
    at: u64,
    count: u32,
    field: &'static str,
) -> Result<Vec<[u32; 4]>, AmdError> {
    let size = u64::from(count) * 16;
    if at + size > u64::from(r.header.ucode_array_offset_bytes) {
        return Err(AmdError::Field {
            field,
            at: Reader::at(0),
            value: u64::from(count),
            reason: "the descriptors run into the ucode array",
        });
    }
    let span = Span::checked(at, size, src.len()).ok_or(AmdError::Truncated {
        family: "psp_fw_bin_desc array",
        need: at.saturating_add(size),
        len: src.len(),
    })?;
    let bytes = src.read_span(span)?;
    let words = <[U32]>::ref_from_bytes(&bytes).map_err(|_| AmdError::Truncated {
        family: "psp_fw_bin_desc array",
        need: at.saturating_add(size),
        len: src.len(),
    })?;
    Ok(words
        .chunks_exact(4)
        .map(|c| [c[0].get(), c[1].get(), c[2].get(), c[3].get()])
        .collect())
}

fn bounded_count(r: &Reader<'_>, field: &'static str) -> Result<u32, AmdError> {
    let count = r.w(0);
    if count >= u64::from(MAX_PSP_PACKAGING) {
        return Err(AmdError::Field {
            field,
            at: Reader::at(0),
            value: count,
            reason: "packed count must be below UCODE_MAX_PSP_PACKAGING (26)",
        });
    }
    Ok(u32::try_from(count).unwrap_or(0))
}

/// Adds descriptors as components; those from index `aux_from` on are auxiliary.
fn add_descriptors(
    r: &mut Reader<'_>,
    descs: &[[u32; 4]],
    desc_at: u64,
    aux_from: usize,
    name: impl Fn(u32) -> String,
) -> Result<(), AmdError> {
    for (i, [fw_type, version, offset, size]) in descs.iter().copied().enumerate() {
        let at = desc_at + 16 * i as u64;
        let n = name(fw_type);
        r.add(
            &n,
            Base::Array,
            (u64::from(offset), at + 8),
            (u64::from(size), at + 12),
        )?;
        if let Some(last) = r.out.last_mut() {
            last.fw_type = Some(fw_type);
            last.version = Some(version);
            last.aux = i >= aux_from;
        }
    }
    Ok(())
}

/// PSP v2.0/v2.1: a count (v2.1: and the index of the first auxiliary descriptor), then
/// `psp_fw_bin_desc` entries.
fn psp_v2<S: ReadAt + ?Sized>(src: &S, r: &mut Reader<'_>, v2_1: bool) -> Result<(), AmdError> {
    let count = bounded_count(r, "psp_fw_bin_count")?;
    let (desc_at, aux_from) = if v2_1 {
        let aux = r.w(1);
        if aux > u64::from(count) {
            return Err(AmdError::Field {
                field: "psp_aux_fw_bin_index",
                at: Reader::at(1),
                value: aux,
                reason: "is beyond psp_fw_bin_count",
            });
        }
        // An index of 0 would make every descriptor auxiliary: read it as "no auxiliary set".
        let aux_from = usize::try_from(aux)
            .ok()
            .filter(|a| *a != 0)
            .unwrap_or(usize::MAX);
        (Reader::at(2), aux_from)
    } else {
        (Reader::at(1), usize::MAX)
    };
    let descs = descriptors(src, r, desc_at, count, "psp_fw_bin_count")?;
    add_descriptors(r, &descs, desc_at, aux_from, |t| {
        PspFwType::from_u32(t).name().into_owned()
    })
}

/// TA v1.0: five legacy descriptors (xgmi, ras, hdcp, dtm, securedisplay).
fn ta_v1(r: &mut Reader<'_>) -> Result<(), AmdError> {
    for (i, (name, ty)) in [
        ("XGMI", 2),
        ("RAS", 3),
        ("HDCP", 4),
        ("DTM", 5),
        ("SECUREDISPLAY", 7),
    ]
    .into_iter()
    .enumerate()
    {
        let w = 3 * i;
        if r.w(w + 2) == 0 {
            continue;
        }
        r.pair(name, Base::Array, w + 1, w + 2)?;
        let version = u32::try_from(r.w(w)).ok();
        if let Some(last) = r.out.last_mut() {
            last.fw_type = Some(ty);
            last.version = version;
        }
    }
    Ok(())
}

/// TA v2.0: a count, then `psp_fw_bin_desc` entries tagged with `ta_fw_type`.
fn ta_v2<S: ReadAt + ?Sized>(src: &S, r: &mut Reader<'_>) -> Result<(), AmdError> {
    let count = bounded_count(r, "ta_fw_bin_count")?;
    let desc_at = Reader::at(1);
    let descs = descriptors(src, r, desc_at, count, "ta_fw_bin_count")?;
    add_descriptors(r, &descs, desc_at, usize::MAX, |t| {
        TaFwType(t).name().into_owned()
    })
}

/// RLC v2.x: the ucode, its jump table, the register lists, then what each minor adds.
fn rlc_v2(r: &mut Reader<'_>, words: usize) -> Result<(), AmdError> {
    r.ucode("ucode");
    r.jump_table("jump_table", r.payload, 1, 2, 4)?;
    let mut lists: Vec<(&str, usize, usize)> = vec![
        ("reg_list_format", 11, 10),
        ("reg_list", 13, 12),
        ("reg_list_format_separate", 15, 14),
        ("reg_list_separate", 17, 16),
    ];
    if words >= 31 {
        lists.extend([
            ("save_restore_list_cntl", 22, 21),
            ("save_restore_list_gpm", 26, 25),
            ("save_restore_list_srm", 30, 29),
        ]);
    }
    if words >= 35 {
        lists.extend([("rlc_iram", 32, 31), ("rlc_dram", 34, 33)]);
    }
    if words >= 43 {
        lists.extend([("rlcp", 38, 37), ("rlcv", 42, 41)]);
    }
    if words >= 53 {
        lists.extend([
            ("global_tap_delays", 44, 43),
            ("se0_tap_delays", 46, 45),
            ("se1_tap_delays", 48, 47),
            ("se2_tap_delays", 50, 49),
            ("se3_tap_delays", 52, 51),
        ]);
    }
    for (name, off, size) in lists {
        if r.w(size) != 0 {
            r.pair(name, Base::File, off, size)?;
        }
    }
    Ok(())
}

/// SMC v2.1: a table of `smc_soft_pptable_entry` {id, offset, size} at a file offset.
fn smc_v2_1<S: ReadAt + ?Sized>(src: &S, r: &mut Reader<'_>) -> Result<(), AmdError> {
    r.ucode("ucode");
    let count = r.w(1);
    let at = r.w(2);
    if count > 64 {
        return Err(AmdError::Field {
            field: "pptable_count",
            at: Reader::at(1),
            value: count,
            reason: "more than 64 soft pptables",
        });
    }
    let size = count * 12;
    let span = Span::checked(at, size, src.len()).ok_or(AmdError::Component {
        component: "pptable entries".into(),
        field: "offset",
        at: Reader::at(2),
        offset: at,
        size,
        len: src.len(),
    })?;
    let bytes = src.read_span(span)?;
    let words = <[U32]>::ref_from_bytes(&bytes).map_err(|_| AmdError::Truncated {
        family: "smc_soft_pptable_entry array",
        need: at.saturating_add(size),
        len: src.len(),
    })?;
    for (i, e) in words.chunks_exact(3).enumerate() {
        let entry_at = at + 12 * i as u64;
        let name = format!("pptable_{}", e[0].get());
        r.add(
            &name,
            Base::File,
            (u64::from(e[1].get()), entry_at + 4),
            (u64::from(e[2].get()), entry_at + 8),
        )?;
    }
    Ok(())
}
