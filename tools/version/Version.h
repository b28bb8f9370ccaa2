//===- Version.h - the project's version for --version ----------*- C++ -*-===//
#ifndef MOE_TOOLS_VERSION_VERSION_H
#define MOE_TOOLS_VERSION_VERSION_H

namespace moe {

/// "0.4.0" (the CMake project version).
const char *version();
/// The git revision the tools were built from ("abc123def456", with
/// "-modified" for uncommitted changes, or "unknown" outside a git clone).
const char *gitRevision();
/// Makes `--version` of the calling tool print
///   <tool> (moe-mlir 0.4.0, git abc123def456)
///   built with LLVM/MLIR 22.x.y
/// (call before llvm::cl::ParseCommandLineOptions / MlirOptMain).
void installVersionPrinter(const char *tool);

} // namespace moe

#endif // MOE_TOOLS_VERSION_VERSION_H
