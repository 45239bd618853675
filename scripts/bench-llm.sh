#!/usr/bin/env bash
# The agent engine against a real small model: 36 workspace tasks with checkable answers
# (4 of them asked in Japanese)
# (examples/bench_llm.rs). Not part of CI: it needs a model server and takes minutes.
#
# It needs an Ollama-compatible server with a tool-capable model. With Ollama itself:
#   ollama pull qwen2.5-coder:1.5b
#   ollama serve                                     # listens on 127.0.0.1:11434
#   BENCH_LLM_URL=http://127.0.0.1:11434 scripts/bench-llm.sh
# Any server speaking Ollama's /api/chat (streaming NDJSON, `tools`, `role: tool` messages),
# /api/show and /api/version works the same way.
#
# Settings (environment):
#   BENCH_LLM_URL    the server's base URL          (default http://127.0.0.1:11435)
#   BENCH_LLM_MODEL  the model name it serves       (default qwen2.5-coder:1.5b)
#   BENCH_LLM_LOCK   if set, a file to hold with flock while the tasks run, so two wall-clock
#                    benchmarks on one machine do not measure each other
# Arguments: an optional task-name substring, to run only the matching tasks.
#
# Prints one line per task (correct? silent completion? state, model calls, tool results,
# tokens in/out, wall seconds, the answer's start) and the totals. A *silent completion* is a
# task that ended `completed` without the right answer (empty, markup-only or wrong).
set -euo pipefail
cd "$(dirname "$0")/.."

URL="${BENCH_LLM_URL:-http://127.0.0.1:11435}"
MODEL="${BENCH_LLM_MODEL:-qwen2.5-coder:1.5b}"
if ! curl -fsS --max-time 5 "$URL/api/version" >/dev/null; then
  echo "no Ollama-compatible server answers at $URL (set BENCH_LLM_URL; see this script's header)" >&2
  exit 1
fi

# Build first, outside the lock and the timing.
cargo build --locked --quiet --example bench_llm
BIN=target/debug/examples/bench_llm
echo "# $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
if [ -n "${BENCH_LLM_LOCK:-}" ]; then
  BENCH_LLM_URL="$URL" BENCH_LLM_MODEL="$MODEL" flock "$BENCH_LLM_LOCK" "$BIN" "$@"
else
  BENCH_LLM_URL="$URL" BENCH_LLM_MODEL="$MODEL" "$BIN" "$@"
fi
