# tinyai-convert's importers on the command line: a GGUF file and a Hugging
# Face checkpoint (written by the tests' writers, tinyai_test_export, from the
# default model) convert, and
# the result generates the original's text and tells where it came from
# (tinyai-inspect: text and JSON); options an import does not take are usage
# errors; a bad file is a runtime error naming the file and the field, and
# writes nothing; an output that is the input is refused.
# Run by ctest as tools_import_cli with CONVERT, GENERATE, INSPECT, EXPORT,
# MODEL (the default model), SENTENCEPIECE (the build reads tokenizer.model),
# OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(gguf ${OUT_DIR}/fortunes.gguf)
expect_run(RC 0 COMMAND ${EXPORT} gguf ${MODEL} ${gguf} --type f32)
expect_run(RC 0 EXPECT "wrote ${OUT_DIR}/fortunes.tmai" "matrices as in the input"
           COMMAND ${CONVERT} --from gguf ${gguf} ${OUT_DIR}/fortunes.tmai)
expect_run(RC 0 STDOUT_HAS "source                   gguf file fortunes.gguf" "llama.kv_heads           2"
           COMMAND ${INSPECT} ${OUT_DIR}/fortunes.tmai)
expect_run(RC 0 STDOUT_HAS "\"source_format\":\"gguf\",\"source_file\":\"fortunes.gguf\""
           COMMAND ${INSPECT} --json ${OUT_DIR}/fortunes.tmai)
expect_run(RC 0 COMMAND ${GENERATE} -m ${MODEL} -p "A man" -n 40 --temp 0 --quiet)
set(want "${RUN_OUT}")
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/fortunes.tmai -p "A man" -n 40 --temp 0 --quiet)
if(NOT "${RUN_OUT}" STREQUAL "${want}")
  cli_fail("the GGUF import generates '${RUN_OUT}', the original '${want}'")
endif()
expect_run(RC 0 EXPECT "wrote" COMMAND ${CONVERT} --from gguf --name renamed ${gguf} ${OUT_DIR}/renamed.tmai)
expect_run(RC 0 STDOUT_HAS "name                     renamed" COMMAND ${INSPECT} ${OUT_DIR}/renamed.tmai)
# Quantized blocks come across as they are.
expect_run(RC 0 COMMAND ${EXPORT} gguf ${MODEL} ${OUT_DIR}/q8.gguf --type q8_0)
expect_run(RC 0 EXPECT "wrote" COMMAND ${CONVERT} --from gguf ${OUT_DIR}/q8.gguf ${OUT_DIR}/q8.tmai)
expect_run(RC 0 STDOUT_HAS "blk.0.attn_q           attn_q           q8_g32" COMMAND ${INSPECT} ${OUT_DIR}/q8.tmai)
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/q8.tmai -p "A man" -n 8 --quiet)
# The tools take the GGUF itself, read in place: the same text as its
# conversion, and tinyai-inspect says where its bytes come from.
expect_run(RC 0 COMMAND ${GENERATE} -m ${gguf} -p "A man" -n 40 --temp 0 --quiet)
if(NOT "${RUN_OUT}" STREQUAL "${want}")
  cli_fail("the GGUF read in place generates '${RUN_OUT}', the original '${want}'")
endif()
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/q8.tmai -p "A man" -n 8 --temp 0 --quiet)
set(want_q8 "${RUN_OUT}")
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/q8.gguf -p "A man" -n 8 --temp 0 --quiet)
if(NOT "${RUN_OUT}" STREQUAL "${want_q8}")
  cli_fail("the Q8_0 GGUF read in place generates '${RUN_OUT}', its conversion '${want_q8}'")
endif()
expect_run(RC 0 STDOUT_HAS "blk.0.attn_q.weight    attn_q           q8_g32" COMMAND ${INSPECT} ${OUT_DIR}/q8.gguf)

# ---- A Hugging Face checkpoint (safetensors, config.json, tokenizer.model), in two shards --------
if(SENTENCEPIECE)
  file(MAKE_DIRECTORY ${OUT_DIR}/hf)
  expect_run(RC 0 COMMAND ${EXPORT} safetensors ${MODEL} ${OUT_DIR}/hf --dtype F16 --shards 2)
  expect_run(RC 0 EXPECT "wrote ${OUT_DIR}/hf.tmai" "matrices as in the input"
             COMMAND ${CONVERT} --from safetensors ${OUT_DIR}/hf ${OUT_DIR}/hf.tmai)
  expect_run(RC 0 STDOUT_HAS "source                   safetensors file hf" "blk.0.attn_q           attn_q           f16"
             COMMAND ${INSPECT} ${OUT_DIR}/hf.tmai)
  expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/hf.tmai -p "A man" -n 8 --quiet)
  expect_usage_error("--dtype does not go with --from safetensors"
                     ${CONVERT} --dtype q8_g32 --from safetensors ${OUT_DIR}/hf ${OUT_DIR}/n.tmai)
  expect_usage_error("the checkpoint's folder holds tokenizer.model"
                     ${CONVERT} --tokenizer t.bin --from safetensors ${OUT_DIR}/hf ${OUT_DIR}/n.tmai)
  file(REMOVE ${OUT_DIR}/hf/tokenizer.model)
  expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "${OUT_DIR}/hf/tokenizer.model"
                       ${CONVERT} --from safetensors ${OUT_DIR}/hf ${OUT_DIR}/n.tmai)
else()
  message(STATUS "this build reads no tokenizer.model: the safetensors import's command-line checks are skipped")
endif()

# ---- Options an import does not take ---------------------------------------------------------
expect_usage_error("--dtype does not go with --from gguf" ${CONVERT} --dtype f16 --from gguf ${gguf} ${OUT_DIR}/n.tmai)
expect_usage_error("--tokenizer goes with --from llama2c" ${CONVERT} --tokenizer t.bin --from gguf ${gguf} ${OUT_DIR}/n.tmai)
expect_usage_error("--from gguf takes IN.gguf and OUT.tmai" ${CONVERT} --from gguf ${gguf})
expect_usage_error("OUT.tmai '${gguf}' is the input '${gguf}' (the same file)" ${CONVERT} --from gguf ${gguf} ${gguf})

# ---- Bad files: the status, the file and the field; nothing written ----------------------------
# The file without its last 100 bytes: the last tensor runs past the end.
file(SIZE ${gguf} size)
math(EXPR cut "${size} - 100")
execute_process(COMMAND head -c ${cut} ${gguf} OUTPUT_FILE ${OUT_DIR}/cut.gguf)
expect_runtime_error(TINYAI_ERR_OUT_OF_BOUNDS "'${OUT_DIR}/cut.gguf': tensor 'output_norm.weight'"
                     ${CONVERT} --from gguf ${OUT_DIR}/cut.gguf ${OUT_DIR}/n.tmai)
file(WRITE ${OUT_DIR}/not.gguf "GGML not a gguf file")
expect_runtime_error(TINYAI_ERR_BAD_MAGIC "'${OUT_DIR}/not.gguf' is not a GGUF file"
                     ${CONVERT} --from gguf ${OUT_DIR}/not.gguf ${OUT_DIR}/n.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "${OUT_DIR}/none.gguf" ${CONVERT} --from gguf ${OUT_DIR}/none.gguf ${OUT_DIR}/n.tmai)
if(EXISTS ${OUT_DIR}/n.tmai)
  cli_fail("a refused import wrote ${OUT_DIR}/n.tmai")
endif()
cli_finish()
