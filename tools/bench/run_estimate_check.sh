#!/usr/bin/env bash
# The pre-flight estimate against a kernel-enforced limit: for each model,
# cgroup size (../shared/tools/run-capped, cold) and KV type, inside the
# cgroup `tinyai-inspect --estimate --mem-limit auto` gives the limit the
# cgroup leaves and the estimate for it, then tinyai-generate runs with that
# limit (--stats); prints a markdown table: the estimate's mode, peak and
# process peak beside what TinyAI held, the OS's peak RSS, the cgroup's
# peak usage (page cache included) and the exit status (137: killed).
#   tools/bench/run_estimate_check.sh [BUILD_DIR] MODEL...
# Environment: CAPS (MB, default "64 128 256"), KV_TYPES (default "f32 int8"),
# CONTEXT (256), GEN (32).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
shift || true
bin=$build/bin
capped=../shared/tools/run-capped
[[ -x $capped ]] || { echo "$capped not found" >&2; exit 1; }
(($# > 0)) || { echo "usage: $0 BUILD_DIR MODEL..." >&2; exit 2; }
read -ra caps <<< "${CAPS:-64 128 256}"
read -ra kvs <<< "${KV_TYPES:-f32 int8}"
context=${CONTEXT:-256}
gen=${GEN:-32}
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([0-9A-Za-z_.]*\).*/\1/p"; }
echo "| model | cgroup | KV | auto limit | estimate: mode, TinyAI peak, process peak | TinyAI held | peak RSS (OS) | cgroup peak | exit |"
echo "| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |"
for m in "$@"; do
  for cap in "${caps[@]}"; do
    for kv in "${kvs[@]}"; do
      out=$("$capped" "$cap" --cold -- sh -c "
        est=\$('$bin/tinyai-inspect' '$m' --estimate --json --bandwidth 1 --mem-limit auto --context $context \
               --kv-type $kv 2>/dev/null) || { echo \"estimate failed\"; exit 3; }
        echo \"\$est\"
        limit=\$(printf '%s' \"\$est\" | sed -n 's/.*\"mem_limit_bytes\":\([0-9]*\).*/\1/p')
        '$bin/tinyai-generate' -m '$m' -p 'Once upon a time' -n $gen --context $context --kv-type $kv \
          --mem-limit \$limit --stats 2>&1 >/dev/null" 2>&1) && rc=0 || rc=$?
      rc=$(sed -n 's/^capped: rc=\([0-9]*\).*/\1/p' <<< "$out")
      use=$(sed -n 's/^capped: .*max_usage=\([0-9]*\)MB.*/\1/p' <<< "$out")
      if grep -q "estimate failed" <<< "$out"; then
        echo "| $(basename "$m") | $cap MB | $kv | - | does not fit: $(grep -o 'TINYAI_ERR[A-Z_]*' <<< "$out" | head -1) | - | - | $use MB | $rc |"
        continue
      fi
      limit=$(field mem_limit_bytes <<< "$out" | head -1)
      mode=$(field mode <<< "$out" | head -1)
      peak=$(field peak_bytes <<< "$out" | head -1)
      prss=$(field peak_rss_bytes <<< "$out" | head -1)
      held=$(sed -n 's/.*TinyAI held at most \([0-9.]*\) MiB.*/\1/p' <<< "$out")
      rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB (OS).*/\1/p' <<< "$out")
      echo "| $(basename "$m") | $cap MB | $kv | $(mib "$limit") MiB | $mode, $(mib "$peak") MiB, $(mib "$prss") MiB" \
           "| ${held:--} MiB | ${rss:--} MiB | $use MB | $rc |"
    done
  done
done
