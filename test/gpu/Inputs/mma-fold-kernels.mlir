// Launch placeholders naming the tensor-core GEMM variants with the folded
// shared expert that ptxas-shared-fold.test compiles (mma.sync, sm_80 and
// sm_90a; --moe-test-build-mma-kernels builds them from their names).
func.func private @k0() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_swiglu_foldshared_bf16_m64}
func.func private @k1() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_geglu_foldshared_bias_f16_m64}
func.func private @k2() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_relu_foldshared_bf16_m16}
func.func private @k3() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_combine_foldshared_gated_bf16_m64_outf32}
func.func private @k4() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_combine_foldshared_gated_bias_f16_m16_outf32}
func.func private @k5() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_combine_foldshared_bf16_m16_outf32}
