"""tutti.init(transport=argv[1]) where it must fail: prints "refused <exception class> <message>"
(or "initialized" if it did not fail)."""
import sys

import tutti

try:
    tutti.init(transport=sys.argv[1])
except tutti.TuttiError as e:
    print("refused", type(e).__name__, e, flush=True)
else:
    print("initialized", flush=True)
    tutti.shutdown()
