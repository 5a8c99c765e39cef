"""Time to add a rank to a running elastic job (docs/elastic.md, "Adding ranks").

    tuttirun -np 2 --min-np 2 --no-prefix python3 bench/elastic_growth.py [ROUNDS] [MODEL_MB]

The ranks train a small model (MODEL_MB of float32 parameters, averaged with allreduce each step,
committed after each step) under tutti.torch.elastic.run. Each round, rank 0 starts one more
process of this script as a rank to add (TUTTI_RANK at or above TUTTI_SIZE, what tuttirun's host
discovery does), which records against the wall-clock time just before its hvd.init():
  admitted  hvd.init() returned: the ranks reached a commit and tuttid admitted it
  synced    its first state.sync() received the model and optimizer from rank 0
  step      its first training step with the others completed
Python's start and `import torch` come before the clock starts: they are the process's, not
tutti's. Each joiner prints "JOINER <admitted> <synced> <step>" (ms); the joiners stay, so the
world grows by one each round.
"""
import os
import statistics
import subprocess
import sys
import time

import torch

import tutti.torch as hvd


def train(model_mb, rounds, joiner):
    t0 = time.time()
    hvd.init()
    marks = {"admitted": time.time()} if joiner else {}
    width = int(model_mb * (1 << 20) / 4)
    model = torch.nn.Linear(width, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = hvd.elastic.TorchState(model, optimizer, step=0, round=0, done=False)
    started = []

    def step_once():
        model.weight.grad = torch.ones_like(model.weight)
        hvd.allreduce_(model.weight.grad, name="grad")
        optimizer.step()

    @hvd.elastic.run
    def loop(state):
        if joiner and "synced" not in marks:
            marks["synced"] = time.time()
        while not state.done:
            step_once()
            if joiner and "step" not in marks:
                marks["step"] = time.time()
                print("JOINER", *(f"{(marks[k] - t0) * 1000:.1f}" for k in
                                  ("admitted", "synced", "step")), flush=True)
            state.step += 1
            # Rank 0 starts a joiner every 50 steps; the round ends once the world has it.
            if hvd.rank() == 0 and state.step % 50 == 0 and len(started) == state.round:
                if state.round < rounds:
                    env = dict(os.environ, TUTTI_RANK=str(100 + state.round))
                    started.append(subprocess.Popen(
                        [sys.executable, __file__, "--joiner", str(model_mb), str(rounds)],
                        env=env))
            if hvd.size() == 2 + state.round + 1:
                state.round += 1
            state.done = state.round >= rounds and state.step % 50 == 49
            state.commit()

    loop(state)
    for p in started:
        p.wait(timeout=120)
    hvd.shutdown()


def main():
    if sys.argv[1:2] == ["--joiner"]:
        train(float(sys.argv[2]), int(sys.argv[3]), joiner=True)
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    model_mb = float(sys.argv[2]) if len(sys.argv) > 2 else 4
    train(model_mb, rounds, joiner=False)


if __name__ == "__main__":
    main()
