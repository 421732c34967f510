// Spin-wait on a std::atomic<bool>: a consumer thread waits for a producer
// with `while (!ready.load(std::memory_order_acquire)) {}`, a tight loop
// (load, test, branch back) with no system call, no store, no call and no
// PAUSE: its only scheduling point is the loop's backward branch, found as a
// spin loop (a sync site).  The flag lives in a struct on main's stack, so
// the load is not RIP-relative and the level `globals` adds nothing here.
// main starts the consumer first, then the producer, which fills a vector
// (allocation, arithmetic) and sets the flag with release.
//
// On one vCPU, a consumer that spins first would spin forever unless the
// machine switches threads at the loop: every schedule must let the
// producer run and the program exit 0.
#include <atomic>
#include <cstdio>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

namespace {

struct Handoff {
    std::atomic<bool> ready{false};
    std::vector<long> items;
};

void produce(Handoff &h)
{
    std::vector<long> items(64);
    std::iota(items.begin(), items.end(), 1);
    for (long &x : items)
        x = x * x % 101;
    h.items = std::move(items);
    h.ready.store(true, std::memory_order_release);
}

void consume(Handoff &h, long &total)
{
    while (!h.ready.load(std::memory_order_acquire)) {
    }
    total = std::accumulate(h.items.begin(), h.items.end(), 0L);
}

} // namespace

int main()
{
    Handoff h;
    long total = 0;
    std::thread consumer(consume, std::ref(h), std::ref(total));
    std::thread producer(produce, std::ref(h));
    producer.join();
    consumer.join();
    std::printf("%zu items, total %ld\n", h.items.size(), total);
    return 0;
}
