// RUN: %expect_error moe-run %s --device=cpu --entry=nope | FileCheck %s
// RUN: %expect_error moe-run %s --device=cpu --entry=hidden | FileCheck %s --check-prefix=PRIVATE
// RUN: %expect_error moe-run %s --device=cpu --entry=decl | FileCheck %s --check-prefix=DECL

// CHECK: moe-run: {{.*}}err-unknown-entry.mlir has no function @nope (public functions: @a, @b)
// PRIVATE: moe-run: @hidden in {{.*}}err-unknown-entry.mlir is not public; only public functions can be run
// DECL: moe-run: @decl in {{.*}}err-unknown-entry.mlir is a declaration; it has no body to run

func.func @a() { return }
func.func @b() { return }
func.func private @hidden() { return }
func.func private @decl()
