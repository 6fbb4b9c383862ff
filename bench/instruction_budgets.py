# Instruction budgets of bench/instruction_budget.py (bench/results/budgets.md):
# case -> (budget, today's count), instructions per call unless said otherwise.
#
# Counted by callgrind on the measured rank only, collected inside the shim's
# MPI_Alltoall, self instructions of the shim's own functions (libmlxa2a-*.so,
# not the MPI, libc or fakeverbs: their counts depend on the machine's CPU and
# libraries, ours do not), leaving out the waits (whatever runs under
# Waiter::wait_slow/wait_until, NodeAlltoall::wait_lines and the leader
# transports' complete(): how often they loop depends on timing), per call =
# (I(N2) - I(N1)) / (N2 - N1).
#
# Budget = today's count + max(5%, 10 instructions): 10 absorbs the few
# instructions around a wait that is entered or not depending on timing
# (argument set-up of an out-of-line wait call); 5% keeps larger counts from
# failing on a compiler update's reordering, while a real added cost (a
# function call, a lock, an extra pass over the peers) is larger than either.
# Lower a budget (and today's count) when a change saves instructions:
# `bench/instruction_budget.py --build build --report` prints the counts.
#
# Today's counts (three runs each, bench/results/budgets.md; the largest
# kept where runs differed): release build (scripts/build.sh), Debian 12, gcc 12,
# Open MPI 4.1.4, MPICH 4.0.2.
BUDGETS = {
    # One process, MPI_COMM_SELF, 1 int, MLXA2A_TUNE=pmpi: the pass-through.
    "fallthrough-ompi": (32, 22),
    "fallthrough-mpich": (32, 22),
    # Open MPI np=2, one node, MLXA2A_TUNE=shm, rank 0: the shared-memory engine.
    "shm-np2-1B": (367, 349),
    "shm-np2-64KiB": (506, 481),
    # Open MPI np=4 as 2 virtual nodes of 2, MLXA2A_TUNE=shm, no verbs: the
    # hierarchical engine with PMPI leaders, 8 B per peer; rank 0 leads its
    # node, rank 1 does not.
    "hier-pmpi-leader": (2150, 2047),
    "hier-pmpi-other": (1233, 1174),
    # The same over RDMA through fakeverbs (MLXA2A_TUNE=rdma), rank 0 a leader:
    # RdmaLeaderTransport::post and below per call; EndpointPool::poll's work
    # on completions per call (its empty polls taken out), and one empty poll
    # (instructions per poll, not per call).
    # Issue 39 (threads): the poll token (one exchange, one store) costs the
    # empty poll 7; the completions' dispatch, inlined, saves ~25; the
    # atomic send credits cost post 2.
    "rdma-post": (415, 397),
    "rdma-poll-completions": (221, 207),
    "rdma-poll-empty": (45, 42),
}
