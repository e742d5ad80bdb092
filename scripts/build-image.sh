#!/usr/bin/env bash
# Build the agent image from the working tree, offline:
#
#   scripts/build-image.sh [TAG]        # default TAG: localhost/agent:dev
#
# 1. a fully static agent for this machine's architecture (glibc's static libraries:
#    `-C target-feature=+crt-static` gives a static-pie binary);
# 2. the final stage of containers/agent.Dockerfile around that binary
#    (`--build-arg AGENT_BINARY=prebuilt`), with podman. No base image is pulled.
#
# AGENT_VERSION (default: the workspace version) and GIT_SHA (default: what agent-cli/build.rs
# finds, HEAD of the checkout with `-dirty` when a tracked file has changes) are embedded in the
# binary; the image's labels are what the binary embeds. CARGO_TARGET_DIR is honoured.
# Prints the image's size on stdout's last line.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-localhost/agent:dev}

case "$(uname -m)" in
    x86_64) triple=x86_64-unknown-linux-gnu arch=amd64 ;;
    aarch64) triple=aarch64-unknown-linux-gnu arch=arm64 ;;
    *) echo "scripts/build-image.sh: unsupported machine $(uname -m) (x86_64 or aarch64)" >&2; exit 1 ;;
esac
command -v podman >/dev/null || {
    echo "scripts/build-image.sh: podman is missing: install it (apt-get install podman)" >&2
    exit 1
}

version=${AGENT_VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}

# --target keeps RUSTFLAGS off build scripts and proc macros (they must stay dynamic).
AGENT_VERSION=$version GIT_SHA=${GIT_SHA:-} RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked -p agent-cli --bin agent --no-default-features --target "$triple" >&2
binary=${CARGO_TARGET_DIR:-target}/$triple/release/agent

# The final image has no loader: refuse a dynamically linked binary.
if ! { LC_ALL=C ldd "$binary" 2>&1 || true; } | grep -qE 'not a dynamic executable|statically linked'; then
    echo "scripts/build-image.sh: $binary is not statically linked" >&2
    exit 1
fi

# The commit the binary embeds (`agent --version` prints it on stderr) labels the image.
sha=$("$binary" --version 2>&1 >/dev/null | sed -n 's/^commit //p')
[ -n "$sha" ] || { echo "scripts/build-image.sh: $binary --version names no commit" >&2; exit 1; }

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
