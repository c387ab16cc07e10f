! The idiomatic layer of fortran/coo_assembler.f90: both index kinds,
! 1-based and 0-based indices, push_many batches larger than its buffer,
! element orientation, temp_dir, and error statuses with their messages.
! Usage: checks DIR (an empty directory). Prints one line per check and
! "N failed" at the end.
program checks
   use coo_assembler
   use, intrinsic :: iso_fortran_env, only: int32, int64, real64
   use, intrinsic :: iso_c_binding, only: c_int
   implicit none
   character(len=4096) :: dir
   type(coo_builder_t) :: b
   type(coo_pusher_t) :: p
   type(coo_file_t) :: f
   type(coo_summary) :: s
   type(coo_info) :: info
   integer :: failures, stat, j, got
   integer(c_int) :: layout
   integer(int32), allocatable :: idx4(:, :)
   integer(int64), allocatable :: idx8(:, :)
   real(real64), allocatable :: vals(:)
   real(real64) :: v, ke(2, 2)
   integer(int64) :: rows(2, 8)
   real(real64) :: rvals(8)
   integer(int64) :: zidx(2, 2), nexp
   complex(real64) :: zvals(2), zke(2, 2)

   failures = 0
   call get_command_argument(1, dir)

   ! 1-based builder with a temp dir, pushes of both kinds.
   call b%init([10, 10], COO_F64, stat=stat, temp_dir=trim(dir)//'/spill', threads=2, &
               one_based=.true.)
   call expect(stat, COO_OK, 'init with temp_dir')
   call b%push([1, 1], 1.0_real64, stat)
   call expect(stat, COO_OK, 'push int32 index')
   call b%push([1_int64, 1_int64], 2.0_real64, stat)
   call expect(stat, COO_OK, 'push int64 index')
   ! 3000 contributions: more than one 1024-entry conversion batch.
   allocate (idx4(2, 3000), idx8(2, 3000), vals(3000))
   do j = 1, 3000
      idx4(:, j) = [mod(j, 10) + 1, mod(j/10, 10) + 1]
      vals(j) = 0.5_real64
   end do
   idx8 = int(idx4, int64)
   call b%push_many(idx4, vals, stat)
   call expect(stat, COO_OK, 'push_many int32, 1-based')
   call b%push_many(idx8, vals, stat)
   call expect(stat, COO_OK, 'push_many int64, 1-based')
   ! ke(a, b) goes to (dofs(a), dofs(b)): an unsymmetric element shows it.
   ke = reshape([10.0_real64, 30.0_real64, 20.0_real64, 40.0_real64], [2, 2])
   call b%push_element([9, 10], ke, stat)
   call expect(stat, COO_OK, 'push_element')
   call p%init(b, stat)
   call expect(stat, COO_OK, 'pusher init')
   call p%push([10, 1], 7.0_real64, stat)
   call expect(stat, COO_OK, 'pusher push')
   call p%push([0, 1], 7.0_real64, stat)
   call expect(stat, COO_ERR_INDEX, 'index 0 with one_based')
   call p%push([11, 1], 7.0_real64, stat)
   call expect(stat, COO_ERR_INDEX, 'index past the extent')
   call p%push([1, 1, 1], 7.0_real64, stat)
   call expect(stat, COO_ERR_RANK, 'three components for rank 2')
   call check(index(coo_error_message(), 'rank 2') > 0, 'message of a Fortran-side check')
   call p%free()
   call b%push_element([1, 2], reshape([1.0_real64], [1, 1]), stat)
   call expect(stat, COO_ERR_ARGUMENT, 'element matrix of the wrong size')
   call b%finish(trim(dir)//'/F.hrry', s, stat)
   call expect(stat, COO_OK, 'finish')
   call check(s%contributions == 2 + 6000 + 4 + 1, 'summary counts contributions')

   call f%open(trim(dir)//'/F.hrry', stat, one_based=.true.)
   call expect(stat, COO_OK, 'open 1-based')
   call f%info(info)
   call check(info%rank == 2 .and. info%shape(1) == 10 .and. info%dtype == COO_F64, 'info')
   call f%layout(layout, stat)
   call check(stat == COO_OK .and. layout == COO_LAYOUT_COO, 'layout')
   call f%get([1, 1], v)
   ! (1,1): 1 + 2, and 0.5 from each of the two batches when j = 100, 200, ..., 3000.
   call check(v == 3.0_real64 + 2*30*0.5_real64, 'sum at (1,1)')
   ! Every coordinate also got 2 * 30 * 0.5 from the two batches.
   call f%get([9_int64, 10_int64], v)
   call check(v == 30.0_real64 + 20.0_real64, 'ke(1,2) at (dofs(1), dofs(2))')
   call f%get([10, 9], v)
   call check(v == 30.0_real64 + 30.0_real64, 'ke(2,1) at (dofs(2), dofs(1))')
   call f%get([10, 1], v)
   call check(v == 30.0_real64 + 7.0_real64, 'pushed through the pusher')
   call f%read_entries(1_int64, rows, rvals, got)
   call check(got == 8 .and. rows(1, 1) == 1 .and. rows(2, 1) == 1, 'read_entries 1-based')
   call f%get([0, 1], v, stat)
   call expect(stat, COO_ERR_INDEX, 'get at index 0 (1-based)')
   call f%verify(stat)
   call expect(stat, COO_OK, 'verify')
   ! Exports through the library's table; programs.rs reads F.mtx back.
   call f%export(trim(dir)//'/F.mtx', 'mtx', stat, entries=nexp)
   call expect(stat, COO_OK, 'export to mtx')
   call check(nexp == 100, 'export wrote every entry')
   call f%export(trim(dir)//'/F.npz', 'npz', stat, npz_layout='csc', paging='keep')
   call expect(stat, COO_OK, 'export to npz as csc')
   call f%export(trim(dir)//'/F-sym.mtx', 'mtx', stat, symmetric=.true.)
   call expect(stat, COO_ERR_VALUE, 'symmetric export of a matrix that is not')
   call f%export(trim(dir)//'/F.hb', 'harwell-boeing', stat)
   call expect(stat, COO_ERR_ARGUMENT, 'unknown export format')
   call check(index(coo_error_message(), 'harwell-boeing') > 0, 'the message names the format')
   call f%close()

   ! 0-based reading of the same file.
   call f%open(trim(dir)//'/F.hrry')
   call f%get([0, 0], v)
   call check(v == 33.0_real64, '0-based get')
   call f%close()

   ! Errors with messages.
   call f%open(trim(dir)//'/missing.hrry', stat)
   call expect(stat, COO_ERR_IO, 'open a missing file')
   call b%init([3, 3], COO_I32, stat=stat, memory_budget=1_int64)
   call expect(stat, COO_ERR_BUDGET, 'budget of one byte')
   call b%init([3, 3], COO_I32, stat=stat)
   call b%push([0, 0], 0.5_real64, stat)
   call expect(stat, COO_ERR_VALUE, '0.5 into an int32 tensor')
   call b%finish(trim(dir)//'/no/such/dir/G.hrry', stat=stat)
   call expect(stat, COO_ERR_REFUSED, 'finish into a missing directory is refused')
   ! The builder is kept: finish elsewhere.
   call b%push([1, 1], 2.0_real64, stat)
   call expect(stat, COO_OK, 'push after the refused finish')
   call b%finish(trim(dir)//'/G.hrry', stat=stat)
   call expect(stat, COO_OK, 'finish after the refusal')

   ! Complex values (1-based): one, many (int64 indices), an element
   ! matrix, through the builder and a pusher; programs.rs reads Z.hrry.
   call b%init([3, 3], COO_C128, stat=stat, one_based=.true.)
   call expect(stat, COO_OK, 'init complex128')
   call b%push([1, 2], cmplx(1.0_real64, 2.0_real64, kind=real64), stat)
   call expect(stat, COO_OK, 'push a complex value')
   zidx(:, 1) = [1_int64, 2_int64]
   zidx(:, 2) = [3_int64, 3_int64]
   zvals = [cmplx(0.5_real64, -1.0_real64, kind=real64), cmplx(0.0_real64, 4.0_real64, kind=real64)]
   call b%push_many(zidx, zvals, stat)
   call expect(stat, COO_OK, 'push_many complex')
   zke = reshape([cmplx(1.0_real64, 1.0_real64, kind=real64), cmplx(3.0_real64, 0.0_real64, kind=real64), &
                  cmplx(2.0_real64, 0.0_real64, kind=real64), cmplx(0.0_real64, -4.0_real64, kind=real64)], &
                 [2, 2])
   call p%init(b, stat)
   call expect(stat, COO_OK, 'complex pusher')
   call p%push_element([1_int64, 3_int64], zke, stat)
   call expect(stat, COO_OK, 'push_element complex through a pusher')
   call p%free()
   call b%finish(trim(dir)//'/Z.hrry', stat=stat)
   call expect(stat, COO_OK, 'finish complex')

   ! CSF (rank 3, levels in dimension order 3, 1, 2; 1-based indices and
   ! dimension numbers); programs.rs compares T.hrry with the library's.
   call b%init([4, 3, 5], COO_F64, stat=stat, one_based=.true., layout=COO_LAYOUT_CSF, &
               mode_order=[3, 1, 2])
   call expect(stat, COO_OK, 'init csf')
   do j = 1, 60
      call b%push([mod(j, 4) + 1, mod(2 * j, 3) + 1, mod(3 * j, 5) + 1], real(j, real64), stat)
   end do
   call expect(stat, COO_OK, 'push csf')
   call b%finish(trim(dir)//'/T.hrry', stat=stat)
   call expect(stat, COO_OK, 'finish csf')
   call f%open(trim(dir)//'/T.hrry', stat)
   call f%layout(layout, stat)
   call check(layout == COO_LAYOUT_CSF, 'layout csf')
   call f%get([1, 1, 1], v, stat)
   call expect(stat, COO_OK, 'get csf')
   call f%close()
   call b%init([4, 3, 5], COO_F64, stat=stat, layout=COO_LAYOUT_CSF, mode_order=[1, 1, 2])
   call expect(stat, COO_ERR_ARGUMENT, 'a repeated level refused')

   print '(i0,a)', failures, ' failed'

contains

   subroutine expect(got, want, label)
      integer, intent(in) :: got
      integer, intent(in) :: want
      character(len=*), intent(in) :: label
      character(len=:), allocatable :: msg
      msg = ''
      if (got /= COO_OK) msg = coo_error_message()
      if (got /= want .or. (want /= COO_OK .and. len(msg) == 0)) then
         print '(a,a,i0,a,i0,a,a)', 'FAIL ', label//': got ', got, ' want ', want, ' ', msg
         failures = failures + 1
      else
         print '(a,a,i0,a,a)', 'ok ', label//': ', got, ' ', msg
      end if
   end subroutine expect

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

end program checks
