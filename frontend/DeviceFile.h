//===- DeviceFile.h - A device's figures in a file of their own -*- C++ -*-===//
//
// `cluster { gpu = "host.json" }` (docs/language.md, "Device files"): the
// figures of a device measured on a machine (`plan-run --calibrate
// --device-file host.json`) or copied from a vendor's sheet, kept out of the
// plan so that every plan run there can name them. The file is JSON; its
// device keys are the plan's, in plain units (bytes, TFLOP/s, bytes/s,
// seconds), and `host` gives the node's figures the cluster takes where the
// plan leaves them out. A diagnostic about a key points into the file.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_FRONTEND_DEVICEFILE_H
#define PLAN_FRONTEND_DEVICEFILE_H

#include "frontend/Diagnostics.h"
#include "frontend/PlanSpec.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <optional>
#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace plan {

/// The `format` and `version` a device file states.
inline constexpr const char *kDeviceFileFormat = "plan-device";
inline constexpr int64_t kDeviceFileVersion = 1;

struct DeviceFile {
  /// The device: `base`'s figures from the table (named as it is, so that
  /// a calibrated `cpu` is still the CPU backend's device) with the file's
  /// over them, or "custom" with every figure from the file.
  DeviceSpec device;
  /// The node's figures, for the cluster keys the plan leaves out.
  std::optional<int64_t> hostMemoryBytes;
  std::optional<int64_t> hostCores;
  std::optional<double> hostBandwidth;
  /// The ranks a node ran when the figures were measured.
  std::optional<int64_t> measuredRanksPerNode;
  /// Where the file gives each figure, by the plan's path
  /// ("cluster.gpu.memory", "cluster.host_cores"), for the plan's checks.
  llvm::StringMap<llvm::SMLoc> keyLocs;
  std::string path; // the file read
};

/// Reads the device file `path` (relative to the directory of the file
/// that holds `at`). An unreadable file is an error at `at`; everything
/// about its contents an error at the key in the file.
std::optional<DeviceFile> readDeviceFile(llvm::SourceMgr &sourceMgr,
                                         DiagEmitter &diag,
                                         llvm::StringRef path, llvm::SMLoc at);

} // namespace plan

#endif // PLAN_FRONTEND_DEVICEFILE_H
