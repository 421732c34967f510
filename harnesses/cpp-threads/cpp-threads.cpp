// A small work queue in C++: main pushes 20 tasks, 3 std::thread workers
// pop them under a std::mutex, waiting on a std::condition_variable, and add
// the squares to a shared total.  A `closed` flag ends the workers.  Correct
// under every schedule: the sum of squares of 1..20 is 2870.
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

class WorkQueue {
public:
    void push(int task)
    {
        {
            std::lock_guard<std::mutex> guard(mutex_);
            tasks_.push_back(task);
        }
        ready_.notify_one();
    }

    void close()
    {
        {
            std::lock_guard<std::mutex> guard(mutex_);
            closed_ = true;
        }
        ready_.notify_all();
    }

    // Returns false once the queue is closed and empty.
    bool pop(int &task)
    {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return closed_ || !tasks_.empty(); });
        if (tasks_.empty())
            return false;
        task = tasks_.front();
        tasks_.pop_front();
        return true;
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<int> tasks_;
    bool closed_ = false;
};

}  // namespace

int main()
{
    WorkQueue queue;
    std::mutex total_mutex;
    long total = 0;
    int done = 0;

    std::vector<std::thread> workers;
    for (int i = 0; i < 3; i++) {
        workers.emplace_back([&] {
            int task;
            while (queue.pop(task)) {
                std::lock_guard<std::mutex> guard(total_mutex);
                total += static_cast<long>(task) * task;
                done++;
            }
        });
    }
    for (int task = 1; task <= 20; task++)
        queue.push(task);
    queue.close();
    for (auto &worker : workers)
        worker.join();

    std::printf("%d tasks, sum of squares %ld\n", done, total);
    return total == 2870 ? 0 : 1;
}
