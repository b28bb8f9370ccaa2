//===- OneLineDiagnostic.cpp - MLIR diagnostics as one line ---------------===//

#include "tools/diagnostics/OneLineDiagnostic.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

using namespace mlir;

std::string mlir::moe::tools::oneLine(llvm::StringRef text) {
  std::string out;
  bool space = false;
  for (char c : text.trim()) {
    if (llvm::isSpace(c)) {
      space = true;
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string mlir::moe::tools::locationPrefix(Location loc) {
  std::string prefix;
  loc->walk([&](Location l) {
    if (auto file = dyn_cast<FileLineColLoc>(l)) {
      prefix = (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) + ":" +
                llvm::Twine(file.getColumn()) + ": ")
                   .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return prefix;
}

std::string mlir::moe::tools::oneLineDiagnostic(Diagnostic &diag) {
  return locationPrefix(diag.getLocation()) + oneLine(diag.str());
}
