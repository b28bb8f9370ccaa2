// Character devices, FIFOs and directories are refused before they are
// opened (--params=/dev/zero used to read until out of memory, a FIFO
// blocked forever); --params may be a checkpoint directory.
// RUN: rm -rf %t && mkdir -p %t && mkfifo %t/fifo
// RUN: %expect_error moe-run /dev/zero --device=cpu | FileCheck %s --check-prefix=MLIR
// RUN: %expect_error moe-run %s --device=cpu --fill-random --params=/dev/zero | FileCheck %s --check-prefix=PARAMS
// RUN: %expect_error moe-run %s --device=cpu --input=%t/fifo | FileCheck %s --check-prefix=FIFO
// RUN: %expect_error moe-run %s --device=cpu --input=%t | FileCheck %s --check-prefix=DIR
// RUN: %expect_error moe-run %t --device=cpu | FileCheck %s --check-prefix=MLIRDIR

// MLIR: moe-run: the input /dev/zero is a character device; expected a regular file
// PARAMS: moe-run: --params /dev/zero is a character device; expected a regular file or a checkpoint directory
// FIFO: moe-run: --input {{.*}}fifo is a FIFO; expected a regular file
// DIR: moe-run: --input {{.*}} is a directory; expected a regular file
// MLIRDIR: moe-run: the input {{.*}} is a directory; expected a regular file

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
