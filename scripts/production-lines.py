#!/usr/bin/env python3
"""Production lines of the tree, per layer: what docs/architecture.md's size table counts.

Production code is every tracked .rs file except the test suites (tests/, any tests/ folder,
tests.rs files, inline `#[cfg(test)] mod tests { ... }` blocks), the benchmark (bench/), the
fuzz targets (fuzz/) and the examples (examples/). A layer is an agent-core folder (or
lib.rs), or another crate. `lines` counts every line; `code` leaves out blank and comment
lines.

    scripts/production-lines.py [REV]     # REV: a commit (default: the work tree)
"""

import collections
import subprocess
import sys


def files(rev):
    args = ["git", "ls-tree", "-r", "--name-only", rev] if rev else ["git", "ls-files"]
    return [f for f in subprocess.run(args, capture_output=True, text=True, check=True).stdout.split() if f.endswith(".rs")]


def read(rev, path):
    if rev:
        return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout
    with open(path, encoding="utf-8") as f:
        return f.read()


def is_production(path):
    parts = path.split("/")
    if parts[0] in ("bench", "fuzz", "tests", "examples"):
        return False
    return "tests" not in parts[:-1] and parts[-1] != "tests.rs"


def without_test_modules(lines):
    out, skipping, depth = [], False, 0
    for i, line in enumerate(lines):
        text = line.strip()
        if skipping:
            depth += line.count("{") - line.count("}")
            skipping = depth > 0
            continue
        if text == "#[cfg(test)]" and i + 1 < len(lines) and lines[i + 1].strip().startswith("mod ") and lines[i + 1].strip().endswith("{"):
            skipping, depth = True, 0
            continue
        out.append(text)
    return out


def layer(path):
    parts = path.split("/")
    if path.startswith("agent-core/src/"):
        return "agent-core/" + parts[2].removesuffix(".rs")
    return parts[0]


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else None
    lines, code = collections.Counter(), collections.Counter()
    for path in files(rev):
        if not is_production(path):
            continue
        kept = without_test_modules(read(rev, path).split("\n"))
        lines[layer(path)] += len(kept)
        code[layer(path)] += sum(1 for t in kept if t and not t.startswith("//"))
    print(f"{'layer':24} {'lines':>7} {'code':>7}")
    for name in sorted(lines):
        print(f"{name:24} {lines[name]:7} {code[name]:7}")
    print(f"{'total':24} {sum(lines.values()):7} {sum(code.values()):7}")


if __name__ == "__main__":
    main()
