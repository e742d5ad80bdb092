#!/usr/bin/env bash
# The project's test command: every check a change must pass. It sets up what it needs itself:
#
#   1. prerequisites: a static busybox (the integration tests build fake host roots from it),
#      python3 (the CPython repr the legacy marker names depend on), strace (stops an agent at a
#      chosen system call), gcc with a static libc (a C step of the try isolation test), podman
#      and runc (the container suite), unshare (user namespaces, below), groff (the check of
#      docs/agent.1), rustfmt and clippy. Run as root with
#      apt-get available, it installs what is missing; otherwise it stops at once, naming it.
#      cargo-deny and cargo-cyclonedx (the SBOM of the image), at the versions below, with
#      `cargo install --locked` when missing. Then `cargo fetch --locked`: every crate the lock
#      file names, for every platform; and kubernetes-validate (PyPI, pinned) in a venv under the
#      target directory, for the container suite's check of examples/kubernetes
#      (KUBERNETES_VALIDATE names it).
#   2. the dependency policy (deny.toml: licenses, duplicate versions, crates.io only; offline,
#      so not advisories), cargo fmt --check, cargo clippy -D warnings, rustdoc -D warnings, a
#      build of every binary (the plugin tests run the distributor binaries of
#      examples/custom-agent and tests/misbehaving_kinds, which `cargo test` does not build
#      for another package's tests).
#   3. cargo test --workspace --locked. Many integration tests chroot into a fake host root,
#      which needs root. As root they run as they are; otherwise every test binary runs inside
#      a user namespace (`unshare --user --map-root-user --mount`) where the test process is
#      root of its own namespace and may chroot. A test that finds itself without root fails:
#      nothing is counted as passed without running.
#   4. the container suite (tests/container): builds the image with scripts/build-image.sh and
#      runs it with podman and runc in the operator's pod shape against fake host roots.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'scripts/test.sh: %s\n' "$*" >&2; }

# --- 1. prerequisites -------------------------------------------------------------------------

# Debian packages providing what is missing.
missing_packages() {
    local need=()
    # The fake roots need a busybox that runs without a loader: the static build.
    # (ldd exits 1 for a static binary: read its output, not its status.)
    if ! [ -x /bin/busybox ] || ! { LC_ALL=C ldd /bin/busybox 2>&1 || true; } \
        | grep -qE 'not a dynamic executable|statically linked'; then
        need+=(busybox-static)
    fi
    command -v python3 >/dev/null || need+=(python3)
    # Stops an agent at a chosen system call (tests/integration/util/agent.rs).
    command -v strace >/dev/null || need+=(strace)
    # `agent try`'s isolation test builds a static C step (gcc -static needs libc.a).
    if ! command -v gcc >/dev/null; then
        need+=(gcc libc6-dev)
    elif ! [ -f "$(gcc -print-file-name=libc.a)" ]; then
        need+=(libc6-dev)
    fi
    # python3 -m venv needs ensurepip (Debian's python3-venv).
    python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
    command -v podman >/dev/null || need+=(podman)
    command -v runc >/dev/null || need+=(runc)
    command -v unshare >/dev/null || need+=(util-linux)
    # The manual page is checked with `groff -man -ww` (tests/integration/completions.rs).
    command -v groff >/dev/null || need+=(groff-base)
    [ ${#need[@]} -eq 0 ] || printf '%s\n' "${need[@]}"
}

is_root() { [ "$(id -u)" = 0 ]; }

mapfile -t need < <(missing_packages)
if [ ${#need[@]} -gt 0 ]; then
    if is_root && command -v apt-get >/dev/null; then
        say "installing ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${need[@]}" >/dev/null
        mapfile -t need < <(missing_packages)
        if [ ${#need[@]} -gt 0 ]; then
            say "still missing after apt-get install: ${need[*]}"
            exit 1
        fi
    else
        say "missing prerequisites: install ${need[*]} (apt-get install ${need[*]}), or run this script as root with apt-get available"
        exit 1
    fi
fi

command -v cargo >/dev/null || {
    say "missing cargo: install a Rust toolchain (rustup, https://rustup.rs)"
    exit 1
}
for component in rustfmt clippy; do
    sub=${component/rustfmt/fmt}
    if ! cargo "$sub" --version >/dev/null 2>&1; then
        if command -v rustup >/dev/null && rustup component add "$component" >/dev/null 2>&1; then
            continue
        fi
        say "missing cargo $sub: install it (rustup component add $component)"
        exit 1
    fi
done

# Cargo subcommands the checks run, at the versions they were written against.
for tool in cargo-deny@0.20.2 cargo-cyclonedx@0.5.9; do
    name=${tool%@*}
    if ! cargo "${name#cargo-}" --version >/dev/null 2>&1; then
        say "installing $tool (cargo install --locked)"
        cargo install --locked --quiet "$tool" || {
            say "could not install $tool: install it (cargo install --locked $tool)"
            exit 1
        }
    fi
done

# Every crate of the lock file, for every platform: builds take what they need, but a check that
# the lock file is current (`cargo metadata --locked --offline`) reads them all.
cargo fetch --locked --quiet

# kubernetes-validate for the container suite (examples/kubernetes --strict), unless given.
if [ -z "${KUBERNETES_VALIDATE:-}" ]; then
    kv_version=1.37.0
    kv_venv=${CARGO_TARGET_DIR:-target}/tools/kubernetes-validate-$kv_version
    case $kv_venv in /*) ;; *) kv_venv=$PWD/$kv_venv ;; esac
    if ! [ -x "$kv_venv/bin/kubernetes-validate" ]; then
        say "installing kubernetes-validate $kv_version into $kv_venv"
        rm -rf "$kv_venv"
        python3 -m venv "$kv_venv"
        "$kv_venv/bin/pip" install --quiet --disable-pip-version-check \
            "kubernetes-validate==$kv_version"
    fi
    export KUBERNETES_VALIDATE=$kv_venv/bin/kubernetes-validate
fi

# Not root: run the test binaries as root of a user namespace, or stop saying why not.
runner_env=()
if ! is_root; then
    if ! unshare --user --map-root-user --mount true 2>/dev/null; then
        say "not root, and this kernel refuses unprivileged user namespaces (unshare --user --map-root-user --mount failed): run the tests as root"
        exit 1
    fi
    host=$(rustc -vV | sed -n 's/^host: //p')
    var="CARGO_TARGET_$(printf '%s' "$host" | tr 'a-z-' 'A-Z_')_RUNNER"
    runner_env=("$var=unshare --user --map-root-user --mount")
    say "not root: running the test binaries in a user namespace ($var)"
    say "not root: the container suite (rootful podman) will fail; run as root to pass it"
fi

# --- 2. dependency policy, formatting, lints, binaries ----------------------------------------

# Advisories need the RustSec database from the network: CI runs them apart
# (docs/deploy.md#dependency-policy).
cargo deny --offline --locked check licenses bans sources
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The container suite has its own harness (`test = false`), which --all-targets leaves out.
cargo clippy --locked -p agent-cli --test container -- -D warnings
# agent-core as a kind's crate builds it: the plugin surface alone, without the feature `engine`.
cargo clippy --locked -p interrupts -p custom-interrupt --all-targets -- -D warnings
cargo build --workspace --bins --locked
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked

# --- 3. unit, integration and doc tests -------------------------------------------------------

env "${runner_env[@]}" cargo test --workspace --locked

# --- 4. the container suite -------------------------------------------------------------------

cargo test -p agent-cli --test container --locked
