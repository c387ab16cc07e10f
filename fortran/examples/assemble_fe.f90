! Assemble the 2D Poisson stiffness matrix with linear triangles on the
! unit square (an n x n grid of squares, each cut into two triangles),
! one coo_pusher_t per OpenMP thread, 1-based indices; then read it back.
!
!   cargo build --release -p coo-assembler-capi
!   gfortran -O2 -fopenmp fortran/coo_assembler.f90 fortran/examples/assemble_fe.f90 \
!       -Ltarget/release -lcoo_assembler -Wl,-rpath,$PWD/target/release -o assemble_fe
!   ./assemble_fe K.hrry 32
!
! Without -fopenmp it runs on one thread, unchanged.
program assemble_fe
   use coo_assembler
   use, intrinsic :: iso_fortran_env, only: int64, real64
   !$ use omp_lib, only: omp_get_max_threads
   implicit none

   character(len=4096) :: path, arg
   integer :: n, nodes, nthreads, e, stat
   type(coo_builder_t) :: b
   type(coo_pusher_t) :: p
   type(coo_summary) :: summary
   type(coo_file_t) :: f
   type(coo_info) :: info
   integer :: dofs(3)
   real(real64) :: ke(3, 3), x(3), y(3), v, row_sum, worst
   integer(int64) :: first, prev, idx(2, 256)
   real(real64) :: vals(256)
   integer :: got, k, centre

   path = 'K.hrry'
   n = 32
   if (command_argument_count() >= 1) call get_command_argument(1, path)
   if (command_argument_count() >= 2) then
      call get_command_argument(2, arg)
      read (arg, *) n
   end if
   nodes = (n + 1)**2
   nthreads = 1
   !$ nthreads = omp_get_max_threads()

   ! Every pusher holds part of the budget: allow one per thread.
   call b%init([nodes, nodes], COO_F64, memory_budget=64_int64*2**20, &
               threads=nthreads, one_based=.true.)

   !$omp parallel private(p, e, dofs, x, y, ke)
   call p%init(b)
   !$omp do schedule(static)
   do e = 1, 2*n*n
      call triangle(e, dofs, x, y)
      call p1_stiffness(x, y, ke)
      call p%push_element(dofs, ke)
   end do
   !$omp end do
   call p%free()
   !$omp end parallel

   call b%finish(trim(path), summary)
   print '(a,i0,a,i0,a,i0)', 'contributions=', summary%contributions, ' nnz=', summary%nnz, &
      ' threads=', nthreads

   ! Read back: the centre node couples to itself with 4 (the 5-point stencil).
   call f%open(trim(path), one_based=.true.)
   call f%info(info)
   print '(a,i0,a,i0,a,i0)', 'shape=', info%shape(1), 'x', info%shape(2), ' nnz=', info%nnz
   centre = (n/2)*(n + 1) + n/2 + 1
   call f%get([centre, centre], v)
   print '(a,i0,a,i0,a,f0.3)', 'K(', centre, ',', centre, ')=', v

   ! Every row of a pure Neumann stiffness matrix sums to zero: read the
   ! entries in storage (row-major) order, a batch at a time.
   worst = 0
   row_sum = 0
   prev = -1
   first = 1
   do
      call f%read_entries(first, idx, vals, got)
      if (got == 0) exit
      do k = 1, got
         if (idx(1, k) /= prev .and. prev /= -1) then
            worst = max(worst, abs(row_sum))
            row_sum = 0
         end if
         prev = idx(1, k)
         row_sum = row_sum + vals(k)
      end do
      first = first + got
   end do
   worst = max(worst, abs(row_sum))
   print '(a,es9.2)', 'max |row sum|=', worst
   call f%verify(stat)
   print '(a,i0)', 'verify=', stat
   call f%close()

contains

   !> Nodes (1-based) and coordinates of triangle e: square (i, j) is cut
   !> along its diagonal into a lower (odd e) and an upper (even e) triangle.
   subroutine triangle(e, dofs, x, y)
      integer, intent(in) :: e
      integer, intent(out) :: dofs(3)
      real(real64), intent(out) :: x(3), y(3)
      integer :: s, i, j, c(3, 2)
      s = (e - 1)/2
      i = mod(s, n)
      j = s/n
      if (mod(e, 2) == 1) then
         c = reshape([i, i + 1, i + 1, j, j, j + 1], [3, 2])
      else
         c = reshape([i, i + 1, i, j, j + 1, j + 1], [3, 2])
      end if
      dofs = c(:, 2)*(n + 1) + c(:, 1) + 1
      x = real(c(:, 1), real64)/n
      y = real(c(:, 2), real64)/n
   end subroutine triangle

   !> Stiffness of a linear triangle: area * grad(phi_a) . grad(phi_b).
   subroutine p1_stiffness(x, y, ke)
      real(real64), intent(in) :: x(3), y(3)
      real(real64), intent(out) :: ke(3, 3)
      real(real64) :: bx(3), by(3), area2
      area2 = (x(2) - x(1))*(y(3) - y(1)) - (x(3) - x(1))*(y(2) - y(1))
      bx = [y(2) - y(3), y(3) - y(1), y(1) - y(2)]
      by = [x(3) - x(2), x(1) - x(3), x(2) - x(1)]
      ke = (spread(bx, 2, 3)*spread(bx, 1, 3) + spread(by, 2, 3)*spread(by, 1, 3))/(2*area2)
   end subroutine p1_stiffness

end program assemble_fe
