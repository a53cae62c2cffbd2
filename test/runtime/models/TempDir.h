//===- TempDir.h - A scratch directory for one test ---------------*- C++
//-*-===//
//
// POSIX calls, not std::filesystem: libtorch.so exports its own copies of
// some std::filesystem symbols, which interpose on libstdc++'s and crash.
//
//===----------------------------------------------------------------------===//

#ifndef PLAN_TEST_RUNTIME_MODELS_TEMPDIR_H
#define PLAN_TEST_RUNTIME_MODELS_TEMPDIR_H

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <dirent.h>
#include <unistd.h>

namespace plan::rt::test {

/// A fresh directory under /tmp, removed with the files in it.
class TempDir {
public:
  TempDir() {
    char name[] = "/tmp/plan-test-XXXXXX";
    if (!::mkdtemp(name))
      throw std::runtime_error("mkdtemp failed");
    path_ = name;
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  ~TempDir() {
    if (DIR *d = ::opendir(path_.c_str())) {
      while (dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..")
          ::unlink((path_ + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

} // namespace plan::rt::test

#endif // PLAN_TEST_RUNTIME_MODELS_TEMPDIR_H
