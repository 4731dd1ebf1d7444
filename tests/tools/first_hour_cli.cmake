# The commands a llama.cpp user types in the first hour, as they type them,
# each with exit status 0 - and the wrong ones they are likely to type, each
# answered with what to do. GGUF files (the default model written as F16 and
# Q8_0 GGUF by tinyai_test_export) stand for the ones they downloaded.
# Run by ctest as tools_first_hour_cli with CONVERT, GENERATE, INSPECT, BENCH,
# QUANTIZE, EVAL, EXPORT (tinyai_test_export), MODEL (the default model),
# OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(gguf ${OUT_DIR}/model-f16.gguf)
expect_run(RC 0 COMMAND ${EXPORT} gguf ${MODEL} ${gguf} --type f16)
set(gguf_q8 ${OUT_DIR}/model-q8_0.gguf)
expect_run(RC 0 COMMAND ${EXPORT} gguf ${MODEL} ${gguf_q8} --type q8_0)

# ---- What they type -------------------------------------------------------------------------
# Run the file as downloaded, with llama-cli's flags.
expect_run(RC 0 STDOUT_HAS "A man" COMMAND ${GENERATE} -m ${gguf} -p "A man" -n 32 -c 128 --temp 0.8 --top-k 40
           --top-p 0.95 --min-p 0.05 --repeat-penalty 1.1 --repeat-last-n 64 -s 42 -t 2 --stop "\n\n")
# Convert once, without saying the format.
expect_run(RC 0 EXPECT "is a GGUF file" COMMAND ${CONVERT} ${gguf} ${OUT_DIR}/model.tmai)
# Quantize as llama-quantize: IN OUT TYPE, GGUF's type names.
expect_run(RC 0 COMMAND ${QUANTIZE} ${OUT_DIR}/model.tmai ${OUT_DIR}/model-q4_0.tmai Q4_0 --eval 0 -q)
expect_run(RC 0 COMMAND ${QUANTIZE} ${gguf} ${OUT_DIR}/model-q4k.tmai --all q4_k --eval 0 -q)
# Benchmark as llama-bench: repetitions, thread and prompt lists, a markdown table.
expect_run(RC 0 STDOUT_HAS "| tg16 |" COMMAND ${BENCH} -m ${OUT_DIR}/model-q4_0.tmai -r 3 -t 1,2 -p 32,64 -n 16
           -o md --no-probe)
# Run under a memory limit, written as people write sizes.
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/model-q4_0.tmai -p "A man" -n 16 --mem-limit 64MB -q)
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/model-q4_0.tmai -p "A man" -n 16 --mem-limit 2MiB -q)
expect_run(RC 0 COMMAND ${INSPECT} -m ${gguf} --estimate --mem-limit 64MB --bandwidth 10)
# Compare the quantized model with the original.
expect_run(RC 0 COMMAND ${EVAL} --ref ${OUT_DIR}/model.tmai -m ${OUT_DIR}/model-q4_0.tmai --tokens 64 -c 32 -q)
# Talk to it: each line continues the text, in one KV cache.
file(WRITE ${OUT_DIR}/turns.txt "A man walks into a bar\nand the bartender says\n")
expect_run(RC 0 INPUT_FILE ${OUT_DIR}/turns.txt COMMAND ${GENERATE} -m ${OUT_DIR}/model.tmai -i -n 12 -q)
string(STRIP "${RUN_OUT}" answers)
if(answers STREQUAL "")
  cli_fail("-i with two lines of input answered nothing")
endif()
if(RUN_OUT MATCHES "A man walks into a bar")
  cli_fail("-i printed the user's turn back: '${RUN_OUT}'")
endif()

# A chat model's conversation: --chat -i, each line the user's next message
# in the same KV cache (the template is the file's tokenizer.chat_template),
# and --json: a line per turn with the answer and its figures.
set(chat_gguf ${OUT_DIR}/model-chat.gguf)
expect_run(RC 0 COMMAND ${EXPORT} gguf ${MODEL} ${chat_gguf} --type f16
           --chat-template "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] }}{% endfor %}")
expect_run(RC 0 INPUT_FILE ${OUT_DIR}/turns.txt COMMAND ${GENERATE} -m ${chat_gguf} --chat -i -n 8 --json)
string(REGEX MATCHALL "[^\n]+" lines "${RUN_OUT}")
list(LENGTH lines turns)
if(NOT turns EQUAL 2)
  cli_fail("--chat -i --json with two lines of input printed ${turns} lines, not one object per turn: '${RUN_OUT}'")
endif()
foreach(line IN LISTS lines)
  expect_json("--chat -i --json" "${line}" text stop_reason memory.kv_cache_bytes decode_tokens_per_second)
  if(JSON_text MATCHES "im_start|A man walks")
    cli_fail("--chat -i --json printed the user's turn back: '${line}'")
  endif()
endforeach()
# A base model has no template to talk in: said, with what to do.
expect_run(RC 1 EXPECT "no chat template" "plain text" INPUT_FILE ${OUT_DIR}/turns.txt
           COMMAND ${GENERATE} -m ${gguf} --chat -i -n 8)

# ---- What they get wrong, and what they are told ---------------------------------------------
expect_usage_error("unknown option --top_k (did you mean --top-k?)" ${GENERATE} -m ${gguf} -p a --top_k 40)
expect_usage_error("unknown option --n-gpu-layers" ${GENERATE} -m ${gguf} -p a --n-gpu-layers 99)
expect_usage_error("--mem-limit: '64XB' is not a size" ${GENERATE} -m ${gguf} -p a --mem-limit 64XB)
expect_usage_error("PRECISION" ${QUANTIZE} ${OUT_DIR}/model.tmai ${OUT_DIR}/never.tmai Q9_9)
expect_run(RC 1 EXPECT "stored q8_g32 already" "quantize the fp32 or fp16 model instead" STDOUT_EMPTY
           COMMAND ${QUANTIZE} ${gguf_q8} ${OUT_DIR}/never.tmai Q4_0 -q)
expect_run(RC 1 EXPECT "-c 256" STDOUT_EMPTY COMMAND ${BENCH} -m ${gguf} -p 200 -n 56 -c 128 --no-probe)
cli_finish()
