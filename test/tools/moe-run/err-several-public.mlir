// RUN: rm -rf %t && mkdir -p %t
// RUN: %expect_error moe-run %s --device=cpu | FileCheck %s
// RUN: echo 'func.func private @p() { return }' > %t/none.mlir
// RUN: %expect_error moe-run %t/none.mlir --device=cpu | FileCheck %s --check-prefix=NONE

// CHECK: moe-run: {{.*}}err-several-public.mlir has 2 public functions (@a, @b); choose one with --entry
// NONE: moe-run: {{.*}}none.mlir has no public function with a body to run

func.func @a() { return }
func.func @b() { return }
func.func private @c() { return }
