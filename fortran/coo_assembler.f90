! coo_assembler: Fortran interface to the coo-assembler C library
! (libcoo_assembler.so / .a; see docs/c-api.md).
!
! Two layers:
! - the C API itself through ISO_C_BINDING (coo_builder_new, coo_pusher_push,
!   ..., same names, types and status codes as include/coo_assembler.h);
! - a thin idiomatic layer: derived types coo_builder_t, coo_pusher_t,
!   coo_file_t and coo_plan_t (plan once, refill many times), and the
!   one-call coo_assemble (arrays in, file out), whose
!   procedures take Fortran strings, default or 64-bit integer indices,
!   optional 1-based indexing (one_based=.true.), and an optional `stat`
!   argument: when it is absent, an error prints the library's message and
!   stops the program.
!
! Threads: one coo_pusher_t per thread (e.g. per OpenMP thread); any number
! may be alive at once, more than `threads` too (they share the budget). A
! coo_builder_t's own push calls are serialised by a lock. A coo_file_t may
! be read from several threads, and a coo_plan_t refilled from several
! threads at once (each into its own result).
module coo_assembler
   use, intrinsic :: iso_c_binding
   use, intrinsic :: iso_fortran_env, only: error_unit, int32, int64
   implicit none
   private

   ! The values of every constant below are the header's (capi/tests/
   ! header.rs checks them against include/coo_assembler.h).
   ! coo_dtype (the library's table order)
   integer(c_int), parameter, public :: COO_F16 = 0, COO_BF16 = 1, COO_F32 = 2, &
      COO_F64 = 3, COO_I8 = 4, COO_U8 = 5, COO_I16 = 6, COO_U16 = 7, COO_I32 = 8, &
      COO_U32 = 9, COO_I64 = 10, COO_U64 = 11, COO_C64 = 12, COO_C128 = 13, &
      COO_BOOL = 14
   ! coo_non_finite
   integer(c_int), parameter, public :: COO_KEEP = 0, COO_REJECT_NAN = 1, &
      COO_REJECT_NON_FINITE = 2
   ! coo_duplicates
   integer(c_int), parameter, public :: COO_DUP_SUM = 0, COO_DUP_MIN = 1, &
      COO_DUP_MAX = 2, COO_DUP_LAST = 3, COO_DUP_ERROR = 4
   ! Status codes
   integer(c_int), parameter, public :: COO_OK = 0, COO_ERR_NULL = -1, &
      COO_ERR_ARGUMENT = -2, COO_ERR_INDEX = -3, COO_ERR_RANK = -4, COO_ERR_VALUE = -5, &
      COO_ERR_DUPLICATE = -6, COO_ERR_OVERFLOW = -7, COO_ERR_BUDGET = -8, &
      COO_ERR_IO = -9, COO_ERR_INVALID_FILE = -10, COO_ERR_STATE = -11, &
      COO_ERR_PANIC = -12, COO_ERR_OTHER = -13, COO_ERR_INPUT = -14, &
      COO_ERR_MEMORY = -15, COO_ERR_UNSUPPORTED = -16, COO_ERR_NOT_FOUND = -17, &
      COO_ERR_REMOTE = -18, &
      COO_ERR_REFUSED = -19
   integer, parameter, public :: COO_MAX_RANK = 64
   ! coo_layout (from coo_file_layout)
   integer(c_int), parameter, public :: COO_LAYOUT_COO = 0, COO_LAYOUT_CSR = 1, &
      COO_LAYOUT_CSC = 2, COO_LAYOUT_CSF = 3
   ! coo_push_form and coo_value_kind (coo_builder_push_values)
   integer(c_int), parameter, public :: COO_PUSH_ONE = 0, COO_PUSH_MANY = 1, &
      COO_PUSH_ELEMENT = 2
   integer(c_int), parameter, public :: COO_VALUES_REAL = 0, COO_VALUES_COMPLEX = 1

   ! The C structs. Unsigned C fields are signed here (Fortran has no
   ! unsigned integers); the values involved stay far below 2^63.
   type, bind(c), public :: coo_options
      integer(c_int32_t) :: size
      integer(c_int64_t) :: memory_budget
      type(c_ptr) :: temp_dir
      integer(c_int32_t) :: threads
      integer(c_int) :: duplicates
      logical(c_bool) :: drop_zeros
      logical(c_bool) :: exact_sums
      integer(c_int) :: non_finite
      integer(c_int) :: layout
      integer(c_int64_t) :: expected_contributions
      type(c_ptr) :: tensor_name
      logical(c_bool) :: skip_negative
      integer(c_int32_t) :: mode_order_len
      integer(c_int32_t) :: mode_order(64)
   end type coo_options

   type, bind(c), public :: coo_summary
      integer(c_int64_t) :: contributions, nnz, runs_spilled, merge_passes, &
         bytes_spilled, peak_buffer_bytes
      real(c_double) :: seconds
      integer(c_int64_t) :: skipped_negative
   end type coo_summary

   type, bind(c), public :: coo_info
      integer(c_int32_t) :: rank
      integer(c_int64_t) :: shape(64)
      integer(c_int) :: dtype
      integer(c_int64_t) :: nnz
      logical(c_bool) :: sorted
   end type coo_info

   !> Options of coo_file_export (API 5); fill with coo_export_options_default.
   type, bind(c), public :: coo_export_options
      integer(c_int32_t) :: size
      logical(c_bool) :: symmetric
      logical(c_bool) :: petsc_int64
      type(c_ptr) :: npz_layout
      integer(c_int64_t) :: reorder_memory
      type(c_ptr) :: paging
   end type coo_export_options

   !> What coo_file_export wrote.
   type, bind(c), public :: coo_export_summary
      integer(c_int64_t) :: entries, bytes
   end type coo_export_summary

   !> What a plan is (coo_plan_info): its tensor, the lengths of a refill's
   !> values (contributions) and result (nnz), of its structure's arrays.
   type, bind(c), public :: coo_plan_details
      integer(c_int32_t) :: rank
      integer(c_int64_t) :: shape(64)
      integer(c_int) :: dtype
      integer(c_int) :: layout
      integer(c_int64_t) :: nnz, contributions, indices_len, pointers_len, memory_bytes, digest
   end type coo_plan_details

   ! ------------------------------------------------------------------
   ! The C API (see include/coo_assembler.h for each function's contract)
   ! ------------------------------------------------------------------
   public :: coo_builder_push_values, coo_pusher_push_values
   public :: coo_options_default, coo_builder_new, coo_builder_push, &
      coo_builder_push_many, coo_builder_push_element, coo_pusher_new, &
      coo_pusher_push, coo_pusher_push_many, coo_pusher_push_element, &
      coo_pusher_free, coo_builder_finish, coo_builder_free, coo_last_error, &
      coo_set_last_error, coo_last_status, coo_file_open, coo_file_open_tensor, coo_file_info, &
      coo_file_get, coo_file_read_entries, coo_file_verify, coo_file_close, coo_file_layout, &
      coo_file_export, coo_export_options_default, &
      coo_options_set, coo_builder_push_file, coo_api_version, coo_assemble_arrays, &
      coo_assemble_arrays_i32, coo_plan_new, coo_plan_new_i32, coo_plan_elements, &
      coo_plan_elements_i32, coo_plan_load, coo_plan_save, coo_plan_free, coo_plan_nnz, &
      coo_plan_contributions, coo_plan_info, coo_plan_structure, coo_plan_assemble, &
      coo_plan_assemble_typed, coo_builder_push_complex, coo_builder_push_many_complex, &
      coo_builder_push_element_complex, coo_pusher_push_complex, &
      coo_pusher_push_many_complex, coo_pusher_push_element_complex, coo_plan_file_new, &
      coo_plan_file_new_i32, coo_refill_file, coo_builder_record_plan, &
      coo_builder_finish_recorded, coo_refill_new, coo_refill_push, coo_refill_assemble, &
      coo_refill_write, coo_refill_free

   interface
      subroutine coo_options_default(out) bind(c, name="coo_options_default")
         import :: coo_options
         type(coo_options), intent(out) :: out
      end subroutine coo_options_default

      function coo_options_set(o, name, value) bind(c, name="coo_options_set") result(s)
         import :: coo_options, c_char, c_int
         type(coo_options), intent(inout) :: o
         character(kind=c_char), intent(in) :: name(*), value(*)
         integer(c_int) :: s
      end function coo_options_set

      function coo_builder_push_file(b, path, format, count) &
         bind(c, name="coo_builder_push_file") result(s)
         import :: c_ptr, c_char, c_int
         type(c_ptr), value :: b
         character(kind=c_char), intent(in) :: path(*)
         type(c_ptr), value :: format
         type(c_ptr), value :: count
         integer(c_int) :: s
      end function coo_builder_push_file

      function coo_api_version() bind(c, name="coo_api_version") result(v)
         import :: c_int32_t
         integer(c_int32_t) :: v
      end function coo_api_version

      function coo_builder_new(rank, shape, dtype, options) &
         bind(c, name="coo_builder_new") result(b)
         import :: c_int32_t, c_int64_t, c_int, c_ptr, coo_options
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         type(c_ptr) :: b
      end function coo_builder_new

      function coo_builder_push(b, idx, value) bind(c, name="coo_builder_push") result(s)
         import :: c_ptr, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), value :: value
         integer(c_int) :: s
      end function coo_builder_push

      ! The one push of a builder (the others call it): `form` and `kind`
      ! say what idx and values hold for n (COO_PUSH_*, COO_VALUES_*).
      function coo_builder_push_values(b, form, kind, n, idx, values) &
         bind(c, name="coo_builder_push_values") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_int), value :: form, kind
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), intent(in) :: values(*)
         integer(c_int) :: s
      end function coo_builder_push_values

      ! As coo_builder_push_values, through this thread's pusher.
      function coo_pusher_push_values(p, form, kind, n, idx, values) &
         bind(c, name="coo_pusher_push_values") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: p
         integer(c_int), value :: form, kind
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), intent(in) :: values(*)
         integer(c_int) :: s
      end function coo_pusher_push_values

      function coo_builder_push_many(b, n, idx, values) &
         bind(c, name="coo_builder_push_many") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), intent(in) :: values(*)
         integer(c_int) :: s
      end function coo_builder_push_many

      function coo_builder_push_element(b, k, dofs, ke) &
         bind(c, name="coo_builder_push_element") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_size_t), value :: k
         integer(c_int64_t), intent(in) :: dofs(*)
         real(c_double), intent(in) :: ke(*)
         integer(c_int) :: s
      end function coo_builder_push_element

      function coo_pusher_new(b) bind(c, name="coo_pusher_new") result(p)
         import :: c_ptr
         type(c_ptr), value :: b
         type(c_ptr) :: p
      end function coo_pusher_new

      function coo_pusher_push(p, idx, value) bind(c, name="coo_pusher_push") result(s)
         import :: c_ptr, c_int64_t, c_double, c_int
         type(c_ptr), value :: p
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), value :: value
         integer(c_int) :: s
      end function coo_pusher_push

      function coo_pusher_push_many(p, n, idx, values) &
         bind(c, name="coo_pusher_push_many") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: p
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), intent(in) :: values(*)
         integer(c_int) :: s
      end function coo_pusher_push_many

      function coo_pusher_push_element(p, k, dofs, ke) &
         bind(c, name="coo_pusher_push_element") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double, c_int
         type(c_ptr), value :: p
         integer(c_size_t), value :: k
         integer(c_int64_t), intent(in) :: dofs(*)
         real(c_double), intent(in) :: ke(*)
         integer(c_int) :: s
      end function coo_pusher_push_element

      ! Complex values: `complex(c_double_complex)` is the (real, imaginary)
      ! pair of doubles the C functions read.
      function coo_builder_push_complex(b, idx, re, im) &
         bind(c, name="coo_builder_push_complex") result(s)
         import :: c_ptr, c_int64_t, c_double, c_int
         type(c_ptr), value :: b
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), value :: re, im
         integer(c_int) :: s
      end function coo_builder_push_complex

      function coo_builder_push_many_complex(b, n, idx, values) &
         bind(c, name="coo_builder_push_many_complex") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double_complex, c_int
         type(c_ptr), value :: b
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: idx(*)
         complex(c_double_complex), intent(in) :: values(*)
         integer(c_int) :: s
      end function coo_builder_push_many_complex

      function coo_builder_push_element_complex(b, k, dofs, ke) &
         bind(c, name="coo_builder_push_element_complex") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double_complex, c_int
         type(c_ptr), value :: b
         integer(c_size_t), value :: k
         integer(c_int64_t), intent(in) :: dofs(*)
         complex(c_double_complex), intent(in) :: ke(*)
         integer(c_int) :: s
      end function coo_builder_push_element_complex

      function coo_pusher_push_complex(p, idx, re, im) &
         bind(c, name="coo_pusher_push_complex") result(s)
         import :: c_ptr, c_int64_t, c_double, c_int
         type(c_ptr), value :: p
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), value :: re, im
         integer(c_int) :: s
      end function coo_pusher_push_complex

      function coo_pusher_push_many_complex(p, n, idx, values) &
         bind(c, name="coo_pusher_push_many_complex") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double_complex, c_int
         type(c_ptr), value :: p
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(in) :: idx(*)
         complex(c_double_complex), intent(in) :: values(*)
         integer(c_int) :: s
      end function coo_pusher_push_many_complex

      function coo_pusher_push_element_complex(p, k, dofs, ke) &
         bind(c, name="coo_pusher_push_element_complex") result(s)
         import :: c_ptr, c_size_t, c_int64_t, c_double_complex, c_int
         type(c_ptr), value :: p
         integer(c_size_t), value :: k
         integer(c_int64_t), intent(in) :: dofs(*)
         complex(c_double_complex), intent(in) :: ke(*)
         integer(c_int) :: s
      end function coo_pusher_push_element_complex

      subroutine coo_pusher_free(p) bind(c, name="coo_pusher_free")
         import :: c_ptr
         type(c_ptr), value :: p
      end subroutine coo_pusher_free

      function coo_builder_finish(b, path, out) bind(c, name="coo_builder_finish") result(s)
         import :: c_ptr, c_char, c_int, coo_summary
         type(c_ptr), value :: b
         character(kind=c_char), intent(in) :: path(*)
         type(coo_summary), intent(out) :: out
         integer(c_int) :: s
      end function coo_builder_finish

      !> indices(d) points to the n indices of dimension d (c_loc of a
      !> contiguous int64 array); values to n doubles (value_type COO_F64).
      function coo_assemble_arrays(rank, shape, dtype, options, n, indices, values, &
                                   value_type, path, out) &
         bind(c, name="coo_assemble_arrays") result(s)
         import :: c_int32_t, c_int64_t, c_int, c_size_t, c_ptr, c_char, coo_options, &
            coo_summary
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: n
         type(c_ptr), intent(in) :: indices(*)
         type(c_ptr), value :: values
         integer(c_int), value :: value_type
         character(kind=c_char), intent(in) :: path(*)
         type(coo_summary), intent(out) :: out
         integer(c_int) :: s
      end function coo_assemble_arrays

      !> As coo_assemble_arrays, indices(d) pointing to int32 arrays.
      function coo_assemble_arrays_i32(rank, shape, dtype, options, n, indices, values, &
                                       value_type, path, out) &
         bind(c, name="coo_assemble_arrays_i32") result(s)
         import :: c_int32_t, c_int64_t, c_int, c_size_t, c_ptr, c_char, coo_options, &
            coo_summary
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: n
         type(c_ptr), intent(in) :: indices(*)
         type(c_ptr), value :: values
         integer(c_int), value :: value_type
         character(kind=c_char), intent(in) :: path(*)
         type(coo_summary), intent(out) :: out
         integer(c_int) :: s
      end function coo_assemble_arrays_i32

      subroutine coo_builder_free(b) bind(c, name="coo_builder_free")
         import :: c_ptr
         type(c_ptr), value :: b
      end subroutine coo_builder_free

      function coo_last_error() bind(c, name="coo_last_error") result(msg)
         import :: c_ptr
         type(c_ptr) :: msg
      end function coo_last_error

      subroutine coo_set_last_error(status, message) bind(c, name="coo_set_last_error")
         import :: c_int, c_char
         integer(c_int), value :: status
         character(kind=c_char), intent(in) :: message(*)
      end subroutine coo_set_last_error

      function coo_last_status() bind(c, name="coo_last_status") result(s)
         import :: c_int
         integer(c_int) :: s
      end function coo_last_status

      function coo_file_open(path) bind(c, name="coo_file_open") result(f)
         import :: c_char, c_ptr
         character(kind=c_char), intent(in) :: path(*)
         type(c_ptr) :: f
      end function coo_file_open

      function coo_file_open_tensor(path, name) bind(c, name="coo_file_open_tensor") result(f)
         import :: c_char, c_ptr
         character(kind=c_char), intent(in) :: path(*)
         character(kind=c_char), intent(in) :: name(*)
         type(c_ptr) :: f
      end function coo_file_open_tensor

      function coo_file_info(f, out) bind(c, name="coo_file_info") result(s)
         import :: c_ptr, c_int, coo_info
         type(c_ptr), value :: f
         type(coo_info), intent(out) :: out
         integer(c_int) :: s
      end function coo_file_info

      function coo_file_get(f, idx, value) bind(c, name="coo_file_get") result(s)
         import :: c_ptr, c_int64_t, c_double, c_int
         type(c_ptr), value :: f
         integer(c_int64_t), intent(in) :: idx(*)
         real(c_double), intent(out) :: value
         integer(c_int) :: s
      end function coo_file_get

      function coo_file_read_entries(f, first, n, idx, values, n_read) &
         bind(c, name="coo_file_read_entries") result(s)
         import :: c_ptr, c_int64_t, c_size_t, c_double, c_int
         type(c_ptr), value :: f
         integer(c_int64_t), value :: first
         integer(c_size_t), value :: n
         integer(c_int64_t), intent(out) :: idx(*)
         real(c_double), intent(out) :: values(*)
         integer(c_size_t), intent(out) :: n_read
         integer(c_int) :: s
      end function coo_file_read_entries

      function coo_file_layout(f, out) bind(c, name="coo_file_layout") result(s)
         import :: c_ptr, c_int
         type(c_ptr), value :: f
         integer(c_int), intent(out) :: out
         integer(c_int) :: s
      end function coo_file_layout

      function coo_file_verify(f) bind(c, name="coo_file_verify") result(s)
         import :: c_ptr, c_int
         type(c_ptr), value :: f
         integer(c_int) :: s
      end function coo_file_verify

      subroutine coo_file_close(f) bind(c, name="coo_file_close")
         import :: c_ptr
         type(c_ptr), value :: f
      end subroutine coo_file_close

      subroutine coo_export_options_default(o) bind(c, name="coo_export_options_default")
         import :: coo_export_options
         type(coo_export_options), intent(out) :: o
      end subroutine coo_export_options_default

      function coo_file_export(f, path, format, options, summary) &
         bind(c, name="coo_file_export") result(s)
         import :: c_ptr, c_int, c_char, coo_export_options, coo_export_summary
         type(c_ptr), value :: f
         character(kind=c_char), intent(in) :: path(*), format(*)
         type(coo_export_options), intent(in) :: options
         type(coo_export_summary), intent(out) :: summary
         integer(c_int) :: s
      end function coo_file_export

      !> indices(d) points to the n indices of dimension d (c_loc of a
      !> contiguous int64 array), as in coo_assemble_arrays.
      function coo_plan_new(rank, shape, dtype, options, n, indices) &
         bind(c, name="coo_plan_new") result(p)
         import :: c_int32_t, c_int64_t, c_int, c_size_t, c_ptr, coo_options
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: n
         type(c_ptr), intent(in) :: indices(*)
         type(c_ptr) :: p
      end function coo_plan_new

      !> As coo_plan_new, indices(d) pointing to int32 arrays.
      function coo_plan_new_i32(rank, shape, dtype, options, n, indices) &
         bind(c, name="coo_plan_new_i32") result(p)
         import :: c_int32_t, c_int64_t, c_int, c_size_t, c_ptr, coo_options
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: n
         type(c_ptr), intent(in) :: indices(*)
         type(c_ptr) :: p
      end function coo_plan_new_i32

      !> dofs(k, elements), 0-based; element e's k x k values are read
      !> row-major (C's order): see coo_plan_t%init_elements for ke(a, b, e).
      function coo_plan_elements(shape, dtype, options, elements, k, dofs) &
         bind(c, name="coo_plan_elements") result(p)
         import :: c_int64_t, c_int, c_size_t, c_ptr, coo_options
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: elements, k
         integer(c_int64_t), intent(in) :: dofs(*)
         type(c_ptr) :: p
      end function coo_plan_elements

      function coo_plan_elements_i32(shape, dtype, options, elements, k, dofs) &
         bind(c, name="coo_plan_elements_i32") result(p)
         import :: c_int64_t, c_int32_t, c_int, c_size_t, c_ptr, coo_options
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: elements, k
         integer(c_int32_t), intent(in) :: dofs(*)
         type(c_ptr) :: p
      end function coo_plan_elements_i32

      function coo_plan_load(path) bind(c, name="coo_plan_load") result(p)
         import :: c_char, c_ptr
         character(kind=c_char), intent(in) :: path(*)
         type(c_ptr) :: p
      end function coo_plan_load

      function coo_plan_save(plan, path) bind(c, name="coo_plan_save") result(s)
         import :: c_ptr, c_char, c_int
         type(c_ptr), value :: plan
         character(kind=c_char), intent(in) :: path(*)
         integer(c_int) :: s
      end function coo_plan_save

      subroutine coo_plan_free(plan) bind(c, name="coo_plan_free")
         import :: c_ptr
         type(c_ptr), value :: plan
      end subroutine coo_plan_free

      function coo_plan_nnz(plan, out) bind(c, name="coo_plan_nnz") result(s)
         import :: c_ptr, c_int64_t, c_int
         type(c_ptr), value :: plan
         integer(c_int64_t), intent(out) :: out
         integer(c_int) :: s
      end function coo_plan_nnz

      function coo_plan_contributions(plan, out) bind(c, name="coo_plan_contributions") result(s)
         import :: c_ptr, c_int64_t, c_int
         type(c_ptr), value :: plan
         integer(c_int64_t), intent(out) :: out
         integer(c_int) :: s
      end function coo_plan_contributions

      function coo_plan_info(plan, out) bind(c, name="coo_plan_info") result(s)
         import :: c_ptr, c_int, coo_plan_details
         type(c_ptr), value :: plan
         type(coo_plan_details), intent(out) :: out
         integer(c_int) :: s
      end function coo_plan_info

      !> indices and pointers: c_loc of int64 arrays of indices_len and
      !> pointers_len (coo_plan_info), or c_null_ptr to skip one.
      function coo_plan_structure(plan, indices, indices_len, pointers, pointers_len) &
         bind(c, name="coo_plan_structure") result(s)
         import :: c_ptr, c_size_t, c_int
         type(c_ptr), value :: plan, indices, pointers
         integer(c_size_t), value :: indices_len, pointers_len
         integer(c_int) :: s
      end function coo_plan_structure

      function coo_plan_assemble(plan, values, n, out, nnz) &
         bind(c, name="coo_plan_assemble") result(s)
         import :: c_ptr, c_size_t, c_double, c_int
         type(c_ptr), value :: plan
         real(c_double), intent(in) :: values(*)
         integer(c_size_t), value :: n
         real(c_double), intent(inout) :: out(*)
         integer(c_size_t), value :: nnz
         integer(c_int) :: s
      end function coo_plan_assemble

      !> values and out: c_loc of arrays of value_type and of the plan's type.
      function coo_plan_assemble_typed(plan, values, value_type, n, out, nnz) &
         bind(c, name="coo_plan_assemble_typed") result(s)
         import :: c_ptr, c_size_t, c_int
         type(c_ptr), value :: plan, values
         integer(c_int), value :: value_type
         integer(c_size_t), value :: n
         type(c_ptr), value :: out
         integer(c_size_t), value :: nnz
         integer(c_int) :: s
      end function coo_plan_assemble_typed

      !> Plan out of core into the plan file `path` (see coo_plan_file).
      function coo_plan_file_new(rank, shape, dtype, options, n, indices, path) &
         bind(c, name="coo_plan_file_new") result(s)
         import :: c_int32_t, c_int64_t, c_int, c_size_t, c_ptr, c_char, coo_options
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: n
         type(c_ptr), intent(in) :: indices(*)
         character(kind=c_char), intent(in) :: path(*)
         integer(c_int) :: s
      end function coo_plan_file_new

      !> As coo_plan_file_new, indices(d) pointing to int32 arrays.
      function coo_plan_file_new_i32(rank, shape, dtype, options, n, indices, path) &
         bind(c, name="coo_plan_file_new_i32") result(s)
         import :: c_int32_t, c_int64_t, c_int, c_size_t, c_ptr, c_char, coo_options
         integer(c_int32_t), value :: rank
         integer(c_int64_t), intent(in) :: shape(*)
         integer(c_int), value :: dtype
         type(coo_options), intent(in) :: options
         integer(c_size_t), value :: n
         type(c_ptr), intent(in) :: indices(*)
         character(kind=c_char), intent(in) :: path(*)
         integer(c_int) :: s
      end function coo_plan_file_new_i32

      !> One step with a plan file and a values file, into `output`.
      function coo_builder_record_plan(b) bind(c, name="coo_builder_record_plan") result(s)
         import :: c_ptr, c_int
         type(c_ptr), value :: b
         integer(c_int) :: s
      end function coo_builder_record_plan

      !> plan: c_loc of a type(c_ptr) or c_null_ptr; plan_path: a C string or
      !> c_null_ptr (see coo_builder_t%finish_recorded).
      function coo_builder_finish_recorded(b, path, out, plan, plan_path) &
         bind(c, name="coo_builder_finish_recorded") result(s)
         import :: c_ptr, c_char, c_int, coo_summary
         type(c_ptr), value :: b
         character(kind=c_char), intent(in) :: path(*)
         type(coo_summary), intent(out) :: out
         type(c_ptr), value :: plan, plan_path
         integer(c_int) :: s
      end function coo_builder_finish_recorded

      function coo_refill_new(plan) bind(c, name="coo_refill_new") result(r)
         import :: c_ptr
         type(c_ptr), value :: plan
         type(c_ptr) :: r
      end function coo_refill_new

      function coo_refill_push(r, values, n) bind(c, name="coo_refill_push") result(s)
         import :: c_ptr, c_double, c_size_t, c_int
         type(c_ptr), value :: r
         real(c_double), intent(in) :: values(*)
         integer(c_size_t), value :: n
         integer(c_int) :: s
      end function coo_refill_push

      function coo_refill_assemble(r, out, nnz) bind(c, name="coo_refill_assemble") result(s)
         import :: c_ptr, c_double, c_size_t, c_int
         type(c_ptr), value :: r
         real(c_double), intent(inout) :: out(*)
         integer(c_size_t), value :: nnz
         integer(c_int) :: s
      end function coo_refill_assemble

      function coo_refill_write(r, path) bind(c, name="coo_refill_write") result(s)
         import :: c_ptr, c_char, c_int
         type(c_ptr), value :: r
         character(kind=c_char), intent(in) :: path(*)
         integer(c_int) :: s
      end function coo_refill_write

      subroutine coo_refill_free(r) bind(c, name="coo_refill_free")
         import :: c_ptr
         type(c_ptr), value :: r
      end subroutine coo_refill_free

      function coo_refill_file(plan, values, output, options) &
         bind(c, name="coo_refill_file") result(s)
         import :: c_char, c_int, coo_options
         character(kind=c_char), intent(in) :: plan(*), values(*), output(*)
         type(coo_options), intent(in) :: options
         integer(c_int) :: s
      end function coo_refill_file

      pure function c_strlen(s) bind(c, name="strlen") result(n)
         import :: c_ptr, c_size_t
         type(c_ptr), value, intent(in) :: s
         integer(c_size_t) :: n
      end function c_strlen
   end interface

   ! ------------------------------------------------------------------
   ! The idiomatic layer
   ! ------------------------------------------------------------------
   public :: coo_error_message, coo_assemble, coo_plan_file, coo_refill
   ! The status rule of every procedure here (into `stat`, or stop with the
   ! message), and the options' optional arguments, shared with module
   ! coo_assembler_mpi.
   public :: settle, fill_options

   !> Plan out of core, for patterns whose plan does not fit in memory:
   !> `call coo_plan_file(path, shape, idx(n, rank), ...)` writes the plan
   !> of the contributions idx(j, :) to the plan file `path` in parts that
   !> each fit `memory_budget` (spill files in `temp_dir`); the options are
   !> coo_plan_t%init's. Each step is then a `call coo_refill(...)`.
   interface coo_plan_file
      module procedure plan_file_s4_i4, plan_file_s4_i8, plan_file_s8_i4, plan_file_s8_i8
   end interface coo_plan_file

   !> Assemble a tensor from arrays in one call, straight into a file:
   !> `call coo_assemble(path, shape, idx, values, ...)`, idx(n, rank)
   !> (column d: every contribution's index in dimension d), values(n).
   interface coo_assemble
      module procedure assemble_s4_i4, assemble_s4_i8, assemble_s8_i4, assemble_s8_i8
   end interface coo_assemble

   !> What builders and pushers share: the handle, the index base and the
   !> push procedures (which go to coo_builder_push* or coo_pusher_push*).
   type, public :: coo_pushing_t
      type(c_ptr) :: handle = c_null_ptr
      integer :: rank = 0
      !> Subtracted from every index: 1 with one_based=.true.
      integer(int64) :: base = 0
      !> VIA_BUILDER or VIA_PUSHER, set by init.
      integer :: via = 0
   contains
      procedure, private :: push_i4, push_i8, push_z4, push_z8
      generic :: push => push_i4, push_i8, push_z4, push_z8
      procedure, private :: push_many_i4, push_many_i8, push_many_z8
      generic :: push_many => push_many_i4, push_many_i8, push_many_z8
      procedure, private :: push_element_i4, push_element_i8, push_element_z8
      generic :: push_element => push_element_i4, push_element_i8, push_element_z8
   end type coo_pushing_t

   !> An assembly. `call b%init(shape, dtype, ...)`, push, then
   !> `call b%finish(path)` (or `call b%free()` to abandon it).
   type, extends(coo_pushing_t), public :: coo_builder_t
   contains
      procedure, private :: init_i4 => builder_init_i4, init_i8 => builder_init_i8
      generic :: init => init_i4, init_i8
      procedure :: finish => builder_finish
      procedure :: record_plan => builder_record_plan
      procedure :: finish_recorded => builder_finish_recorded
      procedure :: free => builder_free
   end type coo_builder_t

   !> A pusher for one thread: `call p%init(b)`, push, `call p%free()`
   !> (every pusher must be freed before `b%finish`).
   type, extends(coo_pushing_t), public :: coo_pusher_t
   contains
      procedure :: init => pusher_init
      procedure :: free => pusher_free
   end type coo_pusher_t

   !> An open tensor: `call f%open(path)`, `f%info`, `f%layout`, `f%get`, `f%read_entries`,
   !> `f%verify`, `f%export`, `call f%close()`.
   type, public :: coo_file_t
      type(c_ptr) :: handle = c_null_ptr
      integer :: rank = 0
      integer(int64) :: base = 0
   contains
      procedure :: open => file_open
      procedure :: info => file_info
      procedure :: layout => file_layout
      procedure, private :: get_i4 => file_get_i4, get_i8 => file_get_i8
      generic :: get => get_i4, get_i8
      procedure :: read_entries => file_read_entries
      procedure :: verify => file_verify
      procedure :: export => file_export
      procedure :: close => file_close
   end type coo_file_t

   !> A plan (issue 24): the pattern of an assembly, computed once from
   !> its coordinates (`call p%init(shape, idx, ...)`, `call
   !> p%init_elements(shape, dofs, ...)` or `call p%load(path)`), then
   !> `call p%assemble(values, out)` as often as wanted: `out` gets, in
   !> place, bit for bit what coo_assemble or a coo_builder_t stores for
   !> those values. `p%info`, `p%nnz()`, `p%contributions()`,
   !> `p%structure(indices, pointers)`, `p%save(path)`, `call p%free()`.
   !> Immutable once made: several threads may refill from it at once.
   type, public :: coo_plan_t
      type(c_ptr) :: handle = c_null_ptr
      !> Added to the indices and pointers p%structure returns: 1 with
      !> one_based=.true.
      integer(int64) :: base = 0
   contains
      procedure, private :: plan_init_s4_i4, plan_init_s4_i8, plan_init_s8_i4, plan_init_s8_i8
      generic :: init => plan_init_s4_i4, plan_init_s4_i8, plan_init_s8_i4, plan_init_s8_i8
      procedure, private :: plan_elements_s4_i4, plan_elements_s4_i8, plan_elements_s8_i4, &
         plan_elements_s8_i8
      generic :: init_elements => plan_elements_s4_i4, plan_elements_s4_i8, &
         plan_elements_s8_i4, plan_elements_s8_i8
      procedure :: load => plan_load
      procedure :: save => plan_save
      procedure :: info => plan_info
      procedure :: nnz => plan_nnz
      procedure :: contributions => plan_contributions
      procedure :: structure => plan_structure
      procedure, private :: plan_assemble_1, plan_assemble_3, plan_assemble_z1, &
         plan_assemble_z3, plan_assemble_c1
      generic :: assemble => plan_assemble_1, plan_assemble_3, plan_assemble_z1, &
         plan_assemble_z3, plan_assemble_c1
      procedure :: free => plan_free
   end type coo_plan_t

   !> A refill whose values are pushed, for a plan a coo_builder_t recorded
   !> (`b%record_plan()`, `b%finish_recorded(path, p)`): `call
   !> r%init(p)`, then each step `r%push(ke)` (an element matrix, as
   !> push_element took it) or `r%push(values)` in the builder's push
   !> order, and `r%assemble(out)` or `r%write(path)`; `call r%free()`.
   type, public :: coo_refill_t
      type(c_ptr) :: handle = c_null_ptr
   contains
      procedure :: init => refill_init
      procedure, private :: refill_push_1, refill_push_2
      generic :: push => refill_push_1, refill_push_2
      procedure :: assemble => refill_assemble
      procedure :: write => refill_write
      procedure :: free => refill_free
   end type coo_refill_t

   !> Entries converted per C call when indices must be shifted or widened.
   integer, parameter :: BATCH = 1024

   !> Which C entry points a push goes to.
   integer, parameter :: VIA_BUILDER = 1, VIA_PUSHER = 2

contains

   !> This thread's last error message ("" if none).
   function coo_error_message() result(msg)
      character(len=:), allocatable :: msg
      type(c_ptr) :: p
      character(kind=c_char), pointer :: chars(:)
      integer :: n, i
      p = coo_last_error()
      n = int(c_strlen(p))
      allocate (character(len=n) :: msg)
      if (n == 0) return
      call c_f_pointer(p, chars, [n])
      do i = 1, n
         msg(i:i) = chars(i)
      end do
   end function coo_error_message

   !> Report a status: into `stat` when present, else stop on error.
   subroutine settle(status, what, stat)
      integer(c_int), intent(in) :: status
      character(len=*), intent(in) :: what
      integer, intent(out), optional :: stat
      if (present(stat)) then
         stat = int(status)
      else if (status /= COO_OK) then
         write (error_unit, '(a)') 'coo_assembler: '//what//': '//coo_error_message()
         error stop 1
      end if
   end subroutine settle

   pure function c_string(s) result(c)
      character(len=*), intent(in) :: s
      character(kind=c_char, len=len_trim(s) + 1) :: c
      c = trim(s)//c_null_char
   end function c_string

   pure function base_of(one_based) result(base)
      logical, intent(in), optional :: one_based
      integer(int64) :: base
      base = 0
      if (present(one_based)) then
         if (one_based) base = 1
      end if
   end function base_of

   !> The columns of idx(n, rank) as C pointers for the functions that
   !> take one index array per dimension: idx's own columns, in place, or
   !> with one_based=.true. those of `shifted`, a copy one less, which the
   !> caller keeps until the C call returns. All NULL when n is 0.
   subroutine index_columns_i4(idx, one_based, shifted, dims)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      logical, intent(in), optional :: one_based
      integer(int32), allocatable, target, intent(inout) :: shifted(:, :)
      type(c_ptr), intent(out) :: dims(:)
      integer :: d
      dims = c_null_ptr
      if (size(idx, 1) == 0) return
      if (base_of(one_based) /= 0) then
         shifted = idx - 1_int32
         do d = 1, size(idx, 2)
            dims(d) = c_loc(shifted(1, d))
         end do
      else
         do d = 1, size(idx, 2)
            dims(d) = c_loc(idx(1, d))
         end do
      end if
   end subroutine index_columns_i4

   !> As index_columns_i4, for int64 indices.
   subroutine index_columns_i8(idx, one_based, shifted, dims)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      logical, intent(in), optional :: one_based
      integer(int64), allocatable, target, intent(inout) :: shifted(:, :)
      type(c_ptr), intent(out) :: dims(:)
      integer :: d
      dims = c_null_ptr
      if (size(idx, 1) == 0) return
      if (base_of(one_based) /= 0) then
         shifted = idx - 1_int64
         do d = 1, size(idx, 2)
            dims(d) = c_loc(shifted(1, d))
         end do
      else
         do d = 1, size(idx, 2)
            dims(d) = c_loc(idx(1, d))
         end do
      end if
   end subroutine index_columns_i8

   !> The default options with those given; `opts%temp_dir` points into
   !> `dir`, which must stay allocated until the C call (that copies it).
   subroutine fill_options(opts, dir, memory_budget, temp_dir, threads, duplicates, &
                           drop_zeros, exact_sums)
      type(coo_options), intent(out) :: opts
      character(kind=c_char, len=:), allocatable, target, intent(inout) :: dir
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums
      call coo_options_default(opts)
      if (present(memory_budget)) opts%memory_budget = memory_budget
      if (present(threads)) opts%threads = int(threads, c_int32_t)
      if (present(duplicates)) opts%duplicates = duplicates
      if (present(drop_zeros)) opts%drop_zeros = logical(drop_zeros, c_bool)
      if (present(exact_sums)) opts%exact_sums = logical(exact_sums, c_bool)
      if (present(temp_dir)) then
         dir = c_string(temp_dir)
         opts%temp_dir = c_loc(dir)
      end if
   end subroutine fill_options

   ! ---------------------------- builder ----------------------------

   subroutine builder_init_i4(self, shape, dtype, stat, memory_budget, temp_dir, &
                              threads, duplicates, drop_zeros, exact_sums, one_based, &
                              layout, mode_order)
      class(coo_builder_t), intent(inout) :: self
      integer(int32), intent(in) :: shape(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums, one_based
      integer(c_int), intent(in), optional :: layout
      integer, intent(in), optional :: mode_order(:)
      call builder_init_i8(self, int(shape, int64), dtype, stat, memory_budget, &
                           temp_dir, threads, duplicates, drop_zeros, exact_sums, one_based, &
                           layout, mode_order)
   end subroutine builder_init_i4

   !> Start an assembly of a tensor of `shape` (default type COO_F64); the
   !> optional arguments override the library's defaults. `layout`:
   !> COO_LAYOUT_COO (default), _CSR, _CSC or _CSF (rank 3 and up);
   !> `mode_order`: with COO_LAYOUT_CSF, the dimension stored at each level
   !> of the tree, outermost first, numbered from 1 as Fortran numbers
   !> dimensions (default: 1, 2, ..., rank).
   subroutine builder_init_i8(self, shape, dtype, stat, memory_budget, temp_dir, &
                              threads, duplicates, drop_zeros, exact_sums, one_based, &
                              layout, mode_order)
      class(coo_builder_t), intent(inout) :: self
      integer(int64), intent(in) :: shape(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums, one_based
      integer(c_int), intent(in), optional :: layout
      integer, intent(in), optional :: mode_order(:)
      type(coo_options) :: opts
      character(kind=c_char, len=:), allocatable, target :: dir
      integer(c_int) :: t, status

      call fill_options(opts, dir, memory_budget, temp_dir, threads, duplicates, &
                        drop_zeros, exact_sums)
      if (present(layout)) opts%layout = layout
      if (present(mode_order)) then
         ! More levels than 64 leave the count over the rank: refused.
         opts%mode_order_len = int(size(mode_order), c_int32_t)
         opts%mode_order(1:min(size(mode_order), 64)) = &
            int(mode_order(1:min(size(mode_order), 64)) - 1, c_int32_t)
      end if
      t = dtype_or_f64(dtype)
      self%handle = coo_builder_new(int(size(shape), c_int32_t), shape, t, opts)
      self%via = VIA_BUILDER
      self%rank = size(shape)
      self%base = base_of(one_based)
      status = COO_OK
      if (.not. c_associated(self%handle)) status = coo_last_status()
      call settle(status, 'coo_builder_new', stat)
   end subroutine builder_init_i8

   !> Merge and write the tensor to `path`. A refusal before the merge
   !> (COO_ERR_REFUSED: a bad path, live pushers) keeps the builder and its
   !> contributions: fix it and call again. Any other outcome ends it (on
   !> error nothing is written).
   subroutine builder_finish(self, path, summary, stat)
      class(coo_builder_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      type(coo_summary), intent(out), optional :: summary
      integer, intent(out), optional :: stat
      type(coo_summary) :: s
      integer(c_int) :: status
      status = coo_builder_finish(self%handle, c_string(path), s)
      if (status /= COO_ERR_REFUSED) self%handle = c_null_ptr
      if (present(summary)) summary = s
      call settle(status, 'coo_builder_finish', stat)
   end subroutine builder_finish

   !> Record the plan while assembling (before the first push or pusher):
   !> see coo_builder_record_plan in the C header.
   subroutine builder_record_plan(self, stat)
      class(coo_builder_t), intent(inout) :: self
      integer, intent(out), optional :: stat
      call settle(coo_builder_record_plan(self%handle), 'coo_builder_record_plan', stat)
   end subroutine builder_record_plan

   !> b%finish(path), then the plan the builder recorded: in memory into
   !> `plan` (its structure 0-based, as the builder's), and written out of
   !> core to the plan file `plan_path` when given.
   subroutine builder_finish_recorded(self, path, plan, plan_path, summary, stat)
      class(coo_builder_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      type(coo_plan_t), intent(inout) :: plan
      character(len=*), intent(in), optional :: plan_path
      type(coo_summary), intent(out), optional :: summary
      integer, intent(out), optional :: stat
      type(coo_summary) :: s
      integer(c_int) :: status
      type(c_ptr), target :: h
      character(kind=c_char, len=:), allocatable, target :: pp
      h = c_null_ptr
      if (present(plan_path)) then
         pp = trim(plan_path)//c_null_char
         status = coo_builder_finish_recorded(self%handle, c_string(path), s, c_loc(h), &
                                              c_loc(pp))
      else
         status = coo_builder_finish_recorded(self%handle, c_string(path), s, c_loc(h), &
                                              c_null_ptr)
      end if
      if (status /= COO_ERR_REFUSED) self%handle = c_null_ptr
      plan%handle = h
      plan%base = self%base
      if (present(summary)) summary = s
      call settle(status, 'coo_builder_finish_recorded', stat)
   end subroutine builder_finish_recorded

   !> Abandon the assembly: nothing is written, temporary files are removed.
   subroutine builder_free(self)
      class(coo_builder_t), intent(inout) :: self
      call coo_builder_free(self%handle)
      self%handle = c_null_ptr
   end subroutine builder_free

   ! ---------------------------- pusher -----------------------------

   !> A pusher on `b` for the calling thread; indices as `b`'s (1-based
   !> if `b` was made with one_based=.true.).
   subroutine pusher_init(self, b, stat)
      class(coo_pusher_t), intent(inout) :: self
      type(coo_builder_t), intent(in) :: b
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      self%handle = coo_pusher_new(b%handle)
      self%via = VIA_PUSHER
      self%rank = b%rank
      self%base = b%base
      status = COO_OK
      if (.not. c_associated(self%handle)) status = coo_last_status()
      call settle(status, 'coo_pusher_new', stat)
   end subroutine pusher_init

   !> Release the pusher (its contributions go to the builder).
   subroutine pusher_free(self)
      class(coo_pusher_t), intent(inout) :: self
      call coo_pusher_free(self%handle)
      self%handle = c_null_ptr
   end subroutine pusher_free

   ! ---------------- pushing (builders and pushers alike) -------------

   subroutine push_i4(self, idx, value, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int32), intent(in) :: idx(:)
      real(c_double), intent(in) :: value
      integer, intent(out), optional :: stat
      call push_one(self%via, self%handle, self%rank, int(idx, int64) - self%base, value, stat)
   end subroutine push_i4

   !> Push one contribution: `idx` has `rank` components.
   subroutine push_i8(self, idx, value, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int64), intent(in) :: idx(:)
      real(c_double), intent(in) :: value
      integer, intent(out), optional :: stat
      call push_one(self%via, self%handle, self%rank, idx - self%base, value, stat)
   end subroutine push_i8

   subroutine push_many_i4(self, idx, values, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int32), intent(in) :: idx(:, :)
      real(c_double), intent(in) :: values(:)
      integer, intent(out), optional :: stat
      call push_batch_i4(self%via, self%handle, self%base, idx, values, stat)
   end subroutine push_many_i4

   !> Push contributions: column j of `idx` (shape rank x n) is the index of `values(j)`.
   subroutine push_many_i8(self, idx, values, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int64), intent(in) :: idx(:, :)
      real(c_double), intent(in) :: values(:)
      integer, intent(out), optional :: stat
      call push_batch_i8(self%via, self%handle, self%base, idx, values, stat)
   end subroutine push_many_i8

   subroutine push_element_i4(self, dofs, ke, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int32), intent(in) :: dofs(:)
      real(c_double), intent(in) :: ke(:, :)
      integer, intent(out), optional :: stat
      call push_elem(self%via, self%handle, int(dofs, int64) - self%base, ke, stat)
   end subroutine push_element_i4

   !> Push an element matrix: `ke(a, b)` goes to `(dofs(a), dofs(b))`.
   subroutine push_element_i8(self, dofs, ke, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int64), intent(in) :: dofs(:)
      real(c_double), intent(in) :: ke(:, :)
      integer, intent(out), optional :: stat
      call push_elem(self%via, self%handle, dofs - self%base, ke, stat)
   end subroutine push_element_i8

   !> Push one complex contribution (complex64 and complex128 tensors).
   subroutine push_z4(self, idx, value, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int32), intent(in) :: idx(:)
      complex(c_double_complex), intent(in) :: value
      integer, intent(out), optional :: stat
      call push_z8(self, int(idx, int64), value, stat)
   end subroutine push_z4

   subroutine push_z8(self, idx, value, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int64), intent(in) :: idx(:)
      complex(c_double_complex), intent(in) :: value
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      if (size(idx) /= self%rank) then
         status = rank_mismatch(size(idx), self%rank)
      else if (self%via == VIA_PUSHER) then
         status = coo_pusher_push_complex(self%handle, idx - self%base, real(value, c_double), &
                                          aimag(value))
      else
         status = coo_builder_push_complex(self%handle, idx - self%base, real(value, c_double), &
                                           aimag(value))
      end if
      call settle(status, 'push', stat)
   end subroutine push_z8

   !> Push complex contributions: column j of `idx` (rank x n) is the index of `values(j)`.
   subroutine push_many_z8(self, idx, values, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int64), intent(in) :: idx(:, :)
      complex(c_double_complex), intent(in) :: values(:)
      integer, intent(out), optional :: stat
      integer(int64), allocatable :: idx0(:, :)
      integer(c_int) :: status
      if (size(idx, 2) /= size(values)) then
         status = shape_mismatch(size(idx, 2), size(values))
      else
         idx0 = idx - self%base
         if (self%via == VIA_PUSHER) then
            status = coo_pusher_push_many_complex(self%handle, size(values, kind=c_size_t), &
                                                  idx0, values)
         else
            status = coo_builder_push_many_complex(self%handle, size(values, kind=c_size_t), &
                                                   idx0, values)
         end if
      end if
      call settle(status, 'push_many', stat)
   end subroutine push_many_z8

   !> Push a complex element matrix: `ke(a, b)` goes to `(dofs(a), dofs(b))`.
   subroutine push_element_z8(self, dofs, ke, stat)
      class(coo_pushing_t), intent(inout) :: self
      integer(int64), intent(in) :: dofs(:)
      complex(c_double_complex), intent(in) :: ke(:, :)
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      if (size(ke, 1) /= size(dofs) .or. size(ke, 2) /= size(dofs)) then
         status = shape_mismatch(size(ke), size(dofs)**2)
      else if (self%via == VIA_PUSHER) then
         ! Row-major in C: the transpose.
         status = coo_pusher_push_element_complex(self%handle, size(dofs, kind=c_size_t), &
                                                  dofs - self%base, transpose(ke))
      else
         status = coo_builder_push_element_complex(self%handle, size(dofs, kind=c_size_t), &
                                                   dofs - self%base, transpose(ke))
      end if
      call settle(status, 'push_element', stat)
   end subroutine push_element_z8

   subroutine push_one(via, handle, rank, idx0, value, stat)
      integer, intent(in) :: via, rank
      type(c_ptr), intent(in) :: handle
      integer(int64), intent(in) :: idx0(:)
      real(c_double), intent(in) :: value
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      if (size(idx0) /= rank) then
         status = rank_mismatch(size(idx0), rank)
      else if (via == VIA_PUSHER) then
         status = coo_pusher_push(handle, idx0, value)
      else
         status = coo_builder_push(handle, idx0, value)
      end if
      call settle(status, 'push', stat)
   end subroutine push_one

   subroutine push_batch_i8(via, handle, base, idx, values, stat)
      integer, intent(in) :: via
      type(c_ptr), intent(in) :: handle
      integer(int64), intent(in) :: base
      integer(int64), intent(in) :: idx(:, :)
      real(c_double), intent(in) :: values(:)
      integer, intent(out), optional :: stat
      integer(int64), allocatable :: tmp(:, :)
      integer(c_int) :: status
      integer :: j, m
      if (size(idx, 2) /= size(values)) then
         status = shape_mismatch(size(idx, 2), size(values))
      else if (base == 0) then
         status = batch_call(via, handle, idx, values)
      else
         allocate (tmp(size(idx, 1), min(BATCH, size(values))))
         status = COO_OK
         do j = 1, size(values), BATCH
            m = min(BATCH, size(values) - j + 1)
            tmp(:, 1:m) = idx(:, j:j + m - 1) - base
            status = batch_call(via, handle, tmp(:, 1:m), values(j:j + m - 1))
            if (status /= COO_OK) exit
         end do
      end if
      call settle(status, 'push_many', stat)
   end subroutine push_batch_i8

   subroutine push_batch_i4(via, handle, base, idx, values, stat)
      integer, intent(in) :: via
      type(c_ptr), intent(in) :: handle
      integer(int64), intent(in) :: base
      integer(int32), intent(in) :: idx(:, :)
      real(c_double), intent(in) :: values(:)
      integer, intent(out), optional :: stat
      integer(int64), allocatable :: tmp(:, :)
      integer(c_int) :: status
      integer :: j, m
      status = COO_OK
      if (size(idx, 2) /= size(values)) then
         status = shape_mismatch(size(idx, 2), size(values))
      else
         allocate (tmp(size(idx, 1), min(BATCH, size(values))))
         do j = 1, size(values), BATCH
            m = min(BATCH, size(values) - j + 1)
            tmp(:, 1:m) = int(idx(:, j:j + m - 1), int64) - base
            status = batch_call(via, handle, tmp(:, 1:m), values(j:j + m - 1))
            if (status /= COO_OK) exit
         end do
      end if
      call settle(status, 'push_many', stat)
   end subroutine push_batch_i4

   function batch_call(via, handle, idx, values) result(status)
      integer, intent(in) :: via
      type(c_ptr), intent(in) :: handle
      integer(int64), intent(in) :: idx(:, :)
      real(c_double), intent(in) :: values(:)
      integer(c_int) :: status
      if (via == VIA_PUSHER) then
         status = coo_pusher_push_many(handle, size(values, kind=c_size_t), idx, values)
      else
         status = coo_builder_push_many(handle, size(values, kind=c_size_t), idx, values)
      end if
   end function batch_call

   subroutine push_elem(via, handle, dofs0, ke, stat)
      integer, intent(in) :: via
      type(c_ptr), intent(in) :: handle
      integer(int64), intent(in) :: dofs0(:)
      real(c_double), intent(in) :: ke(:, :)
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      if (size(ke, 1) /= size(dofs0) .or. size(ke, 2) /= size(dofs0)) then
         status = shape_mismatch(size(ke), size(dofs0)**2)
      else if (via == VIA_PUSHER) then
         ! The C API reads ke row-major: pass the transpose so that
         ! ke(a, b) goes to (dofs(a), dofs(b)).
         status = coo_pusher_push_element(handle, size(dofs0, kind=c_size_t), dofs0, &
                                          transpose(ke))
      else
         status = coo_builder_push_element(handle, size(dofs0, kind=c_size_t), dofs0, &
                                           transpose(ke))
      end if
      call settle(status, 'push_element', stat)
   end subroutine push_elem

   !> A Fortran-side size check failed: report it like the library would.
   function rank_mismatch(got, rank) result(status)
      integer, intent(in) :: got, rank
      integer(c_int) :: status
      character(len=120) :: msg
      write (msg, '(a,i0,a,i0)') 'index has ', got, ' components, the tensor has rank ', rank
      status = fortran_error(COO_ERR_RANK, msg)
   end function rank_mismatch

   function shape_mismatch(got, want) result(status)
      integer, intent(in) :: got, want
      integer(c_int) :: status
      character(len=120) :: msg
      write (msg, '(a,i0,a,i0)') 'array sizes disagree: ', got, ' against ', want
      status = fortran_error(COO_ERR_ARGUMENT, msg)
   end function shape_mismatch

   !> Record an error found on the Fortran side as this thread's last
   !> error, so that coo_error_message() reports it like the library's.
   function fortran_error(code, msg) result(status)
      integer(c_int), intent(in) :: code
      character(len=*), intent(in) :: msg
      integer(c_int) :: status
      call coo_set_last_error(code, c_string(msg))
      status = code
   end function fortran_error

   ! --------------------------- coo_assemble --------------------------

   subroutine assemble_s4_i4(path, shape, idx, values, dtype, stat, summary, memory_budget, &
                             temp_dir, threads, duplicates, drop_zeros, exact_sums, one_based)
      character(len=*), intent(in) :: path
      integer(int32), intent(in) :: shape(:)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      real(c_double), intent(in), target, contiguous :: values(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      type(coo_summary), intent(out), optional :: summary
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums, one_based
      call assemble_s8_i4(path, int(shape, int64), idx, values, dtype, stat, summary, &
                          memory_budget, temp_dir, threads, duplicates, drop_zeros, &
                          exact_sums, one_based)
   end subroutine assemble_s4_i4

   subroutine assemble_s4_i8(path, shape, idx, values, dtype, stat, summary, memory_budget, &
                             temp_dir, threads, duplicates, drop_zeros, exact_sums, one_based)
      character(len=*), intent(in) :: path
      integer(int32), intent(in) :: shape(:)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      real(c_double), intent(in), target, contiguous :: values(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      type(coo_summary), intent(out), optional :: summary
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums, one_based
      call assemble_s8_i8(path, int(shape, int64), idx, values, dtype, stat, summary, &
                          memory_budget, temp_dir, threads, duplicates, drop_zeros, &
                          exact_sums, one_based)
   end subroutine assemble_s4_i8

   !> int32 indices: through coo_assemble_arrays_i32, read in place (a
   !> shifted int32 copy with one_based=.true.).
   subroutine assemble_s8_i4(path, shape, idx, values, dtype, stat, summary, memory_budget, &
                             temp_dir, threads, duplicates, drop_zeros, exact_sums, one_based)
      character(len=*), intent(in) :: path
      integer(int64), intent(in) :: shape(:)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      real(c_double), intent(in), target, contiguous :: values(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      type(coo_summary), intent(out), optional :: summary
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums, one_based
      integer(int32), allocatable, target :: shifted(:, :)
      type(c_ptr) :: dims(size(idx, 2))
      dims = c_null_ptr
      if (size(values) > 0 .and. size(idx, 1) == size(values)) &
         call index_columns_i4(idx, one_based, shifted, dims)
      call assemble_dims(.true., path, shape, size(idx, 1), dims, values, dtype, stat, &
                         summary, memory_budget, temp_dir, threads, duplicates, drop_zeros, &
                         exact_sums)
   end subroutine assemble_s8_i4

   !> Assemble the tensor of `shape` (default type COO_F64) whose
   !> contribution j has index idx(j, :) and value values(j) into a new
   !> file at `path`, in one call (coo_assemble_arrays): the file
   !> coo_builder_t's push_many and finish write, byte for byte. idx has
   !> shape (n, rank), the transpose of push_many's (rank, n): each column
   !> is one dimension's indices, given to the C API in place, without a
   !> copy (one_based=.true. makes one shifted copy, of idx's kind). The
   !> other optional arguments are builder init's.
   subroutine assemble_s8_i8(path, shape, idx, values, dtype, stat, summary, memory_budget, &
                             temp_dir, threads, duplicates, drop_zeros, exact_sums, one_based)
      character(len=*), intent(in) :: path
      integer(int64), intent(in) :: shape(:)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      real(c_double), intent(in), target, contiguous :: values(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      type(coo_summary), intent(out), optional :: summary
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums, one_based
      integer(int64), allocatable, target :: shifted(:, :)
      type(c_ptr) :: dims(size(idx, 2))
      dims = c_null_ptr
      if (size(values) > 0 .and. size(idx, 1) == size(values)) &
         call index_columns_i8(idx, one_based, shifted, dims)
      call assemble_dims(.false., path, shape, size(idx, 1), dims, values, dtype, stat, &
                         summary, memory_budget, temp_dir, threads, duplicates, drop_zeros, &
                         exact_sums)
   end subroutine assemble_s8_i8

   !> What both index kinds share: the size checks, the options, the C call
   !> (coo_assemble_arrays_i32 when `i32`) on the columns `dims` of `rows`
   !> indices each, the summary and the status.
   subroutine assemble_dims(i32, path, shape, rows, dims, values, dtype, stat, summary, &
                            memory_budget, temp_dir, threads, duplicates, drop_zeros, exact_sums)
      logical, intent(in) :: i32
      character(len=*), intent(in) :: path
      integer(int64), intent(in) :: shape(:)
      integer, intent(in) :: rows
      type(c_ptr), intent(in) :: dims(:)
      real(c_double), intent(in), target, contiguous :: values(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      type(coo_summary), intent(out), optional :: summary
      integer(int64), intent(in), optional :: memory_budget
      character(len=*), intent(in), optional :: temp_dir
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates
      logical, intent(in), optional :: drop_zeros, exact_sums
      type(coo_options) :: opts
      character(kind=c_char, len=:), allocatable, target :: dir
      type(coo_summary) :: s
      type(c_ptr) :: vals
      integer(c_int) :: status
      status = COO_OK
      if (size(dims) /= size(shape)) then
         status = rank_mismatch(size(dims), size(shape))
      else if (rows /= size(values)) then
         status = shape_mismatch(rows, size(values))
      else
         call fill_options(opts, dir, memory_budget, temp_dir, threads, duplicates, &
                           drop_zeros, exact_sums)
         vals = c_null_ptr
         if (size(values) > 0) vals = c_loc(values(1))
         if (i32) then
            status = coo_assemble_arrays_i32(int(size(shape), c_int32_t), shape, &
                                             dtype_or_f64(dtype), opts, &
                                             size(values, kind=c_size_t), dims, vals, &
                                             COO_F64, c_string(path), s)
         else
            status = coo_assemble_arrays(int(size(shape), c_int32_t), shape, &
                                         dtype_or_f64(dtype), opts, &
                                         size(values, kind=c_size_t), dims, vals, COO_F64, &
                                         c_string(path), s)
         end if
      end if
      if (present(summary)) summary = s
      call settle(status, 'coo_assemble', stat)
   end subroutine assemble_dims

   !> The element type asked for, COO_F64 when none was.
   pure function dtype_or_f64(dtype) result(t)
      integer(c_int), intent(in), optional :: dtype
      integer(c_int) :: t
      t = COO_F64
      if (present(dtype)) t = dtype
   end function dtype_or_f64

   ! ----------------------------- file ------------------------------

   !> Open the first tensor of the file at `path` (or the tensor `tensor`).
   subroutine file_open(self, path, stat, tensor, one_based)
      class(coo_file_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      integer, intent(out), optional :: stat
      character(len=*), intent(in), optional :: tensor
      logical, intent(in), optional :: one_based
      type(coo_info) :: info
      integer(c_int) :: status
      if (present(tensor)) then
         self%handle = coo_file_open_tensor(c_string(path), c_string(tensor))
      else
         self%handle = coo_file_open(c_string(path))
      end if
      self%base = base_of(one_based)
      status = COO_OK
      if (.not. c_associated(self%handle)) then
         status = coo_last_status()
      else
         status = coo_file_info(self%handle, info)
         self%rank = int(info%rank)
      end if
      call settle(status, 'coo_file_open', stat)
   end subroutine file_open

   subroutine file_info(self, info, stat)
      class(coo_file_t), intent(in) :: self
      type(coo_info), intent(out) :: info
      integer, intent(out), optional :: stat
      call settle(coo_file_info(self%handle, info), 'coo_file_info', stat)
   end subroutine file_info

   !> The storage layout: COO_LAYOUT_COO, COO_LAYOUT_CSR, COO_LAYOUT_CSC or
   !> COO_LAYOUT_CSF.
   subroutine file_layout(self, layout, stat)
      class(coo_file_t), intent(in) :: self
      integer(c_int), intent(out) :: layout
      integer, intent(out), optional :: stat
      layout = -1
      call settle(coo_file_layout(self%handle, layout), 'coo_file_layout', stat)
   end subroutine file_layout

   subroutine file_get_i4(self, idx, value, stat)
      class(coo_file_t), intent(in) :: self
      integer(int32), intent(in) :: idx(:)
      real(c_double), intent(out) :: value
      integer, intent(out), optional :: stat
      call file_get_i8(self, int(idx, int64), value, stat)
   end subroutine file_get_i4

   !> The value at `idx` (0 where nothing is stored).
   subroutine file_get_i8(self, idx, value, stat)
      class(coo_file_t), intent(in) :: self
      integer(int64), intent(in) :: idx(:)
      real(c_double), intent(out) :: value
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      value = 0
      if (size(idx) /= self%rank) then
         status = rank_mismatch(size(idx), self%rank)
      else
         status = coo_file_get(self%handle, idx - self%base, value)
      end if
      call settle(status, 'coo_file_get', stat)
   end subroutine file_get_i8

   !> Entries first, first+1, ... (numbered from `base`) in storage order:
   !> as many as `values` holds or the tensor has left. `idx` has shape
   !> (rank, size(values)); `n_read` tells how many were read.
   subroutine file_read_entries(self, first, idx, values, n_read, stat)
      class(coo_file_t), intent(in) :: self
      integer(int64), intent(in) :: first
      integer(int64), intent(out) :: idx(:, :)
      real(c_double), intent(out) :: values(:)
      integer, intent(out) :: n_read
      integer, intent(out), optional :: stat
      integer(c_size_t) :: got
      integer(c_int) :: status
      n_read = 0
      if (size(idx, 1) /= self%rank .or. size(idx, 2) < size(values)) then
         status = shape_mismatch(size(idx), self%rank*size(values))
      else
         status = coo_file_read_entries(self%handle, first - self%base, &
                                        size(values, kind=c_size_t), idx, values, got)
         if (status == COO_OK) then
            n_read = int(got)
            idx(:, 1:n_read) = idx(:, 1:n_read) + self%base
         end if
      end if
      call settle(status, 'coo_file_read_entries', stat)
   end subroutine file_read_entries

   !> Check the file's content (O(nnz)).
   subroutine file_verify(self, stat)
      class(coo_file_t), intent(in) :: self
      integer, intent(out), optional :: stat
      call settle(coo_file_verify(self%handle), 'coo_file_verify', stat)
   end subroutine file_verify

   !> Write the tensor to `path` for another program: `format` "mtx", "npz",
   !> "petsc" or "npy" (the library's names); `npz_layout` "csr", "csc" or
   !> "coo" (default: the stored one); `paging` "auto", "stream" or "keep";
   !> `entries`: how many were written.
   subroutine file_export(self, path, format, stat, symmetric, petsc_int64, npz_layout, &
                          reorder_memory, paging, entries)
      class(coo_file_t), intent(in) :: self
      character(len=*), intent(in) :: path, format
      integer, intent(out), optional :: stat
      logical, intent(in), optional :: symmetric, petsc_int64
      character(len=*), intent(in), optional :: npz_layout, paging
      integer(int64), intent(in), optional :: reorder_memory
      integer(int64), intent(out), optional :: entries
      type(coo_export_options) :: o
      type(coo_export_summary) :: s
      character(kind=c_char, len=:), allocatable, target :: layout_c, paging_c
      call coo_export_options_default(o)
      if (present(symmetric)) o%symmetric = logical(symmetric, c_bool)
      if (present(petsc_int64)) o%petsc_int64 = logical(petsc_int64, c_bool)
      if (present(npz_layout)) then
         layout_c = c_string(npz_layout)
         o%npz_layout = c_loc(layout_c)
      end if
      if (present(paging)) then
         paging_c = c_string(paging)
         o%paging = c_loc(paging_c)
      end if
      if (present(reorder_memory)) o%reorder_memory = reorder_memory
      s = coo_export_summary(0, 0)
      call settle(coo_file_export(self%handle, c_string(path), c_string(format), o, s), &
                  'coo_file_export', stat)
      if (present(entries)) entries = s%entries
   end subroutine file_export

   subroutine file_close(self)
      class(coo_file_t), intent(inout) :: self
      call coo_file_close(self%handle)
      self%handle = c_null_ptr
   end subroutine file_close

   ! ------------------------------ plan -------------------------------

   subroutine plan_init_s4_i4(self, shape, idx, dtype, stat, memory_budget, threads, &
                              duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int32), intent(in) :: shape(:)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      call plan_init_s8_i4(self, int(shape, int64), idx, dtype, stat, memory_budget, threads, &
                           duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_init_s4_i4

   subroutine plan_init_s4_i8(self, shape, idx, dtype, stat, memory_budget, threads, &
                              duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int32), intent(in) :: shape(:)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      call plan_init_s8_i8(self, int(shape, int64), idx, dtype, stat, memory_budget, threads, &
                           duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_init_s4_i8

   !> int32 indices: through coo_plan_new_i32, read in place (a shifted
   !> int32 copy with one_based=.true.).
   subroutine plan_init_s8_i4(self, shape, idx, dtype, stat, memory_budget, threads, &
                              duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int64), intent(in) :: shape(:)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      integer(int32), allocatable, target :: shifted(:, :)
      type(c_ptr) :: dims(size(idx, 2))
      call index_columns_i4(idx, one_based, shifted, dims)
      call plan_dims(self, .true., shape, size(idx, 1, kind=int64), dims, dtype, stat, &
                     memory_budget, threads, duplicates, exact_sums, non_finite, layout, &
                     one_based)
   end subroutine plan_init_s8_i4

   !> Plan the assembly of the contributions whose index j is idx(j, :)
   !> (shape (n, rank), the layout coo_assemble takes, passed to C in place;
   !> one_based=.true. makes one shifted copy) into a tensor of `shape`
   !> (default type COO_F64; `layout` COO_LAYOUT_COO, the default, _CSR or
   !> _CSC; the other options are builder init's, less drop_zeros, which
   !> plans refuse). A refill then takes n values, values(j) for
   !> contribution j. A plan self held before is freed.
   subroutine plan_init_s8_i8(self, shape, idx, dtype, stat, memory_budget, threads, &
                              duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int64), intent(in) :: shape(:)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      integer(int64), allocatable, target :: shifted(:, :)
      type(c_ptr) :: dims(size(idx, 2))
      call index_columns_i8(idx, one_based, shifted, dims)
      call plan_dims(self, .false., shape, size(idx, 1, kind=int64), dims, dtype, stat, &
                     memory_budget, threads, duplicates, exact_sums, non_finite, layout, &
                     one_based)
   end subroutine plan_init_s8_i8

   subroutine plan_elements_s4_i4(self, shape, dofs, dtype, stat, memory_budget, threads, &
                                  duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int32), intent(in) :: shape(:)
      integer(int32), intent(in) :: dofs(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      call plan_elements_s8_i4(self, int(shape, int64), dofs, dtype, stat, memory_budget, &
                               threads, duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_elements_s4_i4

   subroutine plan_elements_s4_i8(self, shape, dofs, dtype, stat, memory_budget, threads, &
                                  duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int32), intent(in) :: shape(:)
      integer(int64), intent(in) :: dofs(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      call plan_elements_s8_i8(self, int(shape, int64), dofs, dtype, stat, memory_budget, &
                               threads, duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_elements_s4_i8

   !> As the int64 form, with int32 index arrays (half the memory).
   subroutine plan_elements_s8_i4(self, shape, dofs, dtype, stat, memory_budget, threads, &
                                  duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int64), intent(in) :: shape(:)
      integer(int32), intent(in) :: dofs(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      integer(int32), allocatable, target :: rows(:), cols(:)
      type(c_ptr) :: dims(2)
      integer(int64) :: k, e, a, c, at, n
      integer(int32) :: base
      integer :: ast
      k = size(dofs, 1, kind=int64)
      n = k*k*size(dofs, 2, kind=int64)
      call plan_free(self)
      do e = 1, size(dofs, 2, kind=int64)
         do a = 1, k
            if (dofs(a, e) < base_of(one_based)) then
               call settle(negative_dof(a, e, dofs(a, e) - base_of(one_based)), &
                           'coo_plan_new', stat)
               return
            end if
         end do
      end do
      allocate (rows(n), cols(n), stat=ast)
      if (ast /= 0) then
         call settle(fortran_error(COO_ERR_MEMORY, &
                                   'cannot allocate the element matrices'' index arrays'), &
                     'coo_plan_new', stat)
         return
      end if
      base = int(base_of(one_based), int32)
      at = 0
      do e = 1, size(dofs, 2, kind=int64)
         do c = 1, k
            do a = 1, k
               at = at + 1
               rows(at) = dofs(a, e) - base
               cols(at) = dofs(c, e) - base
            end do
         end do
      end do
      dims = c_null_ptr
      if (n > 0) dims = [c_loc(rows(1)), c_loc(cols(1))]
      call plan_dims(self, .true., shape, n, dims, dtype, stat, memory_budget, threads, &
                     duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_elements_s8_i4

   !> Plan element matrices into the matrix of `shape` (2 extents): column
   !> e of dofs (shape (k, elements)) holds element e's degrees of freedom,
   !> and a refill takes ke(k, k, elements) (or the same values as one
   !> array), ke(a, b, e) going to (dofs(a, e), dofs(b, e)) as in
   !> push_element. The contributions are listed in ke's memory order and
   !> planned through coo_plan_new (the C coo_plan_elements reads each
   !> element matrix row-major, the transpose): this makes two index
   !> arrays of k*k*elements (int64 here, int32 for default-kind dofs),
   !> freed on return. Options as in init.
   subroutine plan_elements_s8_i8(self, shape, dofs, dtype, stat, memory_budget, threads, &
                                  duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      integer(int64), intent(in) :: shape(:)
      integer(int64), intent(in) :: dofs(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      integer(int64), allocatable, target :: rows(:), cols(:)
      type(c_ptr) :: dims(2)
      integer(int64) :: k, e, a, c, at, n, base
      integer :: ast
      k = size(dofs, 1, kind=int64)
      n = k*k*size(dofs, 2, kind=int64)
      call plan_free(self)
      do e = 1, size(dofs, 2, kind=int64)
         do a = 1, k
            if (dofs(a, e) < base_of(one_based)) then
               call settle(negative_dof(a, e, dofs(a, e) - base_of(one_based)), &
                           'coo_plan_new', stat)
               return
            end if
         end do
      end do
      allocate (rows(n), cols(n), stat=ast)
      if (ast /= 0) then
         call settle(fortran_error(COO_ERR_MEMORY, &
                                   'cannot allocate the element matrices'' index arrays'), &
                     'coo_plan_new', stat)
         return
      end if
      base = base_of(one_based)
      at = 0
      do e = 1, size(dofs, 2, kind=int64)
         do c = 1, k
            do a = 1, k
               at = at + 1
               rows(at) = dofs(a, e) - base
               cols(at) = dofs(c, e) - base
            end do
         end do
      end do
      dims = c_null_ptr
      if (n > 0) dims = [c_loc(rows(1)), c_loc(cols(1))]
      call plan_dims(self, .false., shape, n, dims, dtype, stat, memory_budget, threads, &
                     duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_elements_s8_i8

   !> The error of a negative dof (after the 1-based shift): dofs(a, e).
   function negative_dof(a, e, v) result(status)
      integer(int64), intent(in) :: a, e, v
      integer(c_int) :: status
      character(len=120) :: msg
      write (msg, '(a,i0,a,i0,a,i0,a)') 'dofs(', a, ', ', e, '): index ', v, &
         ' (0-based) is negative'
      status = fortran_error(COO_ERR_INDEX, msg)
   end function negative_dof

   !> What every way to plan shares: the rank check, the options, the C
   !> call (coo_plan_new_i32 when `i32`) on the columns `dims` of `rows`
   !> indices each, the handle and the status.
   subroutine plan_dims(self, i32, shape, rows, dims, dtype, stat, memory_budget, threads, &
                        duplicates, exact_sums, non_finite, layout, one_based)
      class(coo_plan_t), intent(inout) :: self
      logical, intent(in) :: i32
      integer(int64), intent(in) :: shape(:)
      integer(int64), intent(in) :: rows
      type(c_ptr), intent(in) :: dims(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      type(coo_options) :: opts
      character(kind=c_char, len=:), allocatable, target :: dir
      integer(c_int) :: status
      call coo_plan_free(self%handle)
      self%handle = c_null_ptr
      self%base = base_of(one_based)
      if (size(dims) /= size(shape)) then
         status = rank_mismatch(size(dims), size(shape))
      else
         call fill_options(opts, dir, memory_budget=memory_budget, threads=threads, &
                           duplicates=duplicates, exact_sums=exact_sums)
         if (present(non_finite)) opts%non_finite = non_finite
         if (present(layout)) opts%layout = layout
         if (i32) then
            self%handle = coo_plan_new_i32(int(size(shape), c_int32_t), shape, &
                                           dtype_or_f64(dtype), opts, int(rows, c_size_t), dims)
         else
            self%handle = coo_plan_new(int(size(shape), c_int32_t), shape, dtype_or_f64(dtype), &
                                       opts, int(rows, c_size_t), dims)
         end if
         status = COO_OK
         if (.not. c_associated(self%handle)) status = coo_last_status()
      end if
      call settle(status, 'coo_plan_new', stat)
   end subroutine plan_dims

   !> Read a plan saved by p%save (or coo_plan_save). A plan self held
   !> before is freed.
   subroutine plan_load(self, path, stat, one_based)
      class(coo_plan_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      integer, intent(out), optional :: stat
      logical, intent(in), optional :: one_based
      integer(c_int) :: status
      call coo_plan_free(self%handle)
      self%handle = coo_plan_load(c_string(path))
      self%base = base_of(one_based)
      status = COO_OK
      if (.not. c_associated(self%handle)) status = coo_last_status()
      call settle(status, 'coo_plan_load', stat)
   end subroutine plan_load

   !> Write the plan to `path` (a Hurray file, atomically).
   subroutine plan_save(self, path, stat)
      class(coo_plan_t), intent(in) :: self
      character(len=*), intent(in) :: path
      integer, intent(out), optional :: stat
      call settle(coo_plan_save(self%handle, c_string(path)), 'coo_plan_save', stat)
   end subroutine plan_save

   !> Shape, type, layout and sizes of the plan.
   subroutine plan_info(self, details, stat)
      class(coo_plan_t), intent(in) :: self
      type(coo_plan_details), intent(out) :: details
      integer, intent(out), optional :: stat
      call settle(coo_plan_info(self%handle, details), 'coo_plan_info', stat)
   end subroutine plan_info

   !> Entries of a result: the size of a refill's `out`.
   function plan_nnz(self, stat) result(n)
      class(coo_plan_t), intent(in) :: self
      integer, intent(out), optional :: stat
      integer(int64) :: n
      n = 0
      call settle(coo_plan_nnz(self%handle, n), 'coo_plan_nnz', stat)
   end function plan_nnz

   !> Contributions: the size of a refill's `values`.
   function plan_contributions(self, stat) result(n)
      class(coo_plan_t), intent(in) :: self
      integer, intent(out), optional :: stat
      integer(int64) :: n
      n = 0
      call settle(coo_plan_contributions(self%handle, n), 'coo_plan_contributions', stat)
   end function plan_contributions

   !> The structure of a result, in new arrays (1-based with one_based):
   !> CSR (CSC) the column (row) of each entry and the rows + 1 (columns +
   !> 1) pointers, entries pointers(i) .. pointers(i+1)-1 being row
   !> (column) i; COO each entry's index tuple, entry e at
   !> indices((e-1)*rank+1 : e*rank), and no pointers.
   subroutine plan_structure(self, indices, pointers, stat)
      class(coo_plan_t), intent(in) :: self
      integer(int64), allocatable, target, intent(out) :: indices(:), pointers(:)
      integer, intent(out), optional :: stat
      type(coo_plan_details) :: d
      type(c_ptr) :: ip, pp
      integer(c_int) :: status
      status = coo_plan_info(self%handle, d)
      if (status /= COO_OK) then
         allocate (indices(0), pointers(0))
      else
         allocate (indices(d%indices_len), pointers(d%pointers_len))
         ip = c_null_ptr
         pp = c_null_ptr
         if (d%indices_len > 0) ip = c_loc(indices(1))
         if (d%pointers_len > 0) pp = c_loc(pointers(1))
         status = coo_plan_structure(self%handle, ip, int(d%indices_len, c_size_t), pp, &
                                     int(d%pointers_len, c_size_t))
         if (status == COO_OK .and. self%base /= 0) then
            indices = indices + self%base
            pointers = pointers + self%base
         end if
      end if
      call settle(status, 'coo_plan_structure', stat)
   end subroutine plan_structure

   !> Refill `out` (p%nnz() values, in the order of p%structure) with the
   !> assembly of `values` (p%contributions() values, in the order the
   !> coordinates were given): COO_F64 plans (other types through
   !> coo_plan_assemble_typed). May be called from several threads at
   !> once, each with its own `out`.
   subroutine plan_assemble_1(self, values, out, stat)
      class(coo_plan_t), intent(in) :: self
      real(c_double), intent(in), contiguous :: values(:)
      real(c_double), intent(inout), contiguous :: out(:)
      integer, intent(out), optional :: stat
      call settle(coo_plan_assemble(self%handle, values, size(values, kind=c_size_t), out, &
                                    size(out, kind=c_size_t)), 'coo_plan_assemble', stat)
   end subroutine plan_assemble_1

   !> As above, for the element matrices ke(k, k, elements) of a plan made
   !> by init_elements.
   subroutine plan_assemble_3(self, ke, out, stat)
      class(coo_plan_t), intent(in) :: self
      real(c_double), intent(in), contiguous :: ke(:, :, :)
      real(c_double), intent(inout), contiguous :: out(:)
      integer, intent(out), optional :: stat
      call settle(coo_plan_assemble(self%handle, ke, size(ke, kind=c_size_t), out, &
                                    size(out, kind=c_size_t)), 'coo_plan_assemble', stat)
   end subroutine plan_assemble_3

   !> A COO_C128 plan's refill: values and out complex(c_double_complex),
   !> each part summed exactly (see plan_assemble_1 for the rest).
   subroutine plan_assemble_z1(self, values, out, stat)
      class(coo_plan_t), intent(in) :: self
      complex(c_double_complex), intent(in), target, contiguous :: values(:)
      complex(c_double_complex), intent(inout), target, contiguous :: out(:)
      integer, intent(out), optional :: stat
      type(c_ptr) :: v, o
      v = c_null_ptr
      o = c_null_ptr
      if (size(values) > 0) v = c_loc(values(1))
      if (size(out) > 0) o = c_loc(out(1))
      call settle(typed_refill(self, COO_C128, 'complex(c_double_complex)', v, &
                               size(values, kind=c_size_t), o, size(out, kind=c_size_t)), &
                  'coo_plan_assemble_typed', stat)
   end subroutine plan_assemble_z1

   !> As above, for the complex element matrices ke(k, k, elements) of a
   !> COO_C128 plan made by init_elements.
   subroutine plan_assemble_z3(self, ke, out, stat)
      class(coo_plan_t), intent(in) :: self
      complex(c_double_complex), intent(in), target, contiguous :: ke(:, :, :)
      complex(c_double_complex), intent(inout), target, contiguous :: out(:)
      integer, intent(out), optional :: stat
      type(c_ptr) :: v, o
      v = c_null_ptr
      o = c_null_ptr
      if (size(ke) > 0) v = c_loc(ke(1, 1, 1))
      if (size(out) > 0) o = c_loc(out(1))
      call settle(typed_refill(self, COO_C128, 'complex(c_double_complex)', v, &
                               size(ke, kind=c_size_t), o, size(out, kind=c_size_t)), &
                  'coo_plan_assemble_typed', stat)
   end subroutine plan_assemble_z3

   !> A COO_C64 plan's refill: values and out complex(c_float_complex).
   subroutine plan_assemble_c1(self, values, out, stat)
      class(coo_plan_t), intent(in) :: self
      complex(c_float_complex), intent(in), target, contiguous :: values(:)
      complex(c_float_complex), intent(inout), target, contiguous :: out(:)
      integer, intent(out), optional :: stat
      type(c_ptr) :: v, o
      v = c_null_ptr
      o = c_null_ptr
      if (size(values) > 0) v = c_loc(values(1))
      if (size(out) > 0) o = c_loc(out(1))
      call settle(typed_refill(self, COO_C64, 'complex(c_float_complex)', v, &
                               size(values, kind=c_size_t), o, size(out, kind=c_size_t)), &
                  'coo_plan_assemble_typed', stat)
   end subroutine plan_assemble_c1

   !> coo_plan_assemble_typed with values and out of the C type `dtype`
   !> names, once the plan is known to be of that type: C cannot tell the
   !> type behind `out`, the plan's details can.
   function typed_refill(self, dtype, fortran_type, values, n, out, nnz) result(status)
      class(coo_plan_t), intent(in) :: self
      integer(c_int), intent(in) :: dtype
      character(len=*), intent(in) :: fortran_type
      type(c_ptr), intent(in) :: values, out
      integer(c_size_t), intent(in) :: n, nnz
      integer(c_int) :: status
      type(coo_plan_details) :: d
      character(len=160) :: msg
      status = coo_plan_info(self%handle, d)
      if (status /= COO_OK) return
      if (d%dtype /= dtype) then
         write (msg, '(a,a,i0,a,i0,a)') fortran_type, ' values need a plan of dtype ', dtype, &
            '; this plan is of dtype ', d%dtype, ' (coo_plan_details%dtype)'
         status = fortran_error(COO_ERR_ARGUMENT, msg)
         return
      end if
      status = coo_plan_assemble_typed(self%handle, values, dtype, n, out, nnz)
   end function typed_refill

   ! ---------------------- plan files (out of core) ----------------------

   subroutine plan_file_s4_i4(path, shape, idx, dtype, stat, memory_budget, threads, &
                              temp_dir, duplicates, exact_sums, non_finite, layout, one_based)
      character(len=*), intent(in) :: path
      integer(int32), intent(in) :: shape(:)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      character(len=*), intent(in), optional :: temp_dir
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      call plan_file_s8_i4(path, int(shape, int64), idx, dtype, stat, memory_budget, threads, &
                           temp_dir, duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_file_s4_i4

   subroutine plan_file_s4_i8(path, shape, idx, dtype, stat, memory_budget, threads, &
                              temp_dir, duplicates, exact_sums, non_finite, layout, one_based)
      character(len=*), intent(in) :: path
      integer(int32), intent(in) :: shape(:)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      character(len=*), intent(in), optional :: temp_dir
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      call plan_file_s8_i8(path, int(shape, int64), idx, dtype, stat, memory_budget, threads, &
                           temp_dir, duplicates, exact_sums, non_finite, layout, one_based)
   end subroutine plan_file_s4_i8

   !> int32 indices: through coo_plan_file_new_i32, read in place (a
   !> shifted copy with one_based=.true.).
   subroutine plan_file_s8_i4(path, shape, idx, dtype, stat, memory_budget, threads, &
                              temp_dir, duplicates, exact_sums, non_finite, layout, one_based)
      character(len=*), intent(in) :: path
      integer(int64), intent(in) :: shape(:)
      integer(int32), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      character(len=*), intent(in), optional :: temp_dir
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      integer(int32), allocatable, target :: shifted(:, :)
      type(c_ptr) :: dims(size(idx, 2))
      call index_columns_i4(idx, one_based, shifted, dims)
      call plan_file_dims(path, .true., shape, size(idx, 1, kind=int64), dims, dtype, stat, &
                          memory_budget, threads, temp_dir, duplicates, exact_sums, &
                          non_finite, layout)
   end subroutine plan_file_s8_i4

   subroutine plan_file_s8_i8(path, shape, idx, dtype, stat, memory_budget, threads, &
                              temp_dir, duplicates, exact_sums, non_finite, layout, one_based)
      character(len=*), intent(in) :: path
      integer(int64), intent(in) :: shape(:)
      integer(int64), intent(in), target, contiguous :: idx(:, :)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      character(len=*), intent(in), optional :: temp_dir
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums, one_based
      integer(int64), allocatable, target :: shifted(:, :)
      type(c_ptr) :: dims(size(idx, 2))
      call index_columns_i8(idx, one_based, shifted, dims)
      call plan_file_dims(path, .false., shape, size(idx, 1, kind=int64), dims, dtype, stat, &
                          memory_budget, threads, temp_dir, duplicates, exact_sums, &
                          non_finite, layout)
   end subroutine plan_file_s8_i8

   subroutine plan_file_dims(path, i32, shape, rows, dims, dtype, stat, memory_budget, threads, &
                             temp_dir, duplicates, exact_sums, non_finite, layout)
      character(len=*), intent(in) :: path
      logical, intent(in) :: i32
      integer(int64), intent(in) :: shape(:)
      integer(int64), intent(in) :: rows
      type(c_ptr), intent(in) :: dims(:)
      integer(c_int), intent(in), optional :: dtype
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      character(len=*), intent(in), optional :: temp_dir
      integer(c_int), intent(in), optional :: duplicates, non_finite, layout
      logical, intent(in), optional :: exact_sums
      type(coo_options) :: opts
      character(kind=c_char, len=:), allocatable, target :: dir
      integer(c_int) :: status
      if (size(dims) /= size(shape)) then
         status = rank_mismatch(size(dims), size(shape))
      else
         call fill_options(opts, dir, memory_budget=memory_budget, temp_dir=temp_dir, &
                           threads=threads, duplicates=duplicates, exact_sums=exact_sums)
         if (present(non_finite)) opts%non_finite = non_finite
         if (present(layout)) opts%layout = layout
         if (i32) then
            status = coo_plan_file_new_i32(int(size(shape), c_int32_t), shape, &
                                           dtype_or_f64(dtype), opts, int(rows, c_size_t), &
                                           dims, c_string(path))
         else
            status = coo_plan_file_new(int(size(shape), c_int32_t), shape, dtype_or_f64(dtype), &
                                       opts, int(rows, c_size_t), dims, c_string(path))
         end if
      end if
      call settle(status, 'coo_plan_file_new', stat)
   end subroutine plan_file_dims

   !> One step with a plan file (coo_plan_file's, or p%save's) and the
   !> values file `values` (`.npy`, or raw little-endian values of the
   !> plan's type, one per contribution in the planned order), into the
   !> Hurray file `output`, atomically; a plan in parts is refilled within
   !> `memory_budget` (spill files in `temp_dir`). The values are bit for
   !> bit a builder's for the same contributions. `output` may not be the
   !> plan or the values file (COO_ERR_ARGUMENT).
   subroutine coo_refill(plan, values, output, stat, memory_budget, threads, temp_dir)
      character(len=*), intent(in) :: plan, values, output
      integer, intent(out), optional :: stat
      integer(int64), intent(in), optional :: memory_budget
      integer, intent(in), optional :: threads
      character(len=*), intent(in), optional :: temp_dir
      type(coo_options) :: opts
      character(kind=c_char, len=:), allocatable, target :: dir
      call fill_options(opts, dir, memory_budget=memory_budget, temp_dir=temp_dir, &
                        threads=threads)
      call settle(coo_refill_file(c_string(plan), c_string(values), c_string(output), opts), &
                  'coo_refill_file', stat)
   end subroutine coo_refill

   !> Release the plan (no-op when there is none).
   subroutine plan_free(self)
      class(coo_plan_t), intent(inout) :: self
      call coo_plan_free(self%handle)
      self%handle = c_null_ptr
   end subroutine plan_free

   ! ---------------------------- refill -----------------------------

   !> A pushed refill of the COO_F64 plan `plan` (which must outlive it).
   subroutine refill_init(self, plan, stat)
      class(coo_refill_t), intent(inout) :: self
      type(coo_plan_t), intent(in) :: plan
      integer, intent(out), optional :: stat
      integer(c_int) :: status
      self%handle = coo_refill_new(plan%handle)
      status = COO_OK
      if (.not. c_associated(self%handle)) status = coo_last_status()
      call settle(status, 'coo_refill_new', stat)
   end subroutine refill_init

   !> Push the next values (one per contribution, in the builder's order).
   subroutine refill_push_1(self, values, stat)
      class(coo_refill_t), intent(inout) :: self
      real(c_double), intent(in), contiguous :: values(:)
      integer, intent(out), optional :: stat
      call settle(coo_refill_push(self%handle, values, size(values, kind=c_size_t)), &
                  'coo_refill_push', stat)
   end subroutine refill_push_1

   !> Push an element matrix's values, as push_element took ke(a, b).
   subroutine refill_push_2(self, ke, stat)
      class(coo_refill_t), intent(inout) :: self
      real(c_double), intent(in) :: ke(:, :)
      integer, intent(out), optional :: stat
      ! push_element hands the library transpose(ke) (row-major): the same.
      call settle(coo_refill_push(self%handle, transpose(ke), size(ke, kind=c_size_t)), &
                  'coo_refill_push', stat)
   end subroutine refill_push_2

   !> The result of the values pushed into `out` (the plan's nnz); the next
   !> step's pushes start.
   subroutine refill_assemble(self, out, stat)
      class(coo_refill_t), intent(inout) :: self
      real(c_double), intent(inout), contiguous :: out(:)
      integer, intent(out), optional :: stat
      call settle(coo_refill_assemble(self%handle, out, size(out, kind=c_size_t)), &
                  'coo_refill_assemble', stat)
   end subroutine refill_assemble

   !> The result of the values pushed, written to `path` (the builder's
   !> bytes); the next step's pushes start.
   subroutine refill_write(self, path, stat)
      class(coo_refill_t), intent(inout) :: self
      character(len=*), intent(in) :: path
      integer, intent(out), optional :: stat
      call settle(coo_refill_write(self%handle, c_string(path)), 'coo_refill_write', stat)
   end subroutine refill_write

   subroutine refill_free(self)
      class(coo_refill_t), intent(inout) :: self
      call coo_refill_free(self%handle)
      self%handle = c_null_ptr
   end subroutine refill_free

end module coo_assembler
