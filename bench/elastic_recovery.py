"""Time to recover from a lost rank in an elastic job (docs/elastic.md, "Recovery").

    tuttirun -np 4 --min-np 2 --no-prefix python3 bench/elastic_recovery.py [ROUNDS] [MODEL_MB]

Each round, every rank trains a small model (MODEL_MB of float32 parameters, averaged with
allreduce each step) under tutti.torch.elastic.run; then the last rank kills itself with
SIGKILL. The survivors record, against the kill's wall-clock time (the victim writes it to a
file just before the kill; all ranks share this machine's clock):
  detect   the failure surfaced in the script (HorovodInternalError)
  reform   the runtime was in the next membership epoch (tutti.await_membership_epoch)
  first    the first allreduce of the new epoch completed
  synced   restore() + sync() done: the model broadcast within the set
  step     the first training step after sync() completed
Rank 0 prints one line per round and the medians. Only 4 ranks to start with: each round
loses one, so ROUNDS is at most 2 with --min-np 2.
"""
import os
import signal
import statistics
import sys
import tempfile
import time

import torch

import tutti.torch as hvd


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    model_mb = float(sys.argv[2]) if len(sys.argv) > 2 else 4
    hvd.init()
    start_size = hvd.size()
    rounds = min(rounds, start_size - 1)
    shared = os.environ.get("TUTTI_JOB", "bench")
    stamp = os.path.join(tempfile.gettempdir(), f"tutti-elastic-bench-{shared}")
    width = int(model_mb * (1 << 20) / 4)
    model = torch.nn.Linear(width, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = hvd.elastic.TorchState(model, optimizer, step=0, round=0)
    marks = {}

    def step_once():
        model.weight.grad = torch.ones_like(model.weight)
        hvd.allreduce_(model.weight.grad, name="grad")
        optimizer.step()

    def after_reset():
        marks["reform"] = time.time()
        hvd.allreduce(torch.zeros(1), name="first")
        marks["first"] = time.time()

    state.register_reset_callbacks([after_reset])
    results = []

    @hvd.elastic.run
    def train(state):
        if "first" in marks:
            marks["synced"] = time.time()
            step_once()
            marks["step"] = time.time()
            results.append(dict(marks))
            marks.clear()
        while state.round < rounds:
            for _ in range(10):
                step_once()
                state.step += 1
            state.round += 1
            state.commit()
            if hvd.rank() == hvd.size() - 1:  # the last rank goes
                with open(stamp + ".tmp", "w") as f:
                    f.write(repr(time.time()))
                os.replace(stamp + ".tmp", stamp)
                os.kill(os.getpid(), signal.SIGKILL)
            # The others train until the loss surfaces.
            try:
                while True:
                    step_once()
            except hvd.HorovodInternalError:
                marks["detect"] = time.time()
                with open(stamp) as f:
                    marks["kill"] = float(f.read())
                raise

    train(state)
    if hvd.rank() == 0:
        names = ["detect", "reform", "first", "synced", "step"]
        print(f"elastic recovery, {start_size} ranks, model {model_mb:g} MiB, ms after kill -9:")
        print("round  " + "  ".join(f"{n:>7}" for n in names))
        for i, r in enumerate(results):
            print(f"{i + 1:>5}  " + "  ".join(f"{(r[n] - r['kill']) * 1000:7.1f}" for n in names))
        if results:
            print("median " + "  ".join(
                f"{statistics.median((r[n] - r['kill']) * 1000 for r in results):7.1f}"
                for n in names))
    hvd.shutdown()


if __name__ == "__main__":
    main()
