"""The table of bench/compression.sh: per compressor, bytes on the wire per step and step time
against the uncompressed run, and the losses and held-out accuracy after the same steps.
  python3 bench/compression_report.py RAW.jsonl LINK"""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
base = next(r for r in rows if r["compressor"] == "none")
print(f"Link: {sys.argv[2]}; {base['ranks']} ranks, one per host; "
      f"{base['gradient_bytes'] / 1e6:.1f} MB of float32 gradients per step; {base['steps']} steps.\n")
print("| compressor | bytes sent per step (MB) | vs none | median step (ms) | vs none | "
      "train loss first → last | held-out loss | held-out accuracy |")
print("|---|---:|---:|---:|---:|---|---:|---:|")
for r in rows:
    print(f"| {r['compressor']} | {r['bytes_sent_per_step'] / 1e6:.2f} | "
          f"{r['bytes_sent_per_step'] / base['bytes_sent_per_step']:.2f}x | "
          f"{r['median_step_ms']:.1f} | {r['median_step_ms'] / base['median_step_ms']:.2f}x | "
          f"{r['first_loss']:.3f} → {r['last_loss']:.3f} | {r['test_loss']:.3f} | "
          f"{r['test_accuracy']:.3f} |")
