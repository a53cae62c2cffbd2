//===- main.cpp - plan-run: launches ranks and runs a schedule ------------===//
//
// `plan-run [--nproc N] FILE ...`: with --nproc this process is a launcher
// that re-executes itself as N ranks and watches them; otherwise it is one
// rank, placed by torchrun / Open MPI / SLURM variables or alone.
// docs/launching.md describes every flag, variable and exit code.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"
#include "DeviceBackend.h"
#include "Launch.h"
#include "Model.h"
#include "Options.h"
#include "Rank.h"
#include "ScheduleFile.h"
#include "ScheduleInput.h"
#include "Verify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <thread>

#ifndef PLAN_RUN_VERSION
#define PLAN_RUN_VERSION "unknown"
#endif

using namespace plan::run;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "plan-run: %s\n", message.c_str());
  return 1;
}

/// Reads the schedule `input` holds and checks that this runtime computes
/// its model: a parameter renamed or reshaped in the file `file` is its
/// one-line error, said once before any rank starts.
plan::rt::ValidSchedule readRunnableSchedule(const ScheduleInput &input,
                                             const std::string &file) {
  plan::rt::ValidSchedule schedule = plan::rt::readScheduleFile(input.path());
  try {
    plan::rt::Model::check(schedule);
  } catch (const std::runtime_error &e) {
    throw std::runtime_error(file + ": " + e.what());
  }
  return schedule;
}

/// --nproc N: checks what every rank would check first, so that a bad file
/// or a world-size mismatch is one message rather than N.
int launchLocalRanks(const RunOptions &options, const std::string &executable) {
  if (options.calibrate) {
    LocalRanks ranks;
    ranks.executable = executable;
    ranks.arguments = rankArguments(options, "");
    ranks.nproc = *options.nproc;
    auto store = serveLocalStore(ranks);
    return runLocalRanks(ranks);
  }
  ScheduleInput input(options.file, executable, options.sets);
  plan::rt::ValidSchedule schedule = readRunnableSchedule(input, options.file);
  if (schedule->worldSize() != *options.nproc)
    return fail(options.file + ": schedule is for " +
                std::to_string(schedule->worldSize()) + " ranks (" +
                plan::rt::meshString(schedule) + "); " +
                std::to_string(*options.nproc) + " were launched");
  if (runIsComplete(options, schedule))
    return 0;

  LocalRanks ranks;
  ranks.executable = executable;
  ranks.arguments = rankArguments(options, input.path());
  ranks.nproc = *options.nproc;
  auto store = serveLocalStore(ranks);
  if (!options.checkpointDir.empty()) {
    // The ranks save a checkpoint on SIGTERM/SIGINT: they get their
    // --stop-timeout, plus time to exit, before SIGKILL.
    ranks.checkpointOnSignal = true;
    ranks.signalGrace = std::chrono::milliseconds(
        std::llround((options.stopTimeoutSeconds + 30) * 1000.0));
  }
  // One device per rank: say so once here rather than N times from the ranks.
  if (options.backend == "cuda") {
    int visible = plan::rt::DeviceBackend::cudaDeviceCount();
    if (*options.nproc > visible)
      return fail(cudaDeviceMissing(visible, visible));
  }
  return runLocalRanks(ranks);
}

} // namespace

int main(int argc, char **argv) {
  // A write to a peer that is gone (Gloo writes its sockets with writev,
  // which raises SIGPIPE) is then an EPIPE error that the collective reports
  // and the rank exits 1 with, instead of a silent death by the signal that
  // depends on whether the rank wrote or read the dead peer's socket first.
  // Python, which runs PyTorch's ranks, ignores SIGPIPE too. Set before the
  // launcher starts ranks, which keep it across exec. A closed stdout ends
  // nothing either: the run's metrics and checkpoints go on.
  ::signal(SIGPIPE, SIG_IGN);
  const char *backends =
      plan::rt::DeviceBackend::cudaBuilt() ? "cpu, cuda" : "cpu";
  std::variant<RunOptions, ExitRequest> parsed =
      parseOptions(argc, argv,
                   std::string("plan-run ") + PLAN_RUN_VERSION +
                       " (backends: " + backends + ")");
  if (auto *exit = std::get_if<ExitRequest>(&parsed)) {
    std::fputs((exit->output + "\n").c_str(), exit->code ? stderr : stdout);
    return exit->code;
  }
  const RunOptions &options = std::get<RunOptions>(parsed);
  if (options.backend == "cuda" && !plan::rt::DeviceBackend::cudaBuilt())
    return fail(kNoCudaBackend);

  try {
    std::string executable = currentExecutable();
    if (options.verify)
      return verifyPlan(options, executable);
    if (options.nproc)
      return launchLocalRanks(options, executable);
    RankInfo rank = rankFromEnvironment();
    if (options.calibrate)
      return calibrateRank(options, rank);
    try {
      // Read at once, so that a compiled plan's temporary file is gone
      // before the run starts.
      plan::rt::ValidSchedule schedule = [&] {
        ScheduleInput input(options.file, executable, options.sets);
        return readRunnableSchedule(input, options.file);
      }();
      return runRank(options, rank, schedule);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "%s%s\n", messagePrefix(rank).c_str(), e.what());
      return 1;
    }
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
