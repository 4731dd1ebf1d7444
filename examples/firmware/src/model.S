/* The model image, linked into flash and used there in place (64-byte
 * aligned, as tinyaiOpenMappedModelFromMemory wants). FIRMWARE_MODEL is the
 * .tmai file's path (CMakeLists.txt). */
    .section .rodata.model, "a"
    .balign 64
    .global tinyai_model_start
tinyai_model_start:
    .incbin FIRMWARE_MODEL
    .global tinyai_model_end
tinyai_model_end:
