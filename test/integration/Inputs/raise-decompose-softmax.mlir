// Transform library for the raise tests: decomposes linalg.softmax into
// linalg.generic ops (the CPU pipeline does not lower linalg.softmax), so the
// frontend-style einsum IR can run as written, before raising.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %sm = transform.structured.match ops{["linalg.softmax"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %parts = transform.structured.decompose_interface %sm
        : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
