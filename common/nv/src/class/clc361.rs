// Generated from headers/clc361.h by rig-nv's test `class::generate` (RIG_NV_REGENERATE=1 cargo test -p rig-nv class::generate rewrites it); do not edit.

// Skipped (include guards and aliases): _clc361_h_.

#[allow(unused_imports)]
use crate::field::{Field, MwField};

pub const VOLTA_USERMODE_A: u32 = 0xc361;
pub const NVC361: core::ops::RangeInclusive<u32> = 0x810000..=0x81ffff;
pub const NVC361_NV_USERMODE__SIZE: u32 = 0x10000;
pub const NVC361_TIME_0: u32 = 0x80;
pub const NVC361_TIME_1: u32 = 0x84;
pub const NVC361_NOTIFY_CHANNEL_PENDING: u32 = 0x90;
