// Sharing the leader's PD with the node's ranks (core/mlx5/shared_pd.h,
// fd_passing.h) over fakeverbs, without MPI: forked processes form one node
// with a pipe GroupBootstrap (fork_group.h).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/mlx5/fd_passing.h"
#include "core/shm/status.h"
#include "core/mlx5/shared_pd.h"
#include "tests/mlx5/fork_group.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

using shm::test::ForkBootstrap;

struct Outcome {
  Status status;
  std::string why;
  std::uint32_t pd_handle = 0;  // this member's pd()->handle on success
  bool imported = false;
};

// Runs SharedPd::setup on `n` forked members (member 0 leads); member
// `no_verbs` (if >= 0) loads a verbs library that does not exist. Each member
// checks that its result equals what `check` expects; member `no_memlock`
// (if >= 0) may pin nothing (RLIMIT_MEMLOCK 0). Returns exit codes.
std::vector<int> run_node(int n, const SharedPdOptions& opt, int no_verbs,
                          const std::function<int(int, const Outcome&)>& check,
                          int no_memlock = -1) {
  test::ForkGroupWiring wiring(n);
  const auto res = shm::test::run_forked(
      n,
      [&](ForkBootstrap& boot) {
        const int me = boot.local_rank();
        test::ForkGroup group(wiring, me);
        if (me == no_memlock) {
          const rlimit zero{0, 0};
          FT_CHECK(setrlimit(RLIMIT_MEMLOCK, &zero) == 0);
        }
        const Verbs* v =
            load_verbs(me == no_verbs ? "libmlxa2a-no-such-verbs.so.1" : "libibverbs.so.1");
        std::shared_ptr<Device> dev;
        std::string why;
        if (me == opt.leader) {
          FT_CHECK(v != nullptr);
          FT_CHECK_STATUS(Device::open(*v, NetOptions{}, 64, &dev, &why), Status::ok);
        }
        std::unique_ptr<SharedPd> shared;
        Outcome o;
        o.status = SharedPd::setup(v, group, dev, opt, &shared, &o.why);
        FT_CHECK((o.status == Status::ok) == (shared != nullptr));
        if (shared) {
          o.pd_handle = shared->pd()->handle;
          o.imported = shared->imported();
        }
        // Every member must see the same handle: gather them.
        std::vector<std::uint32_t> handles(static_cast<std::size_t>(n));
        FT_CHECK(group.allgather(&o.pd_handle, handles.data(), sizeof o.pd_handle));
        for (std::uint32_t h : handles) FT_CHECK(h == o.pd_handle);
        return check(me, o);
      },
      60);
  EXPECT_FALSE(res.hung);
  return res.exit_codes;
}

TEST(SharedPd, EveryRankImportsTheLeadersPd) {
  SharedPdOptions opt;
  opt.probe_registration = false;  // the hand-over alone
  for (int code : run_node(3, opt, -1, [](int me, const Outcome& o) {
         if (o.status != Status::ok) std::fprintf(stderr, "member %d: %s\n", me, o.why.c_str());
         FT_CHECK(o.status == Status::ok);
         FT_CHECK(o.pd_handle != 0);
         FT_CHECK(o.imported == (me != 0));
         return 0;
       })) {
    EXPECT_EQ(code, 0);
  }
}

TEST(SharedPd, LeaderOtherThanMemberZero) {
  SharedPdOptions opt;
  opt.leader = 2;
  opt.probe_registration = false;
  for (int code : run_node(3, opt, -1, [](int me, const Outcome& o) {
         FT_CHECK(o.status == Status::ok);
         FT_CHECK(o.imported == (me != 2));
         return 0;
       })) {
    EXPECT_EQ(code, 0);
  }
}

// fakeverbs models importer registrations (FIDELITY.md "One PD shared among
// processes"), as real mlx5 does: the probe registers a page on the imported
// PD on every member and the node agrees on ok.
TEST(SharedPd, ProbeRegistrationSucceedsOnEveryMember) {
  for (int code : run_node(3, SharedPdOptions{}, -1, [](int me, const Outcome& o) {
         if (o.status != Status::ok) std::fprintf(stderr, "member %d: %s\n", me, o.why.c_str());
         FT_CHECK(o.status == Status::ok);
         FT_CHECK(o.imported == (me != 0));
         return 0;
       })) {
    EXPECT_EQ(code, 0);
  }
}

// A provider or kernel may import the PD yet refuse registrations on it; here
// member 1 has RLIMIT_MEMLOCK 0 (fakeverbs enforces it per process: ENOMEM).
// The probe must catch the refusal and every member must agree on the staged
// path with that member's reason.
TEST(SharedPd, RegistrationRefusalIsAgreedOnEveryMember) {
  const std::vector<int> codes = run_node(
      3, SharedPdOptions{}, -1, [](int, const Outcome& o) {
        FT_CHECK(o.status == Status::unavailable);
        FT_CHECK(o.why.find("member 1: ibv_reg_mr on the imported PD refused") == 0);
        return 0;
      },
      /*no_memlock=*/1);
  for (int code : codes) EXPECT_EQ(code, 0);
}

TEST(SharedPd, MissingImportOnOneMemberIsAgreedWithoutWaiting) {
  SharedPdOptions opt;
  opt.timeout_ms = 60000;  // a member waiting for the hand-over would show as a hang
  for (int code : run_node(3, opt, 2, [](int, const Outcome& o) {
         FT_CHECK(o.status == Status::unavailable);
         FT_CHECK(o.why.find("member 2: ") == 0);
         FT_CHECK(o.why.find("libmlxa2a-no-such-verbs") != std::string::npos);
         return 0;
       })) {
    EXPECT_EQ(code, 0);
  }
}

// The fd goes only to the processes named; anyone else gets nothing.
TEST(FdPassing, OnlyAllowedProcessesReceiveTheDescriptor) {
  FdServer server;
  SocketName name;
  std::string why;
  ASSERT_TRUE(server.open(&name, &why)) << why;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "fd!", 3), 3);
  auto child = [&](bool allowed) {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    UniqueFd got;
    std::string w;
    if (!allowed) usleep(20000);  // let the member be served first, usually
    // The stranger inherited the listening socket across fork, so its connect
    // may sit in the backlog after serve() is done: bound its wait.
    const bool ok = receive_fd(name, allowed ? 5000 : 300, &got, &w);
    char buf[3] = {};
    const bool read_ok = ok && read(got.get(), buf, 3) == 3 && std::memcmp(buf, "fd!", 3) == 0;
    _exit(allowed ? (read_ok ? 0 : 1) : (ok ? 2 : 0));
  };
  const pid_t member = child(true);
  const pid_t stranger = child(false);
  ASSERT_TRUE(server.serve(p[0], 1, {member}, 5000, &why)) << why;
  int status = 0;
  ASSERT_EQ(waitpid(member, &status, 0), member);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(waitpid(stranger, &status, 0), stranger);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the stranger got the fd";
  close(p[0]);
  close(p[1]);
}

TEST(FdPassing, ServeTimesOutWhenNobodyComes) {
  FdServer server;
  SocketName name;
  std::string why;
  ASSERT_TRUE(server.open(&name, &why)) << why;
  EXPECT_FALSE(server.serve(0, 1, {getpid() + 1}, 50, &why));
  EXPECT_NE(why.find("timed out"), std::string::npos) << why;
}

}  // namespace
}  // namespace mlxa2a::mlx5
