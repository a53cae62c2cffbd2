//===- Files.h - Whole-file reads, atomic writes, directories ---*- C++ -*-===//
//
// The runtime's file system operations, as POSIX calls: libtorch.so exports
// its own copies of some std::filesystem symbols, which interpose on
// libstdc++'s and crash. Every failure is a FileError whose message is one
// line naming the path and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_RUNTIME_SUPPORT_FILES_H
#define PLAN_RUNTIME_SUPPORT_FILES_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plan::rt::support {

class FileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// `dir/name` (just `name` when `dir` is empty).
std::string joinPath(const std::string &dir, const std::string &name);

bool isDirectory(const std::string &path);
bool isRegularFile(const std::string &path);
/// Whether anything is at `path` (a dangling link too).
bool pathExists(const std::string &path);
/// The size of a file, or -1 when it cannot be stat'ed.
int64_t fileSize(const std::string &path);
/// The names in a directory (no "." or ".."), sorted; empty when it cannot
/// be read.
std::vector<std::string> listDirectory(const std::string &path);

/// The whole contents of a regular file.
std::string readFile(const std::string &path);

/// Writes `bytes` to `path` so that no reader (and no crash) ever sees part
/// of it: a temporary file next to `path`, flushed to disk, renamed over
/// `path`, then the directory synced. A symbolic link is written through:
/// the file it names is replaced and the link stays. A file that is replaced
/// keeps its permissions; a new one gets 0666 less the umask. An existing
/// path that is not a regular file (a device, a directory) is refused.
void writeFileAtomic(const std::string &path, std::string_view bytes);

/// mkdir -p.
void makeDirectories(const std::string &path);
/// rm -r; a path that does not exist is no error.
void removeTree(const std::string &path);
/// fsync of a file, or of a directory (which makes a rename in it durable).
void syncPath(const std::string &path, bool directory);
void renamePath(const std::string &from, const std::string &to);

/// zlib's CRC-32 of `bytes`, and of a file's contents with its size.
uint32_t crc32(std::string_view bytes);
std::pair<int64_t, uint32_t> fileSizeAndCrc32(const std::string &path);

} // namespace plan::rt::support

#endif // PLAN_RUNTIME_SUPPORT_FILES_H
