"""The package's version: the library's (tutti.h TUTTI_VERSION_*, CMake's project version), as
pyproject.toml and the Rust crates have it too; tests/python/test_versions.py holds them equal."""
__version__ = "0.13.0"
