// An allocation moe-run cannot make is one line naming the size and the
// argument (4 TiB here: more than the host can commit).
// RUN: %expect_error moe-run %s --device=cpu --fill-random | FileCheck %s

// CHECK: moe-run: cannot allocate 4398046511104 bytes for argument #0 (%arg0) (tensor<1099511627776xf32>)

func.func @f(%x: tensor<1099511627776xf32>) -> tensor<1xf32> {
  %s = tensor.extract_slice %x[0] [1] [1] : tensor<1099511627776xf32> to tensor<1xf32>
  return %s : tensor<1xf32>
}
