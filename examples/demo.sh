#!/usr/bin/env bash
# Runs the bundled example package (examples/packages/gpu-node-tuning) through
# its whole lifecycle with `agent try`: in a throwaway copy-on-write sandbox of
# a host root, then shows what it would change on that host.
#
#   examples/demo.sh            build the agent, make a small host root, run
#                               `agent try` with a node_restart interrupt;
#                               keep the sandbox directory
#   examples/demo.sh --clean    same, then remove the sandbox directory
#   AGENT=/path/to/agent examples/demo.sh    use that binary, skip the build
#
# The lower (host) root is a small root the demo builds in its sandbox
# directory with examples/make-root.sh, holding the settings of an earlier
# install so that the report shows a diff. Its tools come from this machine,
# whatever it has:
#   DEMO_LOWER=auto        (default) busybox if a static one is on PATH, else
#                          host tools
#   DEMO_LOWER=busybox     a static busybox from PATH and its applets (stops
#                          if there is none: apt-get install busybox-static)
#   DEMO_LOWER=host-tools  copies of this machine's sh and the utilities the
#                          package's steps run, with the shared libraries and
#                          the dynamic loader `ldd` names for them
# Nothing is installed: the demo writes only below TMPDIR (default /tmp).
# DEMO_ROOT=/path uses that directory as the lower root instead (DEMO_ROOT=/ is
# this machine's root; without root only files owned by you can be changed in
# the sandbox). The lower root is never written: the demo hashes every file of
# it before and after the run.
#
# No root needed where the kernel allows overlayfs in an unprivileged user
# namespace (Linux 5.11+ with unprivileged user namespaces); elsewhere
# `agent try` stops and says what is missing: run the demo as root there.
set -euo pipefail

usage() {
    # The comment block at the top of this file.
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
}

clean=false
for arg in "$@"; do
    case $arg in
        --clean) clean=true ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "demo: unknown argument '$arg'" >&2
            usage >&2
            exit 2
            ;;
    esac
done

lower_kind=${DEMO_LOWER:-auto}
case $lower_kind in
    auto | busybox | host-tools) ;;
    *)
        echo "demo: DEMO_LOWER must be auto, busybox or host-tools, got '$lower_kind'" >&2
        exit 2
        ;;
esac
if [[ -n ${DEMO_ROOT:-} && -n ${DEMO_LOWER:-} ]]; then
    echo "demo: DEMO_ROOT ('$DEMO_ROOT') and DEMO_LOWER ('$DEMO_LOWER') exclude each other:" \
        "DEMO_ROOT is the lower root, DEMO_LOWER says how to build one" >&2
    exit 2
fi

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg_src=$repo_root/examples/packages/gpu-node-tuning

# --- the agent binary ---------------------------------------------------------
if [[ -n ${AGENT:-} ]]; then
    agent=$AGENT
else
    if ! command -v cargo >/dev/null; then
        echo "demo: cargo is not on PATH: install a Rust toolchain (https://rustup.rs)," \
            "or set AGENT to an agent binary" >&2
        exit 1
    fi
    echo "==> building the agent (cargo build --bin agent)"
    (cd "$repo_root" && cargo build --quiet --bin agent)
    target_dir=${CARGO_TARGET_DIR:-target}
    [[ $target_dir == /* ]] || target_dir=$repo_root/$target_dir
    agent=$target_dir/debug/agent
fi
if [[ ! -x $agent ]]; then
    echo "demo: agent binary '$agent' is missing or not executable" >&2
    exit 1
fi

sandbox=$(mktemp -d "${TMPDIR:-/tmp}/agent-demo.XXXXXX")
sandbox=$(cd "$sandbox" && pwd -P)
# `--version` prints the version on stdout and `commit <sha>` on stderr.
echo "==> agent $("$agent" --version 2>/dev/null), $("$agent" --version 2>&1 >/dev/null)," \
    "sandbox directory $sandbox"

# --- the lower root -----------------------------------------------------------
if [[ -n ${DEMO_ROOT:-} ]]; then
    lower=$(cd "$DEMO_ROOT" && pwd -P)
    echo "==> lower root: $lower (DEMO_ROOT)"
else
    lower=$sandbox/lower
    if ! tools=$("$repo_root/examples/make-root.sh" --tools "$lower_kind" "$lower"); then
        rm -rf "$sandbox"
        exit 1
    fi
    mkdir -p "$lower/etc/gpu-node-tuning"
    # An earlier install's settings, with another power limit.
    sed 's/^power_limit_percent=100$/power_limit_percent=80/' \
        "$pkg_src/configmaps/node-tuning.conf" >"$lower/etc/gpu-node-tuning/node-tuning.conf"
    echo "==> lower root: $lower ($tools, /etc/hostname, an earlier node-tuning.conf)"
fi

# Every file of the lower root, hashed (path, type, mode, content or link target).
fingerprint() {
    (cd "$1" && find . -xdev -printf '%p %y %m %l\n' 2>/dev/null | LC_ALL=C sort &&
        find . -xdev -type f -readable -exec sha256sum {} + 2>/dev/null | LC_ALL=C sort) |
        sha256sum | cut -d' ' -f1
}
before=$(fingerprint "$lower")

interrupt='{"type":"node_restart"}'
echo "==> agent try $pkg_src --root $lower --env GPU_TUNING_TARGET=/" \
    "--env GPU_TUNING_PROFILE=training --interrupt '$interrupt' --keep $sandbox/kept"
rc=0
"$agent" try "$pkg_src" --root "$lower" \
    --env GPU_TUNING_TARGET=/ --env "GPU_TUNING_PROFILE=${GPU_TUNING_PROFILE:-training}" \
    --interrupt "$interrupt" --keep "$sandbox/kept" || rc=$?

after=$(fingerprint "$lower")
if [[ $before == "$after" ]]; then
    echo "==> the lower root after the run: unchanged (every file hashed before and after)"
else
    echo "demo: the lower root changed: $before -> $after" >&2
    exit 1
fi
if ((rc != 0)); then
    echo "demo: 'agent try' failed with exit code $rc; the sandbox directory is kept: $sandbox" >&2
    exit 1
fi

if $clean; then
    rm -rf "$sandbox"
    echo "==> removed the sandbox directory (--clean)"
else
    echo "==> kept: $sandbox/kept (upper/: the sandbox's changes; NN-STAGE.log: each" \
        "stage's output; report.json); remove it with: rm -rf '$sandbox'"
    echo "    metrics (Prometheus text format, docs/metrics.md):" \
        "$sandbox/kept/upper/var/lib/skyhook/try/metrics/gpu-node-tuning.prom"
fi
