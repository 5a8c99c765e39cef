"""Two (or more) "hosts" reachable over real ssh, on this one machine, for tuttirun's tests
across hosts: each host is a network namespace with a real `sshd`, and the launcher runs in a
namespace of its own, so that nothing of the test touches the machine's own network.

    launcher namespace                 host namespaces
    br0 10.77.0.1/24 --+-- veth ---- eth0 10.77.0.2  sshd (host 0)
                       +-- veth ---- eth0 10.77.0.3  sshd (host 1)
                       +-- veth ---- eth0 10.77.0.4  no sshd (an unreachable host)

The subnet exists only inside these namespaces, so it cannot clash with the machine's networks or
with another run's. A host's identity in tutti includes its network namespace
(client/host_identity.cc), so the ranks of one namespace share memory and those of two
namespaces talk TCP over the bridge, as on two machines. Namespace names carry the test
process's pid, so a leftover of an earlier run breaks nothing.

Keys are made by `ssh-keygen` in a temporary directory: one host key shared by the sshds and one
client key, authorised for root through `AuthorizedKeysFile`. Each sshd is `sshd -D -e`, a child
of the test that is ready once it says "Server listening". Teardown kills every process left in
the host namespaces (by pid, from `ip netns pids`), stops the sshds, and deletes the namespaces
with their links; it runs even when a test fails."""
import os
import shutil
import subprocess
import tempfile
import threading

SUBNET = "10.77.0"
SSHD = "/usr/sbin/sshd"


def missing_parts():
    """Why this machine cannot run the hosts (None when it can): they need root, `ip` with
    network namespaces, sshd and ssh-keygen."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd)"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"no {tool} (apt-get install iproute2 openssh-client)"
    if not os.access(SSHD, os.X_OK):
        return f"no {SSHD} (apt-get install openssh-server)"
    return None


def _run(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=60)


class SshHosts:
    """`hosts` namespaces with an sshd each, plus `unreachable` namespaces without one. Use as a
    context manager. `addresses[i]` is host i's address, `unreachable_addresses` the others';
    `launch(command)` runs a command in the launcher's namespace."""

    def __init__(self, hosts=2, unreachable=1):
        tag = f"{os.getpid()}"
        self.launcher_ns = f"tutti-ssh-l-{tag}"
        self.host_ns = [f"tutti-ssh-h{i}-{tag}" for i in range(hosts + unreachable)]
        self.addresses = [f"{SUBNET}.{2 + i}" for i in range(hosts)]
        self.unreachable_addresses = [f"{SUBNET}.{2 + hosts + i}" for i in range(unreachable)]
        self.dir = tempfile.mkdtemp(prefix="tutti-ssh-")
        self.key = os.path.join(self.dir, "id_ed25519")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self._sshds = []
        self._made_ns = []

    def __enter__(self):
        try:
            self._make_network()
            self._make_keys()
            for ns, address in zip(self.host_ns, self.addresses):
                self._start_sshd(ns, address)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def ssh_args(self):
        """tuttirun's options for these hosts: the client key, and known hosts kept in the
        temporary directory rather than in root's ~/.ssh."""
        return ["-i", self.key, "--ssh-option", f"UserKnownHostsFile={self.known_hosts}"]

    def launch(self, command):
        """`command` run in the launcher's namespace."""
        return ["ip", "netns", "exec", self.launcher_ns, *command]

    def processes_in_hosts(self):
        """Pids of every process in the host namespaces (the sshds' listeners excluded)."""
        listeners = {p.pid for p in self._sshds}
        pids = []
        for ns in self._made_ns:
            if ns == self.launcher_ns:
                continue
            out = _run("ip", "netns", "pids", ns, check=False).stdout
            pids += [int(p) for p in out.split() if int(p) not in listeners]
        return pids

    # ---- setup ----------------------------------------------------------------------------------
    def _add_ns(self, name):
        _run("ip", "netns", "add", name)
        self._made_ns.append(name)
        _run("ip", "-n", name, "link", "set", "lo", "up")

    def _make_network(self):
        self._add_ns(self.launcher_ns)
        ln = self.launcher_ns
        _run("ip", "-n", ln, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", ln, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
        _run("ip", "-n", ln, "link", "set", "br0", "up")
        all_addresses = self.addresses + self.unreachable_addresses
        for i, (ns, address) in enumerate(zip(self.host_ns, all_addresses)):
            self._add_ns(ns)
            # Created inside the launcher's namespace with its peer moved straight into the
            # host's: no interface of this test ever exists in the machine's own namespace.
            _run("ip", "-n", ln, "link", "add", f"to-h{i}", "type", "veth", "peer", "name", "eth0",
                 "netns", ns)
            _run("ip", "-n", ln, "link", "set", f"to-h{i}", "master", "br0")
            _run("ip", "-n", ln, "link", "set", f"to-h{i}", "up")
            _run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")

    def _make_keys(self):
        host_key = os.path.join(self.dir, "host_key")
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", host_key)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key)
        shutil.copy(self.key + ".pub", os.path.join(self.dir, "authorized_keys"))
        # sshd refuses to start without its privilege separation directory, which systemd
        # would create for the machine's own sshd.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def _start_sshd(self, ns, address):
        config = os.path.join(self.dir, f"sshd_config-{address}")
        with open(config, "w") as f:
            f.write(f"""ListenAddress {address}
Port 22
HostKey {self.dir}/host_key
PidFile {self.dir}/sshd-{address}.pid
AuthorizedKeysFile {self.dir}/authorized_keys
PermitRootLogin yes
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
""")
        sshd = subprocess.Popen(["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", config],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        self._sshds.append(sshd)
        # Ready once it says it listens: read its log until then (or until it ends), on a thread
        # so that the wait has a timeout; the log is drained for the sshd's whole life.
        ready = threading.Event()
        said = []

        def read_log():
            for line in sshd.stderr:
                said.append(line.rstrip())
                if "Server listening" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=read_log, daemon=True).start()
        if not ready.wait(60) or sshd.poll() is not None or not any(
                "Server listening" in line for line in said):
            raise RuntimeError(f"sshd in {ns} did not start: " + " | ".join(said))

    # ---- teardown -------------------------------------------------------------------------------
    def close(self):
        for pid in self.processes_in_hosts():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        for sshd in self._sshds:
            if sshd.poll() is None:
                sshd.kill()
            sshd.wait()
        self._sshds = []
        for ns in reversed(self._made_ns):
            _run("ip", "netns", "del", ns, check=False)
        self._made_ns = []
        shutil.rmtree(self.dir, ignore_errors=True)
