# tinyai-convert refuses, before anything is written: an output that is one
# of its inputs (the same file, however named: the same path, ./ spellings,
# symbolic and hard links; writing over the mapped checkpoint crashed and
# destroyed it), and models the runtime would refuse (format/limits.h: the
# error names the field and the limit); and it refuses options its mode does
# not take instead of ignoring them.
# Run by ctest as tools_convert_cli with CONVERT, GENERATE, STORIES_DIR (the
# llama2.c checkpoint and tokenizer, copied here: the shared files are never
# written; that part is skipped without them), OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

# ---- An output that is an input ----------------------------------------------------------
file(WRITE ${OUT_DIR}/net.def "input 4\nlayer a out=4 act=relu\nlayer b out=2\n")
file(SHA256 ${OUT_DIR}/net.def def_hash)
file(CREATE_LINK ${OUT_DIR}/net.def ${OUT_DIR}/net-symlink.def SYMBOLIC)
file(CREATE_LINK ${OUT_DIR}/net.def ${OUT_DIR}/net-hardlink.def)
foreach(out ${OUT_DIR}/net.def ${OUT_DIR}/./net.def ${OUT_DIR}/net-symlink.def ${OUT_DIR}/net-hardlink.def)
  expect_usage_error("OUT.tmai '${out}' is the definition '${OUT_DIR}/net.def' (the same file)"
                     ${CONVERT} --dense ${OUT_DIR}/net.def ${out})
  file(SHA256 ${OUT_DIR}/net.def hash)
  if(NOT hash STREQUAL def_hash)
    cli_fail("tinyai-convert --dense ... ${out} changed the definition")
  endif()
endforeach()
expect_run(RC 0 EXPECT "wrote ${OUT_DIR}/net.tmai" COMMAND ${CONVERT} --dense ${OUT_DIR}/net.def ${OUT_DIR}/net.tmai)

if(EXISTS ${STORIES_DIR}/stories260K.bin AND EXISTS ${STORIES_DIR}/tok512.bin)
  # Copies: the shared files are read-only test data.
  file(COPY ${STORIES_DIR}/stories260K.bin ${STORIES_DIR}/tok512.bin DESTINATION ${OUT_DIR}
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  set(ckpt ${OUT_DIR}/stories260K.bin)
  set(tok ${OUT_DIR}/tok512.bin)
  file(SHA256 ${ckpt} ckpt_hash)
  file(SHA256 ${tok} tok_hash)
  file(CREATE_LINK ${ckpt} ${OUT_DIR}/ckpt-symlink.bin SYMBOLIC)
  file(CREATE_LINK ${tok} ${OUT_DIR}/tok-hardlink.bin)
  foreach(case "${ckpt}=checkpoint" "${OUT_DIR}/./stories260K.bin=checkpoint" "${OUT_DIR}/ckpt-symlink.bin=checkpoint"
               "${tok}=tokenizer" "${OUT_DIR}/tok-hardlink.bin=tokenizer")
    string(REPLACE "=" ";" pair "${case}")
    list(GET pair 0 out)
    list(GET pair 1 which)
    expect_usage_error("OUT.tmai '${out}' is the ${which} '" ${CONVERT} --from llama2c --tokenizer ${tok} ${ckpt} ${out})
    expect_run(RC 2 EXPECT "refusing to overwrite an input" STDOUT_EMPTY
               COMMAND ${CONVERT} --from llama2c --tokenizer ${tok} ${ckpt} ${out})
    file(SHA256 ${ckpt} hash1)
    file(SHA256 ${tok} hash2)
    if(NOT hash1 STREQUAL ckpt_hash OR NOT hash2 STREQUAL tok_hash)
      cli_fail("tinyai-convert --from llama2c ... ${out} changed an input")
      file(COPY ${STORIES_DIR}/stories260K.bin ${STORIES_DIR}/tok512.bin DESTINATION ${OUT_DIR}
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
    endif()
  endforeach()
  expect_run(RC 0 COMMAND ${CONVERT} --from llama2c --tokenizer ${tok} ${ckpt} ${OUT_DIR}/stories.tmai)

  # ---- The input's format told by its bytes: no --from --------------------------------------
  expect_run(RC 0 EXPECT "is a llama2.c checkpoint" COMMAND ${CONVERT} --tokenizer ${tok} ${ckpt} ${OUT_DIR}/bytes.tmai)
  file(SHA256 ${OUT_DIR}/stories.tmai with_from)
  file(SHA256 ${OUT_DIR}/bytes.tmai without_from)
  if(NOT with_from STREQUAL without_from)
    cli_fail("tinyai-convert without --from wrote another file than with --from llama2c")
  endif()
  expect_run(RC 0 EXPECT "is a .tmai model" COMMAND ${CONVERT} --dtype q8_0 ${OUT_DIR}/stories.tmai ${OUT_DIR}/q8.tmai)
  expect_run(RC 0 COMMAND ${CONVERT} --json --tokenizer ${tok} ${ckpt} ${OUT_DIR}/bytes-json.tmai)
  expect_json("tinyai-convert --json IN OUT" "${RUN_OUT}" input input_format shape.vocab)
  if(NOT JSON_input_format STREQUAL "llama2c")
    cli_fail("tinyai-convert --json named the input's format '${JSON_input_format}', not llama2c")
  endif()
  expect_usage_error("is a llama2.c checkpoint: give its tokenizer with --tokenizer"
                     ${CONVERT} ${ckpt} ${OUT_DIR}/none.tmai)
  expect_usage_error("is a llama2.c tokenizer: give the checkpoint as IN" ${CONVERT} ${tok} ${OUT_DIR}/none.tmai)
  # A runtime tool given a file it cannot run names the command that converts it.
  expect_run(RC 1 EXPECT "is a llama2.c checkpoint: convert it with tinyai-convert --tokenizer TOK.bin" STDOUT_EMPTY
             COMMAND ${GENERATE} -m ${ckpt} -p a)
  expect_run(RC 1 EXPECT "is a llama2.c tokenizer, not a model" STDOUT_EMPTY COMMAND ${GENERATE} -m ${tok} -p a)
else()
  message(STATUS "no stories260K under '${STORIES_DIR}': the llama2.c same-file checks are skipped")
endif()

# Neither a format by its bytes nor an existing file.
file(WRITE ${OUT_DIR}/text.bin "hello, world\n")
expect_run(RC 1 EXPECT "TINYAI_ERR_BAD_MAGIC" "say which with --from" STDOUT_EMPTY
           COMMAND ${CONVERT} ${OUT_DIR}/text.bin ${OUT_DIR}/none.tmai)
expect_run(RC 1 EXPECT "TINYAI_ERR_FILE_NOT_FOUND" STDOUT_EMPTY COMMAND ${CONVERT} ${OUT_DIR}/absent ${OUT_DIR}/none.tmai)
expect_run(RC 1 EXPECT "none of the formats TinyAI reads" STDOUT_EMPTY COMMAND ${GENERATE} -m ${OUT_DIR}/text.bin -p a)

# ---- Models the runtime would refuse are not written ---------------------------------------
set(base dim=8,hidden=8,heads=2)
foreach(case "layers=4097,vocab=300,seq_len=8=llama.layers 4097 is outside what the runtime runs (1..4096)"
             "layers=1,vocab=16777217,seq_len=8=llama.vocab_size 16777217 is outside what the runtime runs (3..16777216)"
             "layers=1,vocab=300,seq_len=1048577=llama.seq_len 1048577 is outside what the runtime runs (1..1048576)")
  string(FIND "${case}" "=llama." at)
  string(SUBSTRING "${case}" 0 ${at} spec)
  math(EXPR at "${at} + 1")
  string(SUBSTRING "${case}" ${at} -1 text)
  expect_runtime_error(TINYAI_ERR_UNSUPPORTED "${text}" ${CONVERT} --synthetic ${base},${spec} ${OUT_DIR}/refused.tmai)
endforeach()
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "spec key 'dim' is given twice"
                     ${CONVERT} --synthetic ${base},dim=16,layers=1,vocab=300,seq_len=8 ${OUT_DIR}/refused.tmai)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "spec value '2' for 'shared'"
                     ${CONVERT} --synthetic ${base},layers=1,vocab=300,seq_len=8,shared=2 ${OUT_DIR}/refused.tmai)
# A dense layer that names one input twice: the format's reader, the
# scheduler and the runtime refuse it, so the converter does.
file(WRITE ${OUT_DIR}/twice.def "input 4\nlayer a out=4\nlayer b out=4 inputs=a,a\n")
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "line 3: layer 'b': input 'a' is named twice"
                     ${CONVERT} --dense ${OUT_DIR}/twice.def ${OUT_DIR}/refused.tmai)
if(EXISTS ${OUT_DIR}/refused.tmai)
  cli_fail("a refused model was written to ${OUT_DIR}/refused.tmai")
endif()
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "cannot read the definition '${OUT_DIR}/none.def'"
                     ${CONVERT} --dense ${OUT_DIR}/none.def ${OUT_DIR}/refused.tmai)
# At the limit, the runtime runs what the converter wrote. Writing 36,866
# tensors takes 0.2 s in release and 0.3 s under ASan+UBSan (it took 41-122 s
# under ASan while each tensor allocated a 256 KiB buffer, WriteRandom):
# CLI_TIMEOUT's margin holds it.
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=2,hidden=1,heads=1,layers=4096,vocab=260,seq_len=8
           ${OUT_DIR}/deep.tmai)
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/deep.tmai -p a -n 1 --quiet)

# ---- Inputs have a bound, and a path that is not what it must be is named --------------------
# A definition is read with a bound of 16 MiB (it was read whole, whatever its
# size); it may come from standard input. A sparse 17 MiB file is refused by
# its size, unread.
file(WRITE ${OUT_DIR}/big.def "")
execute_process(COMMAND truncate -s 17M ${OUT_DIR}/big.def RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  cli_fail("truncate -s 17M failed (${rc})")
endif()
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT
                     "the definition '${OUT_DIR}/big.def' is 17825792 bytes, more than the 16777216 bytes it may hold (16 MiB: 65536 layers"
                     ${CONVERT} --dense ${OUT_DIR}/big.def ${OUT_DIR}/refused.tmai)
expect_run(RC 0 EXPECT "wrote ${OUT_DIR}/net-stdin.tmai" INPUT_FILE ${OUT_DIR}/net.def
           COMMAND ${CONVERT} --dense - ${OUT_DIR}/net-stdin.tmai)
# A directory as the definition was TINYAI_ERR_INTERNAL ("basic_filebuf::underflow").
expect_runtime_error(TINYAI_ERR_IO "the definition '${OUT_DIR}' is a directory, not a file"
                     ${CONVERT} --dense ${OUT_DIR} ${OUT_DIR}/refused.tmai)
# Inputs that must be regular files (read at offsets): a directory or a FIFO
# is named as such, before anything is opened (opening a FIFO waits for a
# writer); a safetensors checkpoint may be a folder, not a FIFO.
execute_process(COMMAND mkfifo ${OUT_DIR}/fifo RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  cli_fail("mkfifo failed (${rc})")
endif()
foreach(path ${OUT_DIR} ${OUT_DIR}/fifo)
  set(kind "a directory, not a regular file; give")
  if(path MATCHES "fifo$")
    set(kind "a FIFO (named pipe), not a regular file (it is read at offsets, not as a stream); give")
  endif()
  expect_runtime_error(TINYAI_ERR_IO "the input '${path}' is ${kind} a .tmai file"
                       ${CONVERT} --from tmai ${path} ${OUT_DIR}/refused.tmai)
  expect_runtime_error(TINYAI_ERR_IO "the input '${path}' is ${kind} a .gguf file"
                       ${CONVERT} --from gguf ${path} ${OUT_DIR}/refused.tmai)
  expect_runtime_error(TINYAI_ERR_IO "the checkpoint '${path}' is ${kind} a llama2.c checkpoint file"
                       ${CONVERT} --from llama2c --tokenizer ${OUT_DIR}/none.bin ${path} ${OUT_DIR}/refused.tmai)
  expect_runtime_error(TINYAI_ERR_IO "the tokenizer '${path}' is ${kind} a llama2.c tokenizer file"
                       ${CONVERT} --from llama2c --tokenizer ${path} ${OUT_DIR}/none.bin ${OUT_DIR}/refused.tmai)
endforeach()
expect_runtime_error(TINYAI_ERR_IO "the input '${OUT_DIR}/fifo' is a FIFO (named pipe), not a regular file"
                     ${CONVERT} --from safetensors ${OUT_DIR}/fifo ${OUT_DIR}/refused.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "holds neither model.safetensors nor model.safetensors.index.json"
                     ${CONVERT} --from safetensors ${OUT_DIR} ${OUT_DIR}/refused.tmai)
# An output that is a directory is named as one, before any work.
file(MAKE_DIRECTORY ${OUT_DIR}/out-dir)
foreach(cmd "--synthetic;${base},layers=1,vocab=300,seq_len=8" "--dense;${OUT_DIR}/net.def"
            "--from;tmai;${OUT_DIR}/net.tmai")
  expect_runtime_error(TINYAI_ERR_IO "OUT.tmai '${OUT_DIR}/out-dir' is a directory; name the file to write"
                       ${CONVERT} ${cmd} ${OUT_DIR}/out-dir)
endforeach()
if(EXISTS ${OUT_DIR}/refused.tmai)
  cli_fail("a refused input wrote ${OUT_DIR}/refused.tmai")
endif()

# ---- Options a mode does not take are refused, not ignored -------------------------------------
expect_usage_error("--name goes with --from (llama2c, tmai, gguf or safetensors)" ${CONVERT} --dense ${OUT_DIR}/net.def --name x ${OUT_DIR}/n.tmai)
expect_usage_error("--tokenizer goes with --from llama2c"
                   ${CONVERT} --synthetic ${base},layers=1,vocab=300,seq_len=8 --tokenizer t.bin ${OUT_DIR}/n.tmai)
if(EXISTS ${OUT_DIR}/n.tmai)
  cli_fail("a usage error wrote ${OUT_DIR}/n.tmai")
endif()

# ---- --dtype: matrices as f16, in every mode; the runtime runs what it wrote -------------------
# 9,408 matrix values (embedding 300x16, per block q 256, k and v 128 each, o 256,
# gate, up and down 512 each) and 80 norm weights: 37,952 bytes as f32; as f16
# 9,408 * 2 + 80 * 4 = 19,136 (norms stay f32).
set(small dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32)
expect_run(RC 0 EXPECT "matrices f32, 0 compressed (none); tensor data 37952 bytes"
           COMMAND ${CONVERT} --synthetic ${small} ${OUT_DIR}/s32.tmai)
expect_run(RC 0 EXPECT "matrices f16, 0 compressed (none); tensor data 19136 bytes"
           COMMAND ${CONVERT} --dtype f16 --compress none --synthetic ${small} ${OUT_DIR}/s16.tmai)
expect_run(RC 0 EXPECT "matrices f16, 12 compressed (zstd level 3)" COMMAND ${CONVERT} --dtype f16 --compress zstd
           --synthetic ${small} ${OUT_DIR}/s16z.tmai)
foreach(m s16 s16z)
  expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/${m}.tmai -p a -n 8 --quiet)
endforeach()
expect_run(RC 0 EXPECT "matrices f16" COMMAND ${CONVERT} --dtype f16 --dense ${OUT_DIR}/net.def ${OUT_DIR}/net16.tmai)
# --json: the summary as one object on stdout; --quiet: nothing on stderr.
expect_run(RC 0 COMMAND ${CONVERT} --json --dtype q8_0 --synthetic ${small} ${OUT_DIR}/j.tmai)
expect_json("tinyai-convert --json" "${RUN_OUT}" output shape.dim shape.shared_classifier matrices file_bytes)
if(NOT JSON_matrices STREQUAL "q8_g32" OR NOT RUN_ERR STREQUAL "")
  cli_fail("tinyai-convert --json: matrices '${JSON_matrices}', stderr '${RUN_ERR}'")
endif()
expect_run(RC 0 COMMAND ${CONVERT} --json --from tmai ${OUT_DIR}/j.tmai ${OUT_DIR}/j2.tmai)
expect_json("tinyai-convert --json --from tmai" "${RUN_OUT}" input stored_bytes decoded_bytes)
expect_run(RC 0 COMMAND ${CONVERT} --json --dense ${OUT_DIR}/net.def ${OUT_DIR}/netj.tmai)
expect_json("tinyai-convert --json --dense" "${RUN_OUT}" dense.layers tensors)
expect_run(RC 0 STDOUT_EMPTY COMMAND ${CONVERT} -q --synthetic ${small} ${OUT_DIR}/q.tmai)
if(NOT RUN_ERR STREQUAL "")
  cli_fail("tinyai-convert -q printed '${RUN_ERR}'")
endif()
# One vocabulary: GGUF's names and tinyai-quantize's beside ours.
expect_usage_error("--dtype takes f32, f16, q8_g32 (q8_0, int8), q4_g32 (q4_0, int4-sym), q4nl_g32 (iq4_nl, int4), "
                   ${CONVERT} --dtype q8 --synthetic ${small} ${OUT_DIR}/n.tmai)
expect_run(RC 0 EXPECT "matrices q4_g32" COMMAND ${CONVERT} --dtype Q4_0 --synthetic ${small} ${OUT_DIR}/q40.tmai)
# A K-quant takes rows of whole blocks of 256 values: other rows are refused
# with the dtypes that take them, and nothing is left behind.
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "values cannot be q4_k, whose blocks hold 256 values" ${CONVERT}
                     --dtype q4_k --synthetic ${small} ${OUT_DIR}/k.tmai)
if(EXISTS ${OUT_DIR}/k.tmai)
  cli_fail("a refused --dtype q4_k conversion left ${OUT_DIR}/k.tmai")
endif()
# Grouped dtypes: rows of 16 and 32 values are one group each, 34 bytes (q8)
# or 18 (q4): q8 10,200 (embedding) + 2 * 4,352 (blocks) + 320 (norms) = 19,224
# bytes; q4 5,400 + 2 * 2,304 + 320 = 10,328. From f32 and f16 models alike;
# a grouped model is copied or dequantized, never quantized again.
expect_run(RC 0 EXPECT "matrices q8_g32, 0 compressed (none); tensor data 19224 bytes"
           COMMAND ${CONVERT} --dtype q8_g32 --synthetic ${small} ${OUT_DIR}/sq8.tmai)
expect_run(RC 0 EXPECT "matrices q4_g32, 0 compressed (none); tensor data 10328 bytes"
           COMMAND ${CONVERT} --from tmai --dtype q4_g32 ${OUT_DIR}/s32.tmai ${OUT_DIR}/req4.tmai)
expect_run(RC 0 EXPECT "matrices q4nl_g32, 0 compressed (none); tensor data 10328 bytes"
           COMMAND ${CONVERT} --from tmai --dtype q4nl_g32 ${OUT_DIR}/s16.tmai ${OUT_DIR}/renl.tmai)
expect_run(RC 0 EXPECT "matrices q8_g32" COMMAND ${CONVERT} --dtype q8_g32 --dense ${OUT_DIR}/net.def ${OUT_DIR}/netq8.tmai)
expect_runtime_error(TINYAI_ERR_UNSUPPORTED "tensor 'token_embd' is already q4_g32; quantize to q8_g32 from the f32 or f16 model"
                     ${CONVERT} --from tmai --dtype q8_g32 ${OUT_DIR}/req4.tmai ${OUT_DIR}/n.tmai)
expect_run(RC 0 EXPECT "matrices as in the input" COMMAND ${CONVERT} --from tmai ${OUT_DIR}/req4.tmai ${OUT_DIR}/req4copy.tmai)
expect_run(RC 0 EXPECT "matrices f32" COMMAND ${CONVERT} --from tmai --dtype f32 ${OUT_DIR}/req4.tmai ${OUT_DIR}/req4f32.tmai)
foreach(m sq8 req4 renl req4f32)
  expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/${m}.tmai -p a -n 8 --quiet)
endforeach()
# --from tmai: an existing model written again. f32 to f16 gives the very file
# --dtype f16 writes directly; compressing and decompressing again gives the
# original back; f16 to f32 runs.
expect_run(RC 0 EXPECT "matrices f16" COMMAND ${CONVERT} --from tmai --dtype f16 ${OUT_DIR}/s32.tmai ${OUT_DIR}/re16.tmai)
expect_run(RC 0 EXPECT "16 compressed" COMMAND ${CONVERT} --from tmai --compress zstd ${OUT_DIR}/s32.tmai ${OUT_DIR}/rez.tmai)
expect_run(RC 0 EXPECT "0 compressed" COMMAND ${CONVERT} --from tmai ${OUT_DIR}/rez.tmai ${OUT_DIR}/rez32.tmai)
expect_run(RC 0 EXPECT "matrices f32" COMMAND ${CONVERT} --from tmai --dtype f32 ${OUT_DIR}/s16.tmai ${OUT_DIR}/re32.tmai)
foreach(pair "re16=s16" "rez32=s32")
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 a)
  list(GET pair 1 b)
  file(SHA256 ${OUT_DIR}/${a}.tmai ha)
  file(SHA256 ${OUT_DIR}/${b}.tmai hb)
  if(NOT ha STREQUAL hb)
    cli_fail("--from tmai: ${a}.tmai differs from ${b}.tmai")
  endif()
endforeach()
expect_run(RC 0 COMMAND ${GENERATE} -m ${OUT_DIR}/re32.tmai -p a -n 8 --quiet)
# --name sets general.name (the synthetic model has none: it is added).
expect_run(RC 0 COMMAND ${CONVERT} --from tmai --name renamed ${OUT_DIR}/s32.tmai ${OUT_DIR}/named.tmai)
file(STRINGS ${OUT_DIR}/named.tmai named LIMIT_COUNT 1 REGEX "renamed")
if(NOT named)
  cli_fail("--from tmai --name renamed: the name is not in ${OUT_DIR}/named.tmai")
endif()
expect_usage_error("OUT.tmai '${OUT_DIR}/s32.tmai' is the input '${OUT_DIR}/s32.tmai' (the same file)"
                   ${CONVERT} --from tmai ${OUT_DIR}/s32.tmai ${OUT_DIR}/s32.tmai)
expect_usage_error("--from tmai takes IN.tmai and OUT.tmai" ${CONVERT} --from tmai ${OUT_DIR}/s32.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "none.tmai" ${CONVERT} --from tmai ${OUT_DIR}/none.tmai ${OUT_DIR}/n.tmai)
if(EXISTS ${STORIES_DIR}/stories260K.bin AND EXISTS ${STORIES_DIR}/tok512.bin)
  expect_run(RC 0 EXPECT "matrices f16" COMMAND ${CONVERT} --dtype f16 --from llama2c --tokenizer ${OUT_DIR}/tok512.bin
             ${OUT_DIR}/stories260K.bin ${OUT_DIR}/stories16.tmai)
  # Greedy, the f16 model continues as the f32 one does (tests/golden pins that text).
  expect_run(RC 0 EXPECT "Once upon a time, there was a little girl named Lily" COMMAND ${GENERATE}
             -m ${OUT_DIR}/stories16.tmai -p "Once upon a time" -n 16
             --temp 0)
endif()

cli_finish()
