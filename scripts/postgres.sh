#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL 15 cluster and AGENT_MCP_TEST_PG_URL pointing at
# it, and AGENT_MCP_TEST_PG_BIN naming PostgreSQL's programs (for tests that run a cluster of
# their own, to restart it); the cluster is dropped when the command ends. The PostgreSQL tests
# read those variables (without them they are skipped with a note, or fail when CI is set).
#
#   bash scripts/postgres.sh cargo test --locked
#
# Uses pg_virtualenv (postgresql-common) and the machine's PostgreSQL 15; installs both with
# apt-get when they are missing and this runs as root.
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: bash scripts/postgres.sh COMMAND [ARGS...]" >&2
    exit 2
fi

if ! command -v pg_virtualenv >/dev/null 2>&1 || [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "scripts/postgres.sh: PostgreSQL 15 and pg_virtualenv are missing; install them with" \
             "'sudo apt-get install postgresql-15 postgresql-common'" >&2
        exit 1
    fi
    echo "== installing PostgreSQL 15 (apt-get)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-common >/dev/null
fi

# Room for several test servers at once, each with its pool and LISTEN connection. `-t`: the
# cluster lives in a temporary folder even as root, so two runs on one machine (two checkouts,
# or a test run beside a benchmark) each get their own instead of meeting on the one
# machine-wide `regress` cluster, which pg_virtualenv then refuses to overwrite.
exec pg_virtualenv -t -v 15 -o max_connections=400 -- bash -c '
    export AGENT_MCP_TEST_PG_URL="postgres://${PGUSER}:${PGPASSWORD}@${PGHOST:-localhost}:${PGPORT:-5432}/${PGDATABASE:-postgres}"
    # initdb and pg_ctl, for the tests that stop and start a cluster of their own (the shared
    # one above must stay up for the others).
    export AGENT_MCP_TEST_PG_BIN="$("${PG_CONFIG:-pg_config}" --bindir)"
    echo "== PostgreSQL $PGVERSION for the tests on ${PGHOST:-localhost}:${PGPORT:-5432}" >&2
    exec "$@"
' agent-mcp-postgres "$@"
