// The shared flow table: insert/lookup/remove/expiry, and concurrent workers.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <rte_rcu_qsbr.h>

#include <gtest/gtest.h>

#include "dataplane/base/table_memory.h"
#include "dataplane/flow/flow_table.h"

using namespace svcgate::dp;

namespace {
FlowKey key(uint32_t client, uint16_t port, uint8_t proto = 6) {
    return FlowKey{.src = Ip4::from_host(0x0a000000 | client),
                   .dst = Ip4::from_host(0xc0a84308),
                   .sport = rte_cpu_to_be_16(port),
                   .dport = rte_cpu_to_be_16(80),
                   .proto = proto};
}
FlowInit nat(const FlowKey& k, uint32_t ep) {
    FlowInit f{.key = {k,
                       FlowKey{.src = Ip4::from_host(0x0af40000 | ep),
                               .dst = k.src,
                               .sport = k.dport,
                               .dport = k.sport,
                               .proto = k.proto}}};
    return f;
}
}  // namespace

TEST(FlowTable, InsertLookupBothDirectionsRemove) {
    auto t = FlowTable::create({.capacity = 1024, .owners = 1});
    ASSERT_TRUE(t);
    FlowInit f = nat(key(1, 1000), 7);
    auto r = t->insert(0, f, 10);
    ASSERT_EQ(r.status, InsertStatus::inserted);
    FlowRef o = t->lookup(f.key[0]);
    FlowRef p = t->lookup(f.key[1]);
    ASSERT_TRUE(o.hit());
    ASSERT_TRUE(p.hit());
    EXPECT_EQ(o.id, r.id);
    EXPECT_EQ(o.dir, Direction::original);
    EXPECT_EQ(p.dir, Direction::reply);
    EXPECT_EQ(t->insert(0, f, 10).status, InsertStatus::exists);
    FlowInit clash = nat(key(2, 1000), 7);
    clash.key[1] = f.key[1];
    EXPECT_EQ(t->insert(0, clash, 10).status, InsertStatus::reply_clash);
    t->remove(r.id);
    EXPECT_FALSE(t->lookup(f.key[0]).hit());
    EXPECT_FALSE(t->lookup(f.key[1]).hit());
    EXPECT_EQ(t->live_total(), 0u);
}

// A counting table (Params::count) keeps each flow's packets and octets per direction, and a
// record whose id is reused starts from zero; a table that does not count has no counters.
TEST(FlowTable, CountsEachDirectionAndAReusedRecordStartsFromZero) {
    auto plain = FlowTable::create({.capacity = 64, .owners = 1});
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->counters(0), nullptr);
    auto t = FlowTable::create({.capacity = 1, .owners = 1, .count = true});
    ASSERT_TRUE(t);
    const auto r = t->insert(0, nat(key(1, 1000), 7), 10);
    ASSERT_EQ(r.status, InsertStatus::inserted);
    FlowCounters* c = t->counters(r.id);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c, t->counters_of(t->flow(r.id)));
    c->add(Direction::original, 60);
    c->add(Direction::original, 52);
    c->add(Direction::reply, 1500);
    EXPECT_EQ(c->packets[0].load(), 2u);
    EXPECT_EQ(c->octets[0].load(), 112u);
    EXPECT_EQ(c->packets[1].load(), 1u);
    EXPECT_EQ(c->octets[1].load(), 1500u);
    t->remove(r.id);
    const auto again = t->insert(0, nat(key(2, 1000), 7), 11);  // one record: the same id
    ASSERT_EQ(again.status, InsertStatus::inserted);
    ASSERT_EQ(again.id, r.id);
    for (unsigned d = 0; d < 2; ++d) {
        EXPECT_EQ(c->packets[d].load(), 0u) << d;
        EXPECT_EQ(c->octets[d].load(), 0u) << d;
    }
}

// The bulk lookup runs the caller's `ahead` work once, after every key is hashed and before any
// bucket is read, and answers as without it: hits in both directions, misses, and the hashes.
TEST(FlowTable, BulkLookupRunsTheCallersWorkOnceAndAnswersAsWithout) {
    auto t = FlowTable::create({.capacity = 1024, .owners = 1});
    ASSERT_TRUE(t);
    std::vector<FlowKey> keys;
    for (uint32_t i = 0; i < 32; ++i) {
        const FlowInit f = nat(key(i, static_cast<uint16_t>(1000 + i)), i);
        if (i % 3 == 0) {
            ASSERT_EQ(t->insert(0, f, 10).status, InsertStatus::inserted);
        }
        keys.push_back(i % 2 ? f.key[0] : f.key[1]);
    }
    const FlowKey* ptrs[32];
    for (unsigned i = 0; i < 32; ++i) ptrs[i] = &keys[i];
    FlowRef plain[32], with[32];
    KeyHash h_plain[32], h_with[32];
    const unsigned misses = t->lookup_bulk(ptrs, 32, plain, h_plain);
    struct Seen {
        int calls = 0;
    } seen;
    const FlowTable::Ahead ahead{[](void* a) noexcept { ++static_cast<Seen*>(a)->calls; }, &seen};
    EXPECT_EQ(t->lookup_bulk(ptrs, 32, with, h_with, &ahead), misses);
    EXPECT_EQ(seen.calls, 1);
    EXPECT_EQ(misses, 21u) << "11 of the 32 flows were inserted";
    for (unsigned i = 0; i < 32; ++i) {
        EXPECT_EQ(with[i].hit(), plain[i].hit()) << i;
        EXPECT_EQ(with[i].hit(), i % 3 == 0) << i;
        if (with[i].hit()) {
            EXPECT_EQ(with[i].dir, i % 2 ? Direction::original : Direction::reply) << i;
        }
        EXPECT_EQ(with[i].id, plain[i].id) << i;
        EXPECT_EQ(h_with[i].b1, h_plain[i].b1) << i;
    }
}

TEST(FlowTable, FillsToCapacityThenReportsFull) {
    auto t = FlowTable::create({.capacity = 4096, .owners = 1});
    std::vector<uint32_t> inserted;
    for (uint32_t i = 0; i < 5000; ++i)
        if (t->insert(0, nat(key(i, 1000 + i % 50000), 1), 0).status == InsertStatus::inserted) inserted.push_back(i);
    // Every record is used; an index bucket pair may overflow first for a rare key (that insert
    // says full and a later key takes the record), so count, then find every one inserted.
    EXPECT_EQ(inserted.size(), 4096u);
    EXPECT_LE(inserted.back(), 4200u) << "buckets at 50% load with cuckoo moves rarely overflow";
    EXPECT_EQ(t->insert(0, nat(key(99999, 1), 1), 0).status, InsertStatus::full);
    for (uint32_t i : inserted) EXPECT_TRUE(t->lookup(nat(key(i, 1000 + i % 50000), 1).key[0]).hit()) << i;
}

// Two-choice hashing needs two independent buckets per key: with two CRCs that differ by a
// constant (CRC is affine in its seed) every bucket had one fixed partner, and a full table of
// sequential tuples overflowed pairs long before its capacity.
TEST(FlowTable, FillsAQuarterMillionSequentialFlowsWithoutOverflow) {
    const uint32_t n = 1u << 18;
    auto t = FlowTable::create({.capacity = n, .owners = 1});
    ASSERT_TRUE(t);
    uint32_t failed = 0;
    for (uint32_t i = 0; i < n; ++i)
        failed += t->insert(0, nat(key(i / 50000, static_cast<uint16_t>(10000 + i % 50000)), i), 0).status !=
            InsertStatus::inserted;
    EXPECT_EQ(failed, 0u);
    EXPECT_EQ(t->live_total(), n);
}

TEST(FlowTable, ExpiryFollowsProtocolTimeouts) {
    auto t = FlowTable::create({.capacity = 1024, .owners = 1});
    FlowInit tcp = nat(key(1, 1), 1);
    tcp.state = static_cast<uint8_t>(TcpState::established);
    FlowInit udp = nat(key(2, 2, 17), 1);
    ASSERT_EQ(t->insert(0, tcp, 100).status, InsertStatus::inserted);
    ASSERT_EQ(t->insert(0, udp, 100).status, InsertStatus::inserted);
    auto none = [](const Flow&) {};
    EXPECT_EQ(t->expire_step(0, 100 + 30, 1024, none), 0u);  // udp unreplied: 30 s, not past yet
    EXPECT_EQ(t->expire_step(0, 100 + 31, 1024, none), 1u);
    EXPECT_FALSE(t->lookup(udp.key[0]).hit());
    EXPECT_TRUE(t->lookup(tcp.key[0]).hit());
    EXPECT_EQ(t->expire_step(0, 100 + 86401, 1024, none), 1u);
    EXPECT_EQ(t->live_total(), 0u);
}

TEST(FlowTable, ConcurrentWorkersInsertAndLookupEachOthersFlows) {
    // Two owners insert disjoint flows while two readers look up both directions of every
    // flow already published: no lost or wrong entries.
    constexpr uint32_t kPer = 50000;
    auto t = FlowTable::create({.capacity = 2 * kPer + 1024, .owners = 2});
    std::atomic<uint32_t> published[2] = {0, 0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> th;
    for (uint16_t w = 0; w < 2; ++w)
        th.emplace_back([&, w] {
            for (uint32_t i = 0; i < kPer; ++i) {
                auto r = t->insert(w, nat(key(w << 20 | i, static_cast<uint16_t>(i)), w), 0);
                if (r.status != InsertStatus::inserted) failed = true;
                published[w].store(i + 1, std::memory_order_release);
            }
        });
    std::atomic<uint64_t> checks{0};
    for (uint16_t w = 0; w < 2; ++w)
        th.emplace_back([&, w] {
            uint16_t other = 1 - w;
            // 200,000 lookups each, counted only once the other owner has published something
            // (on a loaded machine the readers may start long before the writers).
            for (uint32_t round = 0; round < 200000;) {
                uint32_t n = published[other].load(std::memory_order_acquire);
                if (n == 0) {
                    std::this_thread::yield();
                    continue;
                }
                uint32_t i = (round++ * 7919u) % n;
                FlowInit f = nat(key(uint32_t{other} << 20 | i, static_cast<uint16_t>(i)), other);
                FlowRef a = t->lookup(f.key[0]), b = t->lookup(f.key[1]);
                if (!a.hit() || !b.hit() || a.id != b.id || !(t->flow(a.id).key[1] == f.key[1])) failed = true;
                checks++;
            }
        });
    for (auto& x : th) x.join();
    EXPECT_FALSE(failed);
    EXPECT_EQ(checks.load(), 400000u);
    EXPECT_EQ(t->live_total(), 2 * kPer);
}

TEST(FlowTable, RacingInsertsOfOneFlowConvergeOnOneRecord) {
    // The DNS A/AAAA race: two workers see the first datagram of the same new flow at once.
    auto t = FlowTable::create({.capacity = 1 << 16, .owners = 2});
    for (uint32_t round = 0; round < 2000; ++round) {
        FlowKey k = key(round, 53, 17);
        std::atomic<int> go{0};
        InsertResult res[2];
        std::thread a([&] {
            while (!go) {}
            res[0] = t->insert(0, nat(k, 1), 0);
        });
        std::thread b([&] {
            while (!go) {}
            res[1] = t->insert(1, nat(k, 2), 0);
        });
        go = 1;
        a.join();
        b.join();
        int inserted = (res[0].status == InsertStatus::inserted) + (res[1].status == InsertStatus::inserted);
        ASSERT_EQ(inserted, 1) << "round " << round;
        ASSERT_EQ(res[0].id, res[1].id) << "both workers must use one record";
    }
}

// The index keeps a tuple in its first bucket while that has room, counts the ones it put in their
// second in the first's spill, and makes room by one cuckoo step when both are full: a table kept
// 100% full under churn loses no insert, finds every flow, and its spill counts return to zero
// when it empties (a count left behind would send every later lookup of that bucket to a second
// line).
TEST(FlowTable, AFullTableUnderChurnKeepsItsTuplesInTheirFirstBucket) {
    const uint32_t cap = 1u << 16;
    auto t = FlowTable::create({.capacity = cap, .owners = 1});
    ASSERT_TRUE(t);
    std::deque<std::pair<uint32_t, uint32_t>> live;  // (tuple number, record id), oldest first
    uint32_t failed = 0, next = 0;
    auto add = [&] {
        const uint32_t i = next++;
        const auto r = t->insert(0, nat(key(i / 40000, static_cast<uint16_t>(10000 + i % 40000)), i % 1000), 0);
        if (r.status == InsertStatus::inserted)
            live.emplace_back(i, r.id);
        else
            ++failed;
    };
    while (live.size() < cap) add();
    for (uint32_t round = 0; round < 2 * cap; ++round) {
        t->remove(live.front().second);
        live.pop_front();
        add();
    }
    EXPECT_EQ(failed, 0u);
    ASSERT_EQ(live.size(), cap);
    for (const auto& [i, id] : live) {
        const FlowInit f = nat(key(i / 40000, static_cast<uint16_t>(10000 + i % 40000)), i % 1000);
        const FlowRef a = t->lookup(f.key[0]), b = t->lookup(f.key[1]);
        ASSERT_TRUE(a.hit() && b.hit()) << i;
        EXPECT_EQ(a.id, id);
        EXPECT_EQ(b.id, id);
    }
    const auto st = t->index_stats();
    EXPECT_EQ(st.entries, 2u * cap);
    EXPECT_GT(st.moves, 0u) << "a full table under churn meets two full buckets";
    EXPECT_LT(st.in_second * 100, st.entries * 8) << st.in_second << " of " << st.entries << " in their second bucket";
    EXPECT_LT(st.spilling_buckets * 100, st.buckets * 15) << st.spilling_buckets << " of " << st.buckets;
    for (const auto& [i, id] : live) t->remove(id);
    const auto empty = t->index_stats();
    EXPECT_EQ(empty.entries, 0u);
    EXPECT_EQ(empty.in_second, 0u);
    EXPECT_EQ(empty.spilling_buckets, 0u);
}

// Lookups racing a writer that moves entries: an index crowded to over 90% of its slots, kept
// there by churn, moves entries of long-lived flows between their buckets while readers look
// those flows up, one at a time and in bursts; no lookup may miss them (a miss of an established
// flow's reply would leave untranslated). Ids are reused after grace periods, as in the daemon
// (ThreadSanitizer checks the record reads).
TEST(FlowTable, ReadersNeverMissAFlowWhoseEntryMoves) {
    constexpr uint32_t kCap = 1024, kBuckets = 64, kStable = 120;  // 448 slots: 240 stable entries
    constexpr uint32_t kChurn = 90;                                // + up to 180: 94% of the slots
    constexpr uint64_t kMoves = 2000;
    const size_t qsz = rte_rcu_qsbr_get_memsize(3);
    auto* qsbr = static_cast<rte_rcu_qsbr*>(std::aligned_alloc(RTE_CACHE_LINE_SIZE, (qsz + 63) & ~size_t{63}));
    std::memset(qsbr, 0, qsz);
    ASSERT_EQ(rte_rcu_qsbr_init(qsbr, 3), 0);
    auto t = FlowTable::create({.capacity = kCap, .owners = 1, .qsbr = qsbr, .index_buckets = kBuckets});
    ASSERT_TRUE(t);
    auto flow = [](uint32_t i) { return nat(key(i / 40000, static_cast<uint16_t>(10000 + i % 40000)), i % 100); };
    std::vector<uint32_t> stable_id(kStable);
    for (uint32_t i = 0; i < kStable; ++i) {
        const auto r = t->insert(0, flow(i), 0);
        ASSERT_EQ(r.status, InsertStatus::inserted);
        stable_id[i] = r.id;
    }
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::atomic<uint64_t> missed{0}, looked{0};
    std::vector<std::thread> readers;
    for (uint32_t r = 1; r <= 2; ++r) {
        readers.emplace_back([&, r] {
            rte_rcu_qsbr_thread_register(qsbr, r);
            rte_rcu_qsbr_thread_online(qsbr, r);
            ready.fetch_add(1);
            uint32_t at = r * 7919;
            while (!stop.load(std::memory_order_relaxed)) {
                FlowInit f[kBurst];
                const FlowKey* keys[kBurst];
                FlowRef out[kBurst];
                for (unsigned j = 0; j < kBurst; ++j) {
                    f[j] = flow(at++ % kStable);
                    keys[j] = &f[j].key[j & 1];  // both directions
                }
                t->lookup_bulk(keys, kBurst, out);
                for (unsigned j = 0; j < kBurst; ++j) {
                    const uint32_t i = (at - kBurst + j) % kStable;
                    missed += !out[j].hit() || out[j].id != stable_id[i];
                    const FlowRef one = t->lookup(f[j].key[1 - (j & 1)]);
                    missed += !one.hit() || one.id != stable_id[i];
                }
                looked += 2 * kBurst;
                rte_rcu_qsbr_quiescent(qsbr, r);
            }
            rte_rcu_qsbr_thread_offline(qsbr, r);
            rte_rcu_qsbr_thread_unregister(qsbr, r);
        });
    }
    // rte_rcu_qsbr_thread_online orders itself with a fence ThreadSanitizer does not model: the
    // writer starts once the readers are in their loop (as the daemon's workers do).
    while (ready.load() < 2) std::this_thread::yield();
    std::deque<uint32_t> churn;
    uint32_t next = kStable;
    const uint64_t moves0 = t->index_stats().moves;
    uint64_t moved = 0;
    // Churn until entries have moved often enough, bounded in rounds. An insert the crowded index
    // or the grace period refuses is simply not kept.
    for (uint32_t round = 1; round <= 1000000 && moved < kMoves; ++round) {
        if (churn.size() >= kChurn) {
            t->remove(churn.front());
            churn.pop_front();
        }
        if (const auto r = t->insert(0, flow(next++), 0); r.status == InsertStatus::inserted) churn.push_back(r.id);
        if (round % 256 == 0) moved = t->index_stats().moves - moves0;
    }
    stop = true;
    for (auto& th : readers) th.join();
    EXPECT_GE(moved, kMoves) << "the writer must have moved entries while the readers looked";
    EXPECT_EQ(missed.load(), 0u) << "of " << looked.load() << " lookups";
    EXPECT_GT(looked.load(), 0u);
    t.reset();
    std::free(qsbr);
}

// A removed flow's id is not handed out again before every reader has passed a quiescent state
// after its removal (the reader may still be comparing that record's key), however its removal
// was batched: one id, ids in batches of kBatchIds, more batches than an owner keeps apart. Once
// the reader reports, every one of them comes back, and nothing else.
TEST(FlowTable, ARemovedFlowsIdWaitsForEveryReadersQuiescentState) {
    const size_t qsz = rte_rcu_qsbr_get_memsize(1);
    auto* qsbr = static_cast<rte_rcu_qsbr*>(std::aligned_alloc(RTE_CACHE_LINE_SIZE, (qsz + 63) & ~size_t{63}));
    std::memset(qsbr, 0, qsz);
    ASSERT_EQ(rte_rcu_qsbr_init(qsbr, 1), 0);
    ASSERT_EQ(rte_rcu_qsbr_thread_register(qsbr, 0), 0);
    rte_rcu_qsbr_thread_online(qsbr, 0);  // a reader that holds on until it reports
    constexpr uint32_t kCap = 4096;
    auto t = FlowTable::create({.capacity = kCap, .owners = 1, .qsbr = qsbr});
    ASSERT_TRUE(t);
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; ids.size() < kCap && i < 2 * kCap; ++i)
        if (auto r = t->insert(0, nat(key(i, 1000), 1), 0); r.status == InsertStatus::inserted) ids.push_back(r.id);
    ASSERT_EQ(ids.size(), kCap);
    uint32_t next = 2 * kCap;  // tuples not inserted yet
    auto insert_one = [&] { return t->insert(0, nat(key(next++, 2000), 1), 0); };
    // Removed in runs of 1, 7, 32 and 33 ids, with an insert between runs (it reclaims, closing
    // a batch each time): 200 runs, more than the 64 batches an owner keeps apart.
    std::set<uint32_t> removed;
    const uint32_t runs[] = {1, 7, 32, 33};
    for (unsigned r = 0; r < 200 && removed.size() + 33 < kCap; ++r) {
        for (uint32_t k = 0; k < runs[r % 4]; ++k) {
            const uint32_t id = ids.back();
            ids.pop_back();
            t->remove(id);
            removed.insert(id);
        }
        ASSERT_EQ(insert_one().status, InsertStatus::full)
            << "run " << r << ": an id came back within its grace period";
    }
    ASSERT_GT(removed.size(), 2000u);
    rte_rcu_qsbr_quiescent(qsbr, 0);
    // Removed after the report: these wait for the next one, and so may ids of the batch they
    // join (the newest, once an owner's batches are all in use).
    std::set<uint32_t> later;
    for (int k = 0; k < 5; ++k) {
        later.insert(ids.back());
        t->remove(ids.back());
        ids.pop_back();
    }
    auto drain = [&] {
        std::set<uint32_t> got;
        for (InsertResult r = insert_one(); r.status == InsertStatus::inserted; r = insert_one()) got.insert(r.id);
        return got;
    };
    const std::set<uint32_t> first = drain();
    EXPECT_GE(first.size(), 63u) << "the batches closed before the report";
    for (uint32_t id : first) {
        EXPECT_TRUE(removed.count(id)) << id << " was not removed before the report";
        EXPECT_FALSE(later.count(id)) << id << " came back within its grace period";
    }
    rte_rcu_qsbr_quiescent(qsbr, 0);
    std::set<uint32_t> all = drain();
    all.insert(first.begin(), first.end());
    std::set<uint32_t> want = removed;
    want.insert(later.begin(), later.end());
    EXPECT_EQ(all, want) << "every removed id back, once, and nothing else";
    t.reset();
    rte_rcu_qsbr_thread_offline(qsbr, 0);
    std::free(qsbr);
}

namespace {

// The VmFlags of the mapping that holds `p` (/proc/self/smaps), empty when none does.
std::string vm_flags_of(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = lo <= at && at < hi;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            return line;
        }
    }
    return {};
}

}  // namespace

// The tables workers index at random: a large one on a mapping of its own, 2 MiB aligned and
// advised as huge pages (VmFlags "hg"), its elements value-initialised; a small one an ordinary
// aligned allocation. The flow table's arrays come from the same place.
TEST(TableMemory, ALargeTableIsAdvisedAsHugePagesAndZeroed) {
    struct Cell {
        uint64_t a = 0;
        uint32_t b = 7;
    };
    const size_t n = (size_t{5} << 20) / sizeof(Cell);  // 5 MiB: three huge pages
    TablePtr<Cell> big = make_table<Cell>(n);
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.get()) % kHugePage, 0u);
    EXPECT_TRUE(big.get_deleter().mapped);
    EXPECT_NE(vm_flags_of(big.get()).find(" hg"), std::string::npos) << vm_flags_of(big.get());
    EXPECT_NE(vm_flags_of(&big[n - 1]).find(" hg"), std::string::npos) << "the whole table";
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += big[i].a != 0 || big[i].b != 7;
    EXPECT_EQ(wrong, 0u);

    TablePtr<Cell> small = make_table<Cell>(100);
    ASSERT_NE(small, nullptr);
    EXPECT_FALSE(small.get_deleter().mapped);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small.get()) % alignof(Cell), 0u);
    EXPECT_EQ(small[99].b, 7u);

    auto table = FlowTable::create(FlowTable::Params{.capacity = 1u << 16});
    ASSERT_NE(table, nullptr);
    EXPECT_NE(vm_flags_of(&table->flow(0)).find(" hg"), std::string::npos) << "4 MiB of records";
}

// What the daemon reads to warn that the tables will not get huge pages.
TEST(TableMemory, TheSelectedTransparentHugePageMode) {
    EXPECT_EQ(thp_selected("always [madvise] never\n"), "madvise");
    EXPECT_EQ(thp_selected("[always] madvise never"), "always");
    EXPECT_EQ(thp_selected("always madvise [never]\n"), "never");
    EXPECT_EQ(thp_selected(""), "");
    EXPECT_EQ(thp_selected("always madvise never"), "") << "none selected";
    EXPECT_EQ(thp_selected("] always ["), "") << "brackets the wrong way round";
}

// The tuples compare as wholes: equal copies are equal, and a key that differs from another in
// any one byte of its 40 (the padding too: parse and the table keep it zero) is not equal to it.
TEST(FlowKey6, EqualOnlyWhenEveryByteIs) {
    FlowKey6 a{};
    for (unsigned i = 0; i < 16; ++i) a.src.b[i] = static_cast<uint8_t>(0xfd + i), a.dst.b[i] = static_cast<uint8_t>(i);
    a.sport = 0x1234;
    a.dport = 0x5678;
    a.proto = 6;
    const FlowKey6 same = a;
    EXPECT_TRUE(a == same);
    for (unsigned at = 0; at < sizeof(FlowKey6); ++at) {
        for (const uint8_t bit : {0x01, 0x80}) {
            FlowKey6 b = a;
            reinterpret_cast<uint8_t*>(&b)[at] ^= bit;
            EXPECT_FALSE(a == b) << "byte " << at << ", bit " << int{bit};
            EXPECT_FALSE(b == a) << "byte " << at << ", bit " << int{bit};
        }
    }
}
