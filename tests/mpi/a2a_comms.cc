// a2a_comms: MPI_Alltoall on every kind of communicator an application can
// hold, and with datatypes whose layout only the MPI library knows, each
// result checked against a formula. Intercommunicators (and splits of them)
// must reach PMPI and still be right; intracommunicators the MPI builds
// without our MPI_Comm_split (merge, create, create_group, split_type, a
// distributed graph) get their teams at first use; MPI_BOTTOM with absolute
// addresses, a negative lower bound and differing send and receive types must
// be absorbed locally. Prints the lines tests/mpi/run_mpi_test.py reads:
//   CALLS <rank> <n>   RESULT PASS|FAIL
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

int g_calls = 0;
int g_failures = 0;
int g_world_rank = 0;

#define CHECK(cond, what)                                                                \
  do {                                                                                   \
    if (!(cond) && g_failures++ < 10) {                                                  \
      std::fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", g_world_rank, __FILE__, __LINE__, \
                   what);                                                                \
    }                                                                                    \
  } while (0)

int a2a(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c) {
  ++g_calls;
  return MPI_Alltoall(s, sc, st, r, rc, rt, c);
}

int value(int src, int dst, int k, int salt) { return src * 1000 + dst * 10 + k + salt * 100000; }

// Three ints per peer on an intracommunicator.
void intra_case(MPI_Comm comm, int salt, const char* what) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<int> send(3 * size), recv(3 * size, -1);
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < 3; ++k) send[3 * p + k] = value(rank, p, k, salt);
  }
  CHECK(a2a(send.data(), 3, MPI_INT, recv.data(), 3, MPI_INT, comm) == MPI_SUCCESS, what);
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < 3; ++k) CHECK(recv[3 * p + k] == value(p, rank, k, salt), what);
  }
}

// One int per remote rank on an intercommunicator; `remote_world` maps a
// remote rank to its world rank, which is what it sends as `src`.
template <class F>
void inter_case(MPI_Comm inter, F remote_world, int salt, const char* what) {
  int rank = 0, remote = 0;
  MPI_Comm_rank(inter, &rank);
  MPI_Comm_remote_size(inter, &remote);
  std::vector<int> send(remote), recv(remote, -1);
  for (int p = 0; p < remote; ++p) send[p] = value(g_world_rank, p, 0, salt);
  CHECK(a2a(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, inter) == MPI_SUCCESS, what);
  for (int p = 0; p < remote; ++p) CHECK(recv[p] == value(remote_world(p), rank, 0, salt), what);
}

void intercomm_cases(int world_size) {
  if (world_size < 2) return;
  const int colour = g_world_rank % 2;
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, colour, g_world_rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, colour ? 0 : 1, 77, &inter);
  // Remote rank p of the other half is world rank 2p + (1 - colour).
  inter_case(inter, [&](int p) { return 2 * p + 1 - colour; }, 1, "intercommunicator");

  // Splitting an intercommunicator gives an intercommunicator; reversed keys
  // reverse both groups.
  MPI_Comm split;
  MPI_Comm_split(inter, 0, -g_world_rank, &split);
  int is_inter = 0;
  MPI_Comm_test_inter(split, &is_inter);
  CHECK(is_inter, "a split of an intercommunicator is one");
  int remote = 0;
  MPI_Comm_remote_size(split, &remote);
  inter_case(split, [&](int p) { return 2 * (remote - 1 - p) + 1 - colour; }, 2,
             "split of an intercommunicator");
  MPI_Comm_free(&split);

  MPI_Comm merged, merged_split;
  MPI_Intercomm_merge(inter, colour, &merged);
  intra_case(merged, 3, "merged intercommunicator");
  MPI_Comm_split(merged, 0, -g_world_rank, &merged_split);
  intra_case(merged_split, 4, "split of a merged intercommunicator");
  MPI_Comm_free(&merged_split);
  MPI_Comm_free(&merged);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

void constructed_cases(int world_size) {
  MPI_Group world_group, reversed;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> ranks(world_size);
  for (int i = 0; i < world_size; ++i) ranks[i] = world_size - 1 - i;
  MPI_Group_incl(world_group, world_size, ranks.data(), &reversed);

  MPI_Comm by_group, created, created_split, shared;
  MPI_Comm_create_group(MPI_COMM_WORLD, reversed, 5, &by_group);
  intra_case(by_group, 5, "MPI_Comm_create_group");
  MPI_Comm_free(&by_group);
  MPI_Comm_create(MPI_COMM_WORLD, reversed, &created);
  intra_case(created, 6, "MPI_Comm_create");
  MPI_Comm_split(created, g_world_rank % 2, g_world_rank, &created_split);
  intra_case(created_split, 7, "split of MPI_Comm_create's communicator");
  MPI_Comm_free(&created_split);
  MPI_Comm_free(&created);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  intra_case(shared, 8, "MPI_Comm_split_type");
  MPI_Comm_free(&shared);
  MPI_Group_free(&reversed);
  MPI_Group_free(&world_group);

  int source = (g_world_rank + world_size - 1) % world_size;
  int dest = (g_world_rank + 1) % world_size;
  MPI_Comm graph;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &source, MPI_UNWEIGHTED, 1, &dest,
                                 MPI_UNWEIGHTED, MPI_INFO_NULL, 1, &graph);
  intra_case(graph, 9, "distributed graph communicator");
  MPI_Comm_free(&graph);
  intra_case(MPI_COMM_SELF, 10, "MPI_COMM_SELF");
}

void datatype_cases(int size) {
  // Sent as 4 MPI_BYTE, received as 1 MPI_INT: the signatures match.
  {
    std::vector<int> send(size), recv(size, -1);
    for (int p = 0; p < size; ++p) send[p] = value(g_world_rank, p, 0, 11);
    CHECK(a2a(send.data(), sizeof(int), MPI_BYTE, recv.data(), 1, MPI_INT, MPI_COMM_WORLD) ==
              MPI_SUCCESS,
          "bytes to int");
    for (int p = 0; p < size; ++p) CHECK(recv[p] == value(p, g_world_rank, 0, 11), "bytes to int");
  }
  // MPI_BOTTOM with types that hold absolute addresses, resized so that peer
  // p's block is p ints further on.
  {
    std::vector<int> send(size), recv(size, -1);
    for (int p = 0; p < size; ++p) send[p] = value(g_world_rank, p, 0, 12);
    MPI_Aint send_addr = 0, recv_addr = 0;
    MPI_Get_address(send.data(), &send_addr);
    MPI_Get_address(recv.data(), &recv_addr);
    const int one = 1;
    MPI_Datatype s_abs, r_abs, s_type, r_type;
    MPI_Type_create_hindexed(1, &one, &send_addr, MPI_INT, &s_abs);
    MPI_Type_create_hindexed(1, &one, &recv_addr, MPI_INT, &r_abs);
    MPI_Type_create_resized(s_abs, send_addr, sizeof(int), &s_type);
    MPI_Type_create_resized(r_abs, recv_addr, sizeof(int), &r_type);
    MPI_Type_commit(&s_type);
    MPI_Type_commit(&r_type);
    CHECK(a2a(MPI_BOTTOM, 1, s_type, MPI_BOTTOM, 1, r_type, MPI_COMM_WORLD) == MPI_SUCCESS,
          "MPI_BOTTOM");
    for (int p = 0; p < size; ++p) CHECK(recv[p] == value(p, g_world_rank, 0, 12), "MPI_BOTTOM");
    for (MPI_Datatype* t : {&s_abs, &r_abs, &s_type, &r_type}) MPI_Type_free(t);
  }
  // A negative lower bound: each block is the int 4 bytes after the start of
  // an 8-byte extent that begins 4 bytes before the buffer pointer.
  {
    std::vector<int> send(2 * size + 1, 0), recv(2 * size + 1, -1);
    for (int p = 0; p < size; ++p) send[2 * p + 1] = value(g_world_rank, p, 0, 13);
    MPI_Datatype t;
    MPI_Type_create_resized(MPI_INT, -static_cast<MPI_Aint>(sizeof(int)), 2 * sizeof(int), &t);
    MPI_Type_commit(&t);
    CHECK(a2a(send.data() + 1, 1, t, recv.data() + 1, 1, t, MPI_COMM_WORLD) == MPI_SUCCESS,
          "negative lower bound");
    for (int p = 0; p < size; ++p) {
      CHECK(recv[2 * p + 1] == value(p, g_world_rank, 0, 13), "negative lower bound");
      CHECK(recv[2 * p] == -1, "negative lower bound: the gaps are left alone");
    }
    MPI_Type_free(&t);
  }
  // Nothing to send, null buffers.
  CHECK(a2a(nullptr, 0, MPI_INT, nullptr, 0, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS,
        "zero count, null buffers");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  datatype_cases(size);
  intercomm_cases(size);
  constructed_cases(size);

  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", g_world_rank, g_calls);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_world_rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  // Out before MPI_Finalize: a launcher may have to end a job that hangs in
  // there (scripts/cluster, MPICH over UCX tcp).
  std::fflush(stdout);
  MPI_Finalize();
  return failures ? 1 : 0;
}
