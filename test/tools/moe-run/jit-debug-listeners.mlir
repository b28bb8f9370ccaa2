// The JIT's perf/GDB listeners are off by default: a run leaves no jitdump
// file and no .debug/jit folder (it used to leave both every time);
// --jit-debug-listeners turns them on.
// RUN: rm -rf %t && mkdir -p %t/home %t/dump
// RUN: env HOME=%t/home JITDUMPDIR=%t/dump moe-run %s --device=cpu --fill-random
// RUN: find %t/home %t/dump -mindepth 1 | count 0
// RUN: env HOME=%t/home JITDUMPDIR=%t/dump moe-run %s --device=cpu --fill-random --jit-debug-listeners
// RUN: find %t/dump -name 'jit-*.dump' | count 1

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
