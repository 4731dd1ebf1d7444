#!/usr/bin/env bash
# Where the memory went, both sides: for each model and limit, tinyai-generate
# runs under ../shared/tools/run-capped (cold) with --memory-report; prints a
# markdown table of TinyAI's recorded peak (peak_bytes) beside the limit, the
# OS's peak RSS, and at the RSS peak its file pages, the KV pages reserved
# but untouched, and the anonymous bytes beyond TinyAI's account (the C
# library's and the tool's own).
#   tools/bench/run_memory_report.sh BUILD_DIR MODEL...
# Environment: LIMITS (default "none 64M 8M"), CAP_MB (cgroup, 256), GEN (64),
# FALLBACK (a --fallback chain, e.g. all; default none): the level each run
# reached is listed, and a run nothing fits says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
(($# > 1)) || { echo "usage: $0 BUILD_DIR MODEL..." >&2; exit 2; }
build=$1
shift
bin=$build/bin
capped=../shared/tools/run-capped
[[ -x $capped ]] || { echo "$capped not found" >&2; exit 1; }
(($# > 0)) || { echo "usage: $0 BUILD_DIR MODEL..." >&2; exit 2; }
read -ra limits <<< "${LIMITS:-none 64M 8M}"
cap=${CAP_MB:-256}
gen=${GEN:-64}
fallback=${FALLBACK:-}
report=$(mktemp)
err=$(mktemp)
trap 'rm -f "$report" "$err"' EXIT
echo "| model | --mem-limit | fallback level | TinyAI peak (recorded) | peak RSS (OS) | at the RSS peak: file pages | KV reserved, untouched | anonymous beyond the account |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
for m in "$@"; do
  for limit in "${limits[@]}"; do
    args=()
    [[ $limit == none ]] || args=(--mem-limit "$limit")
    [[ -z $fallback ]] || args+=(--fallback "$fallback")
    if ! "$capped" "$cap" --cold -- "$bin/tinyai-generate" -m "$m" -p "Once upon a time" -n "$gen" \
        ${args[@]+"${args[@]}"} --memory-report "$report" > /dev/null 2> "$err"; then
      why=$(grep -m1 -o 'TINYAI_ERR_[A-Z_]*: .\{0,90\}' "$err" || tail -n1 "$err")
      echo "| $(basename "$m") | $limit | | failed: ${why//|/\\|} ... | | | | |"
      continue
    fi
    level=$(sed -n 's/.*fallback: level \([0-9]*\) runs.*/\1/p' "$err")
    detail=$(grep 'fallback: [0-9]*\. .*fits' "$err" | sed 's/.*fallback: [0-9]*\. //; s/: fits.*//; s/.*: //' | tail -n1 || true)
    python3 - "$report" "$(basename "$m")" "$limit" "${level:-0}${detail:+ ($detail)}" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
mib = lambda b: f"{b / 1048576:.2f} MiB"
kib = lambda b: f"{b / 1024:.0f} KiB"
diff = d["differences"]
at = diff.get("at_peak_rss", {})
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {mib(d['peak_bytes'])} | {mib(d['peak_rss_bytes'])} | "
      f"{mib(at.get('file_bytes', 0))} | {mib(diff['kv_reserved_bytes'])}, {mib(diff['kv_untouched_bytes'])} | "
      f"{kib(at.get('anon_beyond_account_bytes', 0))} |")
EOF
  done
done
