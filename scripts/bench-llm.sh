#!/usr/bin/env bash
# The agent engine against a real small model: 36 workspace tasks with checkable answers
# (4 of them asked in Japanese)
# (benches/bench_llm.rs). Not part of CI: it needs a model server and takes minutes.
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

. scripts/lib.sh
run_model_bench bench_llm "$@"
