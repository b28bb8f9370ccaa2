// Host code exercising every runtime call that MLIR 22's gpu-to-llvm (and
// nvgpu-to-nvvm, for TMA descriptors) emits. Lowered by mgpu-abi.test with
// the stock mlir-opt/mlir-translate; the resulting `declare`s are the ABI
// that runtime/cuda/MgpuAbi.h must implement.
!tma = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
module attributes {gpu.container_module} {
  // Compiled by the pipeline to PTX (format=isa): loaded with mgpuModuleLoadJIT.
  gpu.module @ptx_kernels {
    gpu.func @k(%a: memref<?xf32>, %n: index, %f: f32) kernel {
      %i = gpu.thread_id x
      %c = arith.cmpi ult, %i, %n : index
      scf.if %c {
        memref.store %f, %a[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
  // An already-compiled binary (cubin/fatbin): loaded with mgpuModuleLoad(data, size).
  gpu.binary @bin_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, "BLOB">]

  func.func @host(%h: memref<?xf32>, %n: index, %f: f32, %v32: i32, %v16: f16,
                  %hu: memref<*xf32>, %t: memref<*xf16>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %smem = arith.constant 1024 : i32
    // alloc / memcpy / memset32 / launch with dynamic shared memory / memset16 / free
    %t0 = gpu.wait async
    %d, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
    %t2 = gpu.memcpy async [%t1] %d, %h : memref<?xf32>, memref<?xf32>
    %t3 = gpu.memset async [%t2] %d, %f : memref<?xf32>, f32
    %t4 = gpu.launch_func async [%t3] @ptx_kernels::@k blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) dynamic_shared_memory_size %smem args(%d : memref<?xf32>, %n : index, %f : f32)
    %t5 = gpu.memcpy async [%t4] %h, %d : memref<?xf32>, memref<?xf32>
    %d16, %t6 = gpu.alloc async [%t5] (%n) : memref<?xf16>
    %t7 = gpu.memset async [%t6] %d16, %v16 : memref<?xf16>, f16
    %di, %t8 = gpu.alloc async [%t7] (%n) : memref<?xi32>
    %t9 = gpu.memset async [%t8] %di, %v32 : memref<?xi32>, i32
    %t10 = gpu.dealloc async [%t9] %di : memref<?xi32>
    %t11 = gpu.dealloc async [%t10] %d16 : memref<?xf16>
    %t12 = gpu.dealloc async [%t11] %d : memref<?xf32>
    gpu.wait [%t12]
    // host-shared (managed) allocation, synchronous launch
    %m = gpu.alloc host_shared (%n) : memref<?xf32>
    gpu.launch_func @ptx_kernels::@k blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%m : memref<?xf32>, %n : index, %f : f32)
    // two streams joined through events, then a cluster launch of the binary
    %a0 = gpu.wait async
    %a1 = gpu.launch_func async [%a0] @ptx_kernels::@k blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%m : memref<?xf32>, %n : index, %f : f32)
    %b0 = gpu.wait async
    %b1 = gpu.launch_func async [%b0] @bin_kernels::@k blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%m : memref<?xf32>, %n : index, %f : f32)
    %j = gpu.wait async [%a1, %b1]
    %c = gpu.launch_func async [%j] @bin_kernels::@k clusters in (%c2, %c1, %c1) blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%m : memref<?xf32>, %n : index, %f : f32)
    %e = gpu.dealloc async [%c] %m : memref<?xf32>
    gpu.wait [%e]
    // host registration, device selection, TMA descriptor
    gpu.host_register %hu : memref<*xf32>
    gpu.host_unregister %hu : memref<*xf32>
    %dev = arith.constant 0 : i32
    gpu.set_default_device %dev
    %box = arith.constant 64 : index
    %desc = nvgpu.tma.create.descriptor %t box[%box, %box] : memref<*xf16> -> !tma
    return
  }

  // A token that crosses a function boundary is an event: synchronized with
  // mgpuEventSynchronize.
  func.func @wait_token(%tok: !gpu.async.token) {
    gpu.wait [%tok]
    return
  }
}
