! MPI_Alltoall through `use mpi_f08`: plain, in place, without the optional
! ierror, on a split communicator. Output as in a2a_check.cc.
program a2a_f08
  use mpi_f08
  implicit none
  integer :: ierr, rank, nprocs, srank, ssize, i, fails, total, calls
  type(MPI_Comm) :: sub
  integer, allocatable :: sbuf(:), rbuf(:)
  fails = 0
  calls = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  allocate(sbuf(3*nprocs), rbuf(3*nprocs))
  do i = 0, nprocs - 1
    sbuf(3*i+1:3*i+3) = [rank*1000 + i, rank, i]
  end do
  call MPI_Alltoall(sbuf, 3, MPI_INTEGER, rbuf, 3, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  calls = calls + 1
  if (ierr /= MPI_SUCCESS) fails = fails + 1
  do i = 0, nprocs - 1
    if (any(rbuf(3*i+1:3*i+3) /= [i*1000 + rank, i, rank])) fails = fails + 1
  end do
  do i = 0, nprocs - 1
    rbuf(3*i+1:3*i+3) = [rank*1000 + i + 5, rank, 42]
  end do
  call MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, 3, MPI_INTEGER, MPI_COMM_WORLD)
  calls = calls + 1
  do i = 0, nprocs - 1
    if (any(rbuf(3*i+1:3*i+3) /= [i*1000 + rank + 5, i, 42])) fails = fails + 1
  end do
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, sub)
  call MPI_Comm_rank(sub, srank)
  call MPI_Comm_size(sub, ssize)
  do i = 0, ssize - 1
    sbuf(i+1) = srank*100 + i
  end do
  call MPI_Alltoall(sbuf, 1, MPI_INTEGER, rbuf, 1, MPI_INTEGER, sub, ierr)
  calls = calls + 1
  do i = 0, ssize - 1
    if (rbuf(i+1) /= i*100 + srank) fails = fails + 1
  end do
  call MPI_Comm_free(sub)
  call MPI_Allreduce(fails, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  print '(A,I0,A,I0)', 'CALLS ', rank, ' ', calls
  flush(6)
  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    if (total == 0) then
      print '(A)', 'RESULT PASS'
    else
      print '(A)', 'RESULT FAIL'
    end if
  end if
  ! Out before MPI_Finalize (see a2a_check.cc).
  flush(6)
  call MPI_Finalize()
end program a2a_f08
