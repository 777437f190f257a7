//! `rigctl queues`: every hardware queue rigd lends, its owner and its state.

use std::io::{self, Write};

use comfy_table::{ContentArrangement, Table, presets};
use rig_client::queue::QueueInfo;

pub fn print(out: &mut impl Write, queues: &[QueueInfo], json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, queues)?;
        return writeln!(out);
    }
    if queues.is_empty() {
        return writeln!(out, "No lent queues.");
    }
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header([
            "Device",
            "Queue",
            "Owner",
            "Depth",
            "SQ tail",
            "CQ head",
            "Doorbell",
            "Interrupts",
            "State",
        ]);
    for q in queues {
        t.add_row([
            q.device.clone(),
            q.qid.to_string(),
            format!("uid {} pid {} session {}", q.uid, q.pid, q.session),
            format!("{} ({} entries)", q.depth, q.entries),
            q.sq_tail.to_string(),
            q.cq_head.to_string(),
            format!(
                "bar0:{:#x}{}",
                q.sq_doorbell,
                if q.page_isolated {
                    ""
                } else {
                    " (shared page)"
                }
            ),
            if q.interrupts { "MSI-X" } else { "polled" }.to_owned(),
            if q.stuck {
                "stuck: not deleted, memory kept".to_owned()
            } else {
                "live".to_owned()
            },
        ]);
    }
    writeln!(out, "{t}")
}
