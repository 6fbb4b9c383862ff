// Segment ownership, naming, and cleanup of a crashed job's leftovers.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

// A node engine under `prefix`, job tag "job7" (the tests' segment names).
Status create_job7(ForkBootstrap& boot, const std::string& prefix,
                   std::unique_ptr<NodeAlltoall>* out, const std::string& hugepages = "off") {
  Options o;
  o.hugepages = hugepages;
  o.name_prefix = prefix;
  o.job_tag = "job7";
  o.timeout_ms = 10000;
  return NodeAlltoall::create(boot, o, *out);
}

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

pid_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  if (child > 0) waitpid(child, nullptr, 0);
  return child;
}

void plant(const std::string& name) {
  const int fd = shm_open(("/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << name;
  close(fd);
}

// Another user's file of a matching name, dead pid or not, is not ours to
// remove (the old sweep unlinked it: as root, or had the name been ours).
TEST(Segment, StaleCleanupLeavesOtherUsersFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string prefix = unique_prefix();
  const pid_t child = dead_pid();
  ASSERT_GT(child, 0);
  const std::string head = prefix + "-" + std::to_string(getuid()) + "-" + std::to_string(child);
  const std::string theirs = head + "-0-theirs", ours = head + "-1-ours";
  plant(theirs);
  plant(ours);
  ASSERT_EQ(chown(("/dev/shm/" + theirs).c_str(), 65534, 65534), 0);
  EXPECT_EQ(remove_stale_segments(prefix), 1);
  EXPECT_TRUE(exists(theirs));
  EXPECT_FALSE(exists(ours));
  shm_unlink(("/" + theirs).c_str());
}

// A symlink of a matching name is neither followed nor removed: only a
// regular file is judged a leftover (the old sweep unlinked the link).
TEST(Segment, StaleCleanupIgnoresSymlinks) {
  const std::string prefix = unique_prefix();
  const pid_t child = dead_pid();
  ASSERT_GT(child, 0);
  const std::string target = prefix + "target";
  plant(target);
  const std::string link =
      prefix + "-" + std::to_string(getuid()) + "-" + std::to_string(child) + "-0-link";
  ASSERT_EQ(symlink(("/dev/shm/" + target).c_str(), ("/dev/shm/" + link).c_str()), 0);
  EXPECT_EQ(remove_stale_segments(prefix), 0);
  struct stat st {};
  EXPECT_EQ(lstat(("/dev/shm/" + link).c_str(), &st), 0) << "the symlink was removed";
  EXPECT_TRUE(exists(target));
  unlink(("/dev/shm/" + link).c_str());
  shm_unlink(("/" + target).c_str());
}

// Names end in 64 random bits after the sequence number, so nobody can
// create the next ones in advance. (Parsed by hand: std::regex trips GCC 12's
// -Wmaybe-uninitialized under ASan at -O2, and warnings are errors.)
struct NameParts {
  bool ok = false;
  unsigned long seq = 0;
  std::string random;
};
NameParts parse_name(const std::string& name, const std::string& head, const std::string& tail) {
  NameParts p;
  if (name.size() < head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0) {
    return p;
  }
  const std::string mid = name.substr(head.size(), name.size() - head.size() - tail.size());
  const std::size_t dash = mid.find('-');
  if (dash == 0 || dash == std::string::npos) return p;
  const std::string seq = mid.substr(0, dash);
  p.random = mid.substr(dash + 1);
  if (seq.find_first_not_of("0123456789") != std::string::npos || p.random.size() != 16 ||
      p.random.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return p;
  }
  p.seq = std::stoul(seq);
  p.ok = true;
  return p;
}

TEST(Segment, NamesHaveARandomPart) {
  const std::string prefix = unique_prefix();
  const std::string a = make_segment_name(prefix, "tag"), b = make_segment_name(prefix, "tag");
  const std::string head =
      prefix + "-" + std::to_string(getuid()) + "-" + std::to_string(getpid()) + "-";
  const NameParts pa = parse_name(a, head, "-tag"), pb = parse_name(b, head, "-tag");
  ASSERT_TRUE(pa.ok) << a;
  ASSERT_TRUE(pb.ok) << b;
  EXPECT_EQ(pb.seq, pa.seq + 1);
  EXPECT_NE(pa.random, pb.random);
}

// A local user who plants <prefix>-<uid>-<pid>-<seq> for the next sequence
// numbers (all a node segment tries) no longer makes the team fall back: with
// the old, predictable names create() failed with Status::create_failed.
TEST(NodeAlltoallSegment, PlantedPredictableNamesDoNotBlockCreation) {
  const std::string prefix = unique_prefix();
  const ForkResult res = run_forked(2, [&prefix](ForkBootstrap& boot) {
    if (boot.local_rank() == 0) {
      // The sequence number the next name gets, as the old scheme spelled it.
      const std::string probe = make_segment_name(prefix, "");
      const std::string head = prefix + "-" + std::to_string(getuid()) + "-" +
                               std::to_string(getpid()) + "-";
      const unsigned long next = std::stoul(probe.substr(head.size())) + 1;
      for (unsigned long seq = next; seq < next + 16; ++seq) {
        for (const std::string& tag : {std::string(), std::string("-job7")}) {
          const std::string n = head + std::to_string(seq) + tag;
          const int fd = shm_open(("/" + n).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
          FT_CHECK(fd >= 0);
          close(fd);
        }
      }
    }
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(create_job7(boot, prefix, &a2a), Status::ok);
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
  const std::vector<std::string> planted = dev_shm_entries(prefix);
  EXPECT_EQ(planted.size(), 32u);
  for (const std::string& n : planted) shm_unlink(("/" + n).c_str());
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
    std::unique_ptr<NodeAlltoall> a2a;
    FT_CHECK_STATUS(create_job7(boot, prefix, &a2a), Status::ok);
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

// MLXA2A_NET_HUGEPAGES's choice (issue 39, item 6) from the system's facts.
TEST(Pages, ChoiceFollowsTheModeAndTheSystem) {
  const PageFacts none = parse_page_facts("HugePages_Total: 0\nHugePages_Free: 0\n"
                                          "Hugepagesize: 2048 kB\n",
                                          "always within_size advise [never] deny force\n");
  EXPECT_EQ(none.hugepage_bytes, 2u << 20);
  EXPECT_FALSE(none.shmem_thp);
  const PageFacts some = parse_page_facts("HugePages_Free:       3\nHugepagesize:    2048 kB\n",
                                          "always within_size [advise] never deny force\n");
  EXPECT_EQ(some.hugepages_free, 3u);
  EXPECT_TRUE(some.shmem_thp);
  EXPECT_EQ(choose_pages("auto", 4u << 20, none), Pages::normal);
  EXPECT_EQ(choose_pages("auto", 6u << 20, some), Pages::hugetlb);          // 3 pages
  EXPECT_EQ(choose_pages("auto", (6u << 20) + 1, some), Pages::thp);        // 4 needed
  EXPECT_EQ(choose_pages("off", 1, some), Pages::normal);
  EXPECT_EQ(choose_pages("thp", 1, none), Pages::thp);
  EXPECT_EQ(choose_pages("hugetlb", 1, none), Pages::hugetlb);
}

// A memfd segment (the hugetlb path without MFD_HUGETLB, which needs pages
// this machine may not have): another process attaches through
// /proc/<pid>/fd/<fd> and sees the creator's bytes; once the creator closes
// its descriptor (unlink()), nobody new can attach.
TEST(Segment, MemfdSegmentIsAttachedThroughProc) {
  Segment a;
  ASSERT_EQ(Segment::create_memfd("mlxa2atest-memfd", 10000, 0, 4096, a), Status::ok);
  ASSERT_EQ(a.name().rfind("memfd:" + std::to_string(getpid()) + ":", 0), 0u);
  static_cast<char*>(a.data())[9999] = 7;
  const std::string name = a.name();
  const pid_t child = fork();
  if (child == 0) {
    Segment b;
    const bool ok = Segment::attach(name, 10000, b) == Status::ok &&
                    static_cast<char*>(b.data())[9999] == 7;
    if (ok) static_cast<char*>(b.data())[0] = 9;
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  waitpid(child, &status, 0);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(static_cast<char*>(a.data())[0], 9);
  a.unlink();
  Segment late;
  EXPECT_EQ(Segment::attach(name, 10000, late), Status::create_failed);
  EXPECT_EQ(static_cast<char*>(a.data())[9999], 7);  // the mapping outlives the descriptor
}

// Huge pages asked for: taken where the system has them free, else the
// segment falls back (thp, 4k) instead of failing.
TEST(Segment, HugetlbIsTakenWhenFreeElseFallsBack) {
  const std::string name = make_segment_name(unique_prefix(), "huge");
  Segment a;
  ASSERT_EQ(Segment::create(name, 8192, a, Pages::hugetlb), Status::ok);
  const PageFacts f = read_page_facts();
  if (f.hugepage_bytes != 0 && f.hugepages_free > 0) {
    EXPECT_EQ(a.pages(), Pages::hugetlb);
  } else {
    EXPECT_NE(a.pages(), Pages::hugetlb);
    EXPECT_TRUE(a.pages() == Pages::normal || f.shmem_thp);  // thp only where it may work
  }
  Segment b;
  ASSERT_EQ(Segment::attach(a.name(), 8192, b, a.pages() == Pages::thp), Status::ok);
  static_cast<char*>(a.data())[8191] = 5;
  EXPECT_EQ(static_cast<char*>(b.data())[8191], 5);
}

// Every rank of a node attaches whatever pages rank 0 asked for and got,
// and the engine's results are the same.
TEST(NodeAlltoallSegment, EveryPagesModeServesTheSameResults) {
  for (const char* mode : {"off", "thp", "hugetlb", "auto"}) {
    const std::string prefix = unique_prefix();
    const ForkResult res = run_forked(3, [&](ForkBootstrap& boot) {
      std::unique_ptr<NodeAlltoall> a2a;
      FT_CHECK_STATUS(create_job7(boot, prefix, &a2a, mode), Status::ok);
      char s[3], r[3];
      for (int i = 0; i < 3; ++i) s[i] = static_cast<char>(boot.local_rank() * 3 + i);
      FT_CHECK_STATUS(a2a->run(s, r, 1), Status::ok);
      for (int i = 0; i < 3; ++i) FT_CHECK(r[i] == static_cast<char>(i * 3 + boot.local_rank()));
      return 0;
    });
    EXPECT_FALSE(res.hung) << mode;
    for (int code : res.exit_codes) EXPECT_EQ(code, 0) << mode;
    EXPECT_TRUE(dev_shm_entries(prefix).empty()) << mode;
  }
}

}  // namespace
}  // namespace mlxa2a::shm::test
