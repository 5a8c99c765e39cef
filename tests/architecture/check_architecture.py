#!/usr/bin/env python3
"""Keeps docs/architecture.md true.

1. The arrows: every quoted #include of a source file under a folder the arrows table governs
   must name a header its row allows. A row for one file overrides its folder's row; an entry
   ending in '/' covers the headers directly in that folder. A source folder that no row governs
   is an error too, so that a new folder is placed on the map.
2. Who builds frames: a `wire::Frame` declared without a value (a frame being assembled or
   decoded) may appear only in the files the page lists under "## Who builds frames" (and in
   proto/, tests and tools).
3. The names: every `path:Function` the page names must exist: the file, and in it a definition
   or declaration of the function (`Class::Method(`, `Name(`), class or struct.

Usage: check_architecture.py REPO_ROOT       (exit 0 when the page holds)
       check_architecture.py --self-test     (shows that both checks catch what they must)
"""
import os
import re
import subprocess
import sys
import tempfile

SOURCE = re.compile(r"\.(h|hpp|cc|c|cu)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Folders whose files may include anything.
FREE = ("tests/", "bench/", "examples/", "tools/", "python/", "build")
FRAME_BUILT = re.compile(r"\bwire::Frame\s+[A-Za-z_][A-Za-z0-9_]*\s*;")
NAMED = re.compile(r"`([A-Za-z0-9_./-]+\.(?:cc|h|cu|c|py)):([A-Za-z_][A-Za-z0-9_:]*)`")


def parse_arrows(page):
    """{'client/exec/': ['common/', ...], 'transport/backend_table.cc': [...]}"""
    section = page.split("## The arrows", 1)
    if len(section) < 2:
        raise SystemExit("docs/architecture.md has no '## The arrows' section")
    rows = {}
    for line in section[1].splitlines():
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        key = cells[0].strip("`")
        rows[key] = re.findall(r"`([^`]+)`", cells[1])
    if not rows:
        raise SystemExit("docs/architecture.md: the arrows table is empty")
    return rows


def governing_row(path, rows):
    if path in rows:
        return path
    folder = os.path.dirname(path) + "/"
    return folder if folder in rows else None


def allowed(header, entries):
    if header == "tutti.pb.h":  # generated from proto/tutti.proto
        header = "proto/tutti.pb.h"
    for entry in entries:
        if entry.endswith("/"):
            if header.startswith(entry) and "/" not in header[len(entry):]:
                return True
        elif header == entry:
            return True
    return False


def source_files(root):
    try:
        listed = subprocess.check_output(["git", "-C", root, "ls-files"], text=True,
                                         stderr=subprocess.DEVNULL).split()
    except (OSError, subprocess.CalledProcessError):
        listed = [os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs]
    return sorted(f for f in listed if SOURCE.search(f) and not f.startswith(FREE)
                  and os.path.isfile(os.path.join(root, f)))


def check_arrows(root, rows):
    problems = []
    for path in source_files(root):
        row = governing_row(path, rows)
        if row is None:
            problems.append(f"{path}: its folder has no row in the arrows table")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for header in INCLUDE.findall(text):
            if "/" not in header and header != "tutti.pb.h":
                continue  # a header beside the file (generated or local), not a layer
            if not allowed(header, rows[row]):
                problems.append(f"{path}: includes \"{header}\", outside the arrows of {row}")
    return problems


def parse_frame_builders(page):
    section = page.split("## Who builds frames", 1)
    if len(section) < 2:
        raise SystemExit("docs/architecture.md has no '## Who builds frames' section")
    body = section[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([A-Za-z0-9_./-]+\.(?:cc|h))`", body))


def check_frame_builders(root, builders):
    problems = []
    for path in source_files(root):
        if path.startswith("proto/") or path in builders:
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        if FRAME_BUILT.search(text):
            problems.append(f"{path}: assembles a wire::Frame, which only the files under "
                            "'Who builds frames' may")
    for path in sorted(builders):
        if not os.path.isfile(os.path.join(root, path)):
            problems.append(f"Who builds frames: `{path}` does not exist")
    return problems


def check_names(root, page):
    problems = []
    for path, name in sorted(set(NAMED.findall(page))):
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            problems.append(f"`{path}:{name}`: no such file")
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        last = name.split("::")[-1]
        patterns = [re.escape(name) + r"\s*\("]
        if "::" not in name:
            patterns += [r"\b(class|struct)\s+" + re.escape(name) + r"\b",
                         r"\b" + re.escape(name) + r"\s*\(",
                         r"\bdef\s+" + re.escape(name) + r"\b"]
        else:
            # a method declared inside its class in a header
            cls = name.split("::")[-2]
            if re.search(r"\b(class|struct)\s+" + re.escape(cls) + r"\b", text):
                patterns.append(r"\b" + re.escape(last) + r"\s*\(")
        if not any(re.search(p, text) for p in patterns):
            problems.append(f"`{path}:{name}`: {path} has no {name}")
    return problems


def check(root):
    with open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8") as f:
        page = f.read()
    rows = parse_arrows(page)
    problems = []
    for key in rows:
        if not os.path.exists(os.path.join(root, key)):
            problems.append(f"arrows table: `{key}` does not exist")
    return (problems + check_arrows(root, rows) +
            check_frame_builders(root, parse_frame_builders(page)) + check_names(root, page))


def self_test():
    page = """# x
Named: `a/one.cc:Thing::Run` and `a/one.cc:Missing` and `b/gone.cc:Any`.
## The arrows
| files in | may include |
|---|---|
| `a/` | `a/`, `common/` |
| `common/` | `common/` |
## Who builds frames
Only `a/one.h` may.
## Next
"""
    with tempfile.TemporaryDirectory() as root:
        for folder in ("docs", "a", "common", "loose"):
            os.makedirs(os.path.join(root, folder))
        files = {
            "docs/architecture.md": page,
            "a/one.cc": '#include "a/one.h"\n#include "common/x.h"\n#include "secret/deep.h"\n'
                        "void Thing::Run() {}\n",
            "a/one.h": "struct Thing { void Run(); wire::Frame allowed; };\n",
            "a/two.cc": "void F() { wire::Frame built; }\n",
            "common/x.h": "",
            "loose/orphan.cc": "",
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        found = check(root)
    expected = [
        'a/one.cc: includes "secret/deep.h", outside the arrows of a/',
        "loose/orphan.cc: its folder has no row in the arrows table",
        "a/two.cc: assembles a wire::Frame, which only the files under 'Who builds frames' may",
        "`a/one.cc:Missing`: a/one.cc has no Missing",
        "`b/gone.cc:Any`: no such file",
    ]
    missing = [e for e in expected if e not in found]
    extra = [f for f in found if f not in expected]
    if missing or extra:
        print("self-test failed\n  not reported: %s\n  unexpected: %s" % (missing, extra))
        return 1
    print("self-test: the checker reports all %d planted problems and nothing else" % len(expected))
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f"docs/architecture.md does not hold: {len(problems)} problems")
        return 1
    print("docs/architecture.md holds: every include within its arrows, every named function found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
