! coo_plan_t (issue 24): plan element matrices (init_elements, 1-based)
! and arrays (init) once, refill twice with new values, and check every
! refill, bit for bit, against what coo_builder_t's push_element and
! coo_assemble store for the same contributions; the structure against the
! file's; save and load; the errors, with their status and message.
! Usage: plan DIR (an empty directory). Prints one line per check and
! "N failed" at the end. The mesh: NE 3-node elements on a ring of NN
! nodes, element e on nodes e, e+1, e+2 (mod NN, 1-based), whose element
! matrices are not symmetric (so ke(a, b, e) going to (dofs(a, e),
! dofs(b, e)) is tested) and hold +-1e16 on their diagonals (so their sums
! need exact summation). tests/programs.rs reads the plan saved as P.hrry.
program plan
   use coo_assembler
   use, intrinsic :: iso_fortran_env, only: int8, int32, int64, real64
   use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_int64_t, c_associated, &
                                          c_double_complex, c_float_complex
   implicit none
   integer, parameter :: NN = 200, NE = 200, K = 3, N = K*K*NE
   character(len=4096) :: dir
   character(len=:), allocatable :: d
   integer :: failures, stat, e, a, b, r, at
   integer :: dofs(K, NE)
   integer(int64), allocatable :: idx(:, :), fidx(:, :), coords(:, :), ind(:), ptr(:)
   integer(int64), allocatable :: ind2(:), ptr2(:)
   real(real64), allocatable :: ke(:, :, :, :), vals(:), fv(:), out(:), out2(:)
   type(coo_plan_t) :: p, q, s, z, zp, cp
   complex(c_double_complex), allocatable :: zke(:, :, :), zout(:), zout2(:), zvals(:)
   complex(c_float_complex), allocatable :: cvals(:), cout(:)
   real(real64), allocatable :: re_out(:), im_out(:)
   type(coo_plan_details) :: pd, qd, sd
   type(coo_builder_t) :: bld
   type(coo_summary) :: summary
   integer(int64) :: nnz, n64
   integer(int8), allocatable :: bytes(:), bytes2(:)
   type(coo_plan_t) :: rp
   type(coo_refill_t) :: rf
   real(real64), allocatable :: rout(:)
   type(c_ptr) :: h
   integer(c_int64_t) :: cnnz

   failures = 0
   call get_command_argument(1, dir)
   d = trim(dir)

   allocate (ke(K, K, NE, 2), idx(N, 2), vals(N))
   do e = 1, NE
      dofs(:, e) = [(mod(e - 1 + a, NN) + 1, a=0, K - 1)]
      do r = 1, 2
         do b = 1, K
            do a = 1, K
               ke(a, b, e, r) = real(mod(7*a + 3*b + r*e, 11) - 5, real64)/3
               if (a == b) ke(a, b, e, r) = ke(a, b, e, r) + merge(1e16_real64, -1e16_real64, &
                                                                   mod(e + r, 2) == 0)
            end do
         end do
      end do
   end do
   ! The same contributions as arrays, in ke's memory order.
   at = 0
   do e = 1, NE
      do b = 1, K
         do a = 1, K
            at = at + 1
            idx(at, :) = [dofs(a, e), dofs(b, e)]
         end do
      end do
   end do

   ! Element matrices, CSR, 1-based.
   call p%init_elements([NN, NN], dofs, stat=stat, layout=COO_LAYOUT_CSR, threads=2, &
                        one_based=.true.)
   call expect(stat, COO_OK, 'init_elements')
   call p%info(pd, stat)
   call expect(stat, COO_OK, 'info')
   nnz = p%nnz()
   call check(p%contributions() == N .and. pd%contributions == N .and. pd%nnz == nnz, &
              'nnz and contributions agree with the details')
   call check(pd%rank == 2 .and. pd%shape(1) == NN .and. pd%shape(2) == NN .and. &
              pd%dtype == COO_F64 .and. pd%layout == COO_LAYOUT_CSR .and. &
              pd%indices_len == nnz .and. pd%pointers_len == NN + 1, 'the details')
   call p%structure(ind, ptr, stat)
   call expect(stat, COO_OK, 'structure')
   call check(size(ind) == nnz .and. size(ptr) == NN + 1 .and. ptr(1) == 1 .and. &
              ptr(NN + 1) == nnz + 1, 'CSR arrays, 1-based')
   allocate (coords(2, nnz))
   do r = 1, NN
      do at = int(ptr(r)), int(ptr(r + 1)) - 1
         coords(:, at) = [int(r, int64), ind(at)]
      end do
   end do
   allocate (out(nnz), out2(nnz))
   do r = 1, 2
      call builder_file(d//'/B'//achar(48 + r)//'.hrry', r)
      call read_file(d//'/B'//achar(48 + r)//'.hrry', fidx, fv)
      call check(size(fv) == nnz, 'the builder''s file has the plan''s nnz')
      call p%assemble(ke(:, :, :, r), out, stat)
      call expect(stat, COO_OK, 'refill')
      if (size(fv) == nnz) then
         call check(same_bits(out, fv), 'the refill is bit for bit the builder''s values')
         call check(all(coords == fidx), 'the structure is the file''s')
      end if
   end do
   call p%assemble(ke(:, :, :, 1), out2, stat)
   call check(stat == COO_OK .and. .not. same_bits(out, out2), 'the two refills differ')

   ! Arrays, COO, 1-based: the same contributions, the same values.
   vals = reshape(ke(:, :, :, 2), [N])
   call q%init([NN, NN], idx, stat=stat, threads=2, one_based=.true.)
   call expect(stat, COO_OK, 'init from arrays')
   call q%info(qd)
   call check(qd%nnz == nnz .and. qd%layout == COO_LAYOUT_COO .and. qd%indices_len == 2*nnz &
              .and. qd%pointers_len == 0 .and. qd%digest == pd%digest, &
              'the arrays'' plan: COO, the same nnz and digest as the elements''')
   call coo_assemble(d//'/A2.hrry', [NN, NN], idx, vals, stat=stat, threads=2, one_based=.true.)
   call expect(stat, COO_OK, 'coo_assemble')
   call read_file(d//'/A2.hrry', fidx, fv)
   call q%assemble(vals, out2, stat)
   call expect(stat, COO_OK, 'refill the arrays'' plan')
   call check(size(fv) == nnz, 'coo_assemble''s file has the plan''s nnz')
   if (size(fv) == nnz) call check(same_bits(out2, fv), 'the refill is coo_assemble''s values')
   call check(same_bits(out2, out), 'and the CSR elements'' refill')
   call q%structure(ind2, ptr2, stat)
   call check(stat == COO_OK .and. size(ptr2) == 0 .and. size(ind2) == 2*nnz, 'COO structure')
   if (size(ind2) == 2*nnz) call check(all(reshape(ind2, [2_int64, nnz]) == coords), &
                                       'COO tuples, 1-based: the file''s')
   call q%init([NN, NN], int(idx, int32), stat=stat, one_based=.true.)
   call expect(stat, COO_OK, 'init from int32 arrays')
   call q%assemble(vals, out2, stat)
   call check(stat == COO_OK .and. same_bits(out2, out), 'int32 arrays: the same refill')

   ! Plan files (out of core): the same contributions planned into a file,
   ! refilled from a raw values file, give coo_assemble's values.
   call coo_plan_file(d//'/PF.hrry', [NN, NN], idx, stat=stat, layout=COO_LAYOUT_CSR, &
                      memory_budget=64_int64*2**20, temp_dir=d, one_based=.true.)
   call expect(stat, COO_OK, 'coo_plan_file')
   call write_bytes(d//'/v.f64', transfer(vals, 0_int8, 8*N))
   call coo_refill(d//'/PF.hrry', d//'/v.f64', d//'/R.hrry', stat=stat, temp_dir=d)
   call expect(stat, COO_OK, 'coo_refill')
   call read_file(d//'/R.hrry', fidx, fv)
   call check(size(fv) == nnz .and. same_bits(fv, out2), 'the plan file''s refill is the plan''s')
   if (size(fv) == nnz) call check(all(fidx == coords), 'and its structure')
   call coo_plan_file(d//'/PF32.hrry', [NN, NN], int(idx, int32), stat=stat, one_based=.true.)
   call expect(stat, COO_OK, 'coo_plan_file, int32 indices')
   call coo_refill(d//'/PF32.hrry', d//'/v.f64', d//'/R32.hrry', stat=stat)
   call read_file(d//'/R32.hrry', fidx, fv)
   call check(stat == COO_OK .and. same_bits(fv, out2), 'int32 indices: the same values')
   call coo_refill(d//'/PF.hrry', d//'/v.f64', d//'/v.f64', stat=stat)
   call expect(stat, COO_ERR_ARGUMENT, 'a refill onto its values file')
   call write_bytes(d//'/short.f64', transfer(vals(1:N - 1), 0_int8, 8*(N - 1)))
   call coo_refill(d//'/PF.hrry', d//'/short.f64', d//'/R.hrry', stat=stat)
   call expect(stat, COO_ERR_ARGUMENT, 'one value too few in the values file')
   call coo_plan_file(d//'/PF3.hrry', [NN, NN, NN], idx, stat=stat)
   call expect(stat, COO_ERR_RANK, 'coo_plan_file: two index columns for rank 3')

   ! Save, load.
   call p%save(d//'/P.hrry', stat)
   call expect(stat, COO_OK, 'save')
   call s%load(d//'/P.hrry', stat, one_based=.true.)
   call expect(stat, COO_OK, 'load')
   call s%info(sd)
   call check(sd%nnz == pd%nnz .and. sd%digest == pd%digest .and. sd%layout == pd%layout, &
              'the loaded plan''s details')
   call s%assemble(ke(:, :, :, 2), out2, stat)
   call check(stat == COO_OK .and. same_bits(out2, out), 'the loaded plan refills the same')
   call s%structure(ind2, ptr2, stat)
   call check(stat == COO_OK .and. all(ind2 == ind) .and. all(ptr2 == ptr), &
              'the loaded plan''s structure')

   ! Complex plans: each part summed exactly on its own, so a complex
   ! refill's parts are, bit for bit, the real plan's refills of the parts.
   allocate (zout(nnz), zout2(nnz), re_out(nnz), im_out(nnz), cout(nnz))
   zke = cmplx(ke(:, :, :, 1), ke(:, :, :, 2), kind=c_double_complex)
   call zp%init_elements([NN, NN], dofs, dtype=COO_C128, stat=stat, layout=COO_LAYOUT_CSR, &
                         threads=2, one_based=.true.)
   call expect(stat, COO_OK, 'a complex128 plan of the element matrices')
   call zp%assemble(zke, zout, stat)
   call expect(stat, COO_OK, 'complex refill of element matrices')
   call p%assemble(ke(:, :, :, 1), re_out, stat)
   call p%assemble(ke(:, :, :, 2), im_out, stat)
   call check(same_bits(real(zout, real64), re_out) .and. same_bits(aimag(zout), im_out), &
              'complex128: each part is the real plan''s refill of that part')
   zvals = reshape(zke, [N])
   call q%init([NN, NN], idx, dtype=COO_C128, stat=stat, one_based=.true.)
   call expect(stat, COO_OK, 'a complex128 plan of arrays')
   call q%assemble(zvals, zout2, stat)
   call check(stat == COO_OK .and. same_bits(real(zout2, real64), re_out) .and. &
              same_bits(aimag(zout2), im_out), 'complex128 arrays: the same parts')
   ! complex64: small integral parts, whose sums float holds exactly.
   cvals = [(cmplx(mod(at, 7) - 3, mod(at, 5), kind=c_float_complex), at=1, N)]
   call cp%init([NN, NN], idx, dtype=COO_C64, stat=stat, one_based=.true.)
   call expect(stat, COO_OK, 'a complex64 plan')
   call cp%assemble(cvals, cout, stat)
   call expect(stat, COO_OK, 'complex64 refill')
   call q%assemble(cmplx(cvals, kind=c_double_complex), zout2, stat)
   call check(stat == COO_OK .and. all(cmplx(zout2, kind=c_float_complex) == cout), &
              'complex64 refill: the complex128 sums, rounded')
   ! Values of another type than the plan's: refused, the plan named.
   call cp%assemble(zvals, zout, stat)
   call expect(stat, COO_ERR_ARGUMENT, 'complex(c_double_complex) into a complex64 plan')
   call check(index(coo_error_message(), 'need a plan of dtype 13') > 0, &
              'the message names the plan''s dtype needed')
   call p%assemble(zke, zout, stat)
   call expect(stat, COO_ERR_ARGUMENT, 'complex values into a float64 plan')
   call zp%free()
   call cp%free()

   ! Errors.
   call p%assemble(vals(1:N - 1), out, stat)
   call expect(stat, COO_ERR_ARGUMENT, 'one value too few')
   call check(index(coo_error_message(), 'values: n = 1799') > 0, 'the message names values')
   call p%assemble(vals, out(1:nnz - 1), stat)
   call expect(stat, COO_ERR_ARGUMENT, 'out one too short')
   call check(index(coo_error_message(), 'out: nnz =') > 0, 'the message names out')
   idx(17, 2) = 0
   call q%init([NN, NN], idx, stat=stat, one_based=.true.)
   call expect(stat, COO_ERR_INDEX, 'index 0, 1-based')
   call check(index(coo_error_message(), 'contribution 16: index -1 in dimension 1') > 0, &
              'the message names the (0-based) contribution and dimension')
   call check(.not. c_associated(q%handle), 'a failed init leaves no plan')
   idx(17, 2) = NN + 1
   call q%init([NN, NN], idx, stat=stat, one_based=.true.)
   call expect(stat, COO_ERR_INDEX, 'an index past its extent')
   dofs(2, 5) = 0
   call q%init_elements([NN, NN], dofs, stat=stat, one_based=.true.)
   call expect(stat, COO_ERR_INDEX, 'dof 0, 1-based')
   call check(index(coo_error_message(), 'dofs(2, 5): index -1 (0-based) is negative') > 0, &
              'the message names the dof')
   dofs(2, 5) = 6
   call q%init([NN, NN, NN], idx, stat=stat)
   call expect(stat, COO_ERR_RANK, 'two index columns for rank 3')
   call q%init_elements([NN, NN], dofs, stat=stat, memory_budget=100_int64, one_based=.true.)
   call expect(stat, COO_ERR_BUDGET, 'a 100-byte budget')
   n64 = z%nnz(stat)
   call expect(stat, COO_ERR_NULL, 'a plan never made')
   call z%assemble(vals, out, stat)
   call expect(stat, COO_ERR_NULL, 'a refill without a plan')
   call z%load(d//'/missing.hrry', stat)
   call expect(stat, COO_ERR_IO, 'a missing plan file')
   call read_bytes(d//'/P.hrry', bytes)
   call check(size(bytes) > 100, 'the plan file reads')
   bytes(size(bytes)/2) = not(bytes(size(bytes)/2))
   call write_bytes(d//'/damaged.hrry', bytes)
   call z%load(d//'/damaged.hrry', stat)
   call expect(stat, COO_ERR_INVALID_FILE, 'a damaged plan file')
   call z%load(d//'/B1.hrry', stat)
   call expect(stat, COO_ERR_INVALID_FILE, 'a matrix file')
   call check(index(coo_error_message(), 'not a plan file') > 0, 'the message says so')
   ! A freed plan: the layer forgets its handle (COO_ERR_NULL); the C
   ! function on the stale handle says it is not live (COO_ERR_STATE).
   h = s%handle
   call s%free()
   n64 = s%nnz(stat)
   call expect(stat, COO_ERR_NULL, 'nnz after free')
   stat = coo_plan_nnz(h, cnnz)
   call expect(stat, COO_ERR_STATE, 'coo_plan_nnz on a freed handle')
   call check(index(coo_error_message(), 'not a live plan') > 0, 'the message says why')
   call s%free()
   call p%free()
   call q%free()

   ! A plan the builder records while it assembles (record_plan,
   ! finish_recorded), refilled by pushing the element matrices' values.
   call bld%init([NN, NN], stat=stat, threads=2, one_based=.true.)
   call bld%record_plan(stat)
   call expect(stat, COO_OK, 'record_plan')
   do e = 1, NE
      call bld%push_element(dofs(:, e), ke(:, :, e, 1), stat)
   end do
   call bld%finish_recorded(d//'/R1.hrry', rp, d//'/R.plan', stat=stat)
   call expect(stat, COO_OK, 'finish_recorded')
   call check(rp%contributions() == N, 'the recorded plan takes every contribution')
   call builder_file(d//'/R2.hrry', 2)
   call rf%init(rp, stat)
   call expect(stat, COO_OK, 'refill init')
   do e = 1, NE
      call rf%push(ke(:, :, e, 2), stat)
   end do
   call rf%write(d//'/RW.hrry', stat)
   call expect(stat, COO_OK, 'refill write')
   call read_bytes(d//'/R2.hrry', bytes)
   call read_bytes(d//'/RW.hrry', bytes2)
   call check(size(bytes) > 100 .and. size(bytes) == size(bytes2), 'the refill file''s size')
   if (size(bytes) == size(bytes2)) call check(all(bytes == bytes2), &
                                               'the pushed refill writes the builder''s bytes')
   allocate (rout(rp%nnz()))
   do e = 1, NE
      call rf%push(ke(:, :, e, 2), stat)
   end do
   call rf%assemble(rout, stat)
   call expect(stat, COO_OK, 'refill assemble')
   call read_file(d//'/R2.hrry', fidx, fv)
   call check(same_bits(rout, fv), 'the pushed refill in memory holds the builder''s values')
   call rf%write(d//'/RX.hrry', stat)
   call expect(stat, COO_ERR_ARGUMENT, 'a refill without its values')
   call rf%free()
   call rp%free()

   print '(i0,a)', failures, ' failed'

contains

   !> The reference: the element matrices of round r through push_element.
   subroutine builder_file(path, r)
      character(len=*), intent(in) :: path
      integer, intent(in) :: r
      integer :: st, el
      call bld%init([NN, NN], stat=st, threads=2, one_based=.true.)
      call expect(st, COO_OK, 'builder init')
      do el = 1, NE
         call bld%push_element(dofs(:, el), ke(:, :, el, r), st)
         if (st /= COO_OK) exit
      end do
      call expect(st, COO_OK, 'builder push_element')
      call bld%finish(path, summary, st)
      call expect(st, COO_OK, 'builder finish')
   end subroutine builder_file

   !> Every entry of a file (1-based coordinates) in storage order.
   subroutine read_file(path, coords, values)
      character(len=*), intent(in) :: path
      integer(int64), allocatable, intent(out) :: coords(:, :)
      real(real64), allocatable, intent(out) :: values(:)
      type(coo_file_t) :: f
      type(coo_info) :: info
      integer :: st, got
      call f%open(path, st, one_based=.true.)
      if (st /= COO_OK) then
         allocate (coords(2, 0), values(0))
         return
      end if
      call f%info(info)
      allocate (coords(2, info%nnz), values(info%nnz))
      call f%read_entries(1_int64, coords, values, got)
      if (got /= info%nnz) then
         deallocate (coords, values)
         allocate (coords(2, 0), values(0))
      end if
      call f%close()
   end subroutine read_file

   logical function same_bits(x, y)
      real(real64), intent(in) :: x(:), y(:)
      same_bits = size(x) == size(y)
      if (same_bits) same_bits = all(transfer(x, 0_int64, size(x)) == &
                                     transfer(y, 0_int64, size(y)))
   end function same_bits

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
   end subroutine read_bytes

   subroutine write_bytes(path, bytes)
      character(len=*), intent(in) :: path
      integer(int8), intent(in) :: bytes(:)
      integer :: u
      open (newunit=u, file=path, access='stream', form='unformatted', status='replace', &
            action='write')
      write (u) bytes
      close (u)
   end subroutine write_bytes

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

end program plan
