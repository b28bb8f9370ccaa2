// A host function and a kernel, lowered by the stock MLIR pipeline and run
// through libMoECudaRuntime.so (mgpu-e2e*.test): alloc, memset, launch with
// 64 KiB of dynamic shared memory (above the 48 KiB default, so the runtime
// must opt in), copy back, free, on one stream.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @moe_test_fill(%out: memref<?xf32>, %v: f32) kernel {
      %c0 = arith.constant 0 : index
      %b = gpu.block_id x
      %t = gpu.thread_id x
      %bd = gpu.block_dim x
      %o = arith.muli %b, %bd : index
      %i = arith.addi %o, %t : index
      %n = memref.dim %out, %c0 : memref<?xf32>
      %in = arith.cmpi ult, %i, %n : index
      scf.if %in {
        memref.store %v, %out[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
  func.func @run(%host: memref<?xf32>, %v: f32) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c127 = arith.constant 127 : index
    %c128 = arith.constant 128 : index
    %smem = arith.constant 65536 : i32
    %zero = arith.constant 0.0 : f32
    %n = memref.dim %host, %c0 : memref<?xf32>
    %np = arith.addi %n, %c127 : index
    %blocks = arith.divui %np, %c128 : index
    %t0 = gpu.wait async
    %d, %t1 = gpu.alloc async [%t0] (%n) : memref<?xf32>
    %t2 = gpu.memset async [%t1] %d, %zero : memref<?xf32>, f32
    %t3 = gpu.launch_func async [%t2] @kernels::@moe_test_fill blocks in (%blocks, %c1, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %smem args(%d : memref<?xf32>, %v : f32)
    %t4 = gpu.memcpy async [%t3] %host, %d : memref<?xf32>, memref<?xf32>
    %t5 = gpu.dealloc async [%t4] %d : memref<?xf32>
    gpu.wait [%t5]
    return
  }
}
