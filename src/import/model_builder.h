// Every offline builder, for the tools and the tests that make models.
#ifndef TINYAI_IMPORT_MODEL_BUILDER_H_
#define TINYAI_IMPORT_MODEL_BUILDER_H_

#include "import/builder.h"
#include "import/dense_def.h"
#include "import/gguf_import.h"
#include "import/hf_import.h"
#include "import/llama2c.h"
#include "import/reencode.h"
#include "import/synthetic.h"

#endif  // TINYAI_IMPORT_MODEL_BUILDER_H_
