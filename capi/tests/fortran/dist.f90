! Distributed assembly from Fortran, run under mpirun by capi/tests/mpi.rs:
! the chain of 2-node elements of tests/c/dist.c (element e joins nodes e
! and e+1, 1-based here, with weight e), spread round-robin. Checks the band
! (finish_csr with local row counts), a plan's refill, one-contribution
! pushes under the builder's options (duplicates max, CSR files) into one
! file per rank, and a builder freed unfinished on the last rank
! (COO_ERR_REMOTE on the others).
program dist
   use mpi
   use, intrinsic :: iso_c_binding, only: c_int
   use coo_assembler, only: COO_OK, COO_ERR_REMOTE, COO_DUP_MAX, COO_LAYOUT_CSR, &
      coo_file_t, coo_info
   use coo_assembler_mpi
   implicit none
   integer, parameter :: n = 500
   integer :: rank, size_, ierr, failures, st, k_unit
   integer(8) :: e, lo, hi, local, i, k
   integer(8), allocatable :: ptr(:), cols(:)
   real(8), allocatable :: vals(:), contrib(:)
   type(coo_dist_builder_t) :: b
   type(coo_dist_plan_t) :: plan
   type(coo_file_t) :: f
   type(coo_info) :: info
   character(len=32) :: path
   real(8) :: got
   integer(c_int) :: layout

   call MPI_Init(ierr)
   call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
   call MPI_Comm_size(MPI_COMM_WORLD, size_, ierr)
   failures = 0
   local = n / size_
   if (rank == size_ - 1) local = local + mod(n, size_)

   call b%init(MPI_COMM_WORLD, int(n, 8), int(n, 8), local_rows=local, one_based=.true.)
   call push_chain(b, 1.0d0)
   call b%finish_csr(ptr, cols, vals, lo, hi)
   call check(lo == int(rank * (n / size_) + 1, 8) .and. hi - lo + 1 == local, 'finish_csr: the rows')
   call check(band_ok(1.0d0), 'finish_csr: the exact band, 1-based')

   call b%init(MPI_COMM_WORLD, int(n, 8), int(n, 8), one_based=.true.)
   call push_chain(b, 1.0d0)
   call b%finish_planned(ptr, cols, vals, lo, hi, plan)
   call check(band_ok(1.0d0), 'finish_planned: the exact band')
   allocate (contrib(0))
   do e = rank + 1, n - 1, size_
      contrib = [contrib, 2d0 * e, -2d0 * e, -2d0 * e, 2d0 * e]
   end do
   call plan%refill(contrib, vals)
   call check(band_ok(2.0d0), 'refill: twice the band')
   call plan%free()

   ! Every rank pushes (i, i) = rank + 1 for every row: the maximum is the
   ! rank count; each rank's file holds its rows, numbered from its first.
   call b%init(MPI_COMM_WORLD, int(n, 8), int(n, 8), local_rows=local, one_based=.true., &
               duplicates=COO_DUP_MAX, layout=COO_LAYOUT_CSR, threads=1)
   do i = 1, n
      call b%push(i, i, real(rank + 1, 8))
   end do
   write (path, '(a,i0,a)') 'fpart', rank, '.hrry'
   call b%finish_per_rank(trim(path))
   call f%open(trim(path), one_based=.true.)
   call f%info(info)
   call f%layout(layout)
   call f%get([1_8, rank * (n / size_) + 1_8], got)
   call check(info%nnz == local .and. info%shape(1) == local .and. layout == COO_LAYOUT_CSR &
              .and. got == size_, 'finish_per_rank: pushes under duplicates max, CSR')
   call f%close()
   open (newunit=k_unit, file=trim(path))
   close (k_unit, status='delete')

   call b%init(MPI_COMM_WORLD, int(n, 8), int(n, 8))
   if (rank == size_ - 1) then
      call b%free()
   else
      call b%finish('never.hrry', stat=st)
      call check(st == COO_ERR_REMOTE, 'finish after a free on another rank')
   end if

   call MPI_Finalize(ierr)
   if (failures /= 0) error stop 1
   print '(a,i0,a)', 'dist rank ', rank, ' OK'

contains

   subroutine push_chain(b, scale)
      type(coo_dist_builder_t), intent(inout) :: b
      real(8), intent(in) :: scale
      real(8) :: ke(2, 2)
      do e = rank + 1, n - 1, size_
         ke = scale * e * reshape([1d0, -1d0, -1d0, 1d0], [2, 2])
         call b%push_element([e, e + 1], ke)
      end do
   end subroutine push_chain

   ! K(i,i) = w(i-1) + w(i), K(i,i+1) = K(i+1,i) = -w(i), w(e) = e, 1-based.
   logical function band_ok(scale)
      real(8), intent(in) :: scale
      real(8) :: want
      integer(8) :: j
      band_ok = ptr(1) == 1
      do i = lo, hi
         if (.not. band_ok) exit
         j = max(i - 1, 1_8)
         do k = ptr(i - lo + 1), ptr(i - lo + 2) - 1
            if (j == i) then
               want = 0
               if (i > 1) want = want + (i - 1)
               if (i < n) want = want + i
            else
               want = -min(i, j)
            end if
            band_ok = band_ok .and. cols(k) == j .and. vals(k) == want * scale
            j = j + 1
         end do
      end do
   end function band_ok

   subroutine check(cond, label)
      logical, intent(in) :: cond
      character(len=*), intent(in) :: label
      if (cond) then
         print '(a,a)', 'ok ', label
      else
         print '(a,a)', 'FAIL ', label
         failures = failures + 1
      end if
   end subroutine check
end program dist
