//===- Options.h - plan-run's command line -----------------------*- C++
//-*-===//

#ifndef PLAN_RUN_OPTIONS_H
#define PLAN_RUN_OPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace plan::run {

struct RunOptions {
  std::string file;               // .sched, or .plan compiled with planc
  std::vector<std::string> sets;  // --set KEY=VALUE, for planc (a .plan)
  std::optional<int> nproc;       // spawn this many local ranks
  std::string backend = "cpu";    // cpu | cuda
  int64_t steps = 0;              // 0: the schedule's train.steps
  std::string data = "synthetic"; // token file or "synthetic"
  bool dataGiven = false;         // --data was on the command line
  std::string init; // HF directory or .safetensors; "": init from seed
  std::optional<uint64_t> seed; // overrides train.seed
  std::string metrics;          // JSONL path; "": none
  std::string memoryTrace;      // JSONL path, one line per op; "": none
  std::string profile; // Chrome trace of the last step (rank 0); "": none
  bool poison = false; // Executor::setPoison on every rank
  double timeoutSeconds = 300; // rendezvous and every collective
  bool quiet = false;
  int threads = 0; // intra-op threads per rank; 0: chooseThreads' default
  // Checkpoints (docs/launching.md, "Checkpoints").
  std::string checkpointDir;   // "": no checkpoints
  int64_t checkpointEvery = 0; // 0: only after the last step and on a signal
  int keep = 0;                // newest checkpoints kept; 0: all
  std::string resume;          // checkpoint dir, root, or "auto"; "": none
  double stopTimeoutSeconds = 120; // after SIGTERM/SIGINT, to checkpoint
  // --calibrate: measure this host for the cpu device, no FILE, no training.
  bool calibrate = false;
  // --device-file: where --calibrate writes the device file ("": it prints
  // the cluster block instead).
  std::string deviceFile;
  // --verify: the .plan's parallel configuration, shrunk, against one rank
  // (Verify.h). `verifyPlancFlags`: passed to planc as they are; hidden, for
  // the test that breaks a lowering on purpose.
  bool verify = false;
  std::vector<std::string> verifyPlancFlags;
};

/// What parsing the command line asks for: run with these options, or exit
/// with this code after printing (help: 0, a usage error: 1).
struct ExitRequest {
  int code = 0;
  std::string output; // help text (stdout) or a one-line error (stderr)
};

/// `version`, when not empty, is what --version prints (plan-run's version
/// and the backends this build has; main.cpp knows them).
std::variant<RunOptions, ExitRequest>
parseOptions(int argc, const char *const *argv,
             const std::string &version = "");

/// The command line a rank spawned by --nproc gets: the same run, reading
/// `file` (the schedule the launcher compiled or checked), without --nproc;
/// with --calibrate, the calibration (`file` unused).
std::vector<std::string> rankArguments(const RunOptions &options,
                                       const std::string &file);

} // namespace plan::run

#endif // PLAN_RUN_OPTIONS_H
