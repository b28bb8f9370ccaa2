//===- OptLevel.h - the tools' --opt-level ----------------------*- C++ -*-===//
//
// moe-run and moe-compile take `--opt-level=N`, the LLVM optimization level
// of the host code they compile (the IR pipeline's O-level and the code
// generator's), with a default from an environment variable
// (MOE_RUN_OPT_LEVEL, MOE_COMPILE_OPT_LEVEL) so that a test suite can lower
// it for every call at once.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_OPTLEVEL_H
#define MOE_TOOLS_OPTLEVEL_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace mlir::moe::tools {

/// The level: `flag` when the option was given (`given`), else the value of
/// the environment variable `envVar` when it is set and not empty, else 3.
/// A value outside 0..3 is an error naming where it came from
/// ("--opt-level must be 0, 1, 2 or 3, got 4").
llvm::Expected<unsigned> resolveOptLevel(int flag, bool given, llvm::StringRef envVar);

} // namespace mlir::moe::tools

#endif // MOE_TOOLS_OPTLEVEL_H
