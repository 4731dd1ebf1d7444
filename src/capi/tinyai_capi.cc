#include "format/tmai_format.h"
#include "port/port.h"
#include "tinyai/tinyai.h"

extern "C" {

const char* tinyaiVersionString(void) { return TINYAI_VERSION_STRING; }

uint32_t tinyaiFormatVersion(void) { return tinyai::tmai::kVersionMajor; }

uint64_t tinyaiGetProcessPeakRss(void) { return tinyai::port::PeakRssBytes(); }

uint64_t tinyaiGetProcessCurrentRss(void) { return tinyai::port::CurrentRssBytes(); }

}  // extern "C"
