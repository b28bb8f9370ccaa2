// Without a usable CUDA driver, --device=cuda is one clear error (exit 1)
// and --device=auto runs on the CPU and says why on stderr. The driver is
// looked up as $MOE_CUDA_DRIVER (default libcuda.so.1); pointing it at a
// missing file gives the same behaviour on a machine that has a GPU.
// RUN: env MOE_CUDA_DRIVER=%t.no-such-libcuda.so %expect_error moe-run %s --device=cuda --fill-random | FileCheck %s
// RUN: env MOE_CUDA_DRIVER=%t.no-such-libcuda.so moe-run %s --device=auto --fill-random 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: %expect_error moe-run %s --device=tpu --fill-random | FileCheck %s --check-prefix=BAD

// CHECK: moe-run: --device=cuda: cannot load the CUDA driver (dlopen {{.*}}no-such-libcuda.so: {{.*}})
// AUTO: moe-run: device auto: using cpu (cannot load the CUDA driver (dlopen {{.*}}no-such-libcuda.so: {{.*}}))
// AUTO: result #0: tensor<4xf32> checksum:
// BAD: moe-run: for the --device option: Cannot find option named 'tpu'!

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
