import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * Sync-send throughput of a DefaultMQProducer signing every request with
 * AclClientRPCHook, for benchmarks/broker_produce.py --part acl --generator java: the
 * same client work and pace against a broker with ACL and one without (which ignores
 * the signature), so the broker's CPU per message is what differs.
 * Usage: AclProducerBench NAMESRV_ADDR TOPIC THREADS SECONDS SIZE ACCESS_KEY SECRET_KEY
 * -Dbench.warmup=S (default 1) warm-up seconds not counted.
 * Prints: RESULT threads= size= sent= msgs_per_s= errors=
 */
public class AclProducerBench {
    public static void main(String[] a) throws Exception {
        if (a.length < 7) {
            System.err.println("usage: AclProducerBench NAMESRV_ADDR TOPIC THREADS SECONDS SIZE ACCESS_KEY SECRET_KEY");
            System.exit(2);
        }
        final String topic = a[1];
        final int threads = Integer.parseInt(a[2]);
        final int seconds = Integer.parseInt(a[3]);
        final int size = Integer.parseInt(a[4]);
        final double warmup = Double.parseDouble(System.getProperty("bench.warmup", "1"));
        DefaultMQProducer producer = new DefaultMQProducer("acl_bench_producer",
            new AclClientRPCHook(new SessionCredentials(a[5], a[6])));
        producer.setNamesrvAddr(a[0]);
        producer.setInstanceName("acl_bench_" + ProcessHandle.current().pid());
        producer.start();
        final byte[] body = new byte[size];
        for (int i = 0; i < size; i++) body[i] = (byte) ('a' + (i % 26));
        final long tMeasure = System.nanoTime() + (long) (warmup * 1e9);
        final long tEnd = tMeasure + seconds * 1_000_000_000L;
        final LongAdder sent = new LongAdder();
        final LongAdder errors = new LongAdder();
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> {
                while (System.nanoTime() < tEnd) {
                    try {
                        SendResult r = producer.send(new Message(topic, "TagA", body));
                        long t1 = System.nanoTime();
                        if (r.getSendStatus() != SendStatus.SEND_OK) errors.increment();
                        else if (t1 >= tMeasure && t1 < tEnd) sent.increment();
                    } catch (Exception e) {
                        errors.increment();
                        if (errors.sum() <= 3) System.err.println("send error: " + e);
                    }
                }
            }, "producer-" + i);
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        producer.shutdown();
        long n = sent.sum();
        System.out.println("RESULT threads=" + threads + " size=" + size + " sent=" + n
            + " msgs_per_s=" + Math.round(n / (double) seconds) + " errors=" + errors.sum());
        System.out.flush();
        System.exit(0);
    }
}
