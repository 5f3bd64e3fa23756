// A minimal native harness speaking the KernelBot contract (written for
// kernelbox's lang cu test): ./eval.out MODE CASES, results on POPCORN_FD.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "task.h"

static FILE* out;
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e)); exit(110); } } while (0)

static long get(const std::string& line, const char* key) {
    size_t p = line.find(std::string(key) + ":");
    return p == std::string::npos ? -1 : atol(line.c_str() + p + strlen(key) + 1);
}

int main(int argc, char** argv) {
    const char* fd = getenv("POPCORN_FD");
    if (!fd || !(out = fdopen(atoi(fd), "w"))) return 111;
    if (argc != 3) return 113;
    std::string mode = argv[1];
    std::ifstream cases(argv[2]);
    std::vector<std::string> lines;
    for (std::string l; std::getline(cases, l);) if (!l.empty()) lines.push_back(l);
    bool test = mode == "test";
    fprintf(out, "%s-count: %zu\n", test ? "test" : "benchmark", lines.size());
    bool ok = true;
    for (size_t i = 0; i < lines.size(); ++i) {
        long n = get(lines[i], "size"), seed = get(lines[i], "seed");
        if (n <= 0) return 113;
        std::vector<float> h(n), back(n);
        unsigned long s = seed * 2654435761ul + 1;
        for (long j = 0; j < n; ++j) { s = s * 6364136223846793005ul + 1442695040888963407ul; h[j] = (float)(s >> 40) / (1 << 24); }
        float *din, *dout;
        CHECK(cudaMalloc(&din, n * sizeof(float)));
        CHECK(cudaMalloc(&dout, n * sizeof(float)));
        CHECK(cudaMemcpy(din, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        CHECK(cudaMemset(dout, 0, n * sizeof(float)));
        custom_kernel(din, dout, (int)n);
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(back.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
        long bad = 0;
        for (long j = 0; j < n; ++j) bad += back[j] != h[j];
        const char* kind = test ? "test" : "benchmark";
        fprintf(out, "%s.%zu.spec: %s\n", kind, i, lines[i].c_str());
        if (bad) {
            ok = false;
            fprintf(out, "%s.%zu.status: fail\n%s.%zu.message: %ld of %ld elements differ\n", kind, i, kind, i, bad, n);
        } else if (test) {
            fprintf(out, "test.%zu.status: pass\n", i);
        } else {
            cudaEvent_t a, b;
            cudaEventCreate(&a);
            cudaEventCreate(&b);
            std::vector<double> t;
            for (int r = 0; r < 20; ++r) {
                cudaEventRecord(a);
                custom_kernel(din, dout, (int)n);
                CHECK(cudaDeviceSynchronize());
                cudaEventRecord(b);
                cudaEventSynchronize(b);
                float ms;
                cudaEventElapsedTime(&ms, a, b);
                t.push_back(ms * 1e6);
            }
            double mean = 0, var = 0;
            for (double x : t) mean += x / t.size();
            for (double x : t) var += (x - mean) * (x - mean) / (t.size() - 1);
            fprintf(out, "benchmark.%zu.runs: %zu\nbenchmark.%zu.mean: %f\nbenchmark.%zu.std: %f\nbenchmark.%zu.err: %f\nbenchmark.%zu.best: %f\nbenchmark.%zu.worst: %f\n",
                    i, t.size(), i, mean, i, std::sqrt(var), i, std::sqrt(var / t.size()), i,
                    *std::min_element(t.begin(), t.end()), i, *std::max_element(t.begin(), t.end()));
        }
        cudaFree(din);
        cudaFree(dout);
    }
    fprintf(out, "check: %s\n", ok ? "pass" : "fail");
    fclose(out);
    return ok ? 0 : 112;
}
