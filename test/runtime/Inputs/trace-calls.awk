# Summarizes a fake-driver trace (MOE_FAKE_CUDA_TRACE, see
# test/unit/cuda/FakeCuda.h) of `moe-run --device=cuda --repeat=N`.
# moe-run ends every call with one cuCtxSynchronize, so the trace splits
# there: segment 1 is everything up to the end of the first call (device
# detection, compilation, the module load, uploads, call 1), segments
# 2..calls are the later calls, the rest is moe-run's teardown. Any other
# cuCtxSynchronize inside a call (the caching allocator synchronizes to
# reuse another stream's block, or to free memory for real) shifts the
# split, and the per-call checks of a test then fail: a warm call must not
# synchronize the context. Prints one
# line per call, then the totals between the end of call 1 and exit
# (teardown included), the copies to the host after the last call, then the
# most launches any call made.
# Usage: awk -v calls=N -f trace-calls.awk TRACE
function count(seg, key) { return (seg SUBSEP key) in n ? n[seg, key] : 0 }
BEGIN { seg = 1 }
/^cuCtxSynchronize$/ { seg++; next }
{
  key = $1
  if (key ~ /^cuMemcpy/) key = $2                # HtoD, DtoH, DtoD, HtoH
  else if (key ~ /^cuModuleLoad/) key = "cuModuleLoad"
  else if (key ~ /^cuLaunchKernel/) key = "launch"
  else if (key ~ /^cuMemAlloc/) key = "cuMemAlloc"
  n[seg, key]++
}
END {
  most = 0
  for (c = 1; c <= calls; ++c) {
    if (count(c, "launch") > most) most = count(c, "launch")
    line = "call " c ": launches=" count(c, "launch")
    if (c > 1)
      line = line " cuMemAlloc=" count(c, "cuMemAlloc") " cuMemFree=" count(c, "cuMemFree_v2") \
             " HtoD=" count(c, "HtoD") " DtoH=" count(c, "DtoH") " DtoD=" count(c, "DtoD") \
             " cuModuleLoad=" count(c, "cuModuleLoad") \
             " cuModuleGetFunction=" count(c, "cuModuleGetFunction") \
             " cuStreamCreate=" count(c, "cuStreamCreate") " cuEventCreate=" count(c, "cuEventCreate")
    print line
  }
  split("cuMemAlloc HtoD cuModuleLoad cuModuleGetFunction cuStreamCreate cuEventCreate", keys, " ")
  line = "after call 1:"
  for (k = 1; k in keys; ++k) {
    total = 0
    for (s = 2; s <= seg; ++s) total += count(s, keys[k])
    line = line " " keys[k] "=" total
  }
  print line
  dtoh = 0
  for (s = calls + 1; s <= seg; ++s) dtoh += count(s, "DtoH")
  print "after the last call: DtoH=" dtoh
  print "most launches in one call: " most
}
