#!/usr/bin/env python3
"""The installed tree, used from outside (docs/install.md).

`cmake --install` the build into a fresh prefix; check the layout and that nothing installed
names the build or source tree; check the package's version rule with find_package; build
consumer/consumer.c with CMake's find_package(tutti) and with pkg-config; run both, two ranks
each, against the installed tuttid (the CMake build's ranks started here, the pkg-config build's
by the installed tuttirun); import the installed Python package with this Python and run two
Python ranks under the installed tuttirun. Every rank reports the libtutti it loaded, which must
be the installed one.

Every process started here is killed and reaped on the way out (and dies with this script,
PR_SET_PDEATHSIG); every wait has a timeout; ports are chosen by the OS. The build directory's
install_manifest.txt is restored afterwards. TUTTI_KEEP_INSTALL_TEST=1 keeps the temporary tree.
"""
import argparse
import ctypes
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77  # SKIP_RETURN_CODE in CMakeLists.txt

parser = argparse.ArgumentParser()
for name in ("cmake", "build-dir", "consumer", "generator", "make-program", "c-compiler",
             "version", "bindir", "libdir", "includedir", "sysconfdir", "cmakedir", "pythondir",
             "unitdir"):
    parser.add_argument("--" + name, required=True)
parser.add_argument("--sanitized", action="store_true",
                    help="the build uses a sanitizer: skip (see CMakeLists.txt)")
args = parser.parse_args()

START = time.monotonic()
_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
children = []


class Failure(Exception):
    pass


def log(message):
    print(f"[{time.monotonic() - START:6.1f}s] {message}", flush=True)


def expect(condition, what):
    if not condition:
        raise Failure(what)


def die_with_parent():
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def clean_env(**extra):
    """This environment without anything that could point a child at another tutti."""
    drop = {"LD_LIBRARY_PATH", "PYTHONPATH", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR",
            "CMAKE_PREFIX_PATH", "tutti_DIR", "tutti_ROOT", "TUTTI_ROOT"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TUTTI_")}
    env.update(extra)
    return env


def start(cmd, **kwargs):
    kwargs.setdefault("env", clean_env())
    process = subprocess.Popen([str(c) for c in cmd], preexec_fn=die_with_parent, **kwargs)
    children.append(process)
    return process


def finish(process, what, timeout):
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"{what}: still running after {timeout} s")
    if process.returncode != 0:
        raise Failure(f"{what}: exit status {process.returncode}\n{out}")
    return out


def run(cmd, what=None, timeout=300, **kwargs):
    process = start(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    return finish(process, what or " ".join(str(c) for c in cmd), timeout)


def stop_all():
    for process in reversed(children):
        if process.poll() is None:
            process.terminate()  # tuttid and tuttirun stop cleanly; tuttirun stops its ranks
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout and not process.stdout.closed:
            process.stdout.close()


def read_line(pipe, timeout):
    """One line from a binary pipe, or Failure after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([pipe], [], [], left)[0]:
            raise Failure(f"no line within {timeout} s (read so far: {data!r})")
        chunk = os.read(pipe.fileno(), 4096)
        if not chunk:
            raise Failure(f"end of output before a line (read so far: {data!r})")
        data += chunk
    return data.split(b"\n", 1)[0].decode()


def same_file(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def main(tmp):
    if args.sanitized:
        print("SKIP: a sanitizer build's libtutti.so needs the sanitizer runtime preloaded; "
              "the release build is the one tested installed")
        return SKIP
    relative = {"bindir": args.bindir, "libdir": args.libdir, "includedir": args.includedir,
                "sysconfdir": args.sysconfdir, "cmakedir": args.cmakedir,
                "pythondir": args.pythondir, "unitdir": args.unitdir}
    absolute = [f"{k}={v}" for k, v in relative.items() if os.path.isabs(v)]
    if absolute:
        print("SKIP: install directories outside the prefix cannot be redirected:", absolute)
        return SKIP

    build_dir = os.path.realpath(args.build_dir)
    source_dir = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    prefix = os.path.join(tmp, "prefix")
    bindir, libdir = os.path.join(prefix, args.bindir), os.path.join(prefix, args.libdir)
    includedir = os.path.join(prefix, args.includedir)
    cmakedir, pythondir = os.path.join(prefix, args.cmakedir), os.path.join(prefix, args.pythondir)
    major, minor, _ = (int(x) for x in args.version.split("."))
    soname = f"libtutti.so.{major}"
    installed_library = os.path.join(libdir, f"libtutti.so.{args.version}")

    # ---- install --------------------------------------------------------------------------------
    run([args.cmake, "--install", build_dir, "--prefix", prefix], "cmake --install")
    log(f"installed into {prefix}")

    # ---- layout ---------------------------------------------------------------------------------
    for path in [installed_library, os.path.join(includedir, "tutti", "tutti.h"),
                 os.path.join(cmakedir, "tuttiConfig.cmake"),
                 os.path.join(cmakedir, "tuttiConfigVersion.cmake"),
                 os.path.join(cmakedir, "tuttiTargets.cmake"),
                 os.path.join(libdir, "pkgconfig", "tutti.pc"),
                 os.path.join(pythondir, "tutti", "__init__.py"),
                 os.path.join(pythondir, "tutti", "_capi.py"),
                 os.path.join(pythondir, "tutti", "_install_paths.py"),
                 os.path.join(pythondir, "tutti", "torch", "__init__.py")]:
        expect(os.path.isfile(path) and not os.path.islink(path), f"not installed: {path}")
    for program in ("tuttid", "tuttirun"):
        path = os.path.join(bindir, program)
        expect(os.path.isfile(path) and os.access(path, os.X_OK), f"not installed: {path}")
    # libtutti.so -> libtutti.so.0 -> libtutti.so.0.2.0, as ldconfig and the linker expect.
    for link, target in (("libtutti.so", soname), (soname, f"libtutti.so.{args.version}")):
        path = os.path.join(libdir, link)
        expect(os.path.islink(path) and os.readlink(path) == target,
               f"{path} should be a symlink to {target}")
    for root, dirs, files in os.walk(pythondir):
        expect("__pycache__" not in dirs and not any(f.startswith("libtutti") for f in files),
               f"build leftovers installed in {root}")

    dynamic = run(["readelf", "-d", installed_library], "readelf")
    expect(f"[{soname}]" in dynamic, f"SONAME of {installed_library} is not {soname}:\n{dynamic}")
    for path in (installed_library, os.path.join(bindir, "tuttid"), os.path.join(bindir, "tuttirun")):
        dynamic = run(["readelf", "-d", path], "readelf")
        for line in dynamic.splitlines():
            expect(not ("RPATH" in line or "RUNPATH" in line) or build_dir not in line,
                   f"{path} keeps a run path into the build tree: {line.strip()}")
    # Nothing installed that is read as text may name the build or source tree.
    for root, _, files in os.walk(prefix):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not re.search(r"\.(cmake|pc|py|h|service|toml)$", name):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for tree in (build_dir, source_dir):
                expect(tree not in text or prefix.startswith(tree), f"{path} names {tree}")
    with open(os.path.join(pythondir, "tutti", "_install_paths.py")) as f:
        expect(f'LIBDIR = "{libdir}"' in f.read(), "_install_paths.py does not name the libdir")
    # The systemd unit and example configuration, when the source tree has them.
    unit_source = os.path.join(source_dir, "packaging", "systemd", "tuttid.service")
    if os.path.exists(unit_source):
        unit = os.path.join(prefix, args.unitdir, "tuttid.service")
        expect(os.path.isfile(unit), f"not installed: {unit}")
        with open(unit) as f:
            text = f.read()
        expect(not re.search(r"@[A-Za-z_0-9/.+-]+@", text), f"{unit} has names left unfilled")
        expect(re.search(r"^ExecStart=" + re.escape(os.path.join(bindir, "tuttid")) + r"\b", text,
                         re.M), f"{unit} does not start {bindir}/tuttid")
    if os.path.exists(os.path.join(source_dir, "packaging", "tuttid.toml")):
        config = os.path.join(prefix, args.sysconfdir, "tutti", "tuttid.toml")
        expect(os.path.isfile(config), f"not installed: {config}")
    log("layout: library and SONAME links, header, CMake package, tutti.pc, programs, Python"
        + (", systemd unit" if os.path.exists(unit_source) else ""))

    # ---- pkg-config -----------------------------------------------------------------------------
    pc_env = clean_env(PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    pkg = lambda *a: run(["pkg-config", *a, "tutti"], env=pc_env).strip()  # noqa: E731
    expect(pkg("--modversion") == args.version, f"pkg-config version {pkg('--modversion')}")
    expect(pkg("--variable=prefix") == prefix, f"pkg-config prefix {pkg('--variable=prefix')}")
    expect(pkg("--variable=libdir") == libdir, f"pkg-config libdir {pkg('--variable=libdir')}")
    expect(pkg("--variable=includedir") == includedir,
           f"pkg-config includedir {pkg('--variable=includedir')}")
    flags = shlex.split(pkg("--cflags", "--libs"))
    expect(f"-I{includedir}" in flags or includedir in ("/usr/include",), f"cflags: {flags}")
    expect("-ltutti" in flags, f"libs: {flags}")

    # ---- find_package's version rule (docs/abi-policy.md: any newer 0.x serves an older one) -----
    probe = os.path.join(tmp, "version-probe")
    os.makedirs(probe)
    with open(os.path.join(probe, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.22)\nproject(probe NONE)\n"
                "find_package(tutti ${REQUEST} QUIET)\n"
                'message(STATUS "probe: found=[${tutti_FOUND}] version=[${tutti_VERSION}] '
                'dir=[${tutti_DIR}]")\n')
    requests = [(f"{major}.{minor}", True), (args.version, True),
                (f"{major}.{minor + 1}", False), (f"{major + 1}.0", False)]
    if minor > 0:
        requests.append((f"{major}.{minor - 1}", True))
    for i, (request, compatible) in enumerate(requests):
        out = run([args.cmake, "-S", probe, "-B", os.path.join(tmp, f"version-probe-{i}"),
                   f"-DREQUEST={request}", f"-DCMAKE_PREFIX_PATH={prefix}"],
                  f"find_package(tutti {request})", timeout=120)
        found = re.search(r"probe: found=\[(\w*)\] version=\[([^\]]*)\] dir=\[([^\]]*)\]", out)
        expect(found, f"find_package(tutti {request}) printed nothing:\n{out}")
        if compatible:
            expect(found.group(1) in ("1", "TRUE") and found.group(2) == args.version
                   and same_file(found.group(3), cmakedir),
                   f"find_package(tutti {request}) should find {args.version} in {cmakedir}:\n{out}")
        else:
            expect(found.group(1) not in ("1", "TRUE"),
                   f"find_package(tutti {request}) accepted {args.version}:\n{out}")
    log("find_package: " + ", ".join(f"{r} {'yes' if c else 'no'}" for r, c in requests))

    # ---- the consumer, built two ways -----------------------------------------------------------
    consumer_build = os.path.join(tmp, "consumer-cmake")
    run([args.cmake, "-S", args.consumer, "-B", consumer_build, "-G", args.generator,
         f"-DCMAKE_MAKE_PROGRAM={args.make_program}", f"-DCMAKE_C_COMPILER={args.c_compiler}",
         "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}"],
        "configure the consumer", timeout=300)
    with open(os.path.join(consumer_build, "CMakeCache.txt")) as f:
        found_dir = re.search(r"^tutti_DIR:PATH=(.*)$", f.read(), re.M)
    expect(found_dir and same_file(found_dir.group(1), cmakedir),
           f"find_package found tutti elsewhere: {found_dir and found_dir.group(1)}")
    run([args.cmake, "--build", consumer_build], "build the consumer with CMake", timeout=300)
    consumer_cmake = os.path.join(consumer_build, "consumer")

    consumer_pc = os.path.join(tmp, "consumer-pkg-config")
    run([args.c_compiler, os.path.join(args.consumer, "consumer.c"), *flags, "-o", consumer_pc],
        "build the consumer with pkg-config", timeout=300)
    log("consumer built with find_package(tutti) and with pkg-config")

    def check_rank_lines(out, pattern, ranks, sums, what):
        lines = {}
        for line in out.splitlines():
            m = re.search(pattern, line)
            if m:
                lines[int(m.group("rank"))] = m
        expect(sorted(lines) == list(range(ranks)), f"{what}: not one line per rank:\n{out}")
        for rank, m in lines.items():
            expect(m.group("sums") == sums, f"{what}: rank {rank} summed {m.group('sums')}")
            expect(same_file(m.group("library"), installed_library),
                   f"{what}: rank {rank} loaded {m.group('library')}, not {installed_library}")

    c_line = (r"rank (?P<rank>\d+) of 2: sum (?P<sums>[\d ]+); version (?P<version>[\d.]+); "
              r"library (?P<library>\S+)$")

    # ---- the installed tuttid; the CMake build's ranks started here, found by its RUNPATH --------
    tuttid_log = open(os.path.join(tmp, "tuttid.log"), "w+")
    tuttid = start([os.path.join(bindir, "tuttid"), "--bind", "tcp://127.0.0.1:*",
                    "--log-level", "warn"], stdout=subprocess.PIPE, stderr=tuttid_log)
    line = read_line(tuttid.stdout, 60)
    m = re.fullmatch(r"tuttid listening on (tcp://127\.0\.0\.1:\d+)", line)
    expect(m, f"tuttid printed {line!r}")
    endpoint = m.group(1)
    log(f"installed tuttid listening on {endpoint}")

    job = f"install-test-{os.getpid()}"
    ranks = [start([consumer_cmake], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                   env=clean_env(TUTTI_COORDINATOR=endpoint, TUTTI_JOB=job + "-cmake",
                                 TUTTI_RANK=str(rank), TUTTI_SIZE="2"))
             for rank in range(2)]
    out = "".join(finish(p, f"CMake-built consumer, rank {r}", 120) for r, p in enumerate(ranks))
    check_rank_lines(out, c_line, 2, "3 5 7 9", "CMake-built consumer")
    expect(f"version {args.version};" in out, f"version not {args.version}:\n{out}")
    log("CMake-built consumer: 2 ranks against the installed tuttid, installed libtutti")

    # ---- the pkg-config build under the installed tuttirun, same tuttid ------------------------
    out = run([os.path.join(bindir, "tuttirun"), "-np", "2", "--coordinator", endpoint,
               "--job", job + "-pkg-config", consumer_pc], "tuttirun with the pkg-config consumer",
              timeout=120, env=clean_env(LD_LIBRARY_PATH=libdir))
    check_rank_lines(out, r"^\[\d+\] " + c_line, 2, "3 5 7 9", "pkg-config-built consumer")
    log("pkg-config-built consumer: 2 ranks under the installed tuttirun and tuttid")

    tuttid.terminate()
    try:
        status = tuttid.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise Failure("tuttid did not stop within 60 s of SIGTERM")
    tuttid_log.seek(0)
    expect(status == 0, f"tuttid exited {status}:\n{tuttid_log.read()}")

    # ---- the Python package, from the installed tree ---------------------------------------------
    py_env = clean_env(PYTHONPATH=pythondir)
    out = run([sys.executable, "-s", "-c",
               "import tutti; print(tutti.__version__); print(tutti.__file__); "
               "print(tutti._capi.library_path)"], "import the installed tutti", timeout=120,
              env=py_env, cwd=tmp)
    version, module, library = out.split()
    expect(version == args.version, f"tutti.__version__ is {version}")
    expect(same_file(module, os.path.join(pythondir, "tutti", "__init__.py")),
           f"imported {module}, not the installed package")
    expect(same_file(library, installed_library), f"the installed package loaded {library}")
    log(f"Python: tutti {version} from {os.path.dirname(module)}, library {library}")

    # ---- the GPU module, found next to the installed library (docs/gpu.md) -----------------------
    if os.path.exists(os.path.join(build_dir, "libtutti_cuda.so")):
        installed_module = os.path.join(libdir, "libtutti_cuda.so")
        expect(os.path.isfile(installed_module), f"not installed: {installed_module}")
        out = run([sys.executable, "-s", "-c",
                   "import tutti\n"
                   "try:\n"
                   "    tutti.device_check('cuda', 0)\n"
                   "    print('device usable')\n"
                   "except tutti.DeviceUnavailableError as e:\n"
                   "    print('unavailable:', e)\n"],
                  "load the installed GPU module", timeout=120,
                  env=clean_env(PYTHONPATH=pythondir, TUTTI_LOG_LEVEL="info"), cwd=tmp)
        loaded = re.search(r"GPU module (\S+) loaded", out)
        expect(loaded is not None and same_file(loaded.group(1), installed_module),
               f"the installed library did not load the installed GPU module:\n{out}")
        log(f"GPU module: {installed_module} loaded ({out.strip().splitlines()[-1]})")

    script = ("import numpy as np, tutti\n"
              "tutti.init()\n"
              "total = tutti.allreduce(np.arange(4, dtype=np.float32) + tutti.rank())\n"
              "print(f'rank {tutti.rank()} of {tutti.size()}: sum '\n"
              "      f'{\" \".join(str(int(x)) for x in total)}; library {tutti._capi.library_path}')\n"
              "tutti.shutdown()\n")
    out = run([os.path.join(bindir, "tuttirun"), "-np", "2", sys.executable, "-s", "-c", script],
              "tuttirun with Python ranks", timeout=180, env=py_env, cwd=tmp)
    check_rank_lines(out, r"^\[\d+\] rank (?P<rank>\d+) of 2: sum (?P<sums>[\d ]+); "
                     r"library (?P<library>\S+)$", 2, "1 3 5 7", "Python ranks")
    log("Python: 2 ranks under the installed tuttirun (its own coordinator)")
    return 0


def on_signal(signum, _frame):
    sys.exit(128 + signum)  # unwinds through the finally below


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    manifest = os.path.join(args.build_dir, "install_manifest.txt")
    saved_manifest = None
    if os.path.exists(manifest):
        with open(manifest, "rb") as f:
            saved_manifest = f.read()
    tmp = tempfile.mkdtemp(prefix="tutti-install-test-")
    status = 1
    try:
        status = main(tmp)
    except (Failure, OSError) as e:  # OSError: a program not found (pkg-config, readelf, ...)
        print(f"FAIL: {e}", file=sys.stderr)
        log_path = os.path.join(tmp, "tuttid.log")
        if os.path.exists(log_path):
            with open(log_path) as f:
                print("tuttid's log:\n" + f.read(), file=sys.stderr)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):  # let the cleanup finish
            signal.signal(signum, signal.SIG_IGN)
        stop_all()
        # cmake --install wrote its manifest into the build directory; put the old one back.
        if saved_manifest is None:
            if os.path.exists(manifest):
                os.remove(manifest)
        else:
            with open(manifest, "wb") as f:
                f.write(saved_manifest)
        if os.environ.get("TUTTI_KEEP_INSTALL_TEST") == "1":
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if status == 0:
        log("PASS")
    sys.exit(status)
