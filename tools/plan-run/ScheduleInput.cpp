//===- ScheduleInput.cpp - FILE as a schedule file on disk ----------------===//

#include "ScheduleInput.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace plan::run {

// No std::filesystem here: the LibTorch wheel exports its own build of some
// std::filesystem functions, and calls that bind to them crash.
namespace {

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// "dir/model.plan" -> "model"
std::string stemOf(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

bool isExecutableFile(const std::string &path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

/// Removes `dir` and the files in it (planc writes only files there).
void removeDirectory(const std::string &dir) {
  if (DIR *handle = ::opendir(dir.c_str())) {
    while (const dirent *entry = ::readdir(handle)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(handle);
  }
  ::rmdir(dir.c_str());
}

} // namespace

TemporaryDirectory::TemporaryDirectory() {
  const char *tmpdir = std::getenv("TMPDIR");
  std::string base = tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string pattern = base + "/plan-run-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("cannot create a temporary directory in " + base +
                             ": " + std::strerror(errno));
  path_ = pattern;
}

TemporaryDirectory::~TemporaryDirectory() { removeDirectory(path_); }

std::string findPlanc(const std::string &executable) {
  if (!executable.empty()) {
    std::string sibling = directoryOf(executable) + "/planc";
    if (isExecutableFile(sibling))
      return sibling;
  }
  const char *pathVar = std::getenv("PATH");
  std::stringstream dirs(pathVar ? pathVar : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/planc";
    if (isExecutableFile(candidate))
      return candidate;
  }
  return "";
}

bool isPlanFile(const std::string &file) {
  const std::string extension = ".plan";
  return file.size() > extension.size() &&
         file.compare(file.size() - extension.size(), extension.size(),
                      extension) == 0;
}

ScheduleInput::ScheduleInput(const std::string &file,
                             const std::string &executable,
                             const std::vector<std::string> &sets,
                             const std::vector<std::string> &plancFlags,
                             Diagnostics diagnostics) {
  if (!isPlanFile(file)) {
    path_ = file;
    return;
  }
  std::string planc = findPlanc(executable);
  if (planc.empty())
    throw PlanCompileError(file +
                           ": a .plan needs planc, which is neither next "
                           "to plan-run nor on PATH; compile it elsewhere "
                           "with `planc " +
                           file + " -o FILE.sched`");

  try {
    tempDir_ = std::make_unique<TemporaryDirectory>();
  } catch (const std::runtime_error &e) {
    throw PlanCompileError(e.what());
  }
  path_ = tempDir_->file(stemOf(file) + ".sched");
  compile(planc, file, sets, plancFlags, diagnostics);
}

void ScheduleInput::compile(const std::string &planc, const std::string &file,
                            const std::vector<std::string> &sets,
                            const std::vector<std::string> &plancFlags,
                            Diagnostics diagnostics) {
  std::vector<std::string> args{planc, file, "-o", path_};
  for (const std::string &set : sets)
    args.insert(args.end(), {"--set", set});
  args.insert(args.end(), plancFlags.begin(), plancFlags.end());
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Kept diagnostics come through a pipe on planc's standard error.
  bool keep = diagnostics == Diagnostics::OnlyIfItFails;
  int pipeFds[2] = {-1, -1};
  if (keep && ::pipe(pipeFds) != 0)
    throw PlanCompileError(std::string("cannot run planc: ") +
                           std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0)
    throw PlanCompileError(std::string("cannot run planc: ") +
                           std::strerror(errno));
  if (pid == 0) {
    if (keep) {
      ::dup2(pipeFds[1], STDERR_FILENO);
      ::close(pipeFds[0]);
      ::close(pipeFds[1]);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::string kept;
  if (keep) {
    ::close(pipeFds[1]);
    char chunk[4096];
    for (;;) {
      ssize_t n = ::read(pipeFds[0], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      kept.append(chunk, static_cast<size_t>(n));
    }
    ::close(pipeFds[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw PlanCompileError(
        kept + file + ": planc could not compile it (" + planc +
        (WIFEXITED(status)
             ? " exited with code " + std::to_string(WEXITSTATUS(status))
             : std::string(" was killed")) +
        ")");
}

ScheduleInput::~ScheduleInput() = default;

} // namespace plan::run
