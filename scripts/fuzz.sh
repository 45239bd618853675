#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for the given number of seconds (default 60), one
# after another, single-process (the machine is shared), and prints executions and findings.
#
#   scripts/fuzz.sh [seconds] [target ...]
#
# Toolchain: cargo-fuzz needs nightly for sanitizers (-Zsanitizer). With a nightly toolchain
# installed it uses `cargo +nightly fuzz run` with AddressSanitizer. Without one it falls back
# to the stable toolchain with RUSTC_BOOTSTRAP=1 and `--sanitizer none` (coverage-guided
# fuzzing still works; only ASan's memory checks are lost, and the crate has no `unsafe`).
# Crashes land in fuzz/artifacts/<target>/; the corpus grows in fuzz/corpus/<target>/,
# seeded from fuzz/seeds/<target>/. Builds go to fuzz/target, away from the main target dir.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
all_targets=(jsonrpc_stack tool_arguments images ndjson_stream config_yaml text_calls)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

toolchain=()
sanitizer=(--sanitizer address)
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    echo "== no nightly toolchain: stable with RUSTC_BOOTSTRAP=1, no sanitizer"
    export RUSTC_BOOTSTRAP=1
    sanitizer=(--sanitizer none)
fi
export CARGO_TARGET_DIR="$PWD/fuzz/target"
mkdir -p fuzz/logs

# Build every target once, then run the binaries: the tree may change while this runs (it is
# shared), and `cargo fuzz run` would rebuild before each target.
echo "== building ${targets[*]}"
for target in "${targets[@]}"; do
    cargo "${toolchain[@]}" fuzz build "${sanitizer[@]}" "$target" >fuzz/logs/build.log 2>&1 || {
        tail -30 fuzz/logs/build.log
        exit 1
    }
done
bin_dir="$CARGO_TARGET_DIR/$(rustc -vV | sed -n 's/^host: //p')/release"

summary=()
for target in "${targets[@]}"; do
    echo "== fuzzing $target for ${seconds}s"
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    log="fuzz/logs/$target.log"
    status=0
    "$bin_dir/$target" "fuzz/corpus/$target" "fuzz/seeds/$target" \
        -artifact_prefix="fuzz/artifacts/$target/" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
    crashes=$(find "fuzz/artifacts/$target" -type f | wc -l)
    summary+=("$target: ${runs:-?} executions, exit $status, ${crashes} artifact(s)")
    if [ "$status" -ne 0 ]; then
        echo "!! $target failed (exit $status); the end of $log:"
        tail -30 "$log"
    fi
done

echo "== summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
