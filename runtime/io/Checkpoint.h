//===- Checkpoint.h - Tensors of several safetensors files ------*- C++ -*-===//
//
// A `TensorStore` opens the safetensors files of a model as they are on disk
// (a single file, a Hugging Face checkpoint directory, or a sharded
// checkpoint's `model.safetensors.index.json`), memory-maps them and indexes
// every tensor by name. Every header (and every index) is validated when it is
// added, before any tensor data is used.
//
// `assembleCheckpointTensor` builds one parameter from such tensors as the
// `#moe.checkpoint<[names...], transpose>` attribute declares it: per-expert
// tensors (`{e}` in the names) are stacked along a new leading dimension,
// tensors optionally have their last two dimensions swapped (nn.Linear
// [out, in] -> [in, out]; a fused [E, out, in] expert tensor, per expert),
// several tensors are concatenated along their last dimension, and the
// result is converted to the parameter's element type.
//
// Same conventions as TensorIO.h: no MLIR/LLVM dependency, no exceptions,
// one-line error messages that name the file or tensor.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_IO_CHECKPOINT_H
#define MOE_RUNTIME_IO_CHECKPOINT_H

#include "runtime/io/TensorIO.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moe {
namespace io {

/// The tensors of one or more safetensors files, by name.
class TensorStore {
public:
  /// One tensor: the file that defines it and its header entry.
  struct Entry {
    const SafeTensorsFile *file = nullptr;
    const SafeTensorInfo *info = nullptr;
  };

  TensorStore() = default;
  TensorStore(TensorStore &&) = default;
  TensorStore &operator=(TensorStore &&) = default;

  /// Adds a source:
  ///  - a directory: its `model.safetensors.index.json` if present, else its
  ///    `model.safetensors`;
  ///  - a path ending in `.json`: a sharded checkpoint index
  ///    (`{"weight_map": {"tensor": "shard file", ...}, "metadata": {...}}`;
  ///    shard names are relative to the index's directory); every shard it
  ///    names must open, and every tensor it maps must be in the named shard;
  ///  - any other path: a `.safetensors` file.
  /// A tensor name already defined by another file is an error naming both
  /// files. Adding a file that is already in the store (same device and
  /// inode) does nothing. On error the store is left unchanged.
  Status add(const std::string &path);

  /// The tensor called `name`, or nullptr.
  const Entry *find(std::string_view name) const;
  /// The raw (little-endian, C-order) bytes of a tensor; valid while the
  /// store lives.
  const uint8_t *rawData(const Entry &entry) const {
    return entry.file->rawData(*entry.info);
  }
  /// Number of tensors and of files.
  size_t size() const { return byName.size(); }
  size_t numFiles() const { return files.size(); }
  /// The sources given to add(), comma separated (for error messages).
  std::string describeSources() const;
  /// All entries, sorted by name.
  const std::map<std::string, Entry, std::less<>> &entries() const {
    return byName;
  }

private:
  struct OpenedFile {
    std::unique_ptr<SafeTensorsFile> file;
    uint64_t device = 0, inode = 0;
  };
  std::vector<OpenedFile> files;
  std::map<std::string, Entry, std::less<>> byName;
  std::vector<std::string> sources;
};

/// Parses a `model.safetensors.index.json` text: the `weight_map` object,
/// tensor name -> shard file name. Shard names must be relative paths without
/// `..` components. `name` prefixes error messages.
Result<std::map<std::string, std::string>>
parseSafeTensorsIndex(std::string_view text, std::string_view name);

/// How a checkpoint packs 4-bit codes 8 to an I32 word (#moe.checkpoint's
/// int4 = ...; docs/quantization.md): along the rows, code (r, c) in bits
/// 4*(r%8) of word [r/8][c] (Gptq); along the columns, in bits 4*(c%8) of
/// word [r][c/8], stored minus one (GptqZeros); along the columns in
/// AutoAWQ's order, the 4 bits at 4*p of word [r][w] holding column 8w +
/// {0,2,4,6,1,3,5,7}[p] (Awq); along the columns in order (PackQuantized).
enum class Int4Packing : uint8_t { None, Gptq, GptqZeros, Awq, PackQuantized };

/// "gptq", "gptq_zeros", "awq", "pack_quantized" (the attribute's spelling).
const char *int4PackingName(Int4Packing packing);
/// The shape of the codes an I32 tensor of `shape` [rows, cols] packs:
/// [8 rows, cols] (Gptq) or [rows, 8 cols].
std::vector<int64_t> int4UnpackedShape(const std::vector<int64_t> &shape, Int4Packing packing);
/// The codes of an I32 tensor `data` [rows, cols] (little-endian words)
/// packed by `packing`, one per byte: [8 rows, cols] (Gptq) or [rows, 8
/// cols]. GptqZeros adds the one GPTQ subtracts; a stored 15 is an error
/// naming the tensor `name`.
Result<std::vector<uint8_t>> unpackInt4(const uint8_t *data, const std::vector<int64_t> &shape,
                                        Int4Packing packing, std::string_view name);

/// How a parameter is assembled from checkpoint tensors (the contents of a
/// `#moe.checkpoint` attribute).
struct CheckpointSpec {
  /// Tensor names; `{e}` (in all of them or none) stands for the expert
  /// index 0..E-1 (E = the parameter's leading dimension).
  std::vector<std::string> names;
  /// Swap the last two dimensions of every tensor (2-D or more: the
  /// leading ones are a batch of matrices) before concatenating.
  bool transpose = false;
  /// FP8 weights dequantized at load: with scales (one per name, `{e}` as
  /// in the names), every named tensor is F8_E4M3 [rows, cols] (as stored)
  /// and its scale tensor (F32, BF16 or F16) [ceil(rows/blockN),
  /// ceil(cols/blockK)] multiplies its blocks: each weight becomes q * s,
  /// exact, rounded once to the parameter's (float) element type.
  std::vector<std::string> fp8Scales;
  int64_t blockN = 0, blockK = 0;
  /// int4 codes: every named tensor is I32 [rows, cols] packed so; each is
  /// unpacked to U8 codes, one per byte ([8 rows, cols] or [rows, 8 cols]),
  /// before the transposition, into a U8 parameter (an i4 argument).
  Int4Packing int4 = Int4Packing::None;
  /// int4 weights dequantized at load: with int4Scales (one per name, `{e}`
  /// as in the names) every named tensor is an nn.Linear weight packed as
  /// `int4` (Gptq: AutoGPTQ's qweight [in/8, out]; Awq: AutoAWQ's qweight
  /// [in, out/8]; PackQuantized: compressed-tensors' weight_packed
  /// [out, in/8]) with its scales (F32, BF16 or F16; [ceil(in/group), out],
  /// PackQuantized [out, ceil(in/group)]) and zero points (int4Zeros, one
  /// per name: qzeros [ceil(in/group), out/8] stored minus one for Gptq,
  /// in AutoAWQ's order for Awq; weight_zero_point [out/8, ceil(in/group)]
  /// packed along out for PackQuantized, or none: 8). Each weight becomes
  /// W[k][n] = (q - z) * s of group k / group, exact, rounded once to the
  /// parameter's (float) element type, [in, out] (no transpose).
  std::vector<std::string> int4Scales, int4Zeros;
  int64_t group = 0;

  /// Whether the names contain `{e}`.
  bool perExpert() const;
  /// `pattern` with every `{e}` replaced by the decimal `expert`.
  static std::string expand(std::string_view pattern, int64_t expert);
  /// "'a' ++ 'b' (transposed)", for messages.
  std::string describe() const;
};

/// Checks every tensor `spec` refers to (presence, dtype, rank, agreement
/// between experts) and returns the assembled shape, which must fit `shape`
/// (the parameter's shape; kDynamicDim stands for any size, but the leading
/// dimension must be static for a per-expert spec). Reads no tensor data.
/// `subject` names the parameter in messages ("argument #2 (%arg2)").
/// With `target` (the parameter's element type), the tensors' dtypes are
/// checked against it too: F32, F16 and BF16 tensors assemble into an F32,
/// F16 or BF16 parameter; F8E4M3 tensors (FP8 codes, which are not values
/// without their scales) only into an F8E4M3 parameter, which takes nothing
/// else; U8 tensors (int4 codes, one per byte) and int4-packed I32 tensors
/// only into a U8 parameter (an i4 argument).
constexpr int64_t kDynamicDim = -1;
Result<std::vector<int64_t>>
checkpointShape(const TensorStore &store, const CheckpointSpec &spec,
                const std::vector<int64_t> &shape, std::string_view subject,
                std::optional<DType> target = std::nullopt);

/// Writes the assembled tensor of shape `shape` (as returned by
/// checkpointShape) into `out` (numElements(shape) * elementSize(target)
/// bytes) with element type `target` (F32, F16, BF16, F8E4M3 or U8, with the
/// dtype rules of checkpointShape): widening is exact, narrowing rounds to
/// nearest even; a tensor already of type `target` (always, for F8E4M3) is
/// copied bit for bit.
Status assembleCheckpointTensor(const TensorStore &store,
                                const CheckpointSpec &spec,
                                const std::vector<int64_t> &shape,
                                DType target, uint8_t *out);

} // namespace io
} // namespace moe

#endif // MOE_RUNTIME_IO_CHECKPOINT_H
