//! `rigctl topo`: the peer topology as `nvidia-smi topo -m` draws it (X, NV#, PIX,
//! PXB, PHB, NODE, SYS), then the P2P capabilities the RM reports per pair (like
//! `nvidia-smi topo -p2p rwnap`), each GPU's NVLink links and the link budget's
//! shared hops; or `--json`: the `Topology` (docs/rigctl-json.md).

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    io::{self, Write},
};

use rig_client::topo::{NvlinkRemoteKind, P2p, P2pCap, PeerPair, Topology};

pub fn print(out: &mut impl Write, t: &Topology, json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, t)?;
        return writeln!(out);
    }
    out.write_all(render(t).as_bytes())
}

/// The text report.
pub fn render(t: &Topology) -> String {
    let mut s = String::new();
    if t.gpus.is_empty() {
        s.push_str("No GPUs.\n");
    } else {
        matrix(&mut s, t);
        p2p_matrix(&mut s, t);
        nvlinks(&mut s, t);
        shared(&mut s, t);
    }
    for p in &t.problems {
        let _ = writeln!(s, "problem: {p}");
    }
    s
}

fn name(i: usize) -> String {
    format!("GPU{i}")
}

fn row(s: &mut String, cells: &[String]) {
    let line: Vec<String> = cells.iter().map(|c| format!("{c:<7}")).collect();
    let _ = writeln!(s, "{}", line.join(" ").trim_end());
}

fn pair(t: &Topology, i: usize, j: usize) -> Option<&PeerPair> {
    t.pair(&t.gpus[i].bdf, &t.gpus[j].bdf)
}

fn matrix(s: &mut String, t: &Topology) {
    let n = t.gpus.len();
    let mut head = vec![String::new()];
    head.extend((0..n).map(name));
    head.push("NUMA".into());
    head.push("CPU Affinity".into());
    row(s, &head);
    for (i, g) in t.gpus.iter().enumerate() {
        let mut cells = vec![name(i)];
        cells.extend((0..n).map(|j| pair(t, i, j).map_or_else(|| "?".into(), PeerPair::cell)));
        cells.push(g.numa_node.map_or_else(|| "N/A".into(), |n| n.to_string()));
        cells.push(g.local_cpulist.clone().unwrap_or_else(|| "N/A".into()));
        row(s, &cells);
    }
    s.push('\n');
    for (i, g) in t.gpus.iter().enumerate() {
        let _ = writeln!(s, "{} = {}", name(i), g.bdf);
    }
    s.push_str(
        "\nLegend: X = itself; NV# = # NVLink links (the RM reports NVLink P2P); \
         PIX = at most one PCIe switch; PXB = several PCIe bridges; PHB = a PCIe host \
         bridge; NODE = host bridges of one NUMA node; SYS = across NUMA nodes.\n",
    );
}

/// "rwnap" with "-" for what the pair lacks; on the diagonal loopback's "l" instead of
/// NVLink's "n" when it has loopback.
fn caps(p: &P2p, itself: bool) -> String {
    let l = |on: bool, c: char| if on { c } else { '-' };
    let n = if itself && p.loopback {
        'l'
    } else {
        l(p.nvlink, 'n')
    };
    [
        l(p.read, 'r'),
        l(p.write, 'w'),
        n,
        l(p.atomics, 'a'),
        l(p.prop, 'p'),
    ]
    .iter()
    .collect()
}

fn p2p_matrix(s: &mut String, t: &Topology) {
    let n = t.gpus.len();
    let any = t
        .pairs
        .iter()
        .any(|p| p.p2p.is_some() || p.p2p_problem.is_some());
    if !any {
        return;
    }
    s.push_str(
        "\nP2P as the RM reports it (r read, w write, n NVLink, a atomics, p prop; l loopback):\n",
    );
    let mut head = vec![String::new()];
    head.extend((0..n).map(name));
    row(s, &head);
    let mut why = Vec::new();
    for i in 0..n {
        let mut cells = vec![name(i)];
        for j in 0..n {
            let cell = match pair(t, i, j) {
                Some(PeerPair { p2p: Some(p), .. }) => caps(p, i == j),
                Some(PeerPair {
                    p2p_problem: Some(e),
                    ..
                }) => {
                    why.push(format!("{} → {}: {e}", name(i), name(j)));
                    "?".into()
                }
                _ => "?".into(),
            };
            cells.push(cell);
        }
        row(s, &cells);
    }
    // The statuses that are not OK, for the caps nvidia-smi -p2p shows.
    let mut refused: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in 0..n {
        for j in 0..n {
            let Some(p) = pair(t, i, j).and_then(|p| p.p2p.as_ref()) else {
                continue;
            };
            let not_ok: Vec<String> = p
                .status
                .iter()
                .filter(|c| {
                    c.status != rig_client::topo::P2pStatus::Ok
                        && matches!(
                            c.cap,
                            P2pCap::Read | P2pCap::Write | P2pCap::Nvlink | P2pCap::Atomics
                        )
                })
                .map(|c| format!("{:?} {}", c.cap, c.status.word()).to_lowercase())
                .collect();
            if !not_ok.is_empty() {
                refused.entry(not_ok.join(", ")).or_default().push(format!(
                    "{}→{}",
                    name(i),
                    name(j)
                ));
            }
        }
    }
    for (statuses, pairs) in refused {
        let _ = writeln!(s, "  {statuses}: {}", pairs.join(" "));
    }
    for w in why {
        let _ = writeln!(s, "  {w}");
    }
}

fn nvlinks(s: &mut String, t: &Topology) {
    s.push_str("\nNVLink:\n");
    for (i, g) in t.gpus.iter().enumerate() {
        let line = match (&g.nvlink, &g.nvlink_problem) {
            (Some(links), _) if links.is_empty() => "no links enabled".to_owned(),
            (Some(links), _) => {
                let active: Vec<_> = links.iter().filter(|l| l.is_active()).collect();
                // Far ends, counted.
                let mut ends: BTreeMap<String, usize> = BTreeMap::new();
                for l in &active {
                    let Some(r) = &l.remote else { continue };
                    let kind = match r.kind {
                        NvlinkRemoteKind::Gpu => "GPU",
                        NvlinkRemoteKind::Switch => "NVSwitch",
                        NvlinkRemoteKind::Npu => "NPU",
                        NvlinkRemoteKind::Tegra => "Tegra",
                        NvlinkRemoteKind::Ebridge => "bridge",
                        NvlinkRemoteKind::None | NvlinkRemoteKind::Other => "device",
                    };
                    let at = r.bdf.as_deref().unwrap_or("?");
                    *ends.entry(format!("{kind} {at}")).or_default() += 1;
                }
                let version = active
                    .first()
                    .and_then(|l| l.version.clone())
                    .map_or_else(String::new, |v| format!(" NVLink {v}"));
                let rate = active.first().map_or_else(String::new, |l| {
                    format!(
                        ", {:.3} GB/s each",
                        f64::from(l.data_rate_kibps) * 1024.0 / 1e9
                    )
                });
                let to: Vec<String> = ends.iter().map(|(e, n)| format!("{n} to {e}")).collect();
                format!(
                    "{} of {} enabled links active{version}{rate}{}{}",
                    active.len(),
                    links.len(),
                    if to.is_empty() { "" } else { ": " },
                    to.join(", ")
                )
            }
            (None, Some(e)) => format!("not read: {e}"),
            (None, None) => "not read".to_owned(),
        };
        let _ = writeln!(s, "  {}: {line}", name(i));
    }
}

fn shared(s: &mut String, t: &Topology) {
    if t.gpus.iter().all(|g| g.shared.is_empty()) {
        return;
    }
    s.push_str("\nShared PCIe hops (link budget):\n");
    for (i, g) in t.gpus.iter().enumerate() {
        if g.shared.is_empty() {
            continue;
        }
        let index = |b: &str| {
            t.gpus
                .iter()
                .position(|x| x.bdf == b)
                .map_or_else(|| b.to_owned(), name)
        };
        let hops: Vec<String> = g
            .shared
            .iter()
            .map(|h| {
                let with: Vec<String> = h.with.iter().map(|b| index(b)).collect();
                let each = h
                    .gbytes_per_s_each
                    .map_or_else(String::new, |g| format!(", {g:.1} GB/s each"));
                format!("{} with {}{each}", h.bdf, with.join(" "))
            })
            .collect();
        let contended = g
            .contended_gbytes_per_s
            .map_or_else(String::new, |c| format!("; all copying: {c:.1} GB/s"));
        let _ = writeln!(s, "  {}: {}{contended}", name(i), hops.join("; "));
    }
}
