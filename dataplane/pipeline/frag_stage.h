// The fragment stage: what the pipeline does with fragments (frag_table.h has the table and the
// hold). Parse sends every fragment here (frag_arrive); after the forward exit, frag_resolve
// records each first fragment's fate and releases what waited for it. Released fragments re-enter
// at the forward exit's helpers for one packet (route, MTU, rewrite) and then the output stage, as
// a packet of the burst would (pipeline.h's map); they never run the pipeline again.
//
// Runs on: worker lcores, trace, tests.
#pragma once

#include <cstdint>

#include "dataplane/fragment/frag_table.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

struct Burst;
struct WorkerCtx;

// Parse found fragment i: a first one is registered and goes to its family's lookup; a later one
// follows its first's result, waits in the hold, or is dropped.
void frag_arrive(Burst& b, WorkerCtx& ctx, uint16_t i) noexcept;
// After the forward exit: each first fragment's result recorded, what waited for it released
// (routed, rewritten and queued by the output stage's helpers).
void frag_resolve(Burst& b, WorkerCtx& ctx) noexcept;
// Timeouts over `buckets` more buckets of the table (cheap when it is empty).
void frag_housekeeping(WorkerCtx& ctx, unsigned buckets = 16) noexcept;
// Frees every held fragment, counted under `why` (shutdown, end of a trace).
void frag_flush(WorkerCtx& ctx, DropReason why) noexcept;

}  // namespace svcgate::dp
