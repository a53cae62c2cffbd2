//===- NoCuda.cpp - What a build without the CUDA backend answers ---------===//
//
// Compiled instead of cuda/ when the CUDA backend is not built
// (runtime/core/CMakeLists.txt): the CUDA factories say so in one line.
//
//===----------------------------------------------------------------------===//

#include "Comm.h"
#include "DeviceBackend.h"

#include <stdexcept>

namespace plan::rt {
namespace {

[[noreturn]] void noCuda() {
  throw std::runtime_error("this build has no CUDA backend (configure with "
                           "-DPLAN_ENABLE_CUDA=ON)");
}

} // namespace

std::unique_ptr<Comm> Comm::createNccl(c10::intrusive_ptr<c10d::Store>, int,
                                       int, const Schedule &,
                                       std::chrono::milliseconds, at::Device) {
  noCuda();
}

std::unique_ptr<DeviceBackend> DeviceBackend::createCuda(int) { noCuda(); }

bool DeviceBackend::cudaBuilt() { return false; }

int DeviceBackend::cudaDeviceCount() { return 0; }

} // namespace plan::rt
