//===- ScheduleInput.h - FILE as a schedule file on disk --------*- C++ -*-===//
//
// plan-run takes a schedule (.sched) or a plan (.plan). A plan is compiled by
// running planc in a child process, never by linking it: the runtime must
// build and run on machines without MLIR/LLVM (docs/launching.md).
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUN_SCHEDULEINPUT_H
#define PLAN_RUN_SCHEDULEINPUT_H

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace plan::run {

/// A plan that cannot be compiled (no planc, or planc rejected it; planc has
/// then printed its diagnostics); one line.
class PlanCompileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A new directory under $TMPDIR (else /tmp), `plan-run-XXXXXX`, removed
/// with the files in it when this object goes (only files are put there).
/// Throws std::runtime_error when it cannot be created.
class TemporaryDirectory {
public:
  TemporaryDirectory();
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory &) = delete;
  TemporaryDirectory &operator=(const TemporaryDirectory &) = delete;

  const std::string &path() const { return path_; }
  /// `path()/name`.
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// planc next to `executable`, else on PATH; "" when there is none.
std::string findPlanc(const std::string &executable);

/// Whether `file` names a .plan (compiled by planc) rather than a schedule.
bool isPlanFile(const std::string &file);

class ScheduleInput {
public:
  /// How planc's diagnostics reach the user: as planc prints them, or
  /// (`OnlyIfItFails`: a plan plan-run derived, whose warnings are about
  /// settings the user did not write) kept and put in the error when planc
  /// fails.
  enum class Diagnostics { Shown, OnlyIfItFails };

  /// `file` as is when it is not a .plan; otherwise compiled with planc (and
  /// `sets`, each passed as `--set`, then `plancFlags` as they are) into a
  /// temporary directory that lives as long as this object. Throws
  /// PlanCompileError.
  ScheduleInput(const std::string &file, const std::string &executable,
                const std::vector<std::string> &sets = {},
                const std::vector<std::string> &plancFlags = {},
                Diagnostics diagnostics = Diagnostics::Shown);
  ~ScheduleInput();
  ScheduleInput(const ScheduleInput &) = delete;
  ScheduleInput &operator=(const ScheduleInput &) = delete;

  const std::string &path() const { return path_; }

private:
  void compile(const std::string &planc, const std::string &file,
               const std::vector<std::string> &sets,
               const std::vector<std::string> &plancFlags,
               Diagnostics diagnostics);

  std::string path_;
  std::unique_ptr<TemporaryDirectory> tempDir_; // a compiled plan's
};

} // namespace plan::run

#endif // PLAN_RUN_SCHEDULEINPUT_H
