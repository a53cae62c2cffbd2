//===- Options.cpp - plan-run's command line ------------------------------===//

#include "Options.h"

#include "Format.h"
#include "ScheduleInput.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace plan::run {

namespace {

constexpr const char *kDescription =
    "plan-run: runs a training schedule on one or more ranks.\n"
    "FILE is a schedule (.sched, from `planc X.plan -o X.sched`) or a .plan,\n"
    "which is compiled with planc first. Ranks come from --nproc N, torchrun,\n"
    "Open MPI's mpirun or SLURM's srun (docs/launching.md).";

/// A number of seconds in (0, 1e7]: --timeout, --stop-timeout.
CLI::Validator secondsValidator() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        double value = 0;
        try {
          size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size())
            value = NAN;
        } catch (const std::exception &) {
          value = NAN;
        }
        if (!(value > 0 && value <= 1e7))
          return "'" + text + "' is not a number of seconds in (0, 10000000]";
        return "";
      },
      "");
}

/// A whole number in [min, max], written in decimal digits: CLI11 alone
/// reads --steps 1e20 as 2^63-1 and --seed -1 as 2^64-1.
CLI::Validator wholeNumber(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string &text) -> std::string {
        if (text.empty() ||
            text.find_first_not_of("0123456789") != std::string::npos)
          return "'" + text + "' is not a whole number";
        errno = 0;
        unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
        if (errno == ERANGE || value < min || value > max)
          return "'" + text + "' is not in [" + std::to_string(min) + ", " +
                 std::to_string(max) + "]";
        return "";
      },
      "");
}

std::string formatSeconds(double seconds) {
  std::ostringstream out;
  out.precision(17);
  out << seconds;
  return out.str();
}

} // namespace

std::variant<RunOptions, ExitRequest>
parseOptions(int argc, const char *const *argv, const std::string &version) {
  RunOptions options;
  CLI::App app(kDescription, "plan-run");
  app.get_formatter()->column_width(30);
  if (!version.empty())
    app.set_version_flag("--version", version,
                         "Print the version and the backends of this build");
  CLI::Option *fileOption =
      app.add_option("FILE", options.file,
                     "Schedule (.sched) or plan (.plan) to run")
          ->type_name("");
  CLI::Option *calibrateOption = app.add_flag(
      "--calibrate", options.calibrate,
      "Measure this host (GEMMs, memory, Gloo between the --nproc ranks) and "
      "print the `cluster { gpu = cpu { ... } }` block that makes planc's "
      "time figures this host's; takes no FILE");
  CLI::Option *deviceFileOption =
      app.add_option("--device-file", options.deviceFile,
                     "With --calibrate: write the measured device to this "
                     "JSON file, which a plan names as cluster { gpu = "
                     "\"FILE\" }, instead of printing the cluster block")
          ->type_name("FILE");
  CLI::Option *verifyOption = app.add_flag(
      "--verify", options.verify,
      "Check the .plan's parallel configuration: a shrunk model of the same "
      "family and shape ratios on local CPU ranks of its mesh shape, a few "
      "steps against the single-rank run, per-step loss and grad norm "
      "compared (docs/verify.md)");
  CLI::Option *plancFlagOption =
      app.add_option("--verify-planc-flag", options.verifyPlancFlags,
                     "tests only: passed to planc by --verify")
          ->group("");
  app.add_option("--set", options.sets,
                 "With a .plan: override a key before planc compiles it, as "
                 "planc --set does (repeatable)")
      ->type_name("KEY=VALUE");
  int nproc = 0;
  CLI::Option *nprocOption =
      app.add_option("--nproc", nproc,
                     "Start N local ranks on this machine (they rendezvous "
                     "at a store this process serves)")
          ->type_name("N")
          ->check(CLI::Range(1, 1024).description(""));
  app.add_option("--backend", options.backend, "Compute backend")
      ->type_name("cpu|cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}).description(""))
      ->default_str("cpu");
  app.add_option("--steps", options.steps,
                 "Optimizer steps to run (default: the schedule's train.steps)")
      ->type_name("K")
      ->check(wholeNumber(1, std::numeric_limits<int64_t>::max()));
  CLI::Option *dataOption =
      app.add_option("--data", options.data,
                     "Token file (nanoGPT/llm.c .bin) or 'synthetic'")
          ->type_name("PATH|synthetic");
  CLI::Option *initOption =
      app.add_option("--init", options.init,
                     "Initial weights: a HuggingFace model directory or a "
                     ".safetensors file (default: initialise from the seed)")
          ->type_name("PATH");
  uint64_t seed = 0;
  CLI::Option *seedOption =
      app.add_option("--seed", seed,
                     "Seed of initialisation and synthetic data (default: the "
                     "schedule's train.seed)")
          ->type_name("S")
          ->check(wholeNumber(0, std::numeric_limits<uint64_t>::max()));
  app.add_option("--metrics", options.metrics,
                 "Write one JSON object per step to this file (rank 0)")
      ->type_name("FILE.jsonl");
  app.add_option("--memory-trace", options.memoryTrace,
                 "Write the allocated bytes around every op of every step to "
                 "this file (rank 0; docs/launching.md)")
      ->type_name("FILE.jsonl");
  app.add_option("--profile", options.profile,
                 "Write a Chrome trace (Perfetto) of the last step's operators "
                 "and, with --backend cuda, its kernels and copies to this "
                 "file (rank 0; LibTorch's profiler; docs/launching.md)")
      ->type_name("FILE.json");
  app.add_flag("--poison", options.poison,
               "Fill every transient buffer with NaN bytes when allocated and "
               "when freed, so a read the schedule does not name shows in the "
               "loss (slower; checks a schedule)");
  app.add_option("--timeout", options.timeoutSeconds,
                 "Seconds the rendezvous and each collective may take before "
                 "the run fails")
      ->type_name("SECONDS")
      ->check(secondsValidator())
      ->default_str("300");
  app.add_flag("--quiet,-q", options.quiet, "No progress output (errors only)");
  app.add_option("--threads", options.threads,
                 "Intra-op threads of each rank (default: OMP_NUM_THREADS "
                 "if set, else this process's cores / the ranks on this host)")
      ->type_name("N")
      ->check(CLI::Range(1, 4096).description(""));
  CLI::Option *dirOption =
      app.add_option("--checkpoint-dir", options.checkpointDir,
                     "Save checkpoints under this directory (created if "
                     "missing): after the last step, on SIGTERM/SIGINT, and "
                     "every --checkpoint-every steps")
          ->type_name("DIR");
  app.add_option("--checkpoint-every", options.checkpointEvery,
                 "Also save after every step that is a multiple of N")
      ->type_name("N")
      ->check(CLI::Range(int64_t(1), std::numeric_limits<int64_t>::max())
                  .description(""))
      ->needs(dirOption);
  app.add_option("--keep", options.keep,
                 "Keep the newest K checkpoints, delete older ones (default "
                 "0: keep all)")
      ->type_name("K")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()).description(""))
      ->needs(dirOption);
  CLI::Option *resumeOption =
      app.add_option("--resume", options.resume,
                     "Continue from a checkpoint: a step directory, a "
                     "checkpoint root (its newest), or 'auto' (the newest "
                     "under --checkpoint-dir, else a fresh start)")
          ->type_name("PATH|auto")
          ->excludes(initOption);
  app.add_option("--stop-timeout", options.stopTimeoutSeconds,
                 "With --checkpoint-dir: seconds a rank may take after "
                 "SIGTERM/SIGINT to checkpoint and exit before it exits "
                 "without a checkpoint")
      ->type_name("SECONDS")
      ->check(secondsValidator())
      ->default_str("120");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion &) {
    return ExitRequest{0, version};
  } catch (const CLI::CallForHelp &) {
    std::string help = app.help();
    while (!help.empty() && help.back() == '\n')
      help.pop_back();
    return ExitRequest{0, help};
  } catch (const CLI::ParseError &e) {
    return ExitRequest{1, "plan-run: " + plan::rt::support::oneLine(e.what()) +
                              " (see --help)"};
  }
  if (options.calibrate) {
    // Only the options that shape the ranks apply.
    for (CLI::Option *option : app.get_options()) {
      const std::string &name = option->get_name();
      if (option->count() == 0 || option == calibrateOption ||
          option == deviceFileOption || option == nprocOption ||
          name == "--threads" || name == "--timeout" || name == "--quiet" ||
          name == "--backend")
        continue;
      return ExitRequest{
          1, "plan-run: --calibrate measures the host and takes no " +
                 (option == fileOption ? std::string("FILE")
                                       : option->get_name()) +
                 " (see --help)"};
    }
    if (options.backend != "cpu")
      return ExitRequest{1, "plan-run: --calibrate measures the cpu backend; "
                            "a GPU's figures come from planc's device table "
                            "(see --help)"};
  } else if (fileOption->count() == 0) {
    return ExitRequest{1, "plan-run: FILE is required (see --help)"};
  }
  if (deviceFileOption->count() && !options.calibrate)
    return ExitRequest{
        1, "plan-run: --device-file goes with --calibrate (see --help)"};
  if (deviceFileOption->count() && options.deviceFile.empty())
    return ExitRequest{1, "plan-run: --device-file needs a file name (see "
                          "--help)"};
  if (!options.deviceFile.empty()) {
    // Said before the measurement, not after it.
    std::string::size_type slash = options.deviceFile.rfind('/');
    std::string dir = slash == std::string::npos
                          ? std::string(".")
                          : options.deviceFile.substr(0, slash + 1);
    if (::access(dir.c_str(), W_OK) != 0)
      return ExitRequest{1, "plan-run: --device-file " + options.deviceFile +
                                ": cannot write in " + dir + ": " +
                                std::strerror(errno)};
  }
  if (!options.verify && plancFlagOption->count())
    return ExitRequest{
        1, "plan-run: --verify-planc-flag goes with --verify (see --help)"};
  if (options.verify) {
    // The check chooses its ranks, data and outputs itself.
    for (CLI::Option *option : app.get_options()) {
      const std::string &name = option->get_name();
      if (option->count() == 0 || option == verifyOption ||
          option == fileOption || name == "--set" || name == "--steps" ||
          name == "--seed" || name == "--threads" || name == "--timeout" ||
          option == plancFlagOption)
        continue;
      return ExitRequest{1, "plan-run: --verify runs the plan on local CPU "
                            "ranks with synthetic data and takes no " +
                                option->get_name() + " (see --help)"};
    }
  }
  if (!options.sets.empty() && !isPlanFile(options.file))
    return ExitRequest{
        1, "plan-run: --set changes a plan, and " + options.file +
               " is a compiled schedule: give the .plan, or recompile with "
               "`planc PLAN --set KEY=VALUE -o FILE.sched` (see --help)"};
  if (nprocOption->count())
    options.nproc = nproc;
  if (seedOption->count())
    options.seed = seed;
  options.dataGiven = dataOption->count() > 0;
  if (resumeOption->count() && options.resume.empty())
    return ExitRequest{1, "plan-run: --resume: the path is empty (see --help)"};
  if (options.resume == "auto" && options.checkpointDir.empty())
    return ExitRequest{
        1, "plan-run: --resume auto needs --checkpoint-dir (see --help)"};
  return options;
}

std::vector<std::string> rankArguments(const RunOptions &options,
                                       const std::string &file) {
  if (options.calibrate) {
    std::vector<std::string> args{"--calibrate", "--timeout",
                                  formatSeconds(options.timeoutSeconds)};
    if (options.quiet)
      args.push_back("--quiet");
    if (options.threads > 0)
      args.insert(args.end(), {"--threads", std::to_string(options.threads)});
    if (!options.deviceFile.empty())
      args.insert(args.end(), {"--device-file", options.deviceFile});
    return args;
  }
  std::vector<std::string> args{file, "--backend", options.backend};
  if (options.dataGiven)
    args.insert(args.end(), {"--data", options.data});
  if (options.steps > 0)
    args.insert(args.end(), {"--steps", std::to_string(options.steps)});
  if (!options.init.empty())
    args.insert(args.end(), {"--init", options.init});
  if (options.seed)
    args.insert(args.end(), {"--seed", std::to_string(*options.seed)});
  if (!options.metrics.empty())
    args.insert(args.end(), {"--metrics", options.metrics});
  if (!options.memoryTrace.empty())
    args.insert(args.end(), {"--memory-trace", options.memoryTrace});
  if (!options.profile.empty())
    args.insert(args.end(), {"--profile", options.profile});
  if (options.poison)
    args.push_back("--poison");
  args.insert(args.end(), {"--timeout", formatSeconds(options.timeoutSeconds)});
  if (options.quiet)
    args.push_back("--quiet");
  if (options.threads > 0)
    args.insert(args.end(), {"--threads", std::to_string(options.threads)});
  if (!options.checkpointDir.empty()) {
    args.insert(args.end(), {"--checkpoint-dir", options.checkpointDir});
    if (options.checkpointEvery > 0)
      args.insert(args.end(), {"--checkpoint-every",
                               std::to_string(options.checkpointEvery)});
    if (options.keep > 0)
      args.insert(args.end(), {"--keep", std::to_string(options.keep)});
  }
  if (!options.resume.empty())
    args.insert(args.end(), {"--resume", options.resume});
  args.insert(args.end(),
              {"--stop-timeout", formatSeconds(options.stopTimeoutSeconds)});
  return args;
}

} // namespace plan::run
