//===- train_embedded.cpp - Training from C++, without plan-run -----------===//
//
// What a program that embeds the runtime does: read a schedule file that
// planc wrote, connect the ranks of this process (here one: a mesh of one
// needs no peers), and train with the runtime's own training loop
// (runtime/train/Trainer.h), the one plan-run drives.
//
//   train_embedded FILE.sched STEPS
//
// prints one line per step, "step K loss L", L to the last bit.
//
//===----------------------------------------------------------------------===//

#include "Comm.h"
#include "DeviceBackend.h"
#include "ScheduleFile.h"
#include "Trainer.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: train_embedded FILE.sched STEPS\n");
    return 2;
  }
  try {
    namespace rt = plan::rt;
    rt::ValidSchedule schedule = rt::readScheduleFile(argv[1]);
    if (schedule->worldSize() != 1)
      throw std::runtime_error(std::string(argv[1]) + ": a schedule for " +
                               std::to_string(schedule->worldSize()) +
                               " ranks; this example runs one");
    std::unique_ptr<rt::DeviceBackend> backend = rt::DeviceBackend::createCpu();
    std::unique_ptr<rt::Comm> comm =
        rt::Comm::createGloo(c10::make_intrusive<c10d::HashStore>(), 0, 1,
                             schedule, std::chrono::seconds(60));
    rt::TrainOptions options;
    options.steps = std::stoll(argv[2]);
    rt::Trainer trainer(schedule, options, rt::prepareRun(schedule, options),
                        *comm, *backend);
    while (!trainer.finished()) {
      rt::StepResult result = trainer.step();
      std::printf("step %lld loss %.17g\n", static_cast<long long>(result.step),
                  result.loss);
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "train_embedded: %s\n", e.what());
    return 1;
  }
}
