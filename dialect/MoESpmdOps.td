//===- MoESpmdOps.td - moe expert-parallel exchange ops ----*- tablegen -*-===//
//
// The ragged all-to-all exchanges of expert parallelism (docs/spec.md section
// 8), produced by --moe-shard-experts next to the shard dialect's ops. They
// live in their own file so that the SPMD part of the dialect builds apart.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_SPMD_OPS_TD
#define MOE_SPMD_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialect/MoEDialect.td"
include "dialect/MoETypeConstraints.td"

def MoE_ExchangeDispatchOp : MoE_Op<"exchange_dispatch", [Pure]> {
  let summary = "send each token row to the rank that owns its expert";
  let description = [{
    A ragged all-to-all over the 1-D `shard.grid` `grid` of N ranks (every
    rank runs this op; the operands are the calling rank's). Rank q owns the
    experts `[q*E/N, (q+1)*E/N)` (`E % N == 0`).

    `rows: [R, D]` is the rank's dispatched rows grouped by expert (what a
    dropless `moe.dispatch` returns) with `offsets: [E+1]` (i32) its expert
    offsets; `counts: [N, E]` (i32, the same on every rank) says how many
    rows each rank sends for each expert: rank r sends rows
    `offsets[e] .. offsets[e] + counts[r, e] - 1` for every e (so
    `counts[r, e] <= offsets[e+1] - offsets[e]`; a smaller count drops the
    rest, as a capacity does).

    The result holds the rows this rank receives, grouped by its local
    expert l (global `e = rank*E/N + l`) and, inside an expert, by source
    rank q ascending: `sum_q counts[q, e]` rows for each l. Rows keep their
    order inside every (q, e) chunk, so with ranks holding consecutive token
    rows every expert's rows are in global token order.

    Like MPI_Alltoallv (per-pair sizes), not `shard.all_to_all` (equal
    splits of one tensor axis).

    <!-- ir-prelude: shard.grid @ranks(shape = 2) -->
    ```mlir
    %recv = moe.exchange_dispatch %rows, %offsets, %counts on @ranks
        : (tensor<?x64xf32>, tensor<9xi32>, tensor<2x8xi32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[R, D]">:$rows, MoE_OffsetsTensor:$offsets,
                       MoE_I32TensorOfRank<2, "[N, E]">:$counts, FlatSymbolRefAttr:$grid);
  let results = (outs MoE_Data2D<"[?, D]">:$result);
  let assemblyFormat = [{
    $rows `,` $offsets `,` $counts `on` $grid attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_ExchangeCombineOp : MoE_Op<"exchange_combine", [Pure]> {
  let summary = "send expert output rows back to the ranks their tokens live on";
  let description = [{
    The reverse of `moe.exchange_dispatch` with the same `offsets` and
    `counts`: `rows` is laid out as that op's result (the rows this rank's
    experts produced, grouped by local expert, then source rank); each chunk
    goes back to its source rank. The result is `dest` (`[R, D]`, the shape
    of the dispatched rows) with the rows that came back written at
    `offsets[e] .. offsets[e] + counts[rank, e] - 1` for every e; the other
    rows keep `dest`'s values (zeros, for rows a capacity dropped).

    <!-- ir-prelude: shard.grid @ranks(shape = 2) -->
    ```mlir
    %back = moe.exchange_combine %out, %offsets, %counts into %zeros on @ranks
        : (tensor<?x64xf32>, tensor<9xi32>, tensor<2x8xi32>, tensor<?x64xf32>)
        -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[?, D]">:$rows, MoE_OffsetsTensor:$offsets,
                       MoE_I32TensorOfRank<2, "[N, E]">:$counts, MoE_Data2D<"[R, D]">:$dest,
                       FlatSymbolRefAttr:$grid);
  let results = (outs MoE_Data2D<"[R, D]">:$result);
  let assemblyFormat = [{
    $rows `,` $offsets `,` $counts `into` $dest `on` $grid attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MOE_SPMD_OPS_TD
