//===- Progress.h - moe-run: progress lines on stderr -----------*- C++ -*-===//
//
// moe-run reports the steps that take long (reading parameters,
// --fill-random, compiling, running, writing) on stderr: a ProgressStep
// lives as long as its step and prints "moe-run: <step>..." once the step
// has taken ProgressOptions::afterMs, then "moe-run: <step>: done in X s"
// when it ends. Quick steps print nothing. The --progress and
// --progress-after-ms flags (moe-run.cpp) fill the ProgressOptions.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_RUN_PROGRESS_H
#define MOE_TOOLS_MOE_RUN_PROGRESS_H

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace moe {
namespace run {

/// When progress lines are printed (--progress).
enum class ProgressMode { Auto, Always, Never };

struct ProgressOptions {
  /// Auto: when stderr is a terminal.
  ProgressMode mode = ProgressMode::Auto;
  /// Report a step once it has taken this many milliseconds; 0 reports
  /// every step at its start (tests).
  unsigned afterMs = 2000;
};

/// Reports a step that runs longer than `options.afterMs` on stderr:
/// "moe-run: <step>..." once the time has passed, then "moe-run: <step>:
/// done in X s" when it ends. Quick steps print nothing.
class ProgressStep {
public:
  ProgressStep(std::string step, const ProgressOptions &options);
  ~ProgressStep();
  ProgressStep(const ProgressStep &) = delete;
  ProgressStep &operator=(const ProgressStep &) = delete;

private:
  std::string step;
  std::chrono::steady_clock::time_point start;
  std::thread watcher;
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  bool reported = false;
};

} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_PROGRESS_H
