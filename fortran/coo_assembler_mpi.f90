! coo_assembler_mpi: distributed assembly from Fortran (issue 42), over the
! C library built with MPI (`cargo build --release -p coo-assembler-capi
! --features mpi`; docs/c-api.md). Compile it after coo_assembler.f90 with
! the MPI compiler wrapper (mpif90).
!
! The communicator is its Fortran handle: the `integer` of `use mpi` /
! mpif.h, or `comm%MPI_VAL` of `use mpi_f08`. Every procedure marked
! collective is called by every rank. A rank whose code fails calls
! `free` on its unfinished builder: every other rank's finish then fails
! with COO_ERR_REMOTE naming it, and nobody waits.
!
! Indices are 0-based unless `one_based=.true.` (then dofs and rows are
! 1-based, and so is the band's row pointer and columns, as Fortran codes
! and PETSc's Fortran CSR calls with 1-based arrays expect them).
module coo_assembler_mpi
   use, intrinsic :: iso_c_binding
   use, intrinsic :: iso_fortran_env, only: int64, real64
   use coo_assembler, only: coo_options, coo_last_status, settle, fill_options, &
      COO_OK, COO_F64
   implicit none
   private

   type, bind(c) :: coo_band
      integer(c_int64_t) :: row_lo, row_hi, ncols, nnz
      integer(c_int32_t) :: index_bits
      integer(c_int) :: dtype
      type(c_ptr) :: row_ptr, cols, values, owner
   end type coo_band

   interface
      function coo_dist_builder_new(comm, rank, shape, dtype, options, local_rows) &
         bind(c, name="coo_dist_builder_new") result(b)
         import :: c_int, c_int32_t, c_int64_t, c_ptr, coo_options
         integer(c_int), value :: comm
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_int64_t), value :: local_rows
         type(c_ptr) :: b
      end function coo_dist_builder_new
      function coo_dist_builder_push_element(b, n, dofs, ke) &
         bind(c, name="coo_dist_builder_push_element") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: dofs(*)
         real(c_double), intent(in) :: ke(*)
         integer(c_int) :: s
      end function coo_dist_builder_push_element
      function coo_dist_builder_push(b, idx, value) &
         bind(c, name="coo_dist_builder_push") result(s)
         import :: c_ptr, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), value :: value
         integer(c_int) :: s
      end function coo_dist_builder_push
      function coo_dist_builder_finish(b, path) bind(c, name="coo_dist_builder_finish") result(s)
         import :: c_ptr, c_char, c_int
         type(c_ptr), value :: b
         character(kind=c_char), intent(in) :: path(*)
         integer(c_int) :: s
      end function coo_dist_builder_finish
      function coo_dist_builder_finish_per_rank(b, path) &
         bind(c, name="coo_dist_builder_finish_per_rank") result(s)
         import :: c_ptr, c_char, c_int
         type(c_ptr), value :: b
         character(kind=c_char), intent(in) :: path(*)
         integer(c_int) :: s
      end function coo_dist_builder_finish_per_rank
      function coo_dist_builder_finish_planned(b, bits, band, plan) &
         bind(c, name="coo_dist_builder_finish_planned") result(s)
         import :: c_ptr, c_int
         type(c_ptr), value :: b
         integer(c_int), value :: bits
         type(c_ptr), intent(out) :: band, plan
         integer(c_int) :: s
      end function coo_dist_builder_finish_planned
      function coo_dist_builder_finish_csr(b, bits, band) &
         bind(c, name="coo_dist_builder_finish_csr") result(s)
         import :: c_ptr, c_int
         type(c_ptr), value :: b
         integer(c_int), value :: bits
         type(c_ptr), intent(out) :: band
         integer(c_int) :: s
      end function coo_dist_builder_finish_csr
      subroutine coo_dist_builder_free(b) bind(c, name="coo_dist_builder_free")
         import :: c_ptr
         type(c_ptr), value :: b
      end subroutine coo_dist_builder_free
      function coo_dist_plan_refill(p, n, values, out, out_len) &
         bind(c, name="coo_dist_plan_refill") result(s)
         import :: c_ptr, c_size_t, c_double, c_int
         type(c_ptr), value :: p
         integer(c_size_t), value :: n
         real(c_double), intent(in) :: values(*)
         real(c_double), intent(out) :: out(*)
         integer(c_size_t), value :: out_len
         integer(c_int) :: s
      end function coo_dist_plan_refill
      subroutine coo_dist_plan_free(p) bind(c, name="coo_dist_plan_free")
         import :: c_ptr
         type(c_ptr), value :: p
      end subroutine coo_dist_plan_free
      subroutine coo_band_free(band) bind(c, name="coo_band_free")
         import :: c_ptr
         type(c_ptr), value :: band
      end subroutine coo_band_free
   end interface

   !> A distributed builder of a float64 matrix (collective init and finish).
   type, public :: coo_dist_builder_t
      type(c_ptr) :: handle = c_null_ptr
      integer(int64) :: base = 0
   contains
      procedure :: init => dist_init
      procedure :: push => dist_push
      procedure :: push_element => dist_push_element
      procedure :: finish => dist_finish
      procedure :: finish_per_rank => dist_finish_per_rank
      procedure :: finish_csr => dist_finish_csr
      procedure :: finish_planned => dist_finish_planned
      procedure :: free => dist_free
   end type coo_dist_builder_t

   !> A plan across ranks: refill a band from new values (collective).
   type, public :: coo_dist_plan_t
      type(c_ptr) :: handle = c_null_ptr
      integer(int64) :: nnz = 0
   contains
      procedure :: refill => plan_refill
      procedure :: free => plan_free
   end type coo_dist_plan_t

contains

   !> Collective: an n_rows x n_cols float64 matrix on `comm` (a Fortran
   !> handle). `local_rows`: this rank's row count (PETSc's local size);
   !> absent: chosen from a sample of the pushed rows. The other optional
   !> arguments are coo_builder_t%init's (`memory_budget` per rank;
   !> `duplicates` COO_DUP_LAST is refused across ranks; `layout` is the
   !> files' layout, a band in memory is CSR), the same on every rank.
   subroutine dist_init(self, comm, n_rows, n_cols, local_rows, memory_budget, one_based, stat, &
                        temp_dir, threads, duplicates, drop_zeros, exact_sums, layout)
      class(coo_dist_builder_t), intent(inout) :: self
      integer, intent(in) :: comm
      integer(int64), intent(in) :: n_rows, n_cols
      integer(int64), intent(in), optional :: local_rows, memory_budget
      logical, intent(in), optional :: one_based
      integer, intent(out), optional :: stat
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums
      integer(c_int), intent(in), optional :: layout
      type(coo_options) :: o
      character(kind=c_char, len=:), allocatable, target :: dir
      integer(c_int64_t) :: local
      integer(c_int) :: status
      call fill_options(o, dir, memory_budget, temp_dir, threads, duplicates, &
                        drop_zeros, exact_sums)
      if (present(layout)) o%layout = layout
      local = -1
      if (present(local_rows)) local = local_rows
      self%base = 0
      if (present(one_based)) then
         if (one_based) self%base = 1
      end if
      self%handle = coo_dist_builder_new(int(comm, c_int), 2_c_int32_t, [n_rows, n_cols], &
                                         COO_F64, o, local)
      status = COO_OK
      if (.not. c_associated(self%handle)) status = coo_last_status()
      call settle(status, 'coo_dist_builder_new', stat)
   end subroutine dist_init

   !> Push one contribution `value` at (row, col), any coordinate.
   subroutine dist_push(self, row, col, value, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      integer(int64), intent(in) :: row, col
      real(real64), intent(in) :: value
      integer, intent(out), optional :: stat
      call settle(coo_dist_builder_push(self%handle, [row, col] - self%base, value), &
                  'coo_dist_builder_push', stat)
   end subroutine dist_push

   !> Push the element matrix ke(a, b) at (dofs(a), dofs(b)).
   subroutine dist_push_element(self, dofs, ke, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      integer(int64), intent(in) :: dofs(:)
      real(real64), intent(in) :: ke(:, :)
      integer, intent(out), optional :: stat
      ! The C call takes ke row-major: ke(a, b) at a * n + b.
      call settle(coo_dist_builder_push_element(self%handle, int(size(dofs), c_size_t), &
                                                dofs - self%base, &
                                                reshape(transpose(ke), [size(ke)])), &
                  'coo_dist_builder_push_element', stat)
   end subroutine dist_push_element

   !> Collective: the partition composite at `path`.
   subroutine dist_finish(self, path, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      integer, intent(out), optional :: stat
      call released(self, coo_dist_builder_finish(self%handle, trim(path)//c_null_char), &
                    'coo_dist_builder_finish', stat)
   end subroutine dist_finish

   !> Collective: this rank's band as a plain file at `path`, a path of its
   !> own (no shared filesystem); published only if every rank succeeded.
   subroutine dist_finish_per_rank(self, path, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      integer, intent(out), optional :: stat
      call released(self, coo_dist_builder_finish_per_rank(self%handle, trim(path)//c_null_char), &
                    'coo_dist_builder_finish_per_rank', stat)
   end subroutine dist_finish_per_rank

   !> After a finish, which releases the handle whatever `status` is.
   subroutine released(self, status, what, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      integer(c_int), intent(in) :: status
      character(len=*), intent(in) :: what
      integer, intent(out), optional :: stat
      self%handle = c_null_ptr
      call settle(status, what, stat)
   end subroutine released

   !> A C band copied into Fortran arrays (indices shifted by `base`).
   subroutine take_band(p, base, row_ptr, cols, values, row_lo, row_hi)
      type(c_ptr), intent(in) :: p
      integer(int64), intent(in) :: base
      integer(int64), allocatable, intent(out) :: row_ptr(:), cols(:)
      real(real64), allocatable, intent(out) :: values(:)
      integer(int64), intent(out) :: row_lo, row_hi
      type(coo_band), pointer :: b
      integer(c_int64_t), pointer :: pp(:), cc(:)
      real(c_double), pointer :: vv(:)
      call c_f_pointer(p, b)
      call c_f_pointer(b%row_ptr, pp, [b%row_hi - b%row_lo + 1])
      call c_f_pointer(b%cols, cc, [b%nnz])
      call c_f_pointer(b%values, vv, [b%nnz])
      row_ptr = pp + base
      cols = cc + base
      values = vv
      row_lo = b%row_lo + base
      row_hi = b%row_hi - 1 + base
      call coo_band_free(p)
   end subroutine take_band

   !> Collective: this rank's rows row_lo..row_hi (inclusive) as CSR arrays.
   subroutine dist_finish_csr(self, row_ptr, cols, values, row_lo, row_hi, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      integer(int64), allocatable, intent(out) :: row_ptr(:), cols(:)
      real(real64), allocatable, intent(out) :: values(:)
      integer(int64), intent(out) :: row_lo, row_hi
      integer, intent(out), optional :: stat
      type(c_ptr) :: band
      integer(c_int) :: status
      status = coo_dist_builder_finish_csr(self%handle, 64_c_int, band)
      self%handle = c_null_ptr
      if (status == COO_OK) call take_band(band, self%base, row_ptr, cols, values, row_lo, row_hi)
      call settle(status, 'coo_dist_builder_finish_csr', stat)
   end subroutine dist_finish_csr

   !> Collective: as finish_csr, and the plan of what was pushed.
   subroutine dist_finish_planned(self, row_ptr, cols, values, row_lo, row_hi, plan, stat)
      class(coo_dist_builder_t), intent(inout) :: self
      integer(int64), allocatable, intent(out) :: row_ptr(:), cols(:)
      real(real64), allocatable, intent(out) :: values(:)
      integer(int64), intent(out) :: row_lo, row_hi
      type(coo_dist_plan_t), intent(out) :: plan
      integer, intent(out), optional :: stat
      type(c_ptr) :: band
      integer(c_int) :: status
      status = coo_dist_builder_finish_planned(self%handle, 64_c_int, band, plan%handle)
      self%handle = c_null_ptr
      if (status == COO_OK) then
         call take_band(band, self%base, row_ptr, cols, values, row_lo, row_hi)
         plan%nnz = size(values, kind=int64)
      end if
      call settle(status, 'coo_dist_builder_finish_planned', stat)
   end subroutine dist_finish_planned

   !> Release the builder; an unfinished one is given up on this rank (the
   !> other ranks' finish fails, naming it).
   subroutine dist_free(self)
      class(coo_dist_builder_t), intent(inout) :: self
      call coo_dist_builder_free(self%handle)
      self%handle = c_null_ptr
   end subroutine dist_free

   !> Collective: refill `out` (the band's values) from `values`, this
   !> rank's contributions in the order they were pushed.
   subroutine plan_refill(self, values, out, stat)
      class(coo_dist_plan_t), intent(inout) :: self
      real(real64), intent(in) :: values(:)
      real(real64), intent(inout) :: out(:)
      integer, intent(out), optional :: stat
      call settle(coo_dist_plan_refill(self%handle, int(size(values), c_size_t), values, out, &
                                       int(size(out), c_size_t)), 'coo_dist_plan_refill', stat)
   end subroutine plan_refill

   subroutine plan_free(self)
      class(coo_dist_plan_t), intent(inout) :: self
      call coo_dist_plan_free(self%handle)
      self%handle = c_null_ptr
   end subroutine plan_free

end module coo_assembler_mpi
