//===- LaunchTest.cpp - Launcher variables and local rank spawning --------===//

#include "Launch.h"
#include "ScheduleInput.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

using namespace plan::run;
namespace fs = std::filesystem;

namespace {

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return
      [vars = std::move(vars)](const char *name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end())
          return std::nullopt;
        return it->second;
      };
}

std::string launchError(std::map<std::string, std::string> vars) {
  try {
    rankFromEnvironment(envOf(std::move(vars)));
  } catch (const LaunchError &e) {
    return e.what();
  }
  return "(no error)";
}

const std::map<std::string, std::string> kMaster = {{"MASTER_ADDR", "node0"},
                                                    {"MASTER_PORT", "29500"}};

std::map<std::string, std::string>
with(std::map<std::string, std::string> a,
     const std::map<std::string, std::string> &b) {
  a.insert(b.begin(), b.end());
  return a;
}

TEST(RankFromEnvironment, NoLauncherIsOneRank) {
  RankInfo info = rankFromEnvironment(envOf({}));
  EXPECT_EQ(info.launcher, Launcher::Single);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world, 1);
  EXPECT_TRUE(info.masterAddr.empty());
}

TEST(RankFromEnvironment, Torchrun) {
  RankInfo info = rankFromEnvironment(envOf(with(
      {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}, kMaster)));
  EXPECT_EQ(info.launcher, Launcher::Torchrun);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.masterAddr, "node0");
  EXPECT_EQ(info.masterPort, 29500);
}

TEST(RankFromEnvironment, TorchrunAgentStore) {
  // torchrun's agent already serves the store at MASTER_PORT.
  auto vars = with({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, kMaster);
  EXPECT_FALSE(rankFromEnvironment(envOf(vars)).launcherServesStore);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_TRUE(rankFromEnvironment(envOf(vars)).launcherServesStore);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(rankFromEnvironment(envOf(vars)).launcherServesStore);
}

TEST(RankFromEnvironment, TorchrunWinsOverMpiAndSlurm) {
  // torchrun started by srun or mpirun: torchrun's own numbering counts.
  RankInfo info = rankFromEnvironment(envOf(with({{"RANK", "3"},
                                                  {"WORLD_SIZE", "4"},
                                                  {"OMPI_COMM_WORLD_RANK", "0"},
                                                  {"OMPI_COMM_WORLD_SIZE", "2"},
                                                  {"SLURM_PROCID", "1"},
                                                  {"SLURM_NTASKS", "2"}},
                                                 kMaster)));
  EXPECT_EQ(info.launcher, Launcher::Torchrun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world, 4);
}

TEST(RankFromEnvironment, OpenMpiWinsOverInheritedSlurm) {
  // mpirun inside an sbatch script: every rank inherits the batch step's
  // SLURM_PROCID=0.
  RankInfo info =
      rankFromEnvironment(envOf(with({{"OMPI_COMM_WORLD_RANK", "6"},
                                      {"OMPI_COMM_WORLD_SIZE", "16"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                      {"SLURM_PROCID", "0"},
                                      {"SLURM_NTASKS", "1"},
                                      {"SLURM_LOCALID", "0"}},
                                     kMaster)));
  EXPECT_EQ(info.launcher, Launcher::OpenMpi);
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.world, 16);
  EXPECT_EQ(info.localRank, 2);
}

TEST(RankFromEnvironment, RanksOnThisHost) {
  EXPECT_EQ(rankFromEnvironment(envOf({})).localWorld, 1);
  EXPECT_EQ(rankFromEnvironment(envOf(with({{"RANK", "1"},
                                            {"WORLD_SIZE", "8"},
                                            {"LOCAL_WORLD_SIZE", "4"}},
                                           kMaster)))
                .localWorld,
            4);
  EXPECT_EQ(
      rankFromEnvironment(envOf(with({{"OMPI_COMM_WORLD_RANK", "1"},
                                      {"OMPI_COMM_WORLD_SIZE", "8"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                                     kMaster)))
          .localWorld,
      2);
  auto slurm = with({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "11"},
                     {"SLURM_TASKS_PER_NODE", "4(x2),3"}},
                    kMaster);
  EXPECT_EQ(rankFromEnvironment(envOf(slurm)).localWorld, 4);
  slurm["SLURM_NTASKS_PER_NODE"] = "8";
  EXPECT_EQ(rankFromEnvironment(envOf(slurm)).localWorld, 8);
}

TEST(ChooseThreads, FlagThenOmpNumThreadsThenCoresPerRank) {
  RankInfo rank;
  rank.localWorld = 2;
  auto omp = envOf({{"OMP_NUM_THREADS", "3"}});
  EXPECT_EQ(chooseThreads(5, rank, omp).threads, 5);
  EXPECT_EQ(chooseThreads(5, rank, omp).reason, "--threads");
  EXPECT_EQ(chooseThreads(0, rank, omp).threads, 3);
  EXPECT_EQ(chooseThreads(0, rank, omp).reason, "OMP_NUM_THREADS");
  // A form LibTorch reads but that is not one number is left to it.
  EXPECT_EQ(chooseThreads(0, rank, envOf({{"OMP_NUM_THREADS", "4,2"}})).threads,
            0);
  ThreadChoice byCores = chooseThreads(0, rank, envOf({}));
  EXPECT_EQ(byCores.threads, std::max(1, usableCores() / 2));
  EXPECT_EQ(byCores.reason,
            std::to_string(usableCores()) + " cores / 2 ranks on this host");
  // More ranks than cores: one thread each, never zero.
  rank.localWorld = 1 << 20;
  EXPECT_EQ(chooseThreads(0, rank, envOf({})).threads, 1);
}

TEST(RankFromEnvironment, Slurm) {
  RankInfo info = rankFromEnvironment(envOf(with(
      {{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "12"}, {"SLURM_LOCALID", "1"}},
      kMaster)));
  EXPECT_EQ(info.launcher, Launcher::Slurm);
  EXPECT_EQ(info.rank, 9);
  EXPECT_EQ(info.world, 12);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.masterAddr, "node0");
}

TEST(RankFromEnvironment, MissingMasterIsAnErrorNamingIt) {
  std::string slurm = launchError(
      {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"MASTER_PORT", "29500"}});
  EXPECT_NE(slurm.find("SLURM"), std::string::npos) << slurm;
  EXPECT_NE(slurm.find("MASTER_ADDR is not set"), std::string::npos) << slurm;

  std::string mpi = launchError({{"OMPI_COMM_WORLD_RANK", "0"},
                                 {"OMPI_COMM_WORLD_SIZE", "2"},
                                 {"MASTER_ADDR", "node0"}});
  EXPECT_NE(mpi.find("Open MPI"), std::string::npos) << mpi;
  EXPECT_NE(mpi.find("MASTER_PORT is not set"), std::string::npos) << mpi;

  std::string torchrun = launchError({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(torchrun.find("MASTER_ADDR is not set"), std::string::npos)
      << torchrun;
  EXPECT_EQ(torchrun.find('\n'), std::string::npos);
}

TEST(RankFromEnvironment, WorldOfOneNeedsNoMaster) {
  RankInfo info = rankFromEnvironment(
      envOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(info.launcher, Launcher::Slurm);
  EXPECT_EQ(info.world, 1);
  EXPECT_TRUE(info.masterAddr.empty());
}

TEST(RankFromEnvironment, BadValues) {
  EXPECT_NE(launchError(with({{"RANK", "one"}, {"WORLD_SIZE", "2"}}, kMaster))
                .find("RANK='one'"),
            std::string::npos);
  EXPECT_NE(launchError(with({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, kMaster))
                .find("RANK='-1'"),
            std::string::npos);
  EXPECT_NE(launchError(with({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, kMaster))
                .find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(launchError(with({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, kMaster))
                .find("WORLD_SIZE='0'"),
            std::string::npos);
  EXPECT_NE(launchError(with({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}, kMaster))
                .find("WORLD_SIZE='2x'"),
            std::string::npos);
  EXPECT_NE(launchError({{"RANK", "0"},
                         {"WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "a"},
                         {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT='70000'"),
            std::string::npos);
  EXPECT_NE(
      launchError(with({{"RANK", "0"}}, kMaster)).find("WORLD_SIZE is not set"),
      std::string::npos);
  EXPECT_NE(launchError(with({{"SLURM_PROCID", "0"}}, kMaster))
                .find("SLURM_NTASKS is not set"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// runLocalRanks, with /bin/sh scripts as ranks
//===----------------------------------------------------------------------===//

class LocalRanksTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("plan-run-launch-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LocalRanks shell(const std::string &script, int nproc) {
    LocalRanks ranks;
    ranks.executable = "/bin/sh";
    ranks.arguments = {"-c", script};
    ranks.nproc = nproc;
    ranks.masterPort = 12345;
    ranks.grace = std::chrono::milliseconds(300);
    return ranks;
  }

  std::string read(const std::string &name) {
    std::ifstream in(dir_ / name);
    std::string line;
    std::getline(in, line);
    return line;
  }

  fs::path dir_;
};

TEST_F(LocalRanksTest, EachRankGetsItsVariables) {
  ::setenv("RANK", "99", 1); // the launcher's own value must not leak through
  int code = runLocalRanks(shell(
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR "
      "$MASTER_PORT $TORCHELASTIC_USE_AGENT_STORE\" > " +
          dir_.string() + "/$RANK",
      3));
  ::unsetenv("RANK");
  EXPECT_EQ(code, 0);
  EXPECT_EQ(read("0"), "0 3 0 3 127.0.0.1 12345 False");
  EXPECT_EQ(read("1"), "1 3 1 3 127.0.0.1 12345 False");
  EXPECT_EQ(read("2"), "2 3 2 3 127.0.0.1 12345 False");
}

// The store plan-run --nproc serves: every rank connects to it, rank 0
// included, whatever an outer torchrun left in the environment.
TEST_F(LocalRanksTest, RanksOfALauncherThatServesTheStoreConnectToIt) {
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  LocalRanks ranks = shell("echo \"$TORCHELASTIC_USE_AGENT_STORE\" > " +
                               dir_.string() + "/$RANK",
                           2);
  ranks.launcherServesStore = true;
  int code = runLocalRanks(ranks);
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(code, 0);
  EXPECT_EQ(read("0"), "True");
  EXPECT_EQ(read("1"), "True");
}

TEST_F(LocalRanksTest, FailingRankStopsTheOthers) {
  // Rank 1 fails; the others would sleep for a minute unless terminated.
  testing::internal::CaptureStderr();
  auto start = std::chrono::steady_clock::now();
  int code = runLocalRanks(
      shell("if [ \"$RANK\" = 1 ]; then exit 7; fi; sleep 60", 3));
  auto elapsed = std::chrono::steady_clock::now() - start;
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 7);
  EXPECT_EQ(err, "plan-run: rank 1 exited with code 7\n");
  EXPECT_LT(elapsed, std::chrono::seconds(50));
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return true;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() &&
         line[paren + 2] == 'Z';
}

TEST_F(LocalRanksTest, WhatARankStartedEndsWithIt) {
  // Rank 0 is a shell waiting for a child of its own; stopping rank 0 must
  // stop that child too, or it would hold the launcher's output open (a test
  // runner waits for the pipe to close) for its whole minute.
  testing::internal::CaptureStderr();
  int code = runLocalRanks(
      shell("if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 3; fi; sleep 60 & "
            "echo $! > " +
                dir_.string() + "/child; wait",
            2));
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 3);
  pid_t child = static_cast<pid_t>(std::stol(read("child")));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ended(child) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(ended(child)) << "rank 0's child " << child << " outlived it";
}

TEST_F(LocalRanksTest, RankThatFailedFirstIsReportedNotItsEcho) {
  // Rank 1 stops at once because of rank 0, which fails a moment later.
  testing::internal::CaptureStderr();
  int code = runLocalRanks(
      shell("if [ \"$RANK\" = 1 ]; then exit 2; fi; sleep 0.1; exit 5", 2));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 5);
  EXPECT_EQ(err, "plan-run: rank 0 exited with code 5\n");
}

TEST_F(LocalRanksTest, EchoIsReportedWhenNothingElseFails) {
  testing::internal::CaptureStderr();
  auto start = std::chrono::steady_clock::now();
  int code = runLocalRanks(
      shell("if [ \"$RANK\" = 2 ]; then exit 2; fi; sleep 60", 3));
  auto elapsed = std::chrono::steady_clock::now() - start;
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, kStoppedForPeerExitCode);
  EXPECT_EQ(err, "plan-run: rank 2 exited with code 2\n");
  EXPECT_LT(elapsed, std::chrono::seconds(50));
}

TEST_F(LocalRanksTest, KilledRankIsReportedWithItsSignal) {
  testing::internal::CaptureStderr();
  int code = runLocalRanks(
      shell("if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 60", 2));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 128 + 9);
  EXPECT_NE(err.find("plan-run: rank 0 killed by signal 9"), std::string::npos)
      << err;
}

TEST_F(LocalRanksTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  testing::internal::CaptureStderr();
  auto start = std::chrono::steady_clock::now();
  int code = runLocalRanks(
      shell("if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 2; fi; trap '' TERM; "
            "while :; do sleep 0.1; done",
            2));
  auto elapsed = std::chrono::steady_clock::now() - start;
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 2);
  EXPECT_LT(elapsed, std::chrono::seconds(50));
}

/// Runs `ranks`, each of which touches DIR/ready.$RANK once it is set up, and
/// sends `sig` to this process (as a user or a scheduler would) once all of
/// them are ready.
int runAndSignal(LocalRanks ranks, const fs::path &dir, int sig) {
  pthread_t launcher = ::pthread_self();
  std::thread signaller([&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (bool ready = false; !ready;) {
      ready = true;
      for (int rank = 0; rank < ranks.nproc; ++rank)
        ready &= fs::exists(dir / ("ready." + std::to_string(rank)));
      if (std::chrono::steady_clock::now() > deadline)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::pthread_kill(launcher, sig);
  });
  int code = runLocalRanks(ranks);
  signaller.join();
  return code;
}

std::string readyThen(const fs::path &dir, const std::string &onTerm) {
  // The signal reaches the rank's whole process group, its `sleep` too,
  // which the shell would report ("Terminated") on the launcher's stderr.
  return "exec 2>/dev/null; trap '" + onTerm + "' TERM INT; touch " +
         dir.string() + "/ready.$RANK; while :; do sleep 0.05; done";
}

TEST_F(LocalRanksTest, SignalIsForwardedAndWithoutCheckpointsIsTheResult) {
  testing::internal::CaptureStderr();
  int code = runAndSignal(shell(readyThen(dir_, "exit 0"), 2), dir_, SIGTERM);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_EQ(err, "");
}

TEST_F(LocalRanksTest, CheckpointingRanksThatExitZeroAfterASignalMakeZero) {
  LocalRanks ranks = shell(
      readyThen(dir_, "echo $RANK > " + dir_.string() + "/saved.$RANK; exit 0"),
      3);
  ranks.checkpointOnSignal = true;
  ranks.signalGrace = std::chrono::seconds(30);
  testing::internal::CaptureStderr();
  int code = runAndSignal(ranks, dir_, SIGINT);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 0);
  EXPECT_EQ(err, "");
  EXPECT_EQ(read("saved.2"), "2");
}

TEST_F(LocalRanksTest, CheckpointingRankThatFailsAfterASignalIsReported) {
  LocalRanks ranks = shell(
      readyThen(dir_, "sleep 0.1; if [ $RANK = 1 ]; then exit 1; fi; exit 0"),
      2);
  ranks.checkpointOnSignal = true;
  ranks.signalGrace = std::chrono::seconds(30);
  testing::internal::CaptureStderr();
  int code = runAndSignal(ranks, dir_, SIGTERM);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_EQ(err, "plan-run: rank 1 exited with code 1\n");
}

TEST_F(LocalRanksTest, CheckpointingRankThatDoesNotExitIsKilledAfterItsGrace) {
  // The ranks ignore the signal (a save that never ends): SIGKILL after
  // signalGrace, not after the usual grace.
  LocalRanks ranks = shell(readyThen(dir_, ""), 2);
  ranks.checkpointOnSignal = true;
  ranks.grace = std::chrono::seconds(60);
  ranks.signalGrace = std::chrono::milliseconds(500);
  testing::internal::CaptureStderr();
  auto start = std::chrono::steady_clock::now();
  int code = runAndSignal(ranks, dir_, SIGTERM);
  auto elapsed = std::chrono::steady_clock::now() - start;
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 128 + SIGKILL);
  EXPECT_NE(err.find("killed by signal 9"), std::string::npos) << err;
  EXPECT_LT(elapsed, std::chrono::seconds(30));
}

TEST_F(LocalRanksTest, MissingExecutableFailsEveryRank) {
  LocalRanks ranks = shell("", 2);
  ranks.executable = (dir_ / "no-such-program").string();
  testing::internal::CaptureStderr();
  int code = runLocalRanks(ranks);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 127);
  EXPECT_NE(err.find("cannot execute"), std::string::npos) << err;
}

//===----------------------------------------------------------------------===//
// ScheduleInput: planc is found next to plan-run, else on PATH
//===----------------------------------------------------------------------===//

TEST_F(LocalRanksTest, ScheduleFilesAreUsedAsTheyAre) {
  ScheduleInput input("model.sched", "/nonexistent/plan-run");
  EXPECT_EQ(input.path(), "model.sched");
}

TEST_F(LocalRanksTest, PlancNextToTheExecutableComesFirst) {
  fs::path planc = dir_ / "planc";
  std::ofstream(planc) << "#!/bin/sh\n";
  fs::permissions(planc, fs::perms::owner_all);
  EXPECT_EQ(findPlanc((dir_ / "plan-run").string()), planc.string());
}

TEST_F(LocalRanksTest, PlanWithoutPlancIsOneLineError) {
  std::string oldPath = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", dir_.c_str(), 1);
  std::string message;
  try {
    ScheduleInput input("tiny.plan", (dir_ / "plan-run").string());
  } catch (const PlanCompileError &e) {
    message = e.what();
  }
  ::setenv("PATH", oldPath.c_str(), 1);
  EXPECT_NE(message.find("tiny.plan: a .plan needs planc"), std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(LocalRanksTest, PlancFailureIsOneLineErrorAndLeavesNoTemporaryFiles) {
  fs::path planc = dir_ / "planc";
  std::ofstream(planc)
      << "#!/bin/sh\necho 'x.plan:1:1: error: bad' >&2\nexit 1\n";
  fs::permissions(planc, fs::perms::owner_all);
  fs::path tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  std::string oldTmp = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  std::string message;
  testing::internal::CaptureStderr();
  try {
    ScheduleInput input("x.plan", (dir_ / "plan-run").string());
  } catch (const PlanCompileError &e) {
    message = e.what();
  }
  testing::internal::GetCapturedStderr();
  if (oldTmp.empty())
    ::unsetenv("TMPDIR");
  else
    ::setenv("TMPDIR", oldTmp.c_str(), 1);
  EXPECT_NE(message.find("x.plan: planc could not compile it"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("exited with code 1"), std::string::npos) << message;
  EXPECT_TRUE(fs::is_empty(tmp));
}

// A plan plan-run derives (--verify's shrunk plan and reference): planc's
// warnings are kept from the user, and its diagnostics come with the error
// when it fails.
TEST_F(LocalRanksTest, KeptDiagnosticsShowOnlyWhenPlancFails) {
  fs::path planc = dir_ / "planc";
  std::ofstream(planc) << "#!/bin/sh\necho 'x.plan:2:3: warning: derived' >&2\n"
                          ": > \"$3\"\n";
  fs::permissions(planc, fs::perms::owner_all);
  testing::internal::CaptureStderr();
  {
    ScheduleInput input("x.plan", (dir_ / "plan-run").string(), {}, {},
                        ScheduleInput::Diagnostics::OnlyIfItFails);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  std::ofstream(planc, std::ios::trunc)
      << "#!/bin/sh\necho 'x.plan:1:1: error: bad' >&2\nexit 1\n";
  std::string message;
  testing::internal::CaptureStderr();
  try {
    ScheduleInput input("x.plan", (dir_ / "plan-run").string(), {}, {},
                        ScheduleInput::Diagnostics::OnlyIfItFails);
  } catch (const PlanCompileError &e) {
    message = e.what();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(message.rfind("x.plan:1:1: error: bad\nx.plan: planc could not "
                          "compile it",
                          0),
            0u)
      << message;
}

TEST_F(LocalRanksTest, PlanIsCompiledIntoATemporaryScheduleThatIsRemoved) {
  // A stand-in planc that writes its arguments into the output file.
  fs::path planc = dir_ / "planc";
  std::ofstream(planc) << "#!/bin/sh\necho \"$@\" > \"$3\"\n";
  fs::permissions(planc, fs::perms::owner_all);
  std::string path;
  {
    ScheduleInput input("dir/model.plan", (dir_ / "plan-run").string());
    path = input.path();
    EXPECT_EQ(fs::path(path).filename(), "model.sched");
    std::ifstream in(path);
    std::string args;
    std::getline(in, args);
    EXPECT_EQ(args, "dir/model.plan -o " + path);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(fs::path(path).parent_path()));
}

} // namespace
