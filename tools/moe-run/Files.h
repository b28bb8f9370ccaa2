//===- Files.h - moe-run: the files of the command line ---------*- C++ -*-===//
//
// The checks moe-run makes on the files of its command line before anything
// is read or written (inputs are regular files, no --output overwrites an
// input or another --output, --save-args names a directory), the file
// --save-args writes for an argument, and the atomic write of --output and
// --save-args files. The command line itself stays in moe-run.cpp; these
// functions get the paths they look at in a CommandLineFiles. Every error is
// one line without the "moe-run: " prefix, the text moe-run prints.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_RUN_FILES_H
#define MOE_TOOLS_MOE_RUN_FILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moe {
namespace run {

/// The files named on moe-run's command line.
struct CommandLineFiles {
  /// The .mlir file ("-": stdin).
  std::string inputFile;
  /// --input, in order.
  std::vector<std::string> inputPaths;
  /// --params, in order.
  std::vector<std::string> paramsPaths;
  /// --output, in order.
  std::vector<std::string> outputPaths;
  /// --save-args DIR ("" when not given).
  std::string saveArgs;
};

/// "a directory", "a character device", ... for a file that is not regular.
const char *describeFileType(llvm::sys::fs::file_type type);

/// An error when `path` (given to `flag`) exists but is not a regular file
/// (or, with `directoryOk`, a directory). Missing files are left to the
/// reader, which names them. Checked before anything is opened, so that a
/// device or a FIFO is never read (/dev/zero never ends, a FIFO blocks).
std::optional<std::string> checkReadable(llvm::StringRef flag,
                                         const std::string &path,
                                         bool directoryOk);

/// The absolute, symlink-free spelling of `path`, which need not exist (its
/// folder must, else the path itself, made absolute).
std::string canonicalPath(const std::string &path);

/// Whether `a` and `b` name the same file: the same inode when both exist,
/// else the same canonical path.
bool sameFile(const std::string &a, const std::string &b);

/// Whether `path` lies inside the directory `dir` (canonical spellings).
bool isInside(const std::string &path, const std::string &dir);

/// Checks the files of the command line before anything is read or written:
/// inputs must be regular files (--params: or a checkpoint directory);
/// every --output must be a regular file or not exist yet, and must not be
/// an input (the .mlir, an --input, a --params file or a file inside a
/// --params checkpoint directory) or another --output.
std::optional<std::string> checkPaths(const CommandLineFiles &files);

/// The file --save-args writes for argument `index`, or an error when that
/// file is an input or an --output.
llvm::Expected<std::string> saveArgPath(const CommandLineFiles &files,
                                        size_t index);

/// Writes `bytes` to `path` through a temporary file in the same folder,
/// renamed over `path` once complete: a failed write leaves an existing
/// `path` untouched. Errors start with `flag` and `path`.
std::optional<std::string>
writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes,
                    llvm::StringRef flag = "--output");

} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_FILES_H
