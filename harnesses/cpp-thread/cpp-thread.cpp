// Two C++ registries that swap their contents, each swap holding both
// registries' std::mutex through two std::lock_guards: `a.swap_with(b)`
// locks a then b, and the other thread's `b.swap_with(a)` locks b then a.
// The second thread first polls b's size six times (each a lock_guard).
//
// Bug: if the first thread is preempted between its two lock_guards
// (holding a's mutex) and the second thread polls and takes b's, each waits
// for the other: deadlocked.  One preemption, but then the second thread
// must run about fifteen scheduling points in a row: PCT and a search that
// lets the thread it switched to run on find that quickly, a coin flip at
// every step rarely does.  The window holds only the next
// pthread_mutex_lock (std::mutex is a pthread mutex), so the shim is needed.
//
// Fix (-DFIXED): std::scoped_lock locks both mutexes with std::lock's
// deadlock-avoidance algorithm (lock one, try the other, back off and block
// on the one that was busy), so the opposite argument order is harmless.
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

class Registry {
public:
    explicit Registry(std::vector<std::string> names) : names_(std::move(names)) {}

    void swap_with(Registry &other)
    {
#ifdef FIXED
        std::scoped_lock both(mutex_, other.mutex_);
#else
        std::lock_guard<std::mutex> mine(mutex_);
        std::lock_guard<std::mutex> theirs(other.mutex_);
#endif
        names_.swap(other.names_);
        swaps_++;
    }

    std::size_t size()
    {
        std::lock_guard<std::mutex> guard(mutex_);
        return names_.size();
    }

    int swaps()
    {
        std::lock_guard<std::mutex> guard(mutex_);
        return swaps_;
    }

private:
    std::mutex mutex_;
    std::vector<std::string> names_;
    int swaps_ = 0;
};

// Busy work between thread starts.  Natively, threads started back to back
// begin within microseconds of each other on different CPUs; this spaces
// them out so the race stays as rare natively as races are in real
// programs.  It makes no system call, so in the VM it is no scheduling
// point and changes nothing.
void stagger()
{
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 100000; i++)
        sink = sink + i;
}

}  // namespace

int main()
{
    Registry a({"alpha", "beta", "gamma"});
    Registry b({"delta", "epsilon"});
    std::thread first([&] { a.swap_with(b); });
    stagger();
    std::thread second([&] {
        std::size_t polled = 0;
        for (int i = 0; i < 6; i++)
            polled += b.size();
        if (polled > 0)
            b.swap_with(a);
    });
    first.join();
    second.join();
    // Two swaps bring the contents back whatever their order.
    std::printf("a has %zu names, b has %zu, %d swaps\n", a.size(), b.size(),
                a.swaps() + b.swaps());
    return a.size() == 3 && b.size() == 2 ? 0 : 1;
}
