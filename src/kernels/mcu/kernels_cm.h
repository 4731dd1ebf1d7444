// Products for Cortex-M cores (kernels_cm.cc): the grouped dtypes' integer
// dot products with the DSP extension (SMLAD / SXTB16 / PKHBT, as CMSIS-NN
// uses them; Cortex-M4, M7, M33, M55) and with Helium, the M-profile vector
// extension (MVE: VMLADAVA; Cortex-M55, M85). Every other entry is the
// reference's. The float sums are the reference's, in its order, so a
// table's results equal Ref()'s bit for bit: a microcontroller's text is the
// host reference's.
//
// On a target without the instructions (the host, for the parity tests),
// each instruction is a C function with its architectural meaning, so the
// same kernel code is checked against the reference there.
#ifndef TINYAI_KERNELS_MCU_KERNELS_CM_H_
#define TINYAI_KERNELS_MCU_KERNELS_CM_H_

#include "kernels/kernels.h"

namespace tinyai {
namespace kernels {

const KernelTable& CortexMDspTable();  // "cm-dsp"
const KernelTable& CortexMMveTable();  // "cm-mve"

// Whether this build runs the instructions themselves (not their C
// emulation): dispatch.cc offers a table only then.
bool CortexMDspNative();
bool CortexMMveNative();

}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_MCU_KERNELS_CM_H_
