// moe-run --params with checkpoints: several files, a directory, an index;
// #moe.checkpoint parameters assembled at load (stack over {e}, transpose,
// concatenate, convert); and one error line per way it can go wrong.
//
// RUN: rm -rf %t && mkdir -p %t/dir %t/sharded
// RUN: moe-npy write %t/x.npy f32 2x3 1
// RUN: moe-npy write %t/a.npy f32 2x3 1 2 3 4 5 6
// RUN: moe-npy write %t/b.npy f32 2x3 10 20 30 40 50 60
// RUN: moe-npy write %t/c.npy f32 1x3 7 8 9
// RUN: moe-npy write %t/v.npy f32 3 1 2 3
// RUN: moe-npy pack %t/e.safetensors e.0.w=%t/a.npy:bf16 e.1.w=%t/b.npy:bf16
// RUN: moe-npy pack %t/u.safetensors u.0=%t/b.npy u.1=%t/a.npy plain=%t/v.npy
//
// @stack: out[e] = transpose(e.{e}.w) ++ transpose(u.{e}) -> [2, 3, 4].
// RUN: moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/e.safetensors --params=%t/u.safetensors --output=%t/s.npy
// RUN: moe-npy print %t/s.npy | FileCheck %s --check-prefix=STACK
// STACK: f32 [2, 3, 4]: 1 4 10 40 2 5 20 50 3 6 30 60 10 40 1 4 20 50 2 5 30 60 3 6
//
// A directory (model.safetensors) and an index with shards.
// RUN: cp %t/e.safetensors %t/dir/model.safetensors
// RUN: moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/dir --params=%t/u.safetensors --output=%t/s2.npy
// RUN: cmp %t/s.npy %t/s2.npy
// RUN: cp %t/e.safetensors %t/sharded/one.safetensors
// RUN: cp %t/u.safetensors %t/sharded/two.safetensors
// RUN: echo '{"metadata": {"total_size": 1}, "weight_map": {"e.0.w": "one.safetensors", "e.1.w": "one.safetensors", "u.0": "two.safetensors", "u.1": "two.safetensors", "plain": "two.safetensors"}}' > %t/sharded/model.safetensors.index.json
// RUN: moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/sharded --output=%t/s3.npy
// RUN: cmp %t/s.npy %t/s3.npy
// RUN: moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/sharded/model.safetensors.index.json --params=%t/sharded/one.safetensors \
// RUN:   --output=%t/s4.npy
// RUN: cmp %t/s.npy %t/s4.npy
//
// Errors.
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/e.safetensors --params=%t/dir --params=%t/u.safetensors | FileCheck %s --check-prefix=DUP
// DUP: moe-run: tensor 'e.0.w' is defined in both {{.*}}e.safetensors and {{.*}}dir/model.safetensors
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/e.safetensors | FileCheck %s --check-prefix=MISSING
// MISSING: moe-run: tensor 'u.0' (for argument #1 (%arg1)) not found in {{.*}}e.safetensors
// RUN: %expect_error moe-run %s --device=cpu --entry=wrong_shape --input=%t/x.npy \
// RUN:   --params=%t/e.safetensors | FileCheck %s --check-prefix=SHAPE
// SHAPE: moe-run: checkpoint tensors 'e.{e}.w' (transposed) stacked over 2 experts assemble to shape [2, 3, 2], but argument #1 (%arg1) has shape [2, 2, 3]
// RUN: %expect_error moe-run %s --device=cpu --entry=transpose_1d --input=%t/x.npy \
// RUN:   --params=%t/u.safetensors | FileCheck %s --check-prefix=ONE-D
// ONE-D: moe-run: tensor 'plain' in {{.*}}u.safetensors has shape [3]; transpose needs a tensor of 2 or more dimensions
// RUN: moe-npy pack %t/c.safetensors c=%t/c.npy
// RUN: %expect_error moe-run %s --device=cpu --entry=concat --input=%t/x.npy \
// RUN:   --params=%t/u.safetensors --params=%t/c.safetensors | FileCheck %s --check-prefix=CONCAT
// CONCAT: moe-run: tensor 'c' in {{.*}}c.safetensors has shape [1, 3], which cannot be concatenated along the last dimension with 'u.0' ([2, 3])
// RUN: moe-npy pack %t/ragged.safetensors r.0=%t/a.npy r.1=%t/c.npy
// RUN: %expect_error moe-run %s --device=cpu --entry=ragged --input=%t/x.npy \
// RUN:   --params=%t/ragged.safetensors | FileCheck %s --check-prefix=RAGGED
// RAGGED: moe-run: tensor 'r.1' in {{.*}}ragged.safetensors: expert 1 assembles to [1, 3], expert 0 to [2, 3] (argument #1 (%arg1))
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t | FileCheck %s --check-prefix=NODIR
// NODIR: moe-run: {{.*}}.tmp: checkpoint directory has neither model.safetensors.index.json nor model.safetensors
// RUN: echo '{"weight_map": {"e.0.w": "one.safetensors", "u.0": "three.safetensors"}}' > %t/sharded/bad.json
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/sharded/bad.json | FileCheck %s --check-prefix=SHARD
// SHARD: moe-run: {{.*}}sharded/bad.json: shard {{.*}}sharded/three.safetensors: cannot open: No such file or directory
// RUN: echo '{"weight_map": {"e.0.w": "../e.safetensors"}}' > %t/sharded/escape.json
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/sharded/escape.json | FileCheck %s --check-prefix=ESCAPE
// ESCAPE: moe-run: {{.*}}escape.json: weight_map entry 'e.0.w' names shard '../e.safetensors', which is not a relative path inside the checkpoint
// RUN: echo '{"weight_map": {"u.0": "one.safetensors"}}' > %t/sharded/wrong.json
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/sharded/wrong.json | FileCheck %s --check-prefix=WRONG
// WRONG: moe-run: {{.*}}wrong.json: tensor 'u.0' is mapped to {{.*}}sharded/one.safetensors, which does not define it
// RUN: echo '{"weight_map": [1]}' > %t/sharded/notmap.json
// RUN: %expect_error moe-run %s --device=cpu --entry=stack --input=%t/x.npy \
// RUN:   --params=%t/sharded/notmap.json | FileCheck %s --check-prefix=NOTMAP
// NOTMAP: moe-run: {{.*}}notmap.json: an index needs a "weight_map" object mapping tensor names to shard files

func.func @stack(%x: tensor<2x3xf32>,
                 %w: tensor<2x3x4xf32> {moe.param = #moe.checkpoint<["e.{e}.w", "u.{e}"], transpose>})
    -> tensor<2x3x4xf32> {
  return %w : tensor<2x3x4xf32>
}

func.func @wrong_shape(%x: tensor<2x3xf32>,
                       %w: tensor<2x2x3xbf16> {moe.param = #moe.checkpoint<["e.{e}.w"], transpose>})
    -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}

func.func @transpose_1d(%x: tensor<2x3xf32>,
                        %w: tensor<3x1xf32> {moe.param = #moe.checkpoint<["plain"], transpose>})
    -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}

func.func @concat(%x: tensor<2x3xf32>,
                  %w: tensor<2x6xf32> {moe.param = #moe.checkpoint<["u.0", "c"]>})
    -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}

func.func @ragged(%x: tensor<2x3xf32>,
                  %w: tensor<2x2x3xf32> {moe.param = #moe.checkpoint<["r.{e}"]>})
    -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}
