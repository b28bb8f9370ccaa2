# The bf16 variant of an f32 spec example (test/examples): every f32 tensor
# becomes bf16 except MOESART's aux loss, which DESIGN.md 3 fixes as
# tensor<f32>. Soft MoE's scale (a rank-0 tensor<f32> operand) follows the
# data. Use: sed -f to-bf16.sed EXAMPLE.mlir (f16: then s/bf16/f16/g).
s/xf32>/xbf16>/g
s/%scale: tensor<f32>/%scale: tensor<bf16>/
s/tensor<f32>, tensor<8x128x512xbf16>/tensor<bf16>, tensor<8x128x512xbf16>/
