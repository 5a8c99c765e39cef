"""A real single-host Slurm for tests (Debian 12's Slurm 22.05): munged with a key made by
mungekey, slurmctld and slurmd in the foreground, all configured in a temporary directory and
run as the test's children, which it reaps. `ProctrackType=proctrack/linuxproc`,
`TaskPlugin=task/none` and a node of 4 CPUs with `SlurmdParameters=config_overrides` let 4 tasks
run on a 2-core machine without cgroups or systemd."""
import os
import shutil
import socket
import subprocess
import time

TOOLS = ("mungekey", "munged", "slurmctld", "slurmd", "srun", "sinfo", "sbatch", "scancel")


def missing_tools():
    return [t for t in TOOLS if shutil.which(t) is None]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    def __init__(self, root):
        self.root = str(root)
        self.node = socket.gethostname().split(".")[0]
        self.children = []
        self.conf = os.path.join(self.root, "slurm.conf")
        self.socket = os.path.join(self.root, "munge.socket")
        for d in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        os.chmod(self.root, 0o755)

    def env(self, extra=None):
        env = dict(os.environ)
        env["SLURM_CONF"] = self.conf
        env.update(extra or {})
        return env

    def _start(self, command, name):
        log = open(os.path.join(self.root, "log", name + ".out"), "w")
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env())
        self.children.append((child, log))
        return child

    def log(self, name):
        path = os.path.join(self.root, "log", name)
        return open(path).read() if os.path.exists(path) else ""

    def start(self, timeout_s=60):
        key = os.path.join(self.root, "munge.key")
        subprocess.run(["mungekey", "--create", "--keyfile", key], check=True,
                       capture_output=True)
        os.chmod(key, 0o600)
        self._start(["munged", "--foreground", "--force", "--key-file", key,
                     "--socket", self.socket, "--pid-file", os.path.join(self.root, "munged.pid"),
                     "--log-file", os.path.join(self.root, "log", "munged.log"),
                     "--seed-file", os.path.join(self.root, "munge.seed")], "munged")
        r = self.root
        # Every srun listens on a few ports of this range, and two tests run sruns at once; other
        # processes' ephemeral ports can land in it too. Ten ports ran out in CI ("all ports in
        # range ... exhausted"): a hundred leave room.
        srun_ports = min(free_port() // 100 * 100, 65535 - 99)
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=tutti-test
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SrunPortRange={srun_ports}-{srun_ports + 99}
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName={self.node} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        self._wait_for_munge(timeout_s)
        self._start(["slurmctld", "-D", "-f", self.conf], "slurmctld")
        self._start(["slurmd", "-D", "-f", self.conf, "-N", self.node], "slurmd")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env(),
                                   capture_output=True, text=True).stdout.strip()
            if state == "idle":
                return
            for child, _ in self.children:
                if child.poll() is not None:
                    raise RuntimeError(f"{child.args[0]} exited with {child.returncode}: "
                                       + self.log("slurmctld.log")[-2000:]
                                       + self.log("slurmd.log")[-2000:])
            time.sleep(0.2)  # polling a daemon's state: no event to wait on
        raise RuntimeError(f"the node never became idle (sinfo: {state!r})\n"
                           + self.log("slurmctld.log")[-2000:] + self.log("slurmd.log")[-2000:])

    def _wait_for_munge(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(self.socket):
            if time.monotonic() > deadline:
                raise RuntimeError("munged never made its socket: " + self.log("munged.log"))
            time.sleep(0.05)

    def stop(self):
        for child, log in reversed(self.children):
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            log.close()
        self.children.clear()
