# tinyai-prune: the report has its table (block, sparsity reached, bytes),
# sizes, the savings and the comparison; the output is block-sparse where it
# should be (tinyai-inspect) and quantizes with its blocks kept
# (tinyai-quantize); per-layer sparsity reaches the file; calibrated methods
# run on the model's stream and on a text; bad command lines and bad values
# fail with the right exit status and message without leaving a file.
# Run by ctest as tools_prune_cli with CONVERT, PRUNE, QUANTIZE, INSPECT, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(odd dim=48,hidden=100,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,shared=0)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic ${odd} ${OUT_DIR}/f32.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic ${odd} --dtype q8_g32 ${OUT_DIR}/q8.tmai)

expect_run(RC 0 STDOUT_HAS "blk.1.ffn_down" "4x4" "50.0%" "bytes out" "smaller" "pruning saves" "peak RSS"
           "quality against" "mean KL" "top-1 agreement"
           COMMAND ${PRUNE} --sparsity 0.5 --method magnitude --eval 40 ${OUT_DIR}/f32.tmai ${OUT_DIR}/p.tmai)
# blk.0 at 25% (48 columns: 12 blocks, 9 kept), blk.1 at 75% (3 kept); 8x8
# blocks leave a narrow last block of the 100-wide rows.
# (STDOUT_HAS takes plain text: the rows are matched as expressions after.)
function(expect_rows what)
  foreach(row ${ARGN})
    if(NOT RUN_OUT MATCHES "${row}")
      cli_fail("${what} lacks '${row}':\n${RUN_OUT}")
    endif()
  endforeach()
endfunction()
expect_run(RC 0 COMMAND ${PRUNE} --sparsity 0.75 --layer 0=0.25 --method magnitude --eval 0 ${OUT_DIR}/f32.tmai
           ${OUT_DIR}/layers.tmai)
expect_rows("tinyai-prune --layer 0=0.25" "blk.0.attn_q[^\n]*4x4[^\n]*25.0%" "blk.1.attn_q[^\n]*4x4[^\n]*75.0%")
expect_run(RC 0 COMMAND ${PRUNE} --block 8 --method magnitude --eval 0 ${OUT_DIR}/f32.tmai ${OUT_DIR}/b8.tmai)
expect_rows("tinyai-prune --block 8" "blk.1.ffn_down[^\n]*8x8[^\n]*53.8%")
expect_run(RC 0 COMMAND ${INSPECT} ${OUT_DIR}/p.tmai)
expect_rows("tinyai-inspect of the pruned model" "blk.0.attn_q[^\n]*4x4 blocks, 6 of 12 kept"
            "token_embd[^\n]*f32  [^\n]*crc32c [0-9a-f]+\n" "output [^\n]*f32")
# Quantized after pruning: its blocks kept, its values int4.
expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${QUANTIZE} --all int4 --embedding keep --output keep --eval 20 --quiet
           ${OUT_DIR}/p.tmai ${OUT_DIR}/p-q4.tmai)
expect_run(RC 0 COMMAND ${INSPECT} ${OUT_DIR}/p-q4.tmai)
expect_rows("tinyai-inspect of the pruned, quantized model" "blk.1.ffn_up[^\n]*q4nl_g32[^\n]*4x4 blocks, 6 of 12 kept")

# The measured methods, on the model's own stream and on a text.
file(WRITE ${OUT_DIR}/calib.txt "Once upon a time there was a small robot that counted every byte it had.")
expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${PRUNE} --method activation --calibrate 40 --eval 0 --quiet
           ${OUT_DIR}/f32.tmai ${OUT_DIR}/act.tmai)
expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${PRUNE} --method sparsegpt --calibrate 40 --calibration-text
           ${OUT_DIR}/calib.txt --eval 0 --quiet ${OUT_DIR}/f32.tmai ${OUT_DIR}/sgpt.tmai)

# A dense network: its weight matrices pruned by magnitude (--layer N is
# its N-th), no calibration, no comparison.
file(WRITE ${OUT_DIR}/mlp.def "input 32\nlayer fc1 out=64 act=relu\nlayer fc2 out=10 act=none\n")
expect_run(RC 0 COMMAND ${CONVERT} --dense ${OUT_DIR}/mlp.def ${OUT_DIR}/mlp.tmai)
expect_run(RC 0 STDOUT_HAS "not a language model" COMMAND ${PRUNE} --method magnitude --layer 1=0.25
           ${OUT_DIR}/mlp.tmai ${OUT_DIR}/mlp-pruned.tmai)
expect_rows("tinyai-prune of a dense network" "dense.0.weight[^\n]*4x4[^\n]*50.0%" "dense.1.weight[^\n]*4x4[^\n]*25.0%")
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "calibration runs language models only" ${PRUNE} --method activation
                     ${OUT_DIR}/mlp.tmai ${OUT_DIR}/x.tmai)

expect_usage_error("give IN and OUT.tmai ([-m] IN OUT.tmai)" ${PRUNE} ${OUT_DIR}/f32.tmai)
expect_usage_error("--sparsity: 1 removes every block" ${PRUNE} --sparsity 1 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("--sparsity: -0.5 is out of range" ${PRUNE} --sparsity -0.5 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("--sparsity: 'half' is not a number" ${PRUNE} --sparsity half ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("unknown pruning method 'random'" ${PRUNE} --method random ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("--layer takes N=SPARSITY" ${PRUNE} --layer 1 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("--layer" ${PRUNE} --layer 999=0.5 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("unknown option --bogus" ${PRUNE} --bogus ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "blockSize is 0" ${PRUNE} --block 0 ${OUT_DIR}/f32.tmai
                     ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "no kernel multiplies 3x3 blocks" ${PRUNE} --block 3 ${OUT_DIR}/f32.tmai
                     ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "layerSparsity[5] is set" ${PRUNE} --layer 5=0.5
                     ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "is stored pruned already" ${PRUNE} ${OUT_DIR}/p.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "is stored q8_g32; pruning it would round" ${PRUNE} ${OUT_DIR}/q8.tmai
                     ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "own file" ${PRUNE} ${OUT_DIR}/f32.tmai ${OUT_DIR}/f32.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "" ${PRUNE} ${OUT_DIR}/none.tmai ${OUT_DIR}/x.tmai)
if(EXISTS ${OUT_DIR}/x.tmai OR EXISTS ${OUT_DIR}/x.tmai.part)
  cli_fail("a refused tinyai-prune left ${OUT_DIR}/x.tmai behind")
endif()

# --json: the report as one object, each tensor's row and the quality in it.
expect_run(RC 0 COMMAND ${PRUNE} --sparsity 0.5 --method magnitude --eval 40 --json ${OUT_DIR}/f32.tmai ${OUT_DIR}/json.tmai)
expect_json("tinyai-prune --json" "${RUN_OUT}" quality.positions pruned_bytes tensors.1.rel_rms tensors.1.to)
if(NOT JSON_quality_positions EQUAL 40)
  cli_fail("tinyai-prune --json compared over ${JSON_quality_positions} positions, not --eval 40")
endif()

cli_finish()
