"""Ranks of elastic jobs (tests/python/test_elastic.py): tutti.torch.elastic under tuttirun
--min-np, with ranks that die (kill -9 or an exception), freeze, or train in separate sets.

    elastic.py SCENARIO [ARGS...]

Lines a rank prints for the test: "key value ..." (see each scenario)."""
import os
import signal
import subprocess
import sys
import time

import torch

import tutti
import tutti.torch as hvd


def say(*parts):
    # One write of the whole line: a rank and the rank it started share one pipe, and print()
    # writes its parts separately when unbuffered, so their lines could interleave.
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def die(how):
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError("this rank fails on purpose")


def targets(rank, step, width):
    # What rank `rank` pulls the model toward at `step`: the test replays the same sums.
    return torch.tensor([float(step * 10 + rank + i) for i in range(width)], dtype=torch.float64)


def tick_until_reformed(epoch):
    """World allreduces until one fails with the loss of a rank; then joins the next epoch."""
    t = torch.zeros(4)
    try:
        while True:
            hvd.allreduce(t, name="tick")
    except hvd.HorovodInternalError:
        pass
    tutti.await_membership_epoch(epoch, 60000)


def train_world(how, steps=12, fail_at=5, victim=2):
    """World training with one victim: every step averages each rank's gradient of
    0.5 * |w - targets(rank, step)|^2 and takes an SGD step; commits after every step. The
    victim dies at `fail_at` before submitting; survivors resume from the last commit.
    Prints "attempt <epoch> <batch> <size> <rank>" at each (re)start and "final <rank> <w...>"."""
    hvd.init()
    model = torch.nn.Linear(4, 1, bias=False).double()
    with torch.no_grad():
        model.weight.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    state = hvd.elastic.TorchState(model, optimizer, batch=0)

    @hvd.elastic.run
    def train(state):
        say("attempt", tutti.membership_epoch(), state.batch, hvd.size(), hvd.rank())
        for step in range(state.batch, steps):
            if hvd.rank() == victim and step == fail_at and tutti.membership_epoch() == 1:
                die(how)
            optimizer.zero_grad()
            w = model.weight.view(-1)
            model.weight.grad = (w - targets(hvd.rank(), step, 4)).view(1, -1).detach().clone()
            model.weight.grad.copy_(hvd.allreduce(model.weight.grad, name="grad", op=hvd.Average))
            optimizer.step()
            state.batch = step + 1
            state.commit()

    train(state)
    say("final", hvd.rank(), *[f"{x:.12f}" for x in model.weight.view(-1).tolist()])
    hvd.shutdown()


def scoped(progress_dir):
    """Two models in two sets, A = {0, 1} and B = {2, 3}; rank 3 is killed at B's step 5. B's
    survivor (rank 2) recovers; during its recovery (a reset callback) it waits until A's rank 0
    has completed 20 more steps, which A's ranks can only do if B's failure never reached them.
    Prints "a-steps <n> errors <k>" on A's ranks and "b-recovered <a-steps-during>" on B's."""
    hvd.init()
    a, b = hvd.ProcessSet([0, 1]), hvd.ProcessSet([2, 3])
    hvd.add_process_set(a)
    hvd.add_process_set(b)
    mine = a if hvd.rank() in (0, 1) else b
    model = torch.nn.Linear(8, 1, bias=False).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model, optimizer, process_set=mine, step=0)
    progress = os.path.join(progress_dir, "a-steps")
    errors = []

    def a_steps():
        try:
            with open(progress) as f:
                return int(f.read() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def wait_for_a():
        before = a_steps()
        deadline = time.monotonic() + 60
        while a_steps() < before + 20 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a file the other set writes: observation, not ordering
        say("b-recovered", a_steps() - before)

    if mine is b:
        state.register_reset_callbacks([wait_for_a])

    @hvd.elastic.run
    def train(state):
        for step in range(state.step, 400 if mine is a else 40):
            if mine is b and hvd.rank() == 3 and step == 5:
                die("kill")
            model.weight.grad = torch.ones_like(model.weight) * (step + 1)
            hvd.allreduce_(model.weight.grad, name="grad", process_set=mine)
            optimizer.step()
            state.step = step + 1
            state.commit()
            if mine is a and hvd.rank() == 0:
                with open(progress + ".tmp", "w") as f:
                    f.write(str(step + 1))
                os.replace(progress + ".tmp", progress)

    original_restore = state.restore

    def restore():
        errors.append(mine is a)
        original_restore()

    state.restore = restore
    train(state)
    if mine is a:
        say("a-steps", state.step, "errors", len(errors))
    else:
        say("b-done", state.step, hvd.rank(), hvd.size(), mine.ranks)
    hvd.shutdown()


def sets_after_reset():
    """Rank 1 of 4 dies; the survivors check what became of the sets (ids, members, renumbering,
    an emptied set removed, two sets left equal) and run a collective on a surviving set."""
    hvd.init()
    ids = {}
    for name, ranks in [("s12", [1, 2]), ("s2", [2]), ("s03", [0, 3]), ("s1", [1]),
                        ("s013", [0, 1, 3])]:
        ids[name] = tutti.add_process_set(ranks)
    tutti.barrier()
    if hvd.rank() == 1:
        die("kill")
    try:
        tutti.barrier()  # the world lost rank 1: fails with the re-formation
        say("error none")
    except tutti.TuttiError as e:
        say("error", type(e).__name__)
    tutti.await_membership_epoch(1, 30000)
    say("world", tutti.membership_epoch(), hvd.size(), hvd.rank())
    for name in ("s12", "s2", "s03", "s013"):
        say("set", name, ids[name], tutti.process_set_ranks(ids[name]))
    try:
        tutti.process_set_ranks(ids["s1"])
        say("s1 still there")
    except tutti.UnknownSetError as e:
        say("s1", type(e).__name__, str(e))
    say("add [1] ->", tutti.add_process_set([1]), "older", ids["s12"])
    if hvd.rank() in (0, 2):
        total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum,
                              process_set=ids["s03"], name="on-s03")
        say("s03 sum", total.item())
    tutti.barrier()  # nobody leaves (which re-forms the job again) before all checked
    hvd.shutdown()


def fanout():
    """Four ranks run allreduces until rank 3 kills itself with SIGKILL; each survivor prints
    how long after the kill its collective failed, and with what."""
    hvd.init()
    kill_file = sys.argv[2]
    t = torch.zeros(1024)
    for step in range(100000):
        if hvd.rank() == 3 and step == 50:
            with open(kill_file + ".tmp", "w") as f:
                f.write(repr(time.time()))
            os.replace(kill_file + ".tmp", kill_file)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            hvd.allreduce(t, name="step")
        except tutti.TuttiError as e:
            failed = time.time()
            with open(kill_file) as f:
                killed = float(f.read())
            say("failed", f"{failed - killed:.6f}", type(e).__name__, str(e))
            break
    hvd.shutdown()


def frozen():
    """Two ranks; rank 1 prints its pid and is frozen by the test. Rank 0 goes on alone once
    rank 1 is evicted ("alone <size>"); rank 1, woken later, prints what its next call gives."""
    hvd.init()
    say("pid", os.getpid())
    t = torch.zeros(4)
    if hvd.rank() == 1:
        go = sys.argv[2]
        deadline = time.monotonic() + 120
        # The test freezes this process meanwhile, wakes it, then creates the file.
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            hvd.allreduce(t, name="after-wake")
            say("woken ok")
        except tutti.TuttiError as e:
            say("woken", type(e).__name__, str(e))
        os._exit(0)  # no finalize: the job is over for this rank
    tick_until_reformed(tutti.membership_epoch())
    say("alone", hvd.size())
    hvd.allreduce(t, name="alone")
    hvd.shutdown()


def fail_all():
    """Every rank raises: rank 1 first, then rank 0 once it saw the job re-form."""
    hvd.init()
    epoch = tutti.membership_epoch()
    tutti.barrier()  # rank 0 read the epoch before rank 1 goes
    if hvd.rank() == 1:
        die("raise")
    tutti.await_membership_epoch(epoch, 60000)
    die("raise")


def below_minimum():
    """Three ranks with --min-np 3: rank 2 dies; the others' elastic run waits for the job to
    re-form and gets the end of the job instead."""
    hvd.init()
    model = torch.nn.Linear(2, 1)
    state = hvd.elastic.TorchState(model, None, step=0)

    @hvd.elastic.run
    def train(state):
        for step in range(state.step, 1000):
            if hvd.rank() == 2 and step == 3:
                die("kill")
            hvd.allreduce(torch.ones(2), name="g")
            state.step = step + 1
            state.commit()

    try:
        train(state)
        say("finished")
    except tutti.TuttiError as e:
        say("ended", type(e).__name__, str(e))
        sys.exit(3)


def serial_failures():
    """Three ranks: rank 2 dies, then rank 1 once the job re-formed; rank 0 keeps going."""
    hvd.init()
    for victim in (2, 1):
        epoch = tutti.membership_epoch()
        tutti.barrier()  # every rank read the epoch before the victim goes
        if hvd.rank() == victim:
            die("raise")
        tick_until_reformed(epoch)
    say("survived", hvd.size())
    hvd.shutdown()


def user_errors():
    """Prints what init gives with the environment the test set, or, when init works, what
    waiting for a re-formation that never comes gives."""
    try:
        hvd.init()
    except tutti.TuttiError as e:
        say("init", type(e).__name__, str(e))
        return
    try:
        tutti.await_membership_epoch(tutti.membership_epoch(), 300)
    except tutti.TuttiError as e:
        say("await", type(e).__name__, str(e))
    hvd.shutdown()


def rejoin():
    """Rank 1 of 2 finalizes and initializes again while rank 0 runs on: the job re-forms around
    its leave, then takes it back as an added rank (a new slot, numbered after rank 0) once rank 0
    reaches a boundary. Both print "grown <rank> <size> <epoch> <sum>" after an allreduce of the
    grown world."""
    hvd.init()
    epoch = tutti.membership_epoch()
    tutti.barrier()
    if hvd.rank() == 1:
        hvd.shutdown()
        hvd.init()  # returns once admitted
    else:
        epoch = tutti.await_membership_epoch(epoch, 60000)  # the job re-formed around the leave
        say("alone", hvd.size())
        deadline = time.monotonic() + 120
        while tutti.ranks_waiting() == 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # polling the library's state for the joiner's arrival
        say("waiting", tutti.ranks_waiting())
        tutti.await_membership_epoch(epoch, 60000)  # the boundary that admits it
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum, name="grown")
    say("grown", hvd.rank(), hvd.size(), tutti.membership_epoch(), int(total.item()))
    hvd.shutdown()


def hosts(hosts_file, action, at_step, target, hold_s):
    """World training under tuttirun --host-discovery-script "cat HOSTS_FILE". At step `at_step`
    of the first epoch, rank 0 changes the hosts file ("add:LINE" appends a line, "remove:HOST"
    drops a host's lines) or, with "fail:HOST" ("kill:HOST"), the rank running for HOST raises (is
killed with SIGKILL). Training goes on
    until the world has `target` ranks, has trained 3 steps with them, and rank 0 has seen it so
    for `hold_s` seconds. Each rank prints "attempt <epoch> <batch> <size> <rank>" at each
    (re)start and "final <rank> <w...>"; rank 0 prints "runs <size>x<steps> ...", the sizes the
    committed steps ran with, for the test's replay."""
    target, at_step, hold_s = int(target), int(at_step), float(hold_s)
    kind, _, what = action.partition(":")
    host = os.environ.get("TUTTI_HOST_ID", "")
    hvd.init()
    model = torch.nn.Linear(4, 1, bias=False).double()
    with torch.no_grad():
        model.weight.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    state = hvd.elastic.TorchState(model, optimizer, batch=0, runs=[])
    since = None

    @hvd.elastic.run
    def train(state):
        nonlocal since
        say("attempt", tutti.membership_epoch(), state.batch, hvd.size(), hvd.rank())
        while state.batch < 100000:
            step = state.batch
            first_epoch = tutti.membership_epoch() == 1
            if kind in ("fail", "kill") and host == what and step == at_step and first_epoch:
                die("raise" if kind == "fail" else "kill")
            if kind in ("add", "remove") and hvd.rank() == 0 and step == at_step and first_epoch:
                with open(hosts_file) as f:
                    lines = [line for line in f.read().splitlines()
                             if kind == "add" or line.split(":")[0] != what]
                lines += [what] if kind == "add" else []
                with open(hosts_file + ".new", "w") as f:
                    f.write("\n".join(lines) + "\n")
                os.replace(hosts_file + ".new", hosts_file)  # the script never reads half a file
            optimizer.zero_grad()
            w = model.weight.view(-1)
            model.weight.grad = (w - targets(hvd.rank(), step, 4)).view(1, -1).detach().clone()
            # The size the allreduce runs at, read before it (as in split()): after it returns
            # the job may re-form at any moment (a rank stopped), and a change before it
            # completes fails it instead.
            size = hvd.size()
            model.weight.grad.copy_(hvd.allreduce(model.weight.grad, name="grad", op=hvd.Average))
            optimizer.step()
            runs = state.runs
            if runs and runs[-1][0] == size:
                runs[-1][1] += 1
            else:
                runs.append([size, 1])
            state.batch = step + 1
            done = 0
            if hvd.rank() == 0 and size == target and runs[-1][1] >= 3:
                since = since or time.monotonic()
                done = int(time.monotonic() - since >= hold_s)
            stop = hvd.allreduce(torch.tensor([done]), name="stop", op=hvd.Sum).item() > 0
            state.commit()
            if stop:
                break

    train(state)
    say("final", hvd.rank(), *[f"{x:.12f}" for x in model.weight.view(-1).tolist()])
    if hvd.rank() == 0:
        say("runs", *[f"{size}x{count}" for size, count in state.runs])
    hvd.shutdown()


def join_errors(case):
    """A process asking to join a running 2-rank elastic job the wrong way, started by rank 0 as
    its child with TUTTI_RANK=2: "max" (the job runs at --max-np 2), "static" (it gives static
    process sets), "timeout" (the ranks never reach a boundary within its 1500 ms). Rank 0
    prints the child's "refused <ErrorClass> <message>" line, then "waiting <n>" once tuttid
    gave the child up, as the ranks see it."""
    hvd.init()
    if hvd.rank() == 0:
        env = dict(os.environ, TUTTI_RANK="2", TUTTI_TIMEOUT_MS="1500")
        child = subprocess.run([sys.executable, __file__, "join_child", case], env=env,
                               capture_output=True, text=True, timeout=120)
        say(*(child.stdout.strip().splitlines() or ["child said nothing:", child.stderr[-500:]]))
        deadline = time.monotonic() + 60
        while tutti.ranks_waiting() != 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # polling the library's state until tuttid's word arrives
        say("waiting", tutti.ranks_waiting())
    tutti.barrier()
    hvd.shutdown()


def join_child(case):
    try:
        if case == "static":
            tutti.init(static_sets=[[0, 1]])
        else:
            tutti.init()
        say("joined", tutti.rank())
    except tutti.TuttiError as e:
        say("refused", type(e).__name__, str(e))


def split(commits, joiner=False):
    """Two ranks, each training its own model with a state bound to its own set ({0}, {1}), and a
    world allreduce of a "loss" every step. At step 3 rank 0 starts a rank to add (this scenario
    with "joiner"). The ranks' commits are in different sets, so one may wait at its boundary
    while the other announces the next world allreduce: tuttid then admits at once and the other
    restores. With `commits` "rank0" rank 1 never commits, so that is the only way in. Every rank
    runs 5 world steps in the grown world and prints "split <size> <sum>", the sum of the last
    loss allreduce (0 + 1 + 2), and "restored <n>", how often its state was restored."""
    hvd.init()
    mine = hvd.add_process_set([hvd.rank()])  # only its member takes part
    model = torch.nn.Linear(2, 1, bias=False).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model, optimizer, process_set=mine, batch=0)
    child = None
    grown = {"steps": 0, "total": None, "size": None}

    @hvd.elastic.run
    def train(state):
        nonlocal child
        while grown["steps"] < 5:
            if hvd.rank() == 0 and not joiner and state.batch == 3 and child is None:
                env = dict(os.environ, TUTTI_RANK="2")
                child = subprocess.Popen([sys.executable, __file__, "split_joiner", commits],
                                         env=env)
            # The size the allreduce runs at, read before it: once it returns, the others may
            # finish their last step and re-form the job (to size 1) at any moment. A change
            # before it completes fails it instead (REFORMED), and the step starts over.
            size = hvd.size()
            total = hvd.allreduce(torch.tensor([float(hvd.rank())]), name="loss", op=hvd.Sum)
            if size == 3:
                grown["steps"] += 1
                grown["total"], grown["size"] = total.item(), size
            state.batch += 1
            if not joiner and (commits == "all" or hvd.rank() == 0):
                state.commit()
            if state.batch > 100000:
                raise RuntimeError("the job never grew")

    restored = [0]
    state.register_reset_callbacks([lambda: None])
    original_restore = state.restore

    def counting_restore():
        restored[0] += 1
        original_restore()
    state.restore = counting_restore
    train(state)
    say("split", grown["size"], grown["total"])
    say("restored", restored[0])
    if child is not None:
        child.wait(timeout=120)
    hvd.shutdown()


def early_leave():
    """Three ranks; rank 1 finalizes as soon as its init returns, so the job re-forms while the
    others may still be inside theirs (building lanes and routes from the Welcome) or in their
    first sync. The others then train on together and print "trained SIZES TOTAL"."""
    hvd.init()
    if os.environ["TUTTI_RANK"] == "1":  # hvd.rank() of rank 2 is 1 once rank 1 left
        hvd.shutdown()
        return
    state = hvd.elastic.ObjectState(step=0, total=0.0, sizes=[])

    @hvd.elastic.run
    def train(state):
        while state.step < 3:
            size = int(hvd.allreduce(torch.ones(1), op=hvd.Sum).item())
            state.total += size
            state.sizes = state.sizes + [size]
            state.step += 1
            state.commit()

    train(state)
    say("trained", ",".join(map(str, state.sizes)), state.total)
    hvd.shutdown()


SCENARIOS = {
    "early_leave": early_leave,
    "rejoin": rejoin,
    "split": lambda: split(sys.argv[2]),
    "split_joiner": lambda: split(sys.argv[2], joiner=True),
    "join_errors": lambda: join_errors(sys.argv[2]),
    "join_child": lambda: join_child(sys.argv[2]),
    "hosts": lambda: hosts(*sys.argv[2:7]),
    "user_errors": user_errors,
    "kill": lambda: train_world("kill"),
    "raise": lambda: train_world("raise"),
    "scoped": lambda: scoped(sys.argv[2]),
    "sets": sets_after_reset,
    "fanout": fanout,
    "frozen": frozen,
    "fail_all": fail_all,
    "below_minimum": below_minimum,
    "serial_failures": serial_failures,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
