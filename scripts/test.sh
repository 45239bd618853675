#!/usr/bin/env bash
# The test command (README.md's, and what CI runs): every test, with what they need installed
# first, so a fresh clone needs nothing by hand.
#
#   bash scripts/test.sh                 # all tests
#   bash scripts/test.sh --test oauth_validator   # extra arguments go to `cargo test`
#
# - the tests' authorization server (oidc-provider on Node 22, into .tools/; once) for the OAuth
#   tests: scripts/oauth.sh;
# - a throwaway PostgreSQL 15 cluster for the PostgreSQL tests (installed with apt-get when
#   missing and run as root): scripts/postgres.sh;
# - the distribution's Chromium and chromedriver for the page test (tests/page.rs; installed
#   with apt-get when missing and run as root): scripts/chromium.sh.
#
# `cargo test --locked` alone runs too; then the tests needing those three print a SKIPPED
# note each (with CI set they fail instead).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/oauth.sh
bash scripts/chromium.sh
exec bash scripts/postgres.sh cargo test --locked "$@"
