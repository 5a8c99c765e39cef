"""One version for everything tutti ships: the C header's TUTTI_VERSION_*, CMake's project, the
Python package (tutti/_version.py, which pyproject.toml reads), and the Rust crates and their
lock files."""
import os
import re

from conftest import ROOT


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def header_version():
    header = read("capi/include/tutti/tutti.h")
    parts = [re.search(rf"#define TUTTI_VERSION_{p} (\d+)", header).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def test_every_shipped_part_has_the_header_version():
    version = header_version()
    assert re.search(r"project\(tutti VERSION ([\d.]+)", read("CMakeLists.txt")).group(1) == version
    assert re.search(r'__version__ = "([\d.]+)"', read("python/tutti/_version.py")).group(1) == \
        version
    pyproject = read("python/pyproject.toml")
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = {attr = "tutti._version.__version__"}' in pyproject
    for crate in ("bindings/rust/tutti-sys/Cargo.toml", "bindings/rust/tutti/Cargo.toml",
                  "examples/rust/Cargo.toml"):
        assert re.search(r'^version = "([\d.]+)"', read(crate), re.M).group(1) == version, crate
    for lock in ("bindings/rust/Cargo.lock", "examples/rust/Cargo.lock"):
        ours = re.findall(r'name = "tutti[\w-]*"\nversion = "([\d.]+)"', read(lock))
        assert ours and set(ours) == {version}, (lock, ours)
