#!/usr/bin/env python3
"""Table and plot of a bench/compare.sh run: medians over repetitions per (peer, ranks, size),
and the ratio of tutti's figure to each peer's (busbw: higher is better, so > 1 means tutti is
faster; step time: lower is better, so the ratio is peer/tutti, > 1 again meaning tutti is faster).

    compare_report.py raw.csv --tutti tutti-shm --tutti tutti-tcp [--plot busbw.png]
                      [--cost tutti-tcp-encrypt:tutti-tcp ...]
Lines of raw.csv: rep,RESULT,peer,np,bytes,iters,avg_us,algbw,busbw and
                  rep,STEP,peer,np,ntensors,tensor_bytes,steps,median_us,mean_us,min_us,fused_us
"""
import argparse
import collections
import csv
import statistics


def human(n):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def Targets(med, med_t, step, nps):
    """The targets of the fast-data-plane issue, each with its measured ratio."""
    rows = []

    def ratio(mine, theirs, want, what):
        if mine is None or theirs is None:
            return
        r = mine / theirs
        rows.append((what, f"{r:.2f}", f">= {want}", "met" if r >= want else "missed"))

    for np_ in nps:
        for size in (1 << 20, 16 << 20, 64 << 20):
            ratio(med.get(("tutti-shm", np_, size)), med.get(("mpi-sm", np_, size)), 0.95,
                  f"shm busbw / mpi-sm, {np_} ranks, {human(size)}")
    for size in (64 << 10, 1 << 20, 16 << 20, 64 << 20):
        ratio(med.get(("tutti-tcp", 2, size)), med.get(("mpi-tcp", 2, size)), 0.95,
              f"tcp busbw / mpi-tcp, 2 ranks, {human(size)}")
        ratio(med.get(("tutti-tcp", 2, size)), med.get(("gloo-new", 2, size)), 2.0,
              f"tcp busbw / gloo-new, 2 ranks, {human(size)}")
    for np_ in nps:
        for t in ("tutti-shm", "tutti-tcp"):
            if (t, np_) not in step:
                continue
            if ("mpi-sm", np_) in step:
                ratio(step[("mpi-sm", np_)], step[(t, np_)], 1.0,
                      f"200 x 4 KiB step, mpi-sm / {t}, {np_} ranks")
            if ("torch-gloo", np_) in step:
                ratio(step[("torch-gloo", np_)], step[(t, np_)], 50.0,
                      f"200 x 4 KiB step, torch-gloo / {t}, {np_} ranks")
    for t in ("tutti-shm", "tutti-tcp"):
        if (t, 2, 4096) in med_t:
            us = med_t[(t, 2, 4096)]
            rows.append((f"one 4 KiB allreduce with negotiation, 2 ranks, {t}", f"{us:.0f} us",
                         "< 100 us", "met" if us < 100 else "missed"))
    if rows:
        print("\nTargets (docs/transports.md):\n")
        print("| target | measured | wanted | |")
        print("|---|---:|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")


def Costs(med, costs, nps, sizes):
    """busbw of one tutti setting over another's, per size, and what it costs (1 - ratio)."""
    for spec in costs:
        a, b = spec.split(":")
        if not any(k[0] == a for k in med) or not any(k[0] == b for k in med):
            continue
        print(f"\n{a} against {b}: busbw ratio, and the cost (1 - ratio):\n")
        print("| ranks | size | " + a + " GB/s | " + b + " GB/s | ratio | cost |")
        print("|---|---|---:|---:|---:|---:|")
        for np_ in nps:
            for size in sizes:
                x, y = med.get((a, np_, size)), med.get((b, np_, size))
                if x and y:
                    print(f"| {np_} | {human(size)} | {x:.3f} | {y:.3f} | {x / y:.2f} | "
                          f"{(1 - x / y) * 100:.0f}% |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("--tutti", action="append", help="tutti's labels (repeat)")
    parser.add_argument("--plot", help="write a PNG of busbw against size")
    parser.add_argument("--cost", action="append", default=[],
                        help="A:B: busbw of label A against label B per size (what A costs)")
    args = parser.parse_args()
    args.tutti = args.tutti or ["tutti-shm", "tutti-tcp"]
    busbw = collections.defaultdict(list)   # (peer, np, bytes) -> [busbw]
    times = collections.defaultdict(list)   # (peer, np, bytes) -> [avg_us]
    steps = collections.defaultdict(list)   # (peer, np) -> [median step us]
    with open(args.raw) as f:
        for row in csv.reader(f):
            if len(row) > 1 and row[1] == "RESULT":
                key = (row[2], int(row[3]), int(row[4]))
                times[key].append(float(row[6]))
                busbw[key].append(float(row[8]))
            elif len(row) > 1 and row[1] == "STEP":
                steps[(row[2], int(row[3]))].append(float(row[7]))
    peers = sorted({k[0] for k in busbw} | {k[0] for k in steps})
    others = [p for p in peers if p not in args.tutti]
    # Rows of tutti against itself (a setting's cost) are the --cost table's, not these.
    pairs = [(t, p) for t in args.tutti if t in peers for p in others]
    nps = sorted({k[1] for k in busbw} | {k[1] for k in steps})
    sizes = sorted({k[2] for k in busbw})
    med = {k: statistics.median(v) for k, v in busbw.items()}
    med_t = {k: statistics.median(v) for k, v in times.items()}
    reps = max((len(v) for v in busbw.values()), default=0)

    print(f"Medians of {reps} interleaved repetitions. busbw in GB/s (nccl-tests definition); "
          "ratio = tutti / peer (above 1: tutti faster).\n")
    print("| ranks | size | " + " | ".join(peers) + " | " +
          " | ".join(f"{t}/{p}" for t, p in pairs) + " |")
    print("|---|---|" + "---:|" * (len(peers) + len(pairs)))
    for np_ in nps:
        for size in sizes:
            cells = [f"{med[(p, np_, size)]:.3f}" if (p, np_, size) in med else "-" for p in peers]
            ratios = [f"{med[(t, np_, size)] / med[(p, np_, size)]:.2f}"
                      if med.get((t, np_, size)) and med.get((p, np_, size)) else "-"
                      for t, p in pairs]
            print(f"| {np_} | {human(size)} | " + " | ".join(cells + ratios) + " |")
    small = [s for s in sizes if s <= 4096]
    if small:
        print(f"\nOne {human(small[0])} allreduce, median time per call (us):\n")
        print("| ranks | " + " | ".join(peers) + " |")
        print("|---|" + "---:|" * len(peers))
        for np_ in nps:
            print(f"| {np_} | " + " | ".join(f"{med_t[(p, np_, small[0])]:.1f}"
                                            if (p, np_, small[0]) in med_t else "-"
                                            for p in peers) + " |")
    step = {k: statistics.median(v) for k, v in steps.items()}
    if steps:
        print("\n200 x 4 KiB step (200 named async allreduces), median step (ms); "
              "ratio = peer / tutti (above 1: tutti faster):\n")
        print("| ranks | " + " | ".join(peers) + " | " +
              " | ".join(f"{p}/{t}" for t, p in pairs) + " |")
        print("|---|" + "---:|" * (len(peers) + len(pairs)))
        for np_ in nps:
            print(f"| {np_} | " + " | ".join(f"{step[(p, np_)] / 1e3:.2f}" if (p, np_) in step
                                            else "-" for p in peers)
                  + " | " + " | ".join(f"{step[(p, np_)] / step[(t, np_)]:.2f}"
                                       if (p, np_) in step and (t, np_) in step else "-"
                                       for t, p in pairs) + " |")
    Targets(med, med_t, step, nps)
    Costs(med, args.cost, nps, sizes)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(nps), figsize=(6 * len(nps), 4.5), squeeze=False)
        for ax, np_ in zip(axes[0], nps):
            for p in peers:
                xs = [s for s in sizes if (p, np_, s) in med]
                ax.plot(xs, [med[(p, np_, s)] for s in xs], marker="o", label=p,
                        linewidth=2.5 if p in args.tutti else 1.2)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("bytes")
            ax.set_ylabel("busbw (GB/s)")
            ax.set_title(f"float32 sum allreduce, {np_} ranks")
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)


if __name__ == "__main__":
    main()
