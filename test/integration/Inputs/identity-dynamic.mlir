// Identity functions with a dynamic token count, for moe-ref-dtype.test.
func.func @bf16(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  return %x : tensor<?x8xbf16>
}
func.func @f16(%x: tensor<?x8xf16>) -> tensor<?x8xf16> {
  return %x : tensor<?x8xf16>
}
