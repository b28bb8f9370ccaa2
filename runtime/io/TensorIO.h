//===- TensorIO.h - Tensor values and .npy / .safetensors I/O ---*- C++ -*-===//
//
// The tensor I/O library of the moe-mlir runtime. It has no MLIR or LLVM
// dependency and throws no exceptions (it builds with -fno-exceptions
// -fno-rtti).
//
// Error handling: every fallible function returns a `Status` or a
// `Result<T>`. An error is a single line of text (no newline, only printable
// ASCII) that names the file (or the buffer name the caller passed) and the
// problem, e.g. "x.npy: unsupported dtype '<c8'". Malformed or malicious input
// never crashes, never reads outside the input, and never makes the library
// allocate more than a small multiple of the input size: every size that comes
// from a header is checked against the bytes actually present first.
//
// Element data is always stored little-endian in C (row-major) order, which is
// also the host order (the library requires a little-endian host).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_IO_TENSORIO_H
#define MOE_RUNTIME_IO_TENSORIO_H

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moe {
namespace io {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// An error message (one line). Return it from a function that returns
/// `Status` or `Result<T>`.
struct Error {
  std::string message;
};

/// Success, or an error message.
class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  /// Failure with the given message.
  Status(Error error) : failed(true), message(std::move(error.message)) {}

  static Status success() { return Status(); }

  bool ok() const { return !failed; }
  explicit operator bool() const { return !failed; }
  /// The error message; empty on success.
  const std::string &error() const { return message; }

private:
  bool failed = false;
  std::string message;
};

/// A value of type T, or an error message.
template <typename T> class [[nodiscard]] Result {
public:
  Result(const T &value) : storage(value) {}
  Result(T &&value) : storage(std::move(value)) {}
  Result(Error error) : message(std::move(error.message)) {}
  /// Forwards a failed Status (it must be an error).
  Result(const Status &status) : message(status.error()) {
    if (message.empty())
      message = "internal error: Result built from a successful Status";
  }

  bool ok() const { return storage.has_value(); }
  explicit operator bool() const { return storage.has_value(); }
  /// The error message; empty on success.
  const std::string &error() const { return message; }
  /// The error as a Status (success if this holds a value).
  Status status() const { return ok() ? Status() : Status(Error{message}); }

  /// Access to the value; only valid when ok().
  T &value() & {
    assert(ok() && "Result holds an error");
    return *storage;
  }
  const T &value() const & {
    assert(ok() && "Result holds an error");
    return *storage;
  }
  T &&value() && {
    assert(ok() && "Result holds an error");
    return std::move(*storage);
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  /// Moves the value out; only valid when ok().
  T take() { return std::move(value()); }

private:
  std::optional<T> storage;
  std::string message;
};

//===----------------------------------------------------------------------===//
// Element types and tensors
//===----------------------------------------------------------------------===//

/// F8E4M3: the 8-bit float of FP8 checkpoints (OCP E4M3, "e4m3fn": 1 sign,
/// 4 exponent bits with bias 7, 3 fraction bits, no infinities, S.1111.111
/// is NaN, largest finite 448), a storage type: runtime/io/Quantized.h.
/// U8: unsigned bytes; the storage of int4 codes (one code 0..15 per byte,
/// as an i4 tensor is laid out in memory, docs/spec.md §2.1).
enum class DType : uint8_t { F32, F16, BF16, I32, I64, F8E4M3, U8 };

/// Size of one element in bytes (4, 2, 2, 4, 8, 1, 1).
size_t elementSize(DType dtype);
/// MLIR spelling: "f32", "f16", "bf16", "i32", "i64", "f8E4M3FN", "ui8".
const char *dtypeName(DType dtype);
/// safetensors spelling: "F32", "F16", "BF16", "I32", "I64", "F8_E4M3", "U8".
const char *safetensorsDTypeName(DType dtype);
/// numpy descr written to .npy files: "<f4", "<f2", "<i4", "<i8", "|u1";
/// nullptr for BF16 and F8E4M3 (numpy has no such type).
const char *npyDescr(DType dtype);
/// Accepts the MLIR and the safetensors spellings.
std::optional<DType> parseDType(std::string_view name);
/// True for F32, F16, BF16 (the element types of the IR's tensors; F8E4M3 is
/// a storage type that convertTensor widens exactly).
bool isFloatType(DType dtype);

/// "[2, 3]" ("[]" for a 0-d shape).
std::string formatShape(const std::vector<int64_t> &shape);

/// Number of elements of `shape` (1 for a 0-d shape, 0 if any dimension is
/// 0); std::nullopt if a dimension is negative or the count overflows int64.
std::optional<int64_t> shapeNumElements(const std::vector<int64_t> &shape);

/// A dense tensor: element type, shape (empty = 0-d scalar) and the raw
/// little-endian bytes in C order.
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  Tensor() = default;
  Tensor(DType type, std::vector<int64_t> dims, std::vector<uint8_t> bytes)
      : dtype(type), shape(std::move(dims)), data(std::move(bytes)) {}

  /// A tensor holding a copy of `values` (whose element size must equal the
  /// dtype's, e.g. float for F32, uint16_t for F16/BF16 bit patterns,
  /// int32_t / int64_t for I32 / I64; see validate()).
  template <typename T>
  static Tensor fromValues(DType type, std::vector<int64_t> dims,
                           const std::vector<T> &values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    if (!bytes.empty())
      std::memcpy(bytes.data(), values.data(), bytes.size());
    return Tensor(type, std::move(dims), std::move(bytes));
  }

  /// The elements reinterpreted as T (sizeof(T) should equal elementSize();
  /// trailing bytes that do not fill a T are ignored).
  template <typename T> std::vector<T> toVector() const {
    std::vector<T> values(data.size() / sizeof(T));
    if (!values.empty())
      std::memcpy(values.data(), data.data(), values.size() * sizeof(T));
    return values;
  }

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Number of elements implied by the shape (1 for 0-d); -1 if the shape is
  /// invalid (negative dimension or overflow).
  int64_t numElements() const;
  size_t elementSize() const { return io::elementSize(dtype); }
  /// Bytes implied by the shape and dtype (numElements() * elementSize()).
  /// Only meaningful when validate() succeeds.
  size_t byteSize() const;

  /// Checks that the dimensions are non-negative, that the byte size does not
  /// overflow and that data.size() == numElements() * elementSize(). `name`
  /// prefixes the error message.
  Status validate(std::string_view name) const;
};

//===----------------------------------------------------------------------===//
// Element type conversion
//===----------------------------------------------------------------------===//

/// IEEE binary16 <-> binary32. float -> half rounds to nearest, ties to even
/// (subnormals included); overflow gives +-inf. half -> float is exact. NaN
/// stays NaN in both directions: the sign and the leading payload bits are
/// kept and the quiet bit is set (as hardware conversions do).
uint16_t floatToHalfBits(float value);
float halfBitsToFloat(uint16_t bits);
/// bfloat16 <-> binary32, same rules as above.
uint16_t floatToBFloat16Bits(float value);
float bfloat16BitsToFloat(uint16_t bits);

/// Converts a tensor to the element type `target`, which must be F32, F16 or
/// BF16; the source may have any dtype. Widening float conversions (F8E4M3
/// to any of them included) are exact;
/// narrowing ones and integer -> float round to nearest, ties to even (with
/// a single rounding, also for I64 -> F16/BF16). Converting to the same dtype
/// copies. The source must be valid (see Tensor::validate).
Result<Tensor> convertTensor(const Tensor &tensor, DType target);

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// Reads a whole file. Error: "PATH: cannot open: <strerror>" and the like.
Result<std::vector<uint8_t>> readFileBytes(const std::string &path);
/// Creates or truncates `path` and writes `bytes`.
Status writeFileBytes(const std::string &path, const uint8_t *bytes,
                      size_t size);

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

/// Reads a .npy file (format versions 1.0, 2.0, 3.0). Supported descr:
/// '<f4', '<f2', '<i4', '<i8' ('|' and '=' byte orders are accepted as
/// little-endian); fortran_order must be False; the data size must match the
/// shape exactly.
Result<Tensor> readNpy(const std::string &path);
/// Like readNpy, and also accepts float64 ('<f8') data, converted to
/// `target` (f32, bf16 or f16; any other target is an error) with one
/// rounding to nearest even; `wasF64` tells whether that happened. Data of
/// the other dtypes is returned unchanged (the caller checks the dtype).
Result<Tensor> readNpyConverting(const std::string &path, DType target,
                                 bool &wasF64);
/// readNpyConverting on .npy bytes in memory; `name` is used in error
/// messages.
Result<Tensor> parseNpyConverting(const uint8_t *bytes, size_t size,
                                  std::string_view name, DType target,
                                  bool &wasF64);
/// Parses .npy bytes; `name` is used in error messages.
Result<Tensor> parseNpy(const uint8_t *bytes, size_t size,
                        std::string_view name);

/// Encodes a tensor exactly as numpy.save does (format 1.0, or 2.0 when the
/// header needs it; data starts at a multiple of 64 bytes). BF16 is an error
/// (numpy cannot represent it). `name` is used in error messages.
Result<std::vector<uint8_t>> encodeNpy(const Tensor &tensor,
                                       std::string_view name = "<npy>");
Status writeNpy(const std::string &path, const Tensor &tensor);

//===----------------------------------------------------------------------===//
// .safetensors
//===----------------------------------------------------------------------===//

/// One tensor entry of a safetensors header.
struct SafeTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Byte range [dataBegin, dataEnd) relative to the start of the data
  /// section (the byte after the JSON header).
  uint64_t dataBegin = 0;
  uint64_t dataEnd = 0;
};

/// An opened, fully validated safetensors file. Opening checks the whole
/// header (sizes, dtypes, offsets, overlaps) before any tensor data is read;
/// the file is memory-mapped when possible, read into memory otherwise.
///
/// Accepted beyond the reference implementation: gaps between tensors and
/// unused bytes after the last tensor (the reference requires the tensors to
/// tile the data section exactly), and unknown extra fields in a tensor entry
/// (the reference ignores them too).
class SafeTensorsFile {
public:
  /// Opens and validates `path`.
  static Result<SafeTensorsFile> open(const std::string &path);
  /// Validates an in-memory file image; `name` is used in error messages.
  static Result<SafeTensorsFile> fromBuffer(std::vector<uint8_t> bytes,
                                            std::string name);

  SafeTensorsFile(SafeTensorsFile &&other) noexcept;
  SafeTensorsFile &operator=(SafeTensorsFile &&other) noexcept;
  SafeTensorsFile(const SafeTensorsFile &) = delete;
  SafeTensorsFile &operator=(const SafeTensorsFile &) = delete;
  ~SafeTensorsFile();

  /// The path (or buffer name) given when opening.
  const std::string &path() const { return filePath; }
  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  /// All entries, sorted by name.
  const std::vector<SafeTensorInfo> &tensors() const { return entries; }
  size_t size() const { return entries.size(); }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// The entry called `name`, or nullptr.
  const SafeTensorInfo *find(std::string_view name) const;
  /// The "__metadata__" map (empty if absent).
  const std::map<std::string, std::string> &metadata() const {
    return metadataMap;
  }

  /// A copy of the tensor called `name`.
  /// Error: "PATH: no tensor named 'NAME'".
  Result<Tensor> get(std::string_view name) const;
  /// The tensor called `name`, converted to `target` (F32, F16 or BF16).
  Result<Tensor> get(std::string_view name, DType target) const;
  /// Pointer to the raw bytes of an entry of this file (no copy; valid while
  /// this object lives; may be unaligned).
  const uint8_t *rawData(const SafeTensorInfo &info) const;

private:
  struct Storage;
  SafeTensorsFile();
  static Result<SafeTensorsFile> validate(std::unique_ptr<Storage> storage,
                                          std::string name);

  std::string filePath;
  std::unique_ptr<Storage> storage;
  /// Offset of the data section in the file (8 + header length).
  uint64_t dataStart = 0;
  std::vector<SafeTensorInfo> entries;
  std::map<std::string, std::string> metadataMap;
};

/// Encodes tensors as a safetensors file image, byte-identical to what the
/// reference implementation (huggingface/safetensors `serialize`) writes:
/// tensors are laid out by descending dtype alignment (I64, F32, I32, BF16,
/// F16), then by name, back to back, so every tensor is naturally aligned;
/// the header lists "__metadata__" first (if non-empty, keys sorted) then the
/// tensors in data order (for a single dtype: sorted by name); the JSON header
/// is compact and padded with spaces to a multiple of 8 bytes.
/// The name "__metadata__" is rejected as a tensor name.
Result<std::vector<uint8_t>>
encodeSafeTensors(const std::map<std::string, Tensor> &tensors,
                  const std::map<std::string, std::string> &metadata = {},
                  std::string_view name = "<safetensors>");
/// Writes encodeSafeTensors' bytes to `path` (streamed, no full copy).
Status
writeSafeTensors(const std::string &path,
                 const std::map<std::string, Tensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace io
} // namespace moe

#endif // MOE_RUNTIME_IO_TENSORIO_H
