# syntax=docker/dockerfile:1
#
# The agent image (SPEC §12): one fully static binary in an otherwise empty image. No shell, no
# libc, no package database: nothing for a CVE scanner to flag besides the agent itself.
#
# CI builds it from the repository root, for either architecture (GB200 nodes are arm64):
#
#   docker buildx build -f containers/agent.Dockerfile --platform linux/amd64,linux/arm64 \
#     --build-arg AGENT_VERSION=0.1.0 --build-arg GIT_SHA="$(git rev-parse HEAD)" \
#     -t skyhook-agent:0.1.0 .
#
# The `build` stage compiles on the build machine's own architecture and cross-links for
# TARGETARCH (amd64 or arm64), so no emulation is needed.
#
# A distributor's binary (the stock agent plus its interrupt kinds, docs/deploy.md): from the
# distributor's repository, naming the manifest, package and binary to build (defaults: this
# repository's agent-cli and agent); the binary is the image's /usr/local/bin/agent whatever
# its name:
#
#   docker buildx build -f path/to/containers/agent.Dockerfile --build-arg AGENT_PACKAGE=my-agent \
#     --build-arg AGENT_BIN=agent --build-arg AGENT_VERSION=0.1.0+my-agent.1.0.0 -t my-agent:1.0.0 .
#
# From a binary built outside the image (offline, as scripts/build-image.sh does): a build
# context holding `agent` (a static build of the agent) and `LICENSE`, and
# `--build-arg AGENT_BINARY=prebuilt`. The final stage is the same either way.
#
# `agent --version` in the image prints AGENT_VERSION when it is given, else the version of the
# agent-cli crate, and on stderr the commit: GIT_SHA, embedded in the binary and labelling the
# image. Give it: the build context has no .git (.dockerignore), so without it the binary's
# commit is `unknown` (agent-cli/build/commit.rs).
#
# The operator runs the image with `args: [MODE, /root, COPY_DIR]` (or the interrupt form), the
# host's / mounted at /root and a privileged security context: the agent chroots into the host,
# which needs root. See docs/deploy.md.

ARG RUST_VERSION=1.95
# Where the binary comes from: `build` (compiled below) or `prebuilt` (the build context's
# `agent`).
ARG AGENT_BINARY=build

FROM --platform=$BUILDPLATFORM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH
ARG AGENT_VERSION=""
ARG GIT_SHA=""
# What to build, as scripts/build-image.sh's --manifest-path, --package and --bin.
ARG AGENT_MANIFEST=Cargo.toml
ARG AGENT_PACKAGE=agent-cli
ARG AGENT_BIN=agent
WORKDIR /src
COPY . .
# glibc's static libraries give a static-pie binary (`-C target-feature=+crt-static`); RUSTFLAGS
# apply to the target only because --target is given, so build scripts and proc macros stay
# dynamic. The paths a build writes into the binary are remapped to the names
# scripts/build-image.sh uses (/agent, /cargo, /target, /rustc/<commit>), so with the same
# toolchain both give the same binary. An empty build argument is left unset, so the binary
# falls back as `agent --version` documents (crate version) instead of embedding an empty
# version.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    set -eu; \
    case "${TARGETARCH}" in \
      amd64) target=x86_64-unknown-linux-gnu; gnu=x86-64-linux-gnu; cc=x86_64-linux-gnu-gcc ;; \
      arm64) target=aarch64-unknown-linux-gnu; gnu=aarch64-linux-gnu; cc=aarch64-linux-gnu-gcc ;; \
      *) echo "unsupported TARGETARCH '${TARGETARCH}' (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    if [ "$(dpkg --print-architecture)" != "${TARGETARCH}" ]; then \
      apt-get update; \
      apt-get install -y --no-install-recommends "gcc-${gnu}" "libc6-dev-${TARGETARCH}-cross"; \
      export "CARGO_TARGET_$(echo "${target}" | tr 'a-z-' 'A-Z_')_LINKER=${cc}"; \
    fi; \
    rustup target add "${target}"; \
    if [ -n "${AGENT_VERSION}" ]; then export AGENT_VERSION; else unset AGENT_VERSION; fi; \
    if [ -n "${GIT_SHA}" ]; then export GIT_SHA; else unset GIT_SHA; fi; \
    sysroot="$(rustc --print sysroot)"; \
    commit="$(rustc -vV | sed -n 's/^commit-hash: //p')"; \
    RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=/src=/agent \
      --remap-path-prefix=${CARGO_HOME}=/cargo \
      --remap-path-prefix=${sysroot}/lib/rustlib/src/rust=/rustc/${commit} \
      --remap-path-prefix=/src/target=/target" \
      CARGO_TARGET_DIR=/src/target \
      cargo build --release --locked --manifest-path "${AGENT_MANIFEST}" -p "${AGENT_PACKAGE}" \
      --bin "${AGENT_BIN}" --no-default-features --target "${target}"; \
    install -D -m 0755 "target/${target}/release/${AGENT_BIN}" /out/agent; \
    if [ "$(dpkg --print-architecture)" = "${TARGETARCH}" ]; then /out/agent --version; fi

# A static agent built outside the image (scripts/build-image.sh).
FROM scratch AS prebuilt
COPY agent /out/agent

FROM ${AGENT_BINARY} AS binary

FROM scratch AS runtime
ARG AGENT_VERSION=""
ARG GIT_SHA=""
# The sha256 digest of the image's CycloneDX SBOM, published next to it (scripts/build-image.sh
# writes both; docs/deploy.md#sbom). Empty when the SBOM was not made.
ARG SBOM_DIGEST=""
LABEL org.opencontainers.image.title="agent" \
      org.opencontainers.image.description="Node agent for Skyhook / NodeWright packages" \
      org.opencontainers.image.source="https://github.com/NVIDIA/skyhook" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${AGENT_VERSION}" \
      org.opencontainers.image.revision="${GIT_SHA}" \
      com.nvidia.skyhook.agent.sbom.digest="${SBOM_DIGEST}"
COPY --from=binary /out/agent /usr/local/bin/agent
COPY LICENSE /usr/share/licenses/agent/LICENSE
# chroot(2) into the host root needs CAP_SYS_CHROOT: the agent runs as root, in a privileged pod.
USER 0:0
ENTRYPOINT ["/usr/local/bin/agent"]
CMD ["--help"]
