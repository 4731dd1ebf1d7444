# tinyai-eval: a model against itself is exact (KL 0, top-1 1), a grouped
# model against its f32 original is close but not exact, --json prints the
# figures as one object, and bad command lines and mismatched models fail
# with the right exit status and message.
# Run by ctest as tools_eval_cli with CONVERT, EVAL, OUT_DIR and EMULATOR.
include(${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake)

set(small dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic ${small} ${OUT_DIR}/f32.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --from tmai --dtype q4_g32 ${OUT_DIR}/f32.tmai ${OUT_DIR}/q4.tmai)
expect_run(RC 0 COMMAND ${CONVERT} --synthetic dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=400,seq_len=32
           ${OUT_DIR}/v400.tmai)

expect_run(RC 0 STDOUT_HAS "\"positions\": 100, \"mean_kld\": 0, \"p99_kld\": 0, \"max_kld\": 0, \"top1\": 1.000000"
           COMMAND ${EVAL} --ref ${OUT_DIR}/f32.tmai ${OUT_DIR}/f32.tmai --tokens 100 --json)
expect_run(RC 0 STDOUT_HAS "\"positions\": 70" COMMAND ${EVAL} --ref ${OUT_DIR}/f32.tmai ${OUT_DIR}/q4.tmai
           --tokens 70 --sequence 8 --seed 3 --json)
if(RUN_OUT MATCHES "\"mean_kld\": ([0-9.e+-]+)")
  if(CMAKE_MATCH_1 EQUAL 0)
    cli_fail("q4_g32 against f32 has a mean KL of exactly 0: '${RUN_OUT}'")
  endif()
else()
  cli_fail("no mean_kld in '${RUN_OUT}'")
endif()
expect_run(RC 0 STDOUT_HAS "mean KL" "top-1 agreement" COMMAND ${EVAL} --ref ${OUT_DIR}/f32.tmai ${OUT_DIR}/q4.tmai
           --tokens 10)

expect_usage_error("--ref REF.tmai is required" ${EVAL} ${OUT_DIR}/q4.tmai)
expect_usage_error("give the MODEL to compare with the reference (-m MODEL or MODEL)" ${EVAL} --ref ${OUT_DIR}/f32.tmai)
expect_usage_error("--tokens" ${EVAL} --ref ${OUT_DIR}/f32.tmai ${OUT_DIR}/q4.tmai --tokens 0)
expect_usage_error("unknown option --bogus" ${EVAL} --ref ${OUT_DIR}/f32.tmai ${OUT_DIR}/q4.tmai --bogus)
expect_runtime_error(TINYAI_ERR_INVALID_ARGUMENT "the reference has a vocabulary of 300 tokens, the model 400"
                     ${EVAL} --ref ${OUT_DIR}/f32.tmai ${OUT_DIR}/v400.tmai)
expect_runtime_error(TINYAI_ERR_FILE_NOT_FOUND "" ${EVAL} --ref ${OUT_DIR}/none.tmai ${OUT_DIR}/q4.tmai)

cli_finish()
