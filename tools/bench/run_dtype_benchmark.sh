#!/usr/bin/env bash
# One model shape in each weight dtype, measured in the same run: writes the
# synthetic 110M-shape LLaMA as f32 and in each of DTYPES (seed 1, into
# BUILD_DIR/bench-models), then runs tinyai-bench on them alternately, RUNS
# times each (default 3), and prints every run and the medians' ratios: decode
# and prompt tokens/s of each dtype over f32, and each one's fraction of the
# bandwidth probe (docs/benchmarks.md): per run against that run's probe, and
# the median effective GB/s against the median of every probe of the whole
# benchmark (steadier on a shared host, where one probe reads 24-33 GB/s).
#   tools/bench/run_dtype_benchmark.sh [BUILD_DIR]
# Environment: RUNS, THREADS (default 2), PROMPT (default 128), GEN (default 64),
# SPEC (default the 110M shape), DTYPES (default "f16"; e.g. "f16 q8_g32 q4_g32 q4nl_g32"),
# KV (the KV cache's type for every run: f32 by default, or f16, int8),
# TABLES (kernel tables to alternate, by TINYAI_KERNELS, e.g. "avx2+fma avx512vnni": every
# dtype runs under each, and each table's ratios are over its own f32; "best" is the table
# chosen without the variable, the default).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin=$build/bin
[ -x "$bin/tinyai-bench" ] || { echo "$bin/tinyai-bench not found: build first" >&2; exit 1; }
runs=${RUNS:-3}
threads=${THREADS:-2}
spec=${SPEC:-dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1}
work=$build/bench-models
mkdir -p "$work"
tag=$(printf '%s' "$spec" | cksum | cut -d' ' -f1)
read -ra dtypes <<< "f32 ${DTYPES:-f16}"
declare -A model
for d in "${dtypes[@]}"; do
  model[$d]=$work/dtype-$tag-$d.tmai
  [ -f "${model[$d]}" ] || "$bin/tinyai-convert" --dtype "$d" --synthetic "$spec" "${model[$d]}" > /dev/null
done

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# The median of a space-separated list.
median_of() { tr ' ' '\n' <<< "$1" | grep . | median; }
declare -A decode prompt fraction effective
probes=
read -ra tables <<< "${TABLES:-best}"
# Each run is keyed by its dtype, and by its table when TABLES names any.
keys=()
for t in "${tables[@]}"; do
  for d in "${dtypes[@]}"; do
    if [ -n "${TABLES:-}" ]; then keys+=("$d@$t"); else keys+=("$d"); fi
  done
done
echo "dtype benchmark: $spec, $threads threads, prompt ${PROMPT:-128}, gen ${GEN:-64}, ${KV:-f32} KV cache, $runs runs each, alternated"
for _ in $(seq "$runs"); do
  for k in "${keys[@]}"; do
    d=${k%@*}
    table=()
    [ "$k" = "$d" ] || [ "${k#*@}" = best ] || table=(env "TINYAI_KERNELS=${k#*@}")
    j=$("${table[@]}" "$bin/tinyai-bench" -m "${model[$d]}" -t "$threads" --prompt "${PROMPT:-128}" --gen "${GEN:-64}" \
        --kv-type "${KV:-f32}" --json)
    ran=$(sed -n 's/.*"kernels":"\([^"]*\)".*/\1/p' <<< "$j")
    [ ${#table[@]} -eq 0 ] || [ "$ran" = "${k#*@}" ] || { echo "TINYAI_KERNELS=${k#*@} ran $ran: not a table of this CPU" >&2; exit 1; }
    d=$k
    dec=$(field decode_tokens_per_s <<< "$j")
    pp=$(field pp_tokens_per_s <<< "$j")
    fr=$(field bandwidth_fraction <<< "$j")
    eff=$(field effective_gbps <<< "$j")
    probe=$(field memory_read_gbps <<< "$j")
    echo "$d: decode $dec tokens/s ($eff GB/s), prompt $pp tokens/s, $fr of the bandwidth probe ($probe GB/s), kernels $ran"
    effective[$d]+="$eff "
    probes+="$probe "
    decode[$d]+="$dec "
    prompt[$d]+="$pp "
    fraction[$d]+="$fr "
  done
done
for d in "${keys[@]}"; do
  decode[$d]=$(median_of "${decode[$d]}")
  prompt[$d]=$(median_of "${prompt[$d]}")
  fraction[$d]=$(median_of "${fraction[$d]}")
  effective[$d]=$(median_of "${effective[$d]}")
  echo "median $d: decode ${decode[$d]} tokens/s (${fraction[$d]} of the probe), prompt ${prompt[$d]} tokens/s"
done
probe=$(median_of "$probes")
for d in "${keys[@]}"; do
  awk -v d="$d" -v e="${effective[$d]}" -v p="$probe" \
    'BEGIN { printf "%s: median %.2f GB/s of weights and KV a decoded token, %.3f of the median probe (%.2f GB/s)\n", d, e, e / p, p }'
done
for d in "${keys[@]}"; do
  base=f32${d#"${d%@*}"}  # the f32 run of the same table
  [ "$d" = "$base" ] && continue
  awk -v d="$d" -v a="${decode[$d]}" -v b="${decode[$base]}" -v c="${prompt[$d]}" -v e="${prompt[$base]}" \
    'BEGIN { printf "%s / f32: decode %.2fx, prompt %.2fx\n", d, a / b, c / e }'
done
