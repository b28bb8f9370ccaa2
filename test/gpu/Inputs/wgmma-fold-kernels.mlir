// The sm_90a wgmma variants with the folded shared expert (ptxas-shared-fold.test).
func.func private @k0() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_swiglu_foldshared_bias_bf16_m64_wgmma}
func.func private @k1() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_combine_foldshared_gated_bias_bf16_m64_outf32_wgmma}
func.func private @k2() attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_combine_foldshared_f16_m64_outf32_wgmma}
