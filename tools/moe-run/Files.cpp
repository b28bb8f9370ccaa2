//===- Files.cpp - moe-run: the files of the command line -----------------===//
//
// The checks on the command line's files (Files.h): file types, the same
// file under two names (inodes, else canonical paths), --output and
// --save-args files that would overwrite an input, and the write through a
// temporary file renamed over the target.
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/Files.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace moe {
namespace run {

namespace fs = llvm::sys::fs;

const char *describeFileType(fs::file_type type) {
  switch (type) {
  case fs::file_type::directory_file:
    return "a directory";
  case fs::file_type::character_file:
    return "a character device";
  case fs::file_type::block_file:
    return "a block device";
  case fs::file_type::fifo_file:
    return "a FIFO";
  case fs::file_type::socket_file:
    return "a socket";
  default:
    return "not a regular file";
  }
}

std::optional<std::string> checkReadable(llvm::StringRef flag,
                                         const std::string &path,
                                         bool directoryOk) {
  fs::file_status status;
  if (fs::status(path, status))
    return std::nullopt;
  fs::file_type type = status.type();
  if (type == fs::file_type::regular_file ||
      (directoryOk && type == fs::file_type::directory_file))
    return std::nullopt;
  return (flag + " " + path + " is " + describeFileType(type) + "; " +
          (directoryOk ? "expected a regular file or a checkpoint directory"
                       : "expected a regular file"))
      .str();
}

std::string canonicalPath(const std::string &path) {
  llvm::SmallString<256> real;
  if (!fs::real_path(path, real))
    return std::string(real);
  llvm::SmallString<256> parent(llvm::sys::path::parent_path(path));
  if (parent.empty())
    parent = ".";
  if (!fs::real_path(parent, real)) {
    llvm::sys::path::append(real, llvm::sys::path::filename(path));
    return std::string(real);
  }
  llvm::SmallString<256> absolute(path);
  fs::make_absolute(absolute);
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  return std::string(absolute);
}

bool sameFile(const std::string &a, const std::string &b) {
  fs::UniqueID idA, idB;
  if (!fs::getUniqueID(a, idA) && !fs::getUniqueID(b, idB))
    return idA == idB;
  return canonicalPath(a) == canonicalPath(b);
}

bool isInside(const std::string &path, const std::string &dir) {
  std::string p = canonicalPath(path), d = canonicalPath(dir);
  if (!llvm::StringRef(d).ends_with("/"))
    d += "/";
  return llvm::StringRef(p).starts_with(d);
}

std::optional<std::string> checkPaths(const CommandLineFiles &files) {
  const std::string &inputFile = files.inputFile;
  const std::vector<std::string> &inputPaths = files.inputPaths;
  const std::vector<std::string> &paramsPaths = files.paramsPaths;
  const std::vector<std::string> &outputPaths = files.outputPaths;
  const std::string &saveArgs = files.saveArgs;

  if (inputFile != "-")
    if (auto error = checkReadable("the input", inputFile, false))
      return error;
  for (const std::string &path : inputPaths)
    if (auto error = checkReadable("--input", path, false))
      return error;
  for (const std::string &path : paramsPaths)
    if (auto error = checkReadable("--params", path, true))
      return error;

  for (auto [i, path] : llvm::enumerate(outputPaths)) {
    fs::file_status status;
    if (!fs::status(path, status) &&
        status.type() != fs::file_type::regular_file)
      return "--output " + path + " is " + describeFileType(status.type()) +
             "; --output writes a regular file";
    if (inputFile != "-" && sameFile(path, inputFile))
      return "--output " + path + " is the input " + inputFile +
             "; it would be overwritten";
    for (const std::string &input : inputPaths)
      if (sameFile(path, input))
        return "--output " + path + " is the --input " + input +
               "; it would be overwritten";
    for (const std::string &params : paramsPaths) {
      if (fs::is_directory(params)) {
        if (isInside(path, params))
          return "--output " + path + " is inside the --params directory " +
                 params + "; write results elsewhere";
      } else if (sameFile(path, params) ||
                 (llvm::StringRef(params).ends_with(".json") &&
                  isInside(path, std::string(llvm::sys::path::parent_path(
                                     canonicalPath(params)))))) {
        return "--output " + path + " is or may be a file of the --params " +
               params + "; write results elsewhere";
      }
    }
    for (size_t j = 0; j < i; ++j)
      if (sameFile(path, outputPaths[j]))
        return "--output " + path + " is also --output #" +
               std::to_string(j) + " (" + outputPaths[j] +
               "); give each result its own file";
  }
  if (!saveArgs.empty() && !fs::is_directory(saveArgs))
    return "--save-args " + saveArgs + " is not an existing directory";
  return std::nullopt;
}

llvm::Expected<std::string> saveArgPath(const CommandLineFiles &files,
                                        size_t index) {
  llvm::SmallString<256> path(files.saveArgs);
  llvm::sys::path::append(path, "arg" + std::to_string(index) + ".npy");
  std::string result(path);
  auto clash = [&](const std::string &other, llvm::StringRef what) {
    return llvm::createStringError("--save-args would overwrite " + what.str() +
                                   " " + other + " (argument #" +
                                   std::to_string(index) + ")");
  };
  if (files.inputFile != "-" && sameFile(result, files.inputFile))
    return clash(files.inputFile, "the input");
  for (const std::string &other : files.inputPaths)
    if (sameFile(result, other))
      return clash(other, "the --input");
  for (const std::string &other : files.paramsPaths)
    if (sameFile(result, other))
      return clash(other, "the --params");
  for (const std::string &other : files.outputPaths)
    if (sameFile(result, other))
      return clash(other, "the --output");
  return result;
}

std::optional<std::string>
writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes,
                    llvm::StringRef flag) {
  llvm::SmallString<256> model(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(path) +
                                     ".tmp-%%%%%%%%");
  int fd;
  llvm::SmallString<256> tempPath;
  if (std::error_code ec = fs::createUniqueFile(model, fd, tempPath))
    return flag.str() + " " + path + ": cannot create a temporary file: " +
           ec.message();
  std::error_code writeError;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    os.close();
    writeError = os.error();
    os.clear_error();
  }
  if (!writeError)
    writeError = fs::rename(tempPath, path);
  if (writeError) {
    fs::remove(tempPath);
    return flag.str() + " " + path + ": cannot write: " + writeError.message();
  }
  return std::nullopt;
}

} // namespace run
} // namespace moe
