! MPI_Alltoall through mpif.h, or `use mpi` when built with -DUSE_MPI_MODULE:
! plain, in place, on a split communicator.
! Prints CALLS <rank> <n> and, on rank 0, RESULT PASS|FAIL (see a2a_check.cc).
program a2a_legacy
#ifdef USE_MPI_MODULE
  use mpi
  implicit none
#else
  implicit none
  include 'mpif.h'
#endif
  integer :: ierr, rank, nprocs, sub, srank, ssize, i, fails, total, calls
  integer, allocatable :: sbuf(:), rbuf(:)
  fails = 0
  calls = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  allocate(sbuf(2*nprocs), rbuf(2*nprocs))
  do i = 0, nprocs - 1
    sbuf(2*i+1) = rank*1000 + i
    sbuf(2*i+2) = -(rank*1000 + i)
  end do
  call MPI_ALLTOALL(sbuf, 2, MPI_INTEGER, rbuf, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  calls = calls + 1
  if (ierr /= MPI_SUCCESS) fails = fails + 1
  do i = 0, nprocs - 1
    if (rbuf(2*i+1) /= i*1000 + rank .or. rbuf(2*i+2) /= -(i*1000 + rank)) fails = fails + 1
  end do
  ! In place: the Fortran MPI_IN_PLACE marker must reach MPI as MPI_IN_PLACE.
  do i = 0, nprocs - 1
    rbuf(2*i+1) = rank*1000 + i + 7
    rbuf(2*i+2) = rank
  end do
  call MPI_ALLTOALL(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  calls = calls + 1
  if (ierr /= MPI_SUCCESS) fails = fails + 1
  do i = 0, nprocs - 1
    if (rbuf(2*i+1) /= i*1000 + rank + 7 .or. rbuf(2*i+2) /= i) fails = fails + 1
  end do
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), rank, sub, ierr)
  call MPI_COMM_RANK(sub, srank, ierr)
  call MPI_COMM_SIZE(sub, ssize, ierr)
  do i = 0, ssize - 1
    sbuf(i+1) = srank*100 + i
  end do
  call MPI_ALLTOALL(sbuf, 1, MPI_INTEGER, rbuf, 1, MPI_INTEGER, sub, ierr)
  calls = calls + 1
  do i = 0, ssize - 1
    if (rbuf(i+1) /= i*100 + srank) fails = fails + 1
  end do
  call MPI_COMM_FREE(sub, ierr)
  call MPI_ALLREDUCE(fails, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  print '(A,I0,A,I0)', 'CALLS ', rank, ' ', calls
  flush(6)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(A)', 'RESULT PASS'
    else
      print '(A)', 'RESULT FAIL'
    end if
  end if
  ! Out before MPI_Finalize (see a2a_check.cc).
  flush(6)
  call MPI_FINALIZE(ierr)
end program a2a_legacy
