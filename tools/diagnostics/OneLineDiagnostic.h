//===- OneLineDiagnostic.h - MLIR diagnostics as one line -------*- C++ -*-===//
//
// moe-run and moe-compile print every error as one line on stderr
// ("TOOL: FILE:LINE:COL: message"), so that scripts and mpirun jobs (whose
// ranks share stderr) can rely on one record per error. These helpers turn
// an MLIR diagnostic into that line; each tool adds its own prefix and
// decides which severities to print.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_DIAGNOSTICS_ONELINEDIAGNOSTIC_H
#define MOE_TOOLS_DIAGNOSTICS_ONELINEDIAGNOSTIC_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir {
namespace moe {
namespace tools {

/// `text` on one line: leading and trailing whitespace removed, every run of
/// whitespace inside (newlines included) replaced by one space.
std::string oneLine(llvm::StringRef text);

/// "FILE:LINE:COL: " for the first file location inside `loc` (walking
/// fused, name and call-site locations), or "" when it holds none.
std::string locationPrefix(Location loc);

/// `locationPrefix(diag.getLocation()) + oneLine(diag.str())`; the
/// diagnostic's attached notes are not included.
std::string oneLineDiagnostic(Diagnostic &diag);

} // namespace tools
} // namespace moe
} // namespace mlir

#endif // MOE_TOOLS_DIAGNOSTICS_ONELINEDIAGNOSTIC_H
