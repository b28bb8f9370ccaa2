//===- moe-shlib.cpp - libMoEMLIR.so ---------------------------------------===//
//
// Intentionally (almost) empty: libMoEMLIR.so is the whole-archive link of the
// static moe libraries (see CMakeLists.txt beside this file). This file makes
// the public header compile on its own as part of the build.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/MoEMLIR.h"
