// A minimal reader of the .npy files run.sh writes (little-endian,
// C order, 1-D), and the process's memory figures, for the C++ peers.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// The array's elements, read whole into memory; exits on anything else
// than a 1-D array of `descr` (e.g. "<i4", "<f8").
template <class T>
std::vector<T> load_npy(const std::string &path, const char *descr) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::perror(path.c_str());
        std::exit(1);
    }
    unsigned char pre[10];
    if (std::fread(pre, 1, 10, f) != 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0) {
        std::fprintf(stderr, "%s: not a .npy file\n", path.c_str());
        std::exit(1);
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = pre[8] | (pre[9] << 8);
    } else {
        unsigned char b[2];
        if (std::fread(b, 1, 2, f) != 2) std::exit(1);
        hlen = pre[8] | (pre[9] << 8) | (b[0] << 16) | (b[1] << 24);
    }
    std::string h(hlen, '\0');
    if (std::fread(&h[0], 1, hlen, f) != hlen) std::exit(1);
    if (h.find(descr) == std::string::npos || h.find("'fortran_order': False") == std::string::npos) {
        std::fprintf(stderr, "%s: want a C-order %s array, header %s\n", path.c_str(), descr, h.c_str());
        std::exit(1);
    }
    size_t p = h.find("'shape': (");
    size_t n = std::strtoull(h.c_str() + p + 10, nullptr, 10);
    std::vector<T> v(n);
    if (std::fread(v.data(), sizeof(T), n, f) != n) {
        std::fprintf(stderr, "%s: short read\n", path.c_str());
        std::exit(1);
    }
    std::fclose(f);
    return v;
}

// A field of /proc/self/status in bytes (VmRSS, VmHWM).
inline long long status_bytes(const char *field) {
    FILE *f = std::fopen("/proc/self/status", "r");
    char line[256];
    size_t n = std::strlen(field);
    long long v = -1;
    while (f && std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
            v = std::atoll(line + n + 1) * 1024;
            break;
        }
    }
    if (f) std::fclose(f);
    return v;
}

// Reset VmHWM to the current RSS.
inline void reset_peak() {
    FILE *f = std::fopen("/proc/self/clear_refs", "w");
    if (f) {
        std::fputs("5", f);
        std::fclose(f);
    }
}

inline std::vector<long long> read_shape(const std::string &path) {
    FILE *f = std::fopen(path.c_str(), "r");
    std::vector<long long> s;
    long long x;
    while (f && std::fscanf(f, "%lld,", &x) == 1) s.push_back(x);
    if (f) std::fclose(f);
    return s;
}
