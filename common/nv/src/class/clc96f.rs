// Generated from headers/clc96f.h by rig-nv's test `class::generate` (RIG_NV_REGENERATE=1 cargo test -p rig-nv class::generate rewrites it); do not edit.

// Skipped (include guards and aliases): __gb100_clc96f_h__.

#[allow(unused_imports)]
use crate::field::{Field, MwField};

pub const BLACKWELL_CHANNEL_GPFIFO_A: u32 = 0xc96f;
pub const NVC96F_SET_OBJECT: u32 = 0x0;
pub const NVC96F_MEM_OP_A: u32 = 0x28;
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_INVALIDATION_SIZE: Field = Field::new(5, 0);
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_INVAL_SCOPE: Field = Field::new(7, 6);
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_INVAL_SCOPE_NON_LINK_TLBS: u32 = 0x2;
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_SYSMEMBAR: Field = Field::new(11, 11);
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_SYSMEMBAR_EN: u32 = 0x1;
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_SYSMEMBAR_DIS: u32 = 0x0;
pub const NVC96F_MEM_OP_A_TLB_INVALIDATE_TARGET_ADDR_LO: Field = Field::new(31, 12);
pub const NVC96F_MEM_OP_B: u32 = 0x2c;
pub const NVC96F_MEM_OP_B_TLB_INVALIDATE_TARGET_ADDR_HI: Field = Field::new(31, 0);
pub const NVC96F_MEM_OP_C: u32 = 0x30;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB: Field = Field::new(0, 0);
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB_ONE: u32 = 0x0;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB_ALL: u32 = 0x1;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_GPC: Field = Field::new(1, 1);
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_GPC_ENABLE: u32 = 0x0;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_GPC_DISABLE: u32 = 0x1;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_REPLAY: Field = Field::new(4, 2);
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_REPLAY_NONE: u32 = 0x0;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_ACK_TYPE: Field = Field::new(6, 5);
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_ACK_TYPE_NONE: u32 = 0x0;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_ACK_TYPE_GLOBALLY: u32 = 0x1;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PAGE_TABLE_LEVEL: Field = Field::new(9, 7);
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PAGE_TABLE_LEVEL_ALL: u32 = 0x0;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PAGE_TABLE_LEVEL_PTE_ONLY: u32 = 0x1;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PAGE_TABLE_LEVEL_UP_TO_PDE4: u32 = 0x6;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB_APERTURE: Field = Field::new(11, 10);
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB_APERTURE_VID_MEM: u32 = 0x0;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB_APERTURE_SYS_MEM_COHERENT: u32 = 0x2;
pub const NVC96F_MEM_OP_C_TLB_INVALIDATE_PDB_ADDR_LO: Field = Field::new(31, 12);
pub const NVC96F_MEM_OP_D: u32 = 0x34;
pub const NVC96F_MEM_OP_D_TLB_INVALIDATE_PDB_ADDR_HI: Field = Field::new(26, 0);
pub const NVC96F_MEM_OP_D_OPERATION: Field = Field::new(31, 27);
pub const NVC96F_MEM_OP_D_OPERATION_MMU_TLB_INVALIDATE: u32 = 0x9;
pub const NVC96F_MEM_OP_D_OPERATION_MMU_TLB_INVALIDATE_TARGETED: u32 = 0xa;
pub const NVC96F_MEM_OP_D_OPERATION_L2_FLUSH_DIRTY: u32 = 0x10;
pub const NVC96F_MEM_OP_D_OPERATION_L2_SYSMEM_NCOH_INVALIDATE: u32 = 0x11;
pub const NVC96F_SEM_ADDR_LO: u32 = 0x5c;
pub const NVC96F_SEM_ADDR_LO_OFFSET: Field = Field::new(31, 2);
pub const NVC96F_SEM_ADDR_HI: u32 = 0x60;
pub const NVC96F_SEM_ADDR_HI_OFFSET: Field = Field::new(24, 0);
pub const NVC96F_SEM_PAYLOAD_LO: u32 = 0x64;
pub const NVC96F_SEM_PAYLOAD_HI: u32 = 0x68;
pub const NVC96F_SEM_EXECUTE: u32 = 0x6c;
pub const NVC96F_SEM_EXECUTE_OPERATION: Field = Field::new(2, 0);
pub const NVC96F_SEM_EXECUTE_OPERATION_ACQUIRE: u32 = 0x0;
pub const NVC96F_SEM_EXECUTE_OPERATION_RELEASE: u32 = 0x1;
pub const NVC96F_SEM_EXECUTE_RELEASE_WFI: Field = Field::new(20, 20);
pub const NVC96F_SEM_EXECUTE_RELEASE_WFI_DIS: u32 = 0x0;
pub const NVC96F_SEM_EXECUTE_PAYLOAD_SIZE: Field = Field::new(24, 24);
pub const NVC96F_SEM_EXECUTE_PAYLOAD_SIZE_32BIT: u32 = 0x0;
pub const NVC96F_GP_ENTRY__SIZE: u32 = 0x8;
pub const NVC96F_GP_ENTRY0_FETCH: Field = Field::new(0, 0);
pub const NVC96F_GP_ENTRY0_FETCH_UNCONDITIONAL: u32 = 0x0;
pub const NVC96F_GP_ENTRY0_FETCH_CONDITIONAL: u32 = 0x1;
pub const NVC96F_GP_ENTRY0_GET: Field = Field::new(31, 2);
pub const NVC96F_GP_ENTRY0_OPERAND: Field = Field::new(31, 0);
pub const NVC96F_GP_ENTRY0_PB_EXTENDED_BASE_OPERAND: Field = Field::new(24, 8);
pub const NVC96F_GP_ENTRY1_GET_HI: Field = Field::new(7, 0);
pub const NVC96F_GP_ENTRY1_LEVEL: Field = Field::new(9, 9);
pub const NVC96F_GP_ENTRY1_LEVEL_MAIN: u32 = 0x0;
pub const NVC96F_GP_ENTRY1_LEVEL_SUBROUTINE: u32 = 0x1;
pub const NVC96F_GP_ENTRY1_LENGTH: Field = Field::new(30, 10);
pub const NVC96F_GP_ENTRY1_SYNC: Field = Field::new(31, 31);
pub const NVC96F_GP_ENTRY1_SYNC_PROCEED: u32 = 0x0;
pub const NVC96F_GP_ENTRY1_SYNC_WAIT: u32 = 0x1;
pub const NVC96F_GP_ENTRY1_OPCODE: Field = Field::new(7, 0);
pub const NVC96F_GP_ENTRY1_OPCODE_NOP: u32 = 0x0;
pub const NVC96F_GP_ENTRY1_OPCODE_ILLEGAL: u32 = 0x1;
pub const NVC96F_GP_ENTRY1_OPCODE_GP_CRC: u32 = 0x2;
pub const NVC96F_GP_ENTRY1_OPCODE_PB_CRC: u32 = 0x3;
pub const NVC96F_GP_ENTRY1_OPCODE_SET_PB_SEGMENT_EXTENDED_BASE: u32 = 0x4;

/// Byte offsets of `Nvc96fControl`'s members.
pub mod Nvc96fControl {
    pub const Ignored00: usize = 0x0;
    pub const GPPut: usize = 0x8c;
    pub const Ignored01: usize = 0x90;
}
