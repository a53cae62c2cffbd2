//===- FilesTest.cpp - Atomic writes through links, refused targets -------===//

#include "Files.h"
#include "TempDir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

namespace plan::rt::support {
namespace {

using test::TempDir;

bool isSymlink(const std::string &path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

mode_t modeOf(const std::string &path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return st.st_mode & 07777;
}

TEST(WriteFileAtomic, WritesAndReplaces) {
  TempDir dir;
  writeFileAtomic(dir.file("a"), "first");
  EXPECT_EQ(readFile(dir.file("a")), "first");
  writeFileAtomic(dir.file("a"), "second");
  EXPECT_EQ(readFile(dir.file("a")), "second");
  // Nothing but the file is left in the directory.
  EXPECT_EQ(listDirectory(dir.path()), std::vector<std::string>{"a"});
}

TEST(WriteFileAtomic, WritesThroughSymbolicLinks) {
  TempDir dir;
  writeFileAtomic(dir.file("target"), "old");
  // A relative link, and a link to that link.
  ASSERT_EQ(::symlink("target", dir.file("link").c_str()), 0);
  ASSERT_EQ(::symlink(dir.file("link").c_str(), dir.file("link2").c_str()), 0);
  writeFileAtomic(dir.file("link2"), "new");
  EXPECT_TRUE(isSymlink(dir.file("link")));
  EXPECT_TRUE(isSymlink(dir.file("link2")));
  EXPECT_EQ(readFile(dir.file("target")), "new");
}

TEST(WriteFileAtomic, CreatesTheTargetOfADanglingLink) {
  TempDir dir;
  ASSERT_EQ(::symlink("made", dir.file("link").c_str()), 0);
  writeFileAtomic(dir.file("link"), "bytes");
  EXPECT_TRUE(isSymlink(dir.file("link")));
  EXPECT_EQ(readFile(dir.file("made")), "bytes");
}

TEST(WriteFileAtomic, KeepsThePermissionsOfAReplacedFile) {
  TempDir dir;
  writeFileAtomic(dir.file("a"), "first");
  ASSERT_EQ(::chmod(dir.file("a").c_str(), 0640), 0);
  writeFileAtomic(dir.file("a"), "second");
  EXPECT_EQ(modeOf(dir.file("a")), 0640u);
}

TEST(WriteFileAtomic, RefusesWhatIsNotARegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  try {
    writeFileAtomic(dir.file("fifo"), "bytes");
    FAIL() << "a FIFO was replaced";
  } catch (const FileError &e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file"),
              std::string::npos)
        << e.what();
  }
  struct stat st {};
  ASSERT_EQ(::lstat(dir.file("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // A device, through a link: /dev/null stays what it is.
  ASSERT_EQ(::symlink("/dev/null", dir.file("null").c_str()), 0);
  EXPECT_THROW(writeFileAtomic(dir.file("null"), "bytes"), FileError);
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(WriteFileAtomic, RefusesALinkLoop) {
  TempDir dir;
  ASSERT_EQ(::symlink("b", dir.file("a").c_str()), 0);
  ASSERT_EQ(::symlink("a", dir.file("b").c_str()), 0);
  EXPECT_THROW(writeFileAtomic(dir.file("a"), "bytes"), FileError);
}

} // namespace
} // namespace plan::rt::support
