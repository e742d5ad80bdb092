#!/usr/bin/env bash
# Runs the bundled example package (examples/packages/gpu-node-tuning) through
# the agent on this machine: no root, no cluster, nothing written outside one
# temporary sandbox directory.
#
#   examples/demo.sh            build the agent, then: plan, apply, apply-check,
#                               an upgrade to 1.2.0 (plan, upgrade,
#                               upgrade-check) and status; keep the sandbox
#   examples/demo.sh --clean    same, then remove the sandbox
#   AGENT=/path/to/agent examples/demo.sh    use that binary, skip the build
#
# The agent runs with ROOT "/" (no chroot), its state and logs in the sandbox,
# and the package installs its files under $SANDBOX/host (GPU_TUNING_TARGET).
# Version 1.2.0 is the bundled 1.1.0 with its package_version raised.
# GPU_TUNING_PROFILE (training, inference or balanced; default training)
# selects the tuning profile. DEMO_ROOT=/path runs it against that directory
# as the host root instead of "/" (a fake host root with a POSIX sh; the
# agent then chroots into it, which needs root).
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

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg_src=$repo_root/examples/packages/gpu-node-tuning
pkg=gpu-node-tuning
v1=$(sed -n 's/^[[:space:]]*"package_version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' \
    "$pkg_src/config.json")
v2=1.2.0
if [[ $v1 != 1.1.0 ]]; then
    echo "demo: expected package_version 1.1.0 in $pkg_src/config.json, got '$v1'" >&2
    exit 1
fi

# --- the agent binary ---------------------------------------------------------
if [[ -n ${AGENT:-} ]]; then
    agent=$AGENT
else
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

# --- the sandbox --------------------------------------------------------------
# Resolved with pwd -P: the agent refuses state paths that go through symlinks.
root=/
prefix=
if [[ -n ${DEMO_ROOT:-} ]]; then
    root=$(cd "$DEMO_ROOT" && pwd -P)
    prefix=$root
    mkdir -p "$root/tmp"
    sandbox=$(mktemp -d "$root/tmp/agent-demo.XXXXXX")
else
    sandbox=$(mktemp -d "${TMPDIR:-/tmp}/agent-demo.XXXXXX")
fi
sandbox=$(cd "$sandbox" && pwd -P)
# What the agent and the steps see: the sandbox as a host path under ROOT.
hsandbox=${sandbox#"$prefix"}
mkdir -p "$sandbox/packages" "$sandbox/host"

# Stage one version of the package. root_dir/ is left out: with ROOT "/" the
# agent would overlay it onto this machine's real /etc (the overlay is covered
# by the integration tests, in a fake host root).
stage_package() {
    local version=$1 dir=$sandbox/packages/$pkg-$1
    cp -R "$pkg_src" "$dir"
    rm -rf "$dir/root_dir"
    sed -i "s/\"package_version\": \"$v1\"/\"package_version\": \"$version\"/" "$dir/config.json"
}
stage_package "$v1"
stage_package "$v2"

echo "==> agent $("$agent" --version), sandbox $sandbox"
echo "    ROOT $root; state, logs and installed files (GPU_TUNING_TARGET) in the sandbox"

agent_env() {
    env "SKYHOOK_RESOURCE_ID=demo-uid-1_${pkg}_$1" \
        "SKYHOOK_ROOT_DIR=$hsandbox/state" \
        "SKYHOOK_LOG_DIR=$hsandbox/logs" \
        "COPY_RESOLV=false" \
        "GPU_TUNING_TARGET=$hsandbox/host" \
        "GPU_TUNING_PROFILE=${GPU_TUNING_PROFILE:-training}" \
        "${@:2}"
}

failed() {
    echo >&2
    echo "demo: '$1' failed with exit code $2; stopping." >&2
    echo "demo: the sandbox is kept for inspection: $sandbox (logs in $sandbox/logs)" >&2
    exit 1
}

# `agent plan`, its step lines and summary (the full plan also shows each step's
# header, arguments, environment and the files the run would write).
plan() {
    local mode=$1 version=$2 rc=0 out
    echo "==> agent plan $mode $root $hsandbox/packages/$pkg-$version   (excerpt)"
    out=$(agent_env "$version" "$agent" plan "$mode" "$root" "$hsandbox/packages/$pkg-$version") || rc=$?
    ((rc == 0)) || failed "agent plan $mode" "$rc"
    grep -E '^(plan:|versions:|  (run|skip|fail|not-reached) |summary:)' <<<"$out"
}

# A stage run (stdout and stderr). The first is shown whole; later ones without
# the legacy banner, the steps' own output (it is in the step logs), the start line
# and the per-step result lines (the "run finished" line sums them up).
banner_shown=false
run() {
    local mode=$1 version=$2 rc=0 out
    out=$(agent_env "$version" "$agent" "$mode" "$root" "$hsandbox/packages/$pkg-$version" 2>&1) || rc=$?
    if $banner_shown; then
        echo "==> agent $mode $root $hsandbox/packages/$pkg-$version   (excerpt: headers and result)"
        # The banner is the block from its first dashed line to the next.
        awk 'NR == 1 && /^-+$/ { skip = 1; next } skip && /^-+$/ { skip = 0; next }
             !skip && !/^\[/ && !/ INFO (run started|step finished) /' <<<"$out"
    else
        echo "==> agent $mode $root $hsandbox/packages/$pkg-$version"
        printf '%s\n' "$out"
        banner_shown=true
    fi
    ((rc == 0)) || failed "agent $mode" "$rc"
}

plan apply "$v1"
run apply "$v1"
run apply-check "$v1"
plan upgrade "$v2"
run upgrade "$v2"
run upgrade-check "$v2"

echo "==> agent status $root   (excerpt: verdict, history, checks)"
rc=0
out=$(agent_env "$v2" "$agent" status "$root") || rc=$?
((rc == 0)) || failed "agent status" "$rc"
# Up to the first per-version section, and the check stages that passed.
awk '/^  version / { cut = 1 } !cut || /^check stages whose checks all passed/' <<<"$out"
echo "    metrics (Prometheus text format, docs/metrics.md): $sandbox/state/metrics/$pkg.prom"

if $clean; then
    rm -rf "$sandbox"
    echo "==> removed the sandbox (--clean)"
else
    echo "==> kept the sandbox; remove it with: rm -rf '$sandbox'"
fi
