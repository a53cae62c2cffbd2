//===- ScheduleFraming.cpp - A schedule file's header and body ------------===//
//
// The 32-byte header (magic, version, flags, body size, CRC-32) around the
// JSON body. The reader compares sizes before it reads anything and checks
// the body against its CRC before it parses it.
//
//===----------------------------------------------------------------------===//

#include "Files.h"
#include "ScheduleFile.h"
#include "ScheduleJson.h"

#include <cstdio>
#include <cstring>

namespace plan::rt {
namespace {

constexpr char kMagic[8] = {'P', 'L', 'A', 'N', 'S', 'C', 'H', 'D'};
constexpr size_t kHeaderBytes = 32;
// The format nests five levels (root, units, params, shape; ops' arrays);
// anything much deeper is not a schedule, and refusing it bounds the
// parser's work.
constexpr int kMaxJsonDepth = 16;

[[noreturn]] void fail(const std::string &name, const std::string &reason) {
  throw ScheduleFileError(name + ": " + reason);
}

void putLE(std::string &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t getLE(std::string_view in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= uint64_t(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

/// Checks the header against the file and returns the body.
std::string_view checkHeader(std::string_view bytes, const std::string &name) {
  if (bytes.size() < kHeaderBytes)
    fail(name, "truncated: " + std::to_string(bytes.size()) +
                   " bytes, shorter than the " + std::to_string(kHeaderBytes) +
                   "-byte schedule file header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    fail(name, "not a schedule file (no PLANSCHD magic; write one with "
               "`planc FILE.plan -o FILE.sched`)");
  uint32_t version = static_cast<uint32_t>(getLE(bytes, 8, 4));
  if (version > kScheduleFormatVersion)
    fail(name, "schedule format version " + std::to_string(version) +
                   " is newer than this reader supports (" +
                   std::to_string(kScheduleFormatVersion) +
                   "); rebuild plan-run from the planc that wrote it");
  if (version < kScheduleFormatVersion)
    fail(name, "schedule format version " + std::to_string(version) +
                   " is not supported (this reader reads version " +
                   std::to_string(kScheduleFormatVersion) +
                   "); recompile the plan with planc");
  uint32_t flags = static_cast<uint32_t>(getLE(bytes, 12, 4));
  if (flags != 0) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%x", flags);
    fail(name, std::string("unknown header flags 0x") + hex +
                   " (this version defines none)");
  }
  uint64_t bodySize = getLE(bytes, 16, 8);
  uint64_t available = bytes.size() - kHeaderBytes;
  if (bodySize > available)
    fail(name, "truncated: the header announces a " + std::to_string(bodySize) +
                   "-byte body but the file holds " +
                   std::to_string(available) + " bytes after the header");
  if (bodySize < available)
    fail(name, "size mismatch: " + std::to_string(available - bodySize) +
                   " unexpected bytes after the " + std::to_string(bodySize) +
                   "-byte body");
  if (getLE(bytes, 28, 4) != 0)
    fail(name, "reserved header bytes 28..31 are not zero");
  std::string_view body = bytes.substr(kHeaderBytes);
  uint32_t expected = static_cast<uint32_t>(getLE(bytes, 24, 4));
  uint32_t actual = support::crc32(body);
  if (expected != actual) {
    char text[128];
    std::snprintf(text, sizeof(text),
                  "checksum mismatch (CRC-32 of the body is %08x, the header "
                  "says %08x): the file is corrupted",
                  actual, expected);
    fail(name, text);
  }
  return body;
}

} // namespace

std::string serializeSchedule(const Schedule &schedule) {
  if (schedule.version != kScheduleFormatVersion)
    throw ScheduleFileError("schedule: version " +
                            std::to_string(schedule.version) +
                            " cannot be written by this writer (version " +
                            std::to_string(kScheduleFormatVersion) + ")");
  // The body is written after room for the header, which its size and
  // CRC then fill in.
  std::string out(kHeaderBytes, '\0');
  appendScheduleBody(schedule, out);
  std::string_view body = std::string_view(out).substr(kHeaderBytes);
  std::string header;
  header.append(kMagic, sizeof(kMagic));
  putLE(header, kScheduleFormatVersion, 4);
  putLE(header, 0, 4); // flags
  putLE(header, body.size(), 8);
  putLE(header, support::crc32(body), 4);
  putLE(header, 0, 4); // reserved
  out.replace(0, kHeaderBytes, header);
  return out;
}

std::string scheduleJsonText(const Schedule &schedule) {
  std::string body;
  appendScheduleBody(schedule, body);
  return Json::parse(body).dump(2) + "\n";
}

ValidSchedule parseSchedule(std::string_view bytes, const std::string &name) {
  std::string_view body = checkHeader(bytes, name);
  Schedule schedule;
  try {
    schedule = scheduleFromJson(JsonReader(name),
                                support::parseJson(body, name, kMaxJsonDepth));
  } catch (const support::JsonError &e) {
    throw ScheduleFileError(e.what());
  }
  return validateSchedule(std::move(schedule), name);
}

void writeScheduleFile(const ValidSchedule &schedule, const std::string &path) {
  std::string bytes = serializeSchedule(schedule.file());
  try {
    support::writeFileAtomic(path, bytes);
  } catch (const support::FileError &e) {
    throw ScheduleFileError(e.what());
  }
}

ValidSchedule readScheduleFile(const std::string &path) {
  std::string bytes;
  try {
    bytes = support::readFile(path);
  } catch (const support::FileError &e) {
    throw ScheduleFileError(e.what());
  }
  return parseSchedule(bytes, path);
}

} // namespace plan::rt
