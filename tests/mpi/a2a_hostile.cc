// Hostile input (issue 11): erroneous MPI_Alltoall arguments must give the
// error class the MPI alone gives, never a crash, wrong data or a hang, and
// the communicator must work for correct calls afterwards. Run under mpirun
// with or without mlxa2a (tests/mpi/run_mpi_test.py compares the two runs);
// prints
//   CALLS <rank> <n>             MPI_Alltoall calls this rank made
//   ERRCLASS <case> <rank> <cls> error class each rank saw (sorted by the runner)
//   RESULT PASS|FAIL             rank 0, after an allreduce of failures
// Usage: a2a_hostile noop|sizes|inplace|local-mismatch|cross-mismatch
//   noop            no MPI_Alltoall (start-up behaviour: warnings, clean-up)
//   sizes           correct calls from 1 B to 1 MiB per peer on world and a
//                   dup (run with extreme MLXA2A_SHM_SLOT_SIZE values)
//   inplace         MPI_IN_PLACE as the receive buffer (and in both places),
//                   then correct calls
//   local-mismatch  send size != receive size on every rank, both ways, then
//                   correct calls
//   cross-mismatch  the last rank's size differs from the others' (line mode,
//                   slots, several rounds, CMA), then correct calls
//   cross-mismatch-every  cross-mismatch, and with mlxa2a loaded every rank
//                   must get MPI_ERR_TRUNCATE (for teams whose engine serves
//                   every size, e.g. MLXA2A_TUNE=shm or rdma)
//   mixed-decisions  sizes that the rules send down different paths on
//                   different ranks (run with MLXA2A_TUNE sending 8 B per peer
//                   to the engine and 256 B to PMPI), and one rank whose own
//                   send and receive sizes differ while the others' agree;
//                   with mlxa2a loaded every rank must get MPI_ERR_TRUNCATE;
//                   and correct calls whose send type differs from the
//                   receive type (same size) on odd ranks must succeed
//   cross-mismatch-tuned  the same during measured selection's trials (run
//                   with MLXA2A_TUNE_SAMPLES > 0), then the trials finish
//   cross-mismatch-quiet  cross-mismatch-tuned, then (pmpi made to win) on a
//                   quiet multi-node team: mismatches judged by PMPI alone,
//                   a held size class measured afterwards
//   cross-mismatch-quiet-memo  then a class memoised while quiet probed
//                   again after quiet
//   mixed-nodes     mixed decisions on 4 ranks in 2 (virtual) nodes of 2, run
//                   with MLXA2A_TUNE sending 8 B per peer to the engine and
//                   256 B to PMPI: the odd ranks are a non-leader (3), a
//                   leader (2), a whole node (2, 3), both ways, on a team
//                   already set up and as the very first call of a fresh
//                   MPI_Comm_dup; every rank returns (the MPI's error class
//                   where it judges the call, or MPI_ERR_TRUNCATE) and the
//                   next correct calls of both sizes are right
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_calls = 0;
int g_failures = 0;
// cross-mismatch-every with mlxa2a loaded: every rank must get MPI_ERR_TRUNCATE.
bool g_every_rank_errs = false;

bool shim_loaded() {
  const char* p = std::getenv("LD_PRELOAD");
  return p != nullptr && std::strstr(p, "mlxa2a") != nullptr;
}

int a2a(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c) {
  ++g_calls;
  return MPI_Alltoall(s, sc, st, r, rc, rt, c);
}

int value(int from, int to, int i) { return from * 1000003 + to * 1009 + i; }

// One correct alltoall of `count` ints per peer; counts wrong elements.
// retyped: odd ranks send `count` ints as count / 2 pairs (a derived type;
// same signature, so a correct call).
void correct_call(MPI_Comm comm, int count, const char* what, bool retyped = false) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::size_t n = static_cast<std::size_t>(count) * static_cast<std::size_t>(size);
  std::vector<int> send(n), recv(n, -1);
  for (int p = 0; p < size; ++p)
    for (int i = 0; i < count; ++i) send[static_cast<std::size_t>(p) * count + i] = value(rank, p, i);
  MPI_Datatype pair = MPI_INT;
  if (retyped && rank % 2 == 1) {
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
  }
  const int rc = a2a(send.data(), pair == MPI_INT ? count : count / 2, pair, recv.data(), count,
                     MPI_INT, comm);
  if (pair != MPI_INT) MPI_Type_free(&pair);
  int wrong = rc != MPI_SUCCESS;
  for (int p = 0; p < size && !wrong; ++p)
    for (int i = 0; i < count; ++i)
      if (recv[static_cast<std::size_t>(p) * count + i] != value(p, rank, i)) ++wrong;
  if (wrong) {
    std::printf("rank %d: %s: %d ints per peer: rc=%d, wrong data\n", rank, what, count, rc);
    ++g_failures;
  }
}

void report(const char* what, MPI_Comm comm, int rc) {
  int rank = 0, cls = MPI_SUCCESS;
  MPI_Comm_rank(comm, &rank);
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  std::printf("ERRCLASS %s %d %d\n", what, rank, cls);
}

void sizes(MPI_Comm world) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(world, &dup);
  for (int count : {1, 16, 64, 1024, 16384, 262144}) {  // 4 B .. 1 MiB per peer
    correct_call(world, count, "world");
    correct_call(dup, count, "dup");
  }
  MPI_Comm_free(&dup);
}

void inplace(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<int> buf(static_cast<std::size_t>(size) * 64, 7);
  for (int count : {1, 64}) {  // line mode and the slots
    const std::string c = std::to_string(count);
    report(("inplace_recv_" + c).c_str(), comm,
           a2a(buf.data(), count, MPI_INT, MPI_IN_PLACE, count, MPI_INT, comm));
    report(("inplace_both_" + c).c_str(), comm,
           a2a(MPI_IN_PLACE, count, MPI_INT, MPI_IN_PLACE, count, MPI_INT, comm));
    correct_call(comm, count, "after MPI_IN_PLACE as receive buffer");
  }
}

void local_mismatch(MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<int> send(static_cast<std::size_t>(size) * 128, 3);
  std::vector<int> recv(static_cast<std::size_t>(size) * 128, 0);
  // Send more than the receiver expects: truncation; a byte count that is not
  // the receive size in other types too. Sending less is erroneous as well,
  // but MPI may accept it: whatever it does, mlxa2a must do the same.
  report("send_4_recv_2", comm, a2a(send.data(), 4, MPI_INT, recv.data(), 2, MPI_INT, comm));
  correct_call(comm, 2, "after local mismatch");
  report("send_64_recv_8", comm, a2a(send.data(), 64, MPI_INT, recv.data(), 8, MPI_INT, comm));
  correct_call(comm, 64, "after local mismatch");
  report("send_3_bytes_recv_1_int", comm,
         a2a(send.data(), 3, MPI_BYTE, recv.data(), 1, MPI_INT, comm));
  correct_call(comm, 1, "after local mismatch");
  // Aliased buffers are erroneous: the MPI judges them.
  report("aliased", comm, a2a(recv.data(), 2, MPI_INT, recv.data(), 2, MPI_INT, comm));
  correct_call(comm, 2, "after aliased buffers");
}

// The last rank calls with `odd` ints per peer, the others with `count`
// (each rank's send and receive sizes agree): mismatched across ranks. The
// MPI reports MPI_ERR_TRUNCATE where a message is longer than the receive
// buffer and may succeed elsewhere; mlxa2a must end the call on every rank
// in bounded time (the runner's timeout), never report success with wrong
// data where the MPI errs, and the communicator must work afterwards. So each
// rank prints whether it erred, and the program checks that some rank did
// (with TRUNCATE or OTHER).
// One call where the last rank has `odd` ints per peer and the others
// `count`; checks the outcome as described above.
// odd_ranks: the ranks called with `odd` (bits; 0: the last rank).
void mismatched_call(MPI_Comm comm, int count, int odd, unsigned odd_ranks = 0) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (odd_ranks == 0) odd_ranks = 1u << (size - 1);
  const int mine = (odd_ranks >> rank) & 1u ? odd : count;
  std::vector<int> send(static_cast<std::size_t>(size) * mine + 1, rank);
  std::vector<int> recv(static_cast<std::size_t>(size) * mine + 1, -1);
  const int rc = a2a(send.data(), mine, MPI_INT, recv.data(), mine, MPI_INT, comm);
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  if (cls != MPI_SUCCESS && cls != MPI_ERR_TRUNCATE && cls != MPI_ERR_OTHER) {
    std::printf("rank %d: %d vs %d ints: error class %d\n", rank, count, odd, cls);
    ++g_failures;
  }
  if (g_every_rank_errs && cls != MPI_ERR_TRUNCATE) {
    std::printf("rank %d: %d vs %d ints: error class %d, not MPI_ERR_TRUNCATE\n", rank, count,
                odd, cls);
    ++g_failures;
  }
  int erred = cls != MPI_SUCCESS, any = 0;
  MPI_Allreduce(&erred, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any) {
    if (rank == 0) std::printf("%d vs %d ints per peer: no rank got an error\n", count, odd);
    ++g_failures;
  }
}

void cross_mismatch(MPI_Comm comm) {
  const struct {
    int count, odd;
  } cases[] = {{2, 4}, {4, 2}, {1, 64}, {64, 80}, {16384, 8192}};
  // (0 against a size hangs both MPIs alone; tests/shm covers it for mlxa2a.)
  for (const auto& c : cases) {
    mismatched_call(comm, c.count, c.odd);
    correct_call(comm, c.count, "after a cross-rank mismatch");
    correct_call(comm, 3, "after a cross-rank mismatch");
  }
}

// The last rank sends `odd` ints per peer but expects `count`, like the
// others, which send `count`: only its own arguments are wrong. The MPI
// reports MPI_ERR_TRUNCATE at least where more arrives than expected.
[[maybe_unused]] void one_local_mismatch(MPI_Comm comm, int count, int odd) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int sends = rank == size - 1 ? odd : count;
  std::vector<int> send(static_cast<std::size_t>(size) * sends, rank);
  std::vector<int> recv(static_cast<std::size_t>(size) * count, -1);
  const int rc = a2a(send.data(), sends, MPI_INT, recv.data(), count, MPI_INT, comm);
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  if (g_every_rank_errs && cls != MPI_ERR_TRUNCATE) {
    std::printf("rank %d: sends %d, all receive %d ints: error class %d\n", rank, odd, count, cls);
    ++g_failures;
  }
  int erred = cls != MPI_SUCCESS, any = 0;
  MPI_Allreduce(&erred, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any) {
    if (rank == 0) std::printf("one rank sends %d, all receive %d: no rank erred\n", odd, count);
    ++g_failures;
  }
}

// Run with MLXA2A_TUNE sending sizes below 256 B per peer to the engine and
// the rest to PMPI: the ranks of one call take different paths.
void mixed_decisions(MPI_Comm comm) {
  for (int round = 0; round < 2; ++round) {  // the second time the repeat memo is armed
    mismatched_call(comm, 2, 64);
    correct_call(comm, 2, "after mixed decisions");
    mismatched_call(comm, 64, 2);
    correct_call(comm, 64, "after mixed decisions");
    // Equal sizes, other send type on odd ranks, a size the rules send to
    // PMPI beside the engine's size check: the check must see equal sizes
    // (it saw bytes + 1 and failed the call with MPI_ERR_TRUNCATE).
    correct_call(comm, 64, "send type differs from the receive type", true);
#if !defined(OPEN_MPI)
    // (Open MPI alone hangs here: the odd rank fails its local check at once
    // and the others wait for it.)
    one_local_mismatch(comm, 2, 4);  // the odd rank to PMPI, the others to the engine
    correct_call(comm, 2, "after a local mismatch on one rank");
#endif
  }
}

// See mixed-nodes in the header. 8 B per peer goes to the engine, 256 B to
// PMPI (MLXA2A_TUNE), so in each mismatched call some ranks are in each.
void mixed_nodes(MPI_Comm comm) {
  const unsigned placements[] = {1u << 3, 1u << 2, (1u << 2) | (1u << 3)};
  for (const unsigned odd : placements) {
    for (int round = 0; round < 2; ++round) {  // the second time the repeat memo is armed
      mismatched_call(comm, 2, 64, odd);
      correct_call(comm, 2, "after mixed decisions");
      correct_call(comm, 64, "after mixed decisions");
      mismatched_call(comm, 64, 2, odd);
      correct_call(comm, 64, "after mixed decisions");
      correct_call(comm, 2, "after mixed decisions");
    }
    // The first call on a communicator: its team's set-up is collective -
    // derived from comm's team (a dup of it), or built anew (a dup of
    // MPI_COMM_WORLD, which never ran an alltoall).
    for (const MPI_Comm parent : {comm, MPI_COMM_WORLD}) {
      for (const bool engine_first : {true, false}) {
        MPI_Comm fresh = MPI_COMM_NULL;
        MPI_Comm_dup(parent, &fresh);
        MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
        mismatched_call(fresh, engine_first ? 2 : 64, engine_first ? 64 : 2, odd);
        correct_call(fresh, 2, "after a mixed first call");
        correct_call(fresh, 64, "after a mixed first call");
        MPI_Comm_free(&fresh);
      }
    }
  }
}

// Under measured selection (MLXA2A_TUNE_SAMPLES > 0): the two sizes of a
// mismatched call lie in different size classes, whose trials are at
// different candidates - the others' class has had `shift` more correct calls
// each round, so over the rounds it meets the last rank's engine path with
// every candidate, pmpi included. Then enough correct calls of both classes
// to finish their trials and agree: a mismatch that advanced one rank's
// trials would make the ranks agree at different calls.
void cross_mismatch_tuned(MPI_Comm comm) {
  for (int shift = 0; shift < 6; ++shift) {
    for (int i = 0; i < shift; ++i) correct_call(comm, 2, "before a mismatch in trials");
    mismatched_call(comm, 2, 4);
  }
  for (int i = 0; i < 80; ++i) {
    correct_call(comm, 2, "trials after mismatches");
    correct_call(comm, 4, "trials after mismatches");
  }
}

// Then, with pmpi made to win (MLXA2A_DEBUG_TUNE_TIMES), both classes are
// decided pmpi and the multi-node team is quiet (docs/tune.md "Quiet PMPI"):
// its PMPI calls skip the engine's check. Mismatched calls while quiet, the
// odd size a class never met (held on PMPI) on a non-leader, then on a
// leader: every rank returns with the MPI's verdict. Then the held class is
// measured (quiet ends at a boundary, the same call on every rank), decided,
// and quiet resumes; every correct call's data is checked.
void cross_mismatch_quiet(MPI_Comm comm) {
  cross_mismatch_tuned(comm);
  for (int i = 0; i < 20; ++i) correct_call(comm, 2, "quiet");
  mismatched_call(comm, 2, 32);
  mismatched_call(comm, 2, 32, 1u << 2);
  for (int i = 0; i < 200; ++i) correct_call(comm, i & 1 ? 2 : 32, "after mismatches while quiet");
}

// Then a class met while quiet (held, then measured, decided pmpi: quiet
// again) whose calls are memoised while quiet; a new size held; the
// boundary ends quiet, and the memoised class must be probed again (run
// with times close enough for probes every ~100 calls): its memo ends at
// the boundary (docs/tune.md "Quiet PMPI").
void quiet_memo(MPI_Comm comm) {
  cross_mismatch_quiet(comm);
  for (int i = 0; i < 140; ++i) correct_call(comm, 64, "a class met while quiet");
  correct_call(comm, 16, "a class held while quiet");
  for (int i = 0; i < 400; ++i) correct_call(comm, 64, "memoised while quiet, after quiet");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "";
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // Open MPI reports some argument errors on MPI_COMM_WORLD's handler.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // A team that already ran a call (the repeat path is armed) must not be
  // fooled by erroneous arguments either.
  if (mode != "noop") correct_call(comm, 1, "warm-up");
  if (mode == "noop") {
    // No MPI_Alltoall at all: what mlxa2a does at start-up alone.
  } else if (mode == "sizes") {
    sizes(comm);
  } else if (mode == "inplace") {
    inplace(comm);
  } else if (mode == "local-mismatch") {
    local_mismatch(comm);
  } else if (mode == "cross-mismatch") {
    cross_mismatch(comm);
  } else if (mode == "cross-mismatch-every") {
    g_every_rank_errs = shim_loaded();
    cross_mismatch(comm);
  } else if (mode == "mixed-decisions") {
    g_every_rank_errs = shim_loaded();
    mixed_decisions(comm);
  } else if (mode == "mixed-nodes") {
    mixed_nodes(comm);
  } else if (mode == "cross-mismatch-tuned") {
    cross_mismatch_tuned(comm);
  } else if (mode == "cross-mismatch-quiet") {
    cross_mismatch_quiet(comm);
  } else if (mode == "cross-mismatch-quiet-memo") {
    quiet_memo(comm);
  } else {
    if (rank == 0) std::printf("unknown mode '%s'\n", mode.c_str());
    ++g_failures;
  }
  MPI_Comm_free(&comm);
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", rank, g_calls);
  if (rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  MPI_Finalize();
  return 0;
}
