import java.util.concurrent.atomic.LongAdder;

/**
 * The benchmarks' timed send loop (TxnTool bench, AclProducerBench): THREADS threads
 * call one send until the window ends; a send that succeeds inside the measured window
 * (after the warm-up, -Dbench.warmup seconds, 1 by default) counts, one that fails or
 * throws is an error (the first three printed on stderr).
 */
final class SendLoop {
    /** One send: whether it succeeded. */
    interface Send {
        boolean send() throws Exception;
    }

    final long sent;
    final long errors;

    private SendLoop(long sent, long errors) {
        this.sent = sent;
        this.errors = errors;
    }

    static SendLoop run(int threads, int seconds, String name, Send send) throws InterruptedException {
        double warmup = Double.parseDouble(System.getProperty("bench.warmup", "1"));
        final long tMeasure = System.nanoTime() + (long) (warmup * 1e9);
        final long tEnd = tMeasure + seconds * 1_000_000_000L;
        final LongAdder sent = new LongAdder();
        final LongAdder errors = new LongAdder();
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> {
                while (System.nanoTime() < tEnd) {
                    try {
                        boolean ok = send.send();
                        long t1 = System.nanoTime();
                        if (!ok) errors.increment();
                        else if (t1 >= tMeasure && t1 < tEnd) sent.increment();
                    } catch (Exception e) {
                        errors.increment();
                        if (errors.sum() <= 3) System.err.println("send error: " + e);
                    }
                }
            }, name + "-" + i);
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        return new SendLoop(sent.sum(), errors.sum());
    }

    /** A body of SIZE bytes, a..z repeated. */
    static byte[] body(int size) {
        byte[] body = new byte[size];
        for (int i = 0; i < size; i++) body[i] = (byte) ('a' + (i % 26));
        return body;
    }
}
