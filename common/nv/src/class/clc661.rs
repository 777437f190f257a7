// Generated from headers/clc661.h by rig-nv's test `class::generate` (RIG_NV_REGENERATE=1 cargo test -p rig-nv class::generate rewrites it); do not edit.

// Skipped (include guards and aliases): __gh100_clc661_h__.

#[allow(unused_imports)]
use crate::field::{Field, MwField};

pub const HOPPER_USERMODE_A: u32 = 0xc661;
