// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-gpu-device-abi

// After bufferization (moe-gpu-device-abi): memory of a public function's
// arguments is read on the host.
func.func @load(%a: memref<4xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  // expected-error @below {{device-abi: 'memref.load' would access device memory on the host}}
  %v = memref.load %a[%c0] : memref<4xf32>
  return
}

// -----

// A private function keeps the host convention.
func.func private @helper(%a: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<4xf32>
  return %v : f32
}
