/* Sync sends from N native threads through ONE C++ producer: librocketmq (the library
 * inside PyPI's ``rocketmq``) driven from C, with no Python in the load generator.
 *
 * ``benchmarks/cpp_producer.py`` drives the same library through its Python binding:
 * each send there is a ctypes call from a Python thread, and the threads take turns on
 * the GIL, which costs the generator far more CPU per send than the library itself.
 * RocketMQ's Java producer has no such lock; this driver is the closer stand-in.
 *
 * Same arguments and output as cpp_producer.py: after --warmup seconds it prints
 * ``start``, after --seconds more ``end``, then one JSON line (messages sent in the
 * window, errors, the window's send latencies' p50/p99 in ms). Built by
 * broker_produce.py (``--cpp-driver native``) with the machine's C compiler against
 * the wheel's librocketmq.so; the library's C API is declared here (its headers are not
 * in the wheel).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int sendStatus;
    char msgId[256];
    long long offset;
} CSendResult;

void *CreateProducer(const char *group);
int SetProducerNameServerAddress(void *producer, const char *addr);
int SetProducerSendMsgTimeout(void *producer, int timeout);
int StartProducer(void *producer);
int ShutdownProducer(void *producer);
int DestroyProducer(void *producer);
void *CreateMessage(const char *topic);
int DestroyMessage(void *msg);
int SetMessageTags(void *msg, const char *tags);
int SetByteMessageBody(void *msg, const char *body, int len);
int SendMessageSync(void *producer, void *msg, CSendResult *result);
const char *GetLatestErrorMessage(void);

static void *producer;
static const char *topic;
static char *body;
static int body_len;
/* written by the main thread, read by the senders */
static atomic_int stop;
static _Atomic double window_start = INFINITY, window_end = INFINITY;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_errors[3][300];
static int n_first_errors;

typedef struct {
    double *lat;
    size_t n, cap;
    long errors;
} Sender;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *sender(void *arg) {
    Sender *me = arg;
    void *msg = CreateMessage(topic);
    SetMessageTags(msg, "bench");
    SetByteMessageBody(msg, body, body_len);
    CSendResult res;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        double t0 = now();
        if (SendMessageSync(producer, msg, &res) != 0) {
            me->errors++;
            pthread_mutex_lock(&error_lock);
            if (n_first_errors < 3) {
                const char *e = GetLatestErrorMessage();
                snprintf(first_errors[n_first_errors++], 300, "%s", e ? e : "send failed");
            }
            pthread_mutex_unlock(&error_lock);
            continue;
        }
        double t1 = now();
        if (window_start <= t0 && t1 <= window_end) {
            if (me->n == me->cap) {
                me->cap = me->cap ? 2 * me->cap : 65536;
                me->lat = realloc(me->lat, me->cap * sizeof(double));
                if (!me->lat) abort();
            }
            me->lat[me->n++] = t1 - t0;
        }
    }
    DestroyMessage(msg);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *sorted, size_t n, double q) {
    if (!n) return 0.0;
    long rank = (long)ceil(q / 100 * n) - 1;
    return sorted[rank < 0 ? 0 : rank];
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* JSON string contents: the error text with quotes, backslashes and controls escaped. */
static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    const char *namesrv = NULL;
    int threads = 4;
    double warmup = 1.0, seconds = 4.0;
    body_len = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--namesrv")) namesrv = argv[i + 1];
        else if (!strcmp(argv[i], "--topic")) topic = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--body")) body_len = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
    }
    if (!namesrv || !topic || threads < 1 || body_len < 1) {
        fprintf(stderr, "usage: %s --namesrv HOST:PORT --topic T [--threads N] [--body B] [--warmup S] [--seconds S]\n", argv[0]);
        return 2;
    }
    body = malloc(body_len);
    memset(body, 'b', body_len);
    char group[64];
    snprintf(group, sizeof group, "BenchCppNative%d", threads);
    producer = CreateProducer(group);
    SetProducerNameServerAddress(producer, namesrv);
    SetProducerSendMsgTimeout(producer, 10000);
    if (StartProducer(producer) != 0) {
        fprintf(stderr, "producer did not start: %s\n", GetLatestErrorMessage());
        return 1;
    }
    /* fetch the route once: threads racing for it fail their first sends */
    void *first = CreateMessage(topic);
    SetByteMessageBody(first, body, body_len);
    CSendResult res;
    if (SendMessageSync(producer, first, &res) != 0) {
        fprintf(stderr, "first send failed: %s\n", GetLatestErrorMessage());
        return 1;
    }
    DestroyMessage(first);
    Sender *senders = calloc(threads, sizeof(Sender));
    pthread_t *tids = calloc(threads, sizeof(pthread_t));
    for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, sender, &senders[i]);
    sleep_s(warmup);
    window_start = now();
    printf("start\n");
    fflush(stdout);
    sleep_s(seconds);
    window_end = now();
    printf("end\n");
    fflush(stdout);
    atomic_store(&stop, 1);
    size_t total = 0;
    long errors = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        total += senders[i].n;
        errors += senders[i].errors;
    }
    double *all = malloc((total ? total : 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(all + k, senders[i].lat, senders[i].n * sizeof(double));
        k += senders[i].n;
    }
    qsort(all, total, sizeof(double), cmp_double);
    printf("{\"count\": %zu, \"errors\": %ld, \"first_errors\": [", total, errors);
    for (int i = 0; i < n_first_errors; i++) {
        if (i) printf(", ");
        print_json_string(first_errors[i]);
    }
    printf("], \"seconds\": %.6f, \"p50_ms\": %.4f, \"p99_ms\": %.4f}\n", window_end - window_start,
           1000 * percentile(all, total, 50), 1000 * percentile(all, total, 99));
    fflush(stdout);
    ShutdownProducer(producer);
    DestroyProducer(producer);
    return 0;
}
