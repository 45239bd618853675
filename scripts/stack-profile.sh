#!/usr/bin/env bash
# Instructions per `tools/call agent_status` for each variant of benches/stack.rs, counted by
# callgrind (unmoved by machine load, unlike the criterion wall-clock figures; runs differ by ±2 %).
# Each variant runs twice, with N and 2N calls; the difference divided by N is the cost of one
# call without the setup. The audit writer thread is counted separately. `http` is the full stack
# behind the HTTP edge (request bytes in, response bytes out, no socket).
#
#   bash scripts/stack-profile.sh [variant ...]     (default: bare boxed full and each layer)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "stack-profile: needs valgrind (apt install valgrind)" >&2; exit 2; }
N=${STACK_PROFILE_ITERS:-5000}
cargo bench --bench stack --no-run --message-format=json 2>/dev/null \
  | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | grep /stack- | tail -1 > target/.stack-bench-path
BIN=$(cat target/.stack-bench-path)
[ -x "$BIN" ] || { echo "stack-profile: could not build benches/stack.rs" >&2; exit 1; }
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(bare boxed full http images validate tasks rate_limit auth metrics audit)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
count() { # variant iters -> "main_thread_instructions other_threads_instructions"
  STACK_PROFILE=$1 STACK_PROFILE_ITERS=$2 valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$tmp/cg.$1.$2" "$BIN" --bench >/dev/null 2>&1
  local main=0 other=0 f n
  for f in "$tmp"/cg."$1"."$2"-*; do
    n=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
    if [[ $f == *-01 ]]; then main=$n; else other=$((other + n)); fi
  done
  echo "$main $other"
}
printf '%-12s %14s %14s\n' variant 'instr/call' 'other threads'
for v in "${variants[@]}"; do
  read -r a1 o1 < <(count "$v" "$N")
  read -r a2 o2 < <(count "$v" $((2 * N)))
  printf '%-12s %14d %14d\n' "$v" $(((a2 - a1) / N)) $(((o2 - o1) / N))
done
