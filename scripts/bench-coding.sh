#!/usr/bin/env bash
# The agent engine on coding work against a real small model: tasks judged by the workspace
# (benches/bench_coding.rs). Not part of CI: it needs a model server and takes many minutes.
#
# It needs an Ollama-compatible server with a tool-capable model. With Ollama itself:
#   ollama pull qwen2.5-coder:1.5b
#   ollama serve                                     # listens on 127.0.0.1:11434
#   BENCH_LLM_URL=http://127.0.0.1:11434 scripts/bench-coding.sh
# and python3 on /usr/bin (the tasks are small Python projects).
#
# Settings (environment):
#   BENCH_LLM_URL    the server's base URL          (default http://127.0.0.1:11435)
#   BENCH_LLM_MODEL  the model name it serves       (default qwen2.5-coder:1.5b)
#   BENCH_LLM_LOCK   if set, a file to hold with flock while the tasks run, so two wall-clock
#                    benchmarks on one machine do not measure each other
#   BENCH_LLM_TRACE  1: print every model reply under its task
#   BENCH_SHIM_LOG   the model server's log, if it writes `prompt N tok (M from KV cache)`
#                    lines (the llama.cpp shim does): the kv% column
#   BENCH_PEER       a program run as `BENCH_PEER <workspace> <request>` instead of agent-mcp,
#                    on the same tasks, model and judge: the peer people compare us with (an
#                    aider wrapper pointed at OLLAMA_PORT, which is set to the benchmark's proxy
#                    so the peer's model calls are counted too)
# Arguments: task-name substrings, to run only the matching tasks (`holdout` runs the held-out
# set, which a run without arguments leaves out).
#
# Prints one line per task (correct? silent completion? state, model calls, tool results,
# prompts that extended the previous one, tokens in/out, KV-cache share, wall seconds, the
# result's start) and the totals.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
run_model_bench bench_coding "$@"
