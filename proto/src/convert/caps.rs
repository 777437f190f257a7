//! Capabilities, standard and extended, both ways: one arm per `CapDetail` variant in
//! each direction, field for field.

use rig_model as m;

use super::{Result, link, link_back, n8, n16};
use crate::v1 as pb;

type D = pb::capability::Detail;

pub(super) fn capability(c: &m::Capability) -> pb::Capability {
    pb::Capability {
        offset: c.offset.into(),
        id: c.id.into(),
        version: c.version.into(),
        name: c.name.clone(),
        detail: c.detail.as_ref().map(detail),
    }
}

pub(super) fn capability_back(c: pb::Capability) -> Result<m::Capability> {
    Ok(m::Capability {
        offset: n16("Capability.offset", c.offset)?,
        id: n16("Capability.id", c.id)?,
        version: n8("Capability.version", c.version)?,
        name: c.name,
        detail: c.detail.map(detail_back).transpose()?,
    })
}

fn detail(d: &m::CapDetail) -> D {
    use m::CapDetail as C;
    match d {
        C::PowerManagement {
            version,
            d1,
            d2,
            pme_support,
            aux_current_ma,
            power_state,
            no_soft_reset,
            pme_enabled,
            pme_status,
        } => D::PowerManagement(pb::PowerManagement {
            version: (*version).into(),
            d1: *d1,
            d2: *d2,
            pme_support: (*pme_support).into(),
            aux_current_ma: (*aux_current_ma).into(),
            power_state: (*power_state).into(),
            no_soft_reset: *no_soft_reset,
            pme_enabled: *pme_enabled,
            pme_status: *pme_status,
        }),
        C::Msi {
            enabled,
            vectors_capable,
            vectors_enabled,
            is_64bit,
            per_vector_masking,
            address,
            data,
        } => D::Msi(pb::Msi {
            enabled: *enabled,
            vectors_capable: *vectors_capable,
            vectors_enabled: *vectors_enabled,
            is_64bit: *is_64bit,
            per_vector_masking: *per_vector_masking,
            address: *address,
            data: (*data).into(),
        }),
        C::MsiX {
            enabled,
            function_masked,
            table_size,
            table_bar,
            table_offset,
            pba_bar,
            pba_offset,
        } => D::Msix(pb::MsiX {
            enabled: *enabled,
            function_masked: *function_masked,
            table_size: (*table_size).into(),
            table_bar: (*table_bar).into(),
            table_offset: *table_offset,
            pba_bar: (*pba_bar).into(),
            pba_offset: *pba_offset,
        }),
        C::Express(e) => D::Express(express(e)),
        C::VendorSpecific { length } => D::VendorSpecific(pb::VendorSpecific {
            length: (*length).into(),
        }),
        C::BridgeSubsystem {
            vendor_id,
            device_id,
        } => D::BridgeSubsystem(pb::BridgeSubsystem {
            vendor_id: (*vendor_id).into(),
            device_id: (*device_id).into(),
        }),
        C::Aer {
            uncorrectable_status,
            uncorrectable_mask,
            uncorrectable_severity,
            correctable_status,
            correctable_mask,
            capabilities_control,
            first_error_pointer,
        } => D::Aer(pb::Aer {
            uncorrectable_status: *uncorrectable_status,
            uncorrectable_mask: *uncorrectable_mask,
            uncorrectable_severity: *uncorrectable_severity,
            correctable_status: *correctable_status,
            correctable_mask: *correctable_mask,
            capabilities_control: *capabilities_control,
            first_error_pointer: (*first_error_pointer).into(),
        }),
        C::SerialNumber { serial, text } => D::SerialNumber(pb::SerialNumber {
            serial: *serial,
            text: text.clone(),
        }),
        C::PowerBudget {
            data_select,
            data,
            system_allocated,
        } => D::PowerBudget(pb::PowerBudget {
            data_select: (*data_select).into(),
            data: *data,
            system_allocated: *system_allocated,
        }),
        C::Vsec {
            vsec_id,
            vsec_rev,
            length,
        } => D::Vsec(pb::Vsec {
            vsec_id: (*vsec_id).into(),
            vsec_rev: (*vsec_rev).into(),
            length: (*length).into(),
        }),
        C::Acs {
            capability,
            control,
        } => D::Acs(pb::Acs {
            capability: (*capability).into(),
            control: (*control).into(),
        }),
        C::Ari {
            capability,
            control,
            next_function,
        } => D::Ari(pb::Ari {
            capability: (*capability).into(),
            control: (*control).into(),
            next_function: (*next_function).into(),
        }),
        C::SrIov(s) => D::Sriov(pb::SrIov {
            capability: s.capability,
            control: s.control.into(),
            status: s.status.into(),
            initial_vfs: s.initial_vfs.into(),
            total_vfs: s.total_vfs.into(),
            num_vfs: s.num_vfs.into(),
            first_vf_offset: s.first_vf_offset.into(),
            vf_stride: s.vf_stride.into(),
            vf_device_id: s.vf_device_id.into(),
            supported_page_sizes: s.supported_page_sizes,
            system_page_size: s.system_page_size,
            vf_bars: s.vf_bars.clone(),
        }),
        C::ResizableBar {
            virtual_function,
            entries,
        } => D::ResizableBar(pb::ResizableBar {
            virtual_function: *virtual_function,
            entries: entries
                .iter()
                .map(|e| pb::ResizableBarEntry {
                    bar: e.bar.into(),
                    supported_sizes: e.supported_sizes.clone(),
                    current_size: e.current_size,
                })
                .collect(),
        }),
        C::Ltr {
            max_snoop_ns,
            max_no_snoop_ns,
        } => D::Ltr(pb::Ltr {
            max_snoop_ns: *max_snoop_ns,
            max_no_snoop_ns: *max_no_snoop_ns,
        }),
        C::Dvsec {
            vendor_id,
            revision,
            length,
            dvsec_id,
        } => D::Dvsec(pb::Dvsec {
            vendor_id: (*vendor_id).into(),
            revision: (*revision).into(),
            length: (*length).into(),
            dvsec_id: (*dvsec_id).into(),
        }),
    }
}

fn detail_back(d: D) -> Result<m::CapDetail> {
    use m::CapDetail as C;
    Ok(match d {
        D::PowerManagement(p) => C::PowerManagement {
            version: n8("PowerManagement.version", p.version)?,
            d1: p.d1,
            d2: p.d2,
            pme_support: n8("PowerManagement.pme_support", p.pme_support)?,
            aux_current_ma: n16("PowerManagement.aux_current_ma", p.aux_current_ma)?,
            power_state: n8("PowerManagement.power_state", p.power_state)?,
            no_soft_reset: p.no_soft_reset,
            pme_enabled: p.pme_enabled,
            pme_status: p.pme_status,
        },
        D::Msi(x) => C::Msi {
            enabled: x.enabled,
            vectors_capable: x.vectors_capable,
            vectors_enabled: x.vectors_enabled,
            is_64bit: x.is_64bit,
            per_vector_masking: x.per_vector_masking,
            address: x.address,
            data: n16("Msi.data", x.data)?,
        },
        D::Msix(x) => C::MsiX {
            enabled: x.enabled,
            function_masked: x.function_masked,
            table_size: n16("MsiX.table_size", x.table_size)?,
            table_bar: n8("MsiX.table_bar", x.table_bar)?,
            table_offset: x.table_offset,
            pba_bar: n8("MsiX.pba_bar", x.pba_bar)?,
            pba_offset: x.pba_offset,
        },
        D::Express(e) => C::Express(Box::new(express_back(e)?)),
        D::VendorSpecific(v) => C::VendorSpecific {
            length: n8("VendorSpecific.length", v.length)?,
        },
        D::BridgeSubsystem(b) => C::BridgeSubsystem {
            vendor_id: n16("BridgeSubsystem.vendor_id", b.vendor_id)?,
            device_id: n16("BridgeSubsystem.device_id", b.device_id)?,
        },
        D::Aer(a) => C::Aer {
            uncorrectable_status: a.uncorrectable_status,
            uncorrectable_mask: a.uncorrectable_mask,
            uncorrectable_severity: a.uncorrectable_severity,
            correctable_status: a.correctable_status,
            correctable_mask: a.correctable_mask,
            capabilities_control: a.capabilities_control,
            first_error_pointer: n8("Aer.first_error_pointer", a.first_error_pointer)?,
        },
        D::SerialNumber(s) => C::SerialNumber {
            serial: s.serial,
            text: s.text,
        },
        D::PowerBudget(p) => C::PowerBudget {
            data_select: n8("PowerBudget.data_select", p.data_select)?,
            data: p.data,
            system_allocated: p.system_allocated,
        },
        D::Vsec(v) => C::Vsec {
            vsec_id: n16("Vsec.vsec_id", v.vsec_id)?,
            vsec_rev: n8("Vsec.vsec_rev", v.vsec_rev)?,
            length: n16("Vsec.length", v.length)?,
        },
        D::Acs(a) => C::Acs {
            capability: n16("Acs.capability", a.capability)?,
            control: n16("Acs.control", a.control)?,
        },
        D::Ari(a) => C::Ari {
            capability: n16("Ari.capability", a.capability)?,
            control: n16("Ari.control", a.control)?,
            next_function: n8("Ari.next_function", a.next_function)?,
        },
        D::Sriov(s) => C::SrIov(Box::new(m::SrIov {
            capability: s.capability,
            control: n16("SrIov.control", s.control)?,
            status: n16("SrIov.status", s.status)?,
            initial_vfs: n16("SrIov.initial_vfs", s.initial_vfs)?,
            total_vfs: n16("SrIov.total_vfs", s.total_vfs)?,
            num_vfs: n16("SrIov.num_vfs", s.num_vfs)?,
            first_vf_offset: n16("SrIov.first_vf_offset", s.first_vf_offset)?,
            vf_stride: n16("SrIov.vf_stride", s.vf_stride)?,
            vf_device_id: n16("SrIov.vf_device_id", s.vf_device_id)?,
            supported_page_sizes: s.supported_page_sizes,
            system_page_size: s.system_page_size,
            vf_bars: s.vf_bars,
        })),
        D::ResizableBar(r) => C::ResizableBar {
            virtual_function: r.virtual_function,
            entries: r
                .entries
                .into_iter()
                .map(|e| {
                    Ok(m::RebarEntry {
                        bar: n8("ResizableBarEntry.bar", e.bar)?,
                        supported_sizes: e.supported_sizes,
                        current_size: e.current_size,
                    })
                })
                .collect::<Result<_>>()?,
        },
        D::Ltr(l) => C::Ltr {
            max_snoop_ns: l.max_snoop_ns,
            max_no_snoop_ns: l.max_no_snoop_ns,
        },
        D::Dvsec(d) => C::Dvsec {
            vendor_id: n16("Dvsec.vendor_id", d.vendor_id)?,
            revision: n8("Dvsec.revision", d.revision)?,
            length: n16("Dvsec.length", d.length)?,
            dvsec_id: n16("Dvsec.dvsec_id", d.dvsec_id)?,
        },
    })
}

fn express(e: &m::Express) -> pb::Express {
    let v2 = e.v2.unwrap_or(m::ExpressV2 {
        devcap2: 0,
        devctl2: 0,
        lnkcap2: 0,
        lnkctl2: 0,
        lnksta2: 0,
    });
    pb::Express {
        version: e.version.into(),
        port_type: e.port_type.clone(),
        slot_implemented: e.slot_implemented,
        interrupt_message: e.interrupt_message.into(),
        devcap: e.devcap,
        devctl: e.devctl.into(),
        devsta: e.devsta.into(),
        lnkcap: e.lnkcap,
        lnkctl: e.lnkctl.into(),
        lnksta: e.lnksta.into(),
        devcap2: v2.devcap2,
        devctl2: v2.devctl2.into(),
        lnkcap2: v2.lnkcap2,
        lnkctl2: v2.lnkctl2.into(),
        lnksta2: v2.lnksta2.into(),
        sltcap: e.sltcap,
        sltctl: e.sltctl.into(),
        sltsta: e.sltsta.into(),
        max_payload_supported: e.max_payload_supported,
        max_payload: e.max_payload,
        max_read_request: e.max_read_request,
        flr_capable: e.flr_capable,
        link_capable: e.link_capable.as_ref().map(link),
        link_status: e.link_status.as_ref().map(link),
        supported_speeds: e.supported_speeds.clone(),
        aspm_support: e.aspm_support.into(),
        aspm_control: e.aspm_control.into(),
        has_v2_registers: e.v2.is_some(),
    }
}

fn express_back(e: pb::Express) -> Result<m::Express> {
    let v2 = if e.has_v2_registers {
        Some(m::ExpressV2 {
            devcap2: e.devcap2,
            devctl2: n16("Express.devctl2", e.devctl2)?,
            lnkcap2: e.lnkcap2,
            lnkctl2: n16("Express.lnkctl2", e.lnkctl2)?,
            lnksta2: n16("Express.lnksta2", e.lnksta2)?,
        })
    } else {
        None
    };
    Ok(m::Express {
        version: n8("Express.version", e.version)?,
        port_type: e.port_type,
        slot_implemented: e.slot_implemented,
        interrupt_message: n8("Express.interrupt_message", e.interrupt_message)?,
        devcap: e.devcap,
        devctl: n16("Express.devctl", e.devctl)?,
        devsta: n16("Express.devsta", e.devsta)?,
        lnkcap: e.lnkcap,
        lnkctl: n16("Express.lnkctl", e.lnkctl)?,
        lnksta: n16("Express.lnksta", e.lnksta)?,
        sltcap: e.sltcap,
        sltctl: n16("Express.sltctl", e.sltctl)?,
        sltsta: n16("Express.sltsta", e.sltsta)?,
        v2,
        max_payload_supported: e.max_payload_supported,
        max_payload: e.max_payload,
        max_read_request: e.max_read_request,
        flr_capable: e.flr_capable,
        link_capable: e.link_capable.map(link_back).transpose()?,
        link_status: e.link_status.map(link_back).transpose()?,
        supported_speeds: e.supported_speeds,
        aspm_support: n8("Express.aspm_support", e.aspm_support)?,
        aspm_control: n8("Express.aspm_control", e.aspm_control)?,
    })
}
