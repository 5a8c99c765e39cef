#!/usr/bin/env python3
"""Table and plot of a bench/compare.sh run: medians over repetitions per (peer, ranks, size),
and the ratio of tutti's figure to each peer's (busbw: higher is better, so > 1 means tutti is
faster; step time: lower is better, so the ratio is peer/tutti, > 1 again meaning tutti is faster).

    compare_report.py raw.csv --tutti tutti-tcp [--plot busbw.png]
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("raw")
    parser.add_argument("--tutti", default="tutti-tcp", help="tutti's label")
    parser.add_argument("--plot", help="write a PNG of busbw against size")
    args = parser.parse_args()
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
    others = [p for p in peers if p != args.tutti]
    nps = sorted({k[1] for k in busbw} | {k[1] for k in steps})
    sizes = sorted({k[2] for k in busbw})
    med = {k: statistics.median(v) for k, v in busbw.items()}
    med_t = {k: statistics.median(v) for k, v in times.items()}
    reps = max((len(v) for v in busbw.values()), default=0)

    print(f"Medians of {reps} interleaved repetitions. busbw in GB/s (nccl-tests definition); "
          f"ratio = {args.tutti} / peer (above 1: tutti faster).\n")
    print("| ranks | size | " + " | ".join(peers) + " | " +
          " | ".join(f"{args.tutti}/{p}" for p in others) + " |")
    print("|---|---|" + "---:|" * (len(peers) + len(others)))
    for np_ in nps:
        for size in sizes:
            cells = [f"{med[(p, np_, size)]:.3f}" if (p, np_, size) in med else "-" for p in peers]
            mine = med.get((args.tutti, np_, size))
            ratios = [f"{mine / med[(p, np_, size)]:.2f}" if mine and med.get((p, np_, size))
                      else "-" for p in others]
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
    if steps:
        print("\n200 x 4 KiB step (200 named async allreduces), median step (ms); "
              f"ratio = peer / {args.tutti} (above 1: tutti faster):\n")
        print("| ranks | " + " | ".join(peers) + " | " +
              " | ".join(f"{p}/{args.tutti}" for p in others) + " |")
        print("|---|" + "---:|" * (len(peers) + len(others)))
        for np_ in nps:
            s = {p: statistics.median(steps[(p, np_)]) for p in peers if (p, np_) in steps}
            mine = s.get(args.tutti)
            print(f"| {np_} | " + " | ".join(f"{s[p] / 1e3:.2f}" if p in s else "-" for p in peers)
                  + " | " + " | ".join(f"{s[p] / mine:.2f}" if mine and p in s else "-"
                                       for p in others) + " |")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(nps), figsize=(6 * len(nps), 4.5), squeeze=False)
        for ax, np_ in zip(axes[0], nps):
            for p in peers:
                xs = [s for s in sizes if (p, np_, s) in med]
                ax.plot(xs, [med[(p, np_, s)] for s in xs], marker="o", label=p,
                        linewidth=2.5 if p == args.tutti else 1.2)
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
