#!/usr/bin/env bash
# The weight cache under a memory cap (docs/benchmarks.md, "Weight cache under
# a memory cap"). Runs tinyai-bench on the synthetic 110M-shape model, fp32 and
# zstd-compressed, at memory limits of 100%, 50%, 25% and 10% of the fp32 model
# file's size (--mem-limit), prefetch on and off, adaptive policy and plain LRU
# (25% and 10%, prefetch on); each configuration twice:
#   warm  - the model file in the page cache, no cgroup: misses are copies out
#           of the page cache;
#   cold  - under ../shared/tools/run-capped LIMIT_MB --cold, LIMIT_MB = the
#           memory limit + HEADROOM_MB (code, libc, stacks, the tool itself);
#           the kernel counts page cache too, so misses come from the disk.
# Then the headline: run-capped 256 --cold with --mem-limit 232M, REPEATS times
# per model, and with 2 prefetch threads.
#
# Usage: tools/bench/run_cache_benchmarks.sh [BUILD_DIR]   (default build/release)
# Environment (all optional):
#   MODEL=PATH     fp32 model (default BUILD_DIR/bench-models/synthetic-110M.tmai;
#                  written with tinyai-convert --synthetic when missing)
#   ZMODEL=PATH    its zstd copy (default next to MODEL, -zstd.tmai; written with
#                  tinyai-convert --compress zstd --synthetic when missing)
#   OUT=DIR        results (default BUILD_DIR/cache-bench): results.jsonl, logs
#   HEADROOM_MB=24 cgroup limit above --mem-limit for the cold runs
#   THREADS=2 CONTEXT=256 PROMPT=32 GEN=32 REPEATS=3
#   ZGEN=16        tokens decoded by the zstd runs at limits of 50% and below
#                  (they decode at 1-3 tokens/s; this keeps the sweep near 23 min)
#   PCTS="100 50 25 10"  LRU_PCTS="25 10"
#   IDLE_PCT=70    before each run, wait (up to IDLE_WAIT=90 s) until the CPUs
#                  were at least this idle over one second; the idle share
#                  measured is recorded with the run
#   RUN_CAPPED=PATH  (default ../shared/tools/run-capped)
# Prints one JSON object per run (also in OUT/results.jsonl), then markdown
# tables. Needs root for --cold (drop_caches) and a cgroup v1 memory controller.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin=$build/bin
for tool in tinyai-bench tinyai-convert; do
  [ -x "$bin/$tool" ] || { echo "run_cache_benchmarks: $bin/$tool is missing; build $build first" >&2; exit 2; }
done
spec=dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1
model=${MODEL:-$build/bench-models/synthetic-110M.tmai}
zmodel=${ZMODEL:-${model%.tmai}-zstd.tmai}
out=${OUT:-$build/cache-bench}
headroom=${HEADROOM_MB:-24}
threads=${THREADS:-2}
context=${CONTEXT:-256}
prompt=${PROMPT:-32}
gen=${GEN:-32}
zgen=${ZGEN:-16}
repeats=${REPEATS:-3}
pcts=${PCTS-100 50 25 10}
lru_pcts=${LRU_PCTS-25 10}
idle_pct=${IDLE_PCT:-70}
idle_wait=${IDLE_WAIT:-90}
run_capped=${RUN_CAPPED:-../shared/tools/run-capped}
mkdir -p "$out" "$(dirname "$model")" "$(dirname "$zmodel")"
[ -f "$model" ] || "$bin/tinyai-convert" --synthetic "$spec" "$model" >&2
[ -f "$zmodel" ] || "$bin/tinyai-convert" --compress zstd --synthetic "$spec" "$zmodel" >&2
results=$out/results.jsonl
: > "$results"
model_bytes=$(stat -c %s "$model")
zmodel_bytes=$(stat -c %s "$zmodel")

# Share of CPU time idle over one second, in percent.
idle_now() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local ta=0 tb=0 i
  for i in 1 2 3 4 5 6 7 8; do ta=$((ta + a[i])); tb=$((tb + b[i])); done
  echo $(( 100 * ((b[4] + b[5]) - (a[4] + a[5])) / (tb - ta > 0 ? tb - ta : 1) ))
}
wait_idle() {
  local waited=0 idle
  idle=$(idle_now)
  while [ "$idle" -lt "$idle_pct" ] && [ "$waited" -lt "$idle_wait" ]; do
    sleep 4; waited=$((waited + 5)); idle=$(idle_now)
  done
  echo "$idle"
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
warm() { cat "$1" > /dev/null; cat "$1" > /dev/null; }

# Storage read rates, the yardsticks for bytes read per token x tokens/s:
# the disk (page cache dropped, O_DIRECT 1 MiB reads; one stream, as each of
# the cache's loaders reads one 1 MiB slice at a time, and two streams, as the
# caller and a prefetch worker may load at once) and the page cache (the file
# cached, 1 MiB reads).
dd_rate() {  # prints bytes/s of dd's summary line
  dd "$@" of=/dev/null bs=1M 2>&1 | awk '/copied/ { for (i = 1; i <= NF; ++i) if ($i == "copied,") t = $(i + 1); print $1 / t }'
}
now() { date +%s.%N; }
drop_caches
disk_bps=$(dd_rate if="$model" iflag=direct)
drop_caches
half=$(( model_bytes / 2 / 1048576 ))
t0=$(now)
dd if="$model" of=/dev/null bs=1M iflag=direct count="$half" 2> /dev/null &
dd if="$model" of=/dev/null bs=1M iflag=direct skip="$half" count="$half" 2> /dev/null
wait
disk2_bps=$(awk -v a="$t0" -v b="$(now)" -v n="$half" 'BEGIN { print 2 * n * 1048576 / (b - a) }')
warm "$model"
cache_bps=$(dd_rate if="$model")
probe=$("$bin/tinyai-bench" --probe --json)
gbps() { awk -v b="$1" 'BEGIN { printf "%.3f", b / 1e9 }'; }
printf '{"kind":"storage","disk_read_gbps":%s,"disk_read_gbps_2_streams":%s,"page_cache_read_gbps":%s,"probe":%s}\n' \
    "$(gbps "$disk_bps")" "$(gbps "$disk2_bps")" "$(gbps "$cache_bps")" "$probe" | tee -a "$results"

# run NAME MODE(warm|cold) CGROUP_MB MODEL [bench args...]
run() {
  local name=$1 mode=$2 cg_mb=$3 m=$4; shift 4
  local log=$out/$name.$mode.log json idle rc capped n=$gen
  [ "$mode" = warm ] && warm "$m"
  case $name in zstd-100%*|*-nolimit) ;; zstd-*) n=$zgen ;; esac
  idle=$(wait_idle)
  local cmd=("$bin/tinyai-bench" -m "$m" -t "$threads" --context "$context" --prompt "$prompt" --gen "$n"
             --no-probe --json "$@")
  set +e
  if [ "$mode" = cold ]; then
    json=$("$run_capped" "$cg_mb" --cold -- "${cmd[@]}" 2> "$log")
  else
    json=$("${cmd[@]}" 2> "$log")
  fi
  rc=$?
  set -e
  capped=$(grep -o 'capped: .*' "$log" | tail -1 || true)
  [ -n "$json" ] || json='{}'
  /usr/bin/python3 - "$name" "$mode" "$cg_mb" "$rc" "$idle" "$capped" "$*" "$json" <<'PY' | tee -a "$results"
import json, re, sys
name, mode, cg, rc, idle, capped, args, js = sys.argv[1:]
try:
    r = json.loads(js)
except ValueError:
    r = {"unparsed_output": js}
r.update({"config": name, "mode": mode, "args": args, "rc": int(rc), "cpu_idle_pct_before": int(idle)})
if mode == "cold":
    r["cgroup_limit_mb"] = int(cg)
    m = dict(re.findall(r"(\w+)=([\w.]+)", capped))
    r["capped"] = m
    r["killed"] = int(rc) == 137 or int(rc) == 9
else:
    r["killed"] = False
print(json.dumps(r))
PY
}

start=$SECONDS
mib() { echo $(( ($1 + 1048575) / 1048576 )); }

for m in fp32 zstd; do
  path=$model; [ $m = zstd ] && path=$zmodel
  run "$m-nolimit" warm 0 "$path"
  for pct in $pcts; do
    limit=$(( model_bytes * pct / 100 ))
    cg=$(( $(mib "$limit") + headroom ))
    for pf in on off; do
      extra=(); [ $pf = off ] && extra=(--no-prefetch)
      for mode in warm cold; do
        run "$m-$pct%-prefetch-$pf" "$mode" "$cg" "$path" --mem-limit "$limit" "${extra[@]}"
      done
    done
  done
  for pct in $lru_pcts; do
    limit=$(( model_bytes * pct / 100 ))
    cg=$(( $(mib "$limit") + headroom ))
    for mode in warm cold; do
      run "$m-$pct%-prefetch-on-lru" "$mode" "$cg" "$path" --mem-limit "$limit" --lru
    done
  done
done

# The headline: a 256 MB device, TinyAI told 232 MiB.
for m in fp32 zstd; do
  path=$model; [ $m = zstd ] && path=$zmodel
  for i in $(seq 1 "$repeats"); do
    run "$m-headline-232M-run$i" cold 256 "$path" --mem-limit 232M
  done
  run "$m-headline-232M-prefetch2" cold 256 "$path" --mem-limit 232M --prefetch-threads 2
  run "$m-headline-232M-lru" cold 256 "$path" --mem-limit 232M --lru
done

echo
echo "sweep: $(( SECONDS - start )) s of runs"
/usr/bin/python3 - "$results" "$model_bytes" "$zmodel_bytes" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
model_bytes, zmodel_bytes = int(sys.argv[2]), int(sys.argv[3])
storage = next(r for r in rows if r.get("kind") == "storage")
# The yardstick: the page cache for warm runs, the disk's better rate (one or two streams) for cold ones.
rate = {"warm": storage["page_cache_read_gbps"],
        "cold": max(storage["disk_read_gbps"], storage["disk_read_gbps_2_streams"])}
runs = [r for r in rows if "config" in r]
base = {r["config"].split("-")[0]: r.get("decode_tokens_per_s") for r in runs if r["config"].endswith("-nolimit")}
MiB = 2 ** 20
print("fp32 model %.1f MiB, zstd copy %.1f MiB; disk %.2f GB/s (O_DIRECT 1 MiB reads, one stream; %.2f with two), "
      "page cache %.2f GB/s, memory %.2f GB/s" % (
          model_bytes / MiB, zmodel_bytes / MiB, storage["disk_read_gbps"], storage["disk_read_gbps_2_streams"],
          storage["page_cache_read_gbps"], storage["probe"]["memory_read_gbps"]))
print()
print("| config | mode | cgroup MiB | decode tok/s | vs no limit (warm) | MiB read/token | read GB/s | of storage rate "
      "| misses/token | prefetch hits/token | stalls/token | peak RSS MiB | TinyAI peak MiB | cgroup max MiB | killed | CPU idle before |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in runs:
    cap = r.get("capped", {})
    cgmax = cap.get("max_usage", "").rstrip("MB") or "-"
    if "decode_tokens_per_s" not in r:
        why = "**killed (rc %d)**" % r["rc"] if r["killed"] else "failed (rc %d)" % r["rc"]
        print("| %s | %s | %s | - | - | - | - | - | - | - | - | %s | - | %s | %s | %d%% |" % (
            r["config"], r["mode"], r.get("cgroup_limit_mb", "-"), cap.get("peak_rss", "-").rstrip("MB"), cgmax, why,
            r["cpu_idle_pct_before"]))
        continue
    g = r["gen_tokens"]
    d = r["decode_cache"]
    tps = r["decode_tokens_per_s"]
    b = base.get(r["config"].split("-")[0])
    print("| %s | %s | %s | %.2f | %s | %.1f | %.3f | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s | %d%% |" % (
        r["config"], r["mode"], r.get("cgroup_limit_mb", "-"), tps, "%.0f%%" % (100 * tps / b) if b else "-",
        r["read_bytes_per_token"] / MiB, r["read_gbps"],
        "%.0f%%" % (100 * r["read_gbps"] / rate[r["mode"]]) if r["read_gbps"] > 0 else "-",
        d["misses"] / g, d["prefetch_hits"] / g, d["stalls"] / g, r["peak_rss_bytes"] / MiB,
        r["accounted_peak_bytes"] / MiB, cgmax, "yes (rc %d)" % r["rc"] if r["killed"] else "no",
        r["cpu_idle_pct_before"]))
print()
print("Adaptive vs plain LRU (prefetch on):")
print()
print("| model | limit | mode | adaptive MiB read/token | LRU MiB read/token | adaptive tok/s | LRU tok/s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
by = {(r["config"], r["mode"]): r for r in runs}
for r in runs:
    c = r["config"]
    if not c.endswith("-lru"):
        continue
    a = by.get((c[:-len("-lru")] + ("-run1" if "headline" in c else ""), r["mode"]))
    if not a or "decode_tokens_per_s" not in a or "decode_tokens_per_s" not in r:
        continue
    m, pct = c.split("-")[:2]
    print("| %s | %s | %s | %.1f | %.1f | %.2f | %.2f |" % (
        m, pct, r["mode"], a["read_bytes_per_token"] / MiB, r["read_bytes_per_token"] / MiB,
        a["decode_tokens_per_s"], r["decode_tokens_per_s"]))
PY
