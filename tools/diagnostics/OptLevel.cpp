//===- OptLevel.cpp - the tools' --opt-level ------------------------------===//

#include "tools/diagnostics/OptLevel.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "llvm/Support/CodeGen.h"

#include <cstdlib>
#include <optional>
#include <string>

llvm::Expected<unsigned> mlir::moe::tools::resolveOptLevel(int flag, bool given,
                                                           llvm::StringRef envVar) {
  if (given) {
    if (flag < 0 || flag > 3)
      return llvm::createStringError("--opt-level must be 0, 1, 2 or 3, got " +
                                     std::to_string(flag));
    return static_cast<unsigned>(flag);
  }
  const char *env = std::getenv(envVar.str().c_str());
  if (!env || !*env)
    return 3u;
  llvm::StringRef text(env);
  std::optional<llvm::CodeGenOptLevel> level;
  if (text.size() == 1)
    level = llvm::CodeGenOpt::parseLevel(text[0]);
  if (!level)
    return llvm::createStringError(envVar.str() + " must be 0, 1, 2 or 3, got '" + text.str() +
                                   "'");
  return static_cast<unsigned>(*level);
}

unsigned mlir::moe::tools::compileLevelFor(mlir::ModuleOp lowered, unsigned level) {
  if (level > 0)
    return level;
  auto isTile = [](mlir::Type t) { return llvm::isa<mlir::LLVM::LLVMX86AMXType>(t); };
  bool tiles = lowered
                   ->walk([&](mlir::Operation *op) {
                     if (llvm::any_of(op->getResultTypes(), isTile) ||
                         llvm::any_of(op->getOperandTypes(), isTile))
                       return mlir::WalkResult::interrupt();
                     return mlir::WalkResult::advance();
                   })
                   .wasInterrupted();
  return tiles ? 1 : level;
}
