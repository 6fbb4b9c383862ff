/*
 * a2a_sessions: MPI 4 sessions around mlxa2a (MPICH only: Open MPI 4.1 has
 * none; docs/ARCHITECTURE.md, "Before MPI_Init, and MPI 4 sessions").
 * Before MPI_Init mlxa2a stands aside: calls on a session's communicators go
 * to the MPI, untraced and uncounted, and must be right. From MPI_Init on the
 * session's communicators (made before it) and MPI_COMM_WORLD are mlxa2a's.
 * After MPI_Finalize the session lives on and its calls must stay right:
 * MPICH 4.0 finalises mlxa2a only at MPI_Session_finalize, so mlxa2a still
 * serves them; an MPI that finalises it at MPI_Finalize sends them to the
 * MPI, traced "after MPI_Finalize". The CALLS line counts the calls from
 * MPI_Init on. Prints the lines tests/mpi/run_mpi_test.py reads:
 *   CALLS <rank> <n>   RESULT PASS|FAIL
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

/* count ints per peer on comm, `reps` calls, every value checked. */
static int alltoall_checked(MPI_Comm comm, int count, int reps) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int *send = malloc(sizeof(int) * (size_t)count * (size_t)size);
  int *recv = malloc(sizeof(int) * (size_t)count * (size_t)size);
  for (int r = 0; r < reps; ++r) {
    for (int i = 0; i < count * size; ++i) send[i] = (r * 131 + rank) * 100000 + i;
    for (int i = 0; i < count * size; ++i) recv[i] = -1;
    if (MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, comm) != MPI_SUCCESS) ++failures;
    for (int p = 0; p < size; ++p)
      for (int k = 0; k < count; ++k)
        if (recv[p * count + k] != (r * 131 + p) * 100000 + rank * count + k) ++failures;
  }
  free(send);
  free(recv);
  return reps;
}

/* Every size class the engine has at these counts: line, copy, cma. */
static int battery(MPI_Comm comm) {
  int calls = 0;
  for (int count = 1; count <= 16384; count *= 8) calls += alltoall_checked(comm, count, 6);
  return calls;
}

/* The even and odd ranks of comm, reversed. */
static MPI_Comm halves(MPI_Comm comm) {
  int rank;
  MPI_Comm half;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_split(comm, rank % 2, -rank, &half);
  return half;
}

int main(void) {
  MPI_Session session;
  MPI_Group group;
  MPI_Comm scomm, shalf;
  if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session) != MPI_SUCCESS) return 2;
  MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
  MPI_Comm_create_from_group(group, "mlxa2a.test.sessions", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                             &scomm);
  shalf = halves(scomm);
  battery(scomm); /* before MPI_Init: not mlxa2a's, not counted */
  battery(shalf);

  MPI_Init(NULL, NULL);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int calls = battery(scomm) + battery(shalf) + battery(MPI_COMM_WORLD);
  MPI_Comm whalf = halves(scomm);
  calls += battery(whalf);
  MPI_Comm_free(&whalf);

  MPI_Finalize();

  calls += battery(scomm); /* after MPI_Finalize: the session's, to the MPI again */
  printf("CALLS %d %d\n", rank, calls);
  fflush(stdout);
  int after = 0;
  MPI_Allreduce(&failures, &after, 1, MPI_INT, MPI_SUM, scomm);
  if (rank == 0) printf("RESULT %s\n", after == 0 ? "PASS" : "FAIL");
  MPI_Comm_free(&shalf);
  MPI_Comm_free(&scomm);
  MPI_Group_free(&group);
  MPI_Session_finalize(&session);
  return after == 0 ? 0 : 1;
}
