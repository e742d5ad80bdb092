#!/usr/bin/env bash
# Write what the command tree (agent-cli/src/cli/) generates and the repository keeps: the
# manual page docs/agent.1 and the shell completions in docs/completions/. The integration test
# `completions::the_committed_completions_and_man_page_are_what_the_binary_generates` fails
# while they differ from what the binary prints; run this after changing the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q -p agent-cli --bin agent
agent() { cargo run --locked -q -p agent-cli --bin agent -- "$@"; }
agent man >docs/agent.1
agent completions bash >docs/completions/agent.bash
agent completions zsh >docs/completions/_agent
agent completions fish >docs/completions/agent.fish
echo "scripts/generate-cli-docs.sh: wrote docs/agent.1 and docs/completions/" >&2
