//===- DeviceFile.cpp - A device's figures in a file of their own --------===//

#include "frontend/DeviceFile.h"

#include "frontend/ConfigDocument.h"
#include "frontend/Models.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using llvm::SMLoc;
using llvm::StringRef;

namespace {

/// One figure of the device: its key in the file and in the plan.
struct Figure {
  const char *key;
  bool integer;  // memory: whole bytes
  bool required; // without `base`
  int64_t plan::DeviceSpec::*bytes;
  double plan::DeviceSpec::*value;
};

constexpr Figure kFigures[] = {
    {"memory", true, true, &plan::DeviceSpec::memoryBytes, nullptr},
    {"bf16_tflops", false, true, nullptr, &plan::DeviceSpec::bf16Tflops},
    {"fp16_tflops", false, true, nullptr, &plan::DeviceSpec::fp16Tflops},
    {"fp32_tflops", false, true, nullptr, &plan::DeviceSpec::fp32Tflops},
    {"hbm_bandwidth", false, true, nullptr, &plan::DeviceSpec::hbmBandwidth},
    {"nvlink_bandwidth", false, true, nullptr,
     &plan::DeviceSpec::nvlinkBandwidth},
    {"pcie_bandwidth", false, true, nullptr, &plan::DeviceSpec::pcieBandwidth},
    {"link_latency", false, false, nullptr, &plan::DeviceSpec::linkLatency},
};

/// "unknown key 'X' in a device file; did you mean 'Y'?" or the list.
void unknownKey(plan::DiagEmitter &diag, const plan::ConfigMember &member,
                llvm::ArrayRef<StringRef> keys, StringRef where) {
  std::string message =
      llvm::formatv("unknown key '{0}' in {1}", member.key, where).str();
  StringRef close = plan::closestMatch(member.key, keys);
  if (!close.empty())
    message += llvm::formatv("; did you mean '{0}'?", close).str();
  else
    message += "; expected one of: " + llvm::join(keys, ", ");
  diag.error(member.keyLoc, message);
}

} // namespace

std::optional<plan::DeviceFile> plan::readDeviceFile(llvm::SourceMgr &sourceMgr,
                                                     DiagEmitter &diag,
                                                     StringRef path, SMLoc at) {
  DeviceFile file;
  file.path = pathBesidePlan(sourceMgr, at, path);
  size_t errorsBefore = diag.numErrors();
  std::optional<ConfigNode> root = readNamedDocument(
      sourceMgr, diag, file.path, ConfigFormat::Json, at, "device file");
  if (!root)
    return std::nullopt;

  // What the file is, before what it says.
  const ConfigNode *format = root->find("format");
  if (!format || format->kind != ConfigNode::Kind::String ||
      format->text != kDeviceFileFormat) {
    diag.error(format ? format->loc : root->loc,
               llvm::formatv("a device file states \"format\": \"{0}\"{1}",
                             kDeviceFileFormat,
                             format ? ", got " + format->describe()
                                    : std::string(", and this one does not"))
                   .str());
    return std::nullopt;
  }
  const ConfigNode *version = root->find("version");
  if (!version) {
    diag.error(root->loc, llvm::formatv("a device file states its \"version\" "
                                        "({0})",
                                        kDeviceFileVersion)
                              .str());
    return std::nullopt;
  }
  std::optional<int64_t> v = readConfigInteger(*version, "version", diag);
  if (!v)
    return std::nullopt;
  if (*v != kDeviceFileVersion) {
    diag.error(version->loc,
               llvm::formatv("device file version {0} is not one this planc "
                             "reads ({1})",
                             *v, kDeviceFileVersion)
                   .str());
    return std::nullopt;
  }

  // The base device, whose figures the file's replace.
  bool fromTable = false;
  file.device = DeviceSpec{.name = "custom"};
  if (const ConfigNode *base = root->find("base")) {
    std::optional<std::string> name = readConfigString(*base, "base", diag);
    if (!name)
      return std::nullopt;
    const DeviceSpec *known = lookupDevice(*name);
    if (!known) {
      auto names = llvm::map_to_vector(
          deviceTable(), [](const DeviceSpec &d) { return StringRef(d.name); });
      StringRef close = closestMatch(*name, names);
      diag.error(base->loc,
                 llvm::formatv(
                     "unknown device '{0}'{1}", *name,
                     close.empty()
                         ? "; expected one of: " + llvm::join(names, ", ")
                         : llvm::formatv("; did you mean '{0}'?", close).str())
                     .str());
      return std::nullopt;
    }
    file.device = *known;
    fromTable = true;
  }

  llvm::SmallVector<StringRef> keys = {"format", "version", "base", "host",
                                       "measured"};
  for (const Figure &figure : kFigures)
    keys.push_back(figure.key);
  for (const ConfigMember &member : root->members) {
    StringRef key = member.key;
    const Figure *figure =
        llvm::find_if(kFigures, [&](const Figure &f) { return key == f.key; });
    if (figure != std::end(kFigures)) {
      file.keyLocs[("cluster.gpu." + key).str()] = member.value.loc;
      if (figure->integer) {
        if (std::optional<int64_t> n =
                readConfigInteger(member.value, key, diag))
          file.device.*(figure->bytes) = *n;
      } else if (std::optional<double> x =
                     readConfigNumber(member.value, key, diag)) {
        file.device.*(figure->value) = *x;
      }
    } else if (key == "host") {
      if (!member.value.isMap()) {
        diag.error(member.value.loc,
                   "'host' expects a map of the node's figures "
                   "(memory, cores, bandwidth), got " +
                       member.value.describe());
        continue;
      }
      for (const ConfigMember &h : member.value.members) {
        if (h.key == "memory") {
          file.keyLocs["cluster.host_memory"] = h.value.loc;
          file.hostMemoryBytes =
              readConfigInteger(h.value, "host.memory", diag);
        } else if (h.key == "cores") {
          file.keyLocs["cluster.host_cores"] = h.value.loc;
          file.hostCores = readConfigInteger(h.value, "host.cores", diag);
        } else if (h.key == "bandwidth") {
          file.keyLocs["cluster.host_bandwidth"] = h.value.loc;
          file.hostBandwidth =
              readConfigNumber(h.value, "host.bandwidth", diag);
        } else {
          unknownKey(diag, h, {"memory", "cores", "bandwidth"}, "'host'");
        }
      }
    } else if (key == "measured") {
      // How the figures were measured: informational, but for the ranks.
      if (const ConfigNode *ranks = member.value.isMap()
                                        ? member.value.find("ranks_per_node")
                                        : nullptr)
        file.measuredRanksPerNode = readConfigInteger(
            *ranks, "measured.ranks_per_node", diag, 1, kMaxCount);
    } else if (key != "format" && key != "version" && key != "base") {
      unknownKey(diag, member, keys, "a device file");
    }
  }
  if (!fromTable)
    for (const Figure &figure : kFigures)
      if (figure.required && !root->find(figure.key))
        diag.error(root->loc,
                   llvm::formatv("the device file gives no '{0}': without "
                                 "\"base\" (a device of the table whose "
                                 "figures it changes) it gives every figure "
                                 "but link_latency",
                                 figure.key)
                       .str());
  if (diag.numErrors() != errorsBefore)
    return std::nullopt;
  return file;
}
