//! The decoders' output in the one model of a decoded function: capabilities, the
//! PCI Express capability's derived values, links, and the header's registers.
//!
//! Flow: `caps`/`express`/`header` (raw registers, pure) → here (names, derived values
//! and display spellings decided once, as lspci spells them) → `device`, which
//! assembles the [`rig_model::Device`]. Pure: no I/O.
//!
//! Reference: PCIe Base 6.0 §7.5.3 (Express), §7.8.4 (AER), §7.8.3 (ARI); lspci's
//! spellings for speeds and names. Not here: walking the chains (`caps`), the register
//! layouts (`express`, `header`), sysfs and the link budget (`device`).

use rig_model::{CapDetail, Capability, Header, Link, RebarEntry, SrIov};

use super::{
    caps::{self, Detail},
    express::{self, Express},
    header,
};

/// The model's `Header`: the registers of the common header that the model shows.
pub(super) fn header(h: &header::Header) -> Header {
    Header {
        header_type: h.header_type,
        multifunction: h.multifunction,
        command: h.command,
        status: h.status,
        cache_line_size: h.cache_line_size,
        latency_timer: h.latency_timer,
        interrupt_line: h.interrupt_line,
        interrupt_pin: h.interrupt_pin,
        bist: h.bist,
    }
}

/// A link's speed as lspci spells it, its GT/s and its bandwidth after encoding.
pub(super) fn link(l: express::Link) -> Link {
    Link {
        speed: express::speed_label(l.speed_code),
        speed_gts: express::speed_gts(l.speed_code).unwrap_or(0.0),
        width: l.width,
        gbytes_per_s: express::gbytes_per_s(l.speed_code, l.width),
    }
}

/// One capability; a truncated one keeps its name with " (truncated)" and no detail.
pub(super) fn capability(c: &caps::Capability) -> Capability {
    Capability {
        offset: c.offset,
        id: c.id,
        version: c.version,
        name: if c.detail == Detail::Truncated {
            format!("{} (truncated)", c.name())
        } else {
            c.name().to_owned()
        },
        detail: detail(&c.detail),
    }
}

fn detail(d: &Detail) -> Option<CapDetail> {
    Some(match d {
        Detail::None | Detail::Truncated => return None,
        Detail::PowerManagement(p) => CapDetail::PowerManagement {
            version: p.version,
            d1: p.d1,
            d2: p.d2,
            pme_support: p.pme_support,
            aux_current_ma: p.aux_current_ma,
            power_state: p.power_state,
            no_soft_reset: p.no_soft_reset,
            pme_enabled: p.pme_enabled,
            pme_status: p.pme_status,
        },
        Detail::Msi(m) => CapDetail::Msi {
            enabled: m.enabled,
            vectors_capable: m.vectors_capable,
            vectors_enabled: m.vectors_enabled,
            is_64bit: m.is_64bit,
            per_vector_masking: m.per_vector_masking,
            address: m.address,
            data: m.data,
        },
        Detail::MsiX(x) => CapDetail::MsiX {
            enabled: x.enabled,
            function_masked: x.function_masked,
            table_size: x.table_size,
            table_bar: x.table_bar,
            table_offset: x.table_offset,
            pba_bar: x.pba_bar,
            pba_offset: x.pba_offset,
        },
        Detail::Express(e) => CapDetail::Express(Box::new(express_cap(e))),
        &Detail::VendorSpecific { length } => CapDetail::VendorSpecific { length },
        &Detail::BridgeSubsystem {
            vendor_id,
            device_id,
        } => CapDetail::BridgeSubsystem {
            vendor_id,
            device_id,
        },
        Detail::Aer(a) => CapDetail::Aer {
            uncorrectable_status: a.uncorrectable_status,
            uncorrectable_mask: a.uncorrectable_mask,
            uncorrectable_severity: a.uncorrectable_severity,
            correctable_status: a.correctable_status,
            correctable_mask: a.correctable_mask,
            capabilities_control: a.capabilities_control,
            // PCI_ERR_CAP_FEP: bits 4:0 of the capabilities and control register.
            first_error_pointer: (a.capabilities_control & 0x1f) as u8,
        },
        &Detail::SerialNumber(serial) => CapDetail::SerialNumber {
            serial,
            text: serial
                .to_be_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join("-"),
        },
        &Detail::PowerBudget {
            data_select,
            data,
            system_allocated,
        } => CapDetail::PowerBudget {
            data_select,
            data,
            system_allocated,
        },
        &Detail::Vsec { id, rev, length } => CapDetail::Vsec {
            vsec_id: id,
            vsec_rev: rev,
            length,
        },
        &Detail::Acs {
            capability,
            control,
        } => CapDetail::Acs {
            capability,
            control,
        },
        &Detail::Ari {
            capability,
            control,
        } => CapDetail::Ari {
            capability,
            control,
            // The ARI capability register's Next Function Number, bits 15:8.
            next_function: (capability >> 8) as u8,
        },
        Detail::SrIov(s) => CapDetail::SrIov(Box::new(SrIov {
            capability: s.capability,
            control: s.control,
            status: s.status,
            initial_vfs: s.initial_vfs,
            total_vfs: s.total_vfs,
            num_vfs: s.num_vfs,
            first_vf_offset: s.first_vf_offset,
            vf_stride: s.vf_stride,
            vf_device_id: s.vf_device_id,
            supported_page_sizes: s.supported_page_sizes,
            system_page_size: s.system_page_size,
            vf_bars: s.vf_bars.to_vec(),
        })),
        Detail::ResizableBar {
            virtual_function,
            entries,
        } => CapDetail::ResizableBar {
            virtual_function: *virtual_function,
            entries: entries
                .iter()
                .map(|e| RebarEntry {
                    bar: e.bar,
                    supported_sizes: e.supported.clone(),
                    current_size: e.current,
                })
                .collect(),
        },
        &Detail::Ltr {
            max_snoop_ns,
            max_no_snoop_ns,
        } => CapDetail::Ltr {
            max_snoop_ns,
            max_no_snoop_ns,
        },
        &Detail::Dvsec {
            vendor_id,
            revision,
            length,
            id,
        } => CapDetail::Dvsec {
            vendor_id,
            revision,
            length,
            dvsec_id: id,
        },
    })
}

fn express_cap(e: &Express) -> rig_model::Express {
    rig_model::Express {
        version: e.version,
        port_type: e.port_type_name().to_owned(),
        slot_implemented: e.slot_implemented,
        interrupt_message: e.interrupt_message,
        devcap: e.devcap,
        devctl: e.devctl,
        devsta: e.devsta,
        lnkcap: e.lnkcap,
        lnkctl: e.lnkctl,
        lnksta: e.lnksta,
        sltcap: e.sltcap,
        sltctl: e.sltctl,
        sltsta: e.sltsta,
        v2: e.v2,
        max_payload_supported: e.max_payload_supported(),
        max_payload: e.max_payload(),
        max_read_request: e.max_read_request(),
        flr_capable: e.flr_capable(),
        link_capable: e.has_link().then(|| link(e.link_capable())),
        link_status: e.has_link().then(|| link(e.link_status())),
        supported_speeds: e
            .supported_speeds()
            .into_iter()
            .map(express::speed_label)
            .collect(),
        // LnkCap bits 11:10 (ASPM support), LnkCtl bits 1:0 (ASPM control).
        aspm_support: ((e.lnkcap >> 10) & 3) as u8,
        aspm_control: (e.lnkctl & 3) as u8,
    }
}
