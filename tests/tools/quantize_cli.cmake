# tinyai-quantize: the per-kind and override flags reach the file (tinyai-inspect
# lists the dtypes), the output is what tinyai-convert --dtype writes for the
# same precision (byte for byte), the report has its table, sizes and the
# comparison, and bad command lines fail with the right exit status and
# message without leaving a file.
# Run by ctest as tools_quantize_cli with CONVERT, QUANTIZE, INSPECT, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(odd dim=48,hidden=100,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,shared=0)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic ${odd} ${OUT_DIR}/f32.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic ${odd} --dtype q8_g32 ${OUT_DIR}/conv-q8.tmai)

expect_run(RC 0 STDOUT_HAS "blk.1.ffn_down" "q8_g32" "rel. RMS" "smaller" "peak RSS" "quality against"
           "mean KL" "top-1 agreement"
           COMMAND ${QUANTIZE} --all int8 --eval 40 ${OUT_DIR}/f32.tmai ${OUT_DIR}/q8.tmai)
file(READ ${OUT_DIR}/q8.tmai a HEX)
file(READ ${OUT_DIR}/conv-q8.tmai b HEX)
# The files differ only in metadata the converter adds; compare the data.
file(SIZE ${OUT_DIR}/q8.tmai sa)
file(SIZE ${OUT_DIR}/conv-q8.tmai sb)
if(NOT sa EQUAL sb)
  cli_fail("tinyai-quantize --all int8 wrote ${sa} bytes, tinyai-convert --dtype q8_g32 ${sb}")
endif()
string(SUBSTRING "${a}" 8192 -1 da)
string(SUBSTRING "${b}" 8192 -1 db)
if(NOT da STREQUAL db)
  cli_fail("tinyai-quantize --all int8 and tinyai-convert --dtype q8_g32 wrote different tensor data")
endif()

expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${QUANTIZE} --attention fp16 --ffn int4-sym --embedding int4
           --output keep --layer 1=int8 --tensor blk.1.ffn_up=fp32 --eval 0 --quiet ${OUT_DIR}/f32.tmai
           ${OUT_DIR}/mixed.tmai)
expect_run(RC 0 COMMAND ${INSPECT} ${OUT_DIR}/mixed.tmai)
foreach(row "token_embd[^\n]*q4nl_g32" "output [^\n]*f32" "blk.0.attn_q[^\n]*f16" "blk.0.ffn_gate[^\n]*q4_g32"
            "blk.1.attn_q[^\n]*q8_g32" "blk.1.ffn_up[^\n]*f32" "blk.1.ffn_gate[^\n]*q8_g32")
  if(NOT RUN_OUT MATCHES "${row}")
    cli_fail("tinyai-inspect of the mixed model lacks '${row}':\n${RUN_OUT}")
  endif()
endforeach()

# GGUF's block formats by their names: K-quants where the rows are whole
# blocks of 256, llama.cpp's fallback (shown in the table) where they are not,
# with calibration; GGUF's names for TinyAI's own formats.
set(k256 dim=256,hidden=320,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,shared=0)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic ${k256} ${OUT_DIR}/k256.tmai)
expect_run(RC 0 STDOUT_HAS "q4_k" "q5_g32" "mean KL"
           EXPECT "blk.0.ffn_down: rows of 320 values are not whole blocks of 256 (a K-quant's): q5_0, llama.cpp's fallback for q4_k"
           COMMAND ${QUANTIZE} --all Q4_K --calibrate 40 --eval 40 ${OUT_DIR}/k256.tmai ${OUT_DIR}/k4.tmai)
expect_run(RC 0 COMMAND ${INSPECT} ${OUT_DIR}/k4.tmai)
foreach(row "blk.0.attn_q[^\n]*q4_k" "blk.1.ffn_up[^\n]*q4_k" "blk.0.ffn_down[^\n]*q5_g32" "token_embd[^\n]*q4_k")
  if(NOT RUN_OUT MATCHES "${row}")
    cli_fail("tinyai-inspect of the q4_k model lacks '${row}':\n${RUN_OUT}")
  endif()
endforeach()
expect_run(RC 0 COMMAND ${QUANTIZE} --all q6_k --ffn q5_k --output q8_0 --eval 0 --quiet ${OUT_DIR}/k256.tmai
           ${OUT_DIR}/k6.tmai)
expect_run(RC 0 COMMAND ${INSPECT} ${OUT_DIR}/k6.tmai)
foreach(row "blk.0.attn_v[^\n]*q6_k" "blk.0.ffn_gate[^\n]*q5_k" "blk.0.ffn_down[^\n]*q5m_g32" "output [^\n]*q8_g32")
  if(NOT RUN_OUT MATCHES "${row}")
    cli_fail("tinyai-inspect of the q6_k/q5_k model lacks '${row}':\n${RUN_OUT}")
  endif()
endforeach()
expect_usage_error("unknown precision 'q3_k'" ${QUANTIZE} --all q3_k ${OUT_DIR}/k256.tmai ${OUT_DIR}/x.tmai)

# Calibration on the model's own stream and on a text; a dense network
# quantizes but does not calibrate.
file(WRITE ${OUT_DIR}/calib.txt "Once upon a time there was a small robot that counted every byte it had.")
expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${QUANTIZE} --all int4 --calibrate 50 --eval 0 --quiet ${OUT_DIR}/f32.tmai
           ${OUT_DIR}/cal.tmai)
expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${QUANTIZE} --all int4 --calibration-text ${OUT_DIR}/calib.txt --eval 0
           --quiet ${OUT_DIR}/f32.tmai ${OUT_DIR}/cal-text.tmai)
file(WRITE ${OUT_DIR}/mlp.def "input 32\nlayer fc1 out=64 act=relu\nlayer fc2 out=10 act=none\n")
expect_run(RC 0 COMMAND ${CONVERT} --dense ${OUT_DIR}/mlp.def ${OUT_DIR}/mlp.tmai)
expect_run(RC 0 STDOUT_HAS "not a language model" COMMAND ${QUANTIZE} --all int8 ${OUT_DIR}/mlp.tmai ${OUT_DIR}/mlp-q8.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "language models only" ${QUANTIZE} --all int8 --calibrate 10
                     ${OUT_DIR}/mlp.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "none.txt" ${QUANTIZE} --calibration-text ${OUT_DIR}/none.txt
                     ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)

# The calibration text has a bound: the positions calibration reads (--calibrate
# N, default 2048) at up to 64 bytes a token; it was read whole, whatever its
# size. At the bound it runs (also from standard input); a byte more is refused
# before it is used, by its size (a 1 MiB sparse file is not read).
set(Q ${QUANTIZE} --all int4 --eval 0 --quiet)
string(REPEAT "Once upon a time there was a robot. " 4 text)
string(SUBSTRING "${text}" 0 128 text128)
file(WRITE ${OUT_DIR}/calib-128.txt "${text128}")
file(WRITE ${OUT_DIR}/calib-129.txt "${text128}.")
expect_run(RC 0 STDOUT_HAS "smaller" COMMAND ${Q} --calibrate 2 --calibration-text ${OUT_DIR}/calib-128.txt
           ${OUT_DIR}/f32.tmai ${OUT_DIR}/cal-128.tmai)
expect_run(RC 0 STDOUT_HAS "smaller" INPUT_FILE ${OUT_DIR}/calib-128.txt COMMAND ${Q} --calibrate 2
           --calibration-text - ${OUT_DIR}/f32.tmai ${OUT_DIR}/cal-stdin.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT
                     "the calibration text '${OUT_DIR}/calib-129.txt' is 129 bytes, more than the 128 bytes it may hold (--calibrate 2 positions at up to 64 bytes a token: calibration reads no further); give its first 128 bytes (head -c 128), or a larger --calibrate N"
                     ${Q} --calibrate 2 --calibration-text ${OUT_DIR}/calib-129.txt ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
file(WRITE ${OUT_DIR}/sparse.txt "")
execute_process(COMMAND truncate -s 1M ${OUT_DIR}/sparse.txt RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  cli_fail("truncate -s 1M failed (${rc})")
endif()
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "is 1048576 bytes, more than the 131072 bytes it may hold (--calibrate 2048"
                     ${Q} --calibration-text ${OUT_DIR}/sparse.txt ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
# A directory is named as one (it was "calibrationText has no tokens"); so are
# an empty text and one holding a NUL byte (the text was cut there).
expect_runtime_error(TINYAI_ERR_IO "the calibration text '${OUT_DIR}' is a directory, not a file"
                     ${Q} --calibration-text ${OUT_DIR} ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
file(WRITE ${OUT_DIR}/empty.txt "")
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "the calibration text '${OUT_DIR}/empty.txt' is empty"
                     ${Q} --calibration-text ${OUT_DIR}/empty.txt ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
execute_process(COMMAND sh -c "printf 'Once\\000upon' > '${OUT_DIR}/nul.txt'")
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "holds a NUL byte at offset 4"
                     ${Q} --calibration-text ${OUT_DIR}/nul.txt ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
# A directory as IN or OUT is named as one, before any work.
expect_runtime_error(TINYAI_ERR_IO "the model '${OUT_DIR}' is a directory, not a regular file"
                     ${Q} ${OUT_DIR} ${OUT_DIR}/x.tmai)
file(MAKE_DIRECTORY ${OUT_DIR}/out-dir)
expect_runtime_error(TINYAI_ERR_IO "OUT.tmai '${OUT_DIR}/out-dir' is a directory; name the file to write"
                     ${Q} ${OUT_DIR}/f32.tmai ${OUT_DIR}/out-dir)

expect_usage_error("give IN and OUT.tmai ([-m] IN OUT.tmai [PRECISION])" ${QUANTIZE} ${OUT_DIR}/f32.tmai)
expect_usage_error("unknown precision 'int3'" ${QUANTIZE} --all int3 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("--layer takes WHAT=PRECISION" ${QUANTIZE} --layer 1 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("--layer" ${QUANTIZE} --layer x=int8 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_usage_error("unknown option --bogus" ${QUANTIZE} --bogus ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "groupSize is 0" ${QUANTIZE} --group 0 ${OUT_DIR}/f32.tmai
                     ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "groupSize 64" ${QUANTIZE} --group 64 ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "overrides[0].layer is 7" ${QUANTIZE} --layer 7=int8
                     ${OUT_DIR}/f32.tmai ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_NOT_FOUND "blk.5.attn_q" ${QUANTIZE} --tensor blk.5.attn_q=int8 ${OUT_DIR}/f32.tmai
                     ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "round it twice" ${QUANTIZE} --all int4 ${OUT_DIR}/q8.tmai
                     ${OUT_DIR}/x.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "own file" ${QUANTIZE} ${OUT_DIR}/f32.tmai ${OUT_DIR}/f32.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "" ${QUANTIZE} ${OUT_DIR}/none.tmai ${OUT_DIR}/x.tmai)
if(EXISTS ${OUT_DIR}/x.tmai OR EXISTS ${OUT_DIR}/x.tmai.part)
  cli_fail("a refused tinyai-quantize left ${OUT_DIR}/x.tmai behind")
endif()

# --json: the report as one object, each tensor's row and the quality in it.
expect_run(RC 0 COMMAND ${QUANTIZE} --all int8 --eval 40 --json ${OUT_DIR}/f32.tmai ${OUT_DIR}/json.tmai)
expect_json("tinyai-quantize --json" "${RUN_OUT}" quality.positions largest_tensor_bytes tensors.1.rel_rms tensors.1.to)
if(NOT JSON_quality_positions EQUAL 40)
  cli_fail("tinyai-quantize --json compared over ${JSON_quality_positions} positions, not --eval 40")
endif()

cli_finish()
