// micro_bench: the fast path's parts and the whole pipeline without a NIC, one file per role
// (fixture.h lists them). Speeds are reported as items (packets) per second.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
