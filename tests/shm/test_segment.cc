// Segment ownership, naming, and cleanup of a crashed job's leftovers.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/shm/node_alltoall.h"
#include "core/shm/segment.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::shm::test {
namespace {

std::vector<std::string> dev_shm_entries(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

bool exists(const std::string& name) { return access(("/dev/shm/" + name).c_str(), F_OK) == 0; }

// A prefix of our own so that concurrent test runs do not see each other.
std::string unique_prefix() { return "mlxa2atest" + std::to_string(getpid()); }

TEST(Segment, CreateAttachUnlink) {
  const std::string name = make_segment_name(unique_prefix(), "tag");
  Segment a;
  ASSERT_EQ(Segment::create(name, 8192, a), Status::ok);
  EXPECT_TRUE(exists(name));
  static_cast<char*>(a.data())[100] = 42;
  Segment b;
  ASSERT_EQ(Segment::attach(name, 8192, b), Status::ok);
  EXPECT_EQ(static_cast<char*>(b.data())[100], 42);
  Segment wrong;
  EXPECT_EQ(Segment::attach(name, 4096, wrong), Status::create_failed);
  Segment dup;
  EXPECT_EQ(Segment::create(name, 8192, dup), Status::create_failed);  // O_EXCL
  Segment moved = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  moved.unlink();
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(static_cast<char*>(moved.data())[100], 42);  // mapping outlives the name
}

TEST(Segment, DestructorUnlinksCreatedName) {
  const std::string name = make_segment_name(unique_prefix(), "");
  {
    Segment a;
    ASSERT_EQ(Segment::create(name, 4096, a), Status::ok);
    EXPECT_TRUE(exists(name));
  }
  EXPECT_FALSE(exists(name));
}

TEST(Segment, RemovesOnlyDeadCreatorsLeftovers) {
  const std::string prefix = unique_prefix();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // now a dead pid
  const std::string uid = std::to_string(getuid());
  const std::string dead = prefix + "-" + uid + "-" + std::to_string(child) + "-0";
  const std::string live = prefix + "-" + uid + "-" + std::to_string(getpid()) + "-77";
  for (const std::string& n : {dead, live}) {
    const int fd = shm_open(("/" + n).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << n;
    close(fd);
  }
  EXPECT_EQ(remove_stale_segments(prefix), 1);
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(live));
  shm_unlink(("/" + live).c_str());
}

TEST(Segment, ProcessAliveSeesZombiesAsDead) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  usleep(50000);  // it has exited but is not reaped: a zombie
  EXPECT_FALSE(process_alive(child));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_alive(child));
  EXPECT_TRUE(process_alive(getpid()));
}

// The name is unlinked when create() returns, so neither a live team nor a
// destroyed one leaves anything in /dev/shm.
TEST(NodeAlltoallSegment, NothingLeftInDevShm) {
  const std::string prefix = unique_prefix();
  const ForkResult res = run_forked(4, [&prefix](ForkBootstrap& boot) {
    Options o;
    o.name_prefix = prefix;
    o.job_tag = "job7";
    o.timeout_ms = 10000;
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(NodeAlltoall::create(boot, o, a2a), Status::ok);
    FT_CHECK(a2a->segment_name().find(prefix + "-") == 0 || boot.local_rank() != 0);
    FT_CHECK(dev_shm_entries(prefix).empty());
    char s[4] = {0, 1, 2, 3}, r[4];
    FT_CHECK_STATUS(a2a->run(s, r, 1), Status::ok);
    FT_CHECK(r[0] == boot.local_rank() && r[3] == boot.local_rank());
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
  EXPECT_TRUE(dev_shm_entries(prefix).empty());
}

}  // namespace
}  // namespace mlxa2a::shm::test
