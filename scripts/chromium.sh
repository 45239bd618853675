#!/usr/bin/env bash
# Installs the browser of the page tests (tests/page.rs): the distribution's Chromium and its
# WebDriver (Debian `chromium`, `chromium-driver`) with apt-get, when they are missing and this
# runs as root; prints where they are. The tests find them at /usr/bin (or
# AGENT_MCP_TEST_CHROMIUM and AGENT_MCP_TEST_CHROMEDRIVER); without them they are skipped with
# a note, and under CI (CI set) they fail.
#
#   bash scripts/chromium.sh         # install (or check) and print the versions
set -euo pipefail

CHROMIUM="${AGENT_MCP_TEST_CHROMIUM:-/usr/bin/chromium}"
DRIVER="${AGENT_MCP_TEST_CHROMEDRIVER:-/usr/bin/chromedriver}"
if [ ! -x "$CHROMIUM" ] || [ ! -x "$DRIVER" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "scripts/chromium.sh: Chromium and its driver are missing; install them with" \
             "'sudo apt-get install chromium chromium-driver'" >&2
        exit 1
    fi
    echo "== installing Chromium and chromium-driver (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
echo "$("$CHROMIUM" --version 2>/dev/null | head -1) at $CHROMIUM; $("$DRIVER" --version | head -1) at $DRIVER"
