// Eigen's setFromTriplets on the arrays run.sh wrote: the triplet vector
// is built from the int32 rows and columns and the f64 values, then a
// row-major (CSR) SparseMatrix is set from it, duplicates summed. Per call
// the wall time (triplets included) and the peak RSS above what the
// process held before the call. One JSON line, like py_case.py.
//
//   g++ -O3 -march=native -I/usr/include/eigen3 eigen_case.cpp -o eigen_case
//   ./eigen_case /work/bench23/fe [calls]
#include <Eigen/SparseCore>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "npy.hpp"

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s DATA_PREFIX [calls]\n", argv[0]);
        return 2;
    }
    std::string pre = argv[1];
    int calls = argc > 2 ? std::atoi(argv[2]) : 3;
    auto r = load_npy<int32_t>(pre + "_r32.npy", "<i4");
    auto c = load_npy<int32_t>(pre + "_c32.npy", "<i4");
    auto v = load_npy<double>(pre + "_v.npy", "<f8");
    auto shape = read_shape(pre + ".shape");
    double load = 0;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &load) != 1) load = -1;
        std::fclose(f);
    }
    std::printf("{\"tool\": \"eigen\", \"n\": %zu, \"load_start\": %.2f, \"calls\": [", v.size(), load);
    for (int k = 0; k < calls; k++) {
        long long before = status_bytes("VmRSS");
        reset_peak();
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
            nnz = a.nonZeros();
            bytes = nnz * 12 + (shape[0] + 1) * 4;
            long long peak = status_bytes("VmHWM") - before;
            std::printf("%s{\"s\": %.4f, \"peak_mib\": %.1f, \"result_mib\": %.1f, \"nnz\": %zu}", k ? ", " : "", s,
                        peak / 1048576.0, bytes / 1048576.0, nnz);
        }
    }
    std::printf("]}\n");
    return 0;
}
