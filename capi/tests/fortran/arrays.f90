! coo_assemble (coo_assemble_arrays and _i32 through the Fortran layer):
! both index kinds, 0- and 1-based, give the file coo_builder_t's
! push_many + finish write, byte for byte, entry for entry; each error
! gives its status and leaves no file. Usage: arrays DIR (an empty
! directory; DIR/spill for spill files). Prints one line per check and
! "N failed" at the end. tests/programs.rs replays the contributions of
! A.hrry (contribution j: row mod(7j, 40), column mod(row + mod(j, 5), 40),
! value (mod(j, 9) - 4) / 4, j = 1..N).
program arrays
   use coo_assembler
   use, intrinsic :: iso_fortran_env, only: int8, int32, int64, real64
   use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_loc, c_null_ptr, c_null_char, &
      c_size_t, c_int32_t
   implicit none
   integer, parameter :: N = 5000, M = 40
   character(len=4096) :: dir
   character(len=:), allocatable :: d, spill
   type(coo_builder_t) :: b
   type(coo_summary) :: s, sb
   type(coo_options) :: o
   integer :: failures, stat, j
   integer(int64) :: saved8
   integer(int32) :: saved4
   integer(int64), allocatable, target :: idx8(:, :)
   integer(int32), allocatable :: idx4(:, :)
   real(real64), allocatable :: vals(:), odd(:), ints(:)
   type(c_ptr) :: cols(2)

   failures = 0
   call get_command_argument(1, dir)
   d = trim(dir)
   spill = d//'/spill'

   allocate (idx8(N, 2), idx4(N, 2), vals(N), odd(N), ints(N))
   do j = 1, N
      idx8(j, 1) = mod(7*j, M)
      idx8(j, 2) = mod(idx8(j, 1) + mod(j, 5), int(M, int64))
      vals(j) = real(mod(j, 9) - 4, real64)/4
      odd(j) = 0.1_real64*mod(j, 7) - 1e15_real64*(mod(j, 3) - 1)
      ints(j) = real(mod(j, 11) - 5, real64)
   end do
   idx4 = int(idx8, int32)

   ! The builder's file: the reference for every other one.
   call builder_file(d//'/B.hrry', vals, COO_F64, sb)
   call coo_assemble(d//'/A.hrry', [M, M], idx8, vals, stat=stat, summary=s, threads=2, &
                     temp_dir=spill)
   call expect(stat, COO_OK, 'int64, 0-based')
   call check(s%contributions == N .and. s%nnz == sb%nnz, 'summary: contributions and nnz')
   call check(same_bytes(d//'/A.hrry', d//'/B.hrry'), 'int64 0-based: the builder''s bytes')
   call check(same_entries(d//'/A.hrry', d//'/B.hrry', s%nnz), &
              'every entry read back is the builder''s')
   call coo_assemble(d//'/A4.hrry', [M, M], idx4, vals, stat=stat, threads=2, temp_dir=spill)
   call expect(stat, COO_OK, 'int32, 0-based')
   call check(same_bytes(d//'/A4.hrry', d//'/B.hrry'), 'int32 0-based: the builder''s bytes')
   call coo_assemble(d//'/A41.hrry', [M, M], idx4 + 1, vals, stat=stat, threads=2, &
                     temp_dir=spill, one_based=.true.)
   call expect(stat, COO_OK, 'int32, 1-based')
   call check(same_bytes(d//'/A41.hrry', d//'/B.hrry'), 'int32 1-based: the builder''s bytes')
   call coo_assemble(d//'/A81.hrry', [int(M, int64), int(M, int64)], idx8 + 1, vals, &
                     stat=stat, threads=2, temp_dir=spill, one_based=.true.)
   call expect(stat, COO_OK, 'int64, 1-based, int64 shape')
   call check(same_bytes(d//'/A81.hrry', d//'/B.hrry'), 'int64 1-based: the builder''s bytes')

   ! Sums that need exact summation; an i32 tensor from integral doubles.
   call builder_file(d//'/Bodd.hrry', odd, COO_F64, sb)
   call coo_assemble(d//'/Aodd.hrry', [M, M], idx4, odd, stat=stat, threads=2, temp_dir=spill)
   call expect(stat, COO_OK, 'cancelling sums')
   call check(same_bytes(d//'/Aodd.hrry', d//'/Bodd.hrry'), 'cancelling sums: the same bytes')
   call check(same_entries(d//'/Aodd.hrry', d//'/Bodd.hrry', sb%nnz), &
              'cancelling sums: the same entries')
   call builder_file(d//'/Bi32.hrry', ints, COO_I32, sb)
   call coo_assemble(d//'/Ai32.hrry', [M, M], idx8, ints, COO_I32, stat=stat, threads=2, &
                     temp_dir=spill)
   call expect(stat, COO_OK, 'an i32 tensor')
   call check(same_bytes(d//'/Ai32.hrry', d//'/Bi32.hrry'), 'i32 tensor: the same bytes')

   ! No contribution.
   call coo_assemble(d//'/E.hrry', [M, M], idx8(1:0, :), vals(1:0), stat=stat, summary=s)
   call expect(stat, COO_OK, 'no contribution')
   call check(s%nnz == 0 .and. s%contributions == 0, 'an empty tensor')

   ! Errors: their status, and no file.
   saved8 = idx8(1234, 2)
   idx8(1234, 2) = -2
   call coo_assemble(d//'/bad.hrry', [M, M], idx8, vals, stat=stat, temp_dir=spill)
   call expect(stat, COO_ERR_INDEX, 'a negative index')
   call check(index(coo_error_message(), 'contribution 1233: index -2 in dimension 1') > 0, &
              'the message names the (0-based) contribution and dimension')
   idx8(1234, 2) = saved8
   call coo_assemble(d//'/bad.hrry', [M, M], idx4, vals, stat=stat, one_based=.true.)
   call expect(stat, COO_ERR_INDEX, 'index 0 with one_based')
   saved4 = idx4(7, 1)
   idx4(7, 1) = M
   call coo_assemble(d//'/bad.hrry', [M, M], idx4, vals, stat=stat)
   call expect(stat, COO_ERR_INDEX, 'an index at its extent')
   idx4(7, 1) = saved4
   call coo_assemble(d//'/bad.hrry', [M, M], reshape(idx4, [N/2, 4]), vals(1:N/2), stat=stat)
   call expect(stat, COO_ERR_RANK, 'four index columns for rank 2')
   call check(index(coo_error_message(), 'rank 2') > 0, 'the message says the rank')
   call coo_assemble(d//'/bad.hrry', [M, M], idx4(1:N - 1, :), vals, stat=stat)
   call expect(stat, COO_ERR_ARGUMENT, 'one index row fewer than values')
   call coo_assemble(d//'/bad.hrry', [integer ::], idx4(:, 1:0), vals, stat=stat)
   call expect(stat, COO_ERR_ARGUMENT, 'rank 0')
   ints(5) = 0.5_real64
   call coo_assemble(d//'/bad.hrry', [M, M], idx4, ints, COO_I32, stat=stat)
   call expect(stat, COO_ERR_VALUE, '0.5 into an i32 tensor')
   call coo_assemble(d//'/bad.hrry', [M, M], idx4, vals, stat=stat, duplicates=COO_DUP_ERROR)
   call expect(stat, COO_ERR_DUPLICATE, 'duplicates under COO_DUP_ERROR')
   call coo_assemble(d//'/no/such/dir/bad.hrry', [M, M], idx4, vals, stat=stat)
   call expect(stat, COO_ERR_IO, 'a missing folder')
   call coo_assemble(d//'/bad.hrry', [M, M], idx4, vals, stat=stat, memory_budget=1_int64)
   call expect(stat, COO_ERR_BUDGET, 'a budget of one byte')
   ! The C function itself: NULL values.
   call coo_options_default(o)
   cols = [c_loc(idx8(1, 1)), c_loc(idx8(1, 2))]
   stat = coo_assemble_arrays(2_c_int32_t, [int(M, int64), int(M, int64)], COO_F64, o, &
                              int(N, c_size_t), cols, c_null_ptr, COO_F64, &
                              d//'/bad.hrry'//c_null_char, s)
   call expect(stat, COO_ERR_NULL, 'coo_assemble_arrays with NULL values')
   call check(.not. exists(d//'/bad.hrry'), 'no failed call wrote its file')

   print '(i0,a)', failures, ' failed'

contains

   !> The reference: the same contributions through coo_builder_t%push_many.
   subroutine builder_file(path, values, dtype, summary)
      character(len=*), intent(in) :: path
      real(real64), intent(in) :: values(:)
      integer(c_int), intent(in) :: dtype
      type(coo_summary), intent(out) :: summary
      integer :: st
      call b%init([M, M], dtype, stat=st, temp_dir=spill, threads=2)
      call expect(st, COO_OK, 'builder init')
      call b%push_many(transpose(idx8), values, st)
      call expect(st, COO_OK, 'builder push_many')
      call b%finish(path, summary, st)
      call expect(st, COO_OK, 'builder finish')
   end subroutine builder_file

   logical function exists(path)
      character(len=*), intent(in) :: path
      inquire (file=path, exist=exists)
   end function exists

   !> The bytes of a file (none if it cannot be read).
   subroutine read_bytes(path, bytes)
      character(len=*), intent(in) :: path
      integer(int8), allocatable, intent(out) :: bytes(:)
      integer :: u, ios, n
      open (newunit=u, file=path, access='stream', form='unformatted', status='old', &
            action='read', iostat=ios)
      if (ios /= 0) then
         allocate (bytes(0))
         return
      end if
      inquire (unit=u, size=n)
      allocate (bytes(n))
      read (u, iostat=ios) bytes
      close (u)
      if (ios /= 0) then
         deallocate (bytes)
         allocate (bytes(0))
      end if
   end subroutine read_bytes

   logical function same_bytes(a, c)
      character(len=*), intent(in) :: a, c
      integer(int8), allocatable :: x(:), y(:)
      call read_bytes(a, x)
      call read_bytes(c, y)
      same_bytes = size(x) > 0 .and. size(x) == size(y)
      if (same_bytes) same_bytes = all(x == y)
   end function same_bytes

   !> Every entry of two files (read with coo_file_t%read_entries) equal.
   logical function same_entries(a, c, nnz)
      character(len=*), intent(in) :: a, c
      integer(int64), intent(in) :: nnz
      type(coo_file_t) :: f, g
      type(coo_info) :: fi, gi
      integer(int64) :: fx(2, 512), gx(2, 512), first
      real(real64) :: fv(512), gv(512)
      integer :: fn, gn, st
      call f%open(a, st)
      same_entries = st == COO_OK
      call g%open(c, st)
      same_entries = same_entries .and. st == COO_OK
      if (.not. same_entries) return
      call f%info(fi)
      call g%info(gi)
      same_entries = fi%nnz == nnz .and. gi%nnz == nnz .and. nnz > 0
      first = 0
      do while (same_entries .and. first < nnz)
         call f%read_entries(first, fx, fv, fn)
         call g%read_entries(first, gx, gv, gn)
         same_entries = fn == gn .and. fn > 0
         if (same_entries) same_entries = all(fx(:, 1:fn) == gx(:, 1:gn)) .and. &
                                          all(fv(1:fn) == gv(1:gn))
         first = first + fn
      end do
      call f%close()
      call g%close()
   end function same_entries

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

end program arrays
