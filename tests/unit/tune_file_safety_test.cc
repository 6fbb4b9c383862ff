// MLXA2A_TUNE_FILE never writes where it should not (issue 24): a root job
// may read and write it in a directory other users can write to.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/tune/tune_file.h"

namespace mlxa2a::core::tune {
namespace {

using C = Route;
// TuneFile::kMaxBytes, as the messages name it (spelt out so that this file
// also builds against the code before the limit, to show these tests fail there).
constexpr std::size_t kLimit = std::size_t{1} << 20;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  return st;
}

TuneFile decisions(Route path = C::copy) {
  TuneFile f;
  f.set(Layout{"ompi", 4, 1, 4, true}, 10, path);
  f.set(Layout{"mpich", 6, 3, 2, false}, 20, C::hier);
  return f;
}

class TuneFileSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/mlxa2a-tune-safety-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    dir_ = name;
    path_ = dir_ + "/decisions.txt";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::size_t entries_in_dir() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++n;
    return n;
  }

  std::string dir_, path_;
};

TEST_F(TuneFileSafety, SaveNeverFollowsALinkPlantedAtATemporaryName) {
  const std::string victim = dir_ + "/victim";
  write(victim, "precious\n");
  // The temporary's name used to be predictable: <path>.tmp.<pid>.
  const std::string planted = path_ + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), planted.c_str()), 0);
  std::string error;
  EXPECT_TRUE(decisions().save(path_, &error)) << error;
  EXPECT_EQ(read(victim), "precious\n");
  EXPECT_TRUE(S_ISLNK(lstat_of(planted).st_mode));
  EXPECT_TRUE(S_ISREG(lstat_of(path_).st_mode));
  const auto back = TuneFile::load(path_, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, decisions());
  EXPECT_EQ(entries_in_dir(), 3u);  // no temporary left behind
}

TEST_F(TuneFileSafety, ALinkAtThePathIsNeitherReadNorReplaced) {
  const std::string real = dir_ + "/real";
  write(real, decisions().format());
  ASSERT_EQ(::symlink(real.c_str(), path_.c_str()), 0);
  std::string error;
  EXPECT_FALSE(TuneFile::load(path_, &error));
  EXPECT_NE(error.find(path_ + ": is a symbolic link"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(decisions(C::cma).save(path_, &error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  EXPECT_TRUE(S_ISLNK(lstat_of(path_).st_mode));
  EXPECT_EQ(read(real), decisions().format());
}

TEST_F(TuneFileSafety, ADeviceIsNeitherReadNorReplaced) {
  std::string error;
  EXPECT_FALSE(TuneFile::load("/dev/null", &error));
  EXPECT_NE(error.find("/dev/null: is a character device"), std::string::npos) << error;
  // Our own null device: /dev/null itself is never put at risk.
  const std::string dev = dir_ + "/nulldev";
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod " << dev << ": " << std::strerror(errno)
                 << " (needs CAP_MKNOD); replacing a device is not checked";
  }
  error.clear();
  EXPECT_FALSE(decisions().save(dev, &error));
  EXPECT_NE(error.find("character device"), std::string::npos) << error;
  const struct stat st = lstat_of(dev);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_EQ(entries_in_dir(), 1u);
}

TEST_F(TuneFileSafety, AFileThatIsNoTuneFileIsLeftAsItIs) {
  write(path_, "precious user data\n");
  std::string error;
  EXPECT_FALSE(TuneFile::load(path_, &error));
  // The decisions a run made after ignoring the file.
  EXPECT_FALSE(decisions().save(path_, &error));
  EXPECT_NE(error.find("not a tune file"), std::string::npos) << error;
  EXPECT_EQ(read(path_), "precious user data\n");
  EXPECT_EQ(entries_in_dir(), 1u);
}

// Runs in a child (gtest's default "fast" death tests fork: the fixture's
// directory is the parent's, removed by its TearDown) with a deadline and a
// memory limit: the old code read these without end (or, for a FIFO, waited
// for a writer).
[[noreturn]] void load_endless(const std::string& path) {
  ::alarm(5);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  const rlimit data{std::size_t{1} << 30, std::size_t{1} << 30};
  ::setrlimit(RLIMIT_DATA, &data);
#endif
  std::string error;
  const bool loaded = TuneFile::load(path, &error).has_value();
  std::exit(!loaded && error.find("not a regular file") != std::string::npos ? 0 : 1);
}

TEST_F(TuneFileSafety, EndlessSourcesAreRefusedAtOnce) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), std::string("/dev/urandom"), fifo}) {
    EXPECT_EXIT(load_endless(path), ::testing::ExitedWithCode(0), "") << path;
  }
}

TEST_F(TuneFileSafety, AFileOverTheLimitIsNeitherReadNorReplaced) {
  // A comment line of exactly kLimit bytes is read; one byte more is not.
  const std::string at_limit = "#" + std::string(kLimit - 2, 'x') + "\n";
  write(path_, at_limit);
  std::string error;
  EXPECT_TRUE(TuneFile::load(path_, &error)) << error;
  write(path_, at_limit + "\n");
  EXPECT_FALSE(TuneFile::load(path_, &error));
  EXPECT_NE(error.find("larger than 1048576 bytes"), std::string::npos) << error;
  EXPECT_FALSE(decisions().save(path_, &error));
  EXPECT_NE(error.find("larger than 1048576 bytes"), std::string::npos) << error;
  EXPECT_EQ(read(path_), at_limit + "\n");
}

TEST_F(TuneFileSafety, UnchangedDecisionsAreNotRewritten) {
  std::string error;
  // Nothing decided, nothing there: nothing is created.
  EXPECT_TRUE(TuneFile{}.save(path_, &error)) << error;
  EXPECT_EQ(entries_in_dir(), 0u);
  ASSERT_TRUE(decisions().save(path_, &error)) << error;
  const struct stat before = lstat_of(path_);
  auto loaded = TuneFile::load(path_, &error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_TRUE(loaded->save(path_, &error)) << error;
  TuneFile reordered;  // the same decisions in another order
  reordered.set(Layout{"mpich", 6, 3, 2, false}, 20, C::hier);
  reordered.set(Layout{"ompi", 4, 1, 4, true}, 10, C::copy);
  EXPECT_TRUE(reordered.save(path_, &error)) << error;
  const struct stat after = lstat_of(path_);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  // A changed decision is written.
  loaded->set(Layout{"ompi", 4, 1, 4, true}, 10, C::cma);
  EXPECT_TRUE(loaded->save(path_, &error)) << error;
  EXPECT_NE(lstat_of(path_).st_ino, before.st_ino);
  const auto back = TuneFile::load(path_, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->lookup(Layout{"ompi", 4, 1, 4, true}, 10), C::cma);
}

TEST_F(TuneFileSafety, AFileChangedSinceItWasReadIsLeftAlone) {
  std::string error;
  auto from_nothing = TuneFile::load(path_, &error);
  ASSERT_TRUE(from_nothing) << error;
  write(path_, decisions(C::line).format());  // another job, meanwhile
  from_nothing->set(Layout{"ompi", 2, 1, 2, false}, 3, C::copy);
  EXPECT_FALSE(from_nothing->save(path_, &error));
  EXPECT_NE(error.find("was created since"), std::string::npos) << error;
  EXPECT_EQ(read(path_), decisions(C::line).format());

  auto from_file = TuneFile::load(path_, &error);
  ASSERT_TRUE(from_file) << error;
  const std::string other = dir_ + "/other";
  write(other, decisions(C::pmpi).format());
  ASSERT_EQ(std::rename(other.c_str(), path_.c_str()), 0);
  from_file->set(Layout{"ompi", 2, 1, 2, false}, 3, C::copy);
  EXPECT_FALSE(from_file->save(path_, &error));
  EXPECT_NE(error.find("was replaced or removed since"), std::string::npos) << error;
  EXPECT_EQ(read(path_), decisions(C::pmpi).format());
}

// mkstemp creates 0600; the file gets what the user's umask allows, as
// open(O_CREAT, 0666) would give.
TEST_F(TuneFileSafety, ModeFollowsTheUmask) {
  const mode_t saved = ::umask(027);
  std::string error;
  EXPECT_TRUE(decisions().save(path_, &error)) << error;
  EXPECT_EQ(lstat_of(path_).st_mode & 07777, 0640u);
  ::umask(0);
  EXPECT_TRUE(decisions(C::cma).save(path_, &error)) << error;
  EXPECT_EQ(lstat_of(path_).st_mode & 07777, 0666u);
  ::umask(saved);
}

}  // namespace
}  // namespace mlxa2a::core::tune
