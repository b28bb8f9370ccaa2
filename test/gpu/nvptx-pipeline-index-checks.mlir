// --moe-nvptx-pipeline passes check-indices to convert-moe-to-gpu: by
// default a moe.combine of hand-written positions launches the checked
// kernel and the host calls moeRuntimeIndexError on a violation; with
// check-indices=false neither is in the lowered module.
// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s --moe-nvptx-pipeline="format=isa" | FileCheck %s --check-prefix=ON
// RUN: moe-opt %s --moe-nvptx-pipeline="check-indices=false format=isa" | FileCheck %s --check-prefix=OFF
// ON: llvm.func @moeRuntimeIndexError(i32, i64, i64, i64, i64)
// ON: llvm.call @moeRuntimeIndexError(
// ON: moe_combine_checked_kernel
// OFF-NOT: moeRuntimeIndexError
// OFF-NOT: _checked
// OFF: moe_combine_kernel
// OFF-NOT: moeRuntimeIndexError
// OFF-NOT: _checked
func.func @combine(%out: tensor<8x4xf32>, %w: tensor<4x2xf32>, %pos: tensor<4x2xi32>) -> tensor<4x4xf32> {
  %y = moe.combine %out, %w, %pos : (tensor<8x4xf32>, tensor<4x2xf32>, tensor<4x2xi32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
