#include <gtest/gtest.h>
#include <mutex>
#include <thread>

struct Account { std::mutex m; long balance = 100; };

void transfer(Account &from, Account &to, long amount) {
    std::lock_guard<std::mutex> a(from.m);
    std::lock_guard<std::mutex> b(to.m);
    from.balance -= amount;
    to.balance += amount;
}

TEST(Accounts, TransferMovesTheAmount) {
    Account a, b;
    transfer(a, b, 10);
    EXPECT_EQ(a.balance, 90);
    EXPECT_EQ(b.balance, 110);
}

TEST(Accounts, TransfersBothWaysKeepTheTotal) {
    Account a, b;
    std::thread t([&] { transfer(a, b, 10); });
    transfer(b, a, 20);
    t.join();
    EXPECT_EQ(a.balance + b.balance, 200);
}

TEST(Arithmetic, Adds) { EXPECT_EQ(2 + 2, 4); }
