"""tutti.set_counters on 3 ranks: 4 world allreduces of 1024 float32, then 3 allreduces of 256
float32 in the set {0, 1}. Prints "world KEY VALUE...", "set KEY VALUE..." (members of the set),
"error WHAT Class message" and "set counters ok"."""
import numpy as np

import tutti

tutti.init()
pair = tutti.add_process_set([0, 1])
for _ in range(4):
    tutti.allreduce(np.ones(1024, np.float32))
if tutti.rank() in (0, 1):
    for _ in range(3):
        tutti.allreduce(np.ones(256, np.float32), process_set=pair)
world = tutti.set_counters()
print("world", " ".join(f"{k} {v}" for k, v in sorted(world.items())), flush=True)
if tutti.rank() in (0, 1):
    mine = tutti.set_counters(pair)
    print("set", " ".join(f"{k} {v}" for k, v in sorted(mine.items())), flush=True)
else:
    try:
        tutti.set_counters(pair)
    except tutti.TuttiError as e:
        print("error not-a-member", type(e).__name__, e, flush=True)
try:
    tutti.set_counters(99)
except tutti.TuttiError as e:
    print("error unknown", type(e).__name__, e, flush=True)
tutti.shutdown()
print("set counters ok", flush=True)
