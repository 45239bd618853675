#!/usr/bin/env bash
# The newcomer check: README.md's first 40 lines alone get a task done.
#
#   bash scripts/newcomer.sh        # run by .ci/run after the tests
#
# It copies the repository as a fresh clone has it (the files git tracks, plus new ones it does
# not ignore), reads the ```sh blocks in the first 40 lines of README.md, and runs each command
# there as written, one after the other. The fake Ollama stands in for the user's Ollama: it
# serves `qwen3:8b` (the default model) at OLLAMA_HOST, and when asked it reads calc.py and fixes
# it. The check fails when a command fails, when those 40 lines stop showing a server, the test
# command and a request handed to the terminal client, or when the request does not end
# `completed` with the project's failing test fixed.
#
# What a newcomer's machine has and CI's does not is supplied by the environment, never by
# rewriting a command:
# - OLLAMA_HOST: the fake model, as a user's Ollama;
# - `path/to/your/project`, the README's placeholder: a small project whose test fails (its
#   `add` subtracts);
# - CARGO_INSTALL_ROOT: a scratch folder whose bin/ is first on PATH, so `cargo install` does not
#   touch ~/.cargo/bin;
# - CARGO_TARGET_DIR: this repository's target/, so the copy reuses what is built already (the
#   copy keeps the files' times; once the release build exists, a run takes seconds);
# - XDG_STATE_HOME: a scratch state folder for the servers' task databases.
# A command that starts a server (its last word `serve`) runs in the background until
# http://127.0.0.1:8080/healthz answers, and is stopped before the next server starts (both use
# the default port). The test command, `bash scripts/test.sh`, is what .ci/run's step before this
# one runs: it is checked to be that command, not run a second time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

. scripts/lib.sh

README_LINES=40
PLACEHOLDER="path/to/your/project"
HEALTH="http://127.0.0.1:8080/healthz"

echo "== the commands in README.md's first $README_LINES lines"
head -n "$README_LINES" README.md | python3 -c '
import re, sys
fenced = None
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.lstrip().startswith("```"):
        fenced = None if fenced is not None else line.strip()[3:].strip()
        continue
    if fenced in ("sh", "bash", "shell"):
        command = re.sub(r"\s+#\s.*$", "", line).strip()
        if command:
            print(command)
' > "$WORK/commands"
cat "$WORK/commands"
grep -qx 'bash scripts/test.sh' "$WORK/commands" ||
  { echo "README.md's first $README_LINES lines no longer show the test command bash scripts/test.sh" >&2; exit 1; }
grep -q ' serve$' "$WORK/commands" ||
  { echo "README.md's first $README_LINES lines no longer show how to run the server" >&2; exit 1; }
grep -q '^agent-mcp run ' "$WORK/commands" ||
  { echo "README.md's first $README_LINES lines no longer hand a request to the terminal client (agent-mcp run)" >&2; exit 1; }
grep -qF "$PLACEHOLDER" "$WORK/commands" ||
  { echo "README.md's first task no longer names $PLACEHOLDER, the project this check supplies: update scripts/newcomer.sh" >&2; exit 1; }
grep -qx 'bash scripts/test.sh' .ci/run ||
  { echo ".ci/run no longer runs bash scripts/test.sh, the README's test command" >&2; exit 1; }

echo "== a fresh copy of the repository, and a project whose test fails"
mkdir -p "$WORK/clone" "$WORK/project" "$WORK/install" "$WORK/state"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$WORK/clone"
cat > "$WORK/project/calc.py" <<'PY'
def add(a, b):
    return a - b
PY
cat > "$WORK/project/test_calc.py" <<'PY'
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)


if __name__ == "__main__":
    unittest.main()
PY
if (cd "$WORK/project" && python3 -m unittest -q >/dev/null 2>&1); then
  echo "the project's test should fail before the task" >&2
  exit 1
fi

echo "== the fake Ollama"
FAKE="$(bash scripts/bench-exe.sh fake_ollama)"
start_fake_ollama "$FAKE" fake FAKE_OLLAMA_MODEL=qwen3:8b \
  FAKE_OLLAMA_ANSWER="The test failed because add subtracted; it adds now." \
  FAKE_OLLAMA_TOOL_CALLS='[[["read_file",{"path":"calc.py"}]],[["edit_file",{"path":"calc.py","old_text":"return a - b","new_text":"return a + b"}]]]'

export OLLAMA_HOST="$OLLAMA_URL"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_INSTALL_ROOT="$WORK/install"
export XDG_STATE_HOME="$WORK/state"
export PATH="$WORK/install/bin:$PATH"
# The user's own settings would not be a newcomer's.
unset AGENT_MCP_TOKEN
while IFS= read -r var; do unset "$var"; done < <(env | sed -n 's/^\(AGENT_MCP_[A-Z_]*\)=.*/\1/p')

SERVER=""
stop_server() {
  [ -n "$SERVER" ] || return 0
  kill -TERM -- "-$SERVER" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
  SERVER=""
}
trap 'stop_server; cleanup' EXIT

n=0
while IFS= read -r command; do
  n=$((n + 1))
  if [ "$command" = "bash scripts/test.sh" ]; then
    echo "== [$n] $command: the test step of .ci/run, not run twice"
    continue
  fi
  line="${command//$PLACEHOLDER/$WORK/project}"
  if [[ "$command" == *" serve" ]]; then
    stop_server
    if curl -s -o /dev/null "$HEALTH"; then
      echo "something already answers at $HEALTH; the README's server needs port 8080" >&2
      exit 1
    fi
    echo "== [$n] $command   (in the background, until $HEALTH answers)"
    (cd "$WORK/clone" && exec setsid bash -c "$line") > "$WORK/server-$n.log" 2>&1 &
    SERVER=$!
    PIDS+=("$SERVER")
    # A first `cargo run --release` builds the release binary: allow it time.
    for _ in $(seq 1 3600); do
      curl -s -o /dev/null "$HEALTH" && break
      kill -0 "$SERVER" 2>/dev/null || break
      sleep 1
    done
    if ! curl -s -o /dev/null "$HEALTH"; then
      echo "[$n] $command did not start a server:" >&2
      tail -n 40 "$WORK/server-$n.log" >&2
      exit 1
    fi
    continue
  fi
  echo "== [$n] $command"
  if ! (cd "$WORK/clone" && bash -c "$line") > "$WORK/out-$n.log" 2>&1; then
    echo "[$n] $command failed:" >&2
    tail -n 40 "$WORK/out-$n.log" >&2
    [ -n "$SERVER" ] && { echo "-- the server's log:" >&2; tail -n 20 "$WORK/server-"*.log >&2; }
    exit 1
  fi
  tail -n 20 "$WORK/out-$n.log"
done < "$WORK/commands"
stop_server

echo "== the project afterwards"
grep -q 'return a + b' "$WORK/project/calc.py" ||
  { echo "calc.py was not fixed:" >&2; cat "$WORK/project/calc.py" >&2; exit 1; }
(cd "$WORK/project" && python3 -m unittest -q) ||
  { echo "the project's test still fails" >&2; exit 1; }
echo "newcomer: README.md's first $README_LINES lines got the task done"
