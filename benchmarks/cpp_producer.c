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
 *
 * --mode picks what the threads send (client_produce.py's workloads):
 *   sync    SendMessageSync, each thread waiting for its answer (the default);
 *   batch   SendBatchMessage of --batch messages, waiting (counts messages);
 *   oneway  SendMessageOneway, no answers (latency: the call);
 *   async   SendMessageAsync from one thread, --inflight sends outstanding. The
 *           callbacks carry no context, so a send's latency is taken from the oldest
 *           outstanding start: exact when answers come back in order, as on one
 *           connection to a broker that answers in order.
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
int SendMessageOneway(void *producer, void *msg);
void *CreateBatchMessage(void);
int AddMessage(void *batch, void *msg);
int DestroyBatchMessage(void *batch);
int SendBatchMessage(void *producer, void *batch, CSendResult *result);
typedef struct {
    int error;
    int line;
    char file[512];
    char msg[512];
    char type[512];
} CMQException;
typedef void (*CSendSuccessCallback)(CSendResult *result);
typedef void (*CSendExceptionCallback)(CMQException e);
int SendMessageAsync(void *producer, void *msg, CSendSuccessCallback ok, CSendExceptionCallback err);
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

enum { SYNC, BATCH, ONEWAY, ASYNC };
static int mode = SYNC;
static int batch_size = 32;
static int inflight = 256;

typedef struct {
    double *lat;
    size_t n, cap;
    long count;  /* messages sent in the window */
    long errors;
} Sender;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *new_message(void) {
    void *msg = CreateMessage(topic);
    SetMessageTags(msg, "bench");
    SetByteMessageBody(msg, body, body_len);
    return msg;
}

static void note_error(Sender *me, const char *what) {
    me->errors++;
    pthread_mutex_lock(&error_lock);
    if (n_first_errors < 3) {
        const char *e = what ? what : GetLatestErrorMessage();
        snprintf(first_errors[n_first_errors++], 300, "%s", e ? e : "send failed");
    }
    pthread_mutex_unlock(&error_lock);
}

/* A call that started at t0 and ended at t1, carrying ``messages``: counted (and its
   latency kept) when it lies inside the timed window. */
static void note_sent(Sender *me, double t0, double t1, long messages) {
    if (!(window_start <= t0 && t1 <= window_end)) return;
    me->count += messages;
    if (me->n == me->cap) {
        me->cap = me->cap ? 2 * me->cap : 65536;
        me->lat = realloc(me->lat, me->cap * sizeof(double));
        if (!me->lat) abort();
    }
    me->lat[me->n++] = t1 - t0;
}

static void *sender(void *arg) {
    Sender *me = arg;
    void *msg = new_message();
    void *batch = NULL;
    CSendResult res;
    if (mode == BATCH) {
        batch = CreateBatchMessage();
        for (int i = 0; i < batch_size; i++) {
            void *m = new_message();
            AddMessage(batch, m);  /* the batch keeps a copy */
            DestroyMessage(m);
        }
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        double t0 = now();
        int rc = mode == BATCH ? SendBatchMessage(producer, batch, &res)
               : mode == ONEWAY ? SendMessageOneway(producer, msg)
               : SendMessageSync(producer, msg, &res);
        if (rc != 0) {
            note_error(me, NULL);
            continue;
        }
        note_sent(me, t0, now(), mode == BATCH ? batch_size : 1);
    }
    if (batch) DestroyBatchMessage(batch);
    DestroyMessage(msg);
    return NULL;
}

/* async: the starts of the outstanding sends, oldest first (a ring of --inflight) */
static pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t async_room = PTHREAD_COND_INITIALIZER;
static double *async_starts;
static int async_head, async_outstanding;
static Sender *async_sender;

static void async_done(int ok, const char *what) {
    double t1 = now();
    pthread_mutex_lock(&async_lock);
    double t0 = async_starts[async_head];
    async_head = (async_head + 1) % inflight;
    async_outstanding--;
    if (ok) note_sent(async_sender, t0, t1, 1);
    else note_error(async_sender, what);
    pthread_cond_signal(&async_room);
    pthread_mutex_unlock(&async_lock);
}

static void on_async_ok(CSendResult *result) {
    (void)result;
    async_done(1, NULL);
}

static void on_async_error(CMQException e) {
    async_done(0, e.msg);
}

static void *async_loop(void *arg) {
    Sender *me = arg;
    void *msg = new_message();
    async_sender = me;
    async_starts = calloc(inflight, sizeof(double));
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        pthread_mutex_lock(&async_lock);
        while (async_outstanding == inflight) pthread_cond_wait(&async_room, &async_lock);
        async_starts[(async_head + async_outstanding) % inflight] = now();
        async_outstanding++;
        pthread_mutex_unlock(&async_lock);
        if (SendMessageAsync(producer, msg, on_async_ok, on_async_error) != 0) {
            pthread_mutex_lock(&async_lock);  /* not sent: take its start back */
            async_outstanding--;
            note_error(me, NULL);
            pthread_mutex_unlock(&async_lock);
        }
    }
    struct timespec limit;  /* the last answers, for at most 20 s */
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 20;
    pthread_mutex_lock(&async_lock);
    while (async_outstanding > 0 && pthread_cond_timedwait(&async_room, &async_lock, &limit) == 0) {}
    pthread_mutex_unlock(&async_lock);
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
        else if (!strcmp(argv[i], "--batch")) batch_size = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--inflight")) inflight = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode")) {
            const char *m = argv[i + 1];
            mode = !strcmp(m, "sync") ? SYNC : !strcmp(m, "batch") ? BATCH : !strcmp(m, "oneway") ? ONEWAY
                 : !strcmp(m, "async") ? ASYNC : -1;
        }
        else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
    }
    if (!namesrv || !topic || threads < 1 || body_len < 1 || mode < 0 || batch_size < 1 || inflight < 1) {
        fprintf(stderr, "usage: %s --namesrv HOST:PORT --topic T [--threads N] [--body B] [--warmup S] [--seconds S]"
                        " [--mode sync|batch|oneway|async] [--batch N] [--inflight N]\n", argv[0]);
        return 2;
    }
    if (mode == ASYNC) threads = 1;  /* one thread keeps --inflight sends outstanding */
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
    for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, mode == ASYNC ? async_loop : sender, &senders[i]);
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
    long count = 0, errors = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        total += senders[i].n;
        count += senders[i].count;
        errors += senders[i].errors;
    }
    double *all = malloc((total ? total : 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(all + k, senders[i].lat, senders[i].n * sizeof(double));
        k += senders[i].n;
    }
    qsort(all, total, sizeof(double), cmp_double);
    printf("{\"count\": %ld, \"errors\": %ld, \"first_errors\": [", count, errors);
    for (int i = 0; i < n_first_errors; i++) {
        if (i) printf(", ");
        print_json_string(first_errors[i]);
    }
    printf("], \"seconds\": %.6f, \"p50_ms\": %.4f, \"p99_ms\": %.4f}\n", window_end - window_start,
           1000 * percentile(all, total, 50), 1000 * percentile(all, total, 99));
    fflush(stdout);
    /* No ShutdownProducer: with oneway sends still in its threads the library's teardown
       can abort the process ("terminate called after throwing ... thread_interrupted");
       the figures are out, the broker sees the connections close. */
    _exit(0);
}
