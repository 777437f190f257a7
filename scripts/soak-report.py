#!/usr/bin/env python3
"""Turns the soak's CSV (tests/vm/guest/scenarios/soak.sh) into an SVG plot and a verdict.

    scripts/soak-report.py SOAK.CSV OUT.SVG [--md SECTION.md] [--title TEXT]

The CSV's columns: t_s, rss_kib, fds, threads, leased_blocks, free_blocks, sessions,
the loops' cycle counts (inspect, dma, dma_killed, take) and errors. The last row is
taken after every client has ended (the end state); the others while they run.

Verdict (printed as one `VERDICT PASS|FAIL ...` line; exit status 0 or 1): over the
second half of the samples taken under load, a least-squares line through the floor of
each of rigd's RSS, open fds, threads and leased blocks (the least value in each minute
of samples); the growth it predicts across that half must stay under the bound below.
And no client error, and at the end state no session left.

Why the floor: a sample counts what is in flight at its instant (bochs-display held
adds its VFIO fds, a live session its socket and memfds, a lease its block), so the
raw values jump between idle and busy levels at random, and a line through them
tilts with where the busy samples fell (the first clean hour: fds 25 or 37 by the
instant, a raw fit of +2.6 fds across the half, though the idle level stayed at 25
from start to end). A leak is what stays behind when the work ends: it raises the
floor. The raw fit is printed beside it, not judged. Stdlib only (no plotting library on the machines this runs on): the SVG
is written by hand.
"""

import argparse
import csv
import sys

# Growth a line fit may show across the second half, per metric: (column, bound, unit).
BOUNDS = [
    ("rss_kib", 1024.0, "KiB"),
    ("fds", 1.0, "fds"),
    ("threads", 1.0, "threads"),
    ("leased_blocks", 1.0, "blocks"),
]


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0, my
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def read(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("t_s", "").strip()]
    out = []
    for r in rows:
        try:
            out.append({k: float(v) for k, v in r.items()})
        except (TypeError, ValueError):
            continue  # a row cut short (a run killed mid-write)
    return out


# The floor's window: the least value of the samples in each this many seconds.
FLOOR_S = 60.0


def floor(rows, col):
    """(mid time, least value) of each FLOOR_S window of rows (rows sorted by time)."""
    out, win = [], []
    for r in rows:
        if win and r["t_s"] - win[0]["t_s"] >= FLOOR_S:
            out.append(((win[0]["t_s"] + win[-1]["t_s"]) / 2, min(w[col] for w in win)))
            win = []
        win.append(r)
    if win:
        out.append(((win[0]["t_s"] + win[-1]["t_s"]) / 2, min(w[col] for w in win)))
    return out


def verdict(rows):
    load, end = rows[:-1], rows[-1]
    half = load[len(load) // 2 :]
    xs = [r["t_s"] for r in half]
    span = xs[-1] - xs[0] if len(xs) > 1 else 0.0
    lines, ok, fits = [], True, {}
    for col, bound, unit in BOUNDS:
        pts = floor(half, col)
        slope, icpt = fit([t for t, _ in pts], [v for _, v in pts])
        fits[col] = (slope, icpt, xs[0], xs[-1])
        growth = slope * span
        raw, _ = fit(xs, [r[col] for r in half])
        good = growth < bound
        ok &= good
        lines.append(
            f"{col}: floor {growth:+.2f} {unit} across the second half "
            f"({slope * 3600:+.2f}/h; bound < {bound:g}) {'ok' if good else 'GROWS'}; "
            f"raw samples {raw * span:+.2f}"
        )
    errors = int(end["errors"])
    if errors:
        ok = False
    lines.append(f"client errors: {errors}")
    if end["sessions"] != 0:
        ok = False
    lines.append(f"sessions at the end: {int(end['sessions'])}")
    return ok, lines, fits, span


def svg(rows, fits, title, path):
    w, ph, pad_l, pad_r, top = 900, 170, 70, 20, 40
    panels = [
        ("rss_kib", "rigd RSS (KiB)"),
        ("fds", "rigd open fds"),
        ("threads", "rigd threads"),
        ("leased_blocks", "leased blocks / sessions"),
    ]
    h = top + len(panels) * (ph + 40) + 20
    t0, t1 = rows[0]["t_s"], max(rows[-1]["t_s"], rows[0]["t_s"] + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">{esc(title)}</text>',
    ]
    for i, (col, label) in enumerate(panels):
        y0 = top + i * (ph + 40)
        series = [(col, "#1f5fa8")]
        if col == "leased_blocks":
            series.append(("sessions", "#c0392b"))
        vals = [r[c] for r in rows for c, _ in series]
        lo, hi = min(vals), max(vals)
        if hi - lo < 1e-9:
            lo, hi = lo - 1, hi + 1
        margin = (hi - lo) * 0.1
        lo, hi = lo - margin, hi + margin

        def px(t):
            return pad_l + (t - t0) / (t1 - t0) * (w - pad_l - pad_r)

        def py(v, lo=lo, hi=hi, y0=y0):
            return y0 + ph - (v - lo) / (hi - lo) * ph

        out.append(
            f'<rect x="{pad_l}" y="{y0}" width="{w - pad_l - pad_r}" height="{ph}" '
            f'fill="none" stroke="#888"/>'
        )
        out.append(f'<text x="{pad_l}" y="{y0 - 6}">{esc(label)}</text>')
        for frac in (0, 0.5, 1):
            v = lo + (hi - lo) * frac
            out.append(
                f'<text x="{pad_l - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>'
            )
        for frac in (0, 0.25, 0.5, 0.75, 1):
            t = t0 + (t1 - t0) * frac
            out.append(
                f'<text x="{px(t):.1f}" y="{y0 + ph + 14}" text-anchor="middle">'
                f"{t / 60:.0f} min</text>"
            )
        for c, colour in series:
            pts = " ".join(f"{px(r['t_s']):.1f},{py(r[c]):.1f}" for r in rows)
            out.append(
                f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.2"/>'
            )
        if col in fits:
            slope, icpt, xa, xb = fits[col]
            out.append(
                f'<line x1="{px(xa):.1f}" y1="{py(slope * xa + icpt):.1f}" '
                f'x2="{px(xb):.1f}" y2="{py(slope * xb + icpt):.1f}" '
                f'stroke="#e67e22" stroke-width="2" stroke-dasharray="6,3"/>'
            )
    out.append(
        f'<text x="{pad_l}" y="{h - 6}" fill="#555">dashed: least-squares fit of the '
        f"per-minute floor over the second half under load; red: DMA sessions</text>"
    )
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--md")
    ap.add_argument("--title", default="rigd under the soak (tests/vm/guest/scenarios/soak.sh)")
    a = ap.parse_args()
    rows = read(a.csv)
    if len(rows) < 5:
        print(f"VERDICT FAIL: only {len(rows)} samples in {a.csv}")
        return 1
    ok, lines, fits, span = verdict(rows)
    svg(rows, fits, a.title, a.svg)
    first, last_load, end = rows[0], rows[-2], rows[-1]
    cycles = ", ".join(
        f"{c} {int(end[c]):,}" for c in ("inspect", "dma", "dma_killed", "take")
    )
    summary = [
        f"samples: {len(rows)} over {end['t_s']:.0f} s; second half {span:.0f} s",
        f"cycles: {cycles}",
        f"RSS {first['rss_kib']:.0f} -> {last_load['rss_kib']:.0f} (under load) -> "
        f"{end['rss_kib']:.0f} KiB (end); fds {first['fds']:.0f} -> {last_load['fds']:.0f} -> "
        f"{end['fds']:.0f}; threads {first['threads']:.0f} -> {last_load['threads']:.0f} -> "
        f"{end['threads']:.0f}",
    ] + lines
    for s in summary:
        print(s)
    print(f"VERDICT {'PASS' if ok else 'FAIL'}")
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(f"- {s}" for s in summary))
            f.write(f"\n- verdict: **{'PASS' if ok else 'FAIL'}**\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
