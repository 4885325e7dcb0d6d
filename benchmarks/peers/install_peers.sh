#!/usr/bin/env bash
# Install the peer ACP agents compared in docs/benchmarks-peers.md into a
# throwaway npm prefix OUTSIDE the repository (never commit node_modules).
#
#   benchmarks/peers/install_peers.sh            # -> /tmp/term2-peers
#   PEERS_PREFIX=/tmp/peers benchmarks/peers/install_peers.sh
#
# Versions are pinned exactly (checked with `npm view <pkg> version`).
# @zed-industries/claude-code-acp was renamed upstream to
# @agentclientprotocol/claude-agent-acp; the renamed package is the maintained one.
# codex-acp and the Claude Agent SDK ship their native binaries as optional
# platform packages on the registry (no postinstall downloads). npm 11 does not run
# the install scripts of gemini-cli's optional deps (@github/keytar, node-pty) unless
# approved; gemini --acp works without them. claude-agent-acp declares node >=22
# (EBADENGINE warning on node 20) but runs on node 20 for everything measured here.
set -euo pipefail

PREFIX="${PEERS_PREFIX:-/tmp/term2-peers}"
mkdir -p "$PREFIX"

PACKAGES=(
  "@zed-industries/codex-acp@0.16.0"
  "@agentclientprotocol/claude-agent-acp@0.101.0"
  "@google/gemini-cli@0.61.0"
)

# The prefix gets its own package.json / package-lock.json; nothing lands in the repo.
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=warn "${PACKAGES[@]}"

echo "installed into $PREFIX/node_modules/.bin:"
ls "$PREFIX/node_modules/.bin" | grep -E '^(codex-acp|claude-agent-acp|gemini)$' || true
