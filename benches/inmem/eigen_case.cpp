// Eigen's setFromTriplets on the arrays run.sh wrote: the triplet vector
// is built from the int32 rows and columns and the f64 values, then a
// row-major (CSR) SparseMatrix is set from it, duplicates summed. Per call
// the wall time (triplets included) and the peak RSS above what the
// process held before the call. One JSON line, like py_case.py.
//
//   g++ -O3 -march=native -I/usr/include/eigen3 eigen_case.cpp -o eigen_case
//   ./eigen_case DATA/fe [calls]
//   ./eigen_case PREFIX --median SECONDS   # small calls (small.py): warm,
//       repeated for SECONDS (at least 5 calls), the median call time only
#include <Eigen/SparseCore>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/resource.h>

#include "npy.hpp"

// One setFromTriplets call as a caller makes it: triplets built from the
// arrays, matrix set, triplets dropped. Returns the matrix's nonzeros.
static size_t one_call(const std::vector<int32_t> &r, const std::vector<int32_t> &c,
                       const std::vector<double> &v, const std::vector<long long> &shape) {
    std::vector<Eigen::Triplet<double, int>> t;
    t.reserve(v.size());
    for (size_t i = 0; i < v.size(); i++) t.emplace_back(r[i], c[i], v[i]);
    Eigen::SparseMatrix<double, Eigen::RowMajor, int> a(shape[0], shape[1]);
    a.setFromTriplets(t.begin(), t.end());
    return a.nonZeros();
}

// User + system CPU seconds of this process so far.
static double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static int median_mode(const std::vector<int32_t> &r, const std::vector<int32_t> &c,
                       const std::vector<double> &v, const std::vector<long long> &shape,
                       double seconds) {
    using clk = std::chrono::steady_clock;
    size_t nnz = one_call(r, c, v, shape);  // warm up
    std::vector<double> ts;
    auto end = clk::now() + std::chrono::duration<double>(seconds);
    while (clk::now() < end || ts.size() < 5) {
        auto t0 = clk::now();
        nnz = one_call(r, c, v, shape);
        ts.push_back(std::chrono::duration<double>(clk::now() - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    size_t k = ts.size();
    double med = k % 2 ? ts[k / 2] : 0.5 * (ts[k / 2 - 1] + ts[k / 2]);
    std::printf("{\"tool\": \"eigen-small\", \"n\": %zu, \"nnz\": %zu, \"calls\": %zu, \"median_ms\": %.5f}\n",
                v.size(), nnz, k, med * 1e3);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s DATA_PREFIX [calls]\n", argv[0]);
        return 2;
    }
    std::string pre = argv[1];
    bool median = argc > 3 && std::string(argv[2]) == "--median";
    int calls = argc > 2 && !median ? std::atoi(argv[2]) : 3;
    auto r = load_npy<int32_t>(pre + "_r32.npy", "<i4");
    auto c = load_npy<int32_t>(pre + "_c32.npy", "<i4");
    auto v = load_npy<double>(pre + "_v.npy", "<f8");
    auto shape = read_shape(pre + ".shape");
    if (median) return median_mode(r, c, v, shape, std::atof(argv[3]));
    double load = 0;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &load) != 1) load = -1;
        std::fclose(f);
    }
    std::printf("{\"tool\": \"eigen\", \"n\": %zu, \"load_start\": %.2f, \"calls\": [", v.size(), load);
    for (int k = 0; k < calls; k++) {
        long long before = status_bytes("VmRSS");
        reset_peak();
        double c0 = cpu_seconds();
        auto t0 = std::chrono::steady_clock::now();
        size_t nnz, bytes;
        {
            std::vector<Eigen::Triplet<double, int>> t;
            t.reserve(v.size());
            for (size_t i = 0; i < v.size(); i++) t.emplace_back(r[i], c[i], v[i]);
            Eigen::SparseMatrix<double, Eigen::RowMajor, int> a(shape[0], shape[1]);
            a.setFromTriplets(t.begin(), t.end());
            // The triplets go before the clock stops, as a caller would drop them.
            std::vector<Eigen::Triplet<double, int>>().swap(t);
            auto t1 = std::chrono::steady_clock::now();
            double s = std::chrono::duration<double>(t1 - t0).count();
            double cpu = cpu_seconds() - c0;
            nnz = a.nonZeros();
            bytes = nnz * 12 + (shape[0] + 1) * 4;
            long long peak = status_bytes("VmHWM") - before;
            std::printf("%s{\"s\": %.4f, \"cpu_s\": %.4f, \"peak_mib\": %.1f, \"result_mib\": %.1f, \"nnz\": %zu}",
                        k ? ", " : "", s, cpu, peak / 1048576.0, bytes / 1048576.0, nnz);
        }
    }
    std::printf("]}\n");
    return 0;
}
