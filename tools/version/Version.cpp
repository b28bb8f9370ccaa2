//===- Version.cpp - the project's version for --version -----------------===//
#include "tools/version/Version.h"

#include "MoEGitRevision.inc"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace {
const char *toolName = "moe-mlir";
} // namespace

const char *moe::version() { return MOE_VERSION; }
const char *moe::gitRevision() { return MOE_GIT_REVISION; }

void moe::installVersionPrinter(const char *tool) {
  toolName = tool;
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << toolName << " (moe-mlir " << version() << ", git " << gitRevision()
       << ")\n  built with LLVM/MLIR " << LLVM_VERSION_STRING << "\n";
  });
}
