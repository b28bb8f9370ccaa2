//===- Progress.cpp - moe-run: progress lines on stderr -------------------===//
//
// ProgressStep (Progress.h): a watcher thread waits for the step to end or
// for the reporting delay to pass, whichever comes first; the destructor
// stops it and prints the step's time if the step was reported.
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/Progress.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

namespace moe {
namespace run {

ProgressStep::ProgressStep(std::string step, const ProgressOptions &options)
    : step(std::move(step)) {
  bool enabled = options.mode == ProgressMode::Always ||
                 (options.mode == ProgressMode::Auto &&
                  llvm::sys::Process::StandardErrIsDisplayed());
  if (!enabled)
    return;
  start = std::chrono::steady_clock::now();
  const unsigned afterMs = options.afterMs;
  if (afterMs == 0) { // report every step (tests)
    llvm::errs() << "moe-run: " << this->step << "...\n";
    reported = true;
    return;
  }
  watcher = std::thread([this, afterMs] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!done.wait_for(lock, std::chrono::milliseconds(afterMs),
                       [this] { return finished; })) {
      llvm::errs() << "moe-run: " << this->step << "...\n";
      reported = true;
    }
  });
}

ProgressStep::~ProgressStep() {
  if (watcher.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished = true;
    }
    done.notify_one();
    watcher.join();
  }
  if (reported)
    llvm::errs() << "moe-run: " << step << ": done in "
                 << llvm::format("%.1f", std::chrono::duration<double>(
                                             std::chrono::steady_clock::now() -
                                             start)
                                             .count())
                 << " s\n";
}

} // namespace run
} // namespace moe
