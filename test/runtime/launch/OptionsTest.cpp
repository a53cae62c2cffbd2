//===- OptionsTest.cpp - plan-run's command line and PLAN_RUN_FAULT -------===//

#include "Options.h"
#include "FaultInjection.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

using namespace plan::run;

namespace {

std::variant<RunOptions, ExitRequest> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "plan-run");
  std::vector<const char *> argv;
  for (const std::string &arg : args)
    argv.push_back(arg.c_str());
  return parseOptions(static_cast<int>(argv.size()), argv.data());
}

RunOptions parseOk(std::vector<std::string> args) {
  auto parsed = parse(std::move(args));
  if (auto *exit = std::get_if<ExitRequest>(&parsed))
    ADD_FAILURE() << exit->output;
  return std::get<RunOptions>(parsed);
}

ExitRequest parseExit(std::vector<std::string> args) {
  auto parsed = parse(std::move(args));
  if (auto *exit = std::get_if<ExitRequest>(&parsed))
    return *exit;
  ADD_FAILURE() << "parsed without error";
  return {};
}

TEST(Options, Defaults) {
  RunOptions options = parseOk({"model.sched"});
  EXPECT_EQ(options.file, "model.sched");
  EXPECT_FALSE(options.nproc);
  EXPECT_EQ(options.backend, "cpu");
  EXPECT_EQ(options.steps, 0);
  EXPECT_EQ(options.data, "synthetic");
  EXPECT_EQ(options.init, "");
  EXPECT_FALSE(options.seed);
  EXPECT_EQ(options.metrics, "");
  EXPECT_EQ(options.timeoutSeconds, 300);
  EXPECT_FALSE(options.quiet);
  EXPECT_FALSE(options.dataGiven);
  EXPECT_EQ(options.checkpointDir, "");
  EXPECT_EQ(options.checkpointEvery, 0);
  EXPECT_EQ(options.keep, 0);
  EXPECT_EQ(options.resume, "");
  EXPECT_EQ(options.stopTimeoutSeconds, 120);
}

TEST(Options, EveryFlag) {
  RunOptions options =
      parseOk({"--nproc", "4", "--backend", "cpu", "m.plan", "--steps", "7",
               "--data", "tokens.bin", "--init", "hf/", "--seed", "42",
               "--metrics", "m.jsonl", "--timeout", "10.5", "--quiet"});
  EXPECT_EQ(options.file, "m.plan");
  EXPECT_EQ(options.nproc, 4);
  EXPECT_EQ(options.steps, 7);
  EXPECT_EQ(options.data, "tokens.bin");
  EXPECT_EQ(options.init, "hf/");
  EXPECT_EQ(options.seed, 42u);
  EXPECT_EQ(options.metrics, "m.jsonl");
  EXPECT_EQ(options.timeoutSeconds, 10.5);
  EXPECT_TRUE(options.quiet);
  EXPECT_TRUE(options.dataGiven);
}

TEST(Options, CheckpointFlags) {
  RunOptions options = parseOk({"m.sched", "--checkpoint-dir", "ckpt",
                                "--checkpoint-every", "50", "--keep", "3",
                                "--resume", "auto", "--stop-timeout", "7.5"});
  EXPECT_EQ(options.checkpointDir, "ckpt");
  EXPECT_EQ(options.checkpointEvery, 50);
  EXPECT_EQ(options.keep, 3);
  EXPECT_EQ(options.resume, "auto");
  EXPECT_EQ(options.stopTimeoutSeconds, 7.5);
  // --resume PATH needs no --checkpoint-dir (the run then saves nothing).
  EXPECT_EQ(parseOk({"m.sched", "--resume", "ckpt/step-00000010"}).resume,
            "ckpt/step-00000010");
}

TEST(Options, CheckpointFlagErrorsNameTheFlags) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> words;
  };
  for (const Case &c : std::vector<Case>{
           {{"m.sched", "--checkpoint-every", "5"},
            {"--checkpoint-every", "--checkpoint-dir"}},
           {{"m.sched", "--keep", "2"}, {"--keep", "--checkpoint-dir"}},
           {{"m.sched", "--resume", "c", "--init", "hf/"},
            {"--resume", "--init"}},
           {{"m.sched", "--init", "hf/", "--resume", "c"},
            {"--resume", "--init"}},
           {{"m.sched", "--resume", "auto"},
            {"--resume auto", "--checkpoint-dir"}},
           {{"m.sched", "--resume", ""}, {"--resume"}},
           {{"m.sched", "--checkpoint-dir", "c", "--checkpoint-every", "0"},
            {"--checkpoint-every"}},
           {{"m.sched", "--checkpoint-dir", "c", "--keep", "-1"}, {"--keep"}},
           {{"m.sched", "--stop-timeout", "0"}, {"--stop-timeout"}}}) {
    ExitRequest exit = parseExit(c.args);
    EXPECT_EQ(exit.code, 1);
    EXPECT_EQ(exit.output.rfind("plan-run: ", 0), 0u) << exit.output;
    EXPECT_EQ(exit.output.find('\n'), std::string::npos) << exit.output;
    for (const std::string &word : c.words)
      EXPECT_NE(exit.output.find(word), std::string::npos)
          << exit.output << " lacks " << word;
  }
}

TEST(Options, HelpListsEveryFlag) {
  ExitRequest exit = parseExit({"--help"});
  EXPECT_EQ(exit.code, 0);
  for (const char *flag :
       {"--nproc", "--backend", "--steps", "--data", "--init", "--seed",
        "--metrics", "--memory-trace", "--timeout", "--quiet",
        "--checkpoint-dir", "--checkpoint-every", "--keep", "--resume",
        "--stop-timeout", "FILE"})
    EXPECT_NE(exit.output.find(flag), std::string::npos) << flag;
}

TEST(Options, UsageErrorsAreOneLine) {
  for (std::vector<std::string> args : {std::vector<std::string>{},
                                        {"a.sched", "--bogus"},
                                        {"a.sched", "--nproc", "0"},
                                        {"a.sched", "--nproc", "two"},
                                        {"a.sched", "--backend", "tpu"},
                                        {"a.sched", "--steps", "0"},
                                        {"a.sched", "--timeout", "-1"},
                                        {"a.sched", "b.sched"}}) {
    ExitRequest exit = parseExit(args);
    EXPECT_EQ(exit.code, 1);
    EXPECT_EQ(exit.output.rfind("plan-run: ", 0), 0u) << exit.output;
    EXPECT_EQ(exit.output.find('\n'), std::string::npos) << exit.output;
  }
}

TEST(Options, RankArgumentsRepeatTheRunWithoutNproc) {
  RunOptions options = parseOk({"--nproc",
                                "2",
                                "x.plan",
                                "--steps",
                                "3",
                                "--seed",
                                "9",
                                "--metrics",
                                "out.jsonl",
                                "--timeout",
                                "10",
                                "--quiet",
                                "--init",
                                "w.safetensors",
                                "--data",
                                "t.bin",
                                "--memory-trace",
                                "m.jsonl",
                                "--threads",
                                "3"});
  std::vector<std::string> args = rankArguments(options, "/tmp/x.sched");
  std::vector<std::string> withProgram = args;
  RunOptions rank = parseOk(withProgram);
  EXPECT_FALSE(rank.nproc);
  EXPECT_EQ(rank.file, "/tmp/x.sched");
  EXPECT_EQ(rank.steps, 3);
  EXPECT_EQ(rank.seed, 9u);
  EXPECT_EQ(rank.metrics, "out.jsonl");
  EXPECT_EQ(rank.memoryTrace, "m.jsonl");
  EXPECT_EQ(rank.timeoutSeconds, 10);
  EXPECT_TRUE(rank.quiet);
  EXPECT_EQ(rank.init, "w.safetensors");
  EXPECT_EQ(rank.data, "t.bin");
  EXPECT_EQ(rank.threads, 3);

  EXPECT_TRUE(rank.dataGiven);

  RunOptions plain = parseOk({"--nproc", "2", "x.sched"});
  RunOptions plainRank = parseOk(rankArguments(plain, "x.sched"));
  EXPECT_EQ(plainRank.steps, 0);
  EXPECT_FALSE(plainRank.seed);
  EXPECT_FALSE(plainRank.quiet);
  EXPECT_EQ(plainRank.metrics, "");
  EXPECT_EQ(plainRank.memoryTrace, "");
  // A rank knows whether --data was given (a resumed run warns when it
  // differs from the checkpoint's).
  EXPECT_FALSE(plainRank.dataGiven);
  EXPECT_EQ(plainRank.data, "synthetic");
  EXPECT_EQ(plainRank.checkpointDir, "");
  EXPECT_EQ(plainRank.resume, "");
  EXPECT_EQ(plainRank.stopTimeoutSeconds, 120);
  EXPECT_EQ(plainRank.threads, 0);
}

// --set reaches planc with a .plan; a compiled schedule cannot take it.
TEST(Options, SetNeedsAPlan) {
  RunOptions options =
      parseOk({"x.plan", "--set", "train.micro_batch=2", "--set",
               "train.optimizer=adamw(lr = 1e-4)", "--nproc", "2"});
  EXPECT_EQ(options.sets,
            (std::vector<std::string>{"train.micro_batch=2",
                                      "train.optimizer=adamw(lr = 1e-4)"}));
  // The launcher compiles the plan once; its ranks read that schedule.
  RunOptions rank = parseOk(rankArguments(options, "/tmp/x.sched"));
  EXPECT_TRUE(rank.sets.empty());
  ExitRequest exit = parseExit({"x.sched", "--set", "train.micro_batch=2"});
  EXPECT_EQ(exit.code, 1);
  EXPECT_NE(exit.output.find("--set changes a plan, and x.sched is a compiled "
                             "schedule"),
            std::string::npos)
      << exit.output;
}

TEST(Options, RankArgumentsPassTheCheckpointFlags) {
  RunOptions options = parseOk({"--nproc", "2", "x.plan", "--checkpoint-dir",
                                "/ck", "--checkpoint-every", "4", "--keep", "2",
                                "--resume", "auto", "--stop-timeout", "9.25"});
  RunOptions rank = parseOk(rankArguments(options, "/tmp/x.sched"));
  EXPECT_EQ(rank.checkpointDir, "/ck");
  EXPECT_EQ(rank.checkpointEvery, 4);
  EXPECT_EQ(rank.keep, 2);
  EXPECT_EQ(rank.resume, "auto");
  EXPECT_EQ(rank.stopTimeoutSeconds, 9.25);

  RunOptions resumeOnly =
      parseOk({"--nproc", "2", "x.sched", "--resume", "/ck/step-00000004"});
  RunOptions resumeRank = parseOk(rankArguments(resumeOnly, "x.sched"));
  EXPECT_EQ(resumeRank.resume, "/ck/step-00000004");
  EXPECT_EQ(resumeRank.checkpointDir, "");
  EXPECT_EQ(resumeRank.checkpointEvery, 0);
}

TEST(FaultInjection, Parses) {
  FaultInjection fault = parseFaultInjection("rank=1,step=3,kind=hang");
  EXPECT_EQ(fault.rank, 1);
  EXPECT_EQ(fault.step, 3);
  EXPECT_EQ(fault.kind, FaultInjection::Kind::Hang);
  EXPECT_EQ(parseFaultInjection("kind=abort,step=1,rank=0").kind,
            FaultInjection::Kind::Abort);
  EXPECT_EQ(parseFaultInjection("rank=0,step=2,kind=exit").kind,
            FaultInjection::Kind::Exit);
  EXPECT_EQ(parseFaultInjection("rank=0,step=2,kind=error").kind,
            FaultInjection::Kind::Error);
  FaultInjection save = parseFaultInjection("rank=1,step=4,kind=save");
  EXPECT_EQ(save.kind, FaultInjection::Kind::Save);
  EXPECT_EQ(save.rank, 1);
  EXPECT_EQ(save.step, 4);
}

TEST(FaultInjection, RejectsBadSpecs) {
  for (const char *spec :
       {"", "rank=1", "rank=1,step=3,kind=crash", "rank=x,step=3,kind=exit",
        "rank=1,step=0,kind=exit", "rank=1,step=3,kind=exit,when=now",
        "rank1,step=3"}) {
    try {
      parseFaultInjection(spec);
      ADD_FAILURE() << "accepted '" << spec << "'";
    } catch (const std::invalid_argument &e) {
      EXPECT_EQ(std::string(e.what()).rfind("PLAN_RUN_FAULT: ", 0), 0u)
          << e.what();
    }
  }
}

TEST(FaultInjection, OtherRanksAndStepsAreUntouched) {
  FaultInjection fault = parseFaultInjection("rank=1,step=3,kind=exit");
  injectFault(fault, 0, 3);
  injectFault(fault, 1, 2);
  injectFault(std::nullopt, 1, 3);
  EXPECT_EXIT(injectFault(fault, 1, 3), testing::ExitedWithCode(3),
              "rank 1: PLAN_RUN_FAULT at step 3");
  FaultInjection error = parseFaultInjection("rank=0,step=1,kind=error");
  try {
    injectFault(error, 0, 1);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "PLAN_RUN_FAULT: injected error at step 1");
  }
}

TEST(FaultInjection, SaveTruncatesTheShardAndExits) {
  std::string path = testing::TempDir() + "plan-run-save-fault-" +
                     std::to_string(::getpid()) + ".safetensors.tmp";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(1000, 'x');
  }
  FaultInjection fault = parseFaultInjection("rank=1,step=3,kind=save");
  // Not at the start of the step, not for other ranks or steps.
  injectFault(fault, 1, 3);
  injectSaveFault(fault, 0, 3, path);
  injectSaveFault(fault, 1, 2, path);
  injectSaveFault(std::nullopt, 1, 3, path);
  injectSaveFault(parseFaultInjection("rank=1,step=3,kind=exit"), 1, 3, path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1000);
  EXPECT_EXIT(injectSaveFault(fault, 1, 3, path), testing::ExitedWithCode(3),
              "rank 1: PLAN_RUN_FAULT in the checkpoint save after step 3");
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 500);
  ::unlink(path.c_str());
}

} // namespace

// --calibrate measures the host: no FILE, no training options, the cpu
// backend only; its ranks get the calibration, not a run.
TEST(Options, CalibrateTakesNoFileOrTrainingOptions) {
  RunOptions options =
      parseOk({"--calibrate", "--nproc", "2", "--threads", "1", "-q"});
  EXPECT_TRUE(options.calibrate);
  EXPECT_EQ(options.file, "");
  RunOptions rank = parseOk(rankArguments(options, ""));
  EXPECT_TRUE(rank.calibrate);
  EXPECT_EQ(rank.threads, 1);
  EXPECT_TRUE(rank.quiet);
  EXPECT_FALSE(rank.nproc);

  auto refused = [](std::vector<std::string> args, const std::string &what) {
    ExitRequest exit = parseExit(args);
    EXPECT_EQ(exit.code, 1);
    EXPECT_NE(exit.output.find(what), std::string::npos) << exit.output;
  };
  refused({"--calibrate", "x.plan"},
          "--calibrate measures the host and takes no FILE");
  refused({"--calibrate", "--steps", "3"},
          "--calibrate measures the host and takes no --steps");
  refused({"--calibrate", "--backend", "cuda"},
          "--calibrate measures the cpu backend");
  // Without --calibrate a FILE is still required.
  refused({"--nproc", "2"}, "plan-run: FILE is required (see --help)");
}
