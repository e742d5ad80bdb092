#!/usr/bin/env bash
# Build the agent image from the working tree, offline:
#
#   scripts/build-image.sh [TAG]        # default TAG: localhost/agent:dev
#   scripts/build-image.sh --manifest-path ../my-agent/Cargo.toml --package my-agent --bin agent TAG
#
# The second form builds a distributor's binary (the stock agent plus its interrupt kinds, see
# docs/deploy.md, "Third-party kinds"): the package and binary named, from the workspace of
# that manifest, with its lock file (--locked) and release profile. Defaults: this repository's
# Cargo.toml, package agent-cli, binary agent. Whatever its name, the binary is the image's
# /usr/local/bin/agent.
#
# 1. a fully static agent for this machine's architecture (glibc's static libraries:
#    `-C target-feature=+crt-static` gives a static-pie binary);
# 2. the final stage of containers/agent.Dockerfile around that binary
#    (`--build-arg AGENT_BINARY=prebuilt`), with podman. No base image is pulled.
#
# AGENT_VERSION (default: the workspace version; for another package
# `<agent-cli version>+<package>.<package version>`, naming the distributor's build) and GIT_SHA
# (default: HEAD, `-dirty` when the tree has changes) are embedded in the binary and label the
# image. CARGO_TARGET_DIR is honoured.
# Prints the image's size on stdout's last line.
set -euo pipefail
cd "$(dirname "$0")/.."

manifest=Cargo.toml package=agent-cli bin=agent tag=
while [ $# -gt 0 ]; do
    case "$1" in
        # Relative to where the script was called from (it runs from the repository root).
        --manifest-path) case "${2:?--manifest-path needs a path}" in
                /*) manifest=$2 ;;
                *) manifest=$OLDPWD/$2 ;;
            esac
            manifest=$(realpath "$manifest"); shift 2 ;;
        --package|-p) package=${2:?--package needs a name}; shift 2 ;;
        --bin) bin=${2:?--bin needs a name}; shift 2 ;;
        -*) echo "scripts/build-image.sh: unknown option $1 (--manifest-path PATH, --package NAME, --bin NAME)" >&2; exit 2 ;;
        *) [ -z "$tag" ] || { echo "scripts/build-image.sh: one TAG only, not $tag and $1" >&2; exit 2; }
           tag=$1; shift ;;
    esac
done
tag=${tag:-localhost/agent:dev}
[ -f "$manifest" ] || { echo "scripts/build-image.sh: no manifest at $manifest" >&2; exit 2; }

case "$(uname -m)" in
    x86_64) triple=x86_64-unknown-linux-gnu arch=amd64 ;;
    aarch64) triple=aarch64-unknown-linux-gnu arch=arm64 ;;
    *) echo "scripts/build-image.sh: unsupported machine $(uname -m) (x86_64 or aarch64)" >&2; exit 1 ;;
esac
command -v podman >/dev/null || {
    echo "scripts/build-image.sh: podman is missing: install it (apt-get install podman)" >&2
    exit 1
}

# The version of a package of the manifest's workspace (`cargo pkgid` ends with it).
pkg_version() {
    local id
    id=$(cargo pkgid --quiet --locked --manifest-path "$manifest" -p "$1") || exit 1
    echo "${id##*[#@]}"
}
if [ "$package" = agent-cli ] && [ "$manifest" = Cargo.toml ]; then
    version=${AGENT_VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}
elif [ -n "${AGENT_VERSION:-}" ]; then
    version=$AGENT_VERSION
else
    agent_version=$(pkg_version agent-cli)
    package_version=$(pkg_version "$package")
    version=$agent_version+$package.$package_version
fi
if [ -z "${GIT_SHA:-}" ] && git rev-parse HEAD >/dev/null 2>&1; then
    GIT_SHA=$(git rev-parse HEAD)
    [ -z "$(git status --porcelain 2>/dev/null)" ] || GIT_SHA=$GIT_SHA-dirty
fi
sha=${GIT_SHA:-}

# --target keeps RUSTFLAGS off build scripts and proc macros (they must stay dynamic).
target_dir=${CARGO_TARGET_DIR:-$(dirname "$manifest")/target}
AGENT_VERSION=$version GIT_SHA=$sha RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=$target_dir \
    cargo build --release --locked --manifest-path "$manifest" -p "$package" --bin "$bin" \
    --no-default-features --target "$triple" >&2
binary=$target_dir/$triple/release/$bin

# The final image has no loader: refuse a dynamically linked binary.
if ! { LC_ALL=C ldd "$binary" 2>&1 || true; } | grep -qE 'not a dynamic executable|statically linked'; then
    echo "scripts/build-image.sh: $binary is not statically linked" >&2
    exit 1
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$binary" "$context/agent"
cp LICENSE "$context/LICENSE"
podman build --quiet \
    --file containers/agent.Dockerfile \
    --platform "linux/$arch" \
    --build-arg AGENT_BINARY=prebuilt \
    --build-arg AGENT_VERSION="$version" \
    --build-arg GIT_SHA="$sha" \
    --tag "$tag" \
    "$context" >&2
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "built $tag: $size bytes uncompressed ($(( (size + 1023) / 1024 )) KiB)"
