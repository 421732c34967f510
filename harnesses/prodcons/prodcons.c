/*
 * Bounded-buffer producer/consumer with one mutex and two condition
 * variables: 2 producers put 40 numbers each into a 4-slot ring, 2 consumers
 * take them out.  When both producers are done, main puts one end marker per
 * consumer.  Correct under every schedule; the checksum does not depend on
 * which consumer took which number.
 */
#include <pthread.h>
#include <stdio.h>

#define SLOTS 4
#define PRODUCERS 2
#define CONSUMERS 2
#define ITEMS 40   /* per producer */
#define END (-1)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int ring[SLOTS];
static int head, count;

static void put(int value)
{
    pthread_mutex_lock(&lock);
    while (count == SLOTS)
        pthread_cond_wait(&not_full, &lock);
    ring[(head + count) % SLOTS] = value;
    count++;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&lock);
}

static int take(void)
{
    pthread_mutex_lock(&lock);
    while (count == 0)
        pthread_cond_wait(&not_empty, &lock);
    int value = ring[head];
    head = (head + 1) % SLOTS;
    count--;
    pthread_cond_signal(&not_full);
    pthread_mutex_unlock(&lock);
    return value;
}

static void *producer(void *arg)
{
    int base = (int)(long)arg * ITEMS;
    for (int i = 1; i <= ITEMS; i++)
        put(base + i);
    return NULL;
}

struct tally {
    long sum;
    long squares;
    int taken;
};

static void *consumer(void *arg)
{
    struct tally *t = arg;
    for (;;) {
        int value = take();
        if (value == END)
            return NULL;
        t->sum += value;
        t->squares += (long)value * value;
        t->taken++;
    }
}

int main(void)
{
    pthread_t producers[PRODUCERS], consumers[CONSUMERS];
    struct tally tallies[CONSUMERS] = {{0, 0, 0}};
    for (int i = 0; i < CONSUMERS; i++)
        pthread_create(&consumers[i], NULL, consumer, &tallies[i]);
    for (long i = 0; i < PRODUCERS; i++)
        pthread_create(&producers[i], NULL, producer, (void *)i);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(producers[i], NULL);
    for (int i = 0; i < CONSUMERS; i++)
        put(END);
    long sum = 0, squares = 0;
    int taken = 0;
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_join(consumers[i], NULL);
        sum += tallies[i].sum;
        squares += tallies[i].squares;
        taken += tallies[i].taken;
    }
    printf("consumed %d items, checksum %ld/%ld\n", taken, sum, squares);
    return taken == PRODUCERS * ITEMS ? 0 : 1;
}
