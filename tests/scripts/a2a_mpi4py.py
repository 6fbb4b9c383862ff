"""An MPI_Alltoall through mpi4py (tests/scripts/test_launchers.sh): each rank
sends rank*100+peer to every peer and checks what it got. No numpy needed."""
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
send = array("i", [rank * 100 + peer for peer in range(size)])
recv = array("i", [-1] * size)
comm.Alltoall([send, MPI.INT], [recv, MPI.INT])
want = array("i", [peer * 100 + rank for peer in range(size)])
if recv != want:
    raise SystemExit(f"rank {rank}: got {list(recv)}, wanted {list(want)}")
print(f"mpi4py alltoall ok rank {rank} of {size}")
