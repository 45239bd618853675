#!/usr/bin/env bash
# Prints the executable of the [[bench]] target $1 (a model benchmark, a peer, the fake Ollama),
# built first with `cargo build` in the dev profile (further arguments go to cargo: --release for
# the release profile). Cargo names bench executables by a hash, so it is asked, not guessed.
#
#   FAKE="$(bash scripts/bench-exe.sh fake_ollama)"             # target/debug/deps/fake_ollama-…
#   FAKE="$(bash scripts/bench-exe.sh fake_ollama --release)"
set -euo pipefail
cd "$(dirname "$0")/.."
name="$1"
shift
exe="$(cargo build --locked --quiet --message-format=json --bench "$name" "$@" |
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$name" | tail -n1)"
[ -n "$exe" ] || { echo "bench-exe.sh: cargo built no executable for the bench target $name" >&2; exit 1; }
echo "$exe"
