#!/usr/bin/env python3
"""Table and plot of bench/multihost.sh's raw lines (no third-party modules: the plot is SVG
written by hand, so that a fresh machine needs nothing beyond python3).

  multihost_report.py RAW_CSV OUT_DIR  ->  OUT_DIR/multihost-results.md, OUT_DIR/multihost.svg

RAW_CSV lines: link,hosts,cpu (ours/machine percent),RESULT,label,np,bytes,iters,avg_us,algbw,busbw."""
import csv
import math
import sys
from collections import defaultdict

LABELS = ["tutti-flat", "tutti-hier", "mpi-tcp"]
COLOURS = {"tutti-flat": "#888888", "tutti-hier": "#1f77b4", "mpi-tcp": "#d62728"}


def human(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def load(path):
    data = defaultdict(dict)  # (link, hosts) -> {(label, bytes): (busbw, cpu)}
    for row in csv.reader(open(path)):
        if len(row) < 11 or row[3] != "RESULT":
            continue
        link, hosts, cpu, label, size, busbw = row[0], int(row[1]), row[2], row[4], int(row[6]), float(row[10])
        data[(link, hosts)][(label, size)] = (busbw, cpu)
    return data


def table(data):
    out = ["| link | hosts x ranks | size | flat ring busbw GB/s | hierarchical | Open MPI TCP "
           "| hier / flat | hier / MPI | CPU % ours/machine (flat; hier; MPI) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for (link, hosts), cells in sorted(data.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        for size in sorted({s for (_, s) in cells}):
            got = {label: cells.get((label, size)) for label in LABELS}
            bw = {k: (v[0] if v else float("nan")) for k, v in got.items()}
            cpu = "; ".join(v[1] if v else "-" for v in got.values())
            ratio = lambda a, b: f"{bw[a] / bw[b]:.2f}" if bw[b] > 0 and not math.isnan(bw[a]) else "-"
            out.append(f"| {link} | {hosts} x 2 | {human(size)} | {bw['tutti-flat']:.3f} | "
                       f"{bw['tutti-hier']:.3f} | {bw['mpi-tcp']:.3f} | {ratio('tutti-hier', 'tutti-flat')} | "
                       f"{ratio('tutti-hier', 'mpi-tcp')} | {cpu} |")
    return "\n".join(out) + "\n"


def svg(data):
    panels = sorted(data.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    w, h, cols = 360, 260, 2
    rows = (len(panels) + cols - 1) // cols
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w * cols}" height="{h * rows + 30}" '
             'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for i, ((link, hosts), cells) in enumerate(panels):
        ox, oy = (i % cols) * w, (i // cols) * h + 30
        sizes = sorted({s for (_, s) in cells})
        top = max(v[0] for v in cells.values()) * 1.15 or 1
        x0, y0, pw, ph = ox + 50, oy + 20, w - 70, h - 70
        parts.append(f'<text x="{ox + w / 2}" y="{oy + 12}" text-anchor="middle">{hosts} hosts x 2, {link}</text>')
        parts.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#000"/>')
        for k in range(5):
            v = top * k / 4
            y = y0 + ph - ph * k / 4
            parts.append(f'<text x="{x0 - 4}" y="{y + 4}" text-anchor="end">{v:.2f}</text>')
        xs = {s: x0 + (pw * (j + 0.5) / len(sizes)) for j, s in enumerate(sizes)}
        for s, x in xs.items():
            parts.append(f'<text x="{x}" y="{y0 + ph + 14}" text-anchor="middle">{human(s)}</text>')
        for label in LABELS:
            pts = [(xs[s], y0 + ph - ph * cells[(label, s)][0] / top) for s in sizes if (label, s) in cells]
            if pts:
                path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                parts.append(f'<polyline points="{path}" fill="none" stroke="{COLOURS[label]}" stroke-width="2"/>')
                parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{COLOURS[label]}"/>' for x, y in pts)
        parts.append(f'<text x="{ox + 12}" y="{y0 + ph / 2}" transform="rotate(-90 {ox + 12} {y0 + ph / 2})" '
                     'text-anchor="middle">busbw GB/s</text>')
    for j, label in enumerate(LABELS):
        parts.append(f'<rect x="{20 + j * 150}" y="8" width="12" height="12" fill="{COLOURS[label]}"/>'
                     f'<text x="{36 + j * 150}" y="18">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    raw, out = sys.argv[1], sys.argv[2]
    data = load(raw)
    with open(f"{out}/multihost-results.md", "w") as f:
        f.write("<!-- written by bench/multihost_report.py from bench/multihost.sh's output -->\n")
        f.write("busbw = bytes / time x 2(n-1)/n (GB = 1e9 bytes), slowest rank; float32 sum.\n\n")
        f.write(table(data))
    with open(f"{out}/multihost.svg", "w") as f:
        f.write(svg(data))
    sys.stdout.write(table(data))


if __name__ == "__main__":
    main()
