import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
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
        DefaultMQProducer producer = new DefaultMQProducer("acl_bench_producer",
            new AclClientRPCHook(new SessionCredentials(a[5], a[6])));
        producer.setNamesrvAddr(a[0]);
        producer.setInstanceName("acl_bench_" + ProcessHandle.current().pid());
        producer.start();
        final byte[] body = SendLoop.body(size);
        SendLoop loop = SendLoop.run(threads, seconds, "producer",
            () -> producer.send(new Message(topic, "TagA", body)).getSendStatus() == SendStatus.SEND_OK);
        producer.shutdown();
        System.out.println("RESULT threads=" + threads + " size=" + size + " sent=" + loop.sent
            + " msgs_per_s=" + Math.round(loop.sent / (double) seconds) + " errors=" + loop.errors);
        System.out.flush();
        System.exit(0);
    }
}
