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

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace mlir::moe::tools {

/// The level: `flag` when the option was given (`given`), else the value of
/// the environment variable `envVar` when it is set and not empty, else 3.
/// A value outside 0..3 is an error naming where it came from
/// ("--opt-level must be 0, 1, 2 or 3, got 4").
llvm::Expected<unsigned> resolveOptLevel(int flag, bool given, llvm::StringRef envVar);

/// The level to compile `lowered` (the LLVM dialect module) at when `level`
/// was asked for: 1 in place of 0 when the module holds AMX tile values
/// (`!llvm.x86_amx`, the CPU path's AMX micro-kernels), which LLVM 22 can
/// only compile with its IR passes and code generator at O1 or above (at
/// O0 instruction selection fails: "Cannot select ... x86amx"); `level`
/// otherwise. The results are the same bits at every level.
unsigned compileLevelFor(mlir::ModuleOp lowered, unsigned level);

} // namespace mlir::moe::tools

#endif // MOE_TOOLS_OPTLEVEL_H
