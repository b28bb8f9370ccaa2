//===- TestUtil.h - Helpers for the tensor I/O unit tests ------*- C++ -*-===//

#ifndef MOE_TEST_UNIT_IO_TESTUTIL_H
#define MOE_TEST_UNIT_IO_TESTUTIL_H

#include "runtime/io/TensorIO.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace moe {
namespace io {
namespace testing {

/// A fixture owning a fresh temporary directory, removed after the test.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir();
    if (pattern.empty() || pattern.back() != '/')
      pattern += '/';
    pattern += "moe-io-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    ASSERT_NE(mkdtemp(buffer.data()), nullptr) << "mkdtemp failed";
    dir = buffer.data();
  }
  void TearDown() override {
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
  std::string path(const std::string &name) const { return dir + "/" + name; }

  std::string dir;
};

inline std::vector<uint8_t> bytesOf(const std::string &s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

inline std::string stringOf(const std::vector<uint8_t> &b) {
  return std::string(b.begin(), b.end());
}

/// Checks the error conventions: a failure whose message is one printable
/// line starting with "NAME: " and containing `needle`.
inline ::testing::AssertionResult isOneLineError(const std::string &message,
                                                 const std::string &name,
                                                 const std::string &needle) {
  if (message.empty())
    return ::testing::AssertionFailure() << "expected an error, got success";
  for (char c : message)
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f)
      return ::testing::AssertionFailure()
             << "message has a non-printable byte: " << message;
  if (message.rfind(name + ": ", 0) != 0)
    return ::testing::AssertionFailure()
           << "message does not start with '" << name << ": ': " << message;
  if (message.find(needle) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message lacks '" << needle << "': " << message;
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult failsWith(const Result<T> &result,
                                     const std::string &name,
                                     const std::string &needle) {
  if (result.ok())
    return ::testing::AssertionFailure() << "expected an error, got success";
  return isOneLineError(result.error(), name, needle);
}

inline ::testing::AssertionResult failsWith(const Status &status,
                                            const std::string &name,
                                            const std::string &needle) {
  if (status.ok())
    return ::testing::AssertionFailure() << "expected an error, got success";
  return isOneLineError(status.error(), name, needle);
}

inline void expectSameTensor(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.data, b.data);
}

/// Deterministic bytes 0, 1, 2, ... (mod 251) of length n.
inline std::vector<uint8_t> patternBytes(size_t n, unsigned seed = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>((i * 7 + seed) % 251);
  return v;
}

} // namespace testing
} // namespace io
} // namespace moe

#endif // MOE_TEST_UNIT_IO_TESTUTIL_H
