# Rewrites the parameters that moe-import emits,
#   %w1: tensor<...> {moe.param = #moe.checkpoint<[...], transpose>}
# into plain names bound from a stacked file written by moe-ckpt-gen:
#   %w1: tensor<...> {moe.param = "w1"}
s/%\([a-z0-9]*\): \(tensor<[^>]*>\) {moe.param = #moe.checkpoint<[^>]*>}/%\1: \2 {moe.param = "\1"}/
